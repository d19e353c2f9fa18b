//! Hot degree of a block (1999 paper, M3 and M6): "the number of times the block has been
//! updated, decreasing as the block's age grows". We define it as an exponentially decayed
//! update count: each update adds 1, and the value halves every `half_life` *user writes*.
//! The paper measures age in time; with its Poisson arrivals time is proportional to
//! writes, and counting writes keeps M3/M6 independent of the arrival rate. The default
//! half-life is half the number of logical blocks (configurable).
//!
//! The average hot degree over all blocks (M6's threshold) is kept in O(1) per update:
//! with λ = ln2 / half_life, degree_i(t) = h_i·e^{−λ(t−t_i)}. We store each block's degree
//! scaled to a base time t0, H_i = h_i·e^{λ(t_i−t0)}, so degree_i(t) = H_i·e^{−λ(t−t0)},
//! an update adds e^{λ(t−t0)} to H_i, and Σ degree_i(t) = e^{−λ(t−t0)}·Σ H_i with the sum
//! kept incrementally. One exponential per write-clock tick; all H_i are rescaled whenever
//! λ(t − t0) passes 200 (rebasing t0).

#[derive(Clone)]
pub struct HotDegree {
    /// Per block, its degree scaled to the base time: `H_i = degree_i(t) · e^{λ(t − t0)}`,
    /// the same for every `t`, so an update adds `e^{λ(now − t0)}` and nothing decays.
    h: Vec<f64>,
    lambda: f64,
    /// Σ H_i.
    s: f64,
    t0: u64,
    /// `e^{λ(now − t0)}` for the last `now` asked (one exponential per write clock tick).
    g: std::cell::Cell<(u64, f64)>,
}

impl HotDegree {
    pub fn new(blocks: usize, half_life_writes: f64) -> HotDegree {
        HotDegree {
            h: vec![0.0; blocks],
            lambda: std::f64::consts::LN_2 / half_life_writes.max(1.0),
            s: 0.0,
            t0: 0,
            g: std::cell::Cell::new((0, 1.0)),
        }
    }

    /// `e^{λ(now − t0)}`, cached for the last `now`.
    #[inline]
    fn growth(&self, now: u64) -> f64 {
        let (t, g) = self.g.get();
        if t == now {
            return g;
        }
        let g = (self.lambda * (now as f64 - self.t0 as f64)).exp();
        self.g.set((now, g));
        g
    }

    #[inline]
    pub fn degree(&self, lbn: u32, now: u64) -> f64 {
        self.h[lbn as usize] / self.growth(now)
    }

    /// Sum of all degrees at `now`.
    #[inline]
    pub fn total(&self, now: u64) -> f64 {
        self.s / self.growth(now)
    }

    /// An update of `lbn` at write-clock `now` (adds 1 to its decayed count).
    pub fn on_update(&mut self, lbn: u32, now: u64) {
        if self.lambda * (now - self.t0) as f64 > 200.0 {
            self.rebase(now);
        }
        let add = self.growth(now);
        self.h[lbn as usize] += add;
        self.s += add;
    }

    /// Set a block's degree at write-clock `t` directly (mount, trim).
    pub fn set(&mut self, lbn: u32, h: f64, t: u64) {
        let i = lbn as usize;
        let scaled = h * (self.lambda * (t as f64 - self.t0 as f64)).exp();
        self.s += scaled - self.h[i];
        self.h[i] = scaled;
    }

    fn rebase(&mut self, now: u64) {
        let shrink = 1.0 / self.growth(now);
        self.t0 = now;
        self.g.set((now, 1.0));
        let mut s = 0.0;
        for h in &mut self.h {
            if *h > 0.0 {
                *h *= shrink;
                if *h < 1e-200 {
                    *h = 0.0;
                }
                s += *h;
            }
        }
        self.s = s;
    }

    pub fn ram_bytes(&self) -> u64 {
        (self.h.len() * 8) as u64
    }
    /// [`HotDegree::ram_bytes`] of a table of `blocks` blocks, without one.
    pub fn ram_bytes_for(blocks: u64) -> u64 {
        blocks.saturating_mul(std::mem::size_of::<f64>() as u64)
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
