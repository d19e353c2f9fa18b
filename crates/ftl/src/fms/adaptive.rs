//! Adaptive cleaning (DAC paper): a *write monitor* counts writes per logical block since
//! the last analysis; at cleaning time an *analyser* compares the variance of those counts
//! with the variance uniform access would give, and the cleaner uses greedy for uniform
//! access and CAT otherwise.
//!
//! Choices the paper leaves open (configurable):
//! * **The test.** Under uniform access the counts of W writes over N blocks are
//!   multinomial: variance `m(1 − 1/N)` with `m = W/N`. We report non-uniform when the
//!   observed variance exceeds `threshold ×` that (default 1.5). For a 90/10 hot/cold load
//!   the ratio is about `1 + 7.1·m`, for uniform load `1 ± sqrt(2/N)`.
//! * **The window.** The paper resets the counters after every cleaning, but cleaning runs
//!   every few writes at high utilisation and so few writes cannot tell the two apart
//!   (both give counts of 0 and 1). We analyse, and reset, only once the window holds at
//!   least `window` writes (default N/4, so m ≥ 0.25); until then the previous verdict
//!   stands. The first verdict, before any window completes, is "non-uniform" (CAT).
//!
//! Counters are reset lazily with an epoch stamp, so a reset costs O(1).

#[derive(Clone)]
pub struct Adaptive {
    epoch: u32,
    stamp: Vec<u32>,
    count: Vec<u32>,
    writes: u64,
    sum_sq: u64,
    pub window: u64,
    pub threshold: f64,
    uniform: bool,
    pub greedy_choices: u64,
    pub cat_choices: u64,
    /// Variance ratio of the last completed window.
    pub last_ratio: f64,
}

impl Adaptive {
    pub fn new(logical_blocks: usize, window: Option<u64>, threshold: f64) -> Adaptive {
        Adaptive {
            epoch: 1,
            stamp: vec![0; logical_blocks],
            count: vec![0; logical_blocks],
            writes: 0,
            sum_sq: 0,
            window: window.unwrap_or((logical_blocks as u64 / 4).max(16)),
            threshold,
            uniform: false,
            greedy_choices: 0,
            cat_choices: 0,
            last_ratio: f64::NAN,
        }
    }

    /// Start again, as new: the monitor's window, the verdict (non-uniform until a window
    /// completes) and the counts of choices. The simulator calls it after its pre-fill,
    /// which no figure of the workload counts (stop 28, a fidelity review: the pre-fill's
    /// writes, each block once, made the first verdict "uniform", and greedy ran for the
    /// workload's first window; the paper monitors the writes between cleanings).
    pub fn restart(&mut self) {
        self.epoch = self.epoch.wrapping_add(1).max(1);
        self.writes = 0;
        self.sum_sq = 0;
        self.uniform = false;
        self.greedy_choices = 0;
        self.cat_choices = 0;
        self.last_ratio = f64::NAN;
    }

    /// The write monitor: one user write of `lbn`.
    #[inline]
    pub fn on_write(&mut self, lbn: u32) {
        let i = lbn as usize;
        if self.stamp[i] != self.epoch {
            self.stamp[i] = self.epoch;
            self.count[i] = 0;
        }
        let c = self.count[i] as u64;
        self.sum_sq += 2 * c + 1;
        self.count[i] += 1;
        self.writes += 1;
    }

    /// The analyser, at cleaning time: true when greedy should be used. Counts the choice.
    pub fn choose_greedy(&mut self) -> bool {
        if self.writes >= self.window {
            let n = self.count.len() as f64;
            let m = self.writes as f64 / n;
            let var = self.sum_sq as f64 / n - m * m;
            let uniform_var = m * (1.0 - 1.0 / n);
            self.last_ratio = var / uniform_var;
            self.uniform = self.last_ratio <= self.threshold;
            self.epoch = self.epoch.wrapping_add(1).max(1);
            self.writes = 0;
            self.sum_sq = 0;
        }
        if self.uniform {
            self.greedy_choices += 1;
        } else {
            self.cat_choices += 1;
        }
        self.uniform
    }

    /// Share of cleanings that used greedy.
    /// The share of cleanings that chose greedy; `None` before the first cleaning (no
    /// choice made yet: 0 of 0 is not 0 %).
    pub fn greedy_share(&self) -> Option<f64> {
        let t = self.greedy_choices + self.cat_choices;
        (t > 0).then(|| self.greedy_choices as f64 / t as f64)
    }

    pub fn ram_bytes(&self) -> u64 {
        (self.stamp.len() * 8) as u64
    }
    /// [`Adaptive::ram_bytes`] for `logical_blocks` blocks, without the tables: a stamp
    /// and a count per block.
    pub fn ram_bytes_for(logical_blocks: u64) -> u64 {
        logical_blocks.saturating_mul(2 * std::mem::size_of::<u32>() as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    #[test]
    fn switches_between_uniform_and_skewed_access() {
        let n = 4000;
        let mut a = Adaptive::new(n, None, 1.5);
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(1);
        // Before any window completes: CAT.
        assert!(!a.choose_greedy());
        for _ in 0..n {
            a.on_write(rng.gen_range(0..n as u32));
        }
        assert!(
            a.choose_greedy(),
            "uniform writes must select greedy ({})",
            a.last_ratio
        );
        // 90/10 locality: 90% of writes to 10% of blocks.
        for _ in 0..n {
            let lbn = if rng.gen_bool(0.9) {
                rng.gen_range(0..n as u32 / 10)
            } else {
                rng.gen_range(n as u32 / 10..n as u32)
            };
            a.on_write(lbn);
        }
        assert!(
            !a.choose_greedy(),
            "skewed writes must select CAT ({})",
            a.last_ratio
        );
        // A short window keeps the last verdict.
        for _ in 0..10 {
            a.on_write(rng.gen_range(0..n as u32));
        }
        assert!(!a.choose_greedy());
        assert_eq!(a.greedy_choices, 1);
        assert_eq!(a.cat_choices, 3);
        assert!((a.greedy_share().unwrap() - 0.25).abs() < 1e-12);
    }

    /// Before its first cleaning the policy has made no choice: no share, not 0 %.
    #[test]
    fn no_share_before_the_first_choice() {
        let a = Adaptive::new(16, None, 1.5);
        assert_eq!(a.greedy_share(), None);
    }
}
