//! The device model's fast program paths under the FMS's own calls (header entries, live-flag
//! clears of one byte, opaque and real data, spare records): an FMS on a device without a
//! fault plan (fast paths) and one on a device forced onto the general path (an armed fault
//! plan whose cut never comes: `power_cut_at = u64::MAX`) run the same random workload and
//! must agree on every result and byte read, the FMS's statistics and tables, the device's
//! counters and clock, and every byte, program count and block state of the medium, with
//! RAM and payload-less stores, in header mode (sub-page blocks too) and spare mode. The
//! payload-less FMS (no data, simulation mode) must also do the same work as the RAM one.
//! The payload-less FMS on the fast path also copies each cleaning run with one batched
//! device call (`Nand::opaque_batch`, or `Nand::opaque_page_batch` when slots are whole
//! pages), which the armed fault plan declines: the two must still agree.
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

/// A header-mode device (NOR-style, nop 0, any page order) shrunk to `blocks` erase
/// blocks of `pages_per_block` pages of `page_size` bytes.
fn nor(page_size: u32, pages_per_block: u32, blocks: u32) -> DeviceSpec {
    let mut d = small("intel-series2plus-24m", blocks, pages_per_block);
    d.geometry.page_size = page_size;
    d.name = format!("nor {page_size}x{pages_per_block}x{blocks}");
    d
}

/// The cleaner's batched copy runs (`Nand::opaque_batch` and `Nand::opaque_page_batch`
/// in header mode, `Nand::opaque_page_batch_spare` in spare mode, simulation mode) and
/// spare mode's slots of several pages programmed in one call, against the
/// same runs made one call at a time (a payload-less device whose armed, never-firing
/// fault plan declines every batch), over every policy, redistribution M1–M6, DAC regions
/// with region selection and time thresholds, read-only separation and wear swaps, on
/// header-mode devices (pages smaller, equal and larger than blocks, page sizes not powers
/// of two, slots across pages) and spare-mode presets (slots of one page and of several,
/// segment summaries; mlc2-2g programs in order), with mounts in between (in-order
/// devices without a page budget are refused by `Layout::new`): every result, the FMS's
/// statistics and tables, the device's counters, clock and erase counts must agree, and
/// at every mount the media (every raw page and its program count).
#[test]
fn batched_copy_runs_agree_with_one_call_at_a_time() {
    use ftl::fms::dac::RegionSelect;
    use ftl::fms::redistribute::Redistribution;
    use ftl::fms::select::{CbAge, Policy};

    let devices: Vec<(DeviceSpec, Vec<u32>)> = vec![
        (nor(4096, 8, 16), vec![512, 1024, 2048, 4096, 8192, 16384]),
        (nor(2048, 16, 16), vec![512, 1024, 4096, 8192]),
        (nor(512, 64, 16), vec![512, 1024, 2048]),
        (nor(3000, 12, 16), vec![512, 1024, 2048, 4096]),
        (nor(1536, 24, 16), vec![1024, 4096]),
        (small("nandsim-256m", 20, 32), vec![512, 1024, 2048]),
        (small("slc-large-1g", 16, 16), vec![2048, 4096]),
        (small("mlc2-2g", 16, 16), vec![2048, 4096]),
    ];
    let mut cfgs = Vec::new();
    for (p, policy) in Policy::ALL.into_iter().enumerate() {
        for (r, redistribution) in Redistribution::ALL.into_iter().enumerate() {
            cfgs.push(FmsConfig {
                policy,
                redistribution,
                readonly_separation: (p + r) % 2 == 0,
                wear_threshold: [None, Some(1), Some(3)][(p + r) % 3],
                cb_age: if r % 2 == 0 {
                    CbAge::Written
                } else {
                    CbAge::Invalidation
                },
                ..FmsConfig::default()
            });
        }
        for regions in 2..=4u8 {
            for (s, region_select) in RegionSelect::ALL.into_iter().enumerate() {
                cfgs.push(FmsConfig {
                    policy,
                    regions,
                    region_select,
                    region_threshold_ps: [None, Some(2_000_000_000), Some(50_000_000_000)]
                        [(s + regions as usize) % 3],
                    readonly_separation: s != 1,
                    wear_threshold: [Some(2), None][s % 2],
                    ..FmsConfig::default()
                });
            }
        }
    }
    let mut runs = 0;
    let (mut header_copies, mut all_swaps) = (0u64, 0u64);
    let (mut spare_copies, mut multi_page_copies) = (0u64, 0u64);
    for (d, (spec, sizes)) in devices.iter().enumerate() {
        for (b, &block_size) in sizes.iter().enumerate() {
            // Every configuration on the first block size of a device, a rotating share of
            // them on the others.
            for (c, cfg) in cfgs.iter().enumerate() {
                if b > 0 && (c + d + b) % 5 != 0 {
                    continue;
                }
                let cfg = FmsConfig {
                    block_size,
                    ..cfg.clone()
                };
                let what = format!("{} {block_size} {cfg:?}", spec.name);
                let fmt: Vec<_> = [false, true]
                    .iter()
                    .map(|&g| Fms::format(device(spec, false, g), cfg.clone()))
                    .collect();
                if fmt.iter().any(|r| r.is_err()) {
                    let e: Vec<_> = fmt
                        .iter()
                        .map(|r| format!("{:?}", r.as_ref().err()))
                        .collect();
                    assert_eq!(e[0], e[1], "{what}: format");
                    continue;
                }
                let mut two: Vec<Fms> = fmt.into_iter().map(|r| r.unwrap()).collect();
                runs += 1;
                let n = two[0].logical_blocks();
                let sectors = two[0].sectors();
                let spb = block_size as u64 / SECTOR as u64;
                for f in two.iter_mut() {
                    f.mark_readonly(0, (n / 5) as u32);
                }
                let mut rng = Xoshiro256PlusPlus::seed_from_u64((d * 1000 + c) as u64);
                let ops = (n * 12).clamp(600, 4000);
                // Copies and wear swaps over every mount (statistics restart at a mount).
                let (mut copied, mut swaps) = (0, 0);
                for i in 0..ops {
                    let lba = if rng.gen_bool(0.75) {
                        rng.gen_range(sectors / 5..sectors / 5 + sectors / 8 + 1)
                            .min(sectors - 1)
                    } else {
                        rng.gen_range(0..sectors)
                    };
                    let count = rng.gen_range(1..=2 * spb).min(sectors - lba) as u32;
                    let op = rng.gen_range(0..40);
                    if op == 39 && rng.gen_bool(0.2) {
                        copied += two[0].stats().blocks_copied;
                        swaps += two[0].stats().wear_swaps;
                        let mut media = Vec::new();
                        two = std::mem::take(&mut two)
                            .into_iter()
                            .enumerate()
                            .map(|(k, f)| {
                                let (mut f, m) = remount(f, &cfg, k == 1);
                                media.push(m);
                                f.mark_readonly(0, (n / 5) as u32);
                                f
                            })
                            .collect();
                        assert!(media[0] == media[1], "{what}: medium at op {i}");
                    } else {
                        let r: Vec<String> = two
                            .iter_mut()
                            .map(|f| {
                                let r = match op {
                                    0..=29 => f.write(lba, count, None),
                                    30..=33 => f.read(lba, count, None),
                                    34..=36 => f.trim(lba, count),
                                    37..=38 => f.flush(),
                                    _ => f.read(lba, count, None),
                                };
                                format!("{r:?}")
                            })
                            .collect();
                        assert_eq!(r[0], r[1], "{what}: op {i}");
                        // In-order devices refuse header mode's entry programs: the
                        // first writes fail (NoSpace or OutOfOrder), the same on both.
                        if r[0] != "Ok(())" {
                            break;
                        }
                    }
                    same(&two[0], &two[1], &format!("{what}, op {i}"));
                }
                copied += two[0].stats().blocks_copied;
                swaps += two[0].stats().wear_swaps;
                let (a, g) = (two[0].nand(), two[1].nand());
                let blocks = a.geometry().blocks;
                let ea: Vec<_> = (0..blocks).map(|b| a.erase_count(b)).collect();
                let eg: Vec<_> = (0..blocks).map(|b| g.erase_count(b)).collect();
                assert_eq!(ea, eg, "{what}: erase counts");
                if two[0].layout().mode == ftl::fms::layout::RecordMode::Header {
                    header_copies += copied;
                } else {
                    spare_copies += copied;
                    if two[0].layout().pages_per_slot > 1 {
                        multi_page_copies += copied;
                    }
                }
                all_swaps += swaps;
            }
        }
    }
    assert!(runs > 200, "{runs} runs");
    assert!(header_copies > 0, "header-mode runs clean");
    assert!(spare_copies > 0, "spare-mode runs clean");
    assert!(
        multi_page_copies > 0,
        "runs with slots of several pages clean"
    );
    assert!(all_swaps > 0, "wear levelling swaps");
}
