//! Hot degree of a block (1999 paper, M3 and M6): "the number of times the block has been
//! updated, decreasing as the block's age grows". We define it as an exponentially decayed
//! update count: each update adds 1, and the value halves every `half_life` *user writes*.
//! The paper measures age in time; with its Poisson arrivals time is proportional to
//! writes, and counting writes keeps M3/M6 independent of the arrival rate. The default
//! half-life is half the number of logical blocks (configurable).
//!
//! The average hot degree over all blocks (M6's threshold) is kept in O(1) per update:
//! with λ = ln2 / half_life, degree_i(t) = h_i·e^{−λ(t−t_i)}, so
//! Σ degree_i(t) = e^{−λ(t−t0)} · Σ h_i e^{λ(t_i−t0)}; the sum S is updated incrementally
//! and recomputed exactly whenever λ(t − t0) passes 200 (rebasing t0).

pub struct HotDegree {
    h: Vec<f64>,
    t: Vec<u64>,
    lambda: f64,
    s: f64,
    t0: u64,
}

impl HotDegree {
    pub fn new(blocks: usize, half_life_writes: f64) -> HotDegree {
        HotDegree {
            h: vec![0.0; blocks],
            t: vec![0; blocks],
            lambda: std::f64::consts::LN_2 / half_life_writes.max(1.0),
            s: 0.0,
            t0: 0,
        }
    }

    #[inline]
    pub fn degree(&self, lbn: u32, now: u64) -> f64 {
        let i = lbn as usize;
        self.h[i] * (-self.lambda * now.saturating_sub(self.t[i]) as f64).exp()
    }

    /// Sum of all degrees at `now`.
    #[inline]
    pub fn total(&self, now: u64) -> f64 {
        self.s * (-self.lambda * (now - self.t0) as f64).exp()
    }

    #[inline]
    fn weight(&self, t: u64) -> f64 {
        (self.lambda * (t as f64 - self.t0 as f64)).exp()
    }

    /// An update of `lbn` at write-clock `now` (adds 1 to its decayed count).
    pub fn on_update(&mut self, lbn: u32, now: u64) {
        if self.lambda * (now - self.t0) as f64 > 200.0 {
            self.rebase(now);
        }
        let i = lbn as usize;
        let old = self.h[i];
        self.s -= old * self.weight(self.t[i]);
        let d = self.degree(lbn, now) + 1.0;
        self.h[i] = d;
        self.t[i] = now;
        self.s += d * self.weight(now);
    }

    /// Set a block's state directly (mount, trim).
    pub fn set(&mut self, lbn: u32, h: f64, t: u64) {
        let i = lbn as usize;
        self.s -= self.h[i] * self.weight(self.t[i]);
        self.h[i] = h;
        self.t[i] = t;
        self.s += h * self.weight(t);
    }

    fn rebase(&mut self, now: u64) {
        self.t0 = now;
        let mut s = 0.0;
        for i in 0..self.h.len() {
            if self.h[i] > 0.0 {
                let w = self.weight(self.t[i]);
                if w < 1e-200 {
                    self.h[i] = 0.0;
                } else {
                    s += self.h[i] * w;
                }
            }
        }
        self.s = s;
    }

    pub fn ram_bytes(&self) -> u64 {
        (self.h.len() * 16) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decays_and_tracks_the_average_exactly() {
        let mut hd = HotDegree::new(4, 10.0);
        hd.on_update(0, 0);
        hd.on_update(0, 0);
        assert!((hd.degree(0, 0) - 2.0).abs() < 1e-9);
        assert!((hd.degree(0, 10) - 1.0).abs() < 1e-9);
        hd.on_update(1, 10);
        let brute: f64 = (0..4).map(|i| hd.degree(i, 25)).sum();
        assert!((hd.total(25) - brute).abs() < 1e-9);
        // Across a rebase.
        for k in 0..5000u64 {
            hd.on_update((k % 3) as u32, 20 + k);
        }
        let now = 6000;
        let brute: f64 = (0..4).map(|i| hd.degree(i, now)).sum();
        assert!((hd.total(now) - brute).abs() < 1e-6 * brute.max(1.0));
        assert_eq!(hd.degree(3, now), 0.0);
    }
}
