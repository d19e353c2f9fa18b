//! Data redistribution M1–M6, exactly as Section 6.1.1 of the 1999 paper defines them.
//!
//! * One-segment cleaning (one active segment takes new writes and cleaned data):
//!   M1 copies valid blocks in the order they sit in the victim; M2 sorts them by age
//!   (time since last update, youngest first); M3 sorts them by hot degree (hottest first).
//! * Separate-segment cleaning (a hot segment takes new writes and hot cleaned data, a cold
//!   segment takes cold cleaned data): M4 calls all of a victim's blocks cold when the
//!   victim's utilisation is below the average utilisation ([`M4Average`]: of the whole
//!   medium by default, the paper's "average utilization of file system"), as Kawaguchi
//!   et al.; M5 calls a block hot when its update count exceeds the average
//!   update count; M6 when its hot degree ([`super::hot`]) exceeds the average hot degree.
//!
//! With DAC (more than one region) the regions replace these methods: see [`super::dac`].

use std::cmp::Ordering;

#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Redistribution {
    M1,
    M2,
    M3,
    M4,
    M5,
    M6,
}

impl Redistribution {
    pub const ALL: [Redistribution; 6] = [
        Redistribution::M1,
        Redistribution::M2,
        Redistribution::M3,
        Redistribution::M4,
        Redistribution::M5,
        Redistribution::M6,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Redistribution::M1 => "m1",
            Redistribution::M2 => "m2",
            Redistribution::M3 => "m3",
            Redistribution::M4 => "m4",
            Redistribution::M5 => "m5",
            Redistribution::M6 => "m6",
        }
    }
    /// Separate-segment cleaning (hot and cold streams).
    pub fn separates(self) -> bool {
        matches!(
            self,
            Redistribution::M4 | Redistribution::M5 | Redistribution::M6
        )
    }

    /// Whether it reads hot degrees (only M3 and M6; the others make `hot_half_life`
    /// pointless).
    pub fn uses_hot_degree(self) -> bool {
        matches!(self, Redistribution::M3 | Redistribution::M6)
    }
}

impl std::str::FromStr for Redistribution {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        super::parse_named(
            s,
            &Redistribution::ALL,
            Redistribution::name,
            "redistribution",
        )
    }
}

impl std::fmt::Display for Redistribution {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What M4's "average utilization" averages over. The 1999 paper defines M4 by "the
/// average utilization" (Section 6.1.1) and, describing Kawaguchi et al.'s method it
/// follows, "the average utilization of file system" (Section 3): the valid data over the
/// whole medium, free segments counting as empty. Until stop 29 flashkit averaged over
/// the segments holding data only (a higher figure: more victims fall below it and count
/// cold); `data` keeps that reading. Measured (`flashkit sim --policy cost-benefit
/// --redistribution m4 --m4-average device,data`, flagship, seed 1): 90/10 8 555 vs
/// 8 314 erasures, 95/5 6 061 vs 5 616, 80/20 11 378 vs 11 397, random 12 724 vs
/// 12 748; greedy's victims are below either average, so it does not move.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum M4Average {
    /// Valid slots over every slot of the medium (all segments, the index segment and
    /// retired ones included: the file system's size). The default.
    Device,
    /// Valid slots over the slots of the segments holding data (closed or active).
    Data,
}

impl M4Average {
    pub const ALL: [M4Average; 2] = [M4Average::Device, M4Average::Data];
    pub fn name(self) -> &'static str {
        match self {
            M4Average::Device => "device",
            M4Average::Data => "data",
        }
    }
}

impl std::str::FromStr for M4Average {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        super::parse_named(s, &M4Average::ALL, M4Average::name, "M4 average")
    }
}

impl std::fmt::Display for M4Average {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// A valid block found in the victim, with what the methods look at and where it goes.
#[derive(Clone, Copy, Debug)]
pub struct Moving {
    pub phys: u32,
    pub lbn: u32,
    pub updates: u32,
    /// The stream it is copied to ([`Moving::FORCED`]: the wear swap's target segment).
    pub stream: u8,
    /// Its region after the move.
    pub region: u8,
    pub last_write_ps: u64,
    pub hot_degree: f64,
}

impl Moving {
    /// The stream of a block copied into a wear swap's target segment.
    pub const FORCED: u8 = u8::MAX;
}

/// Averages the separating methods compare against.
#[derive(Clone, Copy, Debug)]
pub struct Averages {
    pub victim_utilization: f64,
    pub utilization: f64,
    pub updates: f64,
    pub hot_degree: f64,
}

impl Redistribution {
    /// Order in which the victim's valid blocks are copied out.
    pub fn order(self, blocks: &mut [Moving]) {
        match self {
            Redistribution::M2 => blocks.sort_by_key(|m| std::cmp::Reverse(m.last_write_ps)),
            Redistribution::M3 => blocks.sort_by(|a, b| {
                b.hot_degree
                    .partial_cmp(&a.hot_degree)
                    .unwrap_or(Ordering::Equal)
            }),
            _ => {}
        }
    }

    /// True when a cleaned block goes to the hot stream (always true for M1–M3, whose one
    /// stream is the "hot" one).
    pub fn is_hot(self, b: &Moving, avg: &Averages) -> bool {
        match self {
            Redistribution::M1 | Redistribution::M2 | Redistribution::M3 => true,
            Redistribution::M4 => avg.victim_utilization >= avg.utilization,
            Redistribution::M5 => b.updates as f64 > avg.updates,
            Redistribution::M6 => b.hot_degree > avg.hot_degree,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mv(lbn: u32, updates: u32, t: u64, hd: f64) -> Moving {
        Moving {
            phys: lbn,
            lbn,
            updates,
            stream: 0,
            region: 0,
            last_write_ps: t,
            hot_degree: hd,
        }
    }

    #[test]
    fn orders_and_classifications() {
        let blocks = [mv(0, 1, 10, 0.5), mv(1, 9, 5, 3.0), mv(2, 4, 30, 1.0)];
        let mut b = blocks;
        Redistribution::M1.order(&mut b);
        assert_eq!(b.map(|m| m.lbn), [0, 1, 2]);
        Redistribution::M2.order(&mut b);
        assert_eq!(b.map(|m| m.lbn), [2, 0, 1], "youngest first");
        Redistribution::M3.order(&mut b);
        assert_eq!(b.map(|m| m.lbn), [1, 2, 0], "hottest first");

        let avg = Averages {
            victim_utilization: 0.5,
            utilization: 0.8,
            updates: 4.5,
            hot_degree: 0.9,
        };
        // M4: the whole victim is cold when its utilisation is below average.
        assert!(!Redistribution::M4.is_hot(&blocks[1], &avg));
        let avg_hi = Averages {
            victim_utilization: 0.9,
            ..avg
        };
        assert!(Redistribution::M4.is_hot(&blocks[0], &avg_hi));
        // M5 by update count, M6 by hot degree.
        let m5: Vec<bool> = blocks
            .iter()
            .map(|b| Redistribution::M5.is_hot(b, &avg))
            .collect();
        assert_eq!(m5, [false, true, false]);
        let m6: Vec<bool> = blocks
            .iter()
            .map(|b| Redistribution::M6.is_hot(b, &avg))
            .collect();
        assert_eq!(m6, [false, true, true]);
        assert!(blocks.iter().all(|b| Redistribution::M1.is_hot(b, &avg)));
    }
}
