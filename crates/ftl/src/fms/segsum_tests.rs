//! Segment summaries (`segsum.rs`): written when a segment fills, read by mount instead of
//! the records, equal to what the records say, never taken for slots written after them.

use super::flip_tests::{assert_reads, cfg, content, flip, mount, record_at, shrunk, written};
use super::tests::{tables, tables_diff};
use super::*;
use nand::DeviceSpec;
use rand::{Rng, SeedableRng};

/// Spare-mode media with room for a summary after the last slot: small-page SLC (1 KiB
/// blocks), and an in-order MLC with 4 KiB blocks, with and without ECC.
fn media() -> Vec<(&'static str, DeviceSpec, FmsConfig)> {
    vec![
        (
            "nandsim-256m",
            shrunk("nandsim-256m", 16, 32),
            cfg(1024, false),
        ),
        ("mlc2-2g", shrunk("mlc2-2g", 16, 32), cfg(4096, false)),
        ("mlc2-2g (ECC)", shrunk("mlc2-2g", 16, 32), cfg(4096, true)),
    ]
}

/// Mount `f`'s medium twice, from its summaries and from every record: both must rebuild
/// the tables `f` had. Returns the summary mount and the device time each mount took.
fn both_mounts(f: Fms, spec: &DeviceSpec, cfg: &FmsConfig, what: &str) -> (Fms, u64, u64) {
    let running = tables(&f);
    let store = f.into_nand().into_store();
    let g = mount(spec, cfg, store);
    let records = FmsConfig {
        segment_summaries: false,
        ..cfg.clone()
    };
    let copy = g.try_clone().unwrap();
    let h = mount(spec, &records, copy.into_nand().into_store());
    assert_eq!(
        tables_diff(&running, &tables(&g)),
        None,
        "{what}: summary mount"
    );
    assert_eq!(
        tables_diff(&running, &tables(&h)),
        None,
        "{what}: records mount"
    );
    assert_eq!(h.mount_report().summaries_read(), 0, "{what}");
    let t = g.mount_time_ps();
    (g, t, h.mount_time_ps())
}

#[test]
fn full_segments_get_a_summary_that_mount_reads_instead_of_the_records() {
    for (name, spec, cfg) in media() {
        let (f, data) = written(&spec, &cfg, 120);
        assert!(f.layout().summary_page.is_some(), "{name}");
        let full = f
            .segments()
            .iter()
            .filter(|s| {
                matches!(s.state, SegState::Used | SegState::Active) && s.next == f.layout().slots
            })
            .count() as u64;
        assert!(full >= 4, "{name}: {full} full segments");
        let (mut g, with, without) = both_mounts(f, &spec, &cfg, name);
        // Every full segment is read from its summary (a stream's full segment too; the
        // partly written ones have none).
        assert_eq!(g.mount_report().summaries_read(), full, "{name}");
        assert!(
            with < without,
            "{name}: mount took {with} ps, {without} without"
        );
        assert_reads(&mut g, &data, name);
    }
}

#[test]
fn without_the_feature_no_summary_is_written_or_read() {
    let spec = shrunk("nandsim-256m", 16, 32);
    let cfg = FmsConfig {
        block_size: 1024,
        segment_summaries: false,
        ..FmsConfig::default()
    };
    let (f, data) = written(&spec, &cfg, 120);
    assert_eq!(f.layout().summary_page, None);
    assert_eq!(f.layout().features() & layout::FEATURE_SUMMARY, 0);
    // A mount that would read summaries finds the medium has none.
    let on = FmsConfig {
        segment_summaries: true,
        ..cfg.clone()
    };
    let mut g = mount(&spec, &on, f.into_nand().into_store());
    assert_eq!(g.layout().summary_page, None);
    assert_eq!(g.mount_report().summaries_read(), 0);
    assert_reads(&mut g, &data, "no summaries");
}

/// Random writes, overwrites and trims with remounts in between (so that segments opened
/// before a mount fill after it, and their summaries read back the earlier records):
/// after each round both mounts rebuild the running tables, and every block reads its
/// last content.
#[test]
fn summaries_match_the_records_across_remounts_trims_and_cleaning() {
    for (name, spec, cfg) in media() {
        let mut f = Fms::format(Nand::ram(spec.clone()).unwrap(), cfg.clone()).unwrap();
        let n = f.logical_blocks() as u32;
        let bs = cfg.block_size as usize;
        let mut model: Vec<Option<Vec<u8>>> = vec![None; n as usize];
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(23);
        let (mut read, mut cleanings) = (0, 0);
        for round in 0..8u32 {
            for k in 0..(n * 3 / 2) {
                let lbn = rng.gen_range(0..n);
                if rng.gen_bool(0.1) {
                    f.trim_block(lbn).unwrap();
                    model[lbn as usize] = None;
                } else {
                    let d = content(lbn, round * 10_000 + k, bs);
                    f.write_block(lbn, Some(&d)).unwrap();
                    model[lbn as usize] = Some(d);
                }
            }
            f.flush().unwrap();
            cleanings += f.stats().cleanings;
            let what = format!("{name}, round {round}");
            let (mut g, _, _) = both_mounts(f, &spec, &cfg, &what);
            // A few writes after the mount fill the segments it found open, whose
            // summaries then read back the records written before it; mount again
            // before the cleaner takes them.
            for k in 0..g.layout().slots {
                let lbn = rng.gen_range(0..n);
                let d = content(lbn, round * 10_000 + 9_000 + k, bs);
                g.write_block(lbn, Some(&d)).unwrap();
                model[lbn as usize] = Some(d);
            }
            g.flush().unwrap();
            let (g, _, _) = both_mounts(g, &spec, &cfg, &format!("{what}, after a few writes"));
            f = g;
            read += f.mount_report().summaries_read();
            let mut buf = vec![0u8; bs];
            for (l, want) in model.iter().enumerate() {
                f.read_block(l as u32, Some(&mut buf)).unwrap();
                let zeros = vec![0u8; bs];
                assert!(buf == *want.as_ref().unwrap_or(&zeros), "{what}: block {l}");
            }
        }
        assert!(cleanings > 0, "{name}: the cleaner never ran");
        assert!(read > 0, "{name}: no summary read");
    }
}

/// A torn erase of a cleaned segment that keeps its header and its summary page: a mount
/// that reads every record takes the segment for free (its slots read erased). Before the
/// FMS writes into it, it must find the old summary (which names the header it kept) and
/// erase the segment again: otherwise a later mount that reads summaries would take the
/// old summary for the slots written since, and their blocks would read older copies.
#[test]
fn a_summary_kept_by_a_torn_erase_is_never_written_after() {
    let spec = shrunk("nandsim-256m", 16, 32);
    let cfg = FmsConfig {
        block_size: 1024,
        policy: Policy::Greedy,
        redistribution: Redistribution::M1,
        ..FmsConfig::default()
    };
    let mut f = Fms::format(Nand::ram(spec.clone()).unwrap(), cfg.clone()).unwrap();
    let slots = f.layout().slots;
    let bs = cfg.block_size as usize;
    // Fill one segment, then overwrite its blocks: it is full, with a summary, and holds
    // nothing valid (as a cleaning victim whose blocks have moved).
    for g in 0..2 {
        for l in 0..slots {
            f.write_block(l, Some(&content(l, g, bs))).unwrap();
        }
    }
    f.flush().unwrap();
    let seg = (0..f.segments().len() as u32)
        .find(|&s| {
            let r = &f.segments()[s as usize];
            r.state == SegState::Used && r.next == slots && r.valid == 0
        })
        .expect("a full segment of stale copies");
    // The torn erase: every slot's pages erased, the header and summary pages kept.
    let first = spec.geometry.first_page(seg);
    let summary = f.layout().summary_page.unwrap() as u64;
    let mut store = f.into_nand().into_store();
    for p in 1..summary {
        store.erase_page(first + p).unwrap();
    }
    let records = FmsConfig {
        segment_summaries: false,
        ..cfg.clone()
    };
    let mut g = mount(&spec, &records, store);
    assert_eq!(g.segments()[seg as usize].state, SegState::Free);
    // The check before the first write there finds the summary page programmed.
    let mut probe = g.try_clone().unwrap();
    assert!(
        !probe.check_tail(seg).unwrap(),
        "the kept summary went unseen"
    );
    // Write until that segment is full again, then mount reading summaries.
    let n = g.logical_blocks() as u32;
    let mut model: Vec<Vec<u8>> = (0..n)
        .map(|l| {
            if l < slots {
                content(l, 1, bs)
            } else {
                vec![0; bs]
            }
        })
        .collect();
    let mut k = 0u32;
    while g.segments()[seg as usize].next < slots {
        assert!(k < 4 * n, "segment {seg} was never written again");
        let l = k % n;
        model[l as usize] = content(l, 100 + k, bs);
        g.write_block(l, Some(&model[l as usize])).unwrap();
        k += 1;
    }
    g.flush().unwrap();
    let mut h = mount(&spec, &cfg, g.into_nand().into_store());
    assert_reads(&mut h, &model, "after the torn erase");
}

/// A spare record bit flipped for good in a full segment: on media formatted before torn
/// records closed their segment, mount reading records takes the record for torn (and
/// reports it; `mount::spare_flip` says why it cannot correct it), so the block reads its
/// older copy; the segment's summary, written when the record was whole, still holds it,
/// and a mount reading summaries reads the block's newest copy. (On newer media a mount
/// reading records corrects it when a later slot's record follows:
/// `a_spare_record_one_bit_from_valid_before_a_later_record_is_corrected`.)
#[test]
fn a_record_flipped_for_good_in_a_full_segment_is_read_from_its_summary() {
    for (name, spec, cfg) in media() {
        let cfg = FmsConfig {
            record_correction: false,
            ..cfg
        };
        let (f, data) = written(&spec, &cfg, 120);
        let slots = f.layout().slots;
        // An overwritten block whose newest copy is in a full segment.
        let lbn = (0..120u32)
            .step_by(2)
            .find(|&l| {
                let (seg, _, _, _) = record_at(&f, l);
                f.segments()[seg as usize].next == slots
            })
            .expect("a block in a full segment");
        let (seg, slot, ppn, col) = record_at(&f, lbn);
        let mut store = f.into_nand().into_store();
        flip(&mut *store, ppn, col + 5, 0x08);
        let copy = Nand::open(spec.clone(), store.try_clone().unwrap()).unwrap();
        let mut g = mount(&spec, &cfg, store);
        assert!(g.mount_report().flipped_records.is_empty(), "{name}");
        assert_reads(&mut g, &data, name);
        let records = FmsConfig {
            segment_summaries: false,
            ..cfg.clone()
        };
        let mut h = Fms::mount(copy, records).unwrap();
        let want = SlotRecord {
            segment: seg,
            slot,
            block: lbn,
        };
        assert_eq!(h.mount_report().flipped_records, vec![want], "{name}");
        let mut buf = vec![0u8; cfg.block_size as usize];
        h.read_block(lbn, Some(&mut buf)).unwrap();
        assert_eq!(buf, content(lbn, 0, buf.len()), "{name}: the older copy");
    }
}
