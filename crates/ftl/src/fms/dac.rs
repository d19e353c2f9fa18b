//! DAC — dynamic data clustering (Chiang, Lee & Chang). The device is logically split into
//! `regions` regions, 0 = Bottom (coldest) … N−1 = Top (hottest); each region writes into
//! its own active segment. New blocks start in Bottom. An update *promotes* a block one
//! region up when it is young to its region; cleaning *demotes* a valid block one region
//! down when it is old to its region; otherwise the block stays.
//!
//! "Young/old to the region" compare the block's resident time with the time threshold.
//! Without a threshold every update promotes and every cleaning demotes. The translation
//! table stamps a block when it is allocated in its region, which (as the paper's table
//! is updated on every write) is every user write and every demotion; a copy within the
//! same region during cleaning keeps the stamp. So "young" reads "rewritten (or demoted)
//! within the threshold".

#[derive(Clone, Copy, Debug)]
pub struct Dac {
    pub regions: u8,
    pub threshold_ps: Option<u64>,
}

impl Dac {
    /// Region for an update of a block now in `region`, last stamped at `stamp_ps`.
    #[inline]
    pub fn on_update(&self, region: u8, stamp_ps: u64, now_ps: u64) -> u8 {
        let young = match self.threshold_ps {
            None => true,
            Some(t) => now_ps.saturating_sub(stamp_ps) < t,
        };
        if young {
            (region + 1).min(self.regions - 1)
        } else {
            region
        }
    }

    /// Region for a valid block found in a segment being cleaned.
    #[inline]
    pub fn on_clean(&self, region: u8, stamp_ps: u64, now_ps: u64) -> u8 {
        let old = match self.threshold_ps {
            None => true,
            Some(t) => now_ps.saturating_sub(stamp_ps) >= t,
        };
        if old {
            region.saturating_sub(1)
        } else {
            region
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn promote_on_update_demote_on_clean() {
        let d = Dac {
            regions: 4,
            threshold_ps: None,
        };
        assert_eq!(d.on_update(0, 0, 5), 1);
        assert_eq!(d.on_update(3, 0, 5), 3);
        assert_eq!(d.on_clean(2, 0, 5), 1);
        assert_eq!(d.on_clean(0, 0, 5), 0);
        let t = Dac {
            regions: 4,
            threshold_ps: Some(100),
        };
        assert_eq!(t.on_update(1, 50, 120), 2, "young: promoted");
        assert_eq!(t.on_update(1, 0, 120), 1, "old: stays");
        assert_eq!(t.on_clean(2, 50, 120), 2, "young: stays");
        assert_eq!(t.on_clean(2, 0, 120), 1, "old: demoted");
        let one = Dac {
            regions: 1,
            threshold_ps: None,
        };
        assert_eq!((one.on_update(0, 0, 1), one.on_clean(0, 0, 1)), (0, 0));
    }
}
