//! The flash device: enforces the rules of real flash on top of a [`Store`], keeps the
//! virtual clock and the counters, and injects wear, defects, bit flips and power cuts.

use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use serde::Serialize;

use crate::error::{ColumnRange, NandError, PageRange, Result};
use crate::geometry::{DeviceSpec, Geometry};
use crate::store::{BadState, BlockInfo, Span, Store};
use crate::table::config_table;

/// Data-area argument of a program operation.
#[derive(Clone, Copy, Debug)]
pub enum Data<'a> {
    /// Leave the data area alone (spare-only program).
    None,
    /// Program these bytes.
    Bytes(&'a [u8]),
    /// Program `len` bytes whose content the caller does not track (simulation mode). The
    /// payload-less store drops them; stores with payload record zeros.
    Opaque(u32),
}

impl Data<'_> {
    /// Bytes of the data area the program covers.
    #[inline]
    pub fn len(&self) -> usize {
        match self {
            Data::None => 0,
            Data::Bytes(b) => b.len(),
            Data::Opaque(n) => *n as usize,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// What a power cut does to the operation it interrupts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize, Default)]
#[serde(rename_all = "snake_case")]
pub enum TornMode {
    /// Pick one of the modes below with the fault plan's seeded generator.
    #[default]
    Random,
    /// The operation did not reach the cells at all.
    Nothing,
    /// Program: a random subset of the bits it would clear are cleared. Erase: a random
    /// subset of the block's pages are erased, the others keep their content.
    Partial,
    /// The operation completed but power went before it was acknowledged.
    Complete,
}

/// Faults to inject. Operation indices count programs and erases together, from 1.
#[derive(Clone, Debug, Default)]
pub struct FaultPlan {
    /// Cut power during the N-th program/erase (1-based).
    pub power_cut_at: Option<u64>,
    pub torn: TornMode,
    /// Probability that a read bit comes back flipped (transient, not stored).
    pub bitflip_rate: f64,
    /// Probability that a program / erase reports status-fail (block goes bad).
    pub program_fail_rate: f64,
    pub erase_fail_rate: f64,
    /// Program/erase operation indices (1-based) that report status-fail.
    pub fail_ops: Vec<u64>,
    pub seed: u64,
}

impl FaultPlan {
    /// Whether programs or erases may report status-fail ([`FaultPlan::fail_ops`], the
    /// failure rates).
    fn fails(&self) -> bool {
        !self.fail_ops.is_empty() || self.program_fail_rate > 0.0 || self.erase_fail_rate > 0.0
    }
}

/// Operation counters. `bytes_*` count data and spare bytes moved.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Counters {
    pub page_reads: u64,
    pub spare_reads: u64,
    pub programs: u64,
    pub erases: u64,
    pub bytes_read: u64,
    pub bytes_programmed: u64,
    pub program_failures: u64,
    pub erase_failures: u64,
    pub bitflips: u64,
    /// Reads that flipped three or more bits within one 512-byte chunk of a page (counted
    /// from column 0): more than a SEC-DED code per 512 bytes (`crate::ecc`) can correct,
    /// and an odd count is miscorrected, not detected. With a stronger code, more than it
    /// corrects (`Nand::set_overflip_at`).
    pub overflipped_chunks: u64,
}

impl Counters {
    /// Device operations: page and spare reads, programs and erases.
    pub fn operations(&self) -> u64 {
        self.page_reads + self.spare_reads + self.programs + self.erases
    }
}

/// Wear summary over good blocks.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct WearStats {
    pub min: u32,
    pub max: u32,
    pub mean: f64,
    pub stddev: f64,
    pub total: u64,
}

impl WearStats {
    pub fn of(counts: impl Iterator<Item = u32>) -> WearStats {
        let (mut n, mut sum, mut sq, mut min, mut max) = (0u64, 0u64, 0f64, u32::MAX, 0u32);
        for c in counts {
            n += 1;
            sum += c as u64;
            sq += c as f64 * c as f64;
            min = min.min(c);
            max = max.max(c);
        }
        if n == 0 {
            return WearStats::default();
        }
        let mean = sum as f64 / n as f64;
        let var = (sq / n as f64 - mean * mean).max(0.0);
        WearStats {
            min,
            max,
            mean,
            stddev: var.sqrt(),
            total: sum,
        }
    }
}

const PS_PER_US: f64 = 1_000_000.0;
const PS_PER_NS: f64 = 1_000.0;

#[derive(Clone, Copy, Debug)]
struct Costs {
    read: u64,
    read_byte: u64,
    spare: u64,
    program: u64,
    program_byte: u64,
    erase: u64,
}

/// A flash device over a store. All operations advance the virtual clock (picoseconds).
pub struct Nand {
    spec: DeviceSpec,
    geo: Geometry,
    store: Box<dyn Store>,
    costs: Costs,
    clock_ps: u64,
    counters: Counters,
    /// Next page index to program per block (in-order devices only).
    write_ptr: Vec<u32>,
    /// Bad-block flags, cached from the store (checked on every program).
    bad: Vec<bool>,
    /// How many blocks are bad, and how many of those grown bad (failed or worn out in
    /// use): kept with `bad`, so that a caller asks in O(1).
    bad_count: u32,
    grown_count: u32,
    ops: u64,
    /// `ops` when the fault plan was installed; plan indices count from here.
    fault_base: u64,
    dead: bool,
    /// The block whose erase a power cut stopped after the erase had begun (counted).
    cut_erase: Option<u32>,
    faults: FaultPlan,
    /// The fault plan can cut or fail a program or erase.
    faults_armed: bool,
    rng: Xoshiro256PlusPlus,
    flip_countdown: u64,
    /// Flips in one 512-byte chunk of a read from which it counts in
    /// `Counters::overflipped_chunks` (3 by default: beyond SEC-DED).
    overflip_at: u32,
    scripted_flips: Vec<(u64, u32, u8)>,
    scratch: Vec<u8>,
    /// log2 of pages per block when it is a power of two (a shift instead of a division
    /// on every program).
    ppb_shift: Option<u32>,
    pages: u64,
}

impl Nand {
    /// A device over `store`, which must have the spec's geometry.
    pub fn open(spec: DeviceSpec, store: Box<dyn Store>) -> Result<Nand> {
        spec.validate_stored()?;
        if store.geometry() != &spec.geometry {
            return Err(NandError::config(
                "store geometry differs from the device spec",
            ));
        }
        let geo = spec.geometry.clone();
        let geo_ppb_shift = geo
            .pages_per_block
            .is_power_of_two()
            .then(|| geo.pages_per_block.trailing_zeros());
        let geo_pages = geo.pages();
        let t = &spec.timing;
        let costs = Costs {
            read: (t.read_us * PS_PER_US).round() as u64,
            read_byte: (t.read_ns_per_byte * PS_PER_NS).round() as u64,
            spare: (t.spare_read_us * PS_PER_US).round() as u64,
            program: (t.program_us * PS_PER_US).round() as u64,
            program_byte: (t.program_ns_per_byte * PS_PER_NS).round() as u64,
            erase: (t.erase_us * PS_PER_US).round() as u64,
        };
        let mut write_ptr = Vec::new();
        if geo.in_order {
            write_ptr = config_table(geo.blocks as u64, 0, "the write pointers")?;
            for (b, wp) in write_ptr.iter_mut().enumerate() {
                let first = geo.first_page(b as u32);
                *wp = (0..geo.pages_per_block)
                    .rev()
                    .find(|&i| store.page_programs(first + i as u64) > 0)
                    .map_or(0, |i| i + 1);
            }
        }
        let mut bad = config_table(geo.blocks as u64, false, "the bad-block flags")?;
        let (mut bad_count, mut grown_count) = (0, 0);
        for (b, bad) in bad.iter_mut().enumerate() {
            let state = store.block_info(b as u32).bad;
            *bad = state != BadState::Good;
            bad_count += *bad as u32;
            grown_count += (state == BadState::Grown) as u32;
        }
        let mut nand = Nand {
            spec,
            geo,
            store,
            costs,
            clock_ps: 0,
            counters: Counters::default(),
            bad,
            bad_count,
            grown_count,
            write_ptr,
            ops: 0,
            fault_base: 0,
            dead: false,
            cut_erase: None,
            faults: FaultPlan::default(),
            faults_armed: false,
            rng: Xoshiro256PlusPlus::seed_from_u64(0),
            flip_countdown: u64::MAX,
            overflip_at: 3,
            scripted_flips: Vec::new(),
            scratch: Vec::new(),
            ppb_shift: geo_ppb_shift,
            pages: geo_pages,
        };
        nand.set_faults(FaultPlan::default());
        Ok(nand)
    }

    /// A device with a fresh RAM store.
    pub fn ram(spec: DeviceSpec) -> Result<Nand> {
        let store = crate::store::RamStore::new(&spec.geometry)?;
        Nand::open(spec, Box::new(store))
    }

    /// A device with a fresh payload-less store (simulation mode).
    pub fn payloadless(spec: DeviceSpec) -> Result<Nand> {
        let store = crate::store::PayloadlessStore::new(&spec.geometry)?;
        Nand::open(spec, Box::new(store))
    }

    /// Install a fault plan; operation indices restart from the current count.
    pub fn set_faults(&mut self, plan: FaultPlan) {
        self.rng = Xoshiro256PlusPlus::seed_from_u64(plan.seed ^ 0x5eed_f1a5_u64);
        self.fault_base = self.ops;
        // Without a cut, failing operations or failure rates, programs skip the fault
        // checks (bit flips only touch reads).
        self.faults = plan;
        self.faults_armed = self.faults.power_cut_at.is_some() || self.faults.fails();
        self.flip_countdown = self.next_flip_gap();
    }

    /// An independent copy of this device in its present state (medium, counters, clock,
    /// fault plan, random generator), or `None` when its store cannot be copied
    /// ([`Store::try_clone`]). Operations on either never touch the other.
    pub fn try_clone(&self) -> Option<Nand> {
        Some(Nand {
            spec: self.spec.clone(),
            geo: self.geo.clone(),
            store: self.store.try_clone()?,
            costs: self.costs,
            clock_ps: self.clock_ps,
            counters: self.counters.clone(),
            write_ptr: self.write_ptr.clone(),
            bad: self.bad.clone(),
            bad_count: self.bad_count,
            grown_count: self.grown_count,
            ops: self.ops,
            fault_base: self.fault_base,
            dead: self.dead,
            cut_erase: self.cut_erase,
            faults: self.faults.clone(),
            faults_armed: self.faults_armed,
            rng: self.rng.clone(),
            flip_countdown: self.flip_countdown,
            overflip_at: self.overflip_at,
            scripted_flips: self.scripted_flips.clone(),
            scratch: Vec::new(),
            ppb_shift: self.ppb_shift,
            pages: self.pages,
        })
    }

    /// Cut power during the `at`-th program or erase of the installed fault plan (counted
    /// as [`FaultPlan::power_cut_at`] counts, from the plan's installation), keeping the
    /// rest of the plan and, unless `reseed` is given, the generator's state. A device
    /// forked ([`Nand::try_clone`]) from a run without a cut then goes on exactly as a run
    /// with `power_cut_at: Some(at)` would have, provided the generator was not drawn
    /// before the fork or `reseed` is `None` and both plans had the same seed (bit flips
    /// and failure rates draw from it; a cut and a torn outcome draw only at the cut).
    pub fn arm_power_cut(&mut self, at: u64, torn: TornMode, reseed: Option<u64>) {
        if let Some(seed) = reseed {
            self.faults.seed = seed;
            self.rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ 0x5eed_f1a5_u64);
        }
        self.faults.power_cut_at = Some(at);
        self.faults.torn = torn;
        self.faults_armed = true;
    }

    /// Take back a power cut armed ([`FaultPlan::power_cut_at`], [`Nand::arm_power_cut`])
    /// that has not fallen, keeping the rest of the plan and the generator's state (the
    /// bit flips to come are those the plan would have made without the cut). A cut that
    /// has fallen stays: the device is dead until its store is reopened.
    pub fn disarm_power_cut(&mut self) {
        self.faults.power_cut_at = None;
        self.faults_armed = self.faults.fails();
    }

    pub fn spec(&self) -> &DeviceSpec {
        &self.spec
    }
    #[inline]
    pub fn geometry(&self) -> &Geometry {
        &self.geo
    }
    /// Advance the clock by `ps`, saturating at its end rather than wrapping: the costs
    /// are bounded ([`crate::Timing::validate`]), but a long enough run of costly
    /// operations could still pass `u64::MAX` picoseconds (213 days), and a clock that
    /// wrapped would hand the age-based policies nonsense. A saturated clock is past every
    /// simulator range check, which then fails the run.
    #[inline(always)]
    fn tick(&mut self, ps: u64) {
        self.clock_ps = self.clock_ps.saturating_add(ps);
    }

    /// Count a read's 512-byte chunk in `Counters::overflipped_chunks` from its `n`-th
    /// flip on (at least 1): one more than the medium's code corrects, or 3 for SEC-DED,
    /// whose two flips are detected (the default). The FMS sets it from its ECC.
    pub fn set_overflip_at(&mut self, n: u32) {
        self.overflip_at = n.max(1);
    }

    /// What opening the medium had to repair, a line each (an image file's corrupt
    /// block-table entries, each block taken as grown bad): for the user to be told.
    pub fn open_repairs(&self) -> &[String] {
        self.store.repairs()
    }

    /// Virtual time spent by the device, picoseconds.
    #[inline]
    pub fn clock_ps(&self) -> u64 {
        self.clock_ps
    }
    /// Virtual time spent by the device, seconds.
    pub fn clock_s(&self) -> f64 {
        self.clock_ps as f64 / 1e12
    }
    /// Let time pass (idle): the clock moves to at least `ps`.
    pub fn advance_clock_to(&mut self, ps: u64) {
        self.clock_ps = self.clock_ps.max(ps);
    }
    pub fn counters(&self) -> &Counters {
        &self.counters
    }
    /// Programs and erases attempted since the device was opened. [`FaultPlan::power_cut_at`]
    /// and [`FaultPlan::fail_ops`] count from the value this had when the plan was installed.
    pub fn op_count(&self) -> u64 {
        self.ops
    }
    /// True once power has been cut: every operation fails until the store is reopened.
    pub fn is_dead(&self) -> bool {
        self.dead
    }
    /// The block whose erase the power cut stopped, when the erase had begun (torn
    /// `Partial` or `Complete`): the device counted it in the block's erase count, and its
    /// owner may never learn of it (a partial erase can leave the block's first page, and
    /// the count recorded there, as it was). `None` before a cut, or when the cut fell on a
    /// program or on an erase torn `Nothing`.
    pub fn cut_erase(&self) -> Option<u32> {
        self.cut_erase
    }
    pub fn store(&self) -> &dyn Store {
        &*self.store
    }
    /// Take the store back (e.g. to reopen it after a power cut).
    pub fn into_store(self) -> Box<dyn Store> {
        self.store
    }
    pub fn sync(&mut self) -> Result<()> {
        self.alive()?;
        self.store.sync()
    }
    pub fn ram_bytes(&self) -> u64 {
        self.store.ram_bytes() + self.write_ptr.len() as u64 * 4
    }
    pub fn block_info(&self, block: u32) -> BlockInfo {
        self.store.block_info(block)
    }
    #[inline]
    pub fn is_bad(&self, block: u32) -> bool {
        self.bad[block as usize]
    }
    /// Blocks bad, factory and grown, in O(1).
    #[inline]
    pub fn bad_blocks(&self) -> u32 {
        self.bad_count
    }
    /// Blocks grown bad (a program or erase reported failure, or the block wore out), in
    /// O(1).
    #[inline]
    pub fn grown_bad_blocks(&self) -> u32 {
        self.grown_count
    }
    /// Keep the bad counts as block `block` goes from `was` to `now`.
    fn count_bad(&mut self, was: BadState, now: BadState) {
        let bad = |s: BadState| (s != BadState::Good) as u32;
        let grown = |s: BadState| (s == BadState::Grown) as u32;
        self.bad_count = (self.bad_count + bad(now)).saturating_sub(bad(was));
        self.grown_count = (self.grown_count + grown(now)).saturating_sub(grown(was));
    }
    pub fn erase_count(&self, block: u32) -> u32 {
        self.store.block_info(block).erase_count
    }
    /// Erase-count summary over blocks that are not factory-bad.
    pub fn wear(&self) -> WearStats {
        WearStats::of(
            (0..self.geo.blocks)
                .map(|b| self.store.block_info(b))
                .filter(|i| i.bad != BadState::Factory)
                .map(|i| i.erase_count),
        )
    }
    /// Programs done on `ppn` since its block's last erase.
    pub fn page_programs(&self, ppn: u64) -> u32 {
        self.store.page_programs(ppn) as u32
    }

    /// Mark blocks bad at manufacture (bad-block marker 0x00 in the first spare byte of the
    /// block's first two pages, when the device has a spare area).
    pub fn mark_factory_bad(&mut self, blocks: &[u32]) -> Result<()> {
        for &b in blocks {
            self.check_block(b)?;
            let mut info = self.store.block_info(b);
            self.count_bad(info.bad, BadState::Factory);
            info.bad = BadState::Factory;
            self.bad[b as usize] = true;
            self.store.set_block_info(b, info)?;
            if self.geo.spare_size > 0 {
                let first = self.geo.first_page(b);
                for p in first..first + self.geo.pages_per_block.min(2) as u64 {
                    self.store.write(p, self.geo.page_size, &[0])?;
                }
            }
        }
        Ok(())
    }

    /// Mark `fraction` of the blocks (rounded to the nearest whole block) factory-bad,
    /// chosen at random by `seed`; returns them in ascending order. An exact count, not a
    /// per-block probability: `--bad-fraction 0.1` on 200 blocks is 20 bad blocks.
    pub fn mark_factory_bad_seeded(&mut self, fraction: f64, seed: u64) -> Result<Vec<u32>> {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        let blocks = self.geo.blocks as usize;
        let count = (fraction.clamp(0.0, 1.0) * blocks as f64).round() as usize;
        let mut list: Vec<u32> = rand::seq::index::sample(&mut rng, blocks, count)
            .into_iter()
            .map(|b| b as u32)
            .collect();
        list.sort_unstable();
        self.mark_factory_bad(&list)?;
        Ok(list)
    }

    /// Flip `bit` of column `col` of page `ppn` on the next read of it (one shot).
    pub fn inject_bitflip(&mut self, ppn: u64, col: u32, bit: u8) {
        self.scripted_flips.push((ppn, col, bit & 7));
    }

    // ---- reads -------------------------------------------------------------------------

    /// Read `buf.len()` bytes of page `ppn` from column `col`. A read that starts in the
    /// spare area costs a spare read, otherwise a page read.
    #[inline]
    pub fn read(&mut self, ppn: u64, col: u32, buf: &mut [u8]) -> Result<()> {
        self.alive()?;
        self.check_range(ppn, col, buf.len())?;
        self.store.read(ppn, col, buf)?;
        let n = buf.len() as u64;
        if col >= self.geo.page_size {
            self.counters.spare_reads += 1;
            self.tick(self.costs.spare + self.costs.read_byte * n);
        } else {
            self.counters.page_reads += 1;
            self.tick(self.costs.read + self.costs.read_byte * n);
        }
        self.counters.bytes_read += n;
        self.apply_flips(ppn, col, buf);
        Ok(())
    }

    /// Read the data area and/or the spare area of a page in one operation.
    pub fn read_page(
        &mut self,
        ppn: u64,
        data: Option<&mut [u8]>,
        spare: Option<&mut [u8]>,
    ) -> Result<()> {
        match (data, spare) {
            (Some(d), Some(s)) => {
                // Both ranges are checked before anything is read, so a refused request
                // reads nothing, costs nothing and meets no bit flip (the data range
                // first, as the data is read first).
                self.alive()?;
                self.check_range(ppn, 0, d.len())?;
                self.check_range(ppn, self.geo.page_size, s.len())?;
                self.read(ppn, 0, d)?;
                self.store.read(ppn, self.geo.page_size, s)?;
                self.counters.bytes_read += s.len() as u64;
                self.tick(self.costs.read_byte * s.len() as u64);
                self.apply_flips(ppn, self.geo.page_size, s);
                Ok(())
            }
            (Some(d), None) => self.read(ppn, 0, d),
            (None, Some(s)) => self.read(ppn, self.geo.page_size, s),
            (None, None) => {
                // A data read whose payload the caller does not need (simulation mode).
                self.alive()?;
                self.check_range(ppn, 0, 0)?;
                self.counters.page_reads += 1;
                self.tick(self.costs.read + self.costs.read_byte * self.geo.page_size as u64);
                self.counters.bytes_read += self.geo.page_size as u64;
                Ok(())
            }
        }
    }

    /// Account for a data read of `len` bytes at `col` without moving bytes (simulation).
    #[inline]
    pub fn read_opaque(&mut self, ppn: u64, col: u32, len: u32) -> Result<()> {
        self.alive()?;
        self.check_range(ppn, col, len as usize)?;
        self.counters.page_reads += 1;
        self.counters.bytes_read += len as u64;
        self.tick(self.costs.read + self.costs.read_byte * len as u64);
        Ok(())
    }

    // ---- programs ----------------------------------------------------------------------

    /// Program `bytes` at column `col` of page `ppn` (data area, spare area, or both).
    pub fn program_bytes(&mut self, ppn: u64, col: u32, bytes: &[u8]) -> Result<()> {
        let ps = self.geo.page_size;
        if col >= ps {
            self.program(ppn, 0, Data::None, Some((col - ps, bytes)))
        } else {
            let d = bytes.len().min((ps - col) as usize);
            let spare = if d < bytes.len() {
                Some((0, &bytes[d..]))
            } else {
                None
            };
            self.program(ppn, col, Data::Bytes(&bytes[..d]), spare)
        }
    }

    /// Program a page: data (if any) at column 0, spare (if any) at the start of the spare
    /// area. One program operation.
    pub fn program_page(&mut self, ppn: u64, data: Data<'_>, spare: Option<&[u8]>) -> Result<()> {
        self.program(ppn, 0, data, spare.map(|s| (0, s)))
    }

    /// The general program operation: `data` at data column `col`, and `spare` bytes at
    /// offset `.0` of the spare area. Counts as one (partial) program of the page.
    ///
    /// Inlined into every caller: the FTL's calls name the kind of `data` and whether a
    /// spare area is programmed, so the checks that cannot apply to them (the spare range,
    /// the bit rule of a data area the caller does not give) fold away, and neither
    /// argument goes through memory. Every rule is still checked on every program.
    #[inline(always)]
    pub fn program(
        &mut self,
        ppn: u64,
        col: u32,
        data: Data<'_>,
        spare: Option<(u32, &[u8])>,
    ) -> Result<()> {
        if let (Data::Bytes(b), None) = (data, spare) {
            if !self.faults_armed {
                return self.program_bytes_in_place(ppn, col, b);
            }
        }
        let (block, idx) = self.check_program(ppn, col, data, spare)?;
        self.count_program((data.len() + spare.map_or(0, |s| s.1.len())) as u64);
        if self.faults_armed {
            if let Some(r) = self.program_fault(ppn, col, data, spare, block, idx) {
                return r;
            }
        }
        match (data, spare) {
            (Data::Opaque(n), None) => self.store.program_opaque_data(ppn, col, n)?,
            _ => self.store.program(ppn, col, data, spare)?,
        }
        self.advance_write_ptr(block, idx);
        Ok(())
    }

    /// A program of `bytes` into the data area alone, without a fault plan (the FMS's
    /// entries and live flags). Every rule but the bit rule is checked here, in the same
    /// order as [`Nand::program`]'s; then the store compares the bytes with the medium and,
    /// when they only clear bits, programs them, in one call. The bit rule is checked last
    /// in either path, so the same program fails with the same error; a store that cannot
    /// compare in place changes nothing and the program takes the general path. Nothing
    /// can cut or fail the program in between (no fault plan), so counting it after the
    /// store's write instead of before is the same.
    #[inline(always)]
    fn program_bytes_in_place(&mut self, ppn: u64, col: u32, bytes: &[u8]) -> Result<()> {
        let (block, idx) = self.check_placement(ppn, col, bytes.len(), None)?;
        match self.store.program_bytes_if_clears(ppn, col, bytes) {
            Some(None) => {}
            Some(Some(i)) => return sets_bits(ppn, col, Some(i)),
            None => return self.program_bytes_checked(ppn, col, bytes, block, idx),
        }
        self.count_program(bytes.len() as u64);
        self.advance_write_ptr(block, idx);
        Ok(())
    }

    /// Read the byte at data column `col` of `ppn`, then program it back with the bits of
    /// `clear` cleared: exactly [`Nand::read`] of that byte followed by [`Nand::program`]
    /// of `Data::Bytes(&[byte & !clear])` at the same place, without spare bytes (the FMS's
    /// clear of a live flag). `Err` when the read fails (nothing programmed), otherwise the
    /// byte read and the outcome of the program.
    ///
    /// Without a fault plan or a bit flip due, when every rule of the program but the bit
    /// rule passes (`Nand::check_placement`: powered, within the data area and the
    /// device, a good block, program budget, order, which cover the read's power and range
    /// checks), the store reads, checks the bit rule and programs in one call
    /// ([`Store::clear_byte_in_place`]) and the counters and clock move as the two calls
    /// would move them. Otherwise, or when the store cannot do it in place (nothing has
    /// changed then), the two calls are made one at a time.
    #[inline(always)]
    pub fn read_then_clear_byte(
        &mut self,
        ppn: u64,
        col: u32,
        clear: u8,
    ) -> Result<(u8, Result<()>)> {
        if !self.faults_armed && self.scripted_flips.is_empty() && self.flip_countdown == u64::MAX {
            if let Ok((block, idx)) = self.check_placement(ppn, col, 1, None) {
                if let Some(old) = self.store.clear_byte_in_place(ppn, col, clear) {
                    // The read: one byte of the data area.
                    self.counters.page_reads += 1;
                    self.tick(self.costs.read + self.costs.read_byte);
                    self.counters.bytes_read += 1;
                    // The program.
                    self.count_program(1);
                    self.advance_write_ptr(block, idx);
                    return Ok((old, Ok(())));
                }
            }
        }
        self.read_then_clear_byte_one_by_one(ppn, col, clear)
    }

    /// [`Nand::read_then_clear_byte`] a call at a time.
    #[inline(never)]
    fn read_then_clear_byte_one_by_one(
        &mut self,
        ppn: u64,
        col: u32,
        clear: u8,
    ) -> Result<(u8, Result<()>)> {
        let mut b = [0u8];
        self.read(ppn, col, &mut b)?;
        Ok((
            b[0],
            self.program(ppn, col, Data::Bytes(&[b[0] & !clear]), None),
        ))
    }

    /// [`Nand::program_bytes_in_place`] when the store cannot compare in place: the bit
    /// rule as [`Nand::check_program`] checks it, then the program.
    #[inline(never)]
    fn program_bytes_checked(
        &mut self,
        ppn: u64,
        col: u32,
        bytes: &[u8],
        block: u32,
        idx: u32,
    ) -> Result<()> {
        self.check_data_clears_only(ppn, col, bytes)?;
        self.count_program(bytes.len() as u64);
        self.store.program(ppn, col, Data::Bytes(bytes), None)?;
        self.advance_write_ptr(block, idx);
        Ok(())
    }

    /// Count one program of `bytes` bytes (data and spare) on the clock and the counters.
    #[inline(always)]
    fn count_program(&mut self, bytes: u64) {
        self.ops += 1;
        self.tick(self.costs.program + self.costs.program_byte * bytes);
        self.counters.programs += 1;
        self.counters.bytes_programmed += bytes;
    }

    /// Every rule a program must pass; returns the block and the page's index in it.
    #[inline(always)]
    fn check_program(
        &mut self,
        ppn: u64,
        col: u32,
        data: Data<'_>,
        spare: Option<(u32, &[u8])>,
    ) -> Result<(u32, u32)> {
        let placed = self.check_placement(ppn, col, data.len(), spare)?;
        // Bit rule: a program may only clear bits. A data area the store does not know
        // (payload-less pages that only saw opaque programs) cannot be checked.
        if let Data::Bytes(b) = data {
            self.check_data_clears_only(ppn, col, b)?;
        }
        if let Some((so, s)) = spare {
            self.check_clears_only(ppn, self.geo.page_size + so, s)?;
        }
        Ok(placed)
    }

    /// Every rule a program must pass but the bit rule (the device is powered, the ranges
    /// lie in the device, the block is good, the page has programs left and comes in
    /// order); returns the block and the page's index in it.
    #[inline(always)]
    fn check_placement(
        &mut self,
        ppn: u64,
        col: u32,
        data_len: usize,
        spare: Option<(u32, &[u8])>,
    ) -> Result<(u32, u32)> {
        self.alive()?;
        if col as usize + data_len > self.geo.page_size as usize {
            return Err(column_out_of_range(ppn, col, data_len, self.geo.page_size));
        }
        match spare {
            Some((so, s)) => self.check_range(ppn, self.geo.page_size + so, s.len())?,
            // The data range lies within the data area (checked just above), so within the
            // raw page: only the page number is left to check.
            None => self.check_ppn(ppn)?,
        }
        let block = match self.ppb_shift {
            Some(sh) => (ppn >> sh) as u32,
            None => self.geo.block_of(ppn),
        };
        if self.bad[block as usize] {
            return Err(NandError::BadBlock { block });
        }
        if self.geo.nop != 0 {
            let done = self.store.page_programs(ppn);
            if done as u32 >= self.geo.nop {
                return Err(self.nop_exceeded(ppn, done));
            }
        }
        let idx = (ppn - self.geo.first_page(block)) as u32;
        if self.geo.in_order {
            let wp = self.write_ptr[block as usize];
            if !(idx == wp || (wp > 0 && idx == wp - 1)) {
                return Err(NandError::OutOfOrder { ppn });
            }
        }
        Ok((block, idx))
    }

    #[cold]
    #[inline(never)]
    fn nop_exceeded(&self, ppn: u64, done: u8) -> NandError {
        // nop <= done <= 255 here (program counts are bytes; geometry checks nop).
        NandError::NopExceeded {
            ppn,
            done,
            nop: self.geo.nop as u8,
        }
    }

    /// A program that passed the rules while a fault plan is installed: a power cut due
    /// now tears it, an injected failure fails it (both return its outcome); `None` when
    /// it completes as usual.
    #[inline(never)]
    fn program_fault(
        &mut self,
        ppn: u64,
        col: u32,
        data: Data<'_>,
        spare: Option<(u32, &[u8])>,
        block: u32,
        idx: u32,
    ) -> Option<Result<()>> {
        if self.faults.power_cut_at == Some(self.plan_op()) {
            let reached = match self.pick_torn() {
                TornMode::Nothing => Ok(()),
                TornMode::Partial => self.program_torn(ppn, col, data, spare, block, idx),
                _ => self.store.program(ppn, col, data, spare).map(|()| {
                    self.advance_write_ptr(block, idx);
                }),
            };
            if reached.is_err() {
                return Some(reached);
            }
            self.dead = true;
            return Some(Err(NandError::PowerLoss));
        }
        if self.injected_failure(self.faults.program_fail_rate) {
            let r = self
                .program_torn(ppn, col, data, spare, block, idx)
                .and_then(|()| {
                    self.counters.program_failures += 1;
                    self.grow_bad(block)
                });
            return Some(r.and(Err(NandError::ProgramFailed { ppn, block })));
        }
        None
    }

    // ---- batched opaque copies ---------------------------------------------------------

    /// The opaque reads `reads` and the opaque data programs `programs` (each a [`Span`]:
    /// page, column, length) in one call, when they would all succeed: returns true after
    /// doing exactly what [`Nand::read_opaque`] of every read and [`Nand::program`] of
    /// `Data::Opaque` (no spare bytes) of every program would have done, in any
    /// interleaving — the same counters, clock, operation count, page program counts,
    /// write pointers and medium — and false, having changed nothing, when one of them would
    /// fail, a fault plan is installed, the programs are not in page order within one
    /// block, or the store does not batch ([`Store::program_opaque_spans`]). The caller
    /// then makes them one call at a time and meets the failure where it falls.
    ///
    /// Every rule of those calls is checked, once per read and program, before anything
    /// changes: the device is powered; each read lies within the raw page and the device;
    /// each program lies within the data area, in a good block, within the page's program
    /// budget (counting the batch's own earlier programs of the page) and, on in-order
    /// devices, at the write pointer or the page before it (advanced by the batch's own
    /// earlier programs). Reads cannot depend on the programs: an opaque read checks only
    /// power and range. This is the cleaner's copy of a run of blocks in simulation mode,
    /// where a call per page cost more than the rules it checks.
    pub fn opaque_batch(&mut self, reads: &[Span], programs: &[Span]) -> bool {
        if self.faults_armed || self.dead {
            return false;
        }
        let raw = self.geo.raw_page_size() as u64;
        let mut read_bytes = 0u64;
        for &(ppn, col, len) in reads {
            if ppn >= self.pages || col as u64 + len as u64 > raw {
                return false;
            }
            read_bytes += len as u64;
        }
        let Some(&(first_ppn, _, _)) = programs.first() else {
            return self.opaque_batch_apply(reads.len() as u64, read_bytes, programs, 0, 0, 0);
        };
        if first_ppn >= self.pages {
            return false;
        }
        let block = match self.ppb_shift {
            Some(sh) => (first_ppn >> sh) as u32,
            None => self.geo.block_of(first_ppn),
        };
        if self.bad[block as usize] {
            return false;
        }
        let base = self.geo.first_page(block);
        let end = base + self.geo.pages_per_block as u64;
        let mut wp = if self.geo.in_order {
            self.write_ptr[block as usize]
        } else {
            0
        };
        let mut prog_bytes = 0u64;
        let ps = self.geo.page_size as u64;
        if self.geo.nop == 0 && !self.geo.in_order {
            // Unlimited programs in any order (NOR-style): the ranges and the batch's page
            // order are all there is to check, without a branch per program.
            let (mut ok, mut prev) = (true, base);
            for &(ppn, col, len) in programs {
                ok &= (col as u64 + len as u64 <= ps) & (ppn >= prev) & (ppn < end);
                prev = ppn;
                prog_bytes += len as u64;
            }
            if !ok {
                return false;
            }
            let n = reads.len() as u64;
            return self.opaque_batch_apply(n, read_bytes, programs, prog_bytes, block, wp);
        }
        let (mut last, mut again) = (u64::MAX, 0u32);
        for &(ppn, col, len) in programs {
            if col as u64 + len as u64 > ps || ppn < base || ppn >= end {
                return false;
            }
            if last != u64::MAX && ppn < last {
                return false;
            }
            // Earlier programs of this page in the batch.
            again = if ppn == last { again + 1 } else { 0 };
            if self.geo.nop != 0 && self.store.page_programs(ppn) as u32 + again >= self.geo.nop {
                return false;
            }
            let idx = (ppn - base) as u32;
            if self.geo.in_order {
                if !(idx == wp || (wp > 0 && idx == wp - 1)) {
                    return false;
                }
                wp = wp.max(idx + 1);
            }
            last = ppn;
            prog_bytes += len as u64;
        }
        self.opaque_batch_apply(
            reads.len() as u64,
            read_bytes,
            programs,
            prog_bytes,
            block,
            wp,
        )
    }

    /// [`Nand::opaque_batch`] of whole data areas, as the cleaner copies blocks that are
    /// whole pages: opaque reads of the data area (column 0, `page_size` bytes) of each
    /// page of `reads`, then opaque programs of the data areas of the `count` consecutive
    /// pages from `first`. Returns true after doing exactly what
    /// [`Nand::opaque_batch`] of those spans does when it takes them (what
    /// [`Nand::read_opaque`] and [`Nand::program`] a call at a time would have done), and
    /// false, having changed nothing, when one of them would fail, a fault plan is
    /// installed or the store does not batch whole pages
    /// ([`Store::program_opaque_pages`]).
    ///
    /// The same rules, checked for a range: the device is powered; every read page lies
    /// in the device (a whole data area lies within the raw page); the programs' pages lie
    /// in one good block of the device; each of them has a program left (the pages differ,
    /// so the batch adds none before its own); on in-order devices the first is at the
    /// write pointer or the page before it (each later one is then at the pointer as the
    /// earlier ones left it).
    #[inline]
    pub fn opaque_page_batch(&mut self, reads: &[u64], first: u64, count: u32) -> bool {
        if self.faults_armed || self.dead {
            return false;
        }
        if count == 0 {
            // The largest read page, without a branch per read.
            let top = reads.iter().fold(0u64, |m, &p| m.max(p));
            if top >= self.pages {
                return false;
            }
            return self.opaque_page_batch_apply(reads.len() as u64, first, 0, 0, 0);
        }
        match self.page_batch_placement(reads, first, count) {
            Some((block, wp)) => {
                self.opaque_page_batch_apply(reads.len() as u64, first, count, block, wp)
            }
            None => false,
        }
    }

    /// [`Nand::opaque_page_batch`] whose programs carry spare bytes, as the FMS's
    /// spare-mode cleaner copies blocks in simulation mode: opaque reads of the data areas
    /// of `reads`, then one program of each of the `ends.len()` consecutive pages from
    /// `first`, page `first + k` with an opaque data area and the spare bytes
    /// `spares[ends[k - 1]..ends[k]]` (from 0 for the first) at spare column `spare_col`
    /// — what [`Nand::program`] of `Data::Opaque(page_size)` with `Some((spare_col,
    /// bytes))` does for each. Returns true after doing exactly what those calls would
    /// have done, false, having changed nothing, when one would fail, a fault plan is
    /// installed or the store does not batch them
    /// ([`Store::program_opaque_pages_spare`]).
    ///
    /// The rules of [`Nand::opaque_page_batch`], and for each page its spare bytes' range
    /// (within the spare area) and the bit rule on them (the store compares them with the
    /// spare area before it changes anything).
    #[inline]
    pub fn opaque_page_batch_spare(
        &mut self,
        reads: &[u64],
        first: u64,
        spare_col: u32,
        spares: &[u8],
        ends: &[u32],
    ) -> bool {
        if self.faults_armed || self.dead || ends.is_empty() {
            return false;
        }
        let count = ends.len() as u32;
        let ss = self.geo.spare_size as u64;
        let (mut at, mut ok) = (0u32, ends.last().map_or(0, |&e| e as usize) == spares.len());
        for &e in ends {
            ok &= (e >= at) & (spare_col as u64 + (e - at) as u64 <= ss);
            at = e;
        }
        if !ok {
            return false;
        }
        let Some((block, wp)) = self.page_batch_placement(reads, first, count) else {
            return false;
        };
        if !self
            .store
            .program_opaque_pages_spare(first, spare_col, spares, ends)
        {
            return false;
        }
        self.page_batch_count(reads.len() as u64, count, spares.len() as u64, block, wp);
        true
    }

    /// The rules of a batch of whole-page opaque reads `reads` and programs of the `count`
    /// (at least one) consecutive pages from `first` ([`Nand::opaque_page_batch`]): every
    /// read page in the device; the programs' pages in one good block of the device, each
    /// with a program left; on in-order devices the first at the write pointer or the page
    /// before it. `Some((block, write pointer after the batch))` when they pass.
    #[inline(always)]
    fn page_batch_placement(&self, reads: &[u64], first: u64, count: u32) -> Option<(u32, u32)> {
        // The largest read page, without a branch per read.
        let top = reads.iter().fold(0u64, |m, &p| m.max(p));
        if top >= self.pages || first >= self.pages {
            return None;
        }
        let block = match self.ppb_shift {
            Some(sh) => (first >> sh) as u32,
            None => self.geo.block_of(first),
        };
        if self.bad[block as usize] {
            return None;
        }
        let idx = (first - self.geo.first_page(block)) as u32;
        if idx as u64 + count as u64 > self.geo.pages_per_block as u64 {
            return None;
        }
        if self.geo.in_order {
            let wp = self.write_ptr[block as usize];
            if !(idx == wp || (wp > 0 && idx == wp - 1)) {
                return None;
            }
        }
        if self.geo.nop != 0 && !self.pages_have_programs_left(first, count) {
            return None;
        }
        Some((block, idx + count))
    }

    /// Every page of `first..first + count` has a program left ([`Nand::opaque_page_batch`]
    /// on devices with a program budget; out of line: the simulator's card has none).
    #[inline(never)]
    fn pages_have_programs_left(&self, first: u64, count: u32) -> bool {
        (first..first + count as u64).all(|p| (self.store.page_programs(p) as u32) < self.geo.nop)
    }

    /// [`Nand::opaque_page_batch`] once every rule has passed: the store's programs (false
    /// if it does not batch whole pages: nothing changed), then the counters and clock,
    /// summed as [`Nand::opaque_batch`] sums them, and the write pointer.
    #[inline]
    fn opaque_page_batch_apply(
        &mut self,
        nreads: u64,
        first: u64,
        count: u32,
        block: u32,
        wp: u32,
    ) -> bool {
        if count > 0 && !self.store.program_opaque_pages(first, count) {
            return false;
        }
        self.page_batch_count(nreads, count, 0, block, wp);
        true
    }

    /// The counters, clock and write pointer after a batch of `nreads` whole-page opaque
    /// reads and `count` whole-page programs carrying `spare_bytes` spare bytes in all:
    /// the sums of one call at a time, in integers.
    #[inline(always)]
    fn page_batch_count(&mut self, nreads: u64, count: u32, spare_bytes: u64, block: u32, wp: u32) {
        let ps = self.geo.page_size as u64;
        let np = count as u64;
        self.counters.page_reads += nreads;
        self.counters.bytes_read += nreads * ps;
        self.tick(nreads * self.costs.read + self.costs.read_byte * (nreads * ps));
        self.ops += np;
        self.counters.programs += np;
        let bytes = np * ps + spare_bytes;
        self.counters.bytes_programmed += bytes;
        self.tick(np * self.costs.program + self.costs.program_byte * bytes);
        if np > 0 && self.geo.in_order {
            self.write_ptr[block as usize] = wp;
        }
    }

    /// [`Nand::opaque_batch`] once every rule has passed: the store's programs (false if it
    /// does not batch: nothing changed), then the counters and clock, summed (the sums of
    /// one call at a time, in integers), and the write pointer.
    #[inline]
    fn opaque_batch_apply(
        &mut self,
        nreads: u64,
        read_bytes: u64,
        programs: &[Span],
        prog_bytes: u64,
        block: u32,
        wp: u32,
    ) -> bool {
        if !programs.is_empty() && !self.store.program_opaque_spans(programs) {
            return false;
        }
        let np = programs.len() as u64;
        self.counters.page_reads += nreads;
        self.counters.bytes_read += read_bytes;
        self.tick(nreads * self.costs.read + self.costs.read_byte * read_bytes);
        self.ops += np;
        self.counters.programs += np;
        self.counters.bytes_programmed += prog_bytes;
        self.tick(np * self.costs.program + self.costs.program_byte * prog_bytes);
        if np > 0 && self.geo.in_order {
            self.write_ptr[block as usize] = wp;
        }
        true
    }

    // ---- erase -------------------------------------------------------------------------

    /// Erase a block: every data and spare byte becomes 0xFF.
    pub fn erase(&mut self, block: u32) -> Result<()> {
        self.alive()?;
        self.check_block(block)?;
        let mut info = self.store.block_info(block);
        if info.bad != BadState::Good {
            return Err(NandError::BadBlock { block });
        }
        self.ops += 1;
        self.tick(self.costs.erase);
        self.counters.erases += 1;
        if self.faults.power_cut_at == Some(self.plan_op()) {
            match self.pick_torn() {
                TornMode::Nothing => {}
                TornMode::Partial => {
                    let first = self.geo.first_page(block);
                    for p in first..first + self.geo.pages_per_block as u64 {
                        if self.rng.gen_bool(0.5) {
                            self.store.erase_page(p)?;
                        }
                    }
                    info.erase_count += 1;
                    self.store.set_block_info(block, info)?;
                    self.cut_erase = Some(block);
                }
                _ => {
                    self.store.erase(block)?;
                    info.erase_count += 1;
                    self.store.set_block_info(block, info)?;
                    self.cut_erase = Some(block);
                }
            }
            self.reset_write_ptr(block);
            self.dead = true;
            return Err(NandError::PowerLoss);
        }
        if info.erase_count >= self.spec.endurance
            || self.injected_failure(self.faults.erase_fail_rate)
        {
            self.counters.erase_failures += 1;
            self.grow_bad(block)?;
            return Err(NandError::EraseFailed { block });
        }
        self.store.erase(block)?;
        info.erase_count += 1;
        self.store.set_block_info(block, info)?;
        if self.geo.in_order {
            self.write_ptr[block as usize] = 0;
        }
        Ok(())
    }

    // ---- internals ---------------------------------------------------------------------

    #[inline]
    fn alive(&self) -> Result<()> {
        if self.dead {
            Err(NandError::PowerLoss)
        } else {
            Ok(())
        }
    }

    #[inline]
    fn check_block(&self, block: u32) -> Result<()> {
        if block >= self.geo.blocks {
            return Err(NandError::BlockOutOfRange {
                block,
                blocks: self.geo.blocks,
            });
        }
        Ok(())
    }

    #[inline]
    fn check_range(&self, ppn: u64, col: u32, len: usize) -> Result<()> {
        self.check_ppn(ppn)?;
        let raw = self.geo.raw_page_size();
        if col as usize + len > raw as usize {
            return Err(column_out_of_range(ppn, col, len, raw));
        }
        Ok(())
    }

    #[inline]
    fn check_ppn(&self, ppn: u64) -> Result<()> {
        if ppn >= self.pages {
            return Err(page_out_of_range(ppn, self.pages));
        }
        Ok(())
    }

    /// The bit rule for a data-area program: the store compares in place where it can (one
    /// call settles most programs); a data area the store does not know (payload-less
    /// pages that only saw opaque programs) cannot be checked. The usual outcome (the
    /// store compared, nothing set) is decided inline, the rest out of line.
    #[inline(always)]
    fn check_data_clears_only(&mut self, ppn: u64, col: u32, new: &[u8]) -> Result<()> {
        match self.store.first_set_bit_in_place(ppn, col, new) {
            Some(None) => Ok(()),
            other => self.check_data_clears_only_slow(ppn, col, new, other),
        }
    }

    #[inline(never)]
    fn check_data_clears_only_slow(
        &mut self,
        ppn: u64,
        col: u32,
        new: &[u8],
        in_place: Option<Option<usize>>,
    ) -> Result<()> {
        match in_place {
            Some(bad) => sets_bits(ppn, col, bad),
            None if self.store.data_known(ppn) => self.check_clears_only(ppn, col, new),
            None => Ok(()),
        }
    }

    /// The bit rule: programming `new` at `col` of `ppn` may only clear bits.
    fn check_clears_only(&mut self, ppn: u64, col: u32, new: &[u8]) -> Result<()> {
        let bad = match self.store.first_set_bit_in_place(ppn, col, new) {
            Some(b) => b,
            None => {
                let mut old = std::mem::take(&mut self.scratch);
                old.clear();
                old.resize(new.len(), 0);
                let r = self.store.read(ppn, col, &mut old);
                let b = crate::store::first_set_bit(&old, new);
                self.scratch = old;
                r?;
                b
            }
        };
        sets_bits(ppn, col, bad)
    }

    /// A program that reached the cells only in part (cut or failed): each bit it would
    /// clear is cleared or not at random; the page counts one more program.
    fn program_torn(
        &mut self,
        ppn: u64,
        col: u32,
        data: Data<'_>,
        spare: Option<(u32, &[u8])>,
        block: u32,
        idx: u32,
    ) -> Result<()> {
        match data {
            Data::None => {}
            Data::Bytes(b) => self.write_torn(ppn, col, b)?,
            Data::Opaque(n) => self.store.program_opaque(ppn, col, n)?,
        }
        if let Some((so, s)) = spare {
            self.write_torn(ppn, self.geo.page_size + so, s)?;
        }
        self.store.bump_page_programs(ppn)?;
        self.advance_write_ptr(block, idx);
        Ok(())
    }

    /// Clear a random subset of the bits programming `new` would have cleared.
    fn write_torn(&mut self, ppn: u64, col: u32, new: &[u8]) -> Result<()> {
        let mut old = vec![0u8; new.len()];
        self.store.read(ppn, col, &mut old)?;
        for (o, n) in old.iter_mut().zip(new) {
            let clear = *o & !*n;
            let keep: u8 = self.rng.gen();
            *o &= !(clear & keep);
        }
        self.store.write(ppn, col, &old)
    }

    #[inline]
    fn advance_write_ptr(&mut self, block: u32, idx: u32) {
        if self.geo.in_order {
            let wp = &mut self.write_ptr[block as usize];
            *wp = (*wp).max(idx + 1);
        }
    }

    fn reset_write_ptr(&mut self, block: u32) {
        if self.geo.in_order {
            let first = self.geo.first_page(block);
            self.write_ptr[block as usize] = (0..self.geo.pages_per_block)
                .rev()
                .find(|&i| self.store.page_programs(first + i as u64) > 0)
                .map_or(0, |i| i + 1);
        }
    }

    /// Index of the current operation within the installed fault plan (1-based).
    #[inline]
    fn plan_op(&self) -> u64 {
        self.ops - self.fault_base
    }

    fn grow_bad(&mut self, block: u32) -> Result<()> {
        self.bad[block as usize] = true;
        let mut info = self.store.block_info(block);
        self.count_bad(info.bad, BadState::Grown);
        info.bad = BadState::Grown;
        self.store.set_block_info(block, info)
    }

    #[inline]
    fn injected_failure(&mut self, rate: f64) -> bool {
        if !self.faults.fail_ops.is_empty() && self.faults.fail_ops.contains(&self.plan_op()) {
            return true;
        }
        rate > 0.0 && self.rng.gen_bool(rate.min(1.0))
    }

    fn pick_torn(&mut self) -> TornMode {
        match self.faults.torn {
            TornMode::Random => match self.rng.gen_range(0..3) {
                0 => TornMode::Nothing,
                1 => TornMode::Partial,
                _ => TornMode::Complete,
            },
            m => m,
        }
    }

    fn next_flip_gap(&mut self) -> u64 {
        let p = self.faults.bitflip_rate;
        if p <= 0.0 {
            return u64::MAX;
        }
        if p >= 1.0 {
            return 0;
        }
        let u: f64 = self.rng.gen_range(f64::MIN_POSITIVE..1.0);
        // ln(1 − p); below about 1.1e-16, 1 − p rounds to 1 and its logarithm to 0, which
        // made every bit flip (option fuzzer, stop 19): there ln_1p(−p) keeps the rate.
        // (Above, the expression is unchanged, so every seeded flip stays where it was.)
        let ln_q = if 1.0 - p == 1.0 {
            (-p).ln_1p()
        } else {
            (1.0 - p).ln()
        };
        let g = (u.ln() / ln_q).floor();
        if g >= u64::MAX as f64 {
            u64::MAX
        } else {
            g as u64
        }
    }

    /// Bit flips due in a read: none unless flips were scripted or a flip rate is set
    /// (decided inline; the flipping itself is out of line).
    #[inline(always)]
    fn apply_flips(&mut self, ppn: u64, col: u32, buf: &mut [u8]) {
        if !self.scripted_flips.is_empty() || self.flip_countdown != u64::MAX {
            self.apply_flips_now(ppn, col, buf);
        }
    }

    #[inline(never)]
    fn apply_flips_now(&mut self, ppn: u64, col: u32, buf: &mut [u8]) {
        if !self.scripted_flips.is_empty() {
            let end = col as usize + buf.len();
            let mut i = 0;
            while i < self.scripted_flips.len() {
                let (p, c, bit) = self.scripted_flips[i];
                if p == ppn && (c as usize) >= col as usize && (c as usize) < end {
                    buf[(c - col) as usize] ^= 1 << bit;
                    self.counters.bitflips += 1;
                    self.scripted_flips.swap_remove(i);
                } else {
                    i += 1;
                }
            }
        }
        if self.flip_countdown == u64::MAX {
            return;
        }
        let bits = buf.len() as u64 * 8;
        // The chunk of the last flip and the flips in it so far.
        let (mut chunk, mut in_chunk) = (u64::MAX, 0u32);
        while self.flip_countdown < bits {
            let b = self.flip_countdown;
            let c = (col as u64 * 8 + b) / (crate::ecc::ECC_CHUNK as u64 * 8);
            if c == chunk {
                in_chunk += 1;
                if in_chunk == self.overflip_at {
                    self.counters.overflipped_chunks += 1;
                }
            } else {
                (chunk, in_chunk) = (c, 1);
                if self.overflip_at <= 1 {
                    self.counters.overflipped_chunks += 1;
                }
            }
            buf[(b / 8) as usize] ^= 1 << (b % 8);
            self.counters.bitflips += 1;
            let gap = self.next_flip_gap();
            self.flip_countdown = b.saturating_add(1).saturating_add(gap);
        }
        self.flip_countdown -= bits;
    }
}

// The errors of the checks, built out of line: the checks are inlined into every program.

#[cold]
#[inline(never)]
fn column_out_of_range(ppn: u64, col: u32, len: usize, raw: u32) -> NandError {
    NandError::ColumnOutOfRange(Box::new(ColumnRange { ppn, col, len, raw }))
}

#[cold]
#[inline(never)]
fn page_out_of_range(ppn: u64, pages: u64) -> NandError {
    NandError::PageOutOfRange(Box::new(PageRange { ppn, pages }))
}

/// The result of a bit-rule check: `bad` is the first byte of a program at `col` that would
/// set a bit.
#[inline]
fn sets_bits(ppn: u64, col: u32, bad: Option<usize>) -> Result<()> {
    match bad {
        Some(i) => Err(NandError::SetsBits {
            ppn,
            col: col + i as u32,
        }),
        None => Ok(()),
    }
}
