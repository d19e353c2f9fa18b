//! Invariants every simulation result must satisfy, checked on a broad seeded sample of
//! configurations (every device preset, policy, redistribution, 1–8 DAC regions with and
//! without a threshold, fills, block sizes, request sizes smaller than, larger than and
//! not aligned to the block, read-only data, wear levelling, closed and Poisson arrivals,
//! every synthetic workload, traces). The configurations are built from the same option
//! text `sim` and `sweep` take ([`Spec`]), so what is checked is what users run.
//!
//! Besides the definitions (write amplification, cleaning cost), the checks tie the
//! numbers to each other through the device: the erase counts of the segments (their
//! count before the workload plus the run's erasures, against wear min / max / standard
//! deviation), the device time against the erase and program costs of the erasures and
//! flash writes, and the latencies against the device time.

use std::path::Path;

use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use sim::driver::{prepare, SimConfig, SimResult};
use sim::sweep::{Job, Spec};
use sim::trace::{Format, TraceWriter};

/// The jobs of a sweep file's text.
fn jobs(text: &str) -> Vec<Job> {
    Spec::from_toml_str(text, Path::new("invariants.toml"))
        .unwrap_or_else(|e| panic!("{e:#}\n{text}"))
        .expand()
        .unwrap_or_else(|e| panic!("{e:#}\n{text}"))
}

/// Erase counts of the usable segments after format and pre-fill (before the workload).
fn counts_before(cfg: &SimConfig) -> Vec<u32> {
    let p = prepare(cfg).unwrap();
    p.fms
        .segments()
        .iter()
        .filter(|s| s.state != ftl::fms::SegState::Bad)
        .map(|s| s.erase_count)
        .collect()
}

/// How many blocks of `bs` bytes a request of `unit` bytes at a multiple of `unit` covers,
/// at least and at most.
fn blocks_per_request(unit: u64, bs: u64) -> (u64, u64) {
    if unit.is_multiple_of(bs) {
        (unit / bs, unit / bs)
    } else if bs.is_multiple_of(unit) {
        (1, 1)
    } else {
        (unit.div_ceil(bs), unit.div_ceil(bs) + 1)
    }
}

fn close(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= rel * a.abs().max(b.abs()) + 1e-9
}

/// Check one result against its configuration; `what` names the run in failures.
fn check(what: &str, cfg: &SimConfig, r: &SimResult) {
    let synthetic = r.trace.is_none();
    let f = |cond: bool, msg: String| assert!(cond, "{what}: {msg}\n{r:#?}");
    // Definitions.
    f(
        r.flash_writes == r.user_writes + r.blocks_copied,
        "flash writes".into(),
    );
    // A ratio with user writes, null (no ratio) without.
    f(
        r.write_amplification
            == (r.user_writes > 0).then(|| r.flash_writes as f64 / r.user_writes as f64),
        "write amplification".into(),
    );
    let cost = r.erasures as f64
        + r.blocks_copied as f64 * r.write_erase_ratio / r.blocks_per_segment as f64;
    f(
        close(r.cleaning_cost, cost, 1e-12),
        format!("cleaning cost {cost}"),
    );
    f(r.write_erase_ratio == cfg.write_erase_ratio, "ratio".into());
    // Wear against the segments' erase counts: before the workload plus the erasures.
    let before = counts_before(cfg);
    let n = before.len() as f64;
    let sum = before.iter().map(|&c| c as u64).sum::<u64>() + r.erasures;
    let mean = sum as f64 / n;
    let (lo, hi) = (r.wear_min as f64, r.wear_max as f64);
    f(
        lo <= mean + 1e-9 && mean <= hi + 1e-9,
        format!("wear mean {mean}"),
    );
    f(
        r.wear_max >= before.iter().copied().max().unwrap_or(0),
        "erase counts only grow".into(),
    );
    // Bhatia–Davis: the variance is at most (max − mean)(mean − min).
    let var_max = (hi - mean) * (mean - lo);
    f(
        r.wear_stddev >= 0.0 && r.wear_stddev.powi(2) <= var_max * (1.0 + 1e-9) + 1e-9,
        format!("wear sd {} vs bound {}", r.wear_stddev, var_max.sqrt()),
    );
    f(
        (r.wear_stddev == 0.0) == (r.wear_min == r.wear_max),
        "wear sd 0 iff min = max".into(),
    );
    if cfg.fms.wear_threshold.is_none() {
        f(
            r.wear_swaps == 0,
            "wear swaps without wear levelling".into(),
        );
    }
    // Policy-specific fields.
    match r.policy_greedy_share {
        Some(g) => f(
            r.policy == "adaptive" && (0.0..=1.0).contains(&g),
            format!("greedy share {g}"),
        ),
        // Adaptive has no share before its first cleaning (0 of 0 choices).
        None => f(
            r.policy != "adaptive" || r.erasures == 0,
            "adaptive cleaned without greedy share".into(),
        ),
    }
    // Requests and block writes.
    let bs = cfg.fms.block_size as u64;
    if synthetic {
        let requests = cfg.written_bytes / cfg.unit_bytes as u64;
        f(r.requests == requests, "requests".into());
        f(r.written_bytes == cfg.written_bytes, "written bytes".into());
        let (a, b) = blocks_per_request(cfg.unit_bytes as u64, bs);
        f(
            r.user_writes >= requests * a && r.user_writes <= requests * b,
            format!("user writes for {requests} requests of {a}..{b} blocks"),
        );
        f(r.user_reads == 0 && r.trims == 0, "reads or trims".into());
    }
    f(
        r.logical_blocks * bs <= cfg.device.geometry.capacity_bytes(),
        "logical space".into(),
    );
    // Device time: at least the erasures' and the flash writes' own costs.
    let t = &cfg.device.timing;
    let ps = cfg.device.geometry.page_size as u64;
    let programs = bs.div_ceil(ps).max(1) as f64;
    let floor_s = (r.erasures as f64 * t.erase_us
        + r.flash_writes as f64
            * (programs * t.program_us + bs as f64 * t.program_ns_per_byte / 1e3))
        / 1e6;
    f(
        r.device_time_s >= floor_s * (1.0 - 1e-9),
        format!("device time below the floor {floor_s}"),
    );
    if r.requests > 0 {
        f(r.device_time_s > 0.0, "no device time".into());
        f(
            close(
                r.throughput_bytes_per_s.unwrap_or(f64::NAN),
                r.written_bytes as f64 / r.device_time_s,
                1e-12,
            ),
            "throughput".into(),
        );
        // Latencies: ordered; their sum is the busy time when each request waits for the
        // one before (closed), at least the busy time otherwise (queueing adds to it). The
        // histogram keeps 3 significant digits.
        f(
            r.p50_latency_us <= r.p99_latency_us && r.p99_latency_us <= r.max_latency_us,
            "percentiles".into(),
        );
        f(
            r.mean_latency_us <= r.max_latency_us * 1.001,
            "mean above max".into(),
        );
        let total_s = r.mean_latency_us * r.requests as f64 / 1e6;
        let slack = 0.002 * r.device_time_s + r.requests as f64 * 2e-6;
        if r.arrival == "closed" {
            f(
                (total_s - r.device_time_s).abs() <= slack,
                format!("closed: latencies sum to {total_s} s"),
            );
        } else {
            f(
                total_s >= r.device_time_s - slack,
                format!("latencies sum to {total_s} s, less than the busy time"),
            );
        }
    }
    f(
        r.ram_bytes >= r.logical_blocks * 24,
        "RAM below the tables".into(),
    );
    f(r.mount_time_s > 0.0, "mount time".into());
}

/// A seeded sample of the option space, each run checked.
#[test]
fn every_result_satisfies_the_invariants() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(2026);
    let devices = [
        "intel-series2plus-24m",
        "nandsim-256m",
        "chang-kuo-16g",
        "slc-large-1g",
        "mlc2-2g",
    ];
    let policies = ["greedy", "cost-benefit", "cat", "adaptive"];
    let redist = ["paper", "m1", "m2", "m3", "m4", "m5", "m6"];
    let workloads = [
        "sequential",
        "random",
        "hotcold:90/10",
        "hotcold:60/40",
        "hotcold:50/50",
        "phases:hotcold:95/5,random,sequential",
        "phases:random",
    ];
    let mut ran = 0;
    let mut refused = 0;
    let mut cleaned = 0;
    for i in 0..600 {
        let device = *devices.choose(&mut rng).unwrap();
        let block_size = *[512u32, 1024, 2048, 4096].choose(&mut rng).unwrap();
        let unit = *[512u32, 1024, 4096, 6144, 8192, 12288]
            .choose(&mut rng)
            .unwrap();
        let regions: u8 = if rng.gen_bool(0.4) {
            rng.gen_range(2..=8)
        } else {
            1
        };
        let mut text = format!(
            "device = \"{device}\"\nblocks = {}\nblock_size = {block_size}\nunit = {unit}\n\
             written = {}\npolicy = \"{}\"\nfill = {}\nworkload = \"{}\"\nseed = {}\n",
            rng.gen_range(48..=160),
            unit as u64 * rng.gen_range(64..=1024),
            policies.choose(&mut rng).unwrap(),
            [0.3, 0.5, 0.7, 0.8, 0.85, 0.9].choose(&mut rng).unwrap(),
            workloads.choose(&mut rng).unwrap(),
            rng.gen_range(1..1000),
        );
        if regions > 1 {
            text += &format!("regions = {regions}\n");
            if rng.gen_bool(0.5) {
                text += &format!(
                    "region_threshold = \"{}\"\n",
                    ["1s", "30m"].choose(&mut rng).unwrap()
                );
            }
        } else {
            text += &format!(
                "redistribution = \"{}\"\n",
                redist.choose(&mut rng).unwrap()
            );
        }
        if rng.gen_bool(0.3) {
            text += &format!(
                "readonly_fraction = {}\n",
                [0.2, 0.5].choose(&mut rng).unwrap()
            );
        }
        if rng.gen_bool(0.3) {
            text += &format!("wear_threshold = {}\n", [2, 10].choose(&mut rng).unwrap());
        }
        if rng.gen_bool(0.3) {
            text += &format!(
                "arrival = \"{}\"\n",
                ["poisson:20", "poisson:2000"].choose(&mut rng).unwrap()
            );
        }
        if rng.gen_bool(0.2) {
            text += "write_erase_ratio = 2.0\n";
        }
        let job = &jobs(&text)[0];
        match sim::run(&job.config) {
            Ok(r) => {
                check(&format!("sample {i}:\n{text}"), &job.config, &r);
                ran += 1;
                cleaned += u32::from(r.erasures > 0 && r.blocks_copied > 0);
            }
            // A fill the device's FMS cannot hold, no writable block, or a block smaller
            // than a NAND page: refused.
            Err(e)
                if format!("{e:#}").starts_with("fill: ")
                    || format!("{e:#}").contains("must be a multiple of the") =>
            {
                refused += 1
            }
            Err(e) => panic!("sample {i}: {e:#}\n{text}"),
        }
    }
    assert!(ran >= 300, "only {ran} of 600 ran ({refused} refused)");
    assert!(cleaned >= 100, "only {cleaned} runs cleaned");
}

/// The same checks on trace workloads (reads, trims, partial and unaligned requests,
/// addresses past the simulated space), with the trace's time stamps and closed.
#[test]
fn trace_results_satisfy_the_invariants() {
    use sim::driver::Op;
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("mixed.fio");
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
    let mut w = TraceWriter::create(&p, Format::Fio, false).unwrap();
    let mut t = 0i64;
    for _ in 0..6000 {
        t += rng.gen_range(0..20_000_000);
        let op = match rng.gen_range(0..10) {
            0..=5 => Op::Write,
            6..=8 => Op::Read,
            _ => Op::Trim,
        };
        let lba = if rng.gen_bool(0.8) {
            rng.gen_range(0..4000) * 8
        } else {
            rng.gen_range(0..1u64 << 30)
        };
        let sectors = *[1u32, 3, 8, 16, 64].choose(&mut rng).unwrap();
        w.write(&sim::trace::Record {
            time_ns: t,
            op,
            lba,
            sectors,
        })
        .unwrap();
    }
    w.finish().unwrap();
    let text = format!(
        "workload = \"trace:{}\"\nblocks = 96\npolicy = [\"greedy\", \"cat\", \"adaptive\"]\n\
         fill = [0.5, 0.85]\nblock_size = [2048, 4096]\narrival = [\"trace\", \"closed\"]\n\
         trace_map = [\"modulo\", \"compact\"]\n",
        p.display()
    );
    let jobs = jobs(&text);
    assert_eq!(jobs.len(), 48);
    for (j, r) in jobs.iter().zip(sim::run_all(
        &jobs.iter().map(|j| j.config.clone()).collect::<Vec<_>>(),
    )) {
        let r = r.unwrap();
        let info = r.trace.as_ref().unwrap();
        assert_eq!(r.requests, 6000 + info.split_requests, "{:?}", j.options);
        assert!(r.user_writes >= info.write_requests, "{:?}", j.options);
        assert!(r.user_reads >= info.read_requests, "{:?}", j.options);
        assert_eq!(r.written_bytes, info.write_bytes);
        check(&format!("{:?}", j.options), &j.config, &r);
    }
}

/// Same seed, same bytes: every result of a small grid is reproduced exactly, in any
/// order and on any number of threads.
#[test]
fn results_are_deterministic() {
    let text = "blocks = 64\nwritten = \"2MiB\"\npolicy = [\"greedy\", \"adaptive\"]\n\
                regions = [1, 3]\nfill = [0.6, 0.8]\narrival = [\"closed\", \"poisson:50\"]\n";
    let jobs = jobs(text);
    let cfgs: Vec<SimConfig> = jobs.iter().map(|j| j.config.clone()).collect();
    let par: Vec<String> = sim::run_all(&cfgs)
        .into_iter()
        .map(|r| serde_json::to_string(&r.unwrap()).unwrap())
        .collect();
    for (i, c) in cfgs.iter().enumerate().rev() {
        let one = serde_json::to_string(&sim::run(c).unwrap()).unwrap();
        assert_eq!(one, par[i], "{:?}", jobs[i].options);
    }
}

/// `erasures` is exactly the growth of the segments' erase counts: every erase of the
/// cleaner, the index log and wear levelling is counted once (DAC regions, wear levelling
/// and read-only data included). The workload is driven here as the driver does, so the
/// segments can be read after it.
#[test]
fn erasures_are_the_growth_of_the_erase_counts() {
    use ftl::BlockDevice;
    let text = "blocks = 96\npolicy = [\"greedy\", \"cat\", \"adaptive\"]\nregions = [1, 4]\n\
                wear_threshold = [\"none\", 2]\nreadonly_fraction = [0, 0.3]\n\
                fill = [0.6, 0.85]\nunit = [2048, 4096]\n\
                device = [\"intel-series2plus-24m\", \"nandsim-256m\", \"mlc2-2g\"]\n";
    let sum = |f: &ftl::fms::Fms| {
        f.segments()
            .iter()
            .map(|s| s.erase_count as u64)
            .sum::<u64>()
    };
    let mut checked = 0;
    for j in jobs(text) {
        let Ok(p) = prepare(&j.config) else {
            continue;
        };
        let mut fms = p.fms;
        let (e0, c0) = (fms.stats().erasures, sum(&fms));
        let spb = j.config.unit_bytes / 512;
        let w = sim::Workload::new(&j.config.workload, p.units, 10_000, 1);
        for u in w {
            fms.write(u * spb as u64, spb, None).unwrap();
        }
        let (e1, c1) = (fms.stats().erasures, sum(&fms));
        assert!(e1 > e0, "{:?}", j.options);
        assert_eq!(e1 - e0, c1 - c0, "{:?}", j.options);
        checked += 1;
    }
    assert!(checked >= 150, "{checked}");
}
