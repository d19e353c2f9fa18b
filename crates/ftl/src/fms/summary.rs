//! Running summaries of the segment table for devices with many segments, so that what the
//! cleaner asks of the whole table at each cleaning is not a scan of it:
//!
//! * [`TableSums`]: each DAC region's load for `--region-select most-segments|most-garbage`
//!   (its active and closed segments, the invalid blocks of its closed ones); M4's average
//!   utilisation needs no sums on any device (the FMS counts the segments holding data,
//!   and every valid block is in one);
//! * [`WearIndex`]: wear levelling's least-erased segment holding data.
//!
//! Both are kept in step with the table at every change of a segment's state, valid count,
//! stream or erase count (`Fms::sync_used`), hold the same integers a scan would sum, and
//! so give the same answers; `fms::tests::victim_indexes_match_a_scan_of_the_table`
//! compares them with the scans after every operation of random runs. Small devices scan
//! (see [`super::select::SUMMARY_MIN_SEGMENTS`]).

use super::dac::RegionLoad;
use super::SegState;
use std::collections::BTreeSet;

/// What one segment adds to the sums.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Counted {
    /// 0: nothing, 1: an active segment, 2: a closed one.
    kind: u8,
    stream: u8,
    /// Its valid blocks (closed segments only).
    valid: u32,
}

#[derive(Clone)]
pub struct TableSums {
    slots: u32,
    /// Per stream (the DAC regions are the first ones; later streams are not kept).
    regions: [RegionLoad; 8],
    at: Vec<Counted>,
}

impl TableSums {
    pub fn new(segments: usize, slots: u32) -> TableSums {
        TableSums {
            slots,
            regions: [RegionLoad::default(); 8],
            at: vec![Counted::default(); segments],
        }
    }

    /// Count segment `seg` as it now is.
    #[inline]
    pub fn set(&mut self, seg: u32, state: SegState, stream: u8, valid: u32) {
        let want = match state {
            SegState::Active => Counted {
                kind: 1,
                stream,
                valid: 0,
            },
            SegState::Used => Counted {
                kind: 2,
                stream,
                valid,
            },
            _ => Counted::default(),
        };
        let cur = self.at[seg as usize];
        if cur != want {
            self.add(cur, false);
            self.add(want, true);
            self.at[seg as usize] = want;
        }
    }

    fn add(&mut self, c: Counted, plus: bool) {
        let step = |x: &mut u64, by: u64| {
            if plus {
                *x += by
            } else {
                *x -= by
            }
        };
        if c.kind == 0 {
            return;
        }
        if let Some(l) = self.regions.get_mut(c.stream as usize) {
            step(&mut l.segments, 1);
            if c.kind == 2 {
                step(&mut l.garbage, (self.slots - c.valid) as u64);
            }
        }
    }

    /// The loads of the first `regions` streams.
    pub fn region_loads(&self, regions: usize) -> &[RegionLoad] {
        &self.regions[..regions]
    }

    pub fn ram_bytes(&self) -> u64 {
        self.at.len() as u64 * std::mem::size_of::<Counted>() as u64
    }
    /// [`TableSums::ram_bytes`] on `segments` segments, without the table.
    pub fn ram_bytes_for(segments: u64) -> u64 {
        segments.saturating_mul(std::mem::size_of::<Counted>() as u64)
    }
}

/// Segments holding data (active, or closed with a valid block) by erase count: the least
/// erased one first, the lowest number among equals (what a scan keeping the first minimum
/// finds).
#[derive(Clone)]
pub struct WearIndex {
    set: BTreeSet<(u32, u32)>,
    at: Vec<Option<u32>>,
}

impl WearIndex {
    pub fn new(segments: usize) -> WearIndex {
        WearIndex {
            set: BTreeSet::new(),
            at: vec![None; segments],
        }
    }

    /// Index segment `seg` under `erase_count`, or not at all (`None`: holds no data).
    #[inline]
    pub fn set(&mut self, seg: u32, erase_count: Option<u32>) {
        let cur = &mut self.at[seg as usize];
        if *cur != erase_count {
            if let Some(ec) = cur.take() {
                self.set.remove(&(ec, seg));
            }
            if let Some(ec) = erase_count {
                self.set.insert((ec, seg));
            }
            *cur = erase_count;
        }
    }

    pub fn least(&self) -> Option<u32> {
        self.set.first().map(|&(_, seg)| seg)
    }

    pub fn ram_bytes(&self) -> u64 {
        // A B-tree entry is its key plus about a third for the nodes' slack and links.
        self.set.len() as u64 * 11 + self.at.len() as u64 * 8
    }
    /// [`WearIndex::ram_bytes`] at its largest on `segments` segments (every segment
    /// holding data), without one.
    pub fn peak_ram_bytes_for(segments: u64) -> u64 {
        segments.saturating_mul(11 + 8)
    }
}
