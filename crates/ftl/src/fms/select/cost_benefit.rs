//! Cost-benefit (Kawaguchi et al. 1995, as in the Chiang papers): maximise
//! `age · (1 − u) / 2u`, where `u` is the segment's utilisation and `age` the time since the
//! most recent modification (the last block invalidation) of the segment. An empty segment
//! (u = 0) has infinite benefit.
use super::{SegView, SelectCtx, Selector};

pub struct CostBenefit;

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
        let age = ctx.now_ps.saturating_sub(seg.last_inval_ps) as f64;
        -(age * (1.0 - u) / (2.0 * u))
    }
}
