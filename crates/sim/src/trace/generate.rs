//! `trace generate`: synthetic traces. Any `--workload` of the simulator (sequential,
//! random, hotcold:X/Y, phases:...) — the same request stream the simulator generates for
//! the same space, unit and seed — plus two generators shaped after the workloads of
//! Chang & Kuo 2005, Section 6.1:
//!
//! * `rootdisk` — the root disk of a Windows XP / NTFS laptop. Matched statistics (see
//!   `docs/traces.md`): reads are 30/55 of the bytes (30 GB read, 25 GB written); mean
//!   read 38 sectors, mean write 35 sectors; 62% of the writes are small (≤ 8 sectors) and
//!   carry 10% of the written bytes; large writes (≥ 128 sectors) carry 77% of the bytes
//!   (21% of the writes: with every large write 128 sectors long, the paper's 22% and 77%
//!   and 35 sectors cannot all hold, so the count gives); small writes touch 1% of the
//!   space with strong locality, large writes 32% of it, sequentially.
//! * `multimedia` — files of 1 MB to 1 GB (log-uniform, at most an eighth of the space)
//!   written sequentially in 64 KiB requests and deleted (trimmed) sporadically to keep
//!   the space at most 80% full, with a small metadata update (file-system maintenance)
//!   after every 1 MiB of file data and every deletion: most writes are bulk and sequential.

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use super::Record;
use crate::driver::Op;
use crate::workload::{Workload, WorkloadSpec};

/// What to generate.
#[derive(Clone, Debug, PartialEq)]
pub enum GenWorkload {
    Synthetic(WorkloadSpec),
    RootDisk,
    Multimedia,
}

impl GenWorkload {
    pub fn parse(s: &str) -> Result<GenWorkload, String> {
        match s.trim() {
            "rootdisk" | "root-disk" => Ok(GenWorkload::RootDisk),
            "multimedia" => Ok(GenWorkload::Multimedia),
            other => match WorkloadSpec::parse(other)? {
                WorkloadSpec::Trace(_) => {
                    Err("workload: trace generate needs a synthetic workload, not a trace".into())
                }
                w => Ok(GenWorkload::Synthetic(w)),
            },
        }
    }

    pub fn label(&self) -> String {
        match self {
            GenWorkload::Synthetic(w) => w.label(),
            GenWorkload::RootDisk => "rootdisk".into(),
            GenWorkload::Multimedia => "multimedia".into(),
        }
    }

    /// The share of requests that are reads when `--read-fraction` is not given.
    pub fn default_read_fraction(&self) -> f64 {
        match self {
            // 30 GB read / 25 GB written, 38 / 35 sectors per request.
            GenWorkload::RootDisk => ROOT_READ_FRACTION,
            _ => 0.0,
        }
    }
}

/// Read requests per request of the root-disk workload: reads/writes by count is
/// (30 / 38) / (25 / 35).
pub const ROOT_READ_FRACTION: f64 = (30.0 / 38.0) / (30.0 / 38.0 + 25.0 / 35.0);

/// Generator settings.
#[derive(Clone, Debug)]
pub struct GenConfig {
    pub workload: GenWorkload,
    pub requests: u64,
    /// Request size of the synthetic workloads.
    pub unit_bytes: u64,
    /// The logical space addressed.
    pub space_bytes: u64,
    /// Poisson arrivals at this many requests per second.
    pub rate: f64,
    pub seed: u64,
    /// Share of requests that are reads (default: the workload's own).
    pub read_fraction: Option<f64>,
}

impl Default for GenConfig {
    fn default() -> Self {
        GenConfig {
            workload: GenWorkload::Synthetic(WorkloadSpec::HotCold { x: 0.9, y: 0.1 }),
            requests: 100_000,
            unit_bytes: 4096,
            space_bytes: 1 << 30,
            rate: 1000.0,
            seed: 1,
            read_fraction: None,
        }
    }
}

enum Kind {
    Synthetic { w: Workload, unit: u64 },
    Root(Box<Root>),
    Media(Box<Media>),
}

/// A stream of generated records.
pub struct Generator {
    kind: Kind,
    left: u64,
    read_fraction: f64,
    op_rng: Xoshiro256PlusPlus,
    time_rng: Xoshiro256PlusPlus,
    t_s: f64,
    rate: f64,
    first: bool,
}

/// Build the generator for `cfg`.
pub fn generator(cfg: &GenConfig) -> Result<Generator, String> {
    let space = cfg.space_bytes / 512;
    if !(cfg.rate > 0.0 && cfg.rate.is_finite()) {
        return Err(format!("rate: {} must be > 0", cfg.rate));
    }
    let rf = cfg
        .read_fraction
        .unwrap_or_else(|| cfg.workload.default_read_fraction());
    if !(0.0..=1.0).contains(&rf) {
        return Err(format!("read fraction: {rf} must be in [0, 1]"));
    }
    let kind = match &cfg.workload {
        GenWorkload::Synthetic(spec) => {
            spec.check_requests(cfg.requests)
                .map_err(|e| format!("requests: {e}"))?;
            if cfg.unit_bytes == 0 || !cfg.unit_bytes.is_multiple_of(512) {
                return Err(format!(
                    "unit: {} must be a positive multiple of 512 bytes",
                    cfg.unit_bytes
                ));
            }
            // A record's size is a 32-bit count of sectors.
            if cfg.unit_bytes / 512 > u64::from(u32::MAX) {
                return Err(format!(
                    "unit: {} bytes is too large (a request is at most {} bytes)",
                    cfg.unit_bytes,
                    u64::from(u32::MAX) * 512
                ));
            }
            let units = cfg.space_bytes / cfg.unit_bytes;
            if units == 0 {
                return Err(format!(
                    "space: {} bytes holds no unit of {} bytes",
                    cfg.space_bytes, cfg.unit_bytes
                ));
            }
            Kind::Synthetic {
                w: Workload::new(spec, units, cfg.requests, cfg.seed),
                unit: cfg.unit_bytes / 512,
            }
        }
        GenWorkload::RootDisk => {
            if space < 64 * 128 {
                return Err(format!(
                    "space: rootdisk needs at least 4 MiB, got {} bytes",
                    cfg.space_bytes
                ));
            }
            Kind::Root(Box::new(Root::new(space, cfg.seed)))
        }
        GenWorkload::Multimedia => {
            if space < 64 * 128 {
                return Err(format!(
                    "space: multimedia needs at least 4 MiB, got {} bytes",
                    cfg.space_bytes
                ));
            }
            Kind::Media(Box::new(Media::new(space, cfg.seed)))
        }
    };
    let time_rng = Xoshiro256PlusPlus::seed_from_u64(cfg.seed ^ 0x7173_0000_0002);
    check_times(time_rng.clone(), cfg.rate, cfg.requests)?;
    Ok(Generator {
        kind,
        left: cfg.requests,
        read_fraction: rf,
        op_rng: Xoshiro256PlusPlus::seed_from_u64(cfg.seed ^ 0x0dd5_eed0_0001),
        time_rng,
        t_s: 0.0,
        rate: cfg.rate,
        first: true,
    })
}

/// About the latest arrival time a generated record may have, in seconds: the simulator
/// accepts arrivals up to [`crate::driver::MAX_ARRIVAL_PS`] (about 9.2e6 s) after the
/// start of its workload, and a trace's times count from its first record, so a generated
/// trace runs whatever device and pre-fill `flashkit sim` puts before it. Each record's
/// time, in the whole microseconds it is written in, is checked with the driver's own
/// [`crate::driver::arrival_in_range`]. Every output format holds this much: the largest
/// time is about 9.2e12 µs, exact in an f64 and in 64-bit nanoseconds (the msr format's
/// ticks reach past 2262 only after about 7.5e9 s).
pub const MAX_TIME_S: f64 = crate::driver::MAX_ARRIVAL_PS / 1e12;

/// A record's time stamp: whole microseconds, so every format (fio's are µs) holds the
/// times exactly.
fn time_ns_of(t_s: f64) -> i64 {
    (t_s * 1e6).round() as i64 * 1_000
}

/// Whether `flashkit sim` accepts a record at `t_s` seconds after the first one (as
/// written: in whole microseconds).
fn time_fits(t_s: f64) -> bool {
    // The first two tests keep `time_ns_of` far from overflowing 64 bits.
    t_s.is_finite()
        && t_s <= 2.0 * MAX_TIME_S
        && crate::driver::arrival_in_range(crate::driver::trace_arrival_ps(time_ns_of(t_s)))
}

/// One step of the arrival process: the gap to the next arrival, in seconds.
fn gap_s(rng: &mut Xoshiro256PlusPlus, rate: f64) -> f64 {
    let u: f64 = rng.gen_range(f64::MIN_POSITIVE..1.0);
    -u.ln() / rate
}

/// Refuse a rate and request count whose arrival times do not all fit: the time stream
/// has its own generator, so running a copy of it gives exactly the times the records
/// will have (the first record is at 0).
fn check_times(mut rng: Xoshiro256PlusPlus, rate: f64, requests: u64) -> Result<(), String> {
    let mut t = 0.0f64;
    for n in 2..=requests {
        t += gap_s(&mut rng, rate);
        if !time_fits(t) {
            return Err(format!(
                "--rate {}: record {n} (of --requests {requests}) would arrive {t:.3e} s after \
                 the first, past the {MAX_TIME_S:.0} s that the simulator's clock and the trace \
                 formats hold (raise --rate or lower --requests)",
                short(rate)
            ));
        }
    }
    Ok(())
}

/// A number as typed: "1000", "0.5", "1e-300" (not 300 digits).
pub fn short(v: f64) -> String {
    if v != 0.0 && !(1e-4..1e15).contains(&v.abs()) {
        format!("{v:e}")
    } else {
        format!("{v}")
    }
}

impl Iterator for Generator {
    type Item = Record;

    fn next(&mut self) -> Option<Record> {
        if self.left == 0 {
            return None;
        }
        self.left -= 1;
        if !self.first {
            self.t_s += gap_s(&mut self.time_rng, self.rate);
        }
        // Checked by `check_times` for every record.
        debug_assert!(time_fits(self.t_s));
        self.first = false;
        let time_ns = time_ns_of(self.t_s);
        let read = self.read_fraction > 0.0 && self.op_rng.gen_bool(self.read_fraction);
        let (op, lba, sectors) = match &mut self.kind {
            Kind::Synthetic { w, unit } => {
                let u = w.next()?;
                (if read { Op::Read } else { Op::Write }, u * *unit, *unit)
            }
            Kind::Root(r) => r.next(read),
            Kind::Media(m) => m.next(read),
        };
        Some(Record {
            time_ns,
            op,
            lba,
            sectors: sectors as u32,
        })
    }
}

/// Pick from `(value, probability)` pairs.
fn pick(rng: &mut Xoshiro256PlusPlus, table: &[(u64, f64)]) -> u64 {
    let mut u: f64 = rng.gen();
    for &(v, p) in table {
        if u < p {
            return v;
        }
        u -= p;
    }
    table[table.len() - 1].0
}

/// Small-write sizes (sectors): mean 5.67, so that 62% of the writes carry 10% of the bytes.
const ROOT_SMALL: [(u64, f64); 4] = [(8, 0.58), (4, 0.17), (2, 0.10), (1, 0.15)];
/// Medium-write sizes: mean 26.8 sectors (13% of the bytes in 17% of the writes).
const ROOT_MEDIUM: [(u64, f64); 4] = [(16, 0.55), (24, 0.15), (32, 0.15), (64, 0.15)];
/// Write classes by count: small, medium, large.
const ROOT_CLASSES: [(u64, f64); 3] = [(0, 0.62), (1, 0.17), (2, 0.21)];
/// Read sizes: mean 38 sectors.
const ROOT_READS: [(u64, f64); 2] = [(8, 0.75), (128, 0.25)];
const LARGE: u64 = 128;

struct Root {
    rng: Xoshiro256PlusPlus,
    /// Small writes: 1% of the space, 4 KiB blocks.
    small_blocks: u64,
    /// Large and medium writes: the next 32% of the space, in 64 KiB chunks.
    large_start: u64,
    large_chunks: u64,
    cursor: u64,
}

impl Root {
    fn new(space: u64, seed: u64) -> Root {
        let small_blocks = ((space as f64 * 0.01 / 8.0).round() as u64).max(1);
        let large_start = small_blocks * 8;
        let large_chunks = ((space as f64 * 0.32 / LARGE as f64).round() as u64)
            .clamp(1, (space - large_start) / LARGE);
        Root {
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
            small_blocks,
            large_start,
            large_chunks,
            cursor: 0,
        }
    }

    fn next(&mut self, read: bool) -> (Op, u64, u64) {
        let rng = &mut self.rng;
        if read {
            let n = pick(rng, &ROOT_READS);
            return if n == LARGE {
                let c = rng.gen_range(0..self.large_chunks);
                (Op::Read, self.large_start + c * LARGE, LARGE)
            } else {
                let blocks = self.small_blocks + self.large_chunks * (LARGE / 8);
                (Op::Read, rng.gen_range(0..blocks) * 8, n)
            };
        }
        match pick(rng, &ROOT_CLASSES) {
            0 => {
                // Strong locality: block k of the small area with density ∝ 1/sqrt(k).
                let u: f64 = rng.gen();
                let b = ((u * u * self.small_blocks as f64) as u64).min(self.small_blocks - 1);
                let n = pick(rng, &ROOT_SMALL);
                let off = rng.gen_range(0..8 / n) * n;
                (Op::Write, b * 8 + off, n)
            }
            1 => {
                let n = pick(rng, &ROOT_MEDIUM);
                let span = self.large_chunks * LARGE;
                let at = rng.gen_range(0..=(span - n) / 8) * 8;
                (Op::Write, self.large_start + at, n)
            }
            _ => {
                // A sequential stream that now and then moves elsewhere (a new file).
                if rng.gen_range(0..64) == 0 {
                    self.cursor = rng.gen_range(0..self.large_chunks);
                }
                let c = self.cursor;
                self.cursor = (self.cursor + 1) % self.large_chunks;
                (Op::Write, self.large_start + c * LARGE, LARGE)
            }
        }
    }
}

/// Metadata-update sizes of the multimedia workload.
const MEDIA_META: [(u64, f64); 4] = [(8, 0.4), (4, 0.2), (2, 0.2), (1, 0.2)];
/// File data written between two metadata updates (sectors, 1 MiB).
const MEDIA_META_EVERY: u64 = 2048;

struct Media {
    rng: Xoshiro256PlusPlus,
    meta_blocks: u64,
    data_len: u64,
    /// Free extents of the data area, sorted, coalesced.
    free: Vec<(u64, u64)>,
    files: Vec<Vec<(u64, u64)>>,
    live: u64,
    /// The file being written: its extents and how far into them.
    writing: Vec<(u64, u64)>,
    wpos: (usize, u64),
    since_meta: u64,
    meta_due: bool,
    trims: Vec<(u64, u64)>,
    /// Playback (reads): file index and position.
    play: Option<(usize, usize, u64)>,
}

impl Media {
    fn new(space: u64, seed: u64) -> Media {
        let meta_blocks = ((space as f64 * 0.01 / 8.0).round() as u64).max(8);
        let data_start = meta_blocks * 8;
        let data_len = (space - data_start) / 8 * 8;
        Media {
            rng: Xoshiro256PlusPlus::seed_from_u64(seed),
            meta_blocks,
            data_len,
            free: vec![(data_start, data_len)],
            files: Vec::new(),
            live: 0,
            writing: Vec::new(),
            wpos: (0, 0),
            since_meta: 0,
            meta_due: false,
            trims: Vec::new(),
            play: None,
        }
    }

    fn free_extent(&mut self, (s, n): (u64, u64)) {
        let i = self.free.partition_point(|&(fs, _)| fs < s);
        self.free.insert(i, (s, n));
        if i + 1 < self.free.len() && self.free[i].0 + self.free[i].1 == self.free[i + 1].0 {
            self.free[i].1 += self.free[i + 1].1;
            self.free.remove(i + 1);
        }
        if i > 0 && self.free[i - 1].0 + self.free[i - 1].1 == self.free[i].0 {
            self.free[i - 1].1 += self.free[i].1;
            self.free.remove(i);
        }
    }

    fn delete_random_file(&mut self) {
        let i = self.rng.gen_range(0..self.files.len());
        let f = self.files.swap_remove(i);
        for &e in &f {
            self.live -= e.1;
            self.free_extent(e);
            self.trims.push(e);
        }
        self.play = None;
        self.meta_due = true;
    }

    fn start_file(&mut self) {
        let lo = (2048f64).ln();
        let hi = ((2u64 << 20) as f64)
            .ln()
            .min(((self.data_len / 8) as f64).ln());
        let size = if hi > lo {
            (self.rng.gen_range(lo..hi).exp() as u64).div_ceil(8) * 8
        } else {
            (self.data_len / 8).max(8) / 8 * 8
        }
        .max(8);
        while !self.files.is_empty() && (self.live + size) as f64 > 0.8 * self.data_len as f64 {
            self.delete_random_file();
        }
        // First fit, in as many extents as it takes.
        let mut need = size;
        let mut extents = Vec::new();
        while need > 0 && !self.free.is_empty() {
            let (s, n) = self.free[0];
            let take = n.min(need);
            extents.push((s, take));
            if take == n {
                self.free.remove(0);
            } else {
                self.free[0] = (s + take, n - take);
            }
            need -= take;
        }
        self.live += size - need;
        self.files.push(extents.clone());
        self.writing = extents;
        self.wpos = (0, 0);
    }

    fn meta_write(&mut self) -> (Op, u64, u64) {
        self.meta_due = false;
        let u: f64 = self.rng.gen();
        let b = ((u * u * self.meta_blocks as f64) as u64).min(self.meta_blocks - 1);
        let n = pick(&mut self.rng, &MEDIA_META);
        let off = self.rng.gen_range(0..8 / n) * n;
        (Op::Write, b * 8 + off, n)
    }

    fn next(&mut self, read: bool) -> (Op, u64, u64) {
        if read && !self.files.is_empty() {
            let (fi, mut ei, mut pos) = self.play.filter(|p| p.0 < self.files.len()).unwrap_or((
                self.rng.gen_range(0..self.files.len()),
                0,
                0,
            ));
            let f = &self.files[fi];
            if ei >= f.len() {
                ei = 0;
                pos = 0;
            }
            let (s, n) = f[ei];
            let k = (n - pos).min(LARGE);
            let at = s + pos;
            pos += k;
            if pos >= n {
                ei += 1;
                pos = 0;
            }
            self.play = if ei < f.len() {
                Some((fi, ei, pos))
            } else {
                None
            };
            return (Op::Read, at, k);
        }
        loop {
            if let Some(t) = self.trims.pop() {
                return (Op::Trim, t.0, t.1);
            }
            if self.meta_due {
                return self.meta_write();
            }
            let (ei, pos) = self.wpos;
            if ei < self.writing.len() {
                let (s, n) = self.writing[ei];
                let k = (n - pos).min(LARGE);
                self.wpos = if pos + k >= n {
                    (ei + 1, 0)
                } else {
                    (ei, pos + k)
                };
                self.since_meta += k;
                if self.since_meta >= MEDIA_META_EVERY {
                    self.since_meta -= MEDIA_META_EVERY;
                    self.meta_due = true;
                }
                return (Op::Write, s + pos, k);
            }
            self.start_file();
        }
    }
}
