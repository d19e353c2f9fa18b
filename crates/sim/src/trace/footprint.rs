//! The table of 4 KiB blocks a trace touches (`trace stats`): for each block, how it was
//! touched (flags) and how many writes reached it. Requests of fewer than
//! [`RUN_MIN_BLOCKS`] blocks (nearly every request of real traces) update a hash table of
//! one entry per block; a larger request is one range in an ordered map of runs of
//! consecutive blocks with the same values, so that a request of a terabyte costs a run,
//! not 268 million table entries (QA stop 32: `trace stats` took 85 s and 13 GB of RAM on
//! a 40-byte trace holding one 1 TiB request). A block in both counts once, with its
//! flags and writes combined: the figures read each hash-table block over the run that
//! covers it, without copying either (a fold of the hash table into the runs could take
//! more memory than the guard had allowed: review, stop 32). (Runs alone for every
//! request were 3–4 times slower on traces of small requests.)

use std::collections::BTreeMap;

use super::FxHashMap;

/// Requests of at least this many blocks go to the runs.
pub const RUN_MIN_BLOCKS: u64 = 256;

/// Bytes one hash-table entry takes, with the table's slack and growth.
pub const ENTRY_BYTES: u64 = 48;
/// Bytes one run takes at most, with the ordered map's node slack (its entries are 24
/// bytes; a B-tree node is at least half full).
pub const RUN_BYTES: u64 = 64;

/// A block's flags and writes.
#[derive(Clone, Copy, Default)]
struct Block {
    flags: u8,
    writes: u32,
}

/// Consecutive blocks `start..end` (the map's key is `start`) with the same flags and
/// write count.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Run {
    end: u64,
    flags: u8,
    writes: u32,
}

/// Blocks touched.
#[derive(Default)]
pub struct Footprint {
    single: FxHashMap<u64, Block>,
    runs: BTreeMap<u64, Run>,
}

impl Footprint {
    /// Blocks `first..end` were touched: `flag` is or-ed into their flags, and each gains
    /// a write when `write` (saturating at `u32::MAX`).
    pub fn add(&mut self, first: u64, end: u64, flag: u8, write: bool) {
        let w = u32::from(write);
        if end.saturating_sub(first) < RUN_MIN_BLOCKS {
            for b in first..end {
                let e = self.single.entry(b).or_default();
                e.flags |= flag;
                e.writes = e.writes.saturating_add(w);
            }
        } else {
            self.add_run(first, end, flag, w);
        }
    }

    /// What the table takes, about: the hash table's entries and the runs.
    pub fn table_bytes(&self) -> u64 {
        self.single.len() as u64 * ENTRY_BYTES + self.runs.len() as u64 * RUN_BYTES
    }

    /// Blocks `first..end` gain `flag` and `w` writes.
    fn add_run(&mut self, first: u64, end: u64, flag: u8, w: u32) {
        if first >= end {
            return;
        }
        self.split_at(first);
        self.split_at(end);
        let mut gaps = Vec::new();
        let mut at = first;
        for (&s, r) in self.runs.range_mut(first..end) {
            if s > at {
                gaps.push((at, s));
            }
            r.flags |= flag;
            r.writes = r.writes.saturating_add(w);
            at = r.end;
        }
        if at < end {
            gaps.push((at, end));
        }
        for (s, e) in gaps {
            self.runs.insert(
                s,
                Run {
                    end: e,
                    flags: flag,
                    writes: w,
                },
            );
        }
        self.merge(first, end);
    }

    /// Cut the run holding block `x` (if it starts before it) in two at `x`.
    fn split_at(&mut self, x: u64) {
        let Some((_, r)) = self.runs.range_mut(..x).next_back() else {
            return;
        };
        if r.end <= x {
            return;
        }
        let tail = Run { end: r.end, ..*r };
        r.end = x;
        self.runs.insert(x, tail);
    }

    /// Join the runs from the one before `first` to the one starting at `end` that touch
    /// and hold the same values.
    fn merge(&mut self, first: u64, end: u64) {
        let from = self
            .runs
            .range(..first)
            .next_back()
            .map_or(first, |(&s, _)| s);
        let keys: Vec<u64> = self.runs.range(from..=end).map(|(&s, _)| s).collect();
        let mut cur: Option<(u64, Run)> = None;
        for s in keys {
            let r = self.runs[&s];
            match cur {
                Some((cs, c)) if c.end == s && c.flags == r.flags && c.writes == r.writes => {
                    self.runs.remove(&s);
                    let joined = Run { end: r.end, ..c };
                    self.runs.insert(cs, joined);
                    cur = Some((cs, joined));
                }
                _ => cur = Some((s, r)),
            }
        }
    }

    /// The run covering block `b`, if any.
    fn covering(&self, b: u64) -> Option<&Run> {
        self.runs
            .range(..=b)
            .next_back()
            .map(|(_, r)| r)
            .filter(|r| r.end > b)
    }

    /// Every block's (flags, writes) as (flags, writes, count) terms whose counts sum to
    /// the blocks holding them: each run whole, each hash-table block alone, and a hash
    /// block inside a run as its combined values (+1) and the run's values taken back
    /// (−1).
    fn terms(&self) -> impl Iterator<Item = (u8, u32, i64)> + '_ {
        let runs = self
            .runs
            .iter()
            .map(|(&s, r)| [(r.flags, r.writes, (r.end - s) as i64), (0, 0, 0)]);
        let single = self.single.iter().map(|(&b, e)| match self.covering(b) {
            None => [(e.flags, e.writes, 1), (0, 0, 0)],
            Some(r) => [
                (r.flags | e.flags, r.writes.saturating_add(e.writes), 1),
                (r.flags, r.writes, -1),
            ],
        });
        runs.chain(single).flatten().filter(|t| t.2 != 0)
    }

    /// Distinct blocks touched.
    pub fn blocks(&self) -> u64 {
        self.terms().map(|t| t.2).sum::<i64>() as u64
    }

    /// Blocks whose flags share a bit with `mask`.
    pub fn count_flag(&self, mask: u8) -> u64 {
        self.terms()
            .filter(|&(f, _, _)| f & mask != 0)
            .map(|t| t.2)
            .sum::<i64>() as u64
    }

    /// (write count, blocks with that count) of the blocks written at least once,
    /// hottest first.
    pub fn writes_hottest_first(&self) -> Vec<(u32, u64)> {
        let mut by: FxHashMap<u32, i64> = FxHashMap::default();
        for (_, w, n) in self.terms() {
            if w > 0 {
                *by.entry(w).or_default() += n;
            }
        }
        let mut v: Vec<(u32, u64)> = by
            .into_iter()
            .filter(|&(_, n)| n > 0)
            .map(|(w, n)| (w, n as u64))
            .collect();
        v.sort_unstable_by_key(|&(w, _)| std::cmp::Reverse(w));
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::HashMap;

    proptest! {
        /// The runs say, block by block, what a table of one entry per block says, and
        /// no two touching runs hold the same values.
        #[test]
        fn runs_equal_a_table_of_blocks(
            ops in prop::collection::vec((0u64..200, 1u64..40, 0u8..8, any::<bool>()), 1..60)
        ) {
            let mut f = Footprint::default();
            let mut model: HashMap<u64, (u8, u32)> = HashMap::new();
            for &(first, len, bit, write) in &ops {
                let flag = 1u8 << bit;
                // (Long ranges go to the runs, short ones to the hash table.)
                f.add(first, first + len * len * 4, flag, write);
                let len = len * len * 4;
                for b in first..first + len {
                    let e = model.entry(b).or_default();
                    e.0 |= flag;
                    e.1 += u32::from(write);
                }
            }
            prop_assert_eq!(f.blocks(), model.len() as u64);
            // The runs block by block, then the hash table's blocks combined over them.
            let mut seen: HashMap<u64, (u8, u32)> = HashMap::new();
            let mut prev: Option<(u64, Run)> = None;
            for (&s, r) in &f.runs {
                prop_assert!(s < r.end);
                if let Some((_, p)) = prev {
                    prop_assert!(p.end <= s, "overlap");
                    prop_assert!(
                        !(p.end == s && p.flags == r.flags && p.writes == r.writes),
                        "unmerged runs"
                    );
                }
                for b in s..r.end {
                    seen.insert(b, (r.flags, r.writes));
                }
                prev = Some((s, *r));
            }
            for (&b, e) in &f.single {
                let v = seen.entry(b).or_default();
                v.0 |= e.flags;
                v.1 += e.writes;
            }
            prop_assert_eq!(&seen, &model);
            for mask in [1u8, 2, 6, 0x70, 0xFF] {
                let want = model.values().filter(|v| v.0 & mask != 0).count() as u64;
                prop_assert_eq!(f.count_flag(mask), want);
            }
            let mut want: Vec<u32> = model.values().map(|v| v.1).filter(|&w| w > 0).collect();
            want.sort_unstable_by(|a, b| b.cmp(a));
            let got: Vec<u32> = f
                .writes_hottest_first()
                .iter()
                .flat_map(|&(w, n)| std::iter::repeat_n(w, n as usize))
                .collect();
            prop_assert_eq!(got, want);
        }
    }

    /// A request of a terabyte is one run.
    #[test]
    fn a_huge_request_is_one_run() {
        let mut f = Footprint::default();
        f.add(0, 1 << 28, 2, true);
        f.add(1 << 27, (1 << 28) + 500, 2, false);
        f.add(7, 8, 2, true);
        assert_eq!(f.table_bytes(), 2 * RUN_BYTES + ENTRY_BYTES);
        assert_eq!(f.runs.len(), 2);
        // Block 7 is in the hash table and in the first run: counted once, combined.
        assert_eq!(f.blocks(), (1 << 28) + 500);
        assert_eq!(f.count_flag(2), (1 << 28) + 500);
        assert_eq!(f.writes_hottest_first(), vec![(2, 1), (1, (1 << 28) - 1)]);
    }
}
