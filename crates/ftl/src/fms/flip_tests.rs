//! Bits flipped for good in what mount reads (`mount.rs`, `read_header` and
//! `for_each_record`): a segment header or a header-mode entry one bit from valid is read
//! corrected; a spare-mode record one bit from valid is reported, not corrected; two bits,
//! an erased header, and flips that do not come back on a second read change nothing.

use super::*;
use layout::SPARE_RECORD;
use nand::DeviceSpec;
use nand::Store;

/// Preset `preset` shrunk to `blocks` erase blocks of `pages_per_block` pages.
pub(super) fn shrunk(preset: &str, blocks: u32, pages_per_block: u32) -> DeviceSpec {
    let mut spec = DeviceSpec::preset(preset).unwrap();
    spec.geometry.blocks = blocks;
    spec.geometry.pages_per_block = pages_per_block;
    spec
}

/// The default configuration with `block_size` blocks, with or without ECC.
pub(super) fn cfg(block_size: u32, ecc: bool) -> FmsConfig {
    FmsConfig {
        block_size,
        ecc,
        ..FmsConfig::default()
    }
}

/// The three record modes and media: header mode (NOR), spare mode (small-page SLC),
/// spare mode with ECC on an in-order MLC.
fn media() -> Vec<(&'static str, DeviceSpec, FmsConfig)> {
    vec![
        (
            "intel-series2plus-24m",
            shrunk("intel-series2plus-24m", 12, 8),
            cfg(1024, false),
        ),
        (
            "nandsim-256m",
            shrunk("nandsim-256m", 12, 32),
            cfg(512, false),
        ),
        ("mlc2-2g (ECC)", shrunk("mlc2-2g", 12, 16), cfg(2048, true)),
    ]
}

/// Varied bytes, different for each block and generation.
pub(super) fn content(lbn: u32, generation: u32, size: usize) -> Vec<u8> {
    (0..size as u32)
        .map(|i| (i.wrapping_mul(7) ^ lbn.wrapping_mul(31) ^ generation.wrapping_mul(101)) as u8)
        .collect()
}

/// Format `spec`, write `n` blocks, overwrite the even ones (so older copies exist), and
/// flush. Returns the FMS and what each block holds.
pub(super) fn written(spec: &DeviceSpec, cfg: &FmsConfig, n: u32) -> (Fms, Vec<Vec<u8>>) {
    let mut f = Fms::format(Nand::ram(spec.clone()).unwrap(), cfg.clone()).unwrap();
    let bs = cfg.block_size as usize;
    let mut data = Vec::new();
    for l in 0..n {
        let d = content(l, 0, bs);
        f.write_block(l, Some(&d)).unwrap();
        data.push(d);
    }
    for l in (0..n).step_by(2) {
        let d = content(l, 1, bs);
        f.write_block(l, Some(&d)).unwrap();
        data[l as usize] = d;
    }
    f.flush().unwrap();
    (f, data)
}

/// XOR `mask` into byte `col` of page `ppn` of the store, for good.
pub(super) fn flip(store: &mut dyn Store, ppn: u64, col: u32, mask: u8) {
    let mut b = [0u8; 1];
    store.read(ppn, col, &mut b).unwrap();
    b[0] ^= mask;
    store.write(ppn, col, &b).unwrap();
}

pub(super) fn mount(spec: &DeviceSpec, cfg: &FmsConfig, store: Box<dyn Store>) -> Fms {
    Fms::mount(Nand::open(spec.clone(), store).unwrap(), cfg.clone()).unwrap()
}

pub(super) fn assert_reads(f: &mut Fms, data: &[Vec<u8>], what: &str) {
    let mut buf = vec![0u8; f.lay.block_size as usize];
    for (l, d) in data.iter().enumerate() {
        f.read_block(l as u32, Some(&mut buf)).unwrap();
        assert!(
            buf == *d,
            "{what}: block {l} does not read what was written"
        );
    }
}

/// Segments holding a block, and the index segment.
fn segments_in_use(f: &Fms) -> Vec<u32> {
    let mut segs: Vec<u32> = (0..f.segs.len() as u32)
        .filter(|&s| f.segs[s as usize].valid > 0 || f.segs[s as usize].state == SegState::Index)
        .collect();
    segs.sort_unstable();
    segs
}

/// A header bit flipped for good, anywhere in the 64 bytes (magic, version, erase count,
/// erase sequence, format number, features, checksum), in a segment that holds blocks or
/// in the index segment, on every medium: the mount corrects it, reports the segment, and
/// rebuilds the same tables as without the flip; every block reads what was written. The
/// FMS then works as usual: writes that make the cleaner run, a remount, the same data.
#[test]
fn a_header_bit_flipped_for_good_is_corrected() {
    for (name, spec, cfg) in media() {
        let (f, data) = written(&spec, &cfg, 40);
        let segs = segments_in_use(&f);
        assert!(segs.len() >= 3, "{name}: {segs:?}");
        let clean = f.tables_digest();
        let mut store = f.into_nand().into_store();
        for &seg in &segs {
            for bit in [
                0u32,
                37,
                64 + 3,
                24 * 8 + 1,
                40 * 8,
                48 * 8,
                60 * 8 + 5,
                511,
            ] {
                let what = format!("{name}: segment {seg}, bit {bit}");
                let first = spec.geometry.first_page(seg);
                flip(&mut *store, first, bit / 8, 1 << (bit % 8));
                let mut f = mount(&spec, &cfg, store);
                assert_eq!(f.mount_report().corrected_headers, vec![seg], "{what}");
                assert_eq!(f.mount_report().dirty_segments, 0, "{what}");
                assert_eq!(f.tables_digest(), clean, "{what}");
                assert_reads(&mut f, &data, &what);
                store = f.into_nand().into_store();
                flip(&mut *store, first, bit / 8, 1 << (bit % 8));
            }
        }
        // The ordinary flow over a corrected header (a data segment's): rewrite every
        // block until the cleaner has run a few times, then remount.
        let seg = *segs
            .iter()
            .find(|&&s| s != segs[0] || segs.len() == 1)
            .unwrap();
        flip(&mut *store, spec.geometry.first_page(seg), 9, 0x10);
        let mut f = mount(&spec, &cfg, store);
        assert_eq!(f.mount_report().corrected_headers, vec![seg], "{name}");
        let mut data = data;
        let bs = cfg.block_size as usize;
        for generation in 2..12 {
            if f.stats().cleanings > 3 {
                break;
            }
            for l in 0..data.len() as u32 {
                let d = content(l, generation, bs);
                f.write_block(l, Some(&d)).unwrap();
                data[l as usize] = d;
            }
        }
        f.flush().unwrap();
        assert!(f.stats().cleanings > 0, "{name}: the cleaner ran");
        assert_reads(&mut f, &data, name);
        let mut f = mount(&spec, &cfg, f.into_nand().into_store());
        assert_reads(&mut f, &data, &format!("{name}, remounted"));
    }
}

/// Beyond one bit the mount behaves as before on headers without a code: a header with two bits flipped, an
/// erased header (64 bytes of 0xFF) and one bit short of erased are not corrected; the
/// segment is dirty, and the blocks whose only copy it held no longer read their data.
#[test]
fn two_flipped_bits_or_an_erased_header_leave_the_segment_dirty() {
    type Edit = fn(&mut dyn Store, u64);
    let edits: [(&str, Edit); 3] = [
        ("two bits", |s, p| {
            flip(s, p, 8, 0x01);
            flip(s, p, 30, 0x40);
        }),
        ("erased", |s, p| s.write(p, 0, &[0xFF; SEG_HEADER]).unwrap()),
        ("one bit short of erased", |s, p| {
            let mut h = [0xFF; SEG_HEADER];
            h[17] = 0xFB;
            s.write(p, 0, &h).unwrap()
        }),
    ];
    for (name, spec, cfg) in media() {
        // Headers without a code (media formatted before `FEATURE_HEADER_CODE`; with a
        // code, `header_code_tests` covers the same edits).
        let cfg = FmsConfig {
            header_code: false,
            ..cfg
        };
        for (edit, apply) in edits {
            let what = format!("{name}, {edit}");
            let (f, data) = written(&spec, &cfg, 40);
            // A data segment (not the index): the one holding block 1.
            let seg = f.split(f.blocks[1].map).0;
            let only_here: Vec<u32> = (0..data.len() as u32)
                .filter(|&l| f.split(f.blocks[l as usize].map).0 == seg)
                .collect();
            let mut store = f.into_nand().into_store();
            apply(&mut *store, spec.geometry.first_page(seg));
            let mut f = mount(&spec, &cfg, store);
            assert!(f.mount_report().corrected_headers.is_empty(), "{what}");
            assert_eq!(f.segs[seg as usize].state, SegState::Dirty, "{what}");
            assert_eq!(f.mount_report().dirty_segments, 1, "{what}");
            let mut buf = vec![0u8; cfg.block_size as usize];
            for l in only_here {
                f.read_block(l, Some(&mut buf)).unwrap();
                assert!(
                    buf != data[l as usize],
                    "{what}: block {l} still reads its data"
                );
            }
        }
    }
}

/// A correction needs two reads that agree, since the model's read flips are transient:
/// a header with two bits flipped for good that a transient flip brings back one bit
/// from valid in the first read stays dirty; one with one bit flipped for good and a
/// transient flip elsewhere in the first read is corrected from the two reads after.
#[test]
fn a_transient_flip_neither_makes_nor_spoils_a_correction() {
    let (_, spec, cfg) = media().remove(1);
    for persistent_bits in [2, 1] {
        let (f, data) = written(&spec, &cfg, 40);
        // Not the first segment, whose header `Fms::mount` reads first (`probe`).
        let seg = f.split(f.blocks[39].map).0;
        assert!(seg > 0);
        let first = spec.geometry.first_page(seg);
        let mut store = f.into_nand().into_store();
        flip(&mut *store, first, 12, 0x02);
        if persistent_bits == 2 {
            flip(&mut *store, first, 50, 0x80);
        }
        let mut nd = Nand::open(spec.clone(), store).unwrap();
        if persistent_bits == 2 {
            // Undone in the first read only.
            nd.inject_bitflip(first, 50, 7);
        } else {
            nd.inject_bitflip(first, 3, 0);
        }
        let mut f = Fms::mount(nd, cfg.clone()).unwrap();
        if persistent_bits == 2 {
            assert!(f.mount_report().corrected_headers.is_empty());
            assert_eq!(f.segs[seg as usize].state, SegState::Dirty);
        } else {
            assert_eq!(f.mount_report().corrected_headers, vec![seg]);
            assert_reads(&mut f, &data, "one bit for good, one transient");
        }
    }
}

/// Header mode: an entry bit flipped for good (outside the flags byte, which the checksum
/// leaves out) is corrected: the block reads its data, the report names the slot; with
/// two bits flipped the entry is torn, as before, and the block does not read that copy.
#[test]
fn a_header_mode_entry_bit_flipped_for_good_is_corrected() {
    let (_, spec, cfg) = media().remove(0);
    for bits in [1, 2] {
        let (f, data) = written(&spec, &cfg, 40);
        let lbn = 6u32;
        let (seg, slot) = f.split(f.blocks[lbn as usize].map);
        let off = SEG_HEADER as u64 + slot as u64 * ENTRY as u64;
        let (page, col) = f.lay.page_col(off);
        let ppn = spec.geometry.first_page(seg) + page;
        let mut store = f.into_nand().into_store();
        flip(&mut *store, ppn, col + 9, 0x04); // in the sequence number
        if bits == 2 {
            flip(&mut *store, ppn, col + 1, 0x20); // in the block number
        }
        let mut f = mount(&spec, &cfg, store);
        let r = f.mount_report().clone();
        if bits == 1 {
            let want = SlotRecord {
                segment: seg,
                slot,
                block: lbn,
            };
            assert_eq!(r.corrected_entries, vec![want]);
            assert_eq!(r.torn_records, 0);
            assert_reads(&mut f, &data, "entry corrected");
            // Mount writes nothing for it: the next mount corrects it again.
            let f = mount(&spec, &cfg, f.into_nand().into_store());
            assert_eq!(f.mount_report().corrected_entries, vec![want]);
        } else {
            assert!(r.corrected_entries.is_empty());
            assert_eq!(r.torn_records, 1);
            let mut buf = vec![0u8; cfg.block_size as usize];
            f.read_block(lbn, Some(&mut buf)).unwrap();
            assert!(buf != data[lbn as usize]);
        }
    }
}

/// The spare-mode record of block `lbn`'s newest copy: its page and column.
pub(super) fn record_at(f: &Fms, lbn: u32) -> (u32, u32, u64, u32) {
    let (seg, slot) = f.split(f.blocks[lbn as usize].map);
    let ppn = mount::record_page(f, seg, slot);
    (seg, slot, ppn, f.lay.page_size + 1)
}

/// Spare mode, media formatted before record correction (`FmsConfig::record_correction`
/// off): a record bit flipped for good is not corrected (a cut can leave the same bits
/// over torn data, and such media write on after such a record)
/// but reported: the mount names the slot and the block, counts the record torn, and the
/// block reads its older copy, as before, on both spare media.
#[test]
fn a_spare_record_one_bit_from_valid_is_reported_not_corrected() {
    for (name, spec, cfg) in media().into_iter().skip(1) {
        let cfg = FmsConfig {
            record_correction: false,
            ..cfg
        };
        let (f, data) = written(&spec, &cfg, 40);
        // Block 4 was written twice; its newest copy is followed by later slots.
        let lbn = 4u32;
        let (seg, slot, ppn, col) = record_at(&f, lbn);
        assert!(f.segs[seg as usize].next > slot + 1, "{name}: a later slot");
        let mut store = f.into_nand().into_store();
        flip(&mut *store, ppn, col + 5, 0x08); // in the sequence number
        let mut f = mount(&spec, &cfg, store);
        let r = f.mount_report().clone();
        let want = SlotRecord {
            segment: seg,
            slot,
            block: lbn,
        };
        assert_eq!(r.flipped_records, vec![want], "{name}");
        assert!(r.corrected_records.is_empty(), "{name}");
        assert_eq!(r.torn_records, 1, "{name}");
        let mut buf = vec![0u8; cfg.block_size as usize];
        f.read_block(lbn, Some(&mut buf)).unwrap();
        assert_eq!(buf, content(lbn, 0, buf.len()), "{name}: the older copy");
        // Two bits: torn, and not reported either.
        let mut store = f.into_nand().into_store();
        flip(&mut *store, ppn, col, 0x01);
        let f = mount(&spec, &cfg, store);
        assert!(f.mount_report().flipped_records.is_empty(), "{name}");
        assert_eq!(f.mount_report().torn_records, 1, "{name}");
        let _ = data;
    }
}

/// Spare mode, every new format (record correction, `mount::settle`): a
/// record bit flipped for good that a later slot's record follows in its segment was
/// written whole, and is corrected: the mount names it in `corrected_records`, counts
/// nothing torn, every block reads its newest copy, and the tables are those the FMS had.
/// Whatever bit of the record flipped. The segment's last record, one bit from valid, is
/// reported and not corrected (it may be a torn one), and closes its segment. Two bits
/// are torn, and not reported. On both spare media.
#[test]
fn a_spare_record_one_bit_from_valid_before_a_later_record_is_corrected() {
    for (name, spec, cfg) in media().into_iter().skip(1) {
        let (f, data) = written(&spec, &cfg, 40);
        assert!(f.lay.corrects_records(), "{name}");
        let before = f.tables_digest();
        let lbn = 4u32;
        let (seg, slot, ppn, col) = record_at(&f, lbn);
        assert!(f.segs[seg as usize].next > slot + 1, "{name}: a later slot");
        let want = SlotRecord {
            segment: seg,
            slot,
            block: lbn,
        };
        let store = f.into_nand().into_store();
        for bit in (0..8 * (SPARE_RECORD as u32 - 1)).step_by(7) {
            let mut store = store.try_clone().unwrap();
            flip(&mut *store, ppn, col + bit / 8, 1 << (bit % 8));
            let mut f = mount(&spec, &cfg, store);
            let r = f.mount_report().clone();
            assert_eq!(r.corrected_records, vec![want], "{name}: bit {bit}");
            assert!(r.flipped_records.is_empty(), "{name}: bit {bit}");
            assert_eq!(r.torn_records, 0, "{name}: bit {bit}");
            assert!(r.found_flips() && !r.is_clean(), "{name}: bit {bit}");
            assert_eq!(f.tables_digest(), before, "{name}: bit {bit}");
            assert_reads(&mut f, &data, name);
        }
        // Two bits: torn, not reported, and the block reads its older copy.
        let mut two = store.try_clone().unwrap();
        flip(&mut *two, ppn, col + 5, 0x08);
        flip(&mut *two, ppn, col, 0x01);
        let mut f = mount(&spec, &cfg, two);
        let r = f.mount_report().clone();
        assert!(r.corrected_records.is_empty() && r.flipped_records.is_empty());
        assert_eq!(r.torn_records, 1, "{name}");
        let mut buf = vec![0u8; cfg.block_size as usize];
        f.read_block(lbn, Some(&mut buf)).unwrap();
        assert_eq!(buf, content(lbn, 0, buf.len()), "{name}: the older copy");
        // The last record of the segment the FMS is writing (block 0's, just written):
        // reported, not corrected; the segment takes no more.
        let bs = cfg.block_size as usize;
        let mut f = mount(&spec, &cfg, store);
        f.write_block(0, Some(&content(0, 6, bs))).unwrap();
        f.flush().unwrap();
        let (seg, _, _, _) = record_at(&f, 0);
        assert!(f.segs[seg as usize].next < f.lay.slots, "{name}: not full");
        let last = f.segs[seg as usize].next - 1;
        let (ppn, col) = (mount::record_page(&f, seg, last), f.lay.page_size + 1);
        let mut store = f.into_nand().into_store();
        flip(&mut *store, ppn, col + 5, 0x08);
        let mut f = mount(&spec, &cfg, store);
        let r = f.mount_report().clone();
        assert!(r.corrected_records.is_empty(), "{name}");
        assert_eq!(r.flipped_records.len(), 1, "{name}");
        assert_eq!(r.flipped_records[0].slot, last, "{name}");
        assert_eq!(f.segs[seg as usize].next, f.lay.slots, "{name}: closed");
        for l in 0..8 {
            f.write_block(l, Some(&content(l, 5, bs))).unwrap();
            assert_ne!(f.split(f.blocks[l as usize].map).0, seg, "{name}");
        }
    }
}

/// Spare mode: a trim list whose record has a bit flipped for good is not taken as a list
/// (counted torn, reported as a trim list), but its tombstones are rescued: the trimmed
/// block reads zeros, not its data from before the trim (QA stop 26: it read the old
/// data, with no warning). The next write writes the tombstone again, before it may
/// clean; later mounts, after much writing, still read zeros. On both spare media.
#[test]
fn a_trim_list_record_one_bit_from_valid_keeps_its_trims() {
    for (name, spec, cfg) in media().into_iter().skip(1) {
        let (mut f, _) = written(&spec, &cfg, 40);
        f.trim_block(7).unwrap();
        f.flush().unwrap();
        let list = *f.trims.lists.keys().next().expect("a trim list");
        let (seg, slot) = f.split(list);
        let ppn = mount::record_page(&f, seg, slot);
        let col = f.lay.page_size + 1;
        let mut store = f.into_nand().into_store();
        flip(&mut *store, ppn, col + 5, 0x08); // in the sequence number
        let mut f = mount(&spec, &cfg, store);
        let r = f.mount_report().clone();
        assert_eq!(r.flipped_records.len(), 1, "{name}: {r:?}");
        assert_eq!(r.flipped_records[0].block, layout::TRIM_LIST_LBN, "{name}");
        assert_eq!(r.rescued_tombstones, 1, "{name}: {r:?}");
        let mut buf = vec![0u8; cfg.block_size as usize];
        f.read_block(7, Some(&mut buf)).unwrap();
        assert!(buf.iter().all(|&b| b == 0), "{name}: block 7 trimmed");
        // A write elsewhere writes the tombstone again first.
        f.write_block(8, Some(&content(8, 9, buf.len()))).unwrap();
        assert!(f.lost.is_none(), "{name}: written again");
        for k in 0..6 * f.logical as u32 {
            let l = 10 + k % 30;
            f.write_block(l, Some(&content(l, k, buf.len()))).unwrap();
        }
        f.flush().unwrap();
        let mut f = mount(&spec, &cfg, f.into_nand().into_store());
        f.read_block(7, Some(&mut buf)).unwrap();
        assert!(buf.iter().all(|&b| b == 0), "{name}: block 7 still trimmed");
    }
}

/// The tail of a segment (its records after the last one that decodes) closes it when it
/// holds a record one or two bits from valid (review, stop 32): a record flipped for good
/// followed by a torn one left the segment open, the flipped record's number was handed
/// out again, and once a later slot was written the correction tied with an acknowledged
/// rewrite of the block and won. Here the flipped record is never corrected, the segment
/// takes no more writes, and the block reads its older, acknowledged copy at every mount,
/// its rewrites included. A last record two bits from valid closes its segment too;
/// three bits do not.
#[test]
fn a_tail_record_near_valid_closes_its_segment() {
    for (name, spec, cfg) in media().into_iter().skip(1) {
        let bs = cfg.block_size as usize;
        let (mut f, _) = written(&spec, &cfg, 40);
        // Two more blocks at the end of the segment being written, with a free slot after
        // them (block 7 rewritten until the segment has room for three).
        for g in 10.. {
            f.write_block(7, Some(&content(7, g, bs))).unwrap();
            let (s7, k7, _, _) = record_at(&f, 7);
            if k7 + 3 < f.lay.slots && f.segs[s7 as usize].next == k7 + 1 {
                break;
            }
        }
        f.write_block(1, Some(&content(1, 5, bs))).unwrap();
        f.write_block(3, Some(&content(3, 5, bs))).unwrap();
        f.flush().unwrap();
        let (seg, k, ppn1, col) = record_at(&f, 1);
        let (seg3, k3, ppn3, _) = record_at(&f, 3);
        assert_eq!((seg3, k3), (seg, k + 1), "{name}");
        assert_eq!(
            f.segs[seg as usize].next,
            k + 2,
            "{name}: the last two slots"
        );
        assert!(k + 2 < f.lay.slots, "{name}: room after them");
        let base = f.into_nand().into_store();
        // Flipped for good at k, torn at k + 1 (its checksum's bits cleared).
        let mut store = base.try_clone().unwrap();
        flip(&mut *store, ppn1, col + 5, 0x08);
        for c in 12..16 {
            let mut b = [0u8; 1];
            store.read(ppn3, col + c, &mut b).unwrap();
            if b[0] != 0 {
                store.write(ppn3, col + c, &[0]).unwrap();
            }
        }
        let mut f = mount(&spec, &cfg, store);
        let r = f.mount_report().clone();
        assert!(r.corrected_records.is_empty(), "{name}: {r:?}");
        assert_eq!(r.flipped_records.len(), 1, "{name}: {r:?}");
        assert_eq!(f.segs[seg as usize].next, f.lay.slots, "{name}: closed");
        let mut buf = vec![0u8; bs];
        f.read_block(1, Some(&mut buf)).unwrap();
        assert_eq!(buf, content(1, 0, bs), "{name}: block 1's older copy");
        let new = content(1, 6, bs);
        f.write_block(1, Some(&new)).unwrap();
        for l in 4..10 {
            f.write_block(l, Some(&content(l, 6, bs))).unwrap();
            assert_ne!(f.split(f.blocks[l as usize].map).0, seg, "{name}");
        }
        f.flush().unwrap();
        let mut f = mount(&spec, &cfg, f.into_nand().into_store());
        assert!(f.mount_report().corrected_records.is_empty(), "{name}");
        f.read_block(1, Some(&mut buf)).unwrap();
        assert_eq!(buf, new, "{name}: block 1's acknowledged rewrite");
        // The last record two bits from valid closes its segment; three bits do not.
        for (bits, closed) in [(2, true), (3, false)] {
            let mut store = base.try_clone().unwrap();
            for b in 0..bits {
                flip(&mut *store, ppn3, col + 1 + b, 0x01);
            }
            let f = mount(&spec, &cfg, store);
            let next = f.segs[seg as usize].next;
            assert_eq!(
                next == f.lay.slots,
                closed,
                "{name}: {bits} bits, next {next}"
            );
        }
    }
}

/// A write torn in the last slot a segment holds, whose record a cut left one bit from
/// valid over torn data: a real cut (`TornMode::Partial`) in the write's one program
/// tears the page, and its record is then set to what the same write, run again
/// without the cut, programmed, one bit short (a subset of the bits it clears, as the
/// cut model allows). The remount that finds it does not take it (the block reads its
/// older, acknowledged copy), nor does any later one. On media with record correction
/// (every new format) the FMS writes nothing more there; on older media it
/// writes the segment's later slots, handing the torn record's sequence number out
/// again, and the record is still not taken.
#[test]
fn a_torn_record_one_bit_from_valid_is_not_taken() {
    for closes in [true, false] {
        let (_, spec, cfg) = media().remove(1);
        let cfg = FmsConfig {
            record_correction: closes,
            ..cfg
        };
        let bs = cfg.block_size as usize;
        let new = content(3, 9, bs);
        // The write without the cut: where it goes and the record it programs.
        let (mut f, data) = written(&spec, &cfg, 12);
        let seq = f.seq;
        f.write_block(3, Some(&new)).unwrap();
        let (seg, slot, ppn, col) = record_at(&f, 3);
        assert_eq!(f.segs[seg as usize].next, slot + 1, "the last slot written");
        let mut whole = [0u8; SPARE_RECORD - 1];
        f.nand.read(ppn, col, &mut whole).unwrap();
        assert_eq!(Record::decode_spare(&whole).map(|r| r.seq), Some(seq));
        // The same write, cut.
        let (mut f, _) = written(&spec, &cfg, 12);
        f.nand.set_faults(nand::FaultPlan {
            power_cut_at: Some(1),
            torn: nand::TornMode::Partial,
            seed: 3,
            ..nand::FaultPlan::default()
        });
        assert!(f.write_block(3, Some(&new)).is_err());
        let mut store = f.into_nand().into_store();
        let mut page = vec![0u8; bs];
        store.read(ppn, 0, &mut page).unwrap();
        assert!(page != new, "the data is torn");
        let mut rec = whole;
        let zero = (0..8 * rec.len())
            .find(|&b| rec[b / 8] & (1 << (b % 8)) == 0)
            .unwrap();
        rec[zero / 8] |= 1 << (zero % 8);
        store.write(ppn, col, &rec).unwrap();

        let mut f = mount(&spec, &cfg, store);
        let want = vec![SlotRecord {
            segment: seg,
            slot,
            block: 3,
        }];
        assert_eq!(f.mount_report().flipped_records, want, "closes {closes}");
        assert!(f.mount_report().corrected_records.is_empty());
        assert_eq!(f.seq, seq, "the torn record's number is handed out again");
        let mut buf = vec![0u8; bs];
        f.read_block(3, Some(&mut buf)).unwrap();
        assert_eq!(buf, data[3], "block 3 reads its acknowledged copy");
        let mut data = data;
        for l in 4..8 {
            let d = content(l, 7, bs);
            f.write_block(l, Some(&d)).unwrap();
            data[l as usize] = d;
        }
        f.flush().unwrap();
        let (at, next) = (f.split(f.blocks[4].map), f.segs[seg as usize].next);
        if closes {
            assert_ne!(at.0, seg, "nothing written after the torn slot");
            assert_eq!(next, f.lay.slots, "the segment is closed");
        } else {
            assert_eq!(at, (seg, slot + 1), "written after the torn slot");
        }
        let mut f = mount(&spec, &cfg, f.into_nand().into_store());
        assert_eq!(f.mount_report().flipped_records, want, "closes {closes}");
        assert!(f.mount_report().corrected_records.is_empty());
        assert_reads(&mut f, &data, "after later slots");
    }
}

/// A segment gone bad in use whose header has a bit flipped for good: its header is
/// corrected (it carries this medium's format number), so its records are read and the
/// blocks it holds read their data, in both record modes.
#[test]
fn a_grown_bad_segments_header_is_corrected_too() {
    for (name, spec, cfg) in media() {
        let (f, data) = written(&spec, &cfg, 40);
        let seg = f.split(f.blocks[1].map).0;
        let mut store = f.into_nand().into_store();
        let mut info = store.block_info(seg);
        info.bad = nand::BadState::Grown;
        store.set_block_info(seg, info).unwrap();
        flip(&mut *store, spec.geometry.first_page(seg), 44, 0x01); // format number
        let mut f = mount(&spec, &cfg, store);
        assert_eq!(f.mount_report().corrected_headers, vec![seg], "{name}");
        assert_eq!(f.mount_report().grown_bad_read, 1, "{name}");
        assert_reads(&mut f, &data, name);
    }
}

/// A trim list whose slot holds a chunk its code cannot correct past the list's entries
/// (in the `0xFF` padding: two bits for good under SEC-DED, five under BCH-4) still
/// counts at mount (`mount::list_before_bad_chunk`): its checksum covers the header and
/// entries, all in chunks that correct. The trimmed blocks stay trimmed (until stop 22
/// the list was skipped and they came back with their old data); the others read what
/// was written. Two bits in the chunk holding the entries still skip it (as a torn
/// erase's leftovers are skipped).
#[test]
fn a_trim_list_with_an_uncorrectable_chunk_past_its_entries_counts() {
    for (t, bits) in [(1u8, 2u32), (4, 5)] {
        for in_entries in [false, true] {
            let what = format!("t = {t}, {bits} bits in the entries' chunk: {in_entries}");
            let spec = shrunk("mlc2-2g", 12, 16);
            let cfg = FmsConfig {
                block_size: 2048,
                ecc: true,
                ecc_strength: t,
                ..FmsConfig::default()
            };
            let (mut f, mut data) = written(&spec, &cfg, 8);
            f.trim_blocks(2..4).unwrap();
            f.flush().unwrap();
            let (&list, slot) = f.trims.lists.iter().next().expect("a trim list");
            assert_eq!(slot.entries.len(), 2, "{what}");
            let (seg, s) = f.split(list);
            let ppn = f.nand.geometry().first_page(seg) + f.lay.slot_offset(s) / 2048;
            let chunk = if in_entries { 0 } else { 2 };
            let mut store = f.into_nand().into_store();
            for b in 0..bits {
                // Past the 40 bytes of header and entries in chunk 0.
                flip(&mut *store, ppn, chunk * 512 + 100 + 37 * b, 1 << (b % 8));
            }
            let mut g = mount(&spec, &cfg, store);
            if in_entries {
                assert_eq!(g.mount_report().unreadable_trim_lists, 1, "{what}");
                assert!(g.lookup(2).is_some(), "{what}: the list was skipped");
                continue;
            }
            assert_eq!(g.mount_report().unreadable_trim_lists, 0, "{what}");
            for l in 2..4 {
                assert_eq!(g.lookup(l), None, "{what}: block {l} came back");
                data[l as usize] = vec![0; 2048];
            }
            assert_reads(&mut g, &data, &what);
        }
    }
}

/// The flags byte of the entry of physical slot `phys`: its page and column.
fn flags_at(f: &Fms, phys: u32) -> (u64, u32) {
    let (seg, slot) = f.split(phys);
    let off = SEG_HEADER as u64 + slot as u64 * ENTRY as u64 + Record::FLAGS_OFFSET as u64;
    let (page, col) = f.lay.page_col(off);
    (f.nand.geometry().first_page(seg) + page, col)
}

/// Which copy of the header-mode live-flag tests has a flags bit flipped for good.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Which {
    /// The only, live, copy of block 3.
    Live,
    /// The superseded copy of block 4 (cleared by its overwrite).
    Superseded,
    /// The only copy of block 5, cleared by its trim.
    Trimmed,
}

/// Header mode (`live_byte` as given): write blocks 0..12, overwrite block 4, trim
/// block 5, flush; flip bit `bit` of the flags byte of `which` copy for good; remount.
/// Returns the mounted FMS and what each block must read (block 5: zeros).
fn flags_flipped(live_byte: bool, which: Which, bit: u32) -> (Fms, Vec<Vec<u8>>, DeviceSpec) {
    let (_, spec, cfg) = media().remove(0);
    let cfg = FmsConfig { live_byte, ..cfg };
    let mut f = Fms::format(Nand::ram(spec.clone()).unwrap(), cfg.clone()).unwrap();
    let bs = cfg.block_size as usize;
    let mut data: Vec<Vec<u8>> = (0..12).map(|l| content(l, 0, bs)).collect();
    for (l, d) in data.iter().enumerate() {
        f.write_block(l as u32, Some(d)).unwrap();
    }
    let superseded = f.blocks[4].map;
    data[4] = content(4, 1, bs);
    f.write_block(4, Some(&data[4])).unwrap();
    let trimmed = f.blocks[5].map;
    f.trim_block(5).unwrap();
    data[5] = vec![0; bs];
    f.flush().unwrap();
    let phys = match which {
        Which::Live => f.blocks[3].map,
        Which::Superseded => superseded,
        Which::Trimmed => trimmed,
    };
    let (ppn, col) = flags_at(&f, phys);
    let mut store = f.into_nand().into_store();
    flip(&mut *store, ppn, col, 1 << bit);
    (mount(&spec, &cfg, store), data, spec)
}

/// Header mode with the live byte (features bit 1): any one of the 8 bits of an entry's
/// flags byte flipped for good, on a live copy, on a superseded copy or on a trimmed
/// block's copy, changes nothing: after a remount every block reads what was last
/// written (the trimmed one zeros), no stale live copy is found, and the FMS goes on
/// (the flipped live copy overwritten and the trimmed block written again, remounted).
/// With the old encoding (bit 0 alone) the same flip of bit 0 loses the live block and
/// brings the trimmed one back: what these cases catch.
#[test]
fn a_flags_bit_flipped_for_good_changes_no_live_state() {
    for which in [Which::Live, Which::Superseded, Which::Trimmed] {
        for bit in 0..8 {
            let what = format!("{which:?} copy, flags bit {bit}");
            let (mut f, mut data, spec) = flags_flipped(true, which, bit);
            assert_eq!(f.lay.live, layout::LiveFlag::Byte, "{what}");
            assert_eq!(f.mount_report().stale_live_copies, 0, "{what}");
            assert_reads(&mut f, &data, &what);
            let bs = f.lay.block_size as usize;
            data[3] = content(3, 2, bs);
            f.write_block(3, Some(&data[3])).unwrap();
            data[5] = content(5, 2, bs);
            f.write_block(5, Some(&data[5])).unwrap();
            f.flush().unwrap();
            let cfg = f.config().clone();
            let mut g = mount(&spec, &cfg, f.into_nand().into_store());
            assert_eq!(g.mount_report().stale_live_copies, 0, "{what}");
            assert_reads(&mut g, &data, &format!("{what}, rewritten"));
        }
    }
    // The old encoding: bit 0 is the state, and a flip of it is not seen.
    let bs = media().remove(0).2.block_size as usize;
    let mut buf = vec![0u8; bs];
    let (mut f, data, _) = flags_flipped(false, Which::Live, 0);
    f.read_block(3, Some(&mut buf)).unwrap();
    assert!(
        buf != data[3] && buf.iter().all(|&b| b == 0),
        "live bit: lost"
    );
    let (mut f, _, _) = flags_flipped(false, Which::Trimmed, 0);
    f.read_block(5, Some(&mut buf)).unwrap();
    assert_eq!(buf, content(5, 0, bs), "trimmed bit: back");
    // Any other bit of the old encoding's byte is harmless, as before.
    for which in [Which::Live, Which::Superseded, Which::Trimmed] {
        for bit in 1..8 {
            let (mut f, data, _) = flags_flipped(false, which, bit);
            assert_eq!(f.lay.live, layout::LiveFlag::Bit);
            assert_reads(
                &mut f,
                &data,
                &format!("old encoding, {which:?}, bit {bit}"),
            );
        }
    }
}

/// A clear of the live byte that a power cut tore (any subset of its seven bits cleared)
/// on a superseded copy: a copy still read live (4 or more set) is a stale live copy,
/// which the mount clears again (`& 0x02`, the writable hint kept); one read dead is
/// left. Either way the newer copy wins.
#[test]
fn a_torn_clear_of_the_live_byte_is_finished_at_mount() {
    let (_, spec, cfg) = media().remove(0);
    for left in [0xFDu8, 0xF9, 0x0F | 0x02, 0x8D, 0x07, 0x41, 0x02] {
        let mut f = Fms::format(Nand::ram(spec.clone()).unwrap(), cfg.clone()).unwrap();
        let bs = cfg.block_size as usize;
        let mut data: Vec<Vec<u8>> = (0..12).map(|l| content(l, 0, bs)).collect();
        for (l, d) in data.iter().enumerate() {
            f.write_block(l as u32, Some(d)).unwrap();
        }
        let old = f.blocks[2].map;
        data[2] = content(2, 1, bs);
        f.write_block(2, Some(&data[2])).unwrap();
        f.flush().unwrap();
        let (ppn, col) = flags_at(&f, old);
        let mut store = f.into_nand().into_store();
        // What a torn clear of the writable copy's 0xFF leaves: the bits of `left`.
        let mut b = [0u8];
        store.read(ppn, col, &mut b).unwrap();
        assert_eq!(b[0], 0x02, "cleared by the overwrite");
        store.write(ppn, col, &[left]).unwrap();
        let live = (left & 0xFD).count_ones() >= 4;
        let mut f = mount(&spec, &cfg, store);
        assert_eq!(
            f.mount_report().stale_live_copies,
            live as u64,
            "{left:#04x}"
        );
        assert_reads(&mut f, &data, &format!("torn clear {left:#04x}"));
        let mut b = [0u8];
        f.nand.read(ppn, col, &mut b).unwrap();
        assert_eq!(b[0], if live { left & 0x02 } else { left }, "{left:#04x}");
    }
}

/// Media formatted without the live byte (all media before it): their headers keep
/// features 0, a superseded or trimmed copy's flags byte is programmed `& 0xFE` (bits
/// 2..7 stay 1), and they mount, read, trim and write as before, through cleaning and
/// remounts, whatever the mounting configuration says; a medium with the live byte
/// keeps it when mounted with `live_byte: false`.
#[test]
fn old_media_still_mount_read_trim_and_write() {
    let (_, spec, cfg) = media().remove(0);
    let old = FmsConfig {
        live_byte: false,
        ..cfg.clone()
    };
    let (f, mut data) = written(&spec, &old, 40);
    assert_eq!(f.lay.live, layout::LiveFlag::Bit);
    let header = |f: &mut Fms, seg: u32| {
        let mut h = [0u8; SEG_HEADER];
        let first = f.nand.geometry().first_page(seg);
        f.nand.read(first, 0, &mut h).unwrap();
        SegHeader::decode(&h).unwrap().unwrap()
    };
    let mut f = mount(&spec, &cfg, f.into_nand().into_store());
    assert_eq!(f.lay.live, layout::LiveFlag::Bit, "taken from the medium");
    assert!(!f.config().live_byte);
    assert_reads(&mut f, &data, "old medium");
    let bs = cfg.block_size as usize;
    let trimmed = f.blocks[7].map;
    f.trim_block(7).unwrap();
    data[7] = vec![0; bs];
    let (ppn, col) = flags_at(&f, trimmed);
    let mut b = [0u8];
    f.nand.read(ppn, col, &mut b).unwrap();
    assert_eq!(b[0], 0xFE, "trim: & 0xFE");
    let live = f.blocks[9].map;
    f.write_block(9, Some(&content(9, 5, bs))).unwrap();
    data[9] = content(9, 5, bs);
    let (ppn, col) = flags_at(&f, live);
    f.nand.read(ppn, col, &mut b).unwrap();
    assert_eq!(b[0], 0xFE, "overwrite: & 0xFE");
    // Enough writes for the cleaner to erase and rewrite headers.
    for round in 0..6 {
        for l in (0..40).filter(|&l| l != 7) {
            data[l as usize] = content(l, 10 + round, bs);
            f.write_block(l, Some(&data[l as usize])).unwrap();
        }
    }
    assert!(f.stats().erasures > 0, "the cleaner ran");
    f.flush().unwrap();
    for seg in 0..f.lay.segments {
        if f.segs[seg as usize].state != SegState::Bad {
            assert_eq!(header(&mut f, seg).features, 0, "segment {seg}");
        }
    }
    let mut f = mount(&spec, &cfg, f.into_nand().into_store());
    assert_eq!(f.mount_report().stale_live_copies, 0);
    assert_reads(&mut f, &data, "old medium, after cleaning");
    // The other way round: a new medium mounted with `live_byte: false` keeps its byte.
    let (f, data) = written(&spec, &cfg, 20);
    let mut f = mount(&spec, &old, f.into_nand().into_store());
    assert_eq!(f.lay.live, layout::LiveFlag::Byte);
    assert_eq!(
        header(&mut f, 1).features & layout::FEATURE_LIVE_BYTE,
        layout::FEATURE_LIVE_BYTE
    );
    assert_reads(&mut f, &data, "new medium, mounted with live_byte false");
}

/// The FMS's own structures are re-read `FmsConfig::meta_read_retries` times (four times
/// the data's `read_retries`) before they count as torn: a segment header with two bits
/// flipped for good is read 1 + 8 times by default, 1 + 4 with `read_retries` 1, once
/// with 0, and the segment is then dirty.
#[test]
fn headers_are_re_read_four_times_as_often_as_data() {
    let (_, spec, cfg) = media().remove(1);
    for retries in [2u8, 1, 0] {
        let cfg = FmsConfig {
            read_retries: retries,
            ..cfg.clone()
        };
        let (f, _) = written(&spec, &cfg, 40);
        let seg = f.split(f.blocks[39].map).0;
        assert!(seg > 0);
        let first = spec.geometry.first_page(seg);
        let mut store = f.into_nand().into_store();
        flip(&mut *store, first, 12, 0x02);
        flip(&mut *store, first, 50, 0x80);
        let f = mount(&spec, &cfg, store);
        assert_eq!(f.segs[seg as usize].state, SegState::Dirty);
        assert_eq!(cfg.meta_read_retries(), 4 * retries as u32);
        assert_eq!(
            f.stats().read_retries,
            cfg.meta_read_retries() as u64,
            "read_retries {retries}"
        );
    }
}
