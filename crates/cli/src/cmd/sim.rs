//! `flashkit sim`: run FMS configurations side by side on synthetic workloads.
//! Comma lists expand to a grid; every result carries the option values that produced it.

use anyhow::{anyhow, bail, Result};
use clap::Args;
use ftl::fms::redistribute::Redistribution;
use ftl::fms::select::{AgeTransform, CbAge, Policy};
use sim::{Arrival, SimConfig, SimResult, WorkloadSpec};

use super::common::{parse_duration_s, parse_size, DeviceArgs};
use crate::output::{self, ReportArgs, Table};

#[derive(Args, Debug)]
pub struct SimArgs {
    #[command(flatten)]
    pub device: DeviceArgs,
    /// FMS logical block size(s), e.g. 4KiB or 1KiB,4KiB.
    #[arg(long, default_value = "4KiB", value_delimiter = ',')]
    pub block_size: Vec<String>,
    /// Sequential pre-fill, fraction(s) of the raw capacity (not counted).
    #[arg(long, default_value = "0.90", value_delimiter = ',')]
    pub fill: Vec<f64>,
    /// sequential | random | hotcold:X/Y | phases:W1,W2,... (repeat the flag to compare
    /// several workloads).
    #[arg(long, default_value = "hotcold:90/10")]
    pub workload: Vec<String>,
    /// Bytes written by the workload.
    #[arg(long, default_value = "192MiB")]
    pub written: String,
    /// Request size.
    #[arg(long, default_value = "4KiB")]
    pub unit: String,
    /// closed (next request when the last completes) or poisson:RATE (requests/s).
    #[arg(long, default_value = "closed")]
    pub arrival: String,
    /// Segment selection: greedy,cost-benefit,cat,adaptive.
    #[arg(
        long,
        default_value = "greedy,cost-benefit,cat,adaptive",
        value_delimiter = ','
    )]
    pub policy: Vec<String>,
    /// Data redistribution m1..m6 (default: the 1999 paper's pairing, greedy m1,
    /// cost-benefit m4, cat m6, adaptive m6).
    #[arg(long, value_delimiter = ',')]
    pub redistribution: Vec<String>,
    /// DAC regions (1 = no DAC).
    #[arg(long, default_value = "1", value_delimiter = ',')]
    pub regions: Vec<u8>,
    /// DAC time threshold(s), e.g. 30m, or none.
    #[arg(long, default_value = "none", value_delimiter = ',')]
    pub region_threshold: Vec<String>,
    /// Fraction of the pre-filled data that is read-only (never updated).
    #[arg(long, default_value_t = 0.0)]
    pub readonly_fraction: f64,
    /// Do not keep read-only data in separate segments.
    #[arg(long)]
    pub no_readonly_separation: bool,
    /// Wear levelling: swap when erase counts differ by more than N.
    #[arg(long)]
    pub wear_threshold: Option<u32>,
    /// Seed(s).
    #[arg(long, default_value = "1", value_delimiter = ',')]
    pub seed: Vec<u64>,
    /// Write-to-erase time ratio of the cleaning cost.
    #[arg(long, default_value_t = 0.75)]
    pub write_erase_ratio: f64,
    /// Free-segment low / high water marks of the cleaner.
    #[arg(long, default_value_t = 2)]
    pub low_water: u32,
    #[arg(long, default_value_t = 3)]
    pub high_water: u32,
    /// CAT age transformation: saturating, log, linear, clamp:X.
    #[arg(long, default_value = "saturating")]
    pub cat_age: String,
    /// Cost-benefit age measured since the last invalidation (the papers) or since the
    /// segment was written: invalidation, written.
    #[arg(long, default_value = "invalidation")]
    pub cb_age: String,
    /// Hot-degree half-life in user writes (default: half the logical blocks).
    #[arg(long)]
    pub hot_half_life: Option<f64>,
    /// Adaptive: minimum writes per analysis window (default: logical blocks / 4).
    #[arg(long)]
    pub adaptive_window: Option<u64>,
    /// Adaptive: variance ratio above which access counts as non-uniform.
    #[arg(long, default_value_t = 1.5)]
    pub adaptive_threshold: f64,
    #[command(flatten)]
    pub report: ReportArgs,
}

fn field<T, E: std::fmt::Display>(flag: &str, r: std::result::Result<T, E>) -> Result<T> {
    r.map_err(|e| anyhow!("--{flag}: {e}"))
}

/// Expand the arguments to the grid of configurations.
pub fn configs(a: &SimArgs) -> Result<Vec<SimConfig>> {
    let device = a.device.resolve_or("intel-series2plus-24m")?;
    let written = field("written", parse_size(&a.written))?;
    let unit = field("unit", parse_size(&a.unit))?;
    if unit == 0 || unit % 512 != 0 || unit > u32::MAX as u64 {
        bail!("--unit: {unit} must be a positive multiple of 512 bytes");
    }
    let arrival = field("arrival", Arrival::parse(&a.arrival))?;
    let cat_age: AgeTransform = field("cat-age", a.cat_age.parse())?;
    let cb_age: CbAge = field("cb-age", a.cb_age.parse())?;
    let mut workloads = Vec::new();
    for w in &a.workload {
        workloads.push(field("workload", WorkloadSpec::parse(w))?);
    }
    let mut block_sizes = Vec::new();
    for b in &a.block_size {
        let v = field("block-size", parse_size(b))?;
        if v > u32::MAX as u64 {
            bail!("--block-size: {b} too large");
        }
        block_sizes.push(v as u32);
    }
    let mut policies = Vec::new();
    for p in &a.policy {
        policies.push(field::<Policy, _>("policy", p.parse())?);
    }
    let mut reds: Vec<Option<Redistribution>> = Vec::new();
    for r in &a.redistribution {
        reds.push(Some(field("redistribution", r.parse())?));
    }
    if reds.is_empty() {
        reds.push(None);
    }
    let mut thresholds = Vec::new();
    for t in &a.region_threshold {
        thresholds.push(if t == "none" {
            None
        } else {
            let s = field("region-threshold", parse_duration_s(t))?;
            Some((s * 1e12) as u64)
        });
    }
    for &r in &a.regions {
        if !(1..=8).contains(&r) {
            bail!("--regions: {r} must be 1..8");
        }
    }
    for &f in &a.fill {
        if !(0.0..1.0).contains(&f) {
            bail!("--fill: {f} must be in [0, 1)");
        }
    }
    if !(0.0..1.0).contains(&a.readonly_fraction) {
        bail!(
            "--readonly-fraction: {} must be in [0, 1)",
            a.readonly_fraction
        );
    }
    let mut out = Vec::new();
    for w in &workloads {
        for &bs in &block_sizes {
            for &fill in &a.fill {
                for &p in &policies {
                    for &red in &reds {
                        for &regions in &a.regions {
                            for &th in &thresholds {
                                for &seed in &a.seed {
                                    let mut c = SimConfig::flagship();
                                    c.device = device.clone();
                                    c.fill = fill;
                                    c.workload = w.clone();
                                    c.written_bytes = written;
                                    c.unit_bytes = unit as u32;
                                    c.arrival = arrival.clone();
                                    c.readonly_fraction = a.readonly_fraction;
                                    c.seed = seed;
                                    c.write_erase_ratio = a.write_erase_ratio;
                                    let f = &mut c.fms;
                                    f.block_size = bs;
                                    f.policy = p;
                                    f.redistribution =
                                        red.unwrap_or_else(|| sim::reproduce::paper_pairing(p));
                                    f.regions = regions;
                                    f.region_threshold_ps = th;
                                    f.readonly_separation = !a.no_readonly_separation;
                                    f.wear_threshold = a.wear_threshold;
                                    f.low_water = a.low_water;
                                    f.high_water = a.high_water;
                                    f.cat_age = cat_age;
                                    f.cb_age = cb_age;
                                    f.hot_half_life = a.hot_half_life;
                                    f.adaptive_window = a.adaptive_window;
                                    f.adaptive_threshold = a.adaptive_threshold;
                                    out.push(c);
                                }
                            }
                        }
                    }
                }
            }
        }
    }
    Ok(out)
}

pub fn run(a: SimArgs) -> Result<()> {
    let cfgs = configs(&a)?;
    let mut results = Vec::new();
    for r in sim::run_all(&cfgs) {
        results.push(r?);
    }
    emit(&results, &a.report)
}

/// Print results as the table / JSON / CSV the report flags ask for.
pub fn emit(results: &[SimResult], report: &ReportArgs) -> Result<()> {
    if let Some(path) = &report.csv {
        output::write_csv(path, results)?;
    }
    if report.json {
        return output::print_json(results);
    }
    let mut t = Table::new(&[
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
        "device time",
        "throughput",
        "greedy share",
    ]);
    for r in results {
        t.row(vec![
            r.workload.clone(),
            r.policy.clone(),
            r.redistribution.clone(),
            r.regions.to_string(),
            r.region_threshold_s
                .map_or("-".into(), |s| format!("{}s", output::trim_float(s))),
            format!("{:.2}", r.fill),
            r.erasures.to_string(),
            r.blocks_copied.to_string(),
            format!("{:.1}", r.cleaning_cost),
            format!("{:.3}", r.write_amplification),
            format!("{:.2}", r.wear_stddev),
            format!("{}-{}", r.wear_min, r.wear_max),
            format!("{:.1}s", r.device_time_s),
            format!("{}/s", output::bytes(r.throughput_bytes_per_s as u64)),
            r.policy_greedy_share
                .map_or("-".into(), |g| format!("{:.0}%", g * 100.0)),
        ]);
    }
    t.print()
}
