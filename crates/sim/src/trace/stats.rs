//! `trace stats`: what a trace contains — request counts and bytes, the request-size
//! histogram with Chang & Kuo's classes (≤ 8 sectors small, ≥ 128 sectors large), footprint,
//! write locality, sequentiality and inter-arrival times. One pass, memory proportional to
//! the number of distinct 4 KiB blocks touched by requests of up to 1 MiB, and to the
//! runs of blocks larger requests touch (`footprint.rs`).

use serde::Serialize;

use super::footprint::Footprint;
use super::{Counts, Record};
use crate::driver::Op;

/// Requests of at most this many sectors are "small" (Chang & Kuo 2005, Section 6.1).
pub const SMALL_MAX_SECTORS: u32 = 8;
/// Requests of at least this many sectors are "large".
pub const LARGE_MIN_SECTORS: u32 = 128;
/// Footprint and locality are counted in blocks of this size.
pub const STATS_BLOCK_BYTES: u64 = 4096;
const BLOCK_SECTORS: u64 = STATS_BLOCK_BYTES / 512;
/// The "y% of the written data" points of the write-locality report.
pub const LOCALITY_POINTS: [f64; 4] = [1.0, 5.0, 10.0, 20.0];
/// Upper bounds (sectors) of the size-histogram buckets; the last bucket is open.
const HIST_BOUNDS: [u32; 11] = [1, 2, 4, 8, 16, 32, 64, 127, 128, 256, 1024];

/// Chang & Kuo's request-size class.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SizeClass {
    Small,
    Medium,
    Large,
}

impl SizeClass {
    pub fn of(sectors: u32) -> SizeClass {
        if sectors <= SMALL_MAX_SECTORS {
            SizeClass::Small
        } else if sectors >= LARGE_MIN_SECTORS {
            SizeClass::Large
        } else {
            SizeClass::Medium
        }
    }
    fn index(self) -> usize {
        self as usize
    }
}

/// One size class of one operation.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ClassStats {
    pub count: u64,
    pub count_percent: f64,
    pub bytes: u64,
    pub bytes_percent: f64,
    /// Distinct 4 KiB blocks touched by this class, in bytes.
    pub footprint_bytes: u64,
    /// The footprint as a share of `space_bytes`, when a space was given.
    pub footprint_percent_of_space: Option<f64>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SizeClasses {
    pub small: ClassStats,
    pub medium: ClassStats,
    pub large: ClassStats,
}

/// One request-size histogram bucket: requests of `min_sectors..=max_sectors`.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct SizeBucket {
    pub min_sectors: u32,
    /// `None` for the open last bucket.
    pub max_sectors: Option<u32>,
    pub reads: u64,
    pub writes: u64,
    pub trims: u64,
}

/// "x% of writes go to y% of the written data".
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Locality {
    pub data_percent: f64,
    pub writes_percent: f64,
}

/// The report of `flashkit trace stats`.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TraceStats {
    pub file: String,
    pub format: String,
    pub requests: u64,
    pub reads: u64,
    pub writes: u64,
    pub trims: u64,
    pub read_bytes: u64,
    pub write_bytes: u64,
    pub trim_bytes: u64,
    pub mean_read_sectors: f64,
    pub mean_write_sectors: f64,
    pub write_classes: SizeClasses,
    pub read_classes: SizeClasses,
    pub size_histogram: Vec<SizeBucket>,
    /// Distinct 4 KiB blocks touched by any request.
    pub footprint_blocks: u64,
    pub footprint_bytes: u64,
    pub read_footprint_bytes: u64,
    pub write_footprint_bytes: u64,
    /// The logical space the footprint percentages refer to (`--space`).
    pub space_bytes: Option<u64>,
    pub footprint_percent_of_space: Option<f64>,
    /// Block writes (4 KiB) against the share of the written blocks, hottest first.
    pub write_locality: Vec<Locality>,
    /// Requests that start where the previous request ended.
    pub sequential_percent: f64,
    /// Writes that start where the previous write ended.
    pub sequential_write_percent: f64,
    /// Large writes that start where the previous large write ended (Chang & Kuo: "large
    /// writes tended to access the disk sequentially").
    pub sequential_large_write_percent: f64,
    pub duration_s: f64,
    pub interarrival_mean_us: f64,
    pub interarrival_p50_us: f64,
    pub interarrival_p99_us: f64,
    pub out_of_order: u64,
    pub skipped_zero_size: u64,
    pub skipped_bad_lines: u64,
    pub skipped_other_device: u64,
    pub ignored_lines: u64,
    /// The first malformed line skipped (`skip_bad_lines`), as `FILE:LINE: what is wrong`.
    pub first_bad_line: Option<String>,
    /// The warning for records of several disks read as one address space (no
    /// `--trace-disk`), for stderr: not a key of the report.
    #[serde(skip)]
    pub merged_devices_warning: Option<String>,
}

/// Collects [`TraceStats`] from records.
pub struct StatsCollector {
    /// Per-block flags (bit 0 read; bits 1..4 written by a small / medium / large write;
    /// bits 4..7 read by a small / medium / large read) and write counts.
    blocks: Footprint,
    ops: [u64; 3],
    bytes: [u64; 3],
    classes: [[(u64, u64); 3]; 2],
    hist: Vec<[u64; 3]>,
    prev_end: Option<u64>,
    prev_write_end: Option<u64>,
    prev_large_end: Option<u64>,
    seq: u64,
    seq_writes: u64,
    seq_large: u64,
    prev_t: Option<i64>,
    max_t: i64,
    gap_sum_ns: f64,
    gaps: hdrhistogram::Histogram<u64>,
    /// The most bytes the footprint table may take (`trace_stats` sets it from the
    /// memory available); past it `add` fails rather than the process abort.
    max_table_bytes: u64,
}

impl Default for StatsCollector {
    fn default() -> Self {
        StatsCollector::new()
    }
}

fn op_index(op: Op) -> usize {
    match op {
        Op::Read => 0,
        Op::Write => 1,
        Op::Trim => 2,
    }
}

fn pct(part: u64, whole: u64) -> f64 {
    if whole == 0 {
        0.0
    } else {
        part as f64 * 100.0 / whole as f64
    }
}

impl StatsCollector {
    pub fn new() -> StatsCollector {
        StatsCollector {
            blocks: Footprint::default(),
            ops: [0; 3],
            bytes: [0; 3],
            classes: [[(0, 0); 3]; 2],
            hist: vec![[0; 3]; HIST_BOUNDS.len() + 1],
            prev_end: None,
            prev_write_end: None,
            prev_large_end: None,
            seq: 0,
            seq_writes: 0,
            seq_large: 0,
            prev_t: None,
            max_t: 0,
            gap_sum_ns: 0.0,
            gaps: hdrhistogram::Histogram::new_with_bounds(1, 1 << 50, 3)
                .expect("valid histogram bounds"),
            max_table_bytes: u64::MAX,
        }
    }

    /// Add a record. Fails when the footprint table passes `max_table_bytes` (the
    /// caller stops).
    pub fn add(&mut self, r: &Record) -> Result<(), String> {
        let oi = op_index(r.op);
        let n = r.sectors as u64;
        self.ops[oi] += 1;
        self.bytes[oi] += n * 512;
        let bucket = HIST_BOUNDS
            .iter()
            .position(|&b| r.sectors <= b)
            .unwrap_or(HIST_BOUNDS.len());
        self.hist[bucket][oi] += 1;
        let class = SizeClass::of(r.sectors);
        if oi < 2 {
            let c = &mut self.classes[oi][class.index()];
            c.0 += 1;
            c.1 += n * 512;
        }
        if self.prev_end == Some(r.lba) {
            self.seq += 1;
        }
        self.prev_end = Some(r.lba + n);
        if r.op == Op::Write {
            if self.prev_write_end == Some(r.lba) {
                self.seq_writes += 1;
            }
            self.prev_write_end = Some(r.lba + n);
            if class == SizeClass::Large {
                if self.prev_large_end == Some(r.lba) {
                    self.seq_large += 1;
                }
                self.prev_large_end = Some(r.lba + n);
            }
        }
        if let Some(p) = self.prev_t {
            let gap = (r.time_ns - p).max(0) as u64;
            self.gap_sum_ns += gap as f64;
            self.gaps.saturating_record(gap);
        }
        self.prev_t = Some(r.time_ns);
        self.max_t = self.max_t.max(r.time_ns);
        if r.op == Op::Trim {
            return Ok(());
        }
        let flag = match r.op {
            Op::Read => 1 | (1 << (4 + class.index())),
            _ => 1 << (1 + class.index()),
        };
        let first = r.lba / BLOCK_SECTORS;
        let last = (r.lba + n - 1) / BLOCK_SECTORS;
        self.blocks.add(first, last + 1, flag, r.op == Op::Write);
        if self.blocks.table_bytes() > self.max_table_bytes {
            return Err(format!(
                "the table of touched {} KiB blocks passes {} MiB, more than half the memory \
                 available here",
                STATS_BLOCK_BYTES / 1024,
                self.max_table_bytes >> 20
            ));
        }
        Ok(())
    }

    pub fn finish(
        self,
        file: &str,
        format: &str,
        counts: &Counts,
        space: Option<u64>,
    ) -> TraceStats {
        let bs = STATS_BLOCK_BYTES;
        let count_flag = |mask: u8| self.blocks.count_flag(mask);
        let of_space = |bytes: u64| space.map(|s| pct(bytes, s));
        let class_stats = |oi: usize, shift: u32| {
            let total_n: u64 = self.classes[oi].iter().map(|c| c.0).sum();
            let total_b: u64 = self.classes[oi].iter().map(|c| c.1).sum();
            let one = |ci: usize| {
                let (n, b) = self.classes[oi][ci];
                let fp = count_flag(1 << (shift + ci as u32)) * bs;
                ClassStats {
                    count: n,
                    count_percent: pct(n, total_n),
                    bytes: b,
                    bytes_percent: pct(b, total_b),
                    footprint_bytes: fp,
                    footprint_percent_of_space: of_space(fp),
                }
            };
            SizeClasses {
                small: one(0),
                medium: one(1),
                large: one(2),
            }
        };
        // (write count, blocks with it) hottest first: the top `k` blocks' writes are summed
        // group by group.
        let writes = self.blocks.writes_hottest_first();
        let written: u64 = writes.iter().map(|&(_, n)| n).sum();
        let total_block_writes: u64 = writes.iter().map(|&(w, n)| w as u64 * n).sum();
        let write_locality = LOCALITY_POINTS
            .iter()
            .map(|&y| {
                let k = ((written as f64 * y / 100.0).ceil() as u64).min(written);
                let mut left = k;
                let mut top = 0u64;
                for &(w, n) in &writes {
                    if left == 0 {
                        break;
                    }
                    let take = n.min(left);
                    top += w as u64 * take;
                    left -= take;
                }
                Locality {
                    data_percent: y,
                    writes_percent: pct(top, total_block_writes),
                }
            })
            .collect();
        let mut lo = 1;
        let size_histogram = self
            .hist
            .iter()
            .enumerate()
            .map(|(i, h)| {
                let b = SizeBucket {
                    min_sectors: lo,
                    max_sectors: HIST_BOUNDS.get(i).copied(),
                    reads: h[0],
                    writes: h[1],
                    trims: h[2],
                };
                lo = HIST_BOUNDS.get(i).map_or(lo, |&x| x + 1);
                b
            })
            .collect();
        let requests: u64 = self.ops.iter().sum();
        let footprint_blocks = self.blocks.blocks();
        let ngaps = self.gaps.len();
        TraceStats {
            file: file.into(),
            format: format.into(),
            requests,
            reads: self.ops[0],
            writes: self.ops[1],
            trims: self.ops[2],
            read_bytes: self.bytes[0],
            write_bytes: self.bytes[1],
            trim_bytes: self.bytes[2],
            mean_read_sectors: if self.ops[0] > 0 {
                self.bytes[0] as f64 / 512.0 / self.ops[0] as f64
            } else {
                0.0
            },
            mean_write_sectors: if self.ops[1] > 0 {
                self.bytes[1] as f64 / 512.0 / self.ops[1] as f64
            } else {
                0.0
            },
            write_classes: class_stats(1, 1),
            read_classes: class_stats(0, 4),
            size_histogram,
            footprint_blocks,
            footprint_bytes: footprint_blocks * bs,
            read_footprint_bytes: count_flag(1) * bs,
            write_footprint_bytes: written * bs,
            space_bytes: space,
            footprint_percent_of_space: of_space(footprint_blocks * bs),
            write_locality,
            sequential_percent: pct(self.seq, requests.saturating_sub(1)),
            sequential_write_percent: pct(self.seq_writes, self.ops[1].saturating_sub(1)),
            sequential_large_write_percent: pct(
                self.seq_large,
                self.classes[1][SizeClass::Large.index()]
                    .0
                    .saturating_sub(1),
            ),
            duration_s: self.max_t.max(0) as f64 / 1e9,
            interarrival_mean_us: if ngaps > 0 {
                self.gap_sum_ns / ngaps as f64 / 1e3
            } else {
                0.0
            },
            interarrival_p50_us: self.gaps.value_at_quantile(0.5) as f64 / 1e3,
            interarrival_p99_us: self.gaps.value_at_quantile(0.99) as f64 / 1e3,
            out_of_order: counts.out_of_order,
            skipped_zero_size: counts.skipped_zero_size,
            skipped_bad_lines: counts.skipped_bad_lines,
            skipped_other_device: counts.skipped_other_device,
            ignored_lines: counts.ignored_lines,
            first_bad_line: counts.first_bad_line.clone(),
            merged_devices_warning: None,
        }
    }
}

/// Check the logical space footprints are compared with (`trace stats --space`): a share
/// of no space means nothing (it printed "0.0% of the space").
pub fn check_space(bytes: u64) -> Result<u64, String> {
    if bytes == 0 {
        return Err("must be more than 0 bytes (footprints are given as a share of it)".into());
    }
    Ok(bytes)
}

/// Statistics of a whole trace file.
pub fn trace_stats(
    path: &std::path::Path,
    opts: &super::TraceOptions,
    space: Option<u64>,
) -> Result<TraceStats, super::TraceError> {
    let mut reader = super::TraceReader::open(path, opts)?;
    let mut c = StatsCollector::new();
    // Half the memory available for the footprint table: a trace touching a huge disk
    // block by block fails in one line rather than abort the process (QA stop 27; a
    // request of terabytes is one run since stop 32).
    if let Some(avail) = nand::available_ram() {
        c.max_table_bytes = (avail / 2).max(64 << 20);
    }
    for r in &mut reader {
        if let Err(e) = c.add(&r?) {
            let line = reader.counts().lines;
            return Err(super::TraceError::new(reader.file(), Some(line), e));
        }
    }
    let mut st = c.finish(
        reader.file(),
        reader.format().name(),
        reader.counts(),
        space,
    );
    st.merged_devices_warning = reader
        .counts()
        .merged_devices_warning(reader.file(), reader.format());
    Ok(st)
}

#[cfg(test)]
mod tests {
    use super::super::footprint::{ENTRY_BYTES, RUN_BYTES};
    use super::*;

    /// Past its table's bound a request fails in a message, not an abort (QA stop 27: one
    /// request of 2 TiB filled the memory). The table holds runs of blocks touched alike:
    /// one huge request is one run (QA stop 32); small requests take an entry a block.
    #[test]
    fn the_footprint_table_is_bounded() {
        let rec = |lba: u64, sectors: u32| Record {
            time_ns: 0,
            op: Op::Write,
            lba,
            sectors,
        };
        let mut c = StatsCollector::new();
        c.max_table_bytes = 100 * ENTRY_BYTES + RUN_BYTES;
        assert_eq!(c.add(&rec(0, u32::MAX)), Ok(()));
        for b in 0..100u64 {
            assert_eq!(c.add(&rec((1 << 40) | (b * 16), 8)), Ok(()));
        }
        let e = c.add(&rec(1 << 41, 8)).unwrap_err();
        assert!(
            e.contains("the table of touched 4 KiB blocks passes 0 MiB"),
            "{e}"
        );
        // Blocks already in the table are no growth.
        let mut c = StatsCollector::new();
        c.max_table_bytes = 100 * ENTRY_BYTES;
        for _ in 0..3 {
            for b in 0..100u64 {
                assert_eq!(c.add(&rec(b * 16, 8)), Ok(()));
            }
        }
    }
}
