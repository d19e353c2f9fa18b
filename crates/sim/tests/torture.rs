//! Power-loss torture of the Flash Memory Server on devices derived from the presets: every
//! cut point on a tiny NOR-style (Intel) device, seeded samples on NAND (nandsim, MLC).

use ftl::fms::FmsConfig;
use nand::DeviceSpec;
use sim::torture::{self, Cuts, TortureConfig, TortureReport};

fn cfg(preset: &str, cuts: Cuts, seed: u64) -> TortureConfig {
    let mut c = TortureConfig::new(DeviceSpec::preset(preset).unwrap());
    c.cuts = cuts;
    c.seed = seed;
    c
}

fn run(c: &TortureConfig) -> TortureReport {
    let r = torture::run(c).unwrap();
    eprintln!(
        "{}: {} segments x {} pages, {}-byte blocks ({} mode), {} logical blocks, {} device ops, {} cut points, {} cleanings, {} violations, {:.1} s",
        r.device,
        r.segments,
        r.pages_per_block,
        r.block_size,
        r.record_mode,
        r.logical_blocks,
        r.ops,
        r.cut_points,
        r.cleanings,
        r.violations,
        r.elapsed_s
    );
    for f in r.failures.iter().take(20) {
        eprintln!("  {f}");
    }
    r
}

fn assert_clean(r: &TortureReport) {
    assert!(
        r.cleanings >= 10,
        "the workload must make the cleaner run ({} cleanings)",
        r.cleanings
    );
    assert_eq!(
        r.violations,
        0,
        "{} violations, first: {}",
        r.violations,
        r.failures.first().map_or("", |s| s.as_str())
    );
}

#[test]
fn intel_every_cut_point() {
    let mut c = cfg("intel-series2plus-24m", Cuts::Every, 1);
    c.segments = 12;
    let r = run(&c);
    assert_eq!((r.segments, r.pages_per_block, r.block_size), (12, 8, 4096));
    assert_eq!(r.record_mode, "header");
    assert_eq!(r.cut_points, r.ops, "every program and erase is cut");
    assert!(r.ops > 1000, "{} ops", r.ops);
    assert_clean(&r);
}

#[test]
fn nandsim_sampled_cut_points() {
    let r = run(&cfg("nandsim-256m", Cuts::Sample(150), 2));
    assert_eq!(r.record_mode, "spare");
    assert_eq!(r.cut_points, 150);
    assert_clean(&r);
}

#[test]
fn mlc2_sampled_cut_points() {
    let r = run(&cfg("mlc2-2g", Cuts::Sample(150), 3));
    assert_eq!(r.record_mode, "spare");
    assert_eq!(r.cut_points, 150);
    assert_clean(&r);
}

#[test]
fn intel_dac_wear_levelling_sampled() {
    // DAC regions and wear swaps go through the same recovery.
    let mut c = cfg("intel-series2plus-24m", Cuts::Sample(200), 4);
    c.fms = FmsConfig {
        regions: 4,
        wear_threshold: Some(3),
        ..c.fms.clone()
    };
    c.segments = 20;
    assert_clean(&run(&c));
}

#[test]
fn reports_are_deterministic_across_threads() {
    let mut c = cfg("nandsim-256m", Cuts::Sample(20), 9);
    c.ops = 120;
    c.threads = 1;
    let a = torture::run(&c).unwrap();
    c.threads = 3;
    let b = torture::run(&c).unwrap();
    assert_eq!(
        (a.ops, a.cut_points, a.violations, &a.failures),
        (b.ops, b.cut_points, b.violations, &b.failures)
    );
}
