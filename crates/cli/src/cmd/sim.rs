//! `flashkit sim`: run FMS configurations side by side on synthetic workloads or traces.
//! Comma lists expand to a grid — the same expansion as `flashkit sweep` (every flag is a
//! key of [`sim::sweep`]); every result carries the option values that produced it.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::Mutex;

use anyhow::{anyhow, Result};
use clap::Args;
use serde_json::Value;
use sim::sweep::{default_of, Job, Spec};
use sim::SimResult;

use super::common::DeviceArgs;
use crate::output::{self, PlotArgs, ReportArgs, Table};
use crate::progress::Progress;

#[derive(Args, Debug)]
pub struct SimArgs {
    #[command(flatten)]
    pub device: DeviceArgs,
    /// FMS logical block size(s), e.g. 4KiB or 1KiB,4KiB.
    #[arg(long, default_value = default_of("block_size"), value_delimiter = ',')]
    pub block_size: Vec<String>,
    /// Sequential pre-fill, fraction(s) of the raw capacity (not counted).
    #[arg(long, default_value = default_of("fill"), value_delimiter = ',')]
    pub fill: Vec<String>,
    /// sequential | random | hotcold:X/Y | phases:W1,W2,... | trace:FILE (repeat the flag
    /// to compare several workloads).
    #[arg(long, default_value = default_of("workload"))]
    pub workload: Vec<String>,
    /// Bytes written by the workload.
    #[arg(long, default_value = default_of("written"), value_delimiter = ',')]
    pub written: Vec<String>,
    /// Request size.
    #[arg(long, default_value = default_of("unit"), value_delimiter = ',')]
    pub unit: Vec<String>,
    /// closed (next request when the last completes), poisson:RATE (requests/s), trace
    /// (the trace's time stamps) or auto, the default: trace for trace workloads, closed
    /// for the others.
    #[arg(long, value_delimiter = ',')]
    pub arrival: Vec<String>,
    /// Segment selection: greedy,cost-benefit,cat,adaptive.
    #[arg(long, default_value = default_of("policy"), value_delimiter = ',')]
    pub policy: Vec<String>,
    /// Data redistribution m1..m6, or paper: the 1999 paper's pairing (greedy m1,
    /// cost-benefit m4, cat m6, adaptive m6).
    #[arg(long, default_value = default_of("redistribution"), value_delimiter = ',')]
    pub redistribution: Vec<String>,
    /// DAC regions (1 = no DAC).
    #[arg(long, default_value = default_of("regions"), value_delimiter = ',')]
    pub regions: Vec<String>,
    /// DAC time threshold(s), e.g. 30m, or none.
    #[arg(long, default_value = default_of("region_threshold"), value_delimiter = ',')]
    pub region_threshold: Vec<String>,
    /// DAC: how the cleaner picks the region to clean: all (the best victim of any region),
    /// most-segments, most-garbage.
    #[arg(long, default_value = default_of("region_select"), value_delimiter = ',')]
    pub region_select: Vec<String>,
    /// DAC: what "young to its region" compares with when a block is updated (promotion):
    /// threshold (the paper's: resident less than the time threshold; every update
    /// without one) or region-average (resident less than the average block of its region).
    #[arg(long, default_value = default_of("promotion"), value_delimiter = ',')]
    pub promotion: Vec<String>,
    /// DAC: what "old to its region" compares with when the cleaner copies a block
    /// (demotion): threshold (the paper's: resident at least the time threshold; every
    /// block without one) or region-average (resident longer than the average block of its
    /// region).
    #[arg(long, default_value = default_of("demotion"), value_delimiter = ',')]
    pub demotion: Vec<String>,
    /// Fraction of the pre-filled data that is read-only (never updated).
    #[arg(long, default_value = default_of("readonly_fraction"), value_delimiter = ',')]
    pub readonly_fraction: Vec<String>,
    /// Do not keep read-only data in separate segments.
    #[arg(long)]
    pub no_readonly_separation: bool,
    /// Spare mode: write no segment summaries (a copy of a full segment's records after
    /// its last slot, one page program per segment, which mount reads instead of every
    /// record; on by default where a segment has room for one).
    #[arg(long)]
    pub no_segment_summaries: bool,
    /// Wear levelling: swap when erase counts differ by more than N (none = off).
    #[arg(long, default_value = default_of("wear_threshold"), value_delimiter = ',')]
    pub wear_threshold: Vec<String>,
    /// Move the index log to a free segment, instead of erasing its own in place, when a
    /// wrap finds its segment erased more than N times beyond that one (none = always wrap
    /// in place; with wear levelling the smaller of the two applies). NAND logs hold few
    /// entries per cycle, so an in-place index segment wears far ahead of the rest.
    #[arg(long, default_value = default_of("index_wear_gap"), value_delimiter = ',')]
    pub index_wear_gap: Vec<String>,
    /// Seed(s).
    #[arg(long, default_value = default_of("seed"), value_delimiter = ',')]
    pub seed: Vec<String>,
    /// Write-to-erase time ratio of the cleaning cost.
    #[arg(long, default_value = default_of("write_erase_ratio"), value_delimiter = ',')]
    pub write_erase_ratio: Vec<String>,
    /// Free-segment low / high water marks of the cleaner.
    #[arg(long, default_value = default_of("low_water"), value_delimiter = ',')]
    pub low_water: Vec<String>,
    #[arg(long, default_value = default_of("high_water"), value_delimiter = ',')]
    pub high_water: Vec<String>,
    /// Free segments the cleaner keeps beyond both water marks once a block of the device
    /// has gone bad in use (worn out under --endurance; or from the start,
    /// --failure-reserve-from start), while the good segments hold that many beyond the
    /// reserve and the pre-filled data (one where they do not): a second program failure in one
    /// cleaning then finds a segment to copy into (0 = the marks alone).
    #[arg(long, default_value = default_of("failure_reserve"), value_delimiter = ',')]
    pub failure_reserve: Vec<String>,
    /// When the failure reserve applies: first-failure (once a block has gone bad in use)
    /// or start (from the format on, on every device with room for it: a medium's first
    /// failures find it too, at the price of cleaning a segment earlier all along).
    #[arg(long, default_value = default_of("failure_reserve_from"), value_delimiter = ',')]
    pub failure_reserve_from: Vec<String>,
    /// CAT age transformation: saturating, log, linear, clamp:X.
    #[arg(long, default_value = default_of("cat_age"), value_delimiter = ',')]
    pub cat_age: Vec<String>,
    /// Cost-benefit age measured since the segment was written (default) or since its last
    /// block invalidation (the 1999 paper's gloss): written, invalidation.
    #[arg(long, default_value = default_of("cb_age"), value_delimiter = ',')]
    pub cb_age: Vec<String>,
    /// M4's "average utilization", which a victim below it makes cold: over the whole
    /// medium (device, the paper's "average utilization of file system") or over the
    /// segments holding data (data, flashkit's reading before stop 29): device, data.
    #[arg(long, default_value = default_of("m4_average"), value_delimiter = ',')]
    pub m4_average: Vec<String>,
    /// Hot-degree half-life in user writes (none = half the logical blocks).
    #[arg(long, default_value = default_of("hot_half_life"), value_delimiter = ',')]
    pub hot_half_life: Vec<String>,
    /// Adaptive: minimum writes per analysis window (none = logical blocks / 4).
    #[arg(long, default_value = default_of("adaptive_window"), value_delimiter = ',')]
    pub adaptive_window: Vec<String>,
    /// Adaptive: variance ratio above which access counts as non-uniform.
    #[arg(long, default_value = default_of("adaptive_threshold"), value_delimiter = ',')]
    pub adaptive_threshold: Vec<String>,
    #[command(flatten)]
    pub trace: super::trace::TraceInputArgs,
    /// How trace addresses map onto the simulated space: modulo or compact (a comma list
    /// runs both, as any grid option).
    #[arg(
        long,
        value_name = "MAP",
        default_value = "modulo",
        value_delimiter = ',',
        help_heading = "Trace input"
    )]
    pub trace_map: Vec<String>,
    #[command(flatten)]
    pub report: ReportArgs,
    /// `sim`'s plot options (parsed beside these, by `main`: `bench` has none).
    #[arg(skip)]
    pub plot: PlotArgs,
    /// Ids of the options left at their default value (filled in after parsing): only the
    /// options given become keys of the grid, so one that has no effect is an error.
    #[arg(skip)]
    pub defaulted: BTreeSet<String>,
}

/// What `flashkit sim --help` says after the options: the device label, the write
/// amplification figures and how latency is measured.
pub const AFTER_HELP: &str = "\
Results (--json, --csv; every key):
  job, options              the job's id (a hash of its options) and every option's value
  device                    the preset's name, or `NAME (from FILE)` for a device read from
                            --device-file (options.device is then null: a file can carry a
                            preset's name with other figures)
  workload, policy, regions, block_size, fill, readonly_fraction, wear_threshold, seed,
  write_erase_ratio         the job's values of those options
  redistribution            the method run (m1..m6; `paper` gives the policy's 1999 pairing)
  arrival                   the arrivals run (`auto`: trace times for a trace, else closed)
  region_threshold_s        the DAC time threshold; null without one and with one region
  written_bytes             bytes the workload wrote (a trace's write requests, as mapped)
  unit_bytes                the request size; null for a trace (its records bring theirs)
  erasures                  segment erasures during the workload: the cleaner's, wear swaps'
                            and the index log's
  blocks_copied             valid blocks the cleaner and wear swaps copied
  cleaning_cost             erasures + blocks_copied x write_erase_ratio / blocks_per_segment
                            (the 1999 paper's cost: a segment's worth of block writes costs
                            write_erase_ratio erasures)
  wear_stddev, wear_min, wear_max
                            standard deviation, least and most of the good segments' erase
                            counts at the end (the pre-fill's included)
  user_writes               user block writes (a request covers one or more blocks)
  flash_writes              flash block writes: user_writes + blocks_copied + trim_list_slots
  trim_list_slots           spare mode: trim-list slots programmed for the workload's trims
                            (0 in header mode, where a trim clears live bits in place)
  write_amplification       flash block writes (user block writes, cleaning copies, trim-list
                            slots) per user block write; a request smaller than a block is
                            one user block write (the FMS rewrites the whole block); null
                            without user writes (a trace of reads and trims)
  host_bytes_written        bytes carried by the workload's write requests
  byte_write_amplification  flash data bytes programmed (flash block writes x block size;
                            headers, spare areas and index records not counted) per host byte
                            written: write_amplification x block size / request size for
                            requests smaller than a block (--unit 512 on 4 KiB blocks: x8);
                            null without host writes
  device_time_s             the device's busy time: its operations for the requests and
                            the cleaning they cause, without idle time between arrivals, so
                            the same for closed, poisson and trace arrivals
  throughput_bytes_per_s    written_bytes per second of device_time_s (busy time): what the
                            device sustains back to back, not bandwidth over the run (null
                            when every operation is timed at zero: no device time)
  elapsed_time_s            simulated time from the workload's start to the last request's
                            completion, idle time included (device_time_s when closed);
                            bandwidth or IOPS over the run: written_bytes or requests / it
  policy_greedy_share       adaptive: the share of cleanings that chose greedy (the rest
                            chose CAT); null for the other policies and before a cleaning
  wear_swaps                wear-levelling swaps (--wear-threshold)
  retired_segments          segments whose erase block went bad during the workload (worn
                            out under --endurance, or failed)
  spare_reads               spare-area reads of the device during the workload and the
                            remount that mount_time_s measures (in practice the mount's scan)
  ram_bytes                 the bytes of the FMS's tables in RAM at the end
  mount_time_s              device time a mount of the medium the run left takes
  requests                  requests the workload made
  mean/p50/p99/max_latency_us
                            per-request latency from the device timing model, waits behind
                            earlier requests and cleaning included; percentiles and the
                            maximum come from an HDR histogram (3 significant digits): each
                            is its bucket's upper bound, not an exact observed value
  blocks_per_segment, logical_blocks
                            the FMS's slots per segment and exported blocks
  user_reads, trims         blocks the workload's read requests cover, and blocks trimmed
  trace                     trace workloads: what was read from the trace (docs/traces.md)
Every option that takes a list (--policy greedy,cat, --device PRESET,PRESET, --trace-map
modulo,compact, ...) runs the product of the lists, one job each, as a sweep spec does.
Options with no effect on a job are null in its options object (device with --device-file,
written and unit with a trace workload, the trace options with a synthetic one, cat_age
without the cat or adaptive policy, the DAC options with one region, ...), so its non-null
options, given back to sim or sweep, run the same job with the same id (an option whose
none is not its default, as --index-wear-gap none, says \"none\"). The table has a
column for every option that varies, a retired column when a segment retired, and mean/p99
latency columns when requests arrive on their own (poisson or trace arrivals). Every job's
configuration is checked before any runs: one that cannot run (a fill that does not fit,
...) refuses the grid, naming its options, so that a long grid does not stop on it at the
end. When some jobs fail while running, the others are reported, each failure gets a line
on stderr naming its options, and the exit status is 1; an error common to every job is
one line.";

/// The grid the flags describe (the same [`Spec`] a sweep file gives).
pub fn spec(a: &SimArgs) -> Result<Spec> {
    let mut s = Spec::new();
    if let Some(d) = &a.device.device {
        // A comma list of presets is a grid dimension, as in a sweep spec.
        let presets: Vec<&str> = d.split(',').collect();
        s.set_flag("device", &presets)?;
    }
    if let Some(f) = &a.device.device_file {
        s.set_flag("device_file", &[f.display().to_string()])?;
    }
    let o = &a.device.overrides;
    let overrides: [(&str, Option<String>); 11] = [
        ("blocks", o.blocks.map(|v| v.to_string())),
        ("page_size", o.page_size.map(|v| v.to_string())),
        ("spare_size", o.spare_size.map(|v| v.to_string())),
        ("pages_per_block", o.pages_per_block.map(|v| v.to_string())),
        ("nop", o.nop.map(|v| v.to_string())),
        ("in_order", o.in_order.map(|v| v.to_string())),
        ("endurance", o.endurance.map(|v| v.to_string())),
        ("read_us", o.read_us.map(|v| v.to_string())),
        ("spare_read_us", o.spare_read_us.map(|v| v.to_string())),
        ("program_us", o.program_us.map(|v| v.to_string())),
        ("erase_us", o.erase_us.map(|v| v.to_string())),
    ];
    for (k, v) in overrides {
        if let Some(v) = v {
            s.set_flag(k, &[v])?;
        }
    }
    let lists: [(&str, &Vec<String>); 26] = [
        ("block_size", &a.block_size),
        ("fill", &a.fill),
        ("workload", &a.workload),
        ("written", &a.written),
        ("unit", &a.unit),
        ("policy", &a.policy),
        ("redistribution", &a.redistribution),
        ("regions", &a.regions),
        ("region_threshold", &a.region_threshold),
        ("region_select", &a.region_select),
        ("promotion", &a.promotion),
        ("demotion", &a.demotion),
        ("readonly_fraction", &a.readonly_fraction),
        ("wear_threshold", &a.wear_threshold),
        ("index_wear_gap", &a.index_wear_gap),
        ("seed", &a.seed),
        ("write_erase_ratio", &a.write_erase_ratio),
        ("low_water", &a.low_water),
        ("high_water", &a.high_water),
        ("failure_reserve", &a.failure_reserve),
        ("failure_reserve_from", &a.failure_reserve_from),
        ("cat_age", &a.cat_age),
        ("cb_age", &a.cb_age),
        ("m4_average", &a.m4_average),
        ("hot_half_life", &a.hot_half_life),
        ("adaptive_window", &a.adaptive_window),
    ];
    // A default is the key's own default (see `default_of`): setting it would make it look
    // given.
    let given = |id: &str| !a.defaulted.contains(id);
    for (k, v) in lists {
        if given(k) {
            s.set_flag(k, v)?;
        }
    }
    if given("adaptive_threshold") {
        s.set_flag("adaptive_threshold", &a.adaptive_threshold)?;
    }
    if !a.arrival.is_empty() {
        s.set_flag("arrival", &a.arrival)?;
    }
    let t = &a.trace;
    if given("trace_map") {
        s.set_flag("trace_map", &a.trace_map)?;
    }
    let trace: [(&str, Option<String>); 7] = [
        ("trace_format", t.trace_format.clone()),
        ("trace_disk", t.trace_disk.map(|v| v.to_string())),
        ("trace_asu", t.trace_asu.map(|v| v.to_string())),
        (
            "blkparse_action",
            given("blkparse_action").then(|| t.blkparse_action.clone()),
        ),
        ("trace_time_unit", t.trace_time_unit.clone()),
        ("trace_limit", t.trace_limit.map(|v| v.to_string())),
        (
            "skip_bad_lines",
            t.skip_bad_lines.then(|| "true".to_string()),
        ),
    ];
    for (k, v) in trace {
        if let Some(v) = v {
            s.set_flag(k, &[v])?;
        }
    }
    if a.no_readonly_separation {
        s.set_flag("readonly_separation", &["false"])?;
    }
    if a.no_segment_summaries {
        s.set_flag("segment_summaries", &["false"])?;
    }
    Ok(s)
}

/// Keys whose values differ between jobs (grid order), for labels and extra columns.
pub fn varying(options: &[&BTreeMap<String, Value>]) -> Vec<&'static str> {
    sim::sweep::key_names()
        .into_iter()
        .filter(|k| sim::sweep::varies(k, options.iter().filter_map(|o| o.get(*k))))
        .collect()
}

/// `policy=cat fill=0.95` for the keys that vary.
pub fn describe(options: &BTreeMap<String, Value>, keys: &[&str]) -> String {
    keys.iter()
        .map(|k| format!("{k}={}", value_text(&options[*k])))
        .collect::<Vec<_>>()
        .join(" ")
}

pub fn value_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        Value::Null => "none".into(),
        other => other.to_string(),
    }
}

/// Run jobs on all cores with a progress bar (requests of the one run, or jobs done).
/// Every job is checked first, so an impossible combination is refused before the others
/// run rather than after. A job that fails while running (a device worn out under
/// `--endurance`) fails alone: its error is in its slot (the caller labels it with the
/// options that tell it from the grid's other jobs), and the other jobs' results are kept.
pub fn execute_each(jobs: &[Job]) -> Result<Vec<Result<SimResult>>> {
    let keys = varying(&jobs.iter().map(|j| &j.options).collect::<Vec<_>>());
    if let Err((job, e)) = check_jobs(jobs) {
        return Err(match job.map(|j| describe(&j.options, &keys)) {
            Some(label) if !label.is_empty() => anyhow!("{label}: {e:#}"),
            _ => e,
        });
    }
    if let [job] = jobs {
        let c = &job.config;
        // A trace's length is not known before it is read (its records are streamed);
        // `--written` does not apply to it.
        let total = match &c.workload {
            sim::workload::WorkloadSpec::Trace(t) => t.options.limit,
            _ => Some(c.written_bytes / c.unit_bytes.max(1) as u64),
        };
        // Refused here, before any table exists, when the run cannot fit in RAM.
        sim::ram::plan(&[c], 1, nand::available_ram())?;
        let bar = Progress::requests(total);
        let r = sim::driver::run_with_progress(c, &|n| bar.set(n));
        bar.finish();
        return Ok(vec![r]);
    }
    let bar = Progress::jobs(jobs.len() as u64);
    let slots: Vec<std::sync::Mutex<Option<Result<SimResult>>>> =
        jobs.iter().map(|_| std::sync::Mutex::new(None)).collect();
    sim::sweep::run_jobs(jobs, None, &note, |i, r| {
        *slots[i].lock().expect("slot") = Some(r);
        bar.inc(1);
    })?;
    bar.finish();
    Ok(slots
        .into_iter()
        .map(|slot| slot.into_inner().expect("slot").expect("every job ran"))
        .collect())
}

/// Check every job of a grid before any runs ([`sim::driver::check`]). The first
/// failure comes back with its job, or without one when every job fails with the same
/// error: a cause common to the grid (written bytes that are no whole number of requests,
/// a trace that cannot be opened) is said once, without options it does not depend on.
pub fn check_jobs(jobs: &[Job]) -> std::result::Result<(), (Option<&Job>, anyhow::Error)> {
    let check = |j: &Job| sim::driver::check(&j.config).err();
    let Some((i, e)) = jobs
        .iter()
        .enumerate()
        .find_map(|(i, j)| check(j).map(|e| (i, e)))
    else {
        return Ok(());
    };
    let text = format!("{e:#}");
    let everywhere = i == 0
        && jobs[1..]
            .iter()
            .all(|j| check(j).is_some_and(|e| format!("{e:#}") == text));
    Err(((!everywhere).then_some(&jobs[i]), e))
}

/// A one-line note on stderr (e.g. fewer runs at a time for lack of RAM).
pub fn note(text: &str) {
    eprintln!("flashkit: note: {text}");
}

pub fn run(a: SimArgs) -> Result<()> {
    a.plot.check()?;
    let spec = spec(&a)?;
    check_outputs(&a, &spec)?;
    let jobs = spec.expand()?;
    a.plot.check_grid(
        &varying(&jobs.iter().map(|j| &j.options).collect::<Vec<_>>()),
        &jobs,
    )?;
    let keys = varying(&jobs.iter().map(|j| &j.options).collect::<Vec<_>>());
    // The jobs that ran and their results; the others' errors (each names its options).
    let mut ran: Vec<Job> = Vec::new();
    let mut results: Vec<SimResult> = Vec::new();
    let mut failed: Vec<(&Job, anyhow::Error)> = Vec::new();
    for (job, r) in jobs.iter().zip(execute_each(&jobs)?) {
        match r {
            Ok(r) => {
                ran.push(job.clone());
                results.push(r);
            }
            Err(e) => failed.push((job, e)),
        }
    }
    // One job, or every job failing alike (a trace line every job stops at): one line,
    // without options the error does not depend on.
    if results.is_empty() && !failed.is_empty() {
        let first = format!("{:#}", failed[0].1);
        if failed.iter().all(|(_, e)| format!("{e:#}") == first) {
            return Err(failed.swap_remove(0).1);
        }
    }
    let failed: Vec<anyhow::Error> = failed
        .into_iter()
        .map(|(job, e)| anyhow!("{}: {e:#}", describe(&job.options, &keys)))
        .collect();
    let warned = Mutex::new(BTreeSet::new());
    for r in &results {
        warn_trace(r, &warned);
    }
    let options: Vec<&BTreeMap<String, Value>> = ran.iter().map(|j| &j.options).collect();
    let values = results
        .iter()
        .map(serde_json::to_value)
        .collect::<Result<Vec<Value>, _>>()?;
    if !results.is_empty() {
        // The reports before the plot: a plot that cannot be drawn (a metric every run
        // left null, which the checks before the runs cannot always tell) must not lose
        // the results (QA stop 27), as `sweep` writes its CSV first.
        if !write_reports(&a.report, &ran, &results, &keys)? {
            table_with_keys(&values, &options, &keys)?;
        }
        a.plot.draw(&plot_rows(&options, &values), "flashkit sim")?;
    }
    if failed.is_empty() {
        return Ok(());
    }
    // One line per failed job, naming its options; the exit status says some failed.
    for e in &failed {
        eprintln!("flashkit: {}", output::error_line(e));
    }
    Err(output::Reported(format!("{} of {} jobs failed", failed.len(), jobs.len())).into())
}

/// The grid's outputs against its inputs (see [`super::common::check_outputs`]).
pub fn check_outputs(a: &SimArgs, spec: &Spec) -> Result<()> {
    super::common::check_outputs(
        &[
            ("--csv", a.report.csv.as_deref()),
            ("--plot", a.plot.plot.as_deref()),
        ],
        spec,
        None,
    )
}

/// `--csv FILE` and `--json` of a grid's results, each with its job (see [`JobResult`]);
/// true when JSON went to stdout (so no table follows).
pub fn write_reports<R: serde::Serialize>(
    report: &ReportArgs,
    jobs: &[Job],
    results: &[R],
    keys: &[&str],
) -> Result<bool> {
    let rows: Vec<JobResult<R>> = jobs
        .iter()
        .zip(results)
        .map(|(j, r)| JobResult {
            job: &j.id,
            options: &j.options,
            result: r,
        })
        .collect();
    if let Some(path) = &report.csv {
        write_results_csv(path, &rows, keys)?;
    }
    if report.json {
        output::print_json(&rows)?;
    }
    Ok(report.json)
}

/// A result with the job that produced it: the job's id, every option value (options
/// such as `--cb-age` or `--low-water` are not among a result's own fields), then the
/// result's fields. `sim --json` prints these; a sweep's lines have the same shape.
#[derive(serde::Serialize)]
pub struct JobResult<'a, R: serde::Serialize + ?Sized> {
    pub job: &'a str,
    pub options: &'a BTreeMap<String, Value>,
    #[serde(flatten)]
    pub result: &'a R,
}

/// One flat CSV row per result: the job id, the options in `keys` (those that vary) as
/// `option_KEY`, then the result's fields.
pub fn write_results_csv<R: serde::Serialize + ?Sized>(
    path: &Path,
    rows: &[JobResult<R>],
    keys: &[&str],
) -> Result<()> {
    let rows = rows
        .iter()
        .map(|r| {
            let mut cells = vec![("job".to_string(), Value::from(r.job))];
            for k in keys {
                cells.push((format!("option_{k}"), r.options[*k].clone()));
            }
            cells.extend(output::ordered_fields(r.result)?);
            Ok(CsvRow(cells))
        })
        .collect::<Result<Vec<CsvRow>>>()?;
    output::write_csv(path, &rows)
}

/// A row whose fields serialize in the given order.
struct CsvRow(Vec<(String, Value)>);

impl serde::Serialize for CsvRow {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

/// Rows for [`sim::plot::auto_chart`]: each run's options and its result as JSON.
pub fn plot_rows(options: &[&BTreeMap<String, Value>], results: &[Value]) -> Vec<sim::plot::Row> {
    options
        .iter()
        .zip(results)
        .map(|(o, r)| sim::plot::Row {
            options: (*o).clone(),
            metrics: r.clone(),
        })
        .collect()
}

/// Columns the table always has (from the result itself).
const SHOWN: [&str; 6] = [
    "workload",
    "policy",
    "redistribution",
    "regions",
    "region_threshold",
    "fill",
];

/// A table of one row per run: in front, a column for each option that varies and is not
/// among `shown` (seed, device size, ...), then `headers` with the run's `cells`.
pub fn grid_table(
    options: &[&BTreeMap<String, Value>],
    shown: &[&str],
    headers: &[&str],
    cells: impl IntoIterator<Item = Vec<String>>,
) -> Table {
    grid_table_keys(options, &varying(options), shown, headers, cells)
}

/// [`grid_table`] with a column for each of `keys` (the options that vary in the whole
/// grid, of which these rows may be a part) not among `shown`.
pub fn grid_table_keys(
    options: &[&BTreeMap<String, Value>],
    keys: &[&str],
    shown: &[&str],
    headers: &[&str],
    cells: impl IntoIterator<Item = Vec<String>>,
) -> Table {
    let extra: Vec<&str> = keys
        .iter()
        .copied()
        .filter(|k| !shown.contains(k))
        .collect();
    let mut head: Vec<String> = extra.iter().map(|k| k.replace('_', " ")).collect();
    head.extend(headers.iter().map(|h| h.to_string()));
    let mut t = Table::new(&head);
    for (i, c) in cells.into_iter().enumerate() {
        let mut row: Vec<String> = extra
            .iter()
            .map(|k| {
                options
                    .get(i)
                    .and_then(|o| o.get(*k))
                    .map_or(String::new(), value_text)
            })
            .collect();
        row.extend(c);
        t.row(row);
    }
    t
}

/// A fill as given: two decimals when they are exact (`0.90`, as the recorded tables
/// show it), otherwise the shortest text that reads back as the value (`0.855`), so two
/// fills never print alike.
pub fn fill_text(v: f64) -> String {
    let two = format!("{v:.2}");
    if two.parse::<f64>() == Ok(v) {
        two
    } else {
        v.to_string()
    }
}

/// Print results (as JSON objects) as a table.
pub fn table(results: &[Value], options: &[&BTreeMap<String, Value>]) -> Result<()> {
    table_with_keys(results, options, &varying(options))
}

/// Print results (as JSON objects) as a table, with a column for each of `keys` (the
/// options that vary in the grid) that the table has no column for. A `retired` column
/// when a segment retired in some run, and mean / p99 latency when some run's requests
/// arrive on their own (poisson or trace arrivals: closed-loop latency is just the
/// service time, which device time already shows).
pub fn table_with_keys(
    results: &[Value],
    options: &[&BTreeMap<String, Value>],
    keys: &[&str],
) -> Result<()> {
    let num = |r: &Value, k: &str| r.get(k).and_then(Value::as_f64);
    let retired = results
        .iter()
        .any(|r| num(r, "retired_segments").is_some_and(|n| n > 0.0));
    let latency = results.iter().any(|r| {
        r.get("arrival")
            .and_then(Value::as_str)
            .is_some_and(|a| a != "closed")
            && num(r, "requests").is_some_and(|n| n > 0.0)
    });
    let mut headers = vec![
        "workload",
        "policy",
        "redist",
        "regions",
        "threshold",
        "fill",
        "erasures",
        "copied",
        "clean cost",
        "WA",
        "wear sd",
        "wear min-max",
    ];
    if retired {
        headers.push("retired");
    }
    headers.extend(["device time", "throughput"]);
    if latency {
        headers.extend(["mean latency", "p99 latency"]);
    }
    headers.push("greedy share");
    let cells = results.iter().map(|r| {
        let f = |k: &str| num(r, k).unwrap_or(f64::NAN);
        let txt = |k: &str| r.get(k).map(value_text).unwrap_or_default();
        let mut row = vec![
            txt("workload"),
            txt("policy"),
            txt("redistribution"),
            txt("regions"),
            r.get("region_threshold_s")
                .and_then(Value::as_f64)
                .map_or("-".into(), |s| format!("{}s", output::trim_float(s))),
            fill_text(f("fill")),
            txt("erasures"),
            txt("blocks_copied"),
            format!("{:.1}", f("cleaning_cost")),
            // (Null without user writes: a trace of reads and trims.)
            num(r, "write_amplification").map_or("-".into(), |w| format!("{w:.3}")),
            format!("{:.2}", f("wear_stddev")),
            format!("{}-{}", txt("wear_min"), txt("wear_max")),
        ];
        if retired {
            row.push(txt("retired_segments"));
        }
        row.push(format!("{:.1}s", f("device_time_s")));
        let tp = f("throughput_bytes_per_s");
        row.push(if tp.is_nan() {
            "-".to_string()
        } else {
            format!("{}/s", output::bytes(tp as u64))
        });
        if latency {
            for k in ["mean_latency_us", "p99_latency_us"] {
                row.push(output::duration_us(f(k)));
            }
        }
        row.push(
            r.get("policy_greedy_share")
                .and_then(Value::as_f64)
                .map_or("-".into(), |g| format!("{:.0}%", g * 100.0)),
        );
        row
    });
    grid_table_keys(options, keys, &SHOWN, &headers, cells).print()
}

/// What reading a result's trace found (malformed lines skipped, several disks read as
/// one), as warnings on stderr, once each in `warned` however many jobs read the trace.
pub(super) fn warn_trace(r: &SimResult, warned: &Mutex<BTreeSet<String>>) {
    let Some(t) = r.trace.as_ref() else {
        return;
    };
    let skipped = (t.skipped_bad_lines > 0).then(|| {
        format!(
            "{}: skipped {} malformed lines (first: {})",
            t.path,
            t.skipped_bad_lines,
            t.first_bad_line.as_deref().unwrap_or("?")
        )
    });
    let mut warned = warned.lock().unwrap_or_else(|e| e.into_inner());
    for w in skipped.into_iter().chain(t.merged_devices_warning.clone()) {
        if warned.insert(w.clone()) {
            eprintln!("flashkit: warning: {w}");
        }
    }
}
