//! Pinned results. The simulator is deterministic, and changes made for speed (batching,
//! data layout, arithmetic) must not move a single erasure: the order of device operations
//! and the clock at each decision feed the age-based policies, so a speed change that
//! reorders them changes results without breaking any invariant. These runs pin erasures
//! and copies of each policy on small versions of the papers' workloads. A deliberate
//! change of behaviour updates the numbers here, and says why in its commit. (Stop 28:
//! the adaptive rows, when the write monitor stopped counting the pre-fill. Stop 29: the
//! cost-benefit rows (M4), when M4's average utilisation became the whole medium's.)

use ftl::fms::select::Policy;
use sim::driver::{run, Arrival, SimConfig};
use sim::WorkloadSpec;

fn pinned(workload: &str, arrival: Arrival, regions: u8, expect: &[(Policy, u64, u64)]) {
    let mut got = Vec::new();
    for &(policy, _, _) in expect {
        let mut cfg = SimConfig::flagship();
        cfg.workload = WorkloadSpec::parse(workload).unwrap();
        cfg.written_bytes = 48 << 20;
        cfg.arrival = arrival.clone();
        cfg.fms.policy = policy;
        cfg.fms.redistribution = sim::reproduce::paper_pairing(policy);
        cfg.fms.regions = regions;
        if regions > 1 {
            // 30 minutes: about 3600 writes at 2 per second.
            cfg.fms.region_threshold_ps = Some(30 * 60 * 1_000_000_000_000);
        }
        let r = run(&cfg).unwrap();
        got.push((policy, r.erasures, r.blocks_copied));
    }
    assert_eq!(
        got, expect,
        "{workload}, {regions} region(s): (policy, erasures, copied)"
    );
}

#[test]
fn hot_cold_90_10_results_are_pinned() {
    pinned(
        "hotcold:90/10",
        Arrival::Closed,
        1,
        &[
            (Policy::Greedy, 2907, 78150),
            (Policy::CostBenefit, 2177, 55509),
            (Policy::Cat, 1590, 37289),
            (Policy::Adaptive, 1590, 37289),
        ],
    );
}

#[test]
fn random_results_are_pinned() {
    pinned(
        "random",
        Arrival::Closed,
        1,
        &[
            (Policy::Greedy, 2866, 76880),
            (Policy::CostBenefit, 3131, 85046),
            (Policy::Cat, 3061, 82880),
            (Policy::Adaptive, 2953, 79569),
        ],
    );
}

#[test]
fn dac_phases_with_poisson_arrivals_are_pinned() {
    pinned(
        "phases:hotcold:90/10,random",
        Arrival::parse("poisson:2").unwrap(),
        4,
        &[
            (Policy::Greedy, 2928, 78762),
            (Policy::CostBenefit, 2589, 68216),
            (Policy::Cat, 2629, 69495),
            (Policy::Adaptive, 2568, 67539),
        ],
    );
}
