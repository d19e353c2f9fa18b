//! Simulation speed: user block writes per second at steady-state cleaning (Intel card,
//! 4 KiB blocks, 90 % fill, 90/10 locality), per policy. The pre-fill and format are outside
//! the measured loop: each iteration runs `WRITES` workload writes on a device that has
//! already been through `WARM` writes, so cleaning is in steady state.

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

fn bench(c: &mut Criterion) {
    let mut g = c.benchmark_group("fms_user_writes_90_10");
    g.sample_size(10);
    g.measurement_time(std::time::Duration::from_secs(4));
    g.throughput(Throughput::Elements(WRITES));
    for policy in Policy::ALL {
        g.bench_function(policy.name(), |b| {
            b.iter_batched(
                || prepared(policy),
                |(mut fms, mut w)| {
                    for _ in 0..WRITES {
                        fms.write_block(w.next().unwrap() as u32, None).unwrap();
                    }
                    fms
                },
                BatchSize::LargeInput,
            )
        });
    }
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
