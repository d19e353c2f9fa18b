//! Trace parsing rate (records per second) per format, plain and gzip, and the end-to-end
//! simulation rate on a trace against the same workload generated in memory. The trace
//! files (1 M records of 90/10 hot/cold, 30% reads) are written to a temporary directory
//! before measuring.

use std::path::{Path, PathBuf};

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use sim::driver::{Arrival, SimConfig};
use sim::trace::generate::{generator, GenConfig, GenWorkload};
use sim::trace::{Format, TraceOptions, TraceReader, TraceSpec, TraceWriter};
use sim::WorkloadSpec;

const RECORDS: u64 = 1_000_000;
const SIM_WRITES: u64 = 50_000;

fn write_trace(path: &Path, fmt: Format, gzip: bool, gen: &GenConfig) {
    let mut w = TraceWriter::create(path, fmt, gzip).unwrap();
    for r in generator(gen).unwrap() {
        w.write(&r).unwrap();
    }
    w.finish().unwrap();
}

fn parse(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let gen = GenConfig {
        workload: GenWorkload::Synthetic(WorkloadSpec::HotCold { x: 0.9, y: 0.1 }),
        requests: RECORDS,
        space_bytes: 16 << 30,
        read_fraction: Some(0.3),
        ..Default::default()
    };
    let mut files: Vec<(String, Format, PathBuf)> = Vec::new();
    for fmt in Format::ALL {
        let p = dir.path().join(format!("t.{fmt}"));
        write_trace(&p, fmt, false, &gen);
        files.push((fmt.name().to_string(), fmt, p));
    }
    for fmt in [Format::Msr, Format::Blkparse] {
        let p = dir.path().join(format!("t.{fmt}.gz"));
        write_trace(&p, fmt, true, &gen);
        files.push((format!("{fmt}.gz"), fmt, p));
    }
    let mut g = c.benchmark_group("trace_parse_records");
    g.sample_size(10);
    g.throughput(Throughput::Elements(RECORDS));
    for (name, fmt, path) in &files {
        let opts = TraceOptions {
            format: Some(*fmt),
            ..Default::default()
        };
        g.bench_function(name.as_str(), |b| {
            b.iter(|| {
                let n = TraceReader::open(path, &opts)
                    .unwrap()
                    .map(|r| r.unwrap().sectors as u64)
                    .sum::<u64>();
                assert!(n > 0);
                n
            })
        });
    }
    g.finish();
}

/// The whole `sim` run (format, pre-fill, workload, remount) on the Intel card with greedy
/// cleaning: the synthetic 90/10 workload, and the same requests read from a trace.
fn end_to_end(c: &mut Criterion) {
    let dir = tempfile::tempdir().unwrap();
    let mut base = SimConfig::flagship();
    base.fms.policy = ftl::fms::select::Policy::Greedy;
    base.fms.redistribution = sim::reproduce::paper_pairing(base.fms.policy);
    base.written_bytes = SIM_WRITES * 4096;
    let cap = base.device.geometry.capacity_bytes();
    let space = ((cap as f64 * base.fill) / 4096.0).floor() as u64 * 4096;
    let gen = GenConfig {
        workload: GenWorkload::Synthetic(WorkloadSpec::HotCold { x: 0.9, y: 0.1 }),
        requests: SIM_WRITES,
        space_bytes: space,
        seed: base.seed,
        ..Default::default()
    };
    let mut g = c.benchmark_group("sim_user_writes_end_to_end");
    g.sample_size(10);
    g.throughput(Throughput::Elements(SIM_WRITES));
    g.bench_function("synthetic", |b| b.iter(|| sim::run(&base).unwrap()));
    for fmt in [Format::Fio, Format::Msr] {
        let p = dir.path().join(format!("sim.{fmt}"));
        write_trace(&p, fmt, false, &gen);
        let mut cfg = base.clone();
        cfg.workload = WorkloadSpec::Trace(Box::new(TraceSpec::new(&p)));
        cfg.arrival = Arrival::Closed;
        let r = sim::run(&cfg).unwrap();
        assert_eq!(r.erasures, sim::run(&base).unwrap().erasures);
        g.bench_function(format!("trace_{fmt}"), |b| {
            b.iter(|| sim::run(&cfg).unwrap())
        });
    }
    g.finish();
}

criterion_group!(benches, parse, end_to_end);
criterion_main!(benches);
