//! Closed (`Used`) segments kept by their valid-block count, so that greedy's victim — the
//! first segment, by number, with the fewest valid blocks — is found without reading the
//! whole segment table. A scan costs little on the Intel card's 192 segments but reads a
//! million rows at every cleaning of chang-kuo-16g (512-byte blocks), where it made greedy
//! about 120 times slower per write. The FMS keeps the index in step with the table at
//! every change of a segment's state or valid count (`Fms::sync_used`); only greedy and
//! the adaptive policy (whose greedy choices use it) keep one. Cost-benefit and CAT have
//! their own index, [`super::AgedIndex`].
//!
//! One bit per segment for each valid count `0..slots` (a bit per slot of the device in
//! all), a count of segments per valid count, and each segment's entry.

#[derive(Clone)]
pub struct UsedIndex {
    words: usize,
    /// `bits[v * words + w]`: segments `64w..64w+64` with `v` valid blocks.
    bits: Vec<u64>,
    /// How many segments have `v` valid blocks.
    count: Vec<u32>,
    /// Per segment: its valid count + 1 while indexed, 0 when not.
    at: Vec<u32>,
}

impl UsedIndex {
    /// An empty index for `segments` segments of `slots` slots (valid counts `0..slots`;
    /// a full segment is never a victim and is not indexed).
    pub fn new(segments: usize, slots: u32) -> UsedIndex {
        let words = segments.div_ceil(64);
        UsedIndex {
            words,
            bits: vec![0; words * slots as usize],
            count: vec![0; slots as usize],
            at: vec![0; segments],
        }
    }

    /// Index segment `seg` under valid count `valid`, or not at all (`None`).
    #[inline]
    pub fn set(&mut self, seg: u32, valid: Option<u32>) {
        let want = valid.map_or(0, |v| v + 1);
        let cur = self.at[seg as usize];
        if cur != want {
            self.move_to(seg, cur, want);
        }
    }

    fn move_to(&mut self, seg: u32, cur: u32, want: u32) {
        let (w, bit) = (seg as usize / 64, 1u64 << (seg % 64));
        if cur != 0 {
            let v = cur as usize - 1;
            self.bits[v * self.words + w] &= !bit;
            self.count[v] -= 1;
        }
        if want != 0 {
            let v = want as usize - 1;
            self.bits[v * self.words + w] |= bit;
            self.count[v] += 1;
        }
        self.at[seg as usize] = want;
    }

    /// The first segment (by number) with the fewest valid blocks among those `accept`
    /// takes: what a scan of the table in segment order keeping strict improvements finds.
    pub fn first_fewest(&self, accept: impl Fn(u32) -> bool) -> Option<u32> {
        for (v, &n) in self.count.iter().enumerate() {
            if n == 0 {
                continue;
            }
            let row = &self.bits[v * self.words..(v + 1) * self.words];
            for (w, &word) in row.iter().enumerate() {
                let mut x = word;
                while x != 0 {
                    let seg = (w * 64) as u32 + x.trailing_zeros();
                    if accept(seg) {
                        return Some(seg);
                    }
                    x &= x - 1;
                }
            }
        }
        None
    }

    pub fn ram_bytes(&self) -> u64 {
        (self.bits.len() * 8 + self.count.len() * 4 + self.at.len() * 4) as u64
    }
    /// [`UsedIndex::ram_bytes`] of `UsedIndex::new(segments, slots)`, without one: a bit
    /// per segment per valid count, a count per valid count, a position per segment.
    pub fn ram_bytes_for(segments: u64, slots: u32) -> u64 {
        let words = segments.div_ceil(64);
        words.saturating_mul(slots as u64 * 8) + slots as u64 * 4 + segments.saturating_mul(4)
    }
}

/// Greedy's lookup on devices too small for a [`UsedIndex`]: every segment's valid count as
/// an `i16` (`i16::MAX` when it is not a candidate), so that a selection is a vectorised
/// minimum and a search for its first position rather than a branching scan of the
/// segment table (7 % of greedy's instructions on the Intel card). The FMS keeps the keys
/// in step with the table with the rows of cost-benefit and CAT (`Fms::sync_used`).
#[derive(Clone)]
pub struct ValidKeys {
    keys: Vec<i16>,
}

impl ValidKeys {
    /// Keys for `segments` segments, none a candidate; `None` when a valid count of
    /// `slots` could not be told from a non-candidate in an `i16`.
    pub fn new(segments: usize, slots: u32) -> Option<ValidKeys> {
        ValidKeys::fits(slots).then(|| ValidKeys {
            keys: vec![i16::MAX; segments],
        })
    }

    /// Segment `seg` is a candidate with `valid` valid blocks, or not one (`None`).
    #[inline(always)]
    pub fn set(&mut self, seg: u32, valid: Option<u32>) {
        self.keys[seg as usize] = valid.map_or(i16::MAX, |v| v as i16);
    }

    /// The first candidate with the fewest valid blocks (what a scan of the table gives).
    pub fn first_fewest(&self) -> Option<u32> {
        let fewest = self.keys.iter().copied().fold(i16::MAX, i16::min);
        if fewest == i16::MAX {
            return None;
        }
        // Its first position: sixteen keys at a time are compared at once (vectorised),
        // and only the sixteen that hold it are searched one by one.
        const LANES: usize = 16;
        let chunks = self.keys.chunks_exact(LANES);
        let tail = chunks.remainder();
        for (c, chunk) in chunks.enumerate() {
            if chunk.iter().fold(false, |hit, &k| hit | (k == fewest)) {
                let i = chunk.iter().position(|&k| k == fewest).unwrap_or(0);
                return Some((c * LANES + i) as u32);
            }
        }
        let at = self.keys.len() - tail.len();
        tail.iter()
            .position(|&k| k == fewest)
            .map(|i| (at + i) as u32)
    }

    /// Whether a valid count of `slots` can be told from a non-candidate in an `i16`.
    fn fits(slots: u32) -> bool {
        slots < i16::MAX as u32
    }

    pub fn ram_bytes(&self) -> u64 {
        self.keys.len() as u64 * 2
    }

    /// [`ValidKeys::ram_bytes`] of `ValidKeys::new(segments, slots)`, without one (0 when
    /// it declines).
    pub fn ram_bytes_for(segments: u64, slots: u32) -> u64 {
        if ValidKeys::fits(slots) {
            segments.saturating_mul(std::mem::size_of::<i16>() as u64)
        } else {
            0
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Against a scan of a table of (indexed, valid, stream) rows under random changes.
    #[test]
    fn finds_what_a_scan_finds() {
        use rand::{Rng, SeedableRng};
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(3);
        let (n, slots) = (300usize, 8u32);
        let mut ix = UsedIndex::new(n, slots);
        let mut rows: Vec<(Option<u32>, u8)> = vec![(None, 0); n];
        for step in 0..20_000 {
            let seg = rng.gen_range(0..n);
            let v = rng.gen_bool(0.8).then(|| rng.gen_range(0..slots));
            rows[seg] = (v, rng.gen_range(0..3));
            ix.set(seg as u32, v);
            let r = (step % 4 != 0).then(|| rng.gen_range(0..3u8));
            let accept = |s: u32| r.is_none_or(|r| rows[s as usize].1 == r);
            let mut best = (slots, None);
            for (i, &(v, _)) in rows.iter().enumerate() {
                if let Some(v) = v.filter(|&v| v < best.0 && accept(i as u32)) {
                    best = (v, Some(i as u32));
                }
            }
            assert_eq!(ix.first_fewest(accept), best.1, "step {step}");
        }
    }

    /// `ValidKeys::first_fewest` is the table scan's choice (`Fms::scan_fewest(None)`: the
    /// first candidate whose valid count is below every earlier one, starting from
    /// `slots`), for slots up to the largest the keys accept, valid counts 0 and
    /// slots - 1, and changes back to non-candidates; slots an `i16` cannot tell apart
    /// are declined.
    mod keys {
        use super::*;
        use proptest::prelude::*;

        proptest! {
            #![proptest_config(ProptestConfig { cases: 2000, ..ProptestConfig::default() })]
            #[test]
            fn first_fewest_is_the_scan(
                slots in prop_oneof![Just(1u32), Just(2), 1u32..64, Just(32_765), Just(32_766)],
                n in 1usize..40,
                changes in prop::collection::vec((any::<u16>(), 0u8..4, any::<u32>()), 0..120),
            ) {
                let mut keys = ValidKeys::new(n, slots).expect("fits");
                let mut table: Vec<Option<u32>> = vec![None; n];
                for (seg, kind, v) in changes {
                    let seg = seg as usize % n;
                    let valid = match kind {
                        0 => None,
                        1 => Some(0),
                        2 => Some(slots - 1),
                        _ => Some(v % slots),
                    };
                    table[seg] = valid;
                    keys.set(seg as u32, valid);
                    let mut best = (slots, None);
                    for (i, v) in table.iter().enumerate() {
                        if let Some(v) = v.filter(|&v| v < best.0) {
                            best = (v, Some(i as u32));
                        }
                    }
                    prop_assert_eq!(keys.first_fewest(), best.1);
                }
            }
        }

        #[test]
        fn declines_what_an_i16_cannot_hold() {
            assert!(ValidKeys::new(4, 32_766).is_some());
            assert!(ValidKeys::new(4, 32_767).is_none());
            assert!(ValidKeys::new(4, u32::MAX).is_none());
            assert_eq!(ValidKeys::ram_bytes_for(4, u32::MAX), 0);
        }
    }
}
