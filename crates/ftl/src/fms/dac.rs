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
        super::parse_named(
            s,
            &RegionSelect::ALL,
            RegionSelect::name,
            "region selection",
        )
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

/// How DAC tells "young to its region" (promotion on an update) and "old to its region"
/// (demotion at a cleaning). The paper compares the block's resident time with the time
/// threshold (without one, every update promotes and every cleaning demotes). The
/// alternative, the two readings stop 15 listed as not yet tried to explain the 4-phase
/// gap (`docs/results.md`, DAC), compares it with the average resident time of the blocks
/// in the block's region, taken at the start of each cleaning: a per-region threshold
/// that follows the region's own rewrite pace. `--promotion` and `--demotion` choose
/// each side.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum AgeRule {
    /// The paper's: the time threshold.
    Threshold,
    /// The average resident time of the blocks in the region (the threshold is ignored).
    RegionAverage,
}

impl AgeRule {
    pub const ALL: [AgeRule; 2] = [AgeRule::Threshold, AgeRule::RegionAverage];

    pub fn name(self) -> &'static str {
        match self {
            AgeRule::Threshold => "threshold",
            AgeRule::RegionAverage => "region-average",
        }
    }
}

impl std::str::FromStr for AgeRule {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        super::parse_named(s, &AgeRule::ALL, AgeRule::name, "rule")
    }
}

#[derive(Clone, Copy, Debug)]
pub struct Dac {
    pub regions: u8,
    pub threshold_ps: Option<u64>,
    pub promotion: AgeRule,
    pub demotion: AgeRule,
}

impl Dac {
    /// Whether either side compares with the region averages (which the FMS then takes
    /// at each cleaning).
    pub fn uses_means(&self) -> bool {
        self.regions > 1
            && (self.promotion == AgeRule::RegionAverage || self.demotion == AgeRule::RegionAverage)
    }

    /// Region for an update of a block now in `region`, last stamped at `stamp_ps`;
    /// `mean_ps`: the average stamp of the blocks in `region` (read by
    /// [`AgeRule::RegionAverage`] only).
    #[inline]
    pub fn on_update(&self, region: u8, stamp_ps: u64, now_ps: u64, mean_ps: u64) -> u8 {
        let young = match (self.promotion, self.threshold_ps) {
            (AgeRule::RegionAverage, _) => stamp_ps > mean_ps,
            (AgeRule::Threshold, None) => true,
            (AgeRule::Threshold, Some(t)) => now_ps.saturating_sub(stamp_ps) < t,
        };
        if young {
            (region + 1).min(self.regions - 1)
        } else {
            region
        }
    }

    /// Region for a valid block found in a segment being cleaned; `mean_ps` as for
    /// [`Dac::on_update`].
    #[inline]
    pub fn on_clean(&self, region: u8, stamp_ps: u64, now_ps: u64, mean_ps: u64) -> u8 {
        let old = match (self.demotion, self.threshold_ps) {
            (AgeRule::RegionAverage, _) => stamp_ps < mean_ps,
            (AgeRule::Threshold, None) => true,
            (AgeRule::Threshold, Some(t)) => now_ps.saturating_sub(stamp_ps) >= t,
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
            promotion: AgeRule::Threshold,
            demotion: AgeRule::Threshold,
        };
        assert_eq!(d.on_update(0, 0, 5, 0), 1);
        assert_eq!(d.on_update(3, 0, 5, 0), 3);
        assert_eq!(d.on_clean(2, 0, 5, 0), 1);
        assert_eq!(d.on_clean(0, 0, 5, 0), 0);
        let t = Dac {
            regions: 4,
            threshold_ps: Some(100),
            promotion: AgeRule::Threshold,
            demotion: AgeRule::Threshold,
        };
        assert_eq!(t.on_update(1, 50, 120, 0), 2, "young: promoted");
        assert_eq!(t.on_update(1, 0, 120, 0), 1, "old: stays");
        assert_eq!(t.on_clean(2, 50, 120, 0), 2, "young: stays");
        assert_eq!(t.on_clean(2, 0, 120, 0), 1, "old: demoted");
        let one = Dac {
            regions: 1,
            threshold_ps: None,
            promotion: AgeRule::Threshold,
            demotion: AgeRule::Threshold,
        };
        assert_eq!(
            (one.on_update(0, 0, 1, 0), one.on_clean(0, 0, 1, 0)),
            (0, 0)
        );
    }

    #[test]
    fn promotion_and_demotion_by_the_region_average() {
        let a = Dac {
            regions: 4,
            threshold_ps: Some(100),
            promotion: AgeRule::Threshold,
            demotion: AgeRule::RegionAverage,
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
        assert_eq!(a.on_update(1, 950, 1000, 0), 2);
        assert_eq!(a.on_update(1, 0, 1000, 0), 1);
        // Promotion by the average: rewritten more recently than the region's average.
        let p = Dac {
            promotion: AgeRule::RegionAverage,
            ..a
        };
        assert_eq!(
            p.on_update(1, 60, 1000, 50),
            2,
            "younger than the average: up"
        );
        assert_eq!(p.on_update(1, 50, 1000, 50), 1, "the average itself: stays");
        assert_eq!(p.on_update(2, 900, 1000, 50), 3, "Top is the last");
        assert_eq!(p.on_update(3, 900, 1000, 50), 3);
        assert!(p.uses_means() && a.uses_means());
        assert!(!Dac { regions: 1, ..p }.uses_means());
        for d in AgeRule::ALL {
            assert_eq!(d.name().parse::<AgeRule>(), Ok(d));
        }
        assert!("never".parse::<AgeRule>().is_err());
    }
}
