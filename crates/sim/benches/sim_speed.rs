//! Simulation speed: user block writes per second at steady-state cleaning (Intel card,
//! 4 KiB blocks, 90 % fill, 90/10 locality), per policy with its Table 4 pairing. The
//! pre-fill and a warm-up (`sim::speed::steady`, the same preparation as `flashkit bench`)
//! are outside the measured loop, which issues `WRITES` workload writes.
//!
//! A second group reports the same runs in flash block writes per second (user writes
//! plus cleaning copies; the count comes from one calibration run, the simulation being
//! deterministic), the unit simulators without a device model are usually quoted in.

use criterion::{criterion_group, criterion_main, BatchSize, Criterion, Throughput};
use ftl::fms::select::Policy;
use sim::speed::{steady, Steady};
use sim::SimConfig;

const WRITES: u64 = 20_000;
const WARM_BYTES: u64 = 20_000 * 4096;

fn config(policy: Policy) -> SimConfig {
    let mut cfg = SimConfig::flagship();
    cfg.fms.policy = policy;
    cfg.fms.redistribution = sim::reproduce::paper_pairing(policy);
    cfg
}

fn prepared(policy: Policy) -> Steady {
    // The flagship's one-phase workload: as many timed requests as criterion asks for.
    steady(&config(policy), WARM_BYTES, u64::MAX).unwrap()
}

/// Flash block writes (user writes + copies) one measured iteration makes.
fn flash_writes(policy: Policy) -> u64 {
    let mut s = prepared(policy);
    let s0 = s.fms.stats().clone();
    s.write(WRITES).unwrap();
    let s1 = s.fms.stats();
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
                    |mut s| {
                        s.write(WRITES).unwrap();
                        s
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
