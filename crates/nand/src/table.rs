//! Tables sized by a device's geometry. Geometries come from users (device overrides) and
//! from image headers, so a table too large for this machine must be an error, not an
//! allocation abort.

fn too_large(what: &str, bytes: u128) -> String {
    format!("{what} would take {bytes} bytes of RAM, more than this machine can allocate")
}

/// `n` copies of `fill`, or a one-line error naming `what` and the bytes it needs when
/// this machine cannot allocate them.
pub fn table<T: Clone>(n: u64, fill: T, what: &str) -> Result<Vec<T>, String> {
    let bytes = n as u128 * std::mem::size_of::<T>() as u128;
    let n = usize::try_from(n).map_err(|_| too_large(what, bytes))?;
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| too_large(what, bytes))?;
    v.resize(n, fill);
    Ok(v)
}

/// [`table`] with the device model's error: a configuration error.
pub(crate) fn config_table<T: Clone>(n: u64, fill: T, what: &str) -> crate::Result<Vec<T>> {
    table(n, fill, what).map_err(crate::NandError::config)
}

/// Whether this machine could allocate `bytes` bytes now (reserved, never touched, and
/// released at once); the error names `what`.
pub fn check_fits(bytes: u64, what: &str) -> Result<(), String> {
    let mut v: Vec<u8> = Vec::new();
    usize::try_from(bytes)
        .ok()
        .and_then(|n| v.try_reserve_exact(n).ok())
        .ok_or_else(|| too_large(what, bytes as u128))
}

/// Bytes of memory available for new allocations now: `MemAvailable` of /proc/meminfo, or
/// less when a control group (a container, a systemd slice) limits this process tighter
/// ([`crate::cgroup::headroom`]: under cgroup v2 or v1, the smallest room left under the
/// memory limit of the process's cgroup or any ancestor). `MemAvailable` inside a container
/// is the host's, and a run the check let through for it would be killed by the OOM killer
/// at the limit instead of refused. `None` where neither says.
pub fn available_ram() -> Option<u64> {
    let meminfo = std::fs::read_to_string("/proc/meminfo").ok();
    combine(
        meminfo.as_deref().and_then(mem_available),
        crate::cgroup::headroom(),
    )
}

/// `MemAvailable` in bytes from the contents of /proc/meminfo.
fn mem_available(text: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    kib.checked_mul(1024)
}

/// The smaller of the machine's figure and the cgroup's, whichever exist.
fn combine(machine: Option<u64>, cgroup: Option<u64>) -> Option<u64> {
    machine.into_iter().chain(cgroup).min()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn impossible_tables_are_errors() {
        assert_eq!(table(3, 7u8, "x").unwrap(), vec![7, 7, 7]);
        let e = table(1 << 60, 0u64, "the spare areas").unwrap_err();
        assert!(
            e.starts_with("the spare areas would take 9223372036854775808 bytes"),
            "{e}"
        );
        assert!(check_fits(1 << 20, "a small table").is_ok());
        assert!(check_fits(1 << 62, "a huge table").is_err());
    }

    #[test]
    fn available_ram_is_the_smaller_of_the_machine_and_the_cgroup() {
        let meminfo =
            "MemTotal:       32000000 kB\nMemFree:  100 kB\nMemAvailable:   24129988 kB\n";
        assert_eq!(mem_available(meminfo), Some(24_129_988 * 1024));
        assert_eq!(mem_available("MemTotal: 1 kB\n"), None);
        assert_eq!(mem_available("MemAvailable: lots kB\n"), None);
        let host = Some(24 << 30);
        // A container limited to 1 GiB on a 24 GiB host: the container's room.
        assert_eq!(combine(host, Some(1 << 30)), Some(1 << 30));
        // A limit above what the host has left: the host's.
        assert_eq!(combine(host, Some(64 << 30)), host);
        assert_eq!(combine(host, None), host);
        assert_eq!(combine(None, Some(5)), Some(5));
        assert_eq!(combine(None, None), None);
    }
}
