//! `flashkit blockdev mount IMAGE MOUNTPOINT`: the FTL on a NAND image as one disk-image
//! file under FUSE (`fuse::serve`), so programs that work on disk images use it:
//! `mkfs.fat MOUNTPOINT/disk.img`, `mcopy -i MOUNTPOINT/disk.img`, `fio`, `dd`. The
//! command runs until the mount is unmounted (`fusermount3 -u MOUNTPOINT`) or it gets
//! SIGINT/SIGTERM, then flushes the device and prints what the requests did.

use std::path::PathBuf;

use anyhow::{anyhow, bail, Result};
use clap::{Args, Subcommand};
use ftl::BlockDevice;
use serde::Serialize;

use sim::trace::{Format, Recorder, TraceWriter, WriteSummary};

use super::fms::{mount, Access, MountArgs};
use crate::output::{self, Fields, ReportArgs};

#[derive(Subcommand, Debug)]
pub enum BlockdevCmd {
    /// Mount the FTL on a NAND image (the Flash Memory Server, `flashkit fms format`) as a
    /// directory holding one file the size of the device, until `fusermount3 -u
    /// MOUNTPOINT` or Ctrl-C. Needs FUSE (root, or fusermount3 from the fuse3 package).
    Mount(MountCmdArgs),
}

#[derive(Args, Debug)]
pub struct MountCmdArgs {
    /// NAND image file holding an FMS.
    pub image: PathBuf,
    /// Empty directory to mount on.
    pub mountpoint: PathBuf,
    /// Name of the disk-image file inside MOUNTPOINT.
    #[arg(long, default_value = "disk.img")]
    pub name: String,
    /// Serve the image read-only (the image file is never written; what the mount
    /// repairs stays in RAM).
    #[arg(long)]
    pub read_only: bool,
    /// Record every request the device gets (reads, writes, trims, time-stamped) as a
    /// block trace, for `flashkit sim --workload trace:FILE` (gzip when FILE ends in .gz).
    #[arg(long, value_name = "FILE")]
    pub record: Option<PathBuf>,
    /// Format of --record: msr, spc, blkparse, disksim, fio (blkparse and fio keep trims).
    #[arg(
        long,
        value_name = "FORMAT",
        default_value = "blkparse",
        requires = "record"
    )]
    pub record_format: String,
    #[command(flatten)]
    pub mount: MountArgs,
    #[command(flatten)]
    pub report: ReportArgs,
}

/// Serve `dev` at the mount point, telling on stderr where and how to unmount.
fn serve<D: BlockDevice>(
    dev: D,
    a: &MountCmdArgs,
    opts: fuse::Options,
    size: u64,
) -> Result<fuse::Served<D>> {
    let file = a.mountpoint.join(&a.name);
    fuse::serve(dev, &a.mountpoint, opts, |_| {
        eprintln!(
            "flashkit: serving {} as {} ({}); unmount with `fusermount3 -u {}` or Ctrl-C",
            a.image.display(),
            file.display(),
            output::bytes(size),
            shell_word(&a.mountpoint)
        );
    })
    .map_err(|e| {
        let hint = if e.kind() == std::io::ErrorKind::NotFound
            || e.kind() == std::io::ErrorKind::PermissionDenied
        {
            " (FUSE needs /dev/fuse and root, or fusermount3 from the fuse3 package)"
        } else {
            ""
        };
        anyhow!("{}: FUSE mount: {e}{hint}", a.mountpoint.display())
    })
}

/// A path as one shell word, for a command the user is told to run: quoted when it holds
/// anything but plain characters (QA stop 27: `fusermount3 -u my mnt` split it in two).
fn shell_word(p: &std::path::Path) -> String {
    let s = p.display().to_string();
    let plain = |c: char| c.is_ascii_alphanumeric() || "/._-+,:@%=".contains(c);
    if !s.is_empty() && s.chars().all(plain) {
        s
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

pub fn run(cmd: BlockdevCmd) -> Result<()> {
    match cmd {
        BlockdevCmd::Mount(a) => mount_cmd(a),
    }
}

/// `flashkit blockdev mount --json`, printed after unmount.
#[derive(Serialize, Debug)]
pub struct MountReport {
    pub image: String,
    pub mountpoint: String,
    pub file: String,
    pub size_bytes: u64,
    pub read_only: bool,
    #[serde(flatten)]
    pub requests: fuse::Counts,
    /// The first request that failed, if any (`write at byte N: …`).
    pub first_error: Option<String>,
    /// `--record`: the trace file and what was written to it.
    pub record: Option<String>,
    pub recorded: Option<WriteSummary>,
    /// What the FTL did meanwhile.
    pub user_writes: u64,
    pub blocks_copied: u64,
    pub erasures: u64,
    /// Blocks moved because their reads corrected as many bits as the scrub threshold
    /// (`fms check --repair`'s `scrubbed`): at a flush, and at the end of a writable mount.
    pub scrubbed: u64,
    pub device_time_s: f64,
    /// Blocks the mount found lost that the requests wrote or discarded, by logical block
    /// number: lost no longer (`fms info`'s `lost_blocks`; a `mkfs` over the file ends
    /// them all, as any write must).
    pub lost_blocks_resolved: Vec<u32>,
    /// Segments still held back from reuse for lost blocks or rescued trims (`fms info`'s
    /// `held_segments`), by number.
    pub held_segments: Vec<u32>,
}

fn mount_cmd(a: MountCmdArgs) -> Result<()> {
    // (QA stop 27: `--csv` over the `--record` trace replaced it, exit 0.)
    let mut outputs = vec![(a.image.as_path(), "image being served")];
    if let Some(r) = a.record.as_deref() {
        outputs.push((r, "--record trace"));
    }
    super::common::refuse_csv_over(&a.report, &outputs)?;
    if a.name.is_empty() || a.name.contains('/') || a.name == "." || a.name == ".." {
        bail!("--name: {:?} is not a file name", a.name);
    }
    // ENOTCONN (107): a FUSE mount whose server is gone (killed) is still there.
    let mount_point_err = |e: std::io::Error| {
        let hint = if e.raw_os_error() == Some(107) {
            format!(
                " (a mount left by a server that is gone: run `fusermount3 -u {}`)",
                shell_word(&a.mountpoint)
            )
        } else {
            String::new()
        };
        anyhow!("{}: mount point: {e}{hint}", a.mountpoint.display())
    };
    let md = std::fs::metadata(&a.mountpoint).map_err(mount_point_err)?;
    if !md.is_dir() {
        bail!("{}: mount point is not a directory", a.mountpoint.display());
    }
    // A mount would hide what the directory holds (or another mount on it).
    let mut entries = std::fs::read_dir(&a.mountpoint).map_err(mount_point_err)?;
    if entries.next().is_some() {
        bail!(
            "{}: mount point is not empty (a mount would hide what it holds)",
            a.mountpoint.display()
        );
    }
    let access = if a.read_only {
        a.mount.refuse_writer_options_where_only_read()?;
        Access::Inspect
    } else {
        Access::Write
    };
    let fmt = Format::parse(&a.record_format).map_err(|e| anyhow!("--record-format: {e}"))?;
    if let Some(p) = &a.record {
        if sim::trace::same_file(p, &a.image) {
            bail!("--record: {} is the image being served", p.display());
        }
    }
    // Files the command writes may not be inside the mount point: a trace would be
    // written under the mount, hidden; a CSV, written after the unmount, would make the
    // directory not empty for the next mount (QA stop 27).
    let outputs = [
        ("--record", a.record.as_deref()),
        ("--csv", a.report.csv.as_deref()),
    ];
    for (flag, p) in outputs {
        let Some(p) = p else { continue };
        let dir = p.parent().filter(|d| !d.as_os_str().is_empty());
        if sim::trace::same_file(dir.unwrap_or(std::path::Path::new(".")), &a.mountpoint) {
            bail!("{flag}: {} is inside the mount point", p.display());
        }
    }
    let fms = mount(&a.image, &a.mount, access)?;
    let lost_before = fms.lost_blocks();
    let (w0, c0, e0, t0, s0) = (
        fms.stats().user_writes,
        fms.stats().blocks_copied,
        fms.nand().counters().erases,
        fms.nand().clock_ps(),
        fms.stats().scrubbed,
    );
    let opts = fuse::Options {
        name: a.name.clone(),
        read_only: a.read_only,
        source: format!("flashkit:{}", a.image.display()),
        io_size: fms.layout().block_size,
    };
    let size = fms.sectors() * ftl::SECTOR as u64;
    let file = a.mountpoint.join(&a.name);
    let (fms, counts, first_error, recorded) = match &a.record {
        Some(path) => {
            let gz = path.extension().is_some_and(|e| e == "gz");
            let w = TraceWriter::create(path, fmt, gz).map_err(|e| anyhow!("--record: {e}"))?;
            let s = serve(Recorder::new(fms, w), &a, opts, size)?;
            let (fms, r) = s.dev.finish();
            (fms, s.counts, s.first_error, Some(r))
        }
        None => {
            let s = serve(fms, &a, opts, size)?;
            (s.dev, s.counts, s.first_error, None)
        }
    };
    // A writable mount's last flush, after the server: blocks whose reads corrected as
    // many bits as the scrub threshold move now, however few writes came (the server
    // flushes only after writes: QA stop 27 found a read-mostly mount never scrubbing).
    let mut fms = fms;
    let flush_error = if a.read_only { None } else { fms.flush().err() };
    let (recorded, record_error) = match recorded {
        Some(Ok(w)) => (Some(w), None),
        Some(Err(e)) => (None, Some(e)),
        None => (None, None),
    };
    let r = MountReport {
        image: a.image.display().to_string(),
        mountpoint: a.mountpoint.display().to_string(),
        file: file.display().to_string(),
        size_bytes: size,
        read_only: a.read_only,
        requests: counts,
        first_error,
        record: a.record.as_ref().map(|p| p.display().to_string()),
        recorded,
        user_writes: fms.stats().user_writes - w0,
        blocks_copied: fms.stats().blocks_copied - c0,
        erasures: fms.nand().counters().erases - e0,
        scrubbed: fms.stats().scrubbed - s0,
        // In picoseconds, then seconds: a difference of two seconds figures prints
        // rounding noise (0.12300000000000001).
        device_time_s: fms.nand().clock_ps().saturating_sub(t0) as f64 / 1e12,
        lost_blocks_resolved: super::fms::lost_resolved(&a.image, &lost_before, &fms),
        held_segments: fms.held_segments(),
    };
    if let Some(p) = &a.report.csv {
        output::write_csv(p, std::slice::from_ref(&r))?;
    }
    if a.report.json {
        output::print_json(&r)?;
    } else {
        let c = &r.requests;
        let mut f = Fields::new();
        f.add("image", r.image.clone())
            .add("served as", format!("{} ({})", r.file, output::bytes(size)))
            .add(
                "requests",
                format!(
                    "{} reads ({}), {} writes ({}), {} discards ({}), {} flushes",
                    output::count(c.reads),
                    output::bytes(c.read_bytes),
                    output::count(c.writes),
                    output::bytes(c.write_bytes),
                    output::count(c.discards),
                    output::bytes(c.discard_bytes),
                    output::count(c.flushes)
                ),
            )
            .add(
                "FMS",
                format!(
                    "{} block writes, {} copied by the cleaner, {} erasures, {} scrubbed, {:.3} s device time",
                    output::count(r.user_writes),
                    output::count(r.blocks_copied),
                    output::count(r.erasures),
                    output::count(r.scrubbed),
                    r.device_time_s
                ),
            )
            .add("errors", output::count(c.errors));
        if !r.held_segments.is_empty() {
            f.add(
                "held segments",
                format!(
                    "{} (kept from reuse for lost blocks or rescued trims: see `fms info`)",
                    output::block_list(&r.held_segments, 10)
                ),
            );
        }
        if let (Some(p), Some(w)) = (&r.record, &r.recorded) {
            f.add(
                "recorded",
                format!(
                    "{} requests to {p} ({}){}",
                    output::count(w.records),
                    w.format,
                    if w.dropped_trims > 0 {
                        format!(", {} trims left out", output::count(w.dropped_trims))
                    } else {
                        String::new()
                    }
                ),
            );
        }
        f.print()?;
    }
    if let Some(e) = record_error {
        bail!("--record: {e}");
    }
    if let Some(e) = flush_error {
        bail!("{}: flush at unmount: {e}", a.image.display());
    }
    if let Some(e) = &r.first_error {
        // Out of space with segments held: they may be why (`fms write`'s hint).
        let hint = if e.contains("full") {
            super::fms::held_segments_hint(&r.held_segments)
        } else {
            String::new()
        };
        bail!(
            "{}: {} request(s) failed; first: {e}{hint}",
            a.image.display(),
            r.requests.errors
        );
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::shell_word;
    use std::path::Path;

    #[test]
    fn paths_are_quoted_as_one_shell_word() {
        assert_eq!(shell_word(Path::new("/tmp/mnt")), "/tmp/mnt");
        assert_eq!(shell_word(Path::new("my mnt")), "'my mnt'");
        assert_eq!(shell_word(Path::new("it's")), "'it'\\''s'");
    }
}
