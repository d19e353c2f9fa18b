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

/// When the cleaner demotes a valid block it copies. The paper demotes a block that is
/// "old to its region": resident longer than the time threshold (every block, without
/// one). The alternative, one of the readings stop 15 listed as not yet tried to explain
/// the 4-phase gap (`docs/results.md`, DAC), demotes only blocks resident longer than the
/// average block of their region, whatever the threshold; promotion is the paper's either
/// way.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Demotion {
    /// The paper's: resident at least the threshold (always without one).
    Threshold,
    /// Resident longer than the average of the blocks now in the block's region.
    OlderThanAverage,
}

impl Demotion {
    pub const ALL: [Demotion; 2] = [Demotion::Threshold, Demotion::OlderThanAverage];

    pub fn name(self) -> &'static str {
        match self {
            Demotion::Threshold => "threshold",
            Demotion::OlderThanAverage => "older-than-average",
        }
    }
}

impl std::str::FromStr for Demotion {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Demotion::ALL
            .into_iter()
            .find(|d| d.name() == s)
            .ok_or_else(|| format!("unknown demotion rule '{s}' (threshold, older-than-average)"))
    }
}

#[derive(Clone, Copy, Debug)]
pub struct Dac {
    pub regions: u8,
    pub threshold_ps: Option<u64>,
    pub demotion: Demotion,
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

    /// Region for a valid block found in a segment being cleaned; `mean_ps`: the average
    /// stamp of the blocks in `region` (read by [`Demotion::OlderThanAverage`] only).
    #[inline]
    pub fn on_clean(&self, region: u8, stamp_ps: u64, now_ps: u64, mean_ps: u64) -> u8 {
        let old = match (self.demotion, self.threshold_ps) {
            (Demotion::OlderThanAverage, _) => stamp_ps < mean_ps,
            (Demotion::Threshold, None) => true,
            (Demotion::Threshold, Some(t)) => now_ps.saturating_sub(stamp_ps) >= t,
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
            demotion: Demotion::Threshold,
        };
        assert_eq!(d.on_update(0, 0, 5), 1);
        assert_eq!(d.on_update(3, 0, 5), 3);
        assert_eq!(d.on_clean(2, 0, 5, 0), 1);
        assert_eq!(d.on_clean(0, 0, 5, 0), 0);
        let t = Dac {
            regions: 4,
            threshold_ps: Some(100),
            demotion: Demotion::Threshold,
        };
        assert_eq!(t.on_update(1, 50, 120), 2, "young: promoted");
        assert_eq!(t.on_update(1, 0, 120), 1, "old: stays");
        assert_eq!(t.on_clean(2, 50, 120, 0), 2, "young: stays");
        assert_eq!(t.on_clean(2, 0, 120, 0), 1, "old: demoted");
        let one = Dac {
            regions: 1,
            threshold_ps: None,
            demotion: Demotion::Threshold,
        };
        assert_eq!((one.on_update(0, 0, 1), one.on_clean(0, 0, 1, 0)), (0, 0));
    }

    #[test]
    fn demotion_older_than_the_region_average() {
        let a = Dac {
            regions: 4,
            threshold_ps: Some(100),
            demotion: Demotion::OlderThanAverage,
        };
        // The threshold no longer decides demotion: the region's average stamp does.
        assert_eq!(
            a.on_clean(2, 40, 1000, 50),
            1,
            "older than the average: demoted"
        );
        assert_eq!(a.on_clean(2, 50, 1000, 50), 2, "the average itself: stays");
        assert_eq!(
            a.on_clean(2, 990, 1000, 995),
            1,
            "young, but older than most"
        );
        assert_eq!(a.on_clean(0, 0, 1000, 50), 0, "Bottom stays Bottom");
        // Promotion is the paper's.
        assert_eq!(a.on_update(1, 950, 1000), 2);
        assert_eq!(a.on_update(1, 0, 1000), 1);
        for d in Demotion::ALL {
            assert_eq!(d.name().parse::<Demotion>(), Ok(d));
        }
        assert!("never".parse::<Demotion>().is_err());
    }
}
