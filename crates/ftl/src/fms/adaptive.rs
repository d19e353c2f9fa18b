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
//! Counters are reset lazily with an epoch stamp, so a reset costs O(1). The monitor keeps
//! 4 bytes a block, as the paper's block reference table does ("4 bytes per blocks", DAC
//! paper, Section 5): the window's count in the low 24 bits, its window's stamp (8 bits,
//! 1 to 255) in the high 8. Every 255th window, when the stamp comes round again, the
//! table is cleared (one pass, so no stale count passes for the new window's). A count
//! stops at 2^24 − 1 writes of one block in one window (16.7 M; the default window is a
//! quarter of the blocks' count in writes); from there on each write of the block adds
//! 2·(2^24 − 1) + 1 to the sum of squares (the step at the count where it stopped), less
//! than a count going on would. (Until stop 31 a 4-byte stamp and a 4-byte count: 8
//! bytes a block.)

/// The bits of a monitor cell holding the count ([`Adaptive`]).
const COUNT_BITS: u32 = 24;
const COUNT_MAX: u32 = (1 << COUNT_BITS) - 1;

#[derive(Clone)]
pub struct Adaptive {
    /// The window's stamp, 1 to 255 (0 is no window's: a cell never written).
    epoch: u8,
    /// Per block: the stamp of the window it was last written in (high 8 bits) and its
    /// writes in that window (low 24).
    cells: Vec<u32>,
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
            cells: vec![0; logical_blocks],
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
        self.next_window();
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
        let c = self.count(lbn);
        self.sum_sq += 2 * c as u64 + 1;
        self.cells[lbn as usize] = (self.epoch as u32) << COUNT_BITS | (c + 1).min(COUNT_MAX);
        self.writes += 1;
    }

    /// The window's writes of `lbn` so far.
    pub fn count(&self, lbn: u32) -> u32 {
        let cell = self.cells[lbn as usize];
        if cell >> COUNT_BITS == self.epoch as u32 {
            cell & COUNT_MAX
        } else {
            0
        }
    }

    /// A new window: the next stamp, every count 0. When the stamp comes round to 1 again,
    /// the cells are cleared: a cell last written 255 windows ago carries it.
    fn next_window(&mut self) {
        self.epoch = match self.epoch {
            u8::MAX => {
                self.cells.fill(0);
                1
            }
            e => e + 1,
        };
    }

    /// The analyser, at cleaning time: true when greedy should be used. Counts the choice.
    pub fn choose_greedy(&mut self) -> bool {
        if self.writes >= self.window {
            let n = self.cells.len() as f64;
            let m = self.writes as f64 / n;
            let var = self.sum_sq as f64 / n - m * m;
            let uniform_var = m * (1.0 - 1.0 / n);
            self.last_ratio = var / uniform_var;
            self.uniform = self.last_ratio <= self.threshold;
            self.next_window();
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
        Adaptive::ram_bytes_for(self.cells.len() as u64)
    }
    /// [`Adaptive::ram_bytes`] for `logical_blocks` blocks, without the tables: a cell
    /// (stamp and count) per block.
    pub fn ram_bytes_for(logical_blocks: u64) -> u64 {
        logical_blocks.saturating_mul(std::mem::size_of::<u32>() as u64)
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

    /// The packed monitor (4 bytes a block) counts as an unpacked one would: the variance
    /// ratio of every window equals the one computed from plain counts, across more than
    /// 255 windows (the stamp comes round, and the table is cleared), with blocks left
    /// unwritten for hundreds of windows in between; and a count stops at 2^24 − 1.
    #[test]
    fn the_packed_monitor_counts_as_plain_counters_do() {
        let n = 64usize;
        let mut a = Adaptive::new(n, Some(40), 1.5);
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(3);
        for window in 0..700 {
            let mut plain = vec![0u64; n];
            // Blocks 0 and 1 only in the first window (stamp 1) and block 0 again in
            // window 255, whose stamp is 1 again: both would carry the first window's
            // counts there but for the clearing.
            let range = match window {
                0 => 0..n,
                255 => 0..1,
                _ => 2..n,
            };
            for _ in 0..40 {
                let lbn = rng.gen_range(range.clone());
                a.on_write(lbn as u32);
                plain[lbn] += 1;
            }
            for (lbn, &c) in plain.iter().enumerate() {
                assert_eq!(
                    a.count(lbn as u32) as u64,
                    c,
                    "window {window}, block {lbn}"
                );
            }
            let m = 40.0 / n as f64;
            let var = plain.iter().map(|&c| (c * c) as f64).sum::<f64>() / n as f64 - m * m;
            let want = var / (m * (1.0 - 1.0 / n as f64));
            a.choose_greedy();
            assert!((a.last_ratio - want).abs() < 1e-9, "window {window}");
        }
        assert_eq!(a.ram_bytes(), 4 * n as u64);
        let mut a = Adaptive::new(2, Some(u64::MAX), 1.5);
        for _ in 0..COUNT_MAX as u64 + 5 {
            a.on_write(1);
        }
        assert_eq!(a.count(1), COUNT_MAX);
        assert_eq!(a.count(0), 0);
    }

    /// Before its first cleaning the policy has made no choice: no share, not 0 %.
    #[test]
    fn no_share_before_the_first_choice() {
        let a = Adaptive::new(16, None, 1.5);
        assert_eq!(a.greedy_share(), None);
    }
}
