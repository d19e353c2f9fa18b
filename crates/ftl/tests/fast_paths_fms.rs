//! The device model's fast program paths under the FMS's own calls (header entries, live-flag
//! clears of one byte, opaque and real data, spare records): an FMS on a device without a
//! fault plan (fast paths) and one on a device forced onto the general path (an armed fault
//! plan whose cut never comes: `power_cut_at = u64::MAX`) run the same random workload and
//! must agree on every result and byte read, the FMS's statistics and tables, the device's
//! counters and clock, and every byte, program count and block state of the medium, with
//! RAM and payload-less stores, in header mode (sub-page blocks too) and spare mode. The
//! payload-less FMS (no data, simulation mode) must also do the same work as the RAM one.
//! The payload-less FMS on the fast path also copies each cleaning run with one batched
//! device call (`Nand::opaque_batch`), which the armed fault plan declines: the two must
//! still agree.
//!
//! The FMS never breaks a flash rule, so this cannot see a rule the fast paths forget
//! (`crates/nand/tests/fast_paths.rs` drives the device directly for that); it checks that
//! the paths the FMS really takes leave the same medium and cost the same.

use ftl::fms::{Fms, FmsConfig};
use ftl::{BlockDevice, SECTOR};
use nand::{DeviceSpec, FaultPlan, Nand};
use rand::{Rng, RngCore, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

fn small(preset: &str, blocks: u32, pages_per_block: u32) -> DeviceSpec {
    let mut d = DeviceSpec::preset(preset).unwrap();
    d.geometry.blocks = blocks;
    d.geometry.pages_per_block = pages_per_block;
    d
}

fn configs() -> Vec<(DeviceSpec, u32)> {
    vec![
        (small("intel-series2plus-24m", 16, 8), 4096),
        (small("intel-series2plus-24m", 16, 8), 1024),
        (small("intel-series2plus-24m", 16, 8), 512),
        (small("nandsim-256m", 24, 32), 1024),
        (small("chang-kuo-16g", 24, 32), 512),
        (small("slc-large-1g", 16, 16), 2048),
        (small("mlc2-2g", 16, 16), 2048),
    ]
}

fn never_fires() -> FaultPlan {
    FaultPlan {
        power_cut_at: Some(u64::MAX),
        ..FaultPlan::default()
    }
}

fn device(spec: &DeviceSpec, payload: bool, general: bool) -> Nand {
    let mut n = if payload {
        Nand::ram(spec.clone()).unwrap()
    } else {
        Nand::payloadless(spec.clone()).unwrap()
    };
    if general {
        n.set_faults(never_fires());
    }
    n
}

/// Power off and on: the device reopened on its store (with its plan again), the FMS
/// mounted; the store's whole content is returned for comparison.
#[allow(clippy::type_complexity)]
fn remount(f: Fms, cfg: &FmsConfig, general: bool) -> (Fms, (Vec<u8>, Vec<u8>, Vec<String>)) {
    let spec = f.nand().spec().clone();
    let mut store = f.into_nand().into_store();
    let g = spec.geometry.clone();
    let raw = g.raw_page_size() as usize;
    let mut bytes = vec![0u8; g.pages() as usize * raw];
    let mut progs = Vec::new();
    for p in 0..g.pages() {
        let o = p as usize * raw;
        store.read(p, 0, &mut bytes[o..o + raw]).unwrap();
        progs.push(store.page_programs(p));
    }
    let blocks = (0..g.blocks)
        .map(|b| format!("{:?}", store.block_info(b)))
        .collect();
    let mut n = Nand::open(spec, store).unwrap();
    if general {
        n.set_faults(never_fires());
    }
    (Fms::mount(n, cfg.clone()).unwrap(), (bytes, progs, blocks))
}

fn same(a: &Fms, b: &Fms, what: &str) {
    assert_eq!(a.stats(), b.stats(), "{what}: FMS statistics");
    assert_eq!(a.tables_digest(), b.tables_digest(), "{what}: FMS tables");
    assert_eq!(a.nand().counters(), b.nand().counters(), "{what}: counters");
    assert_eq!(a.nand().clock_ps(), b.nand().clock_ps(), "{what}: clock");
    assert_eq!(a.nand().op_count(), b.nand().op_count(), "{what}: op count");
}

/// The four FMS instances of a run: RAM store fast and general, payload-less store fast
/// and general. The payload-less ones are given no data (simulation mode).
struct Four {
    f: Vec<Fms>,
}

const NAMES: [&str; 4] = [
    "ram fast",
    "ram general",
    "payload-less fast",
    "payload-less general",
];

fn payload(k: usize) -> bool {
    k < 2
}
fn general(k: usize) -> bool {
    k % 2 == 1
}

#[test]
fn fms_runs_the_same_on_the_fast_and_general_paths() {
    for (spec, block_size) in configs() {
        let cfg = FmsConfig {
            block_size,
            ..FmsConfig::default()
        };
        let what = format!("{} {}", spec.name, block_size);
        let mut four = Four {
            f: (0..4)
                .map(|k| Fms::format(device(&spec, payload(k), general(k)), cfg.clone()).unwrap())
                .collect(),
        };
        let sectors = four.f[0].sectors();
        let spb = block_size as u64 / SECTOR as u64;
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(block_size as u64);
        let mut data = Vec::new();
        let mut bufs = vec![Vec::new(); 4];
        // Cleanings over every mount (statistics restart at a mount).
        let mut cleanings = 0;
        for i in 0..four.f[0].logical_blocks() * 16 {
            let lba = if rng.gen_bool(0.7) {
                rng.gen_range(0..sectors / 5)
            } else {
                rng.gen_range(0..sectors)
            };
            let count = rng.gen_range(1..=2 * spb).min(sectors - lba) as u32;
            data.resize(count as usize * SECTOR, 0);
            let op = rng.gen_range(0..20);
            match op {
                // Nearly erased data, but never an all-0xFF block: in storage mode the
                // cleaner ends a copy run after one (fms.md, the run rule), which simulation
                // mode cannot see, so the RAM and payload-less runs would differ by design.
                0 => {
                    data.fill(0xFF);
                    data.iter_mut().step_by(SECTOR).for_each(|b| *b = 0x7F);
                }
                1 => data.fill(0),
                _ => rng.fill_bytes(&mut data),
            }
            if op == 19 {
                cleanings += four.f[0].stats().cleanings;
                let mut media = Vec::new();
                four.f = std::mem::take(&mut four.f)
                    .into_iter()
                    .enumerate()
                    .map(|(k, f)| {
                        let (f, m) = remount(f, &cfg, general(k));
                        media.push(m);
                        f
                    })
                    .collect();
                assert!(media[0] == media[1], "{what}: RAM medium at op {i}");
                assert!(
                    media[2] == media[3],
                    "{what}: payload-less medium at op {i}"
                );
                // Spare areas, program counts and block tables are kept by both stores.
                assert_eq!(media[0].1, media[2].1, "{what}: program counts at op {i}");
                assert_eq!(media[0].2, media[2].2, "{what}: block tables at op {i}");
            } else {
                let mut results = Vec::new();
                for (k, f) in four.f.iter_mut().enumerate() {
                    let buf = &mut bufs[k];
                    buf.resize(data.len(), 0);
                    let r = match op {
                        0..=11 => f.write(lba, count, payload(k).then_some(&data[..])),
                        12..=15 => f.read(lba, count, payload(k).then_some(&mut buf[..])),
                        16..=17 => f.trim(lba, count),
                        _ => f.flush(),
                    };
                    results.push(format!("{r:?}"));
                }
                assert!(
                    results.iter().all(|r| *r == results[0]),
                    "{what}: op {i}: {results:?}"
                );
                if (12..=15).contains(&op) {
                    assert_eq!(bufs[0], bufs[1], "{what}: read {i}");
                }
            }
            for (f, name) in four.f.iter().zip(NAMES).skip(1) {
                same(&four.f[0], f, &format!("{what}, {name}, op {i}"));
            }
        }
        cleanings += four.f[0].stats().cleanings;
        assert!(cleanings > 0, "{what}: the workload cleans");
    }
}
