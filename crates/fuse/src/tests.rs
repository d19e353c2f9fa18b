//! The byte-level view against a reference model, on the FMS over a RAM device (no FUSE
//! needed; the mount itself is tested by the CLI's `blockdev` tests).

use super::*;
use ftl::fms::{Fms, FmsConfig};
use nand::{DeviceSpec, Nand};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

fn fms(preset: &str, blocks: u32, block_size: u32) -> Fms {
    let mut d = DeviceSpec::preset(preset).unwrap();
    d.geometry.blocks = blocks;
    let cfg = FmsConfig {
        block_size,
        ..FmsConfig::default()
    };
    Fms::format(Nand::ram(d).unwrap(), cfg).unwrap()
}

/// Random unaligned reads, writes (some crossing the end) and discards agree with a
/// byte array, through many cleanings; the counts add up.
#[test]
fn unaligned_requests_match_a_byte_model() {
    for (preset, blocks, bs) in [
        ("nandsim-256m", 24, 1024),
        ("intel-series2plus-24m", 12, 4096),
    ] {
        let dev = ByteDevice::new(fms(preset, blocks, bs));
        let size = dev.size();
        let mut model = vec![0u8; size as usize];
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        let (mut writes, mut written, mut discards) = (0, 0, 0);
        for i in 0..1500 {
            let off = rng.gen_range(0..size);
            let len = match rng.gen_range(0..4) {
                0 => rng.gen_range(1..16),
                1 => rng.gen_range(1..2000),
                2 => rng.gen_range(1..20_000),
                _ => 512 * rng.gen_range(1..16),
            };
            match rng.gen_range(0..10) {
                0 => {
                    dev.discard(off, len).unwrap();
                    let end = (off + len).min(size) as usize;
                    model[off as usize..end].fill(0);
                    discards += 1;
                }
                1..=5 => {
                    let data: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
                    let n = dev.write_at(off, &data).unwrap();
                    assert_eq!(n as u64, len.min(size - off), "{preset} op {i}");
                    model[off as usize..off as usize + n].copy_from_slice(&data[..n]);
                    writes += 1;
                    written += n as u64;
                }
                _ => {
                    let got = dev.read_at(off, len).unwrap();
                    let end = (off + len).min(size) as usize;
                    assert_eq!(got, &model[off as usize..end], "{preset} op {i}");
                }
            }
        }
        assert_eq!(dev.read_at(0, size).unwrap(), model, "{preset}");
        let c = dev.counts();
        assert_eq!(
            (c.writes, c.write_bytes, c.discards),
            (writes, written, discards)
        );
        assert_eq!(c.errors, 0);
        let s = dev.shared.borrow();
        assert!(s.dev.stats().erasures > 20, "{preset}: the cleaner ran");
    }
}

/// Past the end: reads are empty, writes fail `ENOSPC`, discards do nothing.
#[test]
fn the_end_of_the_device() {
    let dev = ByteDevice::new(fms("nandsim-256m", 24, 1024));
    let size = dev.size();
    assert!(dev.read_at(size, 10).unwrap().is_empty());
    assert_eq!(dev.read_at(size - 3, 10).unwrap().len(), 3);
    assert_eq!(dev.write_at(size, b"x"), Err(libc::ENOSPC));
    assert_eq!(dev.write_at(size - 2, b"abcd"), Ok(2));
    assert_eq!(dev.read_at(size - 2, 2).unwrap(), b"ab");
    dev.discard(size, 100).unwrap();
    dev.discard(size - 1, 100).unwrap();
    assert_eq!(dev.read_at(size - 2, 2).unwrap(), b"a\0");
    assert_eq!(dev.write_at(0, b""), Ok(0));
}

/// A discard of whole blocks reclaims them on the FMS (unmapped, not overwritten with
/// zeros), and a device error becomes an errno and is kept.
#[test]
fn discards_trim_and_errors_are_kept() {
    let dev = ByteDevice::new(fms("nandsim-256m", 24, 1024));
    dev.write_at(0, &[7u8; 8192]).unwrap();
    let mapped = |d: &ByteDevice<Fms>| {
        let s = d.shared.borrow();
        (0..8).filter(|&l| s.dev.lookup(l).is_some()).count()
    };
    assert_eq!(mapped(&dev), 8);
    // 100..7000: blocks 1..=5 whole (1024..6144), parts of blocks 0 and 6.
    dev.discard(100, 6900).unwrap();
    assert_eq!(mapped(&dev), 3);
    let got = dev.read_at(0, 8192).unwrap();
    assert!(got[..100].iter().all(|&b| b == 7));
    assert!(got[100..7000].iter().all(|&b| b == 0));
    assert!(got[7000..].iter().all(|&b| b == 7));

    // Cut the power at the next program: the write fails EIO, and so does every later
    // request; the first error is kept.
    dev.shared
        .borrow_mut()
        .dev
        .nand_mut()
        .set_faults(nand::FaultPlan {
            power_cut_at: Some(1),
            ..Default::default()
        });
    assert_eq!(dev.write_at(0, b"x"), Err(libc::EIO));
    assert_eq!(dev.write_at(4096, b"y"), Err(libc::EIO));
    let s = dev.shared.borrow();
    assert_eq!(s.counts.errors, 2);
    assert!(
        s.first_error
            .as_deref()
            .unwrap()
            .starts_with("write at byte 0: "),
        "{:?}",
        s.first_error
    );
}

#[test]
fn device_errors_map_to_errnos() {
    assert_eq!(errno(&DevError::NoSpace), libc::ENOSPC);
    assert_eq!(
        errno(&DevError::WornOut { bad: 1, blocks: 2 }),
        libc::ENOSPC
    );
    assert_eq!(errno(&DevError::out_of_range(9, 1, 8)), libc::EINVAL);
    assert_eq!(errno(&DevError::Uncorrectable { lba: 3 }), libc::EIO);
    assert_eq!(errno(&DevError::Lost { lba: 3 }), libc::EIO);
    assert_eq!(errno(&DevError::PowerLoss), libc::EIO);
}

/// A flush syncs only after a write or discard: a `close` after reads costs nothing.
#[test]
fn flushes_follow_writes_only() {
    let dev = ByteDevice::new(fms("nandsim-256m", 24, 1024));
    dev.read_at(0, 4096).unwrap();
    dev.flush().unwrap();
    assert_eq!(dev.counts().flushes, 0);
    dev.write_at(10, b"abc").unwrap();
    dev.flush().unwrap();
    dev.flush().unwrap();
    assert_eq!(dev.counts().flushes, 1);
    dev.discard(0, 2048).unwrap();
    dev.flush().unwrap();
    assert_eq!(dev.counts().flushes, 2);
}
