//! Page ECC throughput: computing the codes of a 2 KiB page (a write with ECC) and
//! checking a clean page against them (the common read), for the SEC-DED code (strength 1,
//! `nand::ecc`) and the BCH codes of strength 4 and 8 (`nand::bch`), all through
//! `nand::ecc::compute_page_t` / `correct_page_t` as the Flash Memory Server calls them.
//! Bytes per second; the BCH tables are built before timing.
//!
//! Run: `cargo bench -p nand --bench ecc_codes` (add `-- --quick` for a fast pass).

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use nand::ecc::{code_bytes, compute_page_t, correct_page_t};

const PAGE: usize = 2048;

fn ecc_codes(c: &mut Criterion) {
    let mut g = c.benchmark_group("ecc_codes");
    g.throughput(Throughput::Bytes(PAGE as u64));
    let page: Vec<u8> = (0..PAGE as u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    for t in [1u8, 4, 8] {
        let name = if t == 1 {
            "secded".to_string()
        } else {
            format!("bch{t}")
        };
        let mut code = vec![0u8; PAGE / 512 * code_bytes(t)];
        compute_page_t(t, &page, &mut code).unwrap();
        g.bench_function(format!("{name}/encode_2KiB"), |b| {
            b.iter(|| compute_page_t(t, black_box(&page), &mut code).unwrap())
        });
        let mut data = page.clone();
        g.bench_function(format!("{name}/clean_decode_2KiB"), |b| {
            b.iter(|| {
                let r = correct_page_t(t, black_box(&mut data), black_box(&code)).unwrap();
                assert_eq!(r.corrected_bits + r.uncorrectable_chunks, 0);
            })
        });
    }
    g.finish();
}

criterion_group!(benches, ecc_codes);
criterion_main!(benches);
