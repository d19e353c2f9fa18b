//! Victim-segment selection. One policy per file; each scores a candidate segment and the
//! cleaner takes the lowest score. Adding a policy: a file here and a line in [`build`].
//!
//! Selection runs once per cleaned segment over the segments that hold data (the paper's
//! lookup table), never per write. Greedy scans valid counts ([`UsedIndex`] on large
//! devices). Cost-benefit and CAT scan [`Row`]s on small devices: a division-free
//! [`Selector::above`] rules out every segment whose score is certainly above the best so
//! far, and only the rest are scored ([`lowest_rows`]); large devices keep an
//! [`AgedIndex`] ([`aged_index_min_segments`]). Every way finds the segment a scan scoring
//! every candidate finds ([`lowest`]): the lowest score, the first one on ties.

mod aged;
mod cat;
mod cost_benefit;
mod greedy;
mod used;

pub use aged::{AgeStamp, AgedIndex};
pub use cat::{AgeTransform, Cat};
pub use cost_benefit::{CbAge, CostBenefit};
pub use greedy::Greedy;
pub use used::{UsedIndex, ValidKeys};

/// Devices with at least this many segments keep a [`UsedIndex`] for greedy (and adaptive's
/// greedy choices); smaller ones scan the table. Keeping the index costs tens of
/// instructions at every invalidation in a closed segment, which on the Intel card's 192
/// segments is more than the scan it saves (measured: +5 % instructions per user write);
/// a scan reads about 0.4 ns a segment, so past a few thousand segments the index wins.
pub const USED_INDEX_MIN_SEGMENTS: u32 = 2048;

/// Devices with at least this many segments keep an [`AgedIndex`] for `policy`
/// (cost-benefit, CAT, adaptive's CAT choices); smaller ones scan the table with
/// [`lowest_rows`], which rules most segments out by a bound and scores the rest. The
/// index's upkeep (a B-tree entry moved at every invalidation in a closed segment) costs
/// more than the scan on small devices. Measured (`flashkit bench --device chang-kuo-16g
/// --blocks N --block-size 512 --fill 0.8 --written 64MiB`, 32 slots a segment, user
/// writes/s, index vs rows, stop 11): 2 048 segments: cost-benefit 3.17 M vs 3.24 M, CAT
/// 1.70 M vs 3.51 M, adaptive 1.64 M vs 3.40 M; 3 072: 2.96–3.02 M vs 2.47–2.54 M, 2.02–
/// 2.04 M vs 2.76–2.77 M, 1.93–1.95 M vs 2.60–2.71 M; 4 096: 2.84 M vs 1.93 M, 2.16 M vs
/// 2.17 M, 2.06 M vs 2.05 M; 8 192: 2.84 M vs 1.17 M, 2.29 M vs 1.21 M, 2.12 M vs 1.16 M.
/// (A scan scoring every segment, before the rows: 2.11–2.15 M for cost-benefit at 2 048.)
pub fn aged_index_min_segments(policy: Policy) -> u32 {
    match policy {
        Policy::CostBenefit => 2048,
        Policy::Greedy | Policy::Cat | Policy::Adaptive => 4096,
    }
}

/// Devices with at least this many segments keep the running summaries of `fms::summary`
/// (DAC region loads, wear levelling's least-worn segment; M4's utilisation, summed here
/// until stop 12, now comes from two counts on every device); smaller ones
/// sum (or scan) every segment at each cleaning, which costs less than keeping them there.
/// Measured with the index of cost-benefit and CAT (stop 10): at 1 024 segments the index
/// and summaries gave cost-benefit 3.27 M user writes/s against 3.26 M by scans, at
/// 2 048 3.04–3.07 M against 2.11–2.15 M; the Intel card's 192 segments 0.86 M against
/// 1.29 M.
pub const SUMMARY_MIN_SEGMENTS: u32 = 2048;

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
    /// What a scan keeps of a candidate segment to rule it out without scoring it (see
    /// [`Selector::above`]); the default rules nothing out.
    #[inline]
    fn row(&self, _seg: &SegView) -> Row {
        Row::default()
    }
    /// The row of a segment that is not a candidate: [`Selector::above`] says true for it
    /// against any best a candidate can score but the policy's very best (such as
    /// cost-benefit's 0 of a segment written this instant, or -∞ of an empty one), so a
    /// scan rarely looks at it further.
    #[inline]
    fn absent_row(&self) -> Row {
        Row::default()
    }
    /// Per-selection constants for [`Selector::above`], computed once per scan.
    #[inline]
    fn prepare(&self, _ctx: &SelectCtx) -> Prep {
        Prep::default()
    }
    /// A cheap, division-free, conservative test that lets a scan skip scoring a segment
    /// whose [`Selector::row`] is `row`: true only when its [`Selector::score`] is
    /// certainly above `best`, the score of a candidate, so that it could not replace it
    /// under "strictly lower wins". It may say false for any segment; it must never say
    /// true for a candidate whose score is `best` or below. Scoring every segment at each
    /// cleaning took a quarter of the Intel card's time under cost-benefit and CAT (their
    /// divisions and conversions); the test is a few multiplications.
    #[inline]
    fn above(&self, _row: &Row, _ctx: &SelectCtx, _prep: &Prep, _best: f64) -> bool {
        false
    }
}

/// A segment as a scan's cheap test sees it: an age stamp (as an f64: see
/// [`Prep::ages`]) and a factor whose meaning is the policy's ([`Selector::row`]), with the
/// segment's division already made. Kept per segment on small devices, updated with every
/// change of its row of the table.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Row {
    pub stamp: f64,
    pub a: f64,
}

/// Per-selection constants of a policy's [`Selector::above`] test.
#[derive(Clone, Copy, Debug, Default)]
pub struct Prep {
    /// The clock, as an f64.
    pub now: f64,
    /// How far `now - stamp`, computed in f64 from a row's f64 stamp, can be from the
    /// exact age, with room to spare: 2^-49 · now (rounding the clock, the stamp and the
    /// difference costs at most 2^-51 · now). See [`Prep::ages`].
    pub e: f64,
    /// The policy's own constants.
    pub c: f64,
    pub d: f64,
}

impl Prep {
    /// The clock and the age allowance at `ctx`.
    #[inline]
    pub fn at(ctx: &SelectCtx) -> Prep {
        let now = ctx.now_ps as f64;
        Prep {
            now,
            e: now * (1.0 / (1u64 << 49) as f64),
            ..Prep::default()
        }
    }

    /// Bounds on the age (`now - stamp`, 0 if the stamp is later) of a row with stamp
    /// `stamp`: a value no greater than the exact age and one no smaller. A row keeps its
    /// stamp as an f64 so that a scan subtracts instead of converting a u64 (several
    /// instructions on x86-64).
    #[inline(always)]
    pub fn ages(&self, stamp: f64) -> (f64, f64) {
        let diff = self.now - stamp;
        // The bound above is never below 0: an empty segment stamped after `now` (age
        // 0, cost-benefit's -∞) must not look younger than new.
        (diff - self.e, (diff + self.e).max(0.0))
    }
}

/// The relative slack of the [`Selector::above`] tests: their bounds are widened by it, far
/// beyond the few units in the last place (about 1e-16 each) by which rounding can move
/// the scores and the bounds, so a segment skipped is certainly above the best.
pub(super) const BOUND_SLACK: f64 = 1e-9;

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
        super::parse_named(s, &Policy::ALL, Policy::name, "policy")
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
#[derive(Clone)]
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
    #[inline]
    fn row(&self, seg: &SegView) -> Row {
        match self {
            AnySelector::Greedy(s) => s.row(seg),
            AnySelector::CostBenefit(s) => s.row(seg),
            AnySelector::Cat(s) => s.row(seg),
        }
    }
    #[inline]
    fn absent_row(&self) -> Row {
        match self {
            AnySelector::Greedy(s) => s.absent_row(),
            AnySelector::CostBenefit(s) => s.absent_row(),
            AnySelector::Cat(s) => s.absent_row(),
        }
    }
    #[inline]
    fn prepare(&self, ctx: &SelectCtx) -> Prep {
        match self {
            AnySelector::Greedy(s) => s.prepare(ctx),
            AnySelector::CostBenefit(s) => s.prepare(ctx),
            AnySelector::Cat(s) => s.prepare(ctx),
        }
    }
    #[inline]
    fn above(&self, row: &Row, ctx: &SelectCtx, prep: &Prep, best: f64) -> bool {
        match self {
            AnySelector::Greedy(s) => s.above(row, ctx, prep, best),
            AnySelector::CostBenefit(s) => s.above(row, ctx, prep, best),
            AnySelector::Cat(s) => s.above(row, ctx, prep, best),
        }
    }
}

impl AnySelector {
    /// [`lowest_rows`] with the policy's own type, so the scan's loop is compiled once per
    /// policy rather than dispatching at every segment.
    #[inline]
    pub fn lowest_rows(
        &self,
        rows: &[Row],
        ctx: &SelectCtx,
        view: impl Fn(u32) -> Option<SegView>,
    ) -> Option<u32> {
        match self {
            AnySelector::Greedy(s) => lowest_rows(s, rows, ctx, view),
            AnySelector::CostBenefit(s) => lowest_rows(s, rows, ctx, view),
            AnySelector::Cat(s) => lowest_rows(s, rows, ctx, view),
        }
    }
}

/// The candidate with the lowest score, the first one on ties, from a table's `rows`
/// ([`Selector::row`] of each candidate, [`Selector::absent_row`] of every other segment):
/// segments that [`Selector::above`] rules out against the best so far are not looked at
/// further; the others are `view`ed (`None`: not a candidate) and scored. The choice is the
/// one [`lowest`] makes, scoring every candidate (tested).
#[inline]
pub fn lowest_rows<S: Selector>(
    sel: &S,
    rows: &[Row],
    ctx: &SelectCtx,
    view: impl Fn(u32) -> Option<SegView>,
) -> Option<u32> {
    let prep = sel.prepare(ctx);
    let mut best: Option<(f64, u32)> = None;
    for (i, row) in rows.iter().enumerate() {
        if let Some((b, _)) = best {
            if sel.above(row, ctx, &prep, b) {
                continue;
            }
        }
        let Some(v) = view(i as u32) else {
            continue;
        };
        let score = sel.score(&v, ctx);
        if best.is_none_or(|(b, _)| score < b) {
            best = Some((score, i as u32));
        }
    }
    best.map(|(_, i)| i)
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

    /// Every policy and age reading: `lowest_rows` (rows ruled out by `above`) picks what
    /// scoring every candidate picks, on random tables built to tie and to nearly tie
    /// (one age shared by many segments, ages a picosecond apart, ages past 2^53 ps where
    /// the rows' f64 stamps round, ages inside CAT's tiny-age branch, empty and full
    /// segments, non-candidates); and it does rule most segments out.
    #[test]
    fn ruling_rows_out_keeps_the_choice() {
        use rand::{Rng, SeedableRng};
        let sels: Vec<AnySelector> = [CbAge::Written, CbAge::Invalidation]
            .into_iter()
            .map(|age| AnySelector::CostBenefit(CostBenefit { age }))
            .chain(
                [
                    AgeTransform::Saturating,
                    AgeTransform::Log,
                    AgeTransform::Linear,
                    AgeTransform::Clamp(0.5),
                    AgeTransform::Clamp(3.0),
                ]
                .into_iter()
                .map(|age| AnySelector::Cat(Cat { age })),
            )
            .collect();
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(11);
        let (mut ruled_out, mut rows_seen) = (0u64, 0u64);
        for (k, sel) in sels.iter().enumerate() {
            for step in 0..3000 {
                let slots = [4, 31, 32, 255][step % 4];
                let base: u64 = match step % 5 {
                    0 => 1_000,
                    1 => 1 << 40,
                    2 => (1 << 60) + rng.gen_range(0..1 << 20),
                    3 => u64::MAX - (1 << 30),
                    _ => rng.gen_range(0..1 << 62),
                };
                let now = base + rng.gen_range(0..1 << 20);
                let n = rng.gen_range(1..40);
                let shared = now - rng.gen_range(0..=now.min(1 << 30));
                let segs: Vec<Option<SegView>> = (0..n)
                    .map(|_| {
                        let stamp = |rng: &mut rand_xoshiro::Xoshiro256PlusPlus| match rng
                            .gen_range(0..6)
                        {
                            0 => shared,
                            1 => shared.saturating_sub(1),
                            2 => now,
                            3 => now - rng.gen_range(0..=now.min(5)),
                            4 => now.saturating_add(rng.gen_range(0..3)),
                            _ => now - rng.gen_range(0..=now.min(1 << 40)),
                        };
                        rng.gen_bool(0.85).then(|| SegView {
                            valid: rng.gen_range(0..slots),
                            slots,
                            erase_count: rng.gen_range(0..3),
                            created_ps: stamp(&mut rng),
                            last_inval_ps: stamp(&mut rng),
                        })
                    })
                    .collect();
                let ctx = SelectCtx {
                    now_ps: now,
                    age_unit_ps: [0.5, 1.0, 1e3, 1e9, 1e15][rng.gen_range(0..5)],
                };
                let rows: Vec<Row> = segs
                    .iter()
                    .map(|v| v.map_or(sel.absent_row(), |v| sel.row(&v)))
                    .collect();
                let cands = segs
                    .iter()
                    .enumerate()
                    .filter_map(|(i, v)| v.map(|v| (i as u32, v)));
                let want = lowest(sel, cands, &ctx);
                let got = sel.lowest_rows(&rows, &ctx, |i| segs[i as usize]);
                assert_eq!(got, want, "{} case {k}, step {step}", sel.name());
                // How many the test rules out against the winner.
                if let Some(w) = want {
                    let best = sel.score(&segs[w as usize].unwrap(), &ctx);
                    let prep = sel.prepare(&ctx);
                    for (i, r) in rows.iter().enumerate() {
                        let out = sel.above(r, &ctx, &prep, best);
                        assert!(!(out && i as u32 == w), "the winner ruled out");
                        ruled_out += out as u64;
                        rows_seen += 1;
                    }
                }
            }
        }
        assert!(
            ruled_out * 2 > rows_seen,
            "only {ruled_out} of {rows_seen} rows ruled out against the winner"
        );
    }

    /// Adversarial tables (proptest): clocks at 0 and near 2^64 ps, stamps later than the
    /// clock and around CAT's tiny-age boundary, age units from 0, NaN and negative to
    /// ∞, valid counts 0 and slots - 1 (and full), erase counts near u32::MAX, every age
    /// transform (clamps below and above 1, tiny and infinite): `lowest_rows` picks what
    /// `lowest` picks.
    mod adversarial {
        use super::*;
        use proptest::prelude::*;

        /// A selector's description (`AnySelector` has no `Debug` for proptest's reports).
        #[derive(Clone, Copy, Debug)]
        enum Sel {
            Greedy,
            CostBenefit(CbAge),
            Cat(AgeTransform),
        }

        impl Sel {
            fn build(self) -> AnySelector {
                match self {
                    Sel::Greedy => AnySelector::Greedy(Greedy),
                    Sel::CostBenefit(age) => AnySelector::CostBenefit(CostBenefit { age }),
                    Sel::Cat(age) => AnySelector::Cat(Cat { age }),
                }
            }
        }

        fn selector() -> impl Strategy<Value = Sel> {
            prop_oneof![
                Just(Sel::CostBenefit(CbAge::Written)),
                Just(Sel::CostBenefit(CbAge::Invalidation)),
                Just(Sel::Greedy),
                prop_oneof![
                    Just(AgeTransform::Saturating),
                    Just(AgeTransform::Log),
                    Just(AgeTransform::Linear),
                    prop::sample::select(vec![
                        1e-300,
                        1e-12,
                        1e-9,
                        0.5,
                        1.0,
                        1.0 + 1e-15,
                        3.0,
                        1e9,
                        1e300,
                        f64::MAX,
                        f64::INFINITY,
                    ])
                    .prop_map(AgeTransform::Clamp),
                    (1e-12f64..10.0).prop_map(AgeTransform::Clamp),
                ]
                .prop_map(Sel::Cat),
            ]
        }

        fn unit() -> impl Strategy<Value = f64> {
            prop_oneof![
                prop::sample::select(vec![
                    0.0,
                    -1.0,
                    f64::NAN,
                    f64::MIN_POSITIVE,
                    1e-300,
                    0.5,
                    1.0,
                    1.5,
                    1e3,
                    1e9,
                    1e12,
                    1e15,
                    1e19,
                    1e30,
                    1e300,
                    f64::MAX,
                    f64::INFINITY,
                ]),
                (0.0f64..1e16),
            ]
        }

        fn now() -> impl Strategy<Value = u64> {
            prop_oneof![
                0u64..4,
                0u64..100_000,
                (0u64..1 << 20).prop_map(|d| u64::MAX - d),
                (0u64..1 << 20).prop_map(|d| (1u64 << 53) + d - (1 << 19)),
                (0u64..1 << 20).prop_map(|d| (1u64 << 63) + d - (1 << 19)),
                any::<u64>(),
            ]
        }

        /// A stamp relative to `now`, `shared` and the tiny-age boundary of `unit`.
        fn stamp(now: u64, shared: u64, unit: f64, pick: u8, d: u64) -> u64 {
            let u = if unit.is_nan() { 1.0 } else { unit.max(1.0) };
            let edge = (u * (1e-9 / (1.0 - 1e-9))).min(u64::MAX as f64) as u64;
            match pick % 10 {
                0 => shared,
                1 => shared.wrapping_sub(d % 3),
                2 => now,
                3 => now.saturating_sub(d % 8),
                4 => now.saturating_add(d % 8),
                5 => now
                    .saturating_sub(edge)
                    .saturating_add(d % 5)
                    .saturating_sub(2),
                6 => 0,
                7 => u64::MAX - d % 4,
                8 => d,
                _ => now.saturating_sub(d % (1 << 40)),
            }
        }

        #[derive(Debug, Clone)]
        struct Case {
            now: u64,
            unit: f64,
            segs: Vec<Option<SegView>>,
        }

        fn case() -> impl Strategy<Value = Case> {
            (
                prop::sample::select(vec![1u32, 2, 3, 4, 32, 255, 32766, 65536, u32::MAX]),
                now(),
                unit(),
                any::<u64>(),
            )
                .prop_flat_map(|(slots, now, unit, shared)| {
                    let seg = (
                        any::<bool>(),
                        prop_oneof![
                            Just(0u32),
                            Just(1u32),
                            Just(slots - 1),
                            Just(slots),
                            0..slots
                        ],
                        prop_oneof![0u32..3, Just(u32::MAX), Just(u32::MAX - 1), any::<u32>()],
                        (any::<u8>(), any::<u64>()),
                        (any::<u8>(), any::<u64>()),
                    )
                        .prop_map(
                            move |(cand, valid, ec, (p1, d1), (p2, d2))| {
                                (cand || valid == 0).then(|| SegView {
                                    valid,
                                    slots,
                                    erase_count: ec,
                                    created_ps: stamp(now, shared, unit, p1, d1),
                                    last_inval_ps: stamp(now, shared, unit, p2, d2),
                                })
                            },
                        );
                    prop::collection::vec(seg, 1..24).prop_map(move |segs| Case { now, unit, segs })
                })
        }

        proptest! {
            #![proptest_config(ProptestConfig { cases: 30000, ..ProptestConfig::default() })]
            #[test]
            fn lowest_rows_is_lowest(desc in selector(), c in case()) {
                let sel = desc.build();
                let ctx = SelectCtx { now_ps: c.now, age_unit_ps: c.unit };
                let rows: Vec<Row> = c
                    .segs
                    .iter()
                    .map(|v| v.map_or(sel.absent_row(), |v| sel.row(&v)))
                    .collect();
                let cands = c
                    .segs
                    .iter()
                    .enumerate()
                    .filter_map(|(i, v)| v.map(|v| (i as u32, v)));
                let want = lowest(&sel, cands, &ctx);
                let got = sel.lowest_rows(&rows, &ctx, |i| c.segs[i as usize]);
                prop_assert_eq!(got, want, "{}", sel.name());
            }
        }
    }

    #[test]
    fn policy_names_parse() {
        for p in Policy::ALL {
            assert_eq!(p.name().parse::<Policy>().unwrap(), p);
        }
        assert!("lru".parse::<Policy>().is_err());
    }
}
