//! The simulation driver: format an FTL on a payload-less device, pre-fill it sequentially
//! (not counted), run a workload, and report the metrics of ARCHITECTURE.md. The FTL code
//! is the storage-mode code; only the buffers are `None`.

use anyhow::{bail, Context, Result};
use ftl::fms::{Fms, FmsConfig};
use ftl::BlockDevice;
use nand::{DeviceSpec, Nand};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Serialize;

use crate::workload::{Workload, WorkloadSpec};

/// When requests arrive.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub enum Arrival {
    /// Each request is issued when the previous one completes.
    Closed,
    /// Poisson arrivals at `rate` requests per second; the device idles between them.
    Poisson { rate: f64 },
    /// Each request at its trace time stamp (closed for requests without one).
    Trace,
}

impl Arrival {
    pub fn parse(s: &str) -> Result<Arrival, String> {
        if s == "closed" {
            return Ok(Arrival::Closed);
        }
        if s == "trace" {
            return Ok(Arrival::Trace);
        }
        match s.strip_prefix("poisson:").map(str::parse::<f64>) {
            // A mean gap past the clock's range cannot run a single request (QA stop 32:
            // poisson:1e-300 was refused only when its first request came, as "inf s").
            Some(Ok(rate)) if rate > 0.0 && rate.is_finite() && 1e12 / rate >= MAX_ARRIVAL_PS => {
                Err(format!(
                    "arrival '{s}': its mean gap between requests ({:.3e} s) is past the \
                     simulator's clock range ({:.0} s); the rate must be above {:.3e} requests/s",
                    1.0 / rate,
                    MAX_ARRIVAL_PS / 1e12,
                    1e12 / MAX_ARRIVAL_PS
                ))
            }
            Some(Ok(rate)) if rate > 0.0 && rate.is_finite() => Ok(Arrival::Poisson { rate }),
            _ => Err(format!(
                "arrival '{s}': expected closed, trace or poisson:RATE (requests per second, > 0)"
            )),
        }
    }
    pub fn label(&self) -> String {
        match self {
            Arrival::Closed => "closed".into(),
            Arrival::Poisson { rate } => format!("poisson:{rate}"),
            Arrival::Trace => "trace".into(),
        }
    }
}

/// What a request does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Op {
    Read,
    Write,
    Trim,
}

/// One host request, in 512-byte sectors.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Request {
    /// Arrival time in seconds from the start of the workload, when the source has one
    /// (traces); otherwise the configured arrival process decides.
    pub arrival_s: Option<f64>,
    pub op: Op,
    pub lba: u64,
    pub sectors: u32,
    /// A later piece of the trace record before it (a record split where the mapped space
    /// wraps or its renumbered blocks are not contiguous); false for a record's first piece
    /// and for synthetic requests.
    pub continues: bool,
}

/// Per-request latency from the device timing model, including waits behind earlier
/// requests and behind cleaning (microseconds, HDR histogram with 3 significant digits).
pub struct Latency {
    pub hist: hdrhistogram::Histogram<u64>,
}

impl Latency {
    pub fn new() -> Latency {
        Latency {
            // 1 µs .. the whole picosecond clock (u64, about 213 days), 3 significant
            // digits. The bound used to be ~11.6 days: a run whose queue grew longer
            // (arrivals faster than the device) reported every longer latency as 12.7 days.
            hist: hdrhistogram::Histogram::new_with_bounds(1, u64::MAX / 1_000_000, 3)
                .expect("valid histogram bounds"),
        }
    }
    /// Record a latency given in picoseconds.
    pub fn record(&mut self, ps: u64) {
        self.hist.saturating_record((ps / 1_000_000).max(1));
    }
}

impl Default for Latency {
    fn default() -> Self {
        Latency::new()
    }
}

/// One simulation run.
#[derive(Clone, Debug)]
pub struct SimConfig {
    pub device: DeviceSpec,
    /// The description file `device` was read from (`--device-file`), if any: the
    /// result's `device` label then says so (`NAME (from FILE)`), since a file can carry a
    /// preset's name with other figures.
    pub device_file: Option<String>,
    pub fms: FmsConfig,
    /// Fraction of the raw device capacity pre-filled sequentially.
    pub fill: f64,
    pub workload: WorkloadSpec,
    pub written_bytes: u64,
    pub unit_bytes: u32,
    pub arrival: Arrival,
    pub readonly_fraction: f64,
    pub seed: u64,
    pub write_erase_ratio: f64,
}

impl SimConfig {
    /// The flagship comparison's settings (Intel card, 4 KiB, 90 % fill, 192 MiB of 90/10).
    pub fn flagship() -> SimConfig {
        SimConfig {
            device: DeviceSpec::preset("intel-series2plus-24m").expect("preset"),
            device_file: None,
            fms: FmsConfig::default(),
            fill: 0.9,
            workload: WorkloadSpec::HotCold { x: 0.9, y: 0.1 },
            written_bytes: 192 << 20,
            unit_bytes: 4096,
            arrival: Arrival::Closed,
            readonly_fraction: 0.0,
            seed: 1,
            write_erase_ratio: 0.75,
        }
    }
}

/// What one run reports (JSON keys of the product contract).
#[derive(Clone, Debug, Serialize)]
pub struct SimResult {
    /// The device's name, or `NAME (from FILE)` for a device read from a description
    /// file (`--device-file`).
    pub device: String,
    pub workload: String,
    pub policy: String,
    pub redistribution: String,
    pub regions: u8,
    /// The DAC time threshold; null without one and with one region, where no threshold
    /// applies (the job's `region_threshold` option is null there too).
    pub region_threshold_s: Option<f64>,
    pub block_size: u32,
    pub fill: f64,
    pub written_bytes: u64,
    /// The request size of a synthetic workload; null for a trace, whose records bring
    /// their own sizes (as the job's `unit` option is null): a single figure would pair,
    /// say, a trace of 64 KiB requests with the 4 KiB default that it never used.
    pub unit_bytes: Option<u32>,
    pub arrival: String,
    pub readonly_fraction: f64,
    pub wear_threshold: Option<u32>,
    pub seed: u64,
    pub write_erase_ratio: f64,
    pub erasures: u64,
    pub blocks_copied: u64,
    pub cleaning_cost: f64,
    pub wear_stddev: f64,
    pub wear_min: u32,
    pub wear_max: u32,
    pub user_writes: u64,
    /// Flash block writes: `user_writes + blocks_copied + trim_list_slots`.
    pub flash_writes: u64,
    /// Spare mode: trim-list slots programmed for the workload's trims (one slot records a
    /// list's worth of unmapped blocks; the cleaner's rewrites of a live list count in
    /// `blocks_copied`). 0 in header mode, where a trim clears live bits in place.
    pub trim_list_slots: u64,
    /// Flash block writes (user block writes plus cleaning copies) per user block write.
    /// A request smaller than a block is one user block write (the FMS rewrites the whole
    /// block), so against host bytes the amplification is larger by block / request size.
    /// Null when there was no user write (a trace of reads and trims: 0 of 0 is no ratio,
    /// as `policy_greedy_share` has it; QA stop 27 found 0 beside a flash write).
    pub write_amplification: Option<f64>,
    /// Bytes the workload's write requests carried (the host's writes; for a trace, its
    /// write requests as mapped onto the simulated space).
    pub host_bytes_written: u64,
    /// Flash data bytes programmed per host byte written: `flash_writes` × `block_size`
    /// (every flash block write programs a whole logical block; headers, spare areas and
    /// index records not counted) / `host_bytes_written`. Equal to `write_amplification`
    /// when every request is a whole number of aligned blocks; larger by up to block /
    /// request size when requests are smaller than a block (each is a read-modify-write
    /// of a whole block). Null when no host byte was written.
    pub byte_write_amplification: Option<f64>,
    /// The device's busy time during the workload: the time its operations take (the
    /// requests' own and the cleaning they cause), without the idle time between requests
    /// that arrive on their own (poisson or trace arrivals). It does not depend on the
    /// arrival process: see `elapsed_time_s`.
    pub device_time_s: f64,
    /// Host bytes written (`written_bytes`) per second of device (busy) time: what the
    /// device sustains back to back, not the bandwidth over the simulated span. Null when
    /// the run took no device time (every operation timed at zero): undefined, not zero
    /// (QA stop 32: it read 0 B/s).
    pub throughput_bytes_per_s: Option<f64>,
    /// Simulated time from the workload's start (the end of the pre-fill) to the last
    /// request's completion, idle time between arrivals included: `device_time_s` for
    /// closed arrivals, at least the last arrival's time otherwise. Bandwidth or IOPS over
    /// the run are `written_bytes` or `requests` divided by it.
    pub elapsed_time_s: f64,
    pub policy_greedy_share: Option<f64>,
    pub wear_swaps: u64,
    /// Segments retired during the workload: erase blocks that went bad (worn out past
    /// their endurance, or a failed program or erase) and no longer hold data. A lifetime
    /// run (`--endurance`) loses capacity this way.
    pub retired_segments: u64,
    /// Spare-area reads of the device during the workload and the remount that
    /// `mount_time_s` measures (the FMS keeps its tables in RAM, so these are in practice
    /// the mount's scan of the segments' records); 0 without a spare area (header mode).
    pub spare_reads: u64,
    pub ram_bytes: u64,
    pub mount_time_s: f64,
    pub requests: u64,
    pub mean_latency_us: f64,
    pub p50_latency_us: f64,
    pub p99_latency_us: f64,
    pub max_latency_us: f64,
    pub blocks_per_segment: u32,
    pub logical_blocks: u64,
    /// Blocks read and trimmed by the workload (traces). `user_reads` counts the blocks its
    /// read requests cover, not the FMS's reads of the rest of a block that a write
    /// covers only partly (those are timed but are not the workload's).
    pub user_reads: u64,
    pub trims: u64,
    /// What was read from the trace (trace workloads only).
    pub trace: Option<crate::trace::TraceRunInfo>,
}

impl SimResult {
    /// The mean of several runs of one configuration (different seeds), as the 1999
    /// paper reports its figures ("averaging four runs"): every measured figure averaged,
    /// counts rounded to the nearest whole one; the options and labels (and the seed) are
    /// the first run's. A ratio that is null in any run is null. `runs` must not be empty.
    pub fn mean(runs: &[SimResult]) -> SimResult {
        let n = runs.len() as f64;
        let f = |g: fn(&SimResult) -> f64| runs.iter().map(g).sum::<f64>() / n;
        let u = |g: fn(&SimResult) -> u64| {
            (runs.iter().map(|r| g(r) as u128).sum::<u128>() as f64 / n).round() as u64
        };
        let opt = |g: fn(&SimResult) -> Option<f64>| {
            runs.iter().map(g).sum::<Option<f64>>().map(|s| s / n)
        };
        let mut m = runs[0].clone();
        m.erasures = u(|r| r.erasures);
        m.blocks_copied = u(|r| r.blocks_copied);
        m.cleaning_cost = f(|r| r.cleaning_cost);
        m.wear_stddev = f(|r| r.wear_stddev);
        m.wear_min = u(|r| r.wear_min as u64) as u32;
        m.wear_max = u(|r| r.wear_max as u64) as u32;
        m.user_writes = u(|r| r.user_writes);
        m.flash_writes = u(|r| r.flash_writes);
        m.trim_list_slots = u(|r| r.trim_list_slots);
        m.write_amplification = opt(|r| r.write_amplification);
        m.host_bytes_written = u(|r| r.host_bytes_written);
        m.byte_write_amplification = opt(|r| r.byte_write_amplification);
        m.device_time_s = f(|r| r.device_time_s);
        m.throughput_bytes_per_s = opt(|r| r.throughput_bytes_per_s);
        m.elapsed_time_s = f(|r| r.elapsed_time_s);
        m.policy_greedy_share = opt(|r| r.policy_greedy_share);
        m.wear_swaps = u(|r| r.wear_swaps);
        m.retired_segments = u(|r| r.retired_segments);
        m.spare_reads = u(|r| r.spare_reads);
        m.ram_bytes = u(|r| r.ram_bytes);
        m.mount_time_s = f(|r| r.mount_time_s);
        m.requests = u(|r| r.requests);
        m.mean_latency_us = f(|r| r.mean_latency_us);
        m.p50_latency_us = f(|r| r.p50_latency_us);
        m.p99_latency_us = f(|r| r.p99_latency_us);
        m.max_latency_us = f(|r| r.max_latency_us);
        m.user_reads = u(|r| r.user_reads);
        m.trims = u(|r| r.trims);
        m
    }

    /// The fields of a result that are not numbers (names, labels, the trace summary);
    /// every other field of [`SimResult::FIELDS`] is a metric.
    const TEXT_FIELDS: &'static [&'static str] = &[
        "device",
        "workload",
        "policy",
        "redistribution",
        "arrival",
        "trace",
    ];

    /// The numeric fields that are null where they do not apply (`Option`s).
    const NULLABLE_FIELDS: &'static [&'static str] = &[
        "region_threshold_s",
        "unit_bytes",
        "wear_threshold",
        "write_amplification",
        "byte_write_amplification",
        "throughput_bytes_per_s",
        "policy_greedy_share",
    ];

    /// Whether a result read back as JSON (a resumed sweep's file) has the types a
    /// result has: text fields strings, the trace an object or null, metrics numbers (null
    /// where a field may be, `NULLABLE_FIELDS`). The field that has not, and what it
    /// holds (QA stop 35: `"erasures": "x"` was taken, and printed as x).
    pub fn check_types(result: &serde_json::Map<String, serde_json::Value>) -> Result<(), String> {
        use serde_json::Value;
        for &k in SimResult::FIELDS {
            let Some(v) = result.get(k) else { continue };
            let ok = match k {
                "trace" => v.is_object() || v.is_null(),
                _ if SimResult::TEXT_FIELDS.contains(&k) => v.is_string(),
                _ if SimResult::NULLABLE_FIELDS.contains(&k) => v.is_number() || v.is_null(),
                _ => v.is_number(),
            };
            if !ok {
                let want = match k {
                    "trace" => "an object or null",
                    _ if SimResult::TEXT_FIELDS.contains(&k) => "a string",
                    _ if SimResult::NULLABLE_FIELDS.contains(&k) => "a number or null",
                    _ => "a number",
                };
                let shown = match v {
                    Value::String(t) if t.chars().count() > 40 => {
                        format!("a string of {} characters", t.chars().count())
                    }
                    _ => v.to_string(),
                };
                return Err(format!("`{k}` is {shown}, not {want}"));
            }
        }
        Ok(())
    }

    /// The numeric fields of a result (what a plot can draw on its y axis), in result
    /// order, so a plot's metrics are checked before any job runs. `policy_greedy_share`
    /// is numeric for the adaptive policy only. A test keeps this equal to the serialized
    /// numeric fields.
    pub fn metrics() -> impl Iterator<Item = &'static str> {
        SimResult::FIELDS
            .iter()
            .copied()
            .filter(|f| !SimResult::TEXT_FIELDS.contains(f))
    }

    /// Every field, in the order a result serializes them (`sim --json`, the columns of
    /// `--csv`); a sweep's CSV, made from results read back as JSON objects, orders its
    /// columns by it too. A test keeps it equal to the serialized order.
    pub const FIELDS: &'static [&'static str] = &[
        "device",
        "workload",
        "policy",
        "redistribution",
        "regions",
        "region_threshold_s",
        "block_size",
        "fill",
        "written_bytes",
        "unit_bytes",
        "arrival",
        "readonly_fraction",
        "wear_threshold",
        "seed",
        "write_erase_ratio",
        "erasures",
        "blocks_copied",
        "cleaning_cost",
        "wear_stddev",
        "wear_min",
        "wear_max",
        "user_writes",
        "flash_writes",
        "trim_list_slots",
        "write_amplification",
        "host_bytes_written",
        "byte_write_amplification",
        "device_time_s",
        "throughput_bytes_per_s",
        "elapsed_time_s",
        "policy_greedy_share",
        "wear_swaps",
        "retired_segments",
        "spare_reads",
        "ram_bytes",
        "mount_time_s",
        "requests",
        "mean_latency_us",
        "p50_latency_us",
        "p99_latency_us",
        "max_latency_us",
        "blocks_per_segment",
        "logical_blocks",
        "user_reads",
        "trims",
        "trace",
    ];

    /// Whether a run of `cfg` reports `metric` (one of [`SimResult::metrics`]) as a
    /// number: `policy_greedy_share` only under the adaptive policy (and null there too in a
    /// run too short to clean, which made no choice), `region_threshold_s` only when set
    /// with DAC regions, `wear_threshold` only when set (otherwise null), and `unit_bytes`
    /// for synthetic workloads only. A test keeps this equal to the serialized results.
    pub fn has_metric(cfg: &SimConfig, metric: &str) -> bool {
        match metric {
            "policy_greedy_share" => cfg.fms.policy == ftl::fms::select::Policy::Adaptive,
            "region_threshold_s" => cfg.fms.region_threshold_ps.is_some() && cfg.fms.regions > 1,
            "unit_bytes" => !matches!(cfg.workload, WorkloadSpec::Trace(_)),
            "wear_threshold" => cfg.fms.wear_threshold.is_some(),
            m => SimResult::metrics().any(|k| k == m),
        }
    }

    /// What a run needs to report `metric` as a number, for the metrics that are null in
    /// some runs (see [`SimResult::has_metric`]).
    pub fn metric_needs(metric: &str) -> Option<&'static str> {
        match metric {
            "policy_greedy_share" => Some("it is reported for the adaptive policy only"),
            "region_threshold_s" => {
                Some("it is reported only with a region threshold and DAC regions (regions > 1)")
            }
            "unit_bytes" => {
                Some("it is reported for synthetic workloads only (a trace brings its sizes)")
            }
            "wear_threshold" => Some("it is reported only with a wear threshold"),
            _ => None,
        }
    }
}

/// The latest arrival a run accepts, in picoseconds after the workload's start (the end
/// of the pre-fill): half the picosecond clock (u64, about 213 days), so the requests' own
/// device time, and the format and pre-fill before them, have the other half. Trace time
/// stamps count from the trace's first record, so a trace is accepted or refused whatever
/// device and pre-fill it runs on; `trace generate` writes only times that pass
/// [`arrival_in_range`].
pub const MAX_ARRIVAL_PS: f64 = (u64::MAX / 2) as f64;

/// Whether an arrival `after_ps` picoseconds after the workload's start is in the
/// simulator's clock range (see [`MAX_ARRIVAL_PS`]).
pub fn arrival_in_range(after_ps: f64) -> bool {
    after_ps < MAX_ARRIVAL_PS
}

/// The picoseconds after the workload's start at which a trace record `time_ns` after the
/// trace's first record arrives (how the driver reads trace time stamps).
pub fn trace_arrival_ps(time_ns: i64) -> f64 {
    time_ns as f64 / 1e9 * 1e12
}

/// How many `sectors_per_block`-sector blocks the request of `sectors` sectors at `lba`
/// touches.
fn blocks_covered(lba: u64, sectors: u32, sectors_per_block: u64) -> u64 {
    if sectors == 0 {
        return 0;
    }
    (lba + sectors as u64 - 1) / sectors_per_block - lba / sectors_per_block + 1
}

/// Where the requests come from: a synthetic generator or a trace.
enum Source {
    Synthetic { w: Workload, sectors: u32 },
    Trace(Box<crate::trace::TraceRequests>),
}

/// A formatted, pre-filled FMS in simulation mode, ready for a configuration's workload.
pub struct Prepared {
    pub fms: Fms,
    /// Blocks the workload may write (the pre-fill minus its read-only part).
    pub writable_blocks: u64,
    /// Request-sized units in the writable blocks (the workload's address space).
    pub units: u64,
}

/// The checks of a configuration that need no device or table: fill, read-only fraction
/// and request size, whether the fill fits in what the FMS exports, and the workload (the
/// written bytes a whole number of requests; a trace file that opens, with options of
/// its format). A grid checks every job with it before running any.
pub fn check(cfg: &SimConfig) -> Result<()> {
    check_setup(cfg)?;
    // The workload: a synthetic one's request count, a trace that can be opened with
    // options that apply to its format. A grid refuses a bad one before any job runs, in
    // one line, rather than failing every job that uses it with the same error.
    match &cfg.workload {
        WorkloadSpec::Trace(t) => {
            crate::trace::TraceReader::open(&t.path, &t.options)?;
        }
        _ => {
            let n = synthetic_requests(cfg)?;
            // Poisson arrivals whose requests would, on average, pass the clock's range
            // are refused before any job runs (review, stop 32: `poisson:1e-6` passed the
            // rate's own check and failed at its tenth request, after other jobs ran).
            if let Arrival::Poisson { rate } = cfg.arrival {
                let span_s = n as f64 / rate;
                if span_s * 1e12 >= MAX_ARRIVAL_PS {
                    bail!(
                        "arrival: {n} requests at {} per second arrive over about {:.3e} s, past \
                         the simulator's clock range ({:.0} s): raise the rate or write less",
                        nand::quoted_number(rate),
                        span_s,
                        MAX_ARRIVAL_PS / 1e12
                    );
                }
            }
        }
    }
    check_room(cfg)
}

/// [`check`] without the workload's: what [`prepare`] needs (a run counts its requests
/// itself, and `bench` splits a `phases:` workload over its warm-up too).
fn check_setup(cfg: &SimConfig) -> Result<()> {
    if !(0.0..1.0).contains(&cfg.fill) {
        bail!("fill: {} must be in [0, 1)", cfg.fill);
    }
    if !(0.0..1.0).contains(&cfg.readonly_fraction) {
        bail!(
            "readonly-fraction: {} must be in [0, 1)",
            cfg.readonly_fraction
        );
    }
    if cfg.unit_bytes == 0 || !cfg.unit_bytes.is_multiple_of(512) {
        bail!(
            "unit: {} must be a positive multiple of 512 bytes",
            cfg.unit_bytes
        );
    }
    cfg.device.validate().context("device")?;
    // The FMS's own refusals of the sizing (a device too large for its block numbers, no
    // room for data) come first, before the device model is allocated: the RAM check
    // leaves a run it cannot estimate to fail with its own error, and the device of such
    // a run can be larger than the machine.
    Fms::estimate_ram(&cfg.device.geometry, &cfg.fms).context("fms")?;
    let (exported, slots) = Fms::exported_blocks(&cfg.device.geometry, &cfg.fms).context("fms")?;
    let exported = cfg.fms.logical_blocks.unwrap_or(exported);
    let fill_blocks = fill_blocks(cfg);
    // (No room at all is the sizing's error above, which says what the reserve holds.)
    if exported > 0 && fill_blocks > exported {
        return Err(too_full(cfg, exported, slots));
    }
    Ok(())
}

/// The workload's room: the pre-fill must leave its writable blocks room for one request.
/// Part of [`check`] (so a grid refuses it before any job runs: QA stop 32 found a grid's
/// last job failing on it after the others had run and printed) and of [`prepare`].
fn check_room(cfg: &SimConfig) -> Result<()> {
    let fill_blocks = fill_blocks(cfg);
    let (ro_blocks, writable_blocks, units) = workload_space(cfg);
    let bs = cfg.fms.block_size as u64;
    if units == 0 {
        let ro = if ro_blocks > 0 {
            format!(", {ro_blocks} of them read-only (--readonly-fraction)")
        } else {
            String::new()
        };
        bail!(
            "fill: {} of {} bytes is {fill_blocks} blocks of {bs} bytes{ro}, leaving \
             {} writable bytes, less than one {}-byte request (--unit): raise --fill{}",
            cfg.fill,
            cfg.device.geometry.capacity_bytes(),
            writable_blocks * bs,
            cfg.unit_bytes,
            match (ro_blocks > 0, cfg.unit_bytes as u64 > bs) {
                (true, true) => ", or lower --readonly-fraction or --unit",
                (true, false) => " or lower --readonly-fraction",
                (false, true) => " or lower --unit",
                (false, false) => "",
            }
        );
    }
    Ok(())
}

/// The pre-fill does not fit in the `exported` blocks. Besides lowering the fill, the
/// message names the nearest block size at which the fill would fit, when one does: a
/// block that does not fill its pages (4 KiB in spare mode on 512-byte pages, where a
/// segment's header page costs a whole slot) can waste much of the capacity.
fn too_full(cfg: &SimConfig, exported: u64, slots: u32) -> anyhow::Error {
    let bs = cfg.fms.block_size;
    let segment = cfg.device.geometry.block_bytes();
    let other = fitting_block_size(cfg).map_or(String::new(), |(size, blocks)| {
        format!(
            ", or use --block-size {} (the FMS then exports {blocks} blocks of {size} bytes, \
             room for the fill's {})",
            size_text(size),
            fill_blocks_of(cfg, size)
        )
    });
    anyhow::anyhow!(
        "fill: {} of {} bytes is {} blocks of {bs} bytes but the FMS exports only {exported} \
         ({slots} data blocks per {segment}-byte segment, with its reserve); lower --fill{other}",
        cfg.fill,
        cfg.device.geometry.capacity_bytes(),
        fill_blocks(cfg),
    )
}

/// `4KiB` for whole KiB, bytes otherwise (as `--block-size` takes them).
fn size_text(bytes: u32) -> String {
    if bytes >= 1024 && bytes.is_multiple_of(1024) {
        format!("{}KiB", bytes / 1024)
    } else {
        bytes.to_string()
    }
}

/// The block size nearest to the configured one (a power of two from 512 bytes to
/// 64 KiB; the larger of two equally near) at which the FMS exports room for the
/// pre-fill, with the blocks it then exports; `None` when none does or the capacity is
/// set (`logical_blocks`).
pub fn fitting_block_size(cfg: &SimConfig) -> Option<(u32, u64)> {
    if cfg.fms.logical_blocks.is_some() {
        return None;
    }
    let now = cfg.fms.block_size;
    let distance = |size: u32| (size.ilog2() as i64 - now.max(1).ilog2() as i64).abs();
    (9..=16)
        .map(|bits| 1u32 << bits)
        .filter(|&size| size != now)
        .filter_map(|size| {
            let fms = FmsConfig {
                block_size: size,
                ..cfg.fms.clone()
            };
            Fms::estimate_ram(&cfg.device.geometry, &fms).ok()?;
            let (blocks, _) = Fms::exported_blocks(&cfg.device.geometry, &fms).ok()?;
            let need = fill_blocks_of(cfg, size);
            (blocks > 0 && need <= blocks).then_some((size, blocks))
        })
        .min_by_key(|&(size, _)| (distance(size), std::cmp::Reverse(size)))
}

/// The pre-fill's read-only blocks, its writable blocks, and the request-sized units in
/// the writable blocks (the workload's address space).
pub(crate) fn workload_space(cfg: &SimConfig) -> (u64, u64, u64) {
    let fill_blocks = fill_blocks(cfg);
    let ro_blocks = (fill_blocks as f64 * cfg.readonly_fraction).round() as u64;
    let writable_blocks = fill_blocks.saturating_sub(ro_blocks);
    let units = writable_blocks * cfg.fms.block_size as u64 / cfg.unit_bytes.max(1) as u64;
    (ro_blocks, writable_blocks, units)
}

/// Blocks the sequential pre-fill writes.
fn fill_blocks(cfg: &SimConfig) -> u64 {
    fill_blocks_of(cfg, cfg.fms.block_size)
}

/// Blocks the sequential pre-fill would write with blocks of `block_size` bytes.
fn fill_blocks_of(cfg: &SimConfig, block_size: u32) -> u64 {
    let capacity = cfg.device.geometry.capacity_bytes();
    ((capacity as f64 * cfg.fill) / block_size as f64).floor() as u64
}

/// Check a configuration (what [`check`] checks but the workload's request count, which
/// a run and `bench` check themselves), format the FMS on a
/// payload-less device and pre-fill it sequentially (not counted in any result).
pub fn prepare(cfg: &SimConfig) -> Result<Prepared> {
    check_setup(cfg)?;
    check_room(cfg)?;
    let SimConfig {
        device, fms: fcfg, ..
    } = cfg;
    let nand = Nand::payloadless(device.clone()).context("device")?;
    let mut fms = Fms::format(nand, fcfg.clone()).context("fms")?;
    let fill_blocks = fill_blocks(cfg);
    if fill_blocks > fms.logical_blocks() {
        // `check` counted every segment good.
        return Err(too_full(cfg, fms.logical_blocks(), fms.layout().slots));
    }
    let (ro_blocks, writable_blocks, units) = workload_space(cfg);
    if ro_blocks > 0 {
        fms.mark_readonly(writable_blocks as u32, ro_blocks as u32);
    }
    for lbn in 0..fill_blocks {
        fms.write_block(lbn as u32, None)
            .with_context(|| format!("pre-fill at block {lbn}"))?;
    }
    // The pre-fill is not the workload: the adaptive cleaner monitors the workload's
    // writes only.
    fms.restart_write_monitor();
    Ok(Prepared {
        fms,
        writable_blocks,
        units,
    })
}

/// How many requests a synthetic workload makes: `written_bytes` in `unit_bytes`-sized
/// requests, which must divide it (a remainder would be silently dropped).
pub fn synthetic_requests(cfg: &SimConfig) -> Result<u64> {
    let n = synthetic_request_count(cfg)?;
    cfg.workload
        .check_requests(n)
        .map_err(|e| anyhow::anyhow!("written: {e}"))?;
    Ok(n)
}

/// [`synthetic_requests`] without the check that a `phases:` workload gets a request per
/// phase (`bench` checks it over its warm-up and timed requests together).
pub fn synthetic_request_count(cfg: &SimConfig) -> Result<u64> {
    let unit = cfg.unit_bytes as u64;
    if unit == 0 || cfg.written_bytes == 0 || !cfg.written_bytes.is_multiple_of(unit) {
        bail!(
            "written: {} bytes is not a positive whole number of {}-byte requests (--unit)",
            cfg.written_bytes,
            cfg.unit_bytes
        );
    }
    Ok(cfg.written_bytes / unit)
}

/// Run one configuration.
pub fn run(cfg: &SimConfig) -> Result<SimResult> {
    run_with_progress(cfg, &|_| {})
}

/// Run one configuration, calling `progress` with the number of requests done now and
/// then (every 4096 requests and at the end).
pub fn run_with_progress(cfg: &SimConfig, progress: &(dyn Fn(u64) + Sync)) -> Result<SimResult> {
    let SimConfig {
        device, fms: fcfg, ..
    } = cfg;
    let bs = fcfg.block_size as u64;
    let requests = match cfg.workload {
        // A trace brings its own requests; `written` does not apply.
        WorkloadSpec::Trace(_) => 0,
        _ => synthetic_requests(cfg)?,
    };
    let Prepared {
        mut fms,
        writable_blocks,
        units,
    } = prepare(cfg)?;

    let s0 = fms.stats().clone();
    let spare0 = fms.nand().counters().spare_reads;
    let t0 = fms.nand().clock_ps();
    let mut idle_ps = 0u64;
    let mut arrival_ps = t0 as f64;
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(cfg.seed ^ 0xa77_1a1);
    let sectors = cfg.unit_bytes / 512;
    let sectors_per_block = bs / 512;
    // Blocks the workload's read requests cover (the FMS also reads the rest of a block
    // that a write or trim covers only partly, but those reads are not the workload's).
    let mut user_reads = 0u64;
    let mut host_bytes = 0u64;
    let mut lat = Latency::new();
    let mut source = match &cfg.workload {
        WorkloadSpec::Trace(t) => Source::Trace(Box::new(crate::trace::requests(
            t,
            writable_blocks * bs / 512,
            bs / 512,
        )?)),
        w => Source::Synthetic {
            w: Workload::new(w, units, requests, cfg.seed),
            sectors,
        },
    };
    loop {
        let req = match &mut source {
            Source::Synthetic { w, sectors } => match w.next() {
                Some(unit) => Request {
                    arrival_s: None,
                    op: Op::Write,
                    lba: unit * *sectors as u64,
                    sectors: *sectors,
                    continues: false,
                },
                None => break,
            },
            Source::Trace(t) => match t.next() {
                Some(r) => r?,
                None => break,
            },
        };
        // Arrival: the configured process, or the request's own time (traces), as
        // (picoseconds on the device's clock, picoseconds after the workload's start).
        let arrival = match (&cfg.arrival, req.arrival_s) {
            (Arrival::Poisson { rate }, _) => {
                let u: f64 = rng.gen_range(f64::MIN_POSITIVE..1.0);
                arrival_ps += -u.ln() / rate * 1e12;
                Some((arrival_ps, arrival_ps - t0 as f64))
            }
            (Arrival::Trace, Some(t)) => Some((t0 as f64 + t * 1e12, t * 1e12)),
            (Arrival::Trace, None) | (Arrival::Closed, _) => None,
        };
        if let Some((_, after)) = arrival.filter(|a| !arrival_in_range(a.1)) {
            bail!(
                "{}: request {} arrives {:.0} s into the run, past the simulator's clock range ({:.0} s of device time){}",
                cfg.workload.label(),
                lat.hist.len() + 1,
                after / 1e12,
                MAX_ARRIVAL_PS / 1e12,
                match cfg.arrival {
                    Arrival::Poisson { .. } => ": raise the --arrival rate or write less",
                    _ => "",
                }
            );
        }
        let arrival = arrival.map(|a| a.0);
        let now = fms.nand().clock_ps();
        let issued = match arrival {
            Some(a) if (now as f64) < a => {
                idle_ps += a as u64 - now;
                fms.nand_mut().advance_clock_to(a as u64);
                a as u64
            }
            Some(a) => a as u64,
            None => now,
        };
        match req.op {
            Op::Write => {
                host_bytes += req.sectors as u64 * 512;
                fms.write(req.lba, req.sectors, None)
            }
            Op::Read => {
                user_reads += blocks_covered(req.lba, req.sectors, sectors_per_block);
                fms.read(req.lba, req.sectors, None)
            }
            Op::Trim => fms.trim(req.lba, req.sectors),
        }
        .with_context(|| {
            format!(
                "{:?} of {} sectors at sector {}",
                req.op, req.sectors, req.lba
            )
        })?;
        let done = fms.nand().clock_ps();
        lat.record(done.saturating_sub(issued));
        // The run's own device time (with the format and pre-fill before it) has the half
        // of the picosecond clock that arrivals do not (see `MAX_ARRIVAL_PS`); past it the
        // clock would wrap, and device time, throughput and latency with it.
        if (done - idle_ps) as f64 >= MAX_ARRIVAL_PS {
            // A saturated clock (costs so large that it passed 2^64 ps) has no true figure.
            let busy = if done == u64::MAX {
                "more than 18446744 s (the clock's end)".to_string()
            } else {
                format!("{:.0} s", (done - idle_ps) as f64 / 1e12)
            };
            bail!(
                "{}: after request {} the device has been busy {busy} (format and pre-fill included), past the simulator's clock range ({:.0} s of device time); write less ({}) or lower the operation costs (--read-us, --program-us, --erase-us)",
                cfg.workload.label(),
                lat.hist.len(),
                MAX_ARRIVAL_PS / 1e12,
                match cfg.workload {
                    WorkloadSpec::Trace(_) => "--trace-limit",
                    _ => "--written",
                }
            );
        }
        if lat.hist.len().is_multiple_of(4096) {
            progress(lat.hist.len());
        }
    }
    progress(lat.hist.len());
    let trace_info = match &source {
        Source::Trace(t) => Some(t.info()),
        Source::Synthetic { .. } => None,
    };
    if let Some(t) = trace_info.as_ref().filter(|_| lat.hist.is_empty()) {
        // Nothing to measure: every figure would be 0 or undefined.
        let why = if t.skipped_bad_lines + t.skipped_zero_size + t.skipped_other_device == 0 {
            "the trace has no records".to_string()
        } else {
            format!(
                "every record was skipped: {} malformed, {} of size 0, {} on another disk or ASU",
                t.skipped_bad_lines, t.skipped_zero_size, t.skipped_other_device
            )
        };
        bail!("{}: no requests to simulate ({why})", t.path);
    }
    let s1 = fms.stats().clone();
    let busy_ps = fms.nand().clock_ps() - t0 - idle_ps;
    let elapsed_ps = fms.nand().clock_ps() - t0;

    let counts: Vec<u32> = fms
        .segments()
        .iter()
        .filter(|s| s.state != ftl::fms::SegState::Bad)
        .map(|s| s.erase_count)
        .collect();
    let wear = nand::WearStats::of(counts.into_iter());
    let erasures = s1.erasures - s0.erasures;
    let copied = s1.blocks_copied - s0.blocks_copied;
    let user = s1.user_writes - s0.user_writes;
    let flash_writes = s1.flash_writes() - s0.flash_writes();
    let trim_list_slots = s1.trim_lists - s0.trim_lists;
    let slots = fms.layout().slots;
    let device_time_s = busy_ps as f64 / 1e12;
    let greedy_share = fms.greedy_share();
    let ram = fms.ram_bytes();
    let logical = fms.logical_blocks();

    // Mount time: remount the medium and measure the device time it takes.
    let mut nand = fms.into_nand();
    nand.set_faults(Default::default());
    let mounted = Fms::mount(nand, fcfg.clone()).context("remount")?;
    let mount_time_s = mounted.mount_time_ps() as f64 / 1e12;
    let spare_reads = mounted.nand().counters().spare_reads - spare0;

    let written_bytes = trace_info
        .as_ref()
        .map_or(cfg.written_bytes, |t| t.write_bytes);
    Ok(SimResult {
        device: match &cfg.device_file {
            Some(f) => format!("{} (from {f})", device.name),
            None => device.name.clone(),
        },
        workload: cfg.workload.label(),
        policy: fcfg.policy.name().into(),
        redistribution: fcfg.redistribution_name().into(),
        regions: fcfg.regions,
        region_threshold_s: fcfg
            .region_threshold_ps
            .filter(|_| fcfg.regions > 1)
            .map(|p| p as f64 / 1e12),
        block_size: fcfg.block_size,
        fill: cfg.fill,
        written_bytes,
        unit_bytes: trace_info.is_none().then_some(cfg.unit_bytes),
        arrival: cfg.arrival.label(),
        readonly_fraction: cfg.readonly_fraction,
        wear_threshold: fcfg.wear_threshold,
        seed: cfg.seed,
        write_erase_ratio: cfg.write_erase_ratio,
        erasures,
        blocks_copied: copied,
        cleaning_cost: erasures as f64 + copied as f64 * cfg.write_erase_ratio / slots as f64,
        wear_stddev: wear.stddev,
        wear_min: wear.min,
        wear_max: wear.max,
        user_writes: user,
        // Spare mode programs a trim-list slot for each list's worth of blocks a trace
        // trims (header mode clears live bits, counted nowhere here).
        flash_writes,
        trim_list_slots,
        write_amplification: (user > 0).then(|| flash_writes as f64 / user as f64),
        host_bytes_written: host_bytes,
        byte_write_amplification: (host_bytes > 0)
            .then(|| flash_writes as f64 * bs as f64 / host_bytes as f64),
        device_time_s,
        throughput_bytes_per_s: (device_time_s > 0.0).then(|| written_bytes as f64 / device_time_s),
        elapsed_time_s: elapsed_ps as f64 / 1e12,
        policy_greedy_share: greedy_share,
        wear_swaps: s1.wear_swaps - s0.wear_swaps,
        retired_segments: s1.retired_segments - s0.retired_segments,
        spare_reads,
        ram_bytes: ram,
        mount_time_s,
        requests: lat.hist.len(),
        mean_latency_us: lat.hist.mean(),
        p50_latency_us: lat.hist.value_at_quantile(0.5) as f64,
        p99_latency_us: lat.hist.value_at_quantile(0.99) as f64,
        max_latency_us: lat.hist.max() as f64,
        blocks_per_segment: slots,
        logical_blocks: logical,
        user_reads,
        trims: s1.trims - s0.trims,
        trace: trace_info,
    })
}

/// Run many configurations in parallel (deterministic per configuration).
pub fn run_all(cfgs: &[SimConfig]) -> Vec<Result<SimResult>> {
    use rayon::prelude::*;
    cfgs.par_iter().map(run).collect()
}
