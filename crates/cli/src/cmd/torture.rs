//! `flashkit torture`: cut power at every program/erase (or a seeded sample) of a workload
//! on a small device derived from the chosen one, remount, and check that nothing
//! acknowledged as durable was lost, optionally with program/erase failures injected at
//! seeded operations (`--failures`). The work is done by [`sim::torture`]; this file
//! parses arguments and prints the report. Any violation is a non-zero exit.

use std::io::{IsTerminal, Write};
use std::sync::Mutex;
use std::time::Instant;

use anyhow::{anyhow, bail, Result};
use clap::{Args, ValueEnum};
use ftl::fms::select::Policy;
use sim::torture::{self, Cuts, TortureConfig, TortureReport};

use super::common::{parse_size, DeviceArgs};
use crate::output::{self, Fields, ReportArgs};

/// The system under test.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum Target {
    /// The Flash Memory Server (block device over raw flash).
    Fms,
    /// The FMS's format over a used medium (the one the workload leaves): cuts at every
    /// program and erase of `fms format`; after each, the medium must mount as the new
    /// format reading zeros, or as the old one holding only what it held, or be refused,
    /// and formatting again must work and keep the erase counts.
    FmsFormat,
}

#[derive(Args, Debug)]
pub struct TortureArgs {
    /// What to torture.
    #[arg(long, value_enum, default_value = "fms")]
    pub target: Target,
    #[command(flatten)]
    pub device: DeviceArgs,
    /// Cut points: `every` program and erase of the workload, a seeded sample of N, or
    /// `at:K`, only the K-th (to replay the cut a violation names: "cut K/N").
    #[arg(long, default_value = "every", value_name = "every|N|at:K")]
    pub cuts: String,
    /// Seed of the workload, the sample of cut points and the torn-operation outcomes.
    #[arg(long, default_value_t = 1, value_name = "S")]
    pub seed: u64,
    /// Workload operations after the prefill (writes, trims, reads, flushes).
    #[arg(long, default_value_t = 300, value_name = "N")]
    pub ops: usize,
    /// FMS logical block size (default: 4KiB on NOR-style devices, max(page, 1KiB) on NAND).
    #[arg(long, value_name = "B")]
    pub block_size: Option<String>,
    /// Erase blocks of the derived device [default: 16] (not with --full-device, which
    /// uses the device's own).
    #[arg(long, value_name = "N", conflicts_with = "full_device")]
    pub segments: Option<u32>,
    /// Use the device exactly as given instead of deriving a small one (slow for large
    /// devices: every cut point replays the workload).
    #[arg(long)]
    pub full_device: bool,
    /// FMS segment selection: greedy, cost-benefit, cat, adaptive.
    #[arg(long, default_value = "cat")]
    pub policy: String,
    /// FMS data redistribution m1..m6 [default: m6] (not with --regions > 1: DAC regions
    /// replace the redistribution).
    #[arg(long)]
    pub redistribution: Option<String>,
    /// FMS DAC regions (1 = no DAC).
    #[arg(long, default_value_t = 1)]
    pub regions: u8,
    /// FMS DAC region selection: all, most-segments, most-garbage [default: all].
    #[arg(long)]
    pub region_select: Option<String>,
    /// FMS DAC time threshold (device time: `500ms`, `2s`, `30m`; the workload has no
    /// arrival times, so device time is the time its operations take) [default: none]
    #[arg(long, value_name = "DURATION")]
    pub region_threshold: Option<String>,
    /// FMS wear levelling threshold (`none`: off, the default).
    #[arg(long, value_name = "N|none", value_parser = super::common::parse_wear_threshold)]
    pub wear_threshold: Option<super::common::WearThreshold>,
    /// Move the index log to a free segment, instead of erasing its own in place, when a
    /// wrap finds its segment erased more than N times beyond that free segment (`none`:
    /// always wrap in place). 0 moves it whenever it is ahead at all [default: 8]
    #[arg(long, value_name = "N|none")]
    pub index_wear_gap: Option<String>,
    /// Free segments the cleaner keeps beyond its water marks once a block has gone bad in
    /// use (or from the start, --failure-reserve-from start), while the data leaves room
    /// (one segment where N do not fit; the failure reserve; 0: the marks alone)
    /// [default: 1]
    #[arg(long, value_name = "N")]
    pub failure_reserve: Option<u32>,
    /// When the failure reserve applies: first-failure (once a block has gone bad in use)
    /// or start (from the format on, where the data leaves room; the format then exports
    /// that many segments fewer, as for --failures) [default: first-failure]
    #[arg(long, value_name = "WHEN")]
    pub failure_reserve_from: Option<ftl::fms::ReserveFrom>,
    /// Worker threads (default: one per core).
    #[arg(long, value_name = "N")]
    pub threads: Option<usize>,
    /// Replay the workload from the format for every cut point instead of forking the
    /// running FMS just before the operation the cut falls in. Same report, slower by the
    /// length of the workload: a cross-check of the forks. Runs with --failures always
    /// replay.
    #[arg(long)]
    pub replay: bool,
    /// Make one random write in six write all-0xFF sectors (erased flash reads 0xFF too,
    /// and the FMS must tell the two apart) [default: true]
    #[arg(long, value_name = "BOOL")]
    pub fill_writes: Option<bool>,
    /// Inject N program/erase failures, at seeded operations of the workload (of the
    /// format, with --target fms-format), in every run: the fault-free run and every cut
    /// point (a failed program is torn and its erase block grows bad; a failed erase grows
    /// the block bad).
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub failures: u64,
    /// Chained cuts: after the recovery from each cut point's cut, cut power N times more,
    /// each at a seeded program/erase among the next --chain-within, recovering and
    /// checking after each (cuts in the repairs and cleanings a recovery starts). Each mount
    /// after a cut is cut too, at one of its first --chain-within programs/erases, when its
    /// repairs get that far (`mount_cuts`). With --target fms-format, after the recovery
    /// from each cut in the format.
    #[arg(long, default_value_t = 0, value_name = "N")]
    pub chain: u32,
    /// The window of a chained cut: it falls at one of the first OPS programs/erases after
    /// the recovery (needs --chain; 1 to 10000) [default: 5]. A chain that uses the medium's
    /// erased slots up (each cut tearing a cleaning's copy) ends with the medium full: counted
    /// in `chains_full`, not a violation, when no cleaning could finish.
    #[arg(long, value_name = "OPS")]
    pub chain_within: Option<u64>,
    /// Format the FMS with ECC codes in the data pages' spare areas (`fms format --ecc`).
    #[arg(long)]
    pub ecc: bool,
    /// ECC correcting T bits per 512 bytes (implies --ecc; `fms format --ecc-bits`): 1
    /// SEC-DED, 2 to 8 BCH.
    #[arg(long, value_name = "T", value_parser = clap::value_parser!(u8).range(1..=8))]
    pub ecc_bits: Option<u8>,
    /// Move a block whose read corrected at least N bits in one 512-byte chunk at the next
    /// flush (scrubbing; 0 = never). Default: three quarters of the code's strength,
    /// rounded up (1 for SEC-DED, 3 for --ecc-bits 4).
    #[arg(long, value_name = "N")]
    pub scrub_threshold: Option<u8>,
    /// Probability that a bit read comes back flipped (transient), in every run and every
    /// mount. Without --ecc a flipped data bit reaches the reader and is a violation.
    #[arg(long, default_value_t = 0.0, value_name = "P")]
    pub bitflip_rate: f64,
    /// How many times the FMS reads again a chunk ECC cannot correct before the read
    /// fails; a header, record, index entry or trim list that fails its checksum is read
    /// again four times as often before it counts as torn.
    #[arg(long, default_value_t = ftl::fms::FmsConfig::default().read_retries, value_name = "N")]
    pub read_retries: u8,
    /// Replay this block trace (msr, spc, blkparse, disksim, fio; e.g. one recorded with
    /// `blockdev mount --record`) after the prefill instead of the random operations: its
    /// first --ops requests, mapped onto the device as `sim` maps a trace.
    #[arg(long, value_name = "FILE", help_heading = "Trace workload")]
    pub trace: Option<std::path::PathBuf>,
    /// How trace addresses map onto the device: modulo or compact [default: modulo].
    #[arg(
        long,
        value_name = "MAP",
        help_heading = "Trace workload",
        requires = "trace"
    )]
    pub trace_map: Option<String>,
    /// Trace requests between flushes (traces record none; 0: only at the end) [default: 8].
    #[arg(
        long,
        value_name = "N",
        help_heading = "Trace workload",
        requires = "trace"
    )]
    pub flush_every: Option<usize>,
    #[command(flatten)]
    pub trace_input: super::trace::TraceInputArgs,
    #[command(flatten)]
    pub report: ReportArgs,
}

fn config(a: &TortureArgs) -> Result<TortureConfig> {
    let device = a.device.resolve()?;
    let mut c = TortureConfig::new(device);
    c.cuts = a.cuts.parse::<Cuts>().map_err(|e| anyhow!("--{e}"))?;
    c.seed = a.seed;
    c.ops = a.ops;
    // Checked against what the FMS needs once its configuration is known (below).
    let segments = a.segments.unwrap_or(c.segments);
    c.segments = segments;
    c.shrink = !a.full_device;
    if a.threads == Some(0) {
        bail!("--threads: must be at least 1");
    }
    c.threads = a.threads.unwrap_or(0);
    c.replay = a.replay;
    c.format = a.target == Target::FmsFormat;
    if c.format {
        // Format cuts each start from a copy of the old medium.
        for (set, name, why) in [(
            a.replay,
            "--replay",
            "each format cut starts from a copy of the old medium",
        )] {
            if set {
                bail!("{name}: not with --target fms-format ({why})");
            }
        }
    }
    if !a.full_device {
        // The derived device: --segments erase blocks of at most a few slots' pages.
        if let Some(b) = a.device.overrides.blocks {
            bail!(
                "--blocks: {b} has no effect: the derived device has --segments erase blocks ({segments}); give --full-device to use the device as given"
            );
        }
    }
    if let Some(b) = &a.block_size {
        let v = parse_size(b).map_err(|e| anyhow!("--block-size: {e}"))?;
        if v > u32::MAX as u64 {
            bail!("--block-size: {b} too large");
        }
        c.fms.block_size = v as u32;
    }
    if let (Some(p), false) = (a.device.overrides.pages_per_block, a.full_device) {
        let got = torture::small_device(&c.device, c.segments, c.fms.block_size)
            .geometry
            .pages_per_block;
        if got < p {
            bail!(
                "--pages-per-block: the derived device keeps at most {got} pages per erase block (a few slots' worth, so the cleaner runs every few writes); give --full-device to use {p}"
            );
        }
    }
    c.fms.policy = a
        .policy
        .parse::<Policy>()
        .map_err(|e| anyhow!("--policy: {e}"))?;
    super::common::apply_dac(
        &mut c.fms,
        a.redistribution.as_deref(),
        Some(a.regions),
        a.region_select.as_deref(),
        a.region_threshold.as_deref(),
    )?;
    c.fms.wear_threshold = a.wear_threshold.and_then(|w| w.0);
    if let Some(g) = &a.index_wear_gap {
        c.fms.index_wear_gap = super::common::parse_index_wear_gap(g)?;
    }
    if let Some(r) = a.failure_reserve {
        c.fms.failure_reserve = r;
    }
    if let Some(w) = a.failure_reserve_from {
        if c.fms.failure_reserve == 0 {
            bail!("--failure-reserve-from: has no effect: --failure-reserve is 0 (no reserve)");
        }
        c.fms.failure_reserve_from = w;
    }
    if let Some(f) = a.fill_writes {
        c.fill_writes = f;
    }
    c.chain = a.chain;
    match a.chain_within {
        Some(w) if !(1..=torture::MAX_CHAIN_WITHIN).contains(&w) => bail!(
            "--chain-within: {w} is not 1 to {} (programs/erases after the recovery)",
            torture::MAX_CHAIN_WITHIN
        ),
        Some(_) if a.chain == 0 => {
            bail!("--chain-within: has no effect without --chain N (N > 0)")
        }
        Some(w) => c.chain_within = w,
        None => {}
    }
    c.failures = a.failures;
    if !(0.0..=1.0).contains(&a.bitflip_rate) {
        bail!(
            "--bitflip-rate: {} is not a probability (0..1)",
            a.bitflip_rate
        );
    }
    c.bitflip_rate = a.bitflip_rate;
    c.fms.ecc = a.ecc || a.ecc_bits.is_some();
    c.fms.ecc_strength = a.ecc_bits.unwrap_or(1);
    c.fms.scrub_threshold = a.scrub_threshold;
    c.fms.read_retries = a.read_retries;
    let t = &a.trace_input;
    match &a.trace {
        Some(path) => {
            if a.fill_writes.is_some() {
                bail!("--fill-writes: has no effect with --trace (the trace's writes carry data of their own)");
            }
            c.fill_writes = false;
            // A torture replays requests, not their times, and all of them.
            if t.trace_time_unit.is_some() {
                bail!(
                    "--trace-time-unit: has no effect in a torture (it replays no arrival times)"
                );
            }
            if t.skip_bad_lines {
                bail!("--skip-bad-lines: a torture replays a trace whole; write a clean copy first (`flashkit trace convert --skip-bad-lines`)");
            }
            let mut spec = sim::trace::TraceSpec::new(path);
            spec.options = t.options()?;
            if let Some(m) = &a.trace_map {
                spec.map =
                    sim::trace::TraceMap::parse(m).map_err(|e| anyhow!("--trace-map: {e}"))?;
            }
            c.trace = Some(spec);
            c.flush_every = a.flush_every.unwrap_or(c.flush_every);
        }
        None => {
            let given = t.trace_format.is_some()
                || t.trace_disk.is_some()
                || t.trace_asu.is_some()
                || t.blkparse_action != "D"
                || t.trace_time_unit.is_some()
                || t.trace_limit.is_some()
                || t.skip_bad_lines;
            if given {
                bail!("trace options: have no effect without --trace FILE");
            }
        }
    }
    if c.shrink {
        check_segments(&c)?;
    }
    Ok(c)
}

/// The derived device must have a segment for data besides the FMS's reserve (the index
/// segment, the cleaner's high water of free segments and one active segment per write
/// stream), which depends on the policy, redistribution and regions: refused here,
/// naming `--segments` and what the configuration needs, rather than by the format's
/// "no room for data".
fn check_segments(c: &TortureConfig) -> Result<()> {
    let reserve = c.fms.reserve_segments();
    let need = reserve + 1;
    if (c.segments as u64) < need {
        bail!(
            "--segments: {} is too few: this FMS configuration keeps {reserve} segments in reserve (1 index, high water {}, {} active stream(s) for its policy, redistribution and regions), so it needs at least {need}",
            c.segments,
            c.fms.high_water,
            c.fms.streams()
        );
    }
    Ok(())
}

pub fn run(a: TortureArgs) -> Result<()> {
    // (QA stop 27: `--csv` over the replayed trace replaced it, exit 0.)
    let inputs: Vec<(&std::path::Path, &str)> = a
        .device
        .device_file
        .as_deref()
        .map(|f| (f, "device file"))
        .into_iter()
        .chain(a.trace.as_deref().map(|f| (f, "trace being replayed")))
        .collect();
    super::common::refuse_csv_over(&a.report, &inputs)?;
    let cfg = config(&a)?;
    let report = if std::io::stderr().is_terminal() {
        let last = Mutex::new(Instant::now());
        let r = torture::run_with_progress(&cfg, &|done, total| {
            let mut last = last.lock().unwrap();
            if done == total || last.elapsed().as_millis() >= 200 {
                *last = Instant::now();
                eprint!("\rtorture: {done}/{total} cut points");
                let _ = std::io::stderr().flush();
            }
        });
        eprint!("\r\x1b[K");
        r
    } else {
        torture::run(&cfg)
    }
    .map_err(|e| anyhow!("torture: {e}"))?;

    if a.report.json {
        output::print_json(&report)?;
    } else {
        print_table(&report)?;
    }
    if report.fault_free_failed() {
        // Notes on what the cuts covered would be about little. A workload torture still
        // runs its cut points (QA stop 27: the note said none ran, above a list of cut
        // points that failed).
        if report.cut_points == 0 {
            eprintln!(
                "torture: note: the fault-free run (no power cut) failed a check, so no cut point was run; its failure is the violation below"
            );
        } else {
            eprintln!(
                "torture: note: the fault-free run (no power cut) failed a check: it is the first of the violations, and the cut points' may share its cause"
            );
        }
    } else if let Cuts::Sample(n) = cfg.cuts {
        if n > report.cut_points {
            eprintln!(
                "torture: note: --cuts {n}: the workload has {} cut points, and every one was cut",
                report.cut_points
            );
        }
    }
    let untested = if report.fault_free_failed() {
        Vec::new()
    } else {
        report.untested(cfg.fms.wear_threshold.is_some())
    };
    for w in untested {
        eprintln!("flashkit: warning: {w}");
    }
    if let Some(path) = &a.report.csv {
        output::write_csv(path, std::slice::from_ref(&report))?;
    }
    if report.violations > 0 {
        let cut = report.violations - u64::from(report.fault_free_failed());
        bail!(
            "{} violation(s){} in {} cut point(s) on {} (seed {}); first: {}",
            report.violations,
            if report.fault_free_failed() {
                format!(": the fault-free run and {cut}")
            } else {
                String::new()
            },
            report.cut_points,
            report.device,
            report.seed,
            report.failures.first().map_or("", |s| s.as_str())
        );
    }
    Ok(())
}

fn print_table(r: &TortureReport) -> Result<()> {
    let mut f = Fields::new();
    f.add("target", &r.target)
        .add("device", &r.device)
        .add(
            "derived device",
            format!(
                "{} segments x {} pages of {} ({} mode)",
                r.segments,
                r.pages_per_block,
                output::bytes(r.page_size as u64),
                r.record_mode
            ),
        )
        .add(
            "logical blocks",
            format!(
                "{} of {}",
                output::count(r.logical_blocks),
                output::bytes(r.block_size as u64)
            ),
        )
        .add("seed", r.seed.to_string())
        .add("workload", r.workload.clone())
        .add("workload ops", output::count(r.workload_ops as u64))
        .add("ops (programs + erases)", output::count(r.ops))
        .add("cleanings", output::count(r.cleanings))
        .add("blocks copied", output::count(r.blocks_copied))
        .add("wear swaps", output::count(r.wear_swaps))
        .add("cuts", &r.cuts)
        .add("cut points", output::count(r.cut_points));
    if r.chain > 0 {
        f.add(
            "chained cuts",
            format!(
                "{} ({} after each recovery, within {} programs/erases); {} mount(s) cut in their repairs; {} chain(s) ended with the medium full",
                output::count(r.chained_cuts),
                r.chain,
                r.chain_within,
                output::count(r.mount_cuts),
                output::count(r.chains_full)
            ),
        );
    }
    f
        .add("failures requested", output::count(r.failures_requested))
        .add("program failures", output::count(r.program_failures))
        .add("erase failures", output::count(r.erase_failures))
        .add(
            "ecc",
            format!(
                "{}, bit flip rate {}, up to {} re-reads",
                if r.ecc { r.ecc_code.as_str() } else { "off" },
                r.bitflip_rate,
                r.max_read_retries
            ),
        )
        .add(
            "reads",
            format!(
                "{} bits flipped, {} corrected by ECC, {} re-reads, {} uncorrectable, {} chunks beyond the code, {} blocks scrubbed",
                output::count(r.reads.bitflips),
                output::count(r.reads.ecc_corrected_bits),
                output::count(r.reads.read_retries),
                output::count(r.reads.uncorrectable_reads),
                output::count(r.reads.overflipped_chunks),
                output::count(r.reads.scrubbed)
            ),
        )
        .add("violations", output::count(r.violations))
        .add(
            "mounts that found",
            super::fms::recovery_paths(&r.recovery.counts(), true),
        );
    if let Some(c) = &r.chain_recovery {
        f.add(
            "chained mounts that found",
            super::fms::recovery_paths(&c.counts(), true),
        );
    }
    if let Some(m) = &r.format_mounts {
        f.add(
            "after a format cut",
            format!(
                "{} mounted the new medium, {} the old one, {} refused; {} found segments of the earlier format",
                output::count(m.new_medium),
                output::count(m.old_medium),
                output::count(m.refused),
                output::count(r.recovery.earlier_format)
            ),
        );
    }
    f.add("elapsed", format!("{:.1} s", r.elapsed_s));
    f.print()?;
    if !r.failures.is_empty() {
        let mut out = std::io::stdout().lock();
        writeln!(out)?;
        for line in r.failures.iter().take(20) {
            writeln!(out, "  {line}")?;
        }
        if r.failures.len() > 20 {
            writeln!(out, "  ... {} more (see --json)", r.failures.len() - 20)?;
        }
    }
    Ok(())
}
