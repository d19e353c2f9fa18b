//! Cost-benefit (Kawaguchi et al. 1995, as in the Chiang papers): maximise
//! `age · (1 − u) / 2u`, where `u` is the segment's utilisation. An empty segment (u = 0)
//! has infinite benefit.
//!
//! What "age" measures is configurable ([`CbAge`]). The Chiang papers define it as "the time
//! since the most recent modification (i.e., the last block invalidation)", our default.
//! Kawaguchi's (like LFS's) "most recent modified time" can also be read as the time the
//! segment was last written, i.e. its creation here: `CbAge::Written`.
use super::{SegView, SelectCtx, Selector};

/// Which time the cost-benefit age is measured from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum CbAge {
    /// Since the last block in the segment was invalidated (the Chiang papers).
    Invalidation,
    /// Since the segment was written (allocated for writing).
    Written,
}

impl std::str::FromStr for CbAge {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "invalidation" => Ok(CbAge::Invalidation),
            "written" => Ok(CbAge::Written),
            _ => Err(format!(
                "unknown cost-benefit age '{s}' (invalidation, written)"
            )),
        }
    }
}

pub struct CostBenefit {
    pub age: CbAge,
}

impl Selector for CostBenefit {
    fn name(&self) -> &'static str {
        "cost-benefit"
    }
    #[inline]
    fn score(&self, seg: &SegView, ctx: &SelectCtx) -> f64 {
        let u = seg.utilization();
        if u <= 0.0 {
            return f64::NEG_INFINITY;
        }
        let since = match self.age {
            CbAge::Invalidation => seg.last_inval_ps,
            CbAge::Written => seg.created_ps,
        };
        let age = ctx.now_ps.saturating_sub(since) as f64;
        -(age * (1.0 - u) / (2.0 * u))
    }
}
