//! Simulation speed: user block writes per second at steady-state cleaning (Intel card,
//! 4 KiB blocks, 90 % fill, 90/10 locality), per policy. The pre-fill and format are outside
//! the measured loop: each iteration runs `WRITES` workload writes on a device that has
//! already been through `WARM` writes, so cleaning is in steady state.
//!
//! A second group reports the same runs in flash block writes per second (user writes
//! plus cleaning copies; the count comes from one calibration run, the simulation being
//! deterministic), the unit simulators without a device model are usually quoted in.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use ftl::fms::select::Policy;
use ftl::fms::{Fms, FmsConfig};
use nand::{DeviceSpec, Nand};
use sim::{Workload, WorkloadSpec};

const WRITES: u64 = 20_000;
const WARM: u64 = 20_000;

fn prepared(policy: Policy) -> (Fms, Workload) {
    let spec = DeviceSpec::preset("intel-series2plus-24m").unwrap();
    let cfg = FmsConfig {
        policy,
        redistribution: sim::reproduce::paper_pairing(policy),
        ..FmsConfig::default()
    };
    let mut fms = Fms::format(Nand::payloadless(spec.clone()).unwrap(), cfg).unwrap();
    let fill = (spec.geometry.capacity_bytes() as f64 * 0.9 / 4096.0) as u64;
    for l in 0..fill {
        fms.write_block(l as u32, None).unwrap();
    }
    let mut w = Workload::new(&WorkloadSpec::HotCold { x: 0.9, y: 0.1 }, fill, u64::MAX, 1);
    for _ in 0..WARM {
        fms.write_block(w.next().unwrap() as u32, None).unwrap();
    }
    (fms, w)
}

fn run(fms: &mut Fms, w: &mut Workload) {
    for _ in 0..WRITES {
        fms.write_block(w.next().unwrap() as u32, None).unwrap();
    }
}

/// Flash block writes (user writes + copies) one measured iteration makes.
fn flash_writes(policy: Policy) -> u64 {
    let (mut fms, mut w) = prepared(policy);
    let s0 = fms.stats().clone();
    run(&mut fms, &mut w);
    let s1 = fms.stats();
    (s1.user_writes - s0.user_writes) + (s1.blocks_copied - s0.blocks_copied)
}

fn bench(c: &mut Criterion) {
    for (group, flash) in [
        ("fms_user_writes_90_10", false),
        ("fms_flash_block_writes_90_10", true),
    ] {
        let mut g = c.benchmark_group(group);
        g.sample_size(10);
        g.measurement_time(std::time::Duration::from_secs(4));
        for policy in Policy::ALL {
            let n = if flash { flash_writes(policy) } else { WRITES };
            g.throughput(Throughput::Elements(n));
            g.bench_function(policy.name(), |b| {
                b.iter_batched(
                    || prepared(policy),
                    |(mut fms, mut w)| {
                        run(&mut fms, &mut w);
                        fms
                    },
                    BatchSize::LargeInput,
                )
            });
        }
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);
