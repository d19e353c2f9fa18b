//! The memory a control group (a container, a systemd slice) leaves this process.
//!
//! Inside a cgroup with a memory limit, `MemAvailable` of /proc/meminfo is still the
//! host's: a run that fits the host but not the limit passes a check made on it, and is
//! then killed by the OOM killer instead of refused. [`headroom`] is the smallest room left
//! under any limit on this process's cgroup or one of its ancestors (a limit is often set
//! on a parent, e.g. a systemd slice or the container's own cgroup above a sub-group):
//!
//! * cgroup v2 (the `0::/path` line of /proc/self/cgroup): `memory.max` (`max` = no
//!   limit) less `memory.current`;
//! * cgroup v1 (the line naming the `memory` controller): `memory.limit_in_bytes` (a
//!   value of 2^60 or more is the kernel's "unlimited") less `memory.usage_in_bytes`.
//!
//! The usage counts the page cache charged to the group, which the kernel reclaims before
//! it kills anything; so the inactive file pages of `memory.stat` (`inactive_file`, in v1
//! `total_inactive_file`) are taken off it, as container tools do for a "working set"
//! (otherwise a container that has just read a large trace would refuse runs that fit).
//! Each level's directory is found through /proc/self/mountinfo (the hierarchy's mount
//! point and the part of the tree it shows: a container usually sees its own cgroup as the
//! root of the mount), falling back to /sys/fs/cgroup and /sys/fs/cgroup/memory.
//!
//! A file that is missing, unreadable or not a number is no limit from that source, never
//! an error: without any, the machine's own figure stands. The parsing is pure (functions
//! of the files' contents); only [`headroom`] reads files.

use std::path::{Path, PathBuf};

/// The "unlimited" of cgroup v1 is a page-rounded `i64::MAX`; anything this large is no
/// limit.
const V1_UNLIMITED: u64 = 1 << 60;

/// A cgroup hierarchy's version: which files hold the limit, the usage and the cache.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    V1,
    V2,
}

impl Version {
    fn files(self) -> [&'static str; 3] {
        match self {
            Version::V2 => ["memory.max", "memory.current", "memory.stat"],
            Version::V1 => [
                "memory.limit_in_bytes",
                "memory.usage_in_bytes",
                "memory.stat",
            ],
        }
    }
}

/// The process's cgroup path in each hierarchy that can limit memory, from the contents of
/// /proc/self/cgroup: `(v2, v1 memory controller)`.
pub fn parse_proc_cgroup(text: &str) -> (Option<String>, Option<String>) {
    let (mut v2, mut v1) = (None, None);
    for line in text.lines() {
        let mut f = line.splitn(3, ':');
        let (Some(id), Some(controllers), Some(path)) = (f.next(), f.next(), f.next()) else {
            continue;
        };
        if !path.starts_with('/') {
            continue;
        }
        if id == "0" && controllers.is_empty() {
            v2.get_or_insert_with(|| path.to_string());
        } else if controllers.split(',').any(|c| c == "memory") {
            v1.get_or_insert_with(|| path.to_string());
        }
    }
    (v2, v1)
}

/// Where a hierarchy is mounted: the cgroup shown at the mount's root, and the mount point.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mount {
    pub root: String,
    pub point: PathBuf,
}

/// The mounts of the v2 hierarchy and of v1's memory controller, from the contents of
/// /proc/self/mountinfo (`ID PARENT MAJ:MIN ROOT POINT OPTIONS [TAGS] - TYPE SOURCE SUPER`).
pub fn parse_mountinfo(text: &str) -> (Option<Mount>, Option<Mount>) {
    let (mut v2, mut v1) = (None, None);
    for line in text.lines() {
        let Some((left, right)) = line.split_once(" - ") else {
            continue;
        };
        let l: Vec<&str> = left.split(' ').collect();
        let r: Vec<&str> = right.split(' ').collect();
        let (Some(root), Some(point), Some(&fstype)) = (l.get(3), l.get(4), r.first()) else {
            continue;
        };
        let mount = || Mount {
            root: unescape(root),
            point: PathBuf::from(unescape(point)),
        };
        match fstype {
            "cgroup2" => {
                v2.get_or_insert_with(mount);
            }
            "cgroup"
                if r.get(2)
                    .is_some_and(|o| o.split(',').any(|o| o == "memory")) =>
            {
                v1.get_or_insert_with(mount);
            }
            _ => {}
        }
    }
    (v2, v1)
}

/// mountinfo writes a space, tab, newline or backslash in a path as `\ooo` (octal).
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let code = b.get(i + 1..i + 4).and_then(|o| {
            let o = std::str::from_utf8(o).ok()?;
            u8::from_str_radix(o, 8).ok()
        });
        match code {
            Some(c) if b[i] == b'\\' => {
                out.push(c);
                i += 4;
            }
            _ => {
                out.push(b[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The directories of `path`'s cgroup and of each ancestor, the cgroup first, under the
/// hierarchy mounted as `mount`. Levels above the mount's root are not visible and not
/// listed; a path outside the mount's root (another namespace's view) is looked up from
/// the mount point, where a missing directory is simply no limit.
pub fn levels(mount: &Mount, path: &str) -> Vec<PathBuf> {
    let root = mount.root.trim_end_matches('/');
    let rel = match path.strip_prefix(root) {
        Some(rest) if rest.is_empty() || rest.starts_with('/') => rest,
        _ => path,
    };
    let mut parts: Vec<&str> = rel.split('/').filter(|p| !p.is_empty()).collect();
    let mut out = Vec::with_capacity(parts.len() + 1);
    loop {
        let mut dir = mount.point.clone();
        dir.extend(&parts);
        out.push(dir);
        if parts.pop().is_none() {
            break;
        }
    }
    out
}

/// A memory limit in bytes from `memory.max` (v2) or `memory.limit_in_bytes` (v1); `None`
/// when there is none (`max`, v1's unlimited) or the text is not a number.
pub fn parse_limit(version: Version, text: &str) -> Option<u64> {
    let limit: u64 = text.trim().parse().ok()?;
    (version == Version::V2 || limit < V1_UNLIMITED).then_some(limit)
}

/// The page cache the kernel reclaims before it kills: the inactive file pages of
/// `memory.stat` (v1's hierarchical `total_inactive_file` when present).
pub fn parse_inactive_file(version: Version, stat: &str) -> Option<u64> {
    let field = |key: &str| {
        stat.lines().find_map(|l| {
            let (k, v) = l.split_once(' ')?;
            (k == key).then(|| v.trim().parse::<u64>().ok()).flatten()
        })
    };
    match version {
        Version::V1 => field("total_inactive_file").or_else(|| field("inactive_file")),
        Version::V2 => field("inactive_file"),
    }
}

/// The room left under one cgroup's limit, from its files' contents (`None` for a file that
/// could not be read): the limit less the usage that is not reclaimable cache (an unknown
/// usage counts as none: the limit itself still bounds the room). `None` when the group has
/// no limit.
pub fn level_headroom(
    version: Version,
    limit: Option<&str>,
    usage: Option<&str>,
    stat: Option<&str>,
) -> Option<u64> {
    let limit = parse_limit(version, limit?)?;
    let usage = usage
        .and_then(|u| u.trim().parse::<u64>().ok())
        .unwrap_or(0);
    let cache = stat
        .and_then(|s| parse_inactive_file(version, s))
        .unwrap_or(0);
    Some(limit.saturating_sub(usage.saturating_sub(cache)))
}

/// The smallest room over the levels of a hierarchy (each level's limit, usage and stat
/// files' contents); `None` when no level has a limit.
pub fn hierarchy_headroom<'a>(
    version: Version,
    levels: impl IntoIterator<Item = [Option<&'a str>; 3]>,
) -> Option<u64> {
    levels
        .into_iter()
        .filter_map(|[l, u, s]| level_headroom(version, l, u, s))
        .min()
}

/// The smallest room under any memory limit on this process's cgroups (v2 and v1) and
/// their ancestors, read from /proc and the cgroup file systems; `None` when nothing
/// limits this process or the system does not say.
pub fn headroom() -> Option<u64> {
    let read = |p: &Path| std::fs::read_to_string(p).ok();
    let (v2_path, v1_path) = parse_proc_cgroup(&read(Path::new("/proc/self/cgroup"))?);
    let (v2_mount, v1_mount) = read(Path::new("/proc/self/mountinfo"))
        .map(|t| parse_mountinfo(&t))
        .unwrap_or_default();
    let default = |point: &str| Mount {
        root: "/".into(),
        point: point.into(),
    };
    let one = |version: Version, path: Option<String>, mount: Mount| {
        let path = path?;
        let contents: Vec<[Option<String>; 3]> = levels(&mount, &path)
            .iter()
            .map(|dir| version.files().map(|f| read(&dir.join(f))))
            .collect();
        hierarchy_headroom(
            version,
            contents.iter().map(|c| c.each_ref().map(|f| f.as_deref())),
        )
    };
    let v2 = one(
        Version::V2,
        v2_path,
        v2_mount.unwrap_or_else(|| default("/sys/fs/cgroup")),
    );
    let v1 = one(
        Version::V1,
        v1_path,
        v1_mount.unwrap_or_else(|| default("/sys/fs/cgroup/memory")),
    );
    v2.into_iter().chain(v1).min()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_cgroup_paths() {
        assert_eq!(
            parse_proc_cgroup("0::/user.slice/user-1000.slice/session-2.scope\n"),
            (
                Some("/user.slice/user-1000.slice/session-2.scope".into()),
                None
            )
        );
        // Hybrid: v1 controllers (memory among others on one line) and the v2 line.
        let hybrid = "12:pids:/docker/abc\n4:cpuset,memory:/docker/abc\n1:name=systemd:/x\n0::/\n";
        assert_eq!(
            parse_proc_cgroup(hybrid),
            (Some("/".into()), Some("/docker/abc".into()))
        );
        // A controller named like memory is not memory; garbage is skipped.
        assert_eq!(
            parse_proc_cgroup("3:memory_x:/a\nnonsense\n5:memory\n"),
            (None, None)
        );
        assert_eq!(parse_proc_cgroup(""), (None, None));
    }

    #[test]
    fn finds_the_mounts() {
        let text = "\
31 23 0:28 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
35 31 0:32 /docker/abc /sys/fs/cgroup/memory rw,relatime shared:9 - cgroup cgroup rw,memory
36 31 0:33 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu,cpuacct
41 31 0:38 / /sys/fs/cgroup/my\\040unified rw,relatime - cgroup2 cgroup2 rw
garbage line
";
        let (v2, v1) = parse_mountinfo(text);
        assert_eq!(
            v2,
            Some(Mount {
                root: "/".into(),
                point: "/sys/fs/cgroup/my unified".into()
            })
        );
        assert_eq!(
            v1,
            Some(Mount {
                root: "/docker/abc".into(),
                point: "/sys/fs/cgroup/memory".into()
            })
        );
        assert_eq!(parse_mountinfo("no cgroups here\n"), (None, None));
    }

    #[test]
    fn lists_the_cgroup_and_its_ancestors_under_the_mount() {
        let m = |root: &str| Mount {
            root: root.into(),
            point: "/sys/fs/cgroup".into(),
        };
        let p = |s: &str| PathBuf::from(s);
        assert_eq!(
            levels(&m("/"), "/a/b"),
            vec![
                p("/sys/fs/cgroup/a/b"),
                p("/sys/fs/cgroup/a"),
                p("/sys/fs/cgroup")
            ]
        );
        assert_eq!(levels(&m("/"), "/"), vec![p("/sys/fs/cgroup")]);
        // The container sees its own cgroup as the mount's root: above it is not visible.
        assert_eq!(
            levels(&m("/docker/abc"), "/docker/abc/sub"),
            vec![p("/sys/fs/cgroup/sub"), p("/sys/fs/cgroup")]
        );
        assert_eq!(
            levels(&m("/docker/abc/"), "/docker/abc"),
            vec![p("/sys/fs/cgroup")]
        );
        // Not under the root (a prefix of a name is not a parent): looked up from the
        // mount point.
        assert_eq!(
            levels(&m("/docker/ab"), "/docker/abc"),
            vec![
                p("/sys/fs/cgroup/docker/abc"),
                p("/sys/fs/cgroup/docker"),
                p("/sys/fs/cgroup")
            ]
        );
    }

    #[test]
    fn parses_limits() {
        use Version::*;
        assert_eq!(parse_limit(V2, "max\n"), None);
        assert_eq!(parse_limit(V2, "1073741824\n"), Some(1 << 30));
        assert_eq!(parse_limit(V1, "9223372036854771712\n"), None);
        assert_eq!(parse_limit(V1, "1152921504606846976"), None);
        assert_eq!(parse_limit(V1, "536870912\n"), Some(512 << 20));
        for garbage in ["", "-1", "12 MB", "lots", "18446744073709551616"] {
            assert_eq!(parse_limit(V2, garbage), None, "{garbage:?}");
            assert_eq!(parse_limit(V1, garbage), None, "{garbage:?}");
        }
    }

    #[test]
    fn the_headroom_is_the_limit_less_what_cannot_be_reclaimed() {
        use Version::*;
        let stat2 = "anon 100\nfile 700\nactive_file 300\ninactive_file 400\n";
        // 1000 limit, 800 used of which 400 reclaimable cache: 600 left.
        assert_eq!(
            level_headroom(V2, Some("1000\n"), Some("800\n"), Some(stat2)),
            Some(600)
        );
        // No stat: the usage counts whole.
        assert_eq!(
            level_headroom(V2, Some("1000"), Some("800"), None),
            Some(200)
        );
        // Over the limit: nothing left, not a wrap.
        assert_eq!(
            level_headroom(V2, Some("1000"), Some("5000"), None),
            Some(0)
        );
        // Usage unreadable: the limit still bounds the room.
        assert_eq!(level_headroom(V2, Some("1000"), None, None), Some(1000));
        assert_eq!(
            level_headroom(V2, Some("1000"), Some("junk"), None),
            Some(1000)
        );
        // No limit (or none readable): none from this level.
        assert_eq!(level_headroom(V2, Some("max"), Some("800"), None), None);
        assert_eq!(level_headroom(V2, None, Some("800"), None), None);
        assert_eq!(level_headroom(V2, Some("garbage"), Some("800"), None), None);
        // v1: the hierarchical cache figure first.
        let stat1 = "cache 900\ninactive_file 100\ntotal_inactive_file 300\n";
        assert_eq!(
            level_headroom(V1, Some("1000"), Some("900"), Some(stat1)),
            Some(400)
        );
        assert_eq!(
            level_headroom(V1, Some("1000"), Some("900"), Some("inactive_file 100\n")),
            Some(200)
        );
        assert_eq!(
            level_headroom(V1, Some("9223372036854771712"), Some("900"), Some(stat1)),
            None
        );
        // v2's stat has no total_ keys; a v1-only key is not read there.
        assert_eq!(
            level_headroom(
                V2,
                Some("1000"),
                Some("900"),
                Some("total_inactive_file 300\n")
            ),
            Some(100)
        );
    }

    #[test]
    fn nested_limits_take_the_smallest_room() {
        use Version::*;
        // Leaf without a limit, a parent slice with 2 GiB (1.5 used), the root without.
        let levels = [
            [Some("max"), Some("100"), None],
            [Some("2147483648"), Some("1610612736"), None],
            [None, None, None],
        ];
        assert_eq!(hierarchy_headroom(V2, levels), Some(512 << 20));
        // A tighter leaf wins over the parent.
        let levels = [
            [Some("1000"), Some("100"), None],
            [Some("2147483648"), Some("1610612736"), None],
        ];
        assert_eq!(hierarchy_headroom(V2, levels), Some(900));
        // Nothing limited anywhere, or nothing readable: no figure.
        assert_eq!(
            hierarchy_headroom(V2, [[Some("max"), Some("1"), None], [None, None, None]]),
            None
        );
        assert_eq!(
            hierarchy_headroom(
                V1,
                [[Some("9223372036854771712"), Some("4051496960"), None]]
            ),
            None
        );
        assert_eq!(hierarchy_headroom(V2, []), None);
    }

    /// On whatever machine runs the tests, reading the real files never panics.
    #[test]
    fn reading_this_machine_never_fails() {
        let _ = headroom();
    }
}
