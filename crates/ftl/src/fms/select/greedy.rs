//! Greedy: clean the segment with the most garbage (fewest valid blocks).
use super::{SegView, SelectCtx, Selector};

#[derive(Clone)]
pub struct Greedy;

impl Selector for Greedy {
    fn name(&self) -> &'static str {
        "greedy"
    }
    #[inline]
    fn score(&self, seg: &SegView, _ctx: &SelectCtx) -> f64 {
        seg.valid as f64
    }
}
