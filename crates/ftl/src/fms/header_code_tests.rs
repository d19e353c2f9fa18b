//! Segment headers with a code (`layout::FEATURE_HEADER_CODE`, spare mode with ECC): up
//! to the code's strength in bits flipped for good in a header (or its code) are
//! corrected at mount; one more leaves the segment dirty, as before; a torn header
//! program is never taken for a header other than the one intended.

use super::flip_tests::{assert_reads, mount, written};
use super::*;
use layout::{ECC_SPARE_OFFSET, FEATURE_HEADER_CODE};
use mount::{read_header, HeaderRead};
use nand::{DeviceSpec, Store};

/// `mlc2-2g` shrunk to 12 erase blocks of 16 pages, 2048-byte blocks, ECC of strength `t`
/// (1: SEC-DED).
fn medium(t: u8) -> (DeviceSpec, FmsConfig) {
    let mut spec = DeviceSpec::preset("mlc2-2g").unwrap();
    spec.geometry.blocks = 12;
    spec.geometry.pages_per_block = 16;
    let cfg = FmsConfig {
        block_size: 2048,
        ecc: true,
        ecc_strength: t,
        ..FmsConfig::default()
    };
    (spec, cfg)
}

/// Flip bit `bit` of page `ppn`'s raw bytes (data then spare) for good.
fn flip_raw(store: &mut dyn Store, ppn: u64, bit: u32) {
    let mut b = [0u8; 1];
    store.read(ppn, bit / 8, &mut b).unwrap();
    b[0] ^= 1 << (bit % 8);
    store.write(ppn, bit / 8, &b).unwrap();
}

/// Bits of the header (first 64 bytes), spread over magic, counts, numbers and CRC.
const HEADER_BITS: [u32; 9] = [2, 45, 97, 150, 203, 266, 330, 391, 500];

/// The raw-page bit numbers of the first `k` bits of the code bytes in page 0's spare.
fn code_bits(page_size: u32, t: u8, k: usize) -> Vec<u32> {
    let first = (page_size as usize + ECC_SPARE_OFFSET) as u32 * 8;
    let n = nand::ecc::code_bytes(t) as u32 * 8;
    // Bits the code uses (SEC-DED: all 24; BCH: the 13·t parity bits, not the padding).
    let used = if t == 1 { n } else { 13 * t as u32 };
    (0..k as u32).map(|i| first + (i * 5 + 1) % used).collect()
}

/// New formats with ECC set the feature and program the code with the header; without
/// ECC, or with `header_code: false`, page 0's spare stays erased.
#[test]
fn new_ecc_formats_carry_a_header_code() {
    for t in [1u8, 4] {
        let (spec, cfg) = medium(t);
        let f = Fms::format(Nand::ram(spec.clone()).unwrap(), cfg.clone()).unwrap();
        assert_ne!(f.lay.features() & FEATURE_HEADER_CODE, 0);
        let mut store = f.into_nand().into_store();
        let mut page = vec![0u8; spec.geometry.raw_page_size() as usize];
        store
            .read(spec.geometry.first_page(3), 0, &mut page)
            .unwrap();
        let hdr: [u8; SEG_HEADER] = page[..SEG_HEADER].try_into().unwrap();
        let ps = spec.geometry.page_size as usize;
        let cb = nand::ecc::code_bytes(t);
        assert_eq!(
            page[ps + ECC_SPARE_OFFSET..ps + ECC_SPARE_OFFSET + cb],
            super::header_code(t, &hdr)[..]
        );
        assert!(page[ps..ps + ECC_SPARE_OFFSET].iter().all(|&b| b == 0xFF));
        assert!(page[ps + ECC_SPARE_OFFSET + cb..]
            .iter()
            .all(|&b| b == 0xFF));
    }
    for cfg in [
        FmsConfig {
            header_code: false,
            ..medium(4).1
        },
        FmsConfig {
            ecc: false,
            ..medium(4).1
        },
    ] {
        let spec = medium(4).0;
        let f = Fms::format(Nand::ram(spec.clone()).unwrap(), cfg).unwrap();
        assert_eq!(f.lay.features() & FEATURE_HEADER_CODE, 0);
        let mut store = f.into_nand().into_store();
        let mut spare = vec![0u8; spec.geometry.spare_size as usize];
        let ps = spec.geometry.page_size;
        store
            .read(spec.geometry.first_page(3), ps, &mut spare)
            .unwrap();
        assert!(spare.iter().all(|&b| b == 0xFF));
    }
}

/// 1..=t bits flipped for good in a data segment's and in the index segment's header
/// (in the header, in its code bytes, or both): the mount reads the segment (not dirty),
/// reports it when the header did not decode as read, rebuilds the same tables, every
/// block reads what was written, and a remount does the same. t + 1 bits in the header:
/// dirty, as before. A grown-bad segment's header and `Fms::format`'s reading of old
/// headers correct the same way.
#[test]
fn up_to_t_bits_flipped_in_a_header_are_corrected_with_its_code() {
    for t in [1u8, 4] {
        let (spec, cfg) = medium(t);
        let (f, data) = written(&spec, &cfg, 40);
        let clean = f.tables_digest();
        let data_seg = f.split(f.blocks[1].map).0;
        let index_seg = f.index.as_ref().unwrap().seg;
        assert_ne!(data_seg, index_seg);
        let mut store = f.into_nand().into_store();
        for seg in [data_seg, index_seg] {
            let first = spec.geometry.first_page(seg);
            for k in 1..=t as usize {
                // (bits in the header, bits in the code)
                let mut splits = vec![(k, 0), (0, k)];
                if k >= 2 {
                    splits.push((k - 1, 1));
                }
                for (h, c) in splits {
                    let what =
                        format!("BCH/SEC-DED t={t}, segment {seg}, {h} header + {c} code bits");
                    let mut bits: Vec<u32> = HEADER_BITS[..h].to_vec();
                    bits.extend(code_bits(spec.geometry.page_size, t, c));
                    for &b in &bits {
                        flip_raw(&mut *store, first, b);
                    }
                    let mut f = mount(&spec, &cfg, store);
                    let want: Vec<u32> = if h > 0 { vec![seg] } else { vec![] };
                    assert_eq!(f.mount_report().corrected_headers, want, "{what}");
                    assert_eq!(f.mount_report().dirty_segments, 0, "{what}");
                    assert_ne!(f.segs[seg as usize].state, SegState::Dirty, "{what}");
                    assert_eq!(f.tables_digest(), clean, "{what}");
                    assert_reads(&mut f, &data, &what);
                    let f = mount(&spec, &cfg, f.into_nand().into_store());
                    assert_eq!(f.tables_digest(), clean, "{what}, remounted");
                    assert_eq!(f.mount_report().corrected_headers, want, "{what}");
                    store = f.into_nand().into_store();
                    for &b in &bits {
                        flip_raw(&mut *store, first, b);
                    }
                }
            }
        }
        // t + 1 bits in a data segment's header: dirty, as before.
        let first = spec.geometry.first_page(data_seg);
        let bits = &HEADER_BITS[..t as usize + 1];
        for &b in bits {
            flip_raw(&mut *store, first, b);
        }
        let f = mount(&spec, &cfg, store);
        assert!(
            f.mount_report().corrected_headers.is_empty(),
            "t={t}, t+1 bits"
        );
        assert_eq!(f.segs[data_seg as usize].state, SegState::Dirty, "t={t}");
        let mut store = f.into_nand().into_store();
        for &b in bits {
            flip_raw(&mut *store, first, b);
        }
        // t bits in a grown-bad segment's header: its records are read.
        let mut raw = [0u8; SEG_HEADER];
        store.read(first, 0, &mut raw).unwrap();
        let before = SegHeader::decode(&raw).unwrap().unwrap().erase_count;
        let mut info = store.block_info(data_seg);
        info.bad = nand::BadState::Grown;
        store.set_block_info(data_seg, info).unwrap();
        for &b in &HEADER_BITS[..t as usize] {
            flip_raw(&mut *store, first, b);
        }
        let mut f = mount(&spec, &cfg, store);
        assert_eq!(
            f.mount_report().corrected_headers,
            vec![data_seg],
            "t={t}, grown bad"
        );
        assert_eq!(f.mount_report().grown_bad_read, 1, "t={t}, grown bad");
        assert_reads(&mut f, &data, "grown bad");
        // `Fms::format` counts the corrected header's erase count.
        let mut store = f.into_nand().into_store();
        let mut info = store.block_info(data_seg);
        info.bad = nand::BadState::Good;
        store.set_block_info(data_seg, info).unwrap();
        let f = Fms::format(Nand::open(spec.clone(), store).unwrap(), cfg.clone()).unwrap();
        assert_eq!(
            f.segs[data_seg as usize].erase_count,
            before + 1,
            "t={t}, format"
        );
    }
}

/// Two bits flipped in a header are corrected with the code, and only with it (read
/// without the code, the header is unreadable): the tests above fail without the code
/// correction.
#[test]
fn two_flipped_bits_need_the_code() {
    let (spec, cfg) = medium(4);
    let (f, _) = written(&spec, &cfg, 40);
    let seg = f.split(f.blocks[1].map).0;
    let first = spec.geometry.first_page(seg);
    let mut store = f.into_nand().into_store();
    for &b in &HEADER_BITS[..2] {
        flip_raw(&mut *store, first, b);
    }
    let mut f = mount(&spec, &cfg, store);
    assert_eq!(f.mount_report().corrected_headers, vec![seg]);
    assert_eq!(
        read_header(&mut f, seg, None).unwrap(),
        HeaderRead::Unreadable
    );
    assert!(matches!(
        read_header(&mut f, seg, Some(4)).unwrap(),
        HeaderRead::Corrected(_)
    ));
}

/// The store and header page of `seg` (data, then spare) after `Fms::erase_and_header`
/// of a free segment on a written medium, optionally with a power cut (seeded) during the
/// header program.
fn header_program(
    spec: &DeviceSpec,
    cfg: &FmsConfig,
    cut: Option<u64>,
) -> (Box<dyn Store>, u32, Vec<u8>) {
    let (mut f, _) = written(spec, cfg, 8);
    let seg = *f.free.back().unwrap();
    if let Some(seed) = cut {
        f.nand.set_faults(nand::FaultPlan {
            power_cut_at: Some(2),
            torn: nand::TornMode::Partial,
            seed,
            ..nand::FaultPlan::default()
        });
        let _ = f.erase_and_header(seg, 0);
    } else {
        assert!(f.erase_and_header(seg, 0).unwrap());
    }
    let mut store = f.into_nand().into_store();
    let mut page = vec![0u8; spec.geometry.raw_page_size() as usize];
    store
        .read(spec.geometry.first_page(seg), 0, &mut page)
        .unwrap();
    (store, seg, page)
}

/// A header program torn by a power cut (it follows the erase, alone in its program) is
/// never taken for a header other than the one intended: real cuts (`TornMode::Partial`)
/// for many seeds, and tears that leave 1 to t + 3 of the bits it clears (in the header
/// and in its code) set, each taken only as the intended header (up to t: always) or
/// left dirty.
#[test]
fn a_torn_header_program_is_the_intended_header_or_dirty() {
    for t in [1u8, 4] {
        let (spec, cfg) = medium(t);
        let (_, seg, intended) = header_program(&spec, &cfg, None);
        let want = SegHeader::decode(&intended[..SEG_HEADER]).unwrap().unwrap();
        let check = |store: Box<dyn Store>, what: &str, must: bool| {
            let mut f = mount(&spec, &cfg, store);
            let dirty = f.segs[seg as usize].state == SegState::Dirty;
            assert!(!(must && dirty), "{what}: dirty");
            if !dirty {
                let code = f.lay.header_code_t();
                let h = read_header(&mut f, seg, code).unwrap().header();
                assert_eq!(
                    h,
                    Some(want),
                    "{what}: a header other than the intended one"
                );
            }
        };
        for seed in 0..40 {
            let (store, _, page) = header_program(&spec, &cfg, Some(seed));
            let what = format!("t={t}, cut seed {seed}");
            // A subset of the bits the program clears.
            assert!(
                page.iter().zip(&intended).all(|(p, i)| p & i == *i),
                "{what}"
            );
            check(store, &what, false);
        }
        // Bits the complete program clears, data and code.
        let zeros: Vec<usize> = (0..intended.len() * 8)
            .filter(|&b| intended[b / 8] & (1 << (b % 8)) == 0)
            .collect();
        let mut rng = 0x9E37_79B9_7F4A_7C15u64 ^ t as u64;
        for missing in 1..=t as usize + 3 {
            for round in 0..12 {
                let (mut store, _, _) = header_program(&spec, &cfg, None);
                let mut page = intended.clone();
                let mut left = Vec::new();
                while left.len() < missing {
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    let b = zeros[(rng % zeros.len() as u64) as usize];
                    if !left.contains(&b) {
                        left.push(b);
                        page[b / 8] |= 1 << (b % 8);
                    }
                }
                let first = spec.geometry.first_page(seg);
                store.write(first, 0, &page).unwrap();
                let what = format!("t={t}, torn {missing} bits short (round {round})");
                check(store, &what, missing <= t as usize);
            }
        }
    }
}

/// A corrupt or foreign header that says its medium's headers carry a code the device's
/// spare area cannot hold (or that has none: header mode): mount and format read the
/// other headers without the code, and fail or succeed with an error, never a panic (QA
/// stop 28: the read of the chunk's code ran past the spare area).
#[test]
fn a_header_code_the_device_cannot_hold_is_not_read() {
    for (preset, block_size, features) in [
        ("nandsim-256m", 1024, 0x5u32),
        ("intel-series2plus-24m", 4096, 0x7),
    ] {
        let mut spec = DeviceSpec::preset(preset).unwrap();
        spec.geometry.blocks = 16;
        let cfg = FmsConfig {
            block_size,
            ..FmsConfig::default()
        };
        let f = Fms::format(Nand::ram(spec.clone()).unwrap(), cfg.clone()).unwrap();
        let mut store = f.into_nand().into_store();
        // Segment 0's header: garbage; segment 1's: valid, saying a header code.
        let garbage: Vec<u8> = (0..SEG_HEADER as u8).map(|i| i.wrapping_mul(37)).collect();
        store.write(0, 0, &garbage).unwrap();
        let first1 = spec.geometry.first_page(1);
        let mut b = [0u8; SEG_HEADER];
        store.read(first1, 0, &mut b).unwrap();
        let mut h = SegHeader::decode(&b).unwrap().unwrap();
        h.features = features;
        store.write(first1, 0, &h.encode()).unwrap();
        let copy = store.try_clone().unwrap();
        let nand = Nand::open(spec.clone(), store).unwrap();
        let r = Fms::mount(nand, cfg.clone());
        assert!(r.is_err(), "{preset}: the medium mounted");
        let nand = Nand::open(spec.clone(), copy).unwrap();
        // (Formatting it again reads every old header: no panic, whatever it decides.)
        let _ = Fms::format(nand, cfg);
    }
}
