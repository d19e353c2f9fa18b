//! Closed (`Used`) segments grouped for cost-benefit and CAT, so that their victim — the
//! first segment, by number, with the lowest score — is found without scoring the whole
//! segment table at every cleaning. On chang-kuo-16g (a million segments of 512-byte
//! blocks) that scan made both policies about a thousand times slower per write than on
//! the Intel card.
//!
//! Their scores change with the clock, so no ordering of segments by score lasts. But a
//! score depends on the clock only through the segment's age, and does not increase with
//! it: cost-benefit's `age·(1−u)/2u` is maximised, CAT's `u/(1−u)·1/f(age)·(ec+1)` with a
//! non-decreasing `f` minimised. So among segments with the same valid count (and, for
//! CAT, the same erase count) the oldest scores best, at any time. The index keeps each
//! such group ordered by age; a selection scores groups from their oldest segment and
//! walks a group only while a younger segment could still tie or beat the best so far.
//!
//! Exactly the scan's choice: scores are computed by the same function on the same
//! inputs, and ties go to the lower segment number. Floating-point rounding can make a
//! younger segment score a few ulps below an older one of its group, so the walk goes on
//! while a later score could, within [`SLACK`], still reach the best; groups whose lowest
//! possible score (age as large as the clock allows) cannot reach the best are skipped,
//! and because that bound only grows with the valid count and the erase count, the rest
//! of a stream (or of a valid count) is skipped with them.
//!
//! Kept in step with the table at every change of a segment's state, valid count, age
//! stamp or erase count (`Fms::sync_used`); only devices with many segments keep one (see
//! [`super::aged_index_min_segments`]).

use super::{SegView, SelectCtx, Selector};
use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};

/// Relative slack for rounding: a score is a handful of correctly rounded operations on
/// the same inputs (a few ulps, about 1e-15); a thousand times that is still far below
/// any difference of ages the scores are meant to tell apart.
const SLACK: f64 = 1e-12;

/// What the index orders segments by: (group, age stamp, segment). The group packs the
/// stream (8 bits), the valid count (24 bits) and, for CAT, the erase count (32 bits).
type Key = (u64, u64, u32);

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AgeStamp {
    /// The segment's creation (`SegView::created_ps`): CAT, cost-benefit "written".
    Created,
    /// Its last invalidation (`SegView::last_inval_ps`): cost-benefit "invalidation".
    Invalidated,
}

#[derive(Clone)]
pub struct AgedIndex {
    stamp: AgeStamp,
    /// Whether the erase count is part of the group (CAT).
    by_erase_count: bool,
    /// Each group's segments by (age stamp, number). Empty groups stay until they are half
    /// the map, then all go at the next selection: removed at once, groups that empty and
    /// refill between two cleanings were reallocated over and over (8 % slower at 2 048
    /// segments); kept for good, the groups of erase counts no segment has any more piled
    /// up and every selection stepped over them (CAT on the Intel card's 192 segments with
    /// the index: 8× slower).
    groups: BTreeMap<u64, BTreeSet<(u64, u32)>>,
    /// How many of `groups` are empty.
    empty: usize,
    /// Each segment's key while indexed.
    at: Vec<Option<Key>>,
    /// How many segments are indexed.
    len: u64,
}

fn group(stream: u8, valid: u32, erase_count: u32) -> u64 {
    (stream as u64) << 56 | (valid as u64 & 0xFF_FFFF) << 32 | erase_count as u64
}

fn stream_of(g: u64) -> u8 {
    (g >> 56) as u8
}

fn valid_of(g: u64) -> u32 {
    (g >> 32) as u32 & 0xFF_FFFF
}

/// Whether a segment scoring `score` and everything a few ulps above it are worse than
/// `best`: nothing ordered after it by age can tie or beat the best.
#[inline]
fn beyond(score: f64, best: f64) -> bool {
    score - SLACK * score.abs() > best
}

impl AgedIndex {
    pub fn new(segments: usize, stamp: AgeStamp, by_erase_count: bool) -> AgedIndex {
        AgedIndex {
            stamp,
            by_erase_count,
            groups: BTreeMap::new(),
            empty: 0,
            at: vec![None; segments],
            len: 0,
        }
    }

    /// Index segment `seg` (its stream and row), or not at all (`None`: not a candidate).
    #[inline]
    pub fn set(&mut self, seg: u32, row: Option<(u8, &SegView)>) {
        let want = row.map(|(stream, v)| {
            let ec = if self.by_erase_count {
                v.erase_count
            } else {
                0
            };
            let t = match self.stamp {
                AgeStamp::Created => v.created_ps,
                AgeStamp::Invalidated => v.last_inval_ps,
            };
            (group(stream, v.valid, ec), t, seg)
        });
        let cur = &mut self.at[seg as usize];
        if *cur != want {
            if let Some((g, t, seg)) = cur.take() {
                if let Some(members) = self.groups.get_mut(&g) {
                    members.remove(&(t, seg));
                    if members.is_empty() {
                        self.empty += 1;
                    }
                }
                self.len -= 1;
            }
            if let Some((g, t, seg)) = want {
                match self.groups.entry(g) {
                    Entry::Occupied(mut o) => {
                        // An empty group that was kept: one empty fewer.
                        self.empty -= usize::from(o.get().is_empty());
                        o.get_mut().insert((t, seg));
                    }
                    Entry::Vacant(v) => {
                        v.insert(BTreeSet::from([(t, seg)]));
                    }
                }
                self.len += 1;
            }
            *cur = want;
        }
    }

    /// The first segment (by number) with the lowest score among the indexed ones in
    /// `region`'s stream (or all): what [`super::lowest`] over a scan finds. `view` gives a
    /// segment's row of the table.
    pub fn lowest<S: Selector>(
        &mut self,
        sel: &S,
        ctx: &SelectCtx,
        slots: u32,
        region: Option<u8>,
        view: impl Fn(u32) -> SegView,
    ) -> Option<u32> {
        // The lowest score a group can reach: its score at the greatest age the clock
        // allows (a stamp of 0).
        let floor = |valid: u32, erase_count: u32| {
            sel.score(
                &SegView {
                    valid,
                    slots,
                    erase_count,
                    created_ps: 0,
                    last_inval_ps: 0,
                },
                ctx,
            )
        };
        let (lo, hi) = match region {
            Some(r) => (group(r, 0, 0), group(r, 0xFF_FFFF, u32::MAX)),
            None => (0, u64::MAX),
        };
        if self.empty * 2 > self.groups.len() {
            self.groups.retain(|_, m| !m.is_empty());
            self.empty = 0;
        }
        let mut best: Option<(f64, u32)> = None;
        let mut groups = self.groups.range(lo..=hi);
        while let Some((&g, members)) = groups.next() {
            if members.is_empty() {
                continue;
            }
            if members.is_empty() {
                continue;
            }
            let (stream, valid) = (stream_of(g), valid_of(g));
            let ec = g as u32;
            if let Some((b, _)) = best {
                // Erase count 0 is every group of this valid count at its lowest: if even
                // that cannot reach the best, neither can this stream's fuller segments.
                let next = if beyond(floor(valid, 0), b) {
                    if stream == u8::MAX {
                        break;
                    }
                    group(stream + 1, 0, 0)
                } else if beyond(floor(valid, ec), b) {
                    // Nor can this valid count's more erased groups.
                    group(stream, valid + 1, 0)
                } else {
                    g
                };
                if next != g {
                    if next > hi {
                        break;
                    }
                    groups = self.groups.range(next..=hi);
                    continue;
                }
            }
            for &(_, seg) in members {
                let score = sel.score(&view(seg), ctx);
                match best {
                    Some((b, s)) if score > b || (score == b && seg > s) => {
                        if beyond(score, b) {
                            break;
                        }
                    }
                    _ => best = Some((score, seg)),
                }
            }
        }
        best.map(|(_, s)| s)
    }

    pub fn ram_bytes(&self) -> u64 {
        // A B-tree entry is its key plus about a third for the nodes' slack and links.
        let entry = std::mem::size_of::<(u64, u32)>() as u64;
        self.len * (entry + entry / 3)
            + self.groups.len() as u64 * 64
            + self.at.len() as u64 * std::mem::size_of::<Option<Key>>() as u64
    }
    /// [`AgedIndex::ram_bytes`] at its largest on `segments` segments, without one: every
    /// segment indexed, in at most `groups` groups (their number depends on the run: the
    /// caller bounds it).
    pub fn peak_ram_bytes_for(segments: u64, groups: u64) -> u64 {
        let entry = std::mem::size_of::<(u64, u32)>() as u64;
        segments.saturating_mul(entry + entry / 3 + std::mem::size_of::<Option<Key>>() as u64)
            + groups.saturating_mul(64)
    }
}

#[cfg(test)]
mod tests {
    use super::super::{lowest, AgeTransform, AnySelector, Cat, CbAge, CostBenefit};
    use super::*;
    use rand::{Rng, SeedableRng};

    /// Against a scan of a random table under random changes, for each policy and age
    /// reading, with ages large enough that distinct stamps convert to the same f64 and
    /// scores tie (ties must go to the lower segment number, as in the scan).
    #[test]
    fn finds_what_a_scan_finds() {
        use AgeStamp::{Created, Invalidated};
        let cat = |age| AnySelector::Cat(Cat { age });
        let cb = |age| AnySelector::CostBenefit(CostBenefit { age });
        let cases = [
            (cat(AgeTransform::Saturating), Created, true),
            (cat(AgeTransform::Log), Created, true),
            (cat(AgeTransform::Clamp(2.0)), Created, true),
            (cat(AgeTransform::Linear), Created, true),
            (cb(CbAge::Written), Created, false),
            (cb(CbAge::Invalidation), Invalidated, false),
        ];
        for (k, (sel, stamp, by_ec)) in cases.iter().enumerate() {
            let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(k as u64);
            let (n, slots) = (200usize, 8u32);
            // With the clock near 2^60 ps, ages that differ by a few ps share an f64, so
            // scores tie or round out of order.
            for far in [false, true] {
                let mut ix = AgedIndex::new(n, *stamp, *by_ec);
                let mut rows: Vec<Option<(u8, SegView)>> = vec![None; n];
                let mut now: u64 = if far { 1 << 60 } else { 1000 };
                for step in 0..10_000 {
                    now += rng.gen_range(0..50);
                    let seg = rng.gen_range(0..n);
                    let row = rng.gen_bool(0.85).then(|| {
                        let t = if far && rng.gen_bool(0.5) {
                            rng.gen_range(0..64)
                        } else {
                            rng.gen_range(0..=now)
                        };
                        let view = SegView {
                            valid: rng.gen_range(0..slots),
                            slots,
                            erase_count: rng.gen_range(0..4),
                            // Many segments of one age.
                            created_ps: if rng.gen_bool(0.3) { 7 } else { t },
                            last_inval_ps: t,
                        };
                        (rng.gen_range(0..3u8), view)
                    });
                    rows[seg] = row;
                    ix.set(seg as u32, row.as_ref().map(|(s, v)| (*s, v)));
                    let ctx = SelectCtx {
                        now_ps: now,
                        age_unit_ps: rng.gen_range(1.0..500.0),
                    };
                    let region = (step % 3 != 0).then(|| rng.gen_range(0..3u8));
                    let cands = rows.iter().enumerate().filter_map(|(i, r)| {
                        r.filter(|(s, _)| region.is_none_or(|g| *s == g))
                            .map(|(_, v)| (i as u32, v))
                    });
                    let want = lowest(sel, cands, &ctx);
                    let got = ix.lowest(sel, &ctx, slots, region, |s| rows[s as usize].unwrap().1);
                    assert_eq!(got, want, "case {k}, far {far}, step {step}");
                    // Empty groups are never more than half the map after a selection,
                    // and counted right.
                    let empty = ix.groups.values().filter(|m| m.is_empty()).count();
                    assert_eq!(empty, ix.empty, "step {step}");
                    assert!(empty * 2 <= ix.groups.len(), "step {step}");
                }
            }
        }
    }

    /// Rounding can score an older segment of a group above a younger one. Here three
    /// segments of one group score, oldest first, 15.000000004992728, …730 and …726: a
    /// walk that stopped at the first worse score would miss the youngest, the scan's
    /// choice.
    #[test]
    fn a_younger_segment_that_rounds_lower_is_found() {
        let ages = [
            2_938_201_185_615_193u64,
            2_938_201_185_615_051,
            2_938_201_185_614_884,
        ];
        let sel = AnySelector::Cat(Cat {
            age: AgeTransform::Saturating,
        });
        let ctx = SelectCtx {
            now_ps: ages[0],
            age_unit_ps: 977_976.237_555_929_8,
        };
        let rows = ages.map(|a| SegView {
            valid: 6,
            slots: 8,
            erase_count: 4,
            created_ps: ages[0] - a,
            last_inval_ps: ages[0] - a,
        });
        let score = |i: usize| sel.score(&rows[i], &ctx);
        assert!(score(1) > score(0) && score(0) > score(2));
        let mut ix = AgedIndex::new(3, AgeStamp::Created, true);
        for (i, r) in rows.iter().enumerate() {
            ix.set(i as u32, Some((0, r)));
        }
        assert_eq!(
            ix.lowest(&sel, &ctx, 8, None, |s| rows[s as usize]),
            Some(2)
        );
    }

    /// Groups of erase counts no segment has any more do not pile up: as segments wear
    /// from one erase count to the next, a selection removes the empty groups once they
    /// are half the map.
    #[test]
    fn empty_groups_do_not_pile_up() {
        let sel = AnySelector::Cat(Cat {
            age: AgeTransform::Saturating,
        });
        let ctx = SelectCtx {
            now_ps: 1_000_000,
            age_unit_ps: 1000.0,
        };
        let mut ix = AgedIndex::new(4, AgeStamp::Created, true);
        let row = |ec| SegView {
            valid: 3,
            slots: 8,
            erase_count: ec,
            created_ps: 10,
            last_inval_ps: 10,
        };
        for ec in 0..100 {
            for seg in 0..4 {
                ix.set(seg, Some((0, &row(ec))));
            }
            assert_eq!(ix.lowest(&sel, &ctx, 8, None, |_| row(ec)), Some(0));
            assert!(
                ix.groups.len() <= 2,
                "erase count {ec}: {} groups",
                ix.groups.len()
            );
        }
    }
}
