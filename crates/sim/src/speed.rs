//! How fast the simulator runs: user block writes per second of wall-clock time in
//! steady-state cleaning, for `flashkit bench` and the criterion bench `sim_speed`. The
//! FMS is prepared exactly as a `sim` run prepares it (format, sequential pre-fill), then a
//! warm-up of the workload brings the cleaner to steady state, and only the writes after it
//! are timed. Requests are issued back to back (closed loop); the device model's clock
//! still advances, but simulated time does not enter the measurement.

use std::time::Instant;

use anyhow::{bail, Result};
use ftl::fms::Fms;
use ftl::BlockDevice;
use serde::Serialize;

use crate::driver::{prepare, Prepared, SimConfig, MAX_ARRIVAL_PS};
use crate::workload::{Workload, WorkloadSpec};

/// A prepared FMS in steady state and the workload that continues from there.
pub struct Steady {
    pub fms: Fms,
    pub workload: Workload,
    /// Sectors per request.
    pub sectors: u32,
}

impl Steady {
    /// Issue `n` workload writes. The device's picosecond clock is checked every 4096
    /// writes (far less device time than the clock's range): a run past the half of it
    /// that `sim` allows a run (see [`MAX_ARRIVAL_PS`]) is an error, not a clock that wraps
    /// and feeds the age-based policies nonsense.
    pub fn write(&mut self, n: u64) -> Result<()> {
        let mut left = n;
        while left > 0 {
            let k = left.min(4096);
            for _ in 0..k {
                let Some(unit) = self.workload.next() else {
                    bail!("the workload ended");
                };
                self.fms
                    .write(unit * self.sectors as u64, self.sectors, None)?;
            }
            left -= k;
            let busy = self.fms.nand().clock_ps() as f64;
            if busy >= MAX_ARRIVAL_PS {
                bail!(
                    "the device has been busy {:.0} s (format, pre-fill and warm-up included), past the simulator's clock range ({:.0} s of device time); write less (--written, --warm)",
                    busy / 1e12,
                    MAX_ARRIVAL_PS / 1e12
                );
            }
        }
        Ok(())
    }
}

/// Prepare `cfg` and run `warm_bytes` of its workload, untimed, leaving `timed` requests
/// of it to issue. The workload is the one a `sim` run writing the warm-up and the timed
/// requests would issue: a `phases:` workload is split over both together (the timed part
/// used to be its first phase only, whatever the phases).
pub fn steady(cfg: &SimConfig, warm_bytes: u64, timed: u64) -> Result<Steady> {
    if matches!(cfg.workload, WorkloadSpec::Trace(_)) {
        bail!("workload: bench runs synthetic workloads only (a trace is finite)");
    }
    let unit = cfg.unit_bytes as u64;
    if unit == 0 || !warm_bytes.is_multiple_of(unit) {
        bail!(
            "warm: {warm_bytes} bytes is not a whole number of {}-byte requests (--unit)",
            cfg.unit_bytes
        );
    }
    let total = (warm_bytes / unit).saturating_add(timed);
    // One request per phase at least, over the warm-up and the timed requests together,
    // as they split the phases (QA stop 27: the timed ones alone were counted).
    cfg.workload
        .check_requests(total)
        .map_err(|e| anyhow::anyhow!("warm + written: {e}"))?;
    let Prepared { fms, units, .. } = prepare(cfg)?;
    let workload = Workload::new(&cfg.workload, units, total, cfg.seed);
    let mut s = Steady {
        fms,
        workload,
        sectors: cfg.unit_bytes / 512,
    };
    s.write(warm_bytes / unit)?;
    Ok(s)
}

/// One configuration's speed (JSON keys of `flashkit bench --json`).
#[derive(Clone, Debug, Serialize)]
pub struct SpeedResult {
    pub device: String,
    pub workload: String,
    pub policy: String,
    pub redistribution: String,
    pub regions: u8,
    pub block_size: u32,
    pub fill: f64,
    pub unit_bytes: u32,
    pub warm_bytes: u64,
    pub written_bytes: u64,
    pub repeat: u32,
    /// Per repetition: FMS block writes the timed part made for the user, and in all
    /// (user writes plus cleaning copies). The simulation is deterministic, so every
    /// repetition makes the same ones.
    pub user_writes: u64,
    pub flash_writes: u64,
    pub write_amplification: f64,
    /// Per repetition: device operations (page and spare reads, programs, erases), each
    /// checked against the flash rules, in all and per user write.
    pub device_ops: u64,
    pub device_ops_per_user_write: f64,
    /// Wall-clock seconds of the timed part: the fastest repetition and the median.
    pub best_s: f64,
    pub median_s: f64,
    /// From the fastest repetition.
    pub user_writes_per_s: f64,
    pub flash_writes_per_s: f64,
    pub ns_per_user_write: f64,
    /// Wall-clock nanoseconds per device operation, the FMS's own work included.
    pub ns_per_device_op: f64,
    /// How the binary was compiled ([`build_info`]): the figures above depend on it.
    pub build: String,
}

/// How this build was compiled, as `flashkit bench` reports it: `opt-level N`, then `PGO`
/// (profile-guided: `-C profile-use`, as scripts/pgo-build.sh builds), `PGO-instrumented`
/// (`-C profile-generate`: slow), `target-cpu=CPU`, and any other rustc flag verbatim
/// (the path of a profile left out); `debug assertions` when they are on.
pub fn build_info() -> String {
    describe_build(env!("FLASHKIT_OPT_LEVEL"), env!("FLASHKIT_RUSTFLAGS"))
        + if cfg!(debug_assertions) {
            ", debug assertions"
        } else {
            ""
        }
}

fn describe_build(opt: &str, flags: &str) -> String {
    let mut parts = vec![format!("opt-level {opt}")];
    let mut it = flags.split(' ').filter(|f| !f.is_empty());
    while let Some(f) = it.next() {
        // `-C x=y` and `-Cx=y` alike.
        let f = if f == "-C" {
            match it.next() {
                Some(v) => format!("-C{v}"),
                None => break,
            }
        } else {
            f.to_string()
        };
        let part = match f.strip_prefix("-C") {
            Some(v) if v.starts_with("profile-use") => "PGO".to_string(),
            Some(v) if v.starts_with("profile-generate") => "PGO-instrumented".to_string(),
            Some(v) if v.starts_with("target-cpu=") => v.to_string(),
            Some(v) if v.starts_with("llvm-args=-pgo-warn") => continue,
            _ => f,
        };
        parts.push(part);
    }
    parts.join(", ")
}

/// Time `written_bytes` of `cfg`'s workload after `warm_bytes`, `repeat` times (each on a
/// freshly prepared FMS).
pub fn measure(cfg: &SimConfig, warm_bytes: u64, repeat: u32) -> Result<SpeedResult> {
    if repeat == 0 {
        bail!("repeat: must be at least 1");
    }
    let requests = crate::driver::synthetic_request_count(cfg)?;
    let mut times = Vec::new();
    let mut counts = (0, 0, 0);
    for _ in 0..repeat {
        let mut s = steady(cfg, warm_bytes, requests)?;
        let s0 = s.fms.stats().clone();
        let ops0 = s.fms.nand().counters().operations();
        let t = Instant::now();
        s.write(requests)?;
        times.push(t.elapsed().as_secs_f64());
        let s1 = s.fms.stats();
        let user = s1.user_writes - s0.user_writes;
        let ops = s.fms.nand().counters().operations() - ops0;
        counts = (user, user + s1.blocks_copied - s0.blocks_copied, ops);
    }
    times.sort_by(f64::total_cmp);
    let best = times[0].max(1e-9);
    let (user, flash, ops) = counts;
    let per = |n: u64, d: u64| if d > 0 { n as f64 / d as f64 } else { 0.0 };
    Ok(SpeedResult {
        device: cfg.device.name.clone(),
        workload: cfg.workload.label(),
        policy: cfg.fms.policy.name().into(),
        redistribution: cfg.fms.redistribution_name().into(),
        regions: cfg.fms.regions,
        block_size: cfg.fms.block_size,
        fill: cfg.fill,
        unit_bytes: cfg.unit_bytes,
        warm_bytes,
        written_bytes: cfg.written_bytes,
        repeat,
        user_writes: user,
        flash_writes: flash,
        write_amplification: per(flash, user),
        device_ops: ops,
        device_ops_per_user_write: per(ops, user),
        best_s: best,
        // (The mean of the middle two of an even count: QA stop 27 found the slower of two.)
        median_s: match times.len() % 2 {
            1 => times[times.len() / 2],
            _ => (times[times.len() / 2 - 1] + times[times.len() / 2]) / 2.0,
        },
        user_writes_per_s: user as f64 / best,
        flash_writes_per_s: flash as f64 / best,
        ns_per_user_write: per(1, user) * best * 1e9,
        ns_per_device_op: per(1, ops) * best * 1e9,
        build: build_info(),
    })
}

#[cfg(test)]
mod tests {
    use super::describe_build;

    #[test]
    fn build_flags_are_described() {
        assert_eq!(describe_build("3", ""), "opt-level 3");
        assert_eq!(
            describe_build(
                "3",
                "-Ctarget-cpu=native -Cprofile-use=/x/merged.profdata -Cllvm-args=-pgo-warn-missing-function=false"
            ),
            "opt-level 3, target-cpu=native, PGO"
        );
        assert_eq!(
            describe_build("2", "-C profile-generate=/tmp/raw --cfg foo"),
            "opt-level 2, PGO-instrumented, --cfg, foo"
        );
        assert_eq!(describe_build("3", "-C"), "opt-level 3");
    }
}
