//! CAT — Cost Age Times (Chiang & Chang 1999): minimise
//! `u / (1 − u) · 1 / f(age) · (erase_count + 1)`.
//!
//! * `u/(1−u)` is the cleaning cost per useful write; a full segment (u = 1) is never
//!   chosen while another has garbage.
//! * `age` is the time since the segment was created (allocated for writing), divided by
//!   the age unit (the time one device-write took on average, see
//!   [`super::SelectCtx::age_unit_ps`]), then passed through the transformation `f` that the
//!   paper draws in Fig. 7 without giving its formula. We choose the saturating
//!   `f(a) = a / (a + 1)` by default: young segments are protected (f→0), old ones stop
//!   gaining (f→1) so age cannot overwhelm cost. `log`, `linear` and `clamp:X` are
//!   available for study.
//! * `erase_count + 1`: the paper multiplies by the number of times the segment was erased;
//!   we add one so never-erased segments do not all score 0.
use super::{Prep, Row, SegView, SelectCtx, Selector, BOUND_SLACK};

/// The age transformation of Fig. 7.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub enum AgeTransform {
    /// a / (a + 1)
    Saturating,
    /// ln(1 + a)
    Log,
    /// a
    Linear,
    /// min(a, x)
    Clamp(f64),
}

impl AgeTransform {
    #[inline]
    pub fn apply(self, a: f64) -> f64 {
        match self {
            AgeTransform::Saturating => a / (a + 1.0),
            AgeTransform::Log => a.ln_1p(),
            AgeTransform::Linear => a,
            AgeTransform::Clamp(x) => a.min(x),
        }
    }
}

impl std::str::FromStr for AgeTransform {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "saturating" => Ok(AgeTransform::Saturating),
            "log" => Ok(AgeTransform::Log),
            "linear" => Ok(AgeTransform::Linear),
            _ => match s.strip_prefix("clamp:").map(str::parse::<f64>) {
                Some(Ok(x)) if x > 0.0 => Ok(AgeTransform::Clamp(x)),
                Some(Ok(_)) => Err(format!(
                    "CAT age transform '{s}': the clamp X of clamp:X must be > 0"
                )),
                Some(Err(_)) => Err(format!(
                    "CAT age transform '{s}': the clamp X of clamp:X must be a number > 0"
                )),
                None => Err(format!(
                    "unknown CAT age transform '{s}' (saturating, log, linear, clamp:X)"
                )),
            },
        }
    }
}

#[derive(Clone)]
pub struct Cat {
    pub age: AgeTransform,
}

/// Smallest transformed age used, so a segment created this instant is not infinitely bad.
const MIN_AGE: f64 = 1e-9;

impl Selector for Cat {
    fn name(&self) -> &'static str {
        "cat"
    }
    #[inline]
    fn score(&self, seg: &SegView, ctx: &SelectCtx) -> f64 {
        if seg.valid >= seg.slots {
            return f64::INFINITY;
        }
        let age = ctx.now_ps.saturating_sub(seg.created_ps) as f64;
        let unit = ctx.age_unit_ps.max(1.0);
        // u/(1−u) = valid/(slots − valid). The cleaner scores every candidate segment at
        // each cleaning, so the default transformation takes one division in all: with
        // a = age/unit, 1/f(a) = (a + 1)/a = (age + unit)/age.
        let cost = seg.valid as f64 * (seg.erase_count as f64 + 1.0);
        let free = (seg.slots - seg.valid) as f64;
        match self.age {
            // a/(a+1) >= MIN_AGE exactly when a >= MIN_AGE/(1 − MIN_AGE).
            AgeTransform::Saturating if age >= unit * (MIN_AGE / (1.0 - MIN_AGE)) => {
                cost * (age + unit) / (free * age)
            }
            t => cost / (free * t.apply(age / unit).max(MIN_AGE)),
        }
    }
    /// The creation stamp and R = cost · (1 − slack) / free: the cost (valid times the
    /// erase count plus one, as `score` computes it) per free slot, narrowed by the slack
    /// (∞ for a segment without a free slot, never NaN: it has valid blocks). The division
    /// is made here, once per change of the segment's row, instead of at every scan that
    /// reads the row.
    #[inline]
    fn row(&self, seg: &SegView) -> Row {
        let cost = seg.valid as f64 * (seg.erase_count as f64 + 1.0);
        Row {
            stamp: seg.created_ps as f64,
            a: cost * (1.0 - BOUND_SLACK) / (seg.slots - seg.valid) as f64,
        }
    }
    /// Infinite cost per free slot: `above` rules it out against every finite best.
    #[inline]
    fn absent_row(&self) -> Row {
        Row {
            stamp: 0.0,
            a: f64::INFINITY,
        }
    }
    /// `c`: 1 for the saturating transform, else 1 / G, where G bounds the age factor the
    /// score divides by at this clock (a clamp's is at most X, the log and linear ones grow
    /// with the age, which is at most `now`). `d`: the age below which the saturating score
    /// takes its tiny-age branch.
    #[inline]
    fn prepare(&self, ctx: &SelectCtx) -> Prep {
        let unit = ctx.age_unit_ps.max(1.0);
        let g = match self.age {
            AgeTransform::Saturating => 1.0,
            AgeTransform::Clamp(x) => x,
            t => t.apply(ctx.now_ps as f64 / unit),
        };
        Prep {
            c: 1.0 / g.max(MIN_AGE),
            d: unit * (MIN_AGE / (1.0 - MIN_AGE)),
            ..Prep::at(ctx)
        }
    }
    /// The saturating score past its tiny-age branch (which an age surely at least `d`
    /// takes; a younger segment is never ruled out) is cost·(age + unit) / (free·age),
    /// falling as the age grows: it is above `best` (≥ 0, a score) when R·(A + unit) >
    /// best·A for an age A at least the segment's (R carries the slack, which the roundings
    /// of R, of both sides and of the score cannot overturn). Every other score is
    /// cost / (free · g) with g ≤ G, so at least cost / (free · G): above `best` when
    /// R / G > best. Both tests are free of divisions.
    #[inline]
    fn above(&self, row: &Row, ctx: &SelectCtx, prep: &Prep, best: f64) -> bool {
        if let AgeTransform::Saturating = self.age {
            // A segment that may be in the tiny-age branch (a rare few picoseconds old) is
            // simply scored.
            let (lo, hi) = prep.ages(row.stamp);
            let unit = ctx.age_unit_ps.max(1.0);
            return lo >= prep.d && row.a * (hi + unit) > best * hi;
        }
        row.a * prep.c > best
    }
}

#[cfg(test)]
mod tests {
    use super::AgeTransform;

    #[test]
    fn parse_age_transforms() {
        assert_eq!("log".parse::<AgeTransform>(), Ok(AgeTransform::Log));
        assert_eq!(
            "clamp:2.5".parse::<AgeTransform>(),
            Ok(AgeTransform::Clamp(2.5))
        );
        for bad in ["clamp:0", "clamp:-1"] {
            let e = bad.parse::<AgeTransform>().unwrap_err();
            assert!(e.contains("must be > 0"), "{e}");
        }
        let e = "clamp:x".parse::<AgeTransform>().unwrap_err();
        assert!(e.contains("must be a number > 0"), "{e}");
        let e = "square".parse::<AgeTransform>().unwrap_err();
        assert!(e.starts_with("unknown CAT age transform 'square'"), "{e}");
    }
}
