//! Victim-segment selection. One policy per file; each scores a candidate segment and the
//! cleaner takes the lowest score. Adding a policy: a file here and a line in [`build`].
//!
//! Selection runs once per cleaned segment over the segments that hold data (the paper's
//! lookup table), never per write.

mod aged;
mod cat;
mod cost_benefit;
mod greedy;
mod used;

pub use aged::{AgeStamp, AgedIndex};
pub use cat::{AgeTransform, Cat};
pub use cost_benefit::{CbAge, CostBenefit};
pub use greedy::Greedy;
pub use used::UsedIndex;

/// Devices with at least this many segments keep a [`UsedIndex`] for greedy (and adaptive's
/// greedy choices); smaller ones scan the table. Keeping the index costs tens of
/// instructions at every invalidation in a closed segment, which on the Intel card's 192
/// segments is more than the scan it saves (measured: +5 % instructions per user write);
/// a scan reads about 0.4 ns a segment, so past a few thousand segments the index wins.
pub const USED_INDEX_MIN_SEGMENTS: u32 = 2048;

/// Devices with at least this many segments keep an [`AgedIndex`] for cost-benefit, CAT
/// and adaptive (its CAT choices), and the running summaries of `fms::summary` (M4's
/// utilisation, DAC region loads, wear levelling's least-worn segment); smaller ones score
/// (or sum) every segment at each cleaning. The index's upkeep (a B-tree entry moved at
/// every invalidation in a closed segment) costs more than the scan it saves on small
/// devices. Measured (`flashkit bench --device chang-kuo-16g --blocks N --block-size 512
/// --fill 0.8 --written 64MiB`, 32 slots a segment, user writes/s, index vs scan, best of
/// 3, twice): 1 024 segments: cost-benefit 3.27 M vs 3.26 M, CAT 2.38–2.41 M vs 3.49 M,
/// adaptive 2.35 M vs 3.40–3.45 M; 2 048: 3.04–3.07 M vs 2.11–2.15 M, 2.43–2.45 M vs
/// 2.25–2.28 M, 2.35 M vs 2.12–2.17 M; the Intel card's 192 segments: 0.86 M vs 1.29 M
/// (cost-benefit).
pub const AGED_INDEX_MIN_SEGMENTS: u32 = 2048;

/// What a policy may look at: one row of the segment lookup table.
#[derive(Clone, Copy, Debug)]
pub struct SegView {
    pub valid: u32,
    pub slots: u32,
    pub erase_count: u32,
    /// When the segment was allocated for writing (its "creation").
    pub created_ps: u64,
    /// When a block in it was last invalidated (or `created_ps`).
    pub last_inval_ps: u64,
}

impl SegView {
    #[inline]
    pub fn utilization(&self) -> f64 {
        self.valid as f64 / self.slots as f64
    }
}

/// The clock and the age unit policies normalise ages by.
#[derive(Clone, Copy, Debug)]
pub struct SelectCtx {
    pub now_ps: u64,
    /// Device time it took, on average so far, to write as many blocks as the device
    /// holds ("one device-write"); ages are divided by it where a policy normalises.
    pub age_unit_ps: f64,
}

pub trait Selector: Send {
    fn name(&self) -> &'static str;
    /// Lower is a better victim.
    fn score(&self, seg: &SegView, ctx: &SelectCtx) -> f64;
}

/// Segment-selection policies known to the FMS.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Policy {
    Greedy,
    CostBenefit,
    Cat,
    Adaptive,
}

impl Policy {
    pub const ALL: [Policy; 4] = [
        Policy::Greedy,
        Policy::CostBenefit,
        Policy::Cat,
        Policy::Adaptive,
    ];
    pub fn name(self) -> &'static str {
        match self {
            Policy::Greedy => "greedy",
            Policy::CostBenefit => "cost-benefit",
            Policy::Cat => "cat",
            Policy::Adaptive => "adaptive",
        }
    }
}

impl std::str::FromStr for Policy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Policy::ALL
            .into_iter()
            .find(|p| p.name() == s.to_ascii_lowercase())
            .ok_or_else(|| {
                format!("unknown policy '{s}' (known: greedy, cost-benefit, cat, adaptive)")
            })
    }
}

impl std::fmt::Display for Policy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The registry: a selector for a (non-adaptive) policy.
pub fn build(policy: Policy, cat_age: AgeTransform, cb_age: CbAge) -> AnySelector {
    match policy {
        Policy::Greedy => AnySelector::Greedy(Greedy),
        Policy::CostBenefit => AnySelector::CostBenefit(CostBenefit { age: cb_age }),
        Policy::Cat | Policy::Adaptive => AnySelector::Cat(Cat { age: cat_age }),
    }
}

/// One of the selectors, dispatched by `match` rather than through a vtable so that the
/// cleaner's scan over the lookup table inlines the score (the scan runs once per cleaned
/// segment, over every segment holding data).
pub enum AnySelector {
    Greedy(Greedy),
    CostBenefit(CostBenefit),
    Cat(Cat),
}

impl Selector for AnySelector {
    fn name(&self) -> &'static str {
        match self {
            AnySelector::Greedy(s) => s.name(),
            AnySelector::CostBenefit(s) => s.name(),
            AnySelector::Cat(s) => s.name(),
        }
    }
    #[inline]
    fn score(&self, seg: &SegView, ctx: &SelectCtx) -> f64 {
        match self {
            AnySelector::Greedy(s) => s.score(seg, ctx),
            AnySelector::CostBenefit(s) => s.score(seg, ctx),
            AnySelector::Cat(s) => s.score(seg, ctx),
        }
    }
}

/// The candidate with the lowest score, the first one on ties.
#[inline]
pub fn lowest<S: Selector>(
    sel: &S,
    cands: impl Iterator<Item = (u32, SegView)>,
    ctx: &SelectCtx,
) -> Option<u32> {
    let mut best: Option<(f64, u32)> = None;
    for (i, v) in cands {
        let score = sel.score(&v, ctx);
        if best.is_none_or(|(b, _)| score < b) {
            best = Some((score, i));
        }
    }
    best.map(|(_, i)| i)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seg(valid: u32, ec: u32, created: u64, inval: u64) -> SegView {
        SegView {
            valid,
            slots: 32,
            erase_count: ec,
            created_ps: created,
            last_inval_ps: inval,
        }
    }

    fn pick(sel: &dyn Selector, segs: &[SegView], ctx: &SelectCtx) -> usize {
        let mut best = 0;
        for (i, s) in segs.iter().enumerate() {
            if sel.score(s, ctx) < sel.score(&segs[best], ctx) {
                best = i;
            }
        }
        best
    }

    const CTX: SelectCtx = SelectCtx {
        now_ps: 1_000_000,
        age_unit_ps: 100_000.0,
    };

    #[test]
    fn greedy_takes_fewest_valid() {
        let segs = [
            seg(20, 1, 0, 0),
            seg(8, 50, 999_999, 999_999),
            seg(12, 0, 0, 0),
        ];
        assert_eq!(pick(&Greedy, &segs, &CTX), 1);
    }

    #[test]
    fn cost_benefit_weighs_age_of_last_modification() {
        // Same utilisation: the one modified longer ago wins.
        let cb = CostBenefit {
            age: CbAge::Invalidation,
        };
        let segs = [seg(16, 1, 0, 900_000), seg(16, 1, 0, 100_000)];
        assert_eq!(pick(&cb, &segs, &CTX), 1);
        // Measured from the segment's creation instead, the older segment wins.
        let written = CostBenefit {
            age: CbAge::Written,
        };
        let segs = [seg(16, 1, 100_000, 100_000), seg(16, 1, 900_000, 0)];
        assert_eq!(pick(&written, &segs, &CTX), 0);
        assert_eq!(pick(&cb, &segs, &CTX), 1);
        // An old, fuller segment beats a young, emptier one: age·(1-u)/2u.
        let segs = [seg(8, 1, 0, 990_000), seg(20, 1, 0, 0)];
        // 10_000·(24/32)/(2·8/32)=15_000  vs  1_000_000·(12/32)/(2·20/32)=300_000
        assert_eq!(pick(&cb, &segs, &CTX), 1);
        // An empty segment is always taken.
        let segs = [seg(1, 1, 0, 0), seg(0, 1, 0, 999_999)];
        assert_eq!(pick(&cb, &segs, &CTX), 1);
    }

    #[test]
    fn cat_weighs_cost_age_and_erase_count() {
        let cat = Cat {
            age: AgeTransform::Saturating,
        };
        // Same u and age: the less erased one.
        let segs = [seg(16, 10, 0, 0), seg(16, 2, 0, 0)];
        assert_eq!(pick(&cat, &segs, &CTX), 1);
        // Same u and erase count: the older one.
        let segs = [seg(16, 3, 900_000, 0), seg(16, 3, 0, 0)];
        assert_eq!(pick(&cat, &segs, &CTX), 1);
        // Same age and erase count: the emptier one (greedy-like).
        let segs = [seg(20, 3, 0, 0), seg(10, 3, 0, 0)];
        assert_eq!(pick(&cat, &segs, &CTX), 1);
        // A just-created nearly empty segment loses to an old, fuller one.
        let segs = [seg(4, 3, 999_990, 0), seg(16, 3, 0, 0)];
        assert_eq!(pick(&cat, &segs, &CTX), 1);
        // A full segment is never preferred to one with garbage.
        let segs = [seg(32, 0, 0, 0), seg(31, 100, 999_000, 0)];
        assert_eq!(pick(&cat, &segs, &CTX), 1);
    }

    #[test]
    fn policy_names_parse() {
        for p in Policy::ALL {
            assert_eq!(p.name().parse::<Policy>().unwrap(), p);
        }
        assert!("lru".parse::<Policy>().is_err());
    }
}
