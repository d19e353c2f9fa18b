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

/// How the cleaner picks the region to clean. The DAC paper's cleaner "selects a region
/// for cleaning" and then "a victim segment in the selected region" (Fig. 2) but does not
/// say how; its region table keeps each region's segment count and segment list "used by
/// the cleaner in deciding which segments to clean".
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RegionSelect {
    /// No separate step: the victim is the best segment of any region, by the policy
    /// (the region is the victim's). The default.
    All,
    /// The region holding the most segments (active and closed), from the region table.
    MostSegments,
    /// The region whose closed segments hold the most invalid blocks.
    MostGarbage,
}

impl RegionSelect {
    pub const ALL: [RegionSelect; 3] = [
        RegionSelect::All,
        RegionSelect::MostSegments,
        RegionSelect::MostGarbage,
    ];

    pub fn name(self) -> &'static str {
        match self {
            RegionSelect::All => "all",
            RegionSelect::MostSegments => "most-segments",
            RegionSelect::MostGarbage => "most-garbage",
        }
    }

    /// The region to clean, from each region's load; `None` for [`RegionSelect::All`] or
    /// when no region has a closed segment with garbage. Ties go to the colder region.
    pub fn choose(self, loads: &[RegionLoad]) -> Option<u8> {
        let key = match self {
            RegionSelect::All => return None,
            RegionSelect::MostSegments => |l: &RegionLoad| l.segments,
            RegionSelect::MostGarbage => |l: &RegionLoad| l.garbage,
        };
        let mut best: Option<(u64, u8)> = None;
        for (r, l) in loads.iter().enumerate() {
            if l.garbage > 0 && best.is_none_or(|(b, _)| key(l) > b) {
                best = Some((key(l), r as u8));
            }
        }
        best.map(|(_, r)| r)
    }
}

impl std::str::FromStr for RegionSelect {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        RegionSelect::ALL
            .into_iter()
            .find(|r| r.name() == s)
            .ok_or_else(|| {
                format!("unknown region selection '{s}' (all, most-segments, most-garbage)")
            })
    }
}

/// What the region table says of one region at a cleaning.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RegionLoad {
    /// Active and closed segments of the region.
    pub segments: u64,
    /// Invalid blocks in its closed segments (what a cleaning there can reclaim).
    pub garbage: u64,
}

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
    fn region_selection_by_segments_or_garbage() {
        let load = |segments, garbage| RegionLoad { segments, garbage };
        let loads = [load(5, 3), load(9, 1), load(2, 7), load(9, 0)];
        assert_eq!(RegionSelect::All.choose(&loads), None);
        assert_eq!(RegionSelect::MostSegments.choose(&loads), Some(1));
        assert_eq!(RegionSelect::MostGarbage.choose(&loads), Some(2));
        // A region with nothing to reclaim is never chosen; ties go to the colder region.
        let loads = [load(1, 0), load(4, 2), load(4, 2)];
        assert_eq!(RegionSelect::MostSegments.choose(&loads), Some(1));
        assert_eq!(RegionSelect::MostGarbage.choose(&loads), Some(1));
        assert_eq!(RegionSelect::MostGarbage.choose(&[load(3, 0)]), None);
        for r in RegionSelect::ALL {
            assert_eq!(r.name().parse::<RegionSelect>(), Ok(r));
        }
        assert!("hottest".parse::<RegionSelect>().is_err());
    }

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
