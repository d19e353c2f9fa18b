//! Whether simulation runs fit in this machine's RAM, checked before any starts.
//!
//! A run holds the device model (the payload-less store: every spare area, a program count
//! and a kept-page index entry per page, the pages the FMS writes real bytes to), the FMS
//! tables twice at its peak (the run's, then the remount that measures the mount time and
//! its temporary table of every block's newest copy: docs/results.md, "At scale"), and the
//! workload's hot/cold order table. With Linux overcommit, runs that together exceed the
//! memory are not refused by the allocator but killed later; so `sweep::run_configs`
//! (behind `flashkit sim`, `flashkit sweep` and `flashkit reproduce`) estimates each run's
//! peak from its configuration ([`estimate`], which allocates nothing), runs fewer at a
//! time when the largest ones would not fit together ([`plan`]), and refuses a run that
//! cannot fit alone; `flashkit bench`, one run at a time, refuses the same way before its
//! first ([`plan_for`] with [`Kind::Bench`]: no remount). The memory available is
//! [`nand::available_ram`]: `MemAvailable`, or less under a container's or a systemd
//! slice's memory limit (cgroup v2 or v1).
//!
//! Traces stream in constant memory and are not counted, except that a `compact` map keeps
//! an entry per distinct block of the trace, which is not known before it is read.

use anyhow::{Context, Result};
use ftl::fms::Fms;
use nand::PayloadlessStore;

use crate::driver::SimConfig;
use crate::workload::Workload;

/// A run's estimated peak RAM, by part (bytes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RunRam {
    /// The device model: the payload-less store and the device's per-block flags.
    pub device: u64,
    /// The FMS tables once ([`Fms::estimate_ram`]); the peak holds them twice.
    pub tables: u64,
    /// The workload's tables (hot/cold orders).
    pub workload: u64,
}

/// What a run holds at its peak besides the device model and the workload's table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A simulation run (`sim`, `sweep`, `reproduce`): the FMS tables twice, the run's and
    /// the remount's that measures the mount time.
    Sim,
    /// A `bench` repetition: the FMS tables once (it does not remount, and each
    /// repetition's FMS is dropped before the next one is prepared).
    Bench,
}

impl RunRam {
    /// The run's peak: the device, the tables twice (run and remount), the workload.
    pub fn peak(&self) -> u64 {
        self.peak_of(Kind::Sim)
    }

    /// The peak of a run of `kind`.
    pub fn peak_of(&self, kind: Kind) -> u64 {
        let copies = match kind {
            Kind::Sim => 2,
            Kind::Bench => 1,
        };
        self.device
            .saturating_add(self.tables.saturating_mul(copies))
            .saturating_add(self.workload)
    }

    /// `device model D, FMS tables 2 × T (the run's and the remount's), ...`.
    fn parts(&self, kind: Kind) -> String {
        let mut s = match kind {
            Kind::Sim => format!(
                "device model {}, FMS tables 2 × {} (the run's and the remount's)",
                self.device, self.tables
            ),
            Kind::Bench => format!("device model {}, FMS tables {}", self.device, self.tables),
        };
        if self.workload > 0 {
            s += &format!(", workload table {}", self.workload);
        }
        s
    }
}

/// A run's peak RAM, from its configuration alone (nothing is allocated, so a device too
/// large for any machine gets a number). Errors are the configuration's (bad geometry,
/// block size, no room for data).
pub fn estimate(cfg: &SimConfig) -> Result<RunRam> {
    let geo = &cfg.device.geometry;
    let fms = Fms::estimate_ram(geo, &cfg.fms).context("fms")?;
    // The device keeps a bad flag and (pages programmed in order) a write pointer a block.
    let flags = geo.blocks as u64 * (1 + 4);
    let device = PayloadlessStore::ram_bytes_for(geo, fms.kept_pages).saturating_add(flags);
    let workload = match cfg.workload {
        crate::workload::WorkloadSpec::Trace(_) => 0,
        ref w => Workload::table_bytes(w, crate::driver::workload_space(cfg).2),
    };
    Ok(RunRam {
        device,
        tables: fms.tables,
        workload,
    })
}

/// The configuration a refusal names: device, its size, block size.
pub fn label(cfg: &SimConfig) -> String {
    let g = &cfg.device.geometry;
    format!(
        "device {} ({} blocks of {} bytes), block size {}",
        cfg.device.name,
        g.blocks,
        g.block_bytes(),
        cfg.fms.block_size
    )
}

/// How many runs go at a time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Runs in parallel (at least 1).
    pub runs: usize,
    /// One line for the user when RAM made `runs` smaller than asked.
    pub note: Option<String>,
}

/// Choose how many of `cfgs` run in parallel, at most `want`, so that any `runs` of them
/// fit together in `available` bytes (the largest peaks are summed); refuse, naming the
/// configuration and its parts, when one run alone does not fit. Without a figure for the
/// available memory (`None`), `want` runs as before. A configuration whose estimate fails
/// is left to fail when it runs, with the run's own error.
pub fn plan(cfgs: &[&SimConfig], want: usize, available: Option<u64>) -> Result<Plan> {
    plan_for(Kind::Sim, cfgs, want, available)
}

/// [`plan`] for runs of `kind` (a `bench` repetition holds the FMS tables once).
pub fn plan_for(
    kind: Kind,
    cfgs: &[&SimConfig],
    want: usize,
    available: Option<u64>,
) -> Result<Plan> {
    let want = want.max(1);
    let Some(avail) = available else {
        return Ok(Plan {
            runs: want,
            note: None,
        });
    };
    let mut peaks = Vec::with_capacity(cfgs.len());
    for cfg in cfgs {
        let Ok(ram) = estimate(cfg) else { continue };
        let peak = ram.peak_of(kind);
        if peak > avail {
            anyhow::bail!(
                "{}: a run needs about {peak} bytes of RAM ({}), more than the {avail} bytes available; use a smaller device (--blocks), larger blocks (--block-size) or free some memory",
                label(cfg),
                ram.parts(kind)
            );
        }
        peaks.push(peak);
    }
    peaks.sort_unstable_by(|a, b| b.cmp(a));
    let want = want.min(cfgs.len().max(1));
    let mut runs = 0;
    let mut sum = 0u64;
    for &p in peaks.iter().take(want) {
        sum = sum.saturating_add(p);
        if sum > avail {
            break;
        }
        runs += 1;
    }
    // Estimates that failed count as fitting.
    if peaks.len() < want && runs == peaks.len() {
        runs = want;
    }
    let runs = runs.max(1);
    let note = (runs < want).then(|| {
        format!(
            "running {runs} job(s) at a time instead of {want}: the largest need up to {} bytes of RAM each and {avail} bytes are available",
            peaks[0]
        )
    });
    Ok(Plan { runs, note })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(device: &str, blocks: u32, block_size: u32) -> SimConfig {
        let mut c = SimConfig::flagship();
        c.device = nand::DeviceSpec::preset(device).unwrap();
        c.device.geometry.blocks = blocks;
        c.fms.block_size = block_size;
        c.fill = 0.7;
        c
    }

    /// The estimate against a real run's parts: the store and the FMS tables after the
    /// pre-fill (exact, apart from the index segment's pages not written yet), the
    /// workload's table.
    #[test]
    fn estimate_tracks_a_prepared_run() {
        for c in [
            SimConfig::flagship(),
            cfg("nandsim-256m", 256, 1024),
            cfg("slc-large-1g", 64, 4096),
        ] {
            let ram = estimate(&c).unwrap();
            let p = crate::driver::prepare(&c).unwrap();
            // Besides the store, the device's flags; of the index segment the store has
            // kept only the pages written so far, and summary pages only of the segments
            // that filled (the estimate counts every segment's).
            let g = &c.device.geometry;
            let store = p.fms.nand().store().ram_bytes() + g.blocks as u64 * 5;
            let index = g.pages_per_block as u64 * (g.page_size as u64 + 8);
            let lay = p.fms.layout();
            let summaries = g.blocks as u64 * lay.summary_pages() as u64 * (g.page_size as u64 + 8);
            assert!(
                ram.device >= store && ram.device <= store + index + summaries,
                "{}: device {} for a store of {store}",
                c.device.name,
                ram.device
            );
            assert_eq!(ram.tables, p.fms.ram_bytes(), "{}", c.device.name);
            assert_eq!(ram.workload, p.units * 4, "{}", c.device.name);
            assert_eq!(ram.peak(), ram.device + 2 * ram.tables + ram.workload);
        }
    }

    #[test]
    fn plans_fewer_runs_when_ram_is_short_and_refuses_what_cannot_fit() {
        let small = SimConfig::flagship();
        let big = cfg("nandsim-256m", 2048, 1024);
        let (ps, pb) = (
            estimate(&small).unwrap().peak(),
            estimate(&big).unwrap().peak(),
        );
        assert!(pb > ps);
        let jobs = [&small, &big, &small, &big];
        // Unknown memory: as asked.
        assert_eq!(
            plan(&jobs, 4, None).unwrap(),
            Plan {
                runs: 4,
                note: None
            }
        );
        // Everything fits: as asked, never more than the jobs.
        let all = 2 * pb + 2 * ps;
        assert_eq!(
            plan(&jobs, 8, Some(all)).unwrap(),
            Plan {
                runs: 4,
                note: None
            }
        );
        // The two largest fit together, not three jobs: two at a time, said in one line.
        let p = plan(&jobs, 4, Some(2 * pb + ps - 1)).unwrap();
        assert_eq!(p.runs, 2);
        let note = p.note.unwrap();
        assert!(
            note.starts_with("running 2 job(s) at a time instead of 4"),
            "{note}"
        );
        assert!(!note.contains('\n'));
        // One at a time when only the largest fits.
        assert_eq!(plan(&jobs, 4, Some(pb)).unwrap().runs, 1);
        // The largest does not fit alone: refused, naming it and its parts.
        let e = plan(&jobs, 4, Some(pb - 1)).unwrap_err().to_string();
        assert!(
            e.starts_with("device nandsim-256m (2048 blocks of 16384 bytes), block size 1024: a run needs about"),
            "{e}"
        );
        assert!(
            e.contains(&format!("{pb} bytes")) && e.contains("FMS tables 2 ×"),
            "{e}"
        );
        assert!(!e.contains('\n'));
        // Small jobs alone: all of them.
        assert_eq!(plan(&[&small, &small], 2, Some(pb)).unwrap().runs, 2);
        // A configuration the estimate cannot size is left to its run's own error.
        let mut bad = small.clone();
        bad.fms.block_size = 3000;
        assert_eq!(
            plan(&[&bad, &small], 2, Some(ps)).unwrap(),
            Plan {
                runs: 2,
                note: None
            }
        );
        assert_eq!(plan(&[&bad], 1, Some(1)).unwrap().runs, 1);
    }

    /// A device the FMS's sizing refuses (more physical block numbers than a u32 holds)
    /// cannot be estimated, so the RAM check leaves it to its run; the run's `check`
    /// must then refuse it before the device model is allocated (`--blocks 100000000
    /// --block-size 512` on the Intel card allocated 16 GB of device and was killed by
    /// the kernel before the FMS said no), in one line naming the field.
    #[test]
    fn what_the_fms_cannot_size_is_refused_before_the_device() {
        let c = cfg("intel-series2plus-24m", 30_000_000, 512);
        assert!(estimate(&c).is_err());
        let e = format!("{:#}", crate::driver::check(&c).unwrap_err());
        assert!(
            e.starts_with("fms: ") && e.contains("too large for the FMS: blocks: "),
            "{e}"
        );
        assert!(!e.contains('\n'), "{e}");
    }

    /// A bench repetition holds the tables once: what a simulation run (tables twice)
    /// cannot fit, a bench may; below its own peak it is refused, naming its parts.
    #[test]
    fn bench_runs_count_the_tables_once() {
        let c = cfg("nandsim-256m", 2048, 1024);
        let ram = estimate(&c).unwrap();
        let bench = ram.peak_of(Kind::Bench);
        assert_eq!(bench, ram.device + ram.tables + ram.workload);
        assert_eq!(ram.peak_of(Kind::Sim), ram.peak());
        assert!(bench < ram.peak());
        assert!(plan(&[&c], 1, Some(bench)).is_err());
        assert_eq!(
            plan_for(Kind::Bench, &[&c], 1, Some(bench)).unwrap().runs,
            1
        );
        let e = plan_for(Kind::Bench, &[&c], 1, Some(bench - 1))
            .unwrap_err()
            .to_string();
        assert!(e.contains(&format!("needs about {bench} bytes")), "{e}");
        assert!(e.contains(&format!("FMS tables {}", ram.tables)), "{e}");
        assert!(!e.contains("remount") && !e.contains('\n'), "{e}");
    }

    #[test]
    fn a_device_no_machine_holds_gets_a_number() {
        let c = cfg("chang-kuo-16g", u32::MAX / 64, 512);
        let ram = estimate(&c).unwrap();
        assert!(ram.peak() > 64 << 30, "{ram:?}");
        let e = plan(&[&c], 1, Some(64 << 30)).unwrap_err().to_string();
        assert!(e.contains("chang-kuo-16g"), "{e}");
    }
}
