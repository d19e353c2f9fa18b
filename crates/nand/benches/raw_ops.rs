//! Raw device operations per second: program (opaque data, and with a record), record
//! read, erase — on the payload-less store (simulation mode) and the RAM store, for the
//! NOR-style `intel-series2plus-24m` and the small-block SLC `nandsim-256m`.
//!
//! Every bench has `Throughput::Elements(1)`, so criterion prints operations per second
//! (`elem/s`). Wall time only: the device's virtual clock is not measured here.
//!
//! `nandsim-256m` keeps its record in the 16-byte spare area. `intel-series2plus-24m` has
//! no spare area, so its record is a 16-byte header programmed into (and read from) the
//! start of the page's data area, which is what the Flash Memory Server does.
//!
//! Run: `cargo bench -p nand --bench raw_ops` (add `-- --quick` for a fast pass).

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{criterion_group, criterion_main, BenchmarkGroup, Criterion, Throughput};
use nand::{Data, DeviceSpec, Nand};

const RECORD: usize = 16;
/// Pages programmed up front for the read bench.
const READ_PAGES: u64 = 4096;

#[derive(Clone, Copy)]
enum StoreKind {
    Payloadless,
    Ram,
}

impl StoreKind {
    fn name(self) -> &'static str {
        match self {
            StoreKind::Payloadless => "payloadless",
            StoreKind::Ram => "ram",
        }
    }
    fn open(self, spec: &DeviceSpec) -> Nand {
        match self {
            StoreKind::Payloadless => Nand::payloadless(spec.clone()),
            StoreKind::Ram => Nand::ram(spec.clone()),
        }
        .unwrap()
    }
}

/// How a record is written and read on this device.
#[derive(Clone, Copy)]
struct Record {
    /// Spare area present: record at spare offset 0; otherwise at data column 0.
    in_spare: bool,
    page_size: u32,
}

impl Record {
    fn of(spec: &DeviceSpec) -> Record {
        Record {
            in_spare: spec.geometry.spare_size as usize >= RECORD,
            page_size: spec.geometry.page_size,
        }
    }
    fn program(self, n: &mut Nand, ppn: u64, rec: &[u8; RECORD]) {
        if self.in_spare {
            n.program_page(ppn, Data::Opaque(self.page_size), Some(rec))
        } else {
            n.program(ppn, 0, Data::Bytes(rec), None)
        }
        .unwrap()
    }
    fn read(self, n: &mut Nand, ppn: u64, buf: &mut [u8; RECORD]) {
        let col = if self.in_spare { self.page_size } else { 0 };
        n.read(ppn, col, buf).unwrap()
    }
}

/// Time `iters` programs of successive pages; the erase that makes a block programmable
/// again is done outside the timed region.
fn timed_programs(
    n: &mut Nand,
    next: &mut u64,
    iters: u64,
    mut program: impl FnMut(&mut Nand, u64),
) -> Duration {
    let ppb = n.geometry().pages_per_block as u64;
    let pages = n.geometry().pages();
    let mut spent = Duration::ZERO;
    let mut left = iters;
    while left > 0 {
        let block = n.geometry().block_of(*next);
        let first = n.geometry().first_page(block);
        if *next == first {
            n.erase(block).unwrap();
        }
        let run = left.min(first + ppb - *next);
        let start = Instant::now();
        for _ in 0..run {
            program(n, *next);
            *next += 1;
        }
        spent += start.elapsed();
        left -= run;
        if *next == pages {
            *next = 0;
        }
    }
    spent
}

fn device_benches(
    g: &mut BenchmarkGroup<'_, criterion::measurement::WallTime>,
    spec: &DeviceSpec,
    kind: StoreKind,
) {
    let rec = Record::of(spec);
    let rec_name = if rec.in_spare { "spare" } else { "header" };
    let page_size = spec.geometry.page_size;

    g.bench_function("program_opaque", |b| {
        let mut n = kind.open(spec);
        let mut next = 0;
        b.iter_custom(|iters| {
            timed_programs(&mut n, &mut next, iters, |n, ppn| {
                n.program_page(ppn, Data::Opaque(page_size), None).unwrap()
            })
        })
    });

    g.bench_function(format!("program_{rec_name}_record"), |b| {
        let mut n = kind.open(spec);
        let mut next = 0;
        b.iter_custom(|iters| {
            timed_programs(&mut n, &mut next, iters, |n, ppn| {
                let mut r = [0u8; RECORD];
                r[..8].copy_from_slice(&ppn.to_le_bytes());
                rec.program(n, ppn, &r)
            })
        })
    });

    g.bench_function(format!("{rec_name}_read"), |b| {
        let mut n = kind.open(spec);
        for ppn in 0..READ_PAGES {
            let mut r = [0u8; RECORD];
            r[..8].copy_from_slice(&ppn.to_le_bytes());
            rec.program(&mut n, ppn, &r);
        }
        let mut ppn = 0;
        let mut buf = [0u8; RECORD];
        b.iter(|| {
            rec.read(&mut n, ppn, &mut buf);
            black_box(&buf);
            ppn = (ppn + 1) % READ_PAGES;
        })
    });

    g.bench_function("erase", |b| {
        // Millions of erases cycle through the blocks: lift the endurance limit so none
        // wears out (the limit is one comparison and does not change the cost).
        let mut spec = spec.clone();
        spec.endurance = u32::MAX;
        let mut n = kind.open(&spec);
        let blocks = spec.geometry.blocks;
        let mut block = 0;
        b.iter(|| {
            n.erase(block).unwrap();
            block = (block + 1) % blocks;
        })
    });
}

fn raw_ops(c: &mut Criterion) {
    for preset in ["intel-series2plus-24m", "nandsim-256m"] {
        let spec = DeviceSpec::preset(preset).unwrap();
        for kind in [StoreKind::Payloadless, StoreKind::Ram] {
            let mut g = c.benchmark_group(format!("{preset}/{}", kind.name()));
            g.throughput(Throughput::Elements(1))
                .sample_size(20)
                .warm_up_time(Duration::from_millis(500))
                .measurement_time(Duration::from_secs(2));
            device_benches(&mut g, &spec, kind);
            g.finish();
        }
    }
}

/// The SEC-DED code (`nand::ecc`) over a 2 KiB page: computing its four codes (a write
/// with ECC), and checking a clean page against them (a read). Bytes per second.
fn ecc(c: &mut Criterion) {
    let mut g = c.benchmark_group("ecc");
    g.throughput(Throughput::Bytes(2048));
    let page: Vec<u8> = (0..2048u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let mut code = [0u8; 12];
    g.bench_function("compute_2KiB", |b| {
        b.iter(|| nand::ecc::ecc_compute_page(black_box(&page), &mut code).unwrap())
    });
    let mut data = page.clone();
    g.bench_function("check_2KiB", |b| {
        b.iter(|| nand::ecc::ecc_correct_page(black_box(&mut data), &code).unwrap())
    });
    g.finish();
}

criterion_group!(benches, raw_ops, ecc);
criterion_main!(benches);
