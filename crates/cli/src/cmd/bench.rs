//! `flashkit bench`: how fast the simulator runs on this machine — user block writes per
//! second of wall-clock time in steady-state cleaning, for any grid of `sim` options. Runs
//! one configuration at a time (parallel runs would disturb each other's timing).

use anyhow::{bail, Result};
use clap::Args;
use sim::speed::SpeedResult;
use sim::sweep::parse_size;

use super::sim::{describe, grid_table, spec, varying, write_reports, SimArgs};
use crate::progress::Progress;

#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Every `flashkit sim` option selects what is simulated (comma lists make a grid);
    /// `--written` is the timed part of each repetition. Requests are issued back to back.
    #[command(flatten)]
    pub sim: SimArgs,
    /// Workload bytes written after the pre-fill and before timing starts, to reach
    /// steady-state cleaning (a phases: workload is split over the warm-up and the timed
    /// writes together, as in a `sim` run writing both).
    #[arg(long, default_value = "80MiB", help_heading = "Bench")]
    pub warm: String,
    /// Repetitions per configuration, each on a freshly prepared FMS; the fastest counts.
    #[arg(long, default_value_t = 3, help_heading = "Bench")]
    pub repeat: u32,
}

/// The `sim` options bench does not offer (hidden from `bench --help` by
/// [`without_trace_input`]): a trace is finite, so it cannot feed a warm-up and timed
/// repetitions; bench runs synthetic workloads only.
pub const TRACE_OPTIONS: [&str; 8] = [
    "trace_format",
    "trace_disk",
    "trace_asu",
    "blkparse_action",
    "trace_time_unit",
    "trace_limit",
    "skip_bad_lines",
    "trace_map",
];

/// `bench`'s command line: `sim`'s options without the trace input ones, and a
/// `--workload` that offers synthetic workloads only.
pub fn without_trace_input(cmd: clap::Command) -> clap::Command {
    let cmd = TRACE_OPTIONS
        .iter()
        .fold(cmd, |c, id| c.mut_arg(*id, |a| a.hide(true)));
    cmd.mut_arg("arrival", |a| {
        a.help("closed only: bench issues requests back to back (it measures wall-clock speed)")
    })
    .mut_arg("workload", |a| {
        a.help("sequential | random | hotcold:X/Y | phases:W1,W2,... (repeat the flag to compare several workloads; bench runs synthetic workloads only)")
    })
}

pub fn run(a: BenchArgs) -> Result<()> {
    // Traces first: any other error about a trace run (`--written` has no effect on it)
    // would hide that bench does not run them at all.
    if a.sim
        .workload
        .iter()
        .any(|w| w.trim().starts_with("trace:"))
    {
        bail!("--workload: bench runs synthetic workloads only (a trace is finite)");
    }
    let t = &a.sim.trace;
    let given = |id: &str| match id {
        "trace_format" => t.trace_format.is_some(),
        "trace_disk" => t.trace_disk.is_some(),
        "trace_asu" => t.trace_asu.is_some(),
        "trace_time_unit" => t.trace_time_unit.is_some(),
        "trace_limit" => t.trace_limit.is_some(),
        "skip_bad_lines" => t.skip_bad_lines,
        // The two with a default value.
        _ => !a.sim.defaulted.contains(id),
    };
    if let Some(id) = TRACE_OPTIONS.iter().find(|id| given(id)) {
        bail!(
            "--{}: bench runs synthetic workloads only, so it takes no trace options",
            id.replace('_', "-")
        );
    }
    if a.sim.arrival.iter().any(|x| x != "closed") {
        bail!("--arrival: bench issues requests back to back (closed); it measures wall-clock speed, not device time");
    }
    let warm = parse_size(&a.warm).map_err(|e| anyhow::anyhow!("--warm: {e}"))?;
    if a.repeat == 0 {
        bail!("--repeat: must be at least 1");
    }
    let spec = spec(&a.sim)?;
    super::sim::check_outputs(&a.sim, &spec)?;
    let jobs = spec.expand()?;
    // Every configuration is checked against the RAM available before the first runs, as
    // `sim` checks its runs (one at a time here, each without the remount's tables): one
    // that cannot fit is refused in one line rather than killed by the kernel part-way
    // through the grid.
    let cfgs: Vec<&sim::driver::SimConfig> = jobs.iter().map(|j| &j.config).collect();
    sim::ram::plan_for(sim::ram::Kind::Bench, &cfgs, 1, nand::available_ram())?;
    let bar = Progress::jobs(jobs.len() as u64);
    let keys = varying(&jobs.iter().map(|j| &j.options).collect::<Vec<_>>());
    let mut results: Vec<SpeedResult> = Vec::new();
    for job in &jobs {
        let r = sim::speed::measure(&job.config, warm, a.repeat);
        bar.inc(1);
        results.push(r.map_err(|e| {
            if keys.is_empty() {
                e
            } else {
                anyhow::anyhow!("{}: {e:#}", describe(&job.options, &keys))
            }
        })?);
    }
    bar.finish();
    if write_reports(&a.sim.report, &jobs, &results, &keys)? {
        return Ok(());
    }
    let options: Vec<_> = jobs.iter().map(|j| &j.options).collect();
    let headers = [
        "workload",
        "policy",
        "redist",
        "user writes/s",
        "flash writes/s",
        "WA",
        "ns/user write",
        "ops/user write",
        "ns/op",
        "best",
        "median",
    ];
    let cells = results.iter().map(|r| {
        vec![
            r.workload.clone(),
            r.policy.clone(),
            r.redistribution.clone(),
            rate(r.user_writes_per_s),
            rate(r.flash_writes_per_s),
            format!("{:.2}", r.write_amplification),
            format!("{:.0}", r.ns_per_user_write),
            format!("{:.1}", r.device_ops_per_user_write),
            format!("{:.1}", r.ns_per_device_op),
            format!("{:.3}s", r.best_s),
            format!("{:.3}s", r.median_s),
        ]
    });
    grid_table(
        &options,
        &["policy", "redistribution", "workload"],
        &headers,
        cells,
    )
    .print()?;
    crate::output::Fields::new()
        .add("build", sim::speed::build_info())
        .print()
}

/// 1.47 M, 820 k, 950.
fn rate(v: f64) -> String {
    if v >= 1e6 {
        format!("{:.2} M", v / 1e6)
    } else if v >= 1e3 {
        format!("{:.0} k", v / 1e3)
    } else {
        format!("{v:.0}")
    }
}
