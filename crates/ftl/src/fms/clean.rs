//! The cleaner: when free segments run low, pick a victim segment by the configured
//! policy (greedy, cost-benefit, CAT, adaptive; DAC region selection), copy its valid
//! blocks out (M1–M6 or DAC regions, in runs bound for one segment), erase it and queue it
//! free; and wear levelling's swaps, which reuse the same evacuation.

use super::*;

impl Fms {
    /// Clean while free segments are below the low-water mark, up to the high-water mark.
    /// The test inline (every write makes it), the cleaning out of line.
    #[inline(always)]
    pub(super) fn ensure_space(&mut self) -> DevResult<()> {
        if self.free.len() >= self.water_marks().0 {
            return Ok(());
        }
        self.make_space()
    }

    #[inline(never)]
    pub(super) fn make_space(&mut self) -> DevResult<()> {
        if self.reserve_applies() {
            // The valid blocks may have grown since the marks were set.
            self.update_marks();
            if self.free.len() >= self.water_marks().0 {
                return Ok(());
            }
        }
        let high = self.water_marks().1;
        while self.free.len() < high {
            if !self.clean_one()? {
                if self.free.is_empty() {
                    return Err(self.no_space());
                }
                break;
            }
        }
        if let Some(t) = self.cfg.wear_threshold {
            self.level_wear(t)?;
        }
        Ok(())
    }

    /// Out of space: worn out when blocks went bad in use (program or erase failures at
    /// the end of their endurance), full otherwise.
    /// A cleaning is due and no segment is free (only failures and a power cut soon after
    /// them get here: a cleaning starts above the low-water mark and gives back what it
    /// takes). Make room for the victim's blocks before it is chosen:
    /// [`Fms::recycle_superseded_active`]; then, if no stream's segment has a free slot, a
    /// closed segment with erased slots (a mount closes the partly written segments the
    /// index log does not name) becomes stream 0's, so that the victim is another segment
    /// (the victim itself was the only place with room: torture --device nandsim-256m
    /// --ops 400 --failures 4 --seed 11 --wear-threshold 1, cut 1011). The streams whose
    /// segments are full borrow it (`active_slot_segment`).
    #[cold]
    #[inline(never)]
    fn without_a_free_segment(&mut self) -> DevResult<()> {
        self.recycle_superseded_active()?;
        for st in 0..self.active.len() {
            let a = self.active[st];
            if a != NONE && self.room(a)? {
                return Ok(());
            }
        }
        let cur = self.active[0];
        if cur != NONE {
            self.segs[cur as usize].state = SegState::Used;
            self.active[0] = NONE;
            self.sync_used(cur);
        }
        if self.reopen_closed(0)?.is_none() && cur != NONE {
            // Nothing to reopen: the full segment stays the stream's.
            self.segs[cur as usize].state = SegState::Active;
            self.active[0] = cur;
            self.sync_used(cur);
        }
        Ok(())
    }

    /// No free segment left: a stream's segment that is written (full or not) and whose
    /// blocks have all been superseded since (say, the segment a cleaning was copying into
    /// when a program failed and the power was cut, or whose copies power cuts tore) is
    /// erased and stays that stream's segment, empty. It is not a cleaning candidate while
    /// active, and without a free segment a victim's blocks fit only in the room left:
    /// every write could fail for want of space. It stays the stream's, rather
    /// than going to the free list, because the index log names it so: a mount finds it
    /// free and named, and makes it the stream's segment again.
    fn recycle_superseded_active(&mut self) -> DevResult<()> {
        // Reopened for writing as a free segment is (`take_free`; QA stop 28).
        self.check_seq_room()?;
        for st in 0..self.active.len() {
            let a = self.active[st];
            if a == NONE {
                continue;
            }
            // Full, or (since stop 29) partly written: a cut in a cleaning whose copies
            // were torn leaves the stream's segment with written slots and no valid block,
            // and erasing it gives the cleaner a whole segment of room instead of its last
            // slots (QA stop 29: one free slot left there, a victim with 2 valid blocks,
            // and every write failing).
            let s = &self.segs[a as usize];
            if s.next == 0 || s.valid > 0 || self.nand.is_bad(a) {
                continue;
            }
            if self.erase_and_header(a, 0)? {
                self.open_empty(a, st);
            } else {
                self.active[st] = NONE;
            }
        }
        Ok(())
    }

    /// The victim of a cleaning that finds no free segment. Its blocks can only go to the
    /// streams' segments' last slots (and closed segments' erased ones,
    /// [`Fms::reopen_closed`]): the first good candidate with the fewest valid blocks (one
    /// with nothing to copy first), whatever the policy or region, and only when they fit
    /// that room. Never a segment whose erase block went bad (still `Used` until its
    /// blocks are moved, `retiring`): cleaning it frees no segment and spends the room a
    /// good one needs to free one (until stop 31 `scan_fewest` could take it; the
    /// torture's rule for a medium left full, `no_cleaning_can_finish`, already left it
    /// out). A cleaning that cannot finish would use the room up and
    /// leave every segment full, so that no write could ever be made again (QA stop 29:
    /// power cuts a few operations apart, each in a cleaning, used the free segments up
    /// with torn copies; CAT then chose a victim with 4 valid blocks for 3 free slots
    /// while another held 1, and the medium answered every write with "device full" for
    /// good). `None` when no victim fits: the write fails for want of space, and the
    /// medium is left as it was.
    #[cold]
    #[inline(never)]
    pub(super) fn victim_without_a_free_segment(&self) -> Option<u32> {
        let v = (0..self.lay.segments)
            .filter(|&g| self.reclaimable(g))
            .min_by_key(|&g| self.segs[g as usize].valid)?;
        let slots = self.lay.slots;
        let room: u64 = (0..self.lay.segments)
            .filter(|&g| {
                let s = &self.segs[g as usize];
                g != v
                    && matches!(s.state, SegState::Active | SegState::Used)
                    && s.next < slots
                    && !self.nand.is_bad(g)
            })
            .map(|g| (slots - self.segs[g as usize].next) as u64)
            .sum();
        (self.segs[v as usize].valid as u64 <= room).then_some(v)
    }

    /// Whether cleaning segment `g` would free a segment: a cleaning candidate (closed,
    /// with garbage) whose erase block is good.
    pub(super) fn reclaimable(&self, g: u32) -> bool {
        self.segs[g as usize].candidate(self.lay.slots) && !self.nand.is_bad(g)
    }

    /// The first reclaimable segment with no valid block, other than `except`, if any (a
    /// scan: only when no segment is free).
    #[cold]
    #[inline(never)]
    pub(super) fn first_empty_candidate(&self, except: u32) -> Option<u32> {
        (0..self.lay.segments)
            .find(|&g| g != except && self.segs[g as usize].valid == 0 && self.reclaimable(g))
    }

    pub(super) fn no_space(&self) -> DevError {
        let blocks = self.nand.geometry().blocks;
        let bad = (0..blocks)
            .filter(|&b| self.nand.block_info(b).bad == nand::BadState::Grown)
            .count() as u32;
        if bad > 0 {
            DevError::WornOut { bad, blocks }
        } else {
            DevError::NoSpace
        }
    }

    /// The water marks, at least 2 and 3 (`FmsConfig::validate` refuses lower ones). With
    /// the borrowing rule of `active_slot_segment` one free segment at the start of a
    /// cleaning suffices, and a user write leaves at least `low - 1 >= 1` free. Both are
    /// raised by `FmsConfig::failure_reserve` on a medium that has failed (or from the
    /// start, `FmsConfig::failure_reserve_from`), while it has the room
    /// (`Fms::update_marks`).
    #[inline(always)]
    pub fn water_marks(&self) -> (usize, usize) {
        self.marks
    }

    /// Set the water marks for the medium now: the configured ones, each raised by
    /// `FmsConfig::failure_reserve` once any erase block of the medium has gone bad in use
    /// (grown bad; factory-bad blocks never failed a program), or from the format on with
    /// [`ReserveFrom::Start`], while the good segments hold that many beyond the format's
    /// reserve and the segments the valid blocks fill, else by one while they hold one
    /// ([`Fms::reserve_room`]). Measured against the valid blocks, not the exported
    /// capacity: a medium holding less than its capacity has the room now (the simulator's
    /// pre-fill leaves a share of the capacity unwritten; so do most file systems), and
    /// once its data grows past it the marks come down again, where raised marks could not
    /// be reached and the cleaner would only copy. O(1) but for segments held for lost
    /// blocks (few): called at format and mount, when a segment goes bad or a held one is
    /// released, after a trim, and by [`Fms::make_space`] before every cleaning where the
    /// reserve applies (writes only add data: the marks they make too high come down
    /// there).
    ///
    /// Why: the rest of a segment a program failed in is lost with it. A cleaning starts
    /// with `low_water - 1` free segments (one at the default marks) and the stream's
    /// segment; a program failing in each, back to back, takes both, and when every other
    /// segment is full (garbage spread thin across them) nothing is erased that a block
    /// could move to, so no cleaning can ever finish and every write fails "worn out"
    /// with most of the medium garbage (QA seed 346470: 26 blocks, 2 already bad, then
    /// two program failures in one cleaning). A medium that has started to fail is the
    /// one likely to fail again; one that never has keeps the paper's marks by default, so
    /// every simulation without failures is as before; [`ReserveFrom::Start`] protects a
    /// medium's first failures too, at the price of cleaning one segment earlier all
    /// along. UBI keeps a pool of erase blocks for bad-block handling for the same reason,
    /// from the start.
    #[inline]
    pub(super) fn update_marks(&mut self) {
        let (low, high) = (self.cfg.low_water as usize, self.cfg.high_water as usize);
        let raise = if self.reserve_applies() {
            self.reserve_room(self.good_segments()) as usize
        } else {
            0
        };
        self.marks = (low + raise, high + raise);
    }

    /// Whether the reserve is on and applies (the medium has failed in use, or it applies
    /// from the start): the marks may be raised.
    #[inline(always)]
    pub(super) fn reserve_applies(&self) -> bool {
        self.cfg.failure_reserve > 0
            && (self.nand.grown_bad_blocks() > 0
                || self.cfg.failure_reserve_from == ReserveFrom::Start)
    }

    /// How many segments the marks are raised by, given `good` good segments: the room is
    /// what they hold beside the format's reserve (the index, the cleaner's high-water
    /// mark, one segment per stream) and the segments the valid blocks fill; with the marks
    /// raised by at most that, as at the default marks with a full medium, the raised
    /// high-water mark can be reached by cleaning every segment with garbage. The whole
    /// `failure_reserve` where it fits; where it does not, one segment while there is room
    /// for one, as the default reserve keeps (stop 34; before, nothing, so a reserve of 6
    /// where 5 fitted protected less than a reserve of 1, which a QA pass saw). Not as
    /// many as fit: a raise equal to the room leaves no slack for garbage, and the cleaner
    /// must then compact the medium at every cleaning; one segment costs that only within
    /// a segment of data of the boundary, as the default does.
    fn reserve_room(&self, good: u64) -> u64 {
        let data = self.valid_slots().div_ceil(self.lay.slots as u64);
        let room = good.saturating_sub(data + self.cfg.reserve_segments());
        let reserve = self.cfg.failure_reserve as u64;
        if room >= reserve {
            reserve
        } else {
            room.min(1)
        }
    }

    /// Segments whose erase block is good and not held for lost blocks or rescued trims:
    /// from the device's count of bad blocks, less the held ones (few).
    pub(super) fn good_segments(&self) -> u64 {
        let held = self.held_segments();
        let held_good = held.iter().filter(|&&s| !self.nand.is_bad(s)).count() as u64;
        (self.lay.segments as u64)
            .saturating_sub(self.nand.bad_blocks() as u64)
            .saturating_sub(held_good)
    }

    /// Good segments beside those the logical blocks fill (segments held for lost blocks
    /// not counted): the room the reserve ([`FmsConfig::reserve_segments`]: the index, the
    /// cleaner's high-water mark, an active segment per stream) has on this medium.
    pub fn room_beside_data(&self) -> u64 {
        self.good_segments()
            .saturating_sub(self.logical.div_ceil(self.lay.slots as u64))
    }

    /// Where the failure reserve stands on this medium (`Fms::update_marks`): `Ready`
    /// only when a segment of it would still fit with one more segment gone bad.
    pub fn failure_reserve(&self) -> FailureReserve {
        if self.cfg.failure_reserve == 0 {
            return FailureReserve::Off;
        }
        let good = self.good_segments();
        if self.reserve_applies() {
            if self.reserve_room(good) > 0 {
                FailureReserve::Engaged
            } else {
                FailureReserve::NoRoom
            }
        } else if self.reserve_room(good.saturating_sub(1)) > 0 {
            FailureReserve::Ready
        } else {
            FailureReserve::NoRoom
        }
    }

    pub(super) fn age_unit(&self) -> f64 {
        // The time of this session (since the format or mount), as the write clock counts
        // its writes: a mount restores the clock from the medium, not the write clock.
        let now = self.nand.clock_ps().saturating_sub(self.epoch_ps) as f64;
        let device_writes = self.write_clock as f64 / self.logical as f64;
        if device_writes > 0.0 {
            now / device_writes
        } else {
            now.max(1.0)
        }
    }

    /// Pick the victim among closed segments with garbage.
    pub(super) fn select_victim(&mut self) -> Option<u32> {
        let ctx = SelectCtx {
            now_ps: self.nand.clock_ps(),
            age_unit_ps: self.age_unit(),
        };
        let greedy = match self.adaptive.as_mut() {
            Some(a) => a.choose_greedy(),
            None => false,
        };
        // DAC: a region first (when so configured), then the victim within it; a region
        // without candidates cannot be chosen, so the victim is found there.
        let region = self.region_to_clean();
        let slots = self.lay.slots;
        if greedy || matches!(self.selector, select::AnySelector::Greedy(_)) {
            // Greedy's score is the valid count: the first segment with the fewest valid
            // blocks, from the index on large devices, by an integer scan on small ones.
            match self.used.as_ref() {
                Some(ix) => {
                    let segs = &self.segs;
                    ix.first_fewest(|i| region.is_none_or(|r| segs[i as usize].stream == r))
                }
                None => match (self.keys.as_ref(), region) {
                    (Some(keys), None) => keys.first_fewest(),
                    _ => self.scan_fewest(region),
                },
            }
        } else if let Some(ix) = self.aged.as_mut() {
            let segs = &self.segs;
            ix.lowest(&self.selector, &ctx, slots, region, |i| {
                segs[i as usize].view(slots)
            })
        } else {
            self.scan_lowest(region, &ctx)
        }
    }

    /// Cost-benefit's or CAT's victim by a scan of the table: the rows rule most segments
    /// out, the rest are scored (the choice is `scan_lowest_scored`'s).
    pub(super) fn scan_lowest(&self, region: Option<u8>, ctx: &SelectCtx) -> Option<u32> {
        let Some(rows) = self.rows.as_ref() else {
            return self.scan_lowest_scored(region, ctx);
        };
        let slots = self.lay.slots;
        self.selector.lowest_rows(rows, ctx, |i| {
            let s = &self.segs[i as usize];
            (s.candidate(slots) && region.is_none_or(|r| s.stream == r)).then(|| s.view(slots))
        })
    }

    /// Cost-benefit's or CAT's victim by scoring every closed segment with garbage (what
    /// the index and the rows must give).
    pub(super) fn scan_lowest_scored(&self, region: Option<u8>, ctx: &SelectCtx) -> Option<u32> {
        let slots = self.lay.slots;
        let cands = self
            .segs
            .iter()
            .enumerate()
            .filter(|(_, s)| s.candidate(slots) && region.is_none_or(|r| s.stream == r))
            .map(|(i, s)| (i as u32, s.view(slots)));
        select::lowest(&self.selector, cands, ctx)
    }

    /// Greedy's victim by a scan of the whole table: the first closed segment with the
    /// fewest valid blocks (what the index must give).
    pub(super) fn scan_fewest(&self, region: Option<u8>) -> Option<u32> {
        let mut best = (self.lay.slots, NONE);
        for (i, s) in self.segs.iter().enumerate() {
            if s.state == SegState::Used && s.valid < best.0 && region.is_none_or(|r| s.stream == r)
            {
                best = (s.valid, i as u32);
            }
        }
        (best.1 != NONE).then_some(best.1)
    }

    /// The DAC region the cleaner picks by [`FmsConfig::region_select`] (`None`: any).
    fn region_to_clean(&self) -> Option<u8> {
        let rs = self.cfg.region_select;
        if self.cfg.regions < 2 || rs == RegionSelect::All {
            return None;
        }
        let regions = self.cfg.regions as usize;
        match self.sums.as_ref() {
            Some(sums) => rs.choose(sums.region_loads(regions)),
            None => rs.choose(&self.scan_region_loads()[..regions]),
        }
    }

    /// Each region's load summed over the table (what `sums` must give).
    pub(super) fn scan_region_loads(&self) -> [RegionLoad; 8] {
        let mut loads = [RegionLoad::default(); 8];
        for s in &self.segs {
            // Regions are the first `regions` streams (the read-only stream is none).
            let Some(l) = loads[..self.cfg.regions as usize].get_mut(s.stream as usize) else {
                continue;
            };
            match s.state {
                SegState::Active => l.segments += 1,
                SegState::Used => {
                    l.segments += 1;
                    l.garbage += (self.lay.slots - s.valid) as u64;
                }
                _ => {}
            }
        }
        loads
    }

    /// Clean one segment. Returns false when there is nothing to reclaim.
    pub(super) fn clean_one(&mut self) -> DevResult<bool> {
        let victim = if self.free.is_empty() {
            // At the start of a cleaning, or when the last one took the last free segment
            // (a segment that went bad, say): make room first.
            self.without_a_free_segment()?;
            self.victim_without_a_free_segment()
        } else {
            self.select_victim()
        };
        let Some(victim) = victim else {
            return Ok(false);
        };
        self.stats.cleanings += 1;
        self.cleaning = true;
        let r = self.evacuate(victim, None);
        self.cleaning = false;
        r?;
        if self.erase_and_header(victim, 0)? {
            self.free.push_back(victim);
        }
        Ok(true)
    }

    /// Copy every valid block of `victim` out, by the redistribution method (or all into
    /// `forced_stream`'s target segment `forced` for a wear swap).
    pub(super) fn evacuate(&mut self, victim: u32, forced: Option<u32>) -> DevResult<()> {
        self.victim = victim;
        let mut r = self.evacuate_from(victim, forced);
        if r.is_ok() && !self.trims.lists.is_empty() {
            r = self.move_trim_lists(victim, forced);
        }
        self.victim = NONE;
        r
    }

    fn evacuate_from(&mut self, victim: u32, forced: Option<u32>) -> DevResult<()> {
        let base = self.phys(victim, 0);
        let now = self.nand.clock_ps();
        let red = self.cfg.redistribution;
        let avg = self.averages(victim);
        let means = if self.dac.uses_means() {
            self.refresh_region_means()
        } else {
            [0; 8]
        };
        let mut moving = std::mem::take(&mut self.moving);
        moving.clear();
        for slot in 0..self.segs[victim as usize].next {
            let phys = base + slot;
            // `rev` names the block a slot holds exactly while the slot is its current copy
            // (set with `map`, cleared on invalidation).
            let lbn = self.rev[phys as usize];
            if lbn == NONE {
                continue;
            }
            debug_assert!(self.blocks[lbn as usize].map == phys);
            let i = lbn as usize;
            let mut m = Moving {
                phys,
                lbn,
                updates: self.blocks[i].updates as u32,
                stream: 0,
                region: self.blocks[i].region,
                last_write_ps: self.blocks[i].write_ps,
                hot_degree: if self.uses_hot_degree() {
                    self.hot.degree(lbn, self.write_clock)
                } else {
                    0.0
                },
            };
            // Where it goes (a stream, or the wear swap's target) and its region after the
            // move; each block's on its own, so before the order below.
            m.stream = if forced.is_some() {
                Moving::FORCED
            } else if self.blocks[i].readonly && self.cfg.readonly_separation {
                (self.cfg.streams() - 1) as u8
            } else if self.cfg.regions > 1 {
                let mean = means[m.region as usize];
                let r = self
                    .dac
                    .on_clean(m.region, self.blocks[i].region_ps, now, mean);
                if r != m.region {
                    m.region = r;
                    self.blocks[i].region_ps = now;
                }
                r
            } else if red.is_hot(&m, &avg) {
                0
            } else {
                1
            };
            moving.push(m);
        }
        if self.cfg.regions == 1 {
            red.order(&mut moving);
        }
        let r = self.copy_out(&moving, forced);
        self.moving = moving;
        r
    }

    /// The bits corrected in one chunk from which a read queues its block for scrubbing
    /// (`FmsConfig::scrub_threshold`; `u32::MAX`: never).
    pub(super) fn scrub_at(&self) -> u32 {
        match self.cfg.scrub_threshold {
            Some(0) => u32::MAX,
            Some(n) => n as u32,
            None => (3 * self.lay.ecc_t as u32).div_ceil(4).max(1),
        }
    }

    /// Scrubbing: move each block a read found near its code's limit (queued by
    /// `read_slot_ecc`) as the cleaner moves blocks, with fresh codes and its record's
    /// region, update count and time unchanged: to its region's stream with DAC, the
    /// read-only stream for read-only data, otherwise the cold stream when the
    /// redistribution separates hot from cold (a block that sat long enough to gather
    /// flips) and the one stream when it does not. A block written, trimmed or moved since
    /// its read is skipped. The new copy's record beats the old one by its sequence number,
    /// so a cut anywhere leaves one of the two (docs/fms.md, "Scrubbing"). Blocks not
    /// moved when an error stops the run stay queued.
    #[cold]
    #[inline(never)]
    pub(super) fn scrub_pending(&mut self) -> DevResult<()> {
        let pending = std::mem::take(&mut self.scrub);
        for (k, &(lbn, phys)) in pending.iter().enumerate() {
            let i = lbn as usize;
            if self.blocks[i].map != phys {
                continue;
            }
            let r = self.ensure_space().and_then(|()| {
                // The cleaning may have moved it (with fresh codes).
                if self.blocks[i].map != phys {
                    return Ok(false);
                }
                let b = &self.blocks[i];
                let stream = if b.readonly && self.cfg.readonly_separation {
                    (self.cfg.streams() - 1) as u8
                } else if self.cfg.regions > 1 {
                    b.region
                } else if self.cfg.redistribution.separates() {
                    1
                } else {
                    0
                };
                let m = Moving {
                    phys,
                    lbn,
                    updates: b.updates as u32,
                    stream,
                    region: b.region,
                    last_write_ps: b.write_ps,
                    hot_degree: 0.0,
                };
                self.copy_out(std::slice::from_ref(&m), None).map(|()| true)
            });
            match r {
                Ok(moved) => {
                    // Counted as scrubbed, not among the cleaner's copies.
                    self.stats.scrubbed += moved as u64;
                    self.stats.blocks_copied -= moved as u64;
                }
                Err(e) => {
                    self.scrub = pending[k..].to_vec();
                    return Err(e);
                }
            }
        }
        // The moves' own reads queued the old copies again: nothing left to do there.
        let mut left = std::mem::take(&mut self.scrub);
        left.retain(|&(lbn, phys)| self.blocks[lbn as usize].map == phys);
        self.scrub = left;
        Ok(())
    }

    /// Copy `moving[k]` to its stream (or `forced`), in order. In header mode consecutive blocks bound for
    /// the same segment are copied as a run: their data slot by slot, then all their
    /// entries in one program (a cut in between leaves copies without entries, which mount
    /// ignores: the originals are still live until the victim is erased).
    fn copy_out(&mut self, moving: &[Moving], forced: Option<u32>) -> DevResult<()> {
        let mut buf = std::mem::take(&mut self.buf);
        let storage = self.nand.store().keeps_payload();
        let bs = self.lay.block_size as usize;
        buf.resize(bs, 0);
        let mut k = 0;
        let mut r = Ok(());
        while k < moving.len() {
            let stream = moving[k].stream;
            let mut j = k + 1;
            while j < moving.len() && moving[j].stream == stream {
                j += 1;
            }
            // Read the block first, then open a segment if needed, as one block at a time
            // would: the clock when a segment opens is its creation time, which CAT and
            // cost-benefit read, so runs leave every result unchanged.
            let m = &moving[k];
            let rd = if storage {
                self.read_phys(m.phys, Some(&mut buf))
            } else {
                self.read_phys(m.phys, None)
            };
            let rd = match rd {
                // With ECC (spare mode only), a block no read can correct is copied with
                // its codes as they are, so it stays unreadable where it goes and the
                // cleaning goes on (`Fms::read_unreadable`).
                Err(DevError::Uncorrectable { .. }) if storage && self.lay.ecc() => {
                    self.read_unreadable(m.phys, &mut buf)
                }
                rd => rd,
            };
            if let Err(e) = rd {
                r = Err(e);
                break;
            }
            let done = if self.lay.mode == RecordMode::Header {
                match self.copy_run(stream as usize, forced, &moving[k..j], &mut buf) {
                    Ok(n) => n,
                    Err(e) => {
                        r = Err(e);
                        break;
                    }
                }
            } else if !storage && forced.is_none() {
                match self.copy_run_spare(stream as usize, &moving[k..j]) {
                    Ok(n) => n,
                    Err(e) => {
                        r = Err(e);
                        break;
                    }
                }
            } else {
                0
            };
            if done == 0 {
                // Spare mode, or the run hit garbage or a failing block: this block (in
                // `buf`) through the per-slot path, which retries in a fresh segment.
                let i = m.lbn as usize;
                let rec = self.copy_record(m);
                let data = storage.then_some(&buf[..bs]);
                let phys = match forced {
                    Some(target) => self.append_into(target, data, &rec),
                    None => self.append(stream as usize, data, &rec),
                };
                self.ecc_override = None;
                if let Err(e) = phys.and_then(|phys| self.commit_copy(m, i, phys)) {
                    r = Err(e);
                    break;
                }
                k += 1;
            } else {
                k += done;
            }
        }
        self.buf = buf;
        r
    }

    /// The record of a block copied by the cleaner (its sequence number is set at append),
    /// from what `evacuate` read of it.
    fn copy_record(&self, m: &Moving) -> Record {
        Record {
            lbn: m.lbn,
            region: m.region,
            readonly: self.blocks[m.lbn as usize].readonly,
            live: true,
            updates: m.updates as u16,
            seq: 0,
            time_ms: (m.last_write_ps / 1_000_000_000).min(u32::MAX as u64) as u32,
        }
    }

    /// The entry of a block the cleaner copies (a run's), with the next sequence number.
    #[inline(always)]
    fn next_copy_entry(&mut self, m: &Moving) -> [u8; ENTRY] {
        let mut rec = self.copy_record(m);
        rec.seq = self.seq;
        self.seq += 1;
        rec.encode_entry()
    }

    /// RAM tables after a block was copied to `phys`. Inlined (as are `read_phys` and
    /// `program_entries`): the cleaner calls these for every block it copies, and a
    /// `DevResult` returned from a call goes through memory.
    #[inline(always)]
    fn commit_copy(&mut self, m: &Moving, i: usize, phys: u32) -> DevResult<()> {
        self.blocks[i].region = m.region;
        self.invalidate(m.phys, false)?;
        self.blocks[i].map = phys;
        self.rev[phys as usize] = m.lbn;
        self.stats.blocks_copied += 1;
        Ok(())
    }

    /// Header mode: copy as many of `blocks` as fit into one segment (the stream's active
    /// segment, or the wear-swap target) as a run, which ends early after a block of all
    /// 0xFF; the first block is already in `buf`. Returns how many were copied; 0 when
    /// the segment's next slots are not programmable (the segment is then closed and the
    /// caller takes the per-slot path, which retries elsewhere).
    fn copy_run(
        &mut self,
        stream: usize,
        forced: Option<u32>,
        blocks: &[Moving],
        buf: &mut [u8],
    ) -> DevResult<usize> {
        let seg = match forced {
            Some(t) => t,
            None => self.active_slot_segment(stream)?,
        };
        let slots = self.lay.slots;
        let slot0 = self.segs[seg as usize].next;
        if slot0 >= slots {
            return Ok(0);
        }
        let n = ((slots - slot0) as usize).min(blocks.len());
        let mut end = n;
        let storage = self.nand.store().keeps_payload();
        let bs = self.lay.block_size as usize;
        let mut entries = std::mem::take(&mut self.entries);
        entries.clear();
        self.segs[seg as usize].next = slot0 + n as u32;
        let mut res: Result<(), NandError> = Ok(());
        let mut buf_reused = false;
        // Simulation mode: the run's reads and data programs in one device call when none
        // can fail; then only the entries are left.
        if !storage && self.copy_run_batched(seg, slot0, &blocks[..n]) {
            entries.resize(n * ENTRY, 0);
            for (m, e) in blocks[..n].iter().zip(entries.chunks_exact_mut(ENTRY)) {
                e.copy_from_slice(&self.next_copy_entry(m));
            }
        } else {
            for (q, m) in blocks[..n].iter().enumerate() {
                // The caller has read the first block into `buf`.
                if q > 0 {
                    if storage {
                        // `buf` still holds the previous block. One of all 0xFF ends the
                        // run: its slot reads erased even without its entry, and mount
                        // takes the first erased slot after a segment's last entry for the
                        // first free one, so a cut before the run's entries would hide the
                        // run's later, torn slots behind it (the first write there would
                        // fail). Simulation mode has no data to look at, and never cuts
                        // power.
                        if all_ones(&buf[..bs]) {
                            end = q;
                            self.segs[seg as usize].next = slot0 + q as u32;
                            break;
                        }
                        buf_reused = true;
                        self.read_phys(m.phys, Some(&mut buf[..bs]))?;
                    } else {
                        buf_reused = true;
                        self.read_phys(m.phys, None)?;
                    }
                }
                entries.extend_from_slice(&self.next_copy_entry(m));
                let data = storage.then_some(&buf[..bs]);
                res = self.program_data(seg, slot0 + q as u32, data);
                if res.is_err() {
                    break;
                }
            }
        }
        let n = end;
        if res.is_ok() {
            res = self.program_entries(seg, slot0, &entries);
        }
        self.entries = entries;
        match res {
            Ok(()) => {}
            Err(
                NandError::SetsBits { .. }
                | NandError::NopExceeded { .. }
                | NandError::OutOfOrder { .. }
                | NandError::ProgramFailed { .. },
            ) if forced.is_none() => {
                // As in `append`: close the segment; nothing of this run is committed.
                self.close_early(seg)?;
                if storage && buf_reused {
                    // `buf` may hold a later block of the run: the caller retries the
                    // first one from `buf`.
                    self.read_phys(blocks[0].phys, Some(&mut buf[..bs]))?;
                }
                return Ok(0);
            }
            Err(e) => return Err(e.into()),
        }
        self.segs[seg as usize].valid += n as u32;
        self.sync_used(seg);
        self.commit_run(seg, slot0, &blocks[..n]);
        Ok(n)
    }

    /// The tables after the run `blocks` was copied into `seg` from `slot0`: what
    /// `commit_copy` does for each block, with the victim's row updated once for the run
    /// (every block of a run comes from the one segment being evacuated, and no device
    /// operation, so no clock tick, comes between their invalidations).
    #[inline(always)]
    fn commit_run(&mut self, seg: u32, slot0: u32, blocks: &[Moving]) {
        let victim = self.split(blocks[0].phys).0;
        for (q, m) in blocks.iter().enumerate() {
            debug_assert_eq!(self.split(m.phys).0, victim);
            let i = m.lbn as usize;
            let phys = self.phys(seg, slot0 + q as u32);
            self.blocks[i].region = m.region;
            self.rev[m.phys as usize] = NONE;
            self.blocks[i].map = phys;
            self.rev[phys as usize] = m.lbn;
        }
        let n = blocks.len();
        let v = &mut self.segs[victim as usize];
        v.valid -= n as u32;
        v.last_inval_ps = self.nand.clock_ps();
        self.sync_used(victim);
        self.stats.blocks_copied += n as u64;
    }

    /// Spare mode, simulation mode: copy as many of `blocks` as fit into `stream`'s active
    /// segment with one device call ([`Nand::opaque_page_batch_spare`]): the reads of every
    /// block but the first (which the caller has read) and the programs of each slot's
    /// pages with their spare bytes (a page mark, the record on the slot's last page) —
    /// exactly the operations [`Fms::append`] makes a block at a time — then the segment
    /// summary when the run fills the segment, as `append`'s last slot would, and the
    /// tables as [`Fms::commit_copy`] leaves them, the victim's row once for the run (no
    /// device operation comes between the invalidations). Returns how many were copied;
    /// 0, with nothing done, when the device declines (an operation would fail, or a
    /// fault plan is installed): the per-slot path then copies the first block. Out of
    /// line: the header-mode cleaner never calls it.
    #[inline(never)]
    fn copy_run_spare(&mut self, stream: usize, blocks: &[Moving]) -> DevResult<usize> {
        let seg = self.active_slot_segment(stream)?;
        let slots = self.lay.slots;
        let slot0 = self.segs[seg as usize].next;
        if slot0 >= slots {
            return Ok(0);
        }
        let n = ((slots - slot0) as usize).min(blocks.len());
        let pps = self.lay.pages_per_slot as u64;
        let ps = self.lay.page_size as u64;
        let geo = self.nand.geometry();
        let slot_page = |seg: u32, slot: u32| geo.first_page(seg) + self.lay.slot_offset(slot) / ps;
        let mut reads = std::mem::take(&mut self.read_pages);
        reads.clear();
        for m in &blocks[1..n] {
            let (s, slot) = self.split(m.phys);
            let p = slot_page(s, slot);
            reads.extend(p..p + pps);
        }
        let first = slot_page(seg, slot0);
        let (mut spares, mut ends) = std::mem::take(&mut self.spare_run);
        spares.clear();
        ends.clear();
        for (q, m) in blocks[..n].iter().enumerate() {
            let mut rec = self.copy_record(m);
            rec.seq = self.seq + q as u64;
            for _ in 1..pps {
                spares.extend_from_slice(&layout::PAGE_MARK);
                ends.push(spares.len() as u32);
            }
            spares.extend_from_slice(&rec.encode_spare());
            ends.push(spares.len() as u32);
        }
        let done = self
            .nand
            .opaque_page_batch_spare(&reads, first, 1, &spares, &ends);
        self.read_pages = reads;
        if !done {
            self.spare_run = (spares, ends);
            return Ok(0);
        }
        self.seq += n as u64;
        let s = &mut self.segs[seg as usize];
        s.next = slot0 + n as u32;
        s.valid += n as u32;
        let mut r = Ok(());
        if self.lay.summary_page.is_some() {
            for (q, m) in blocks[..n].iter().enumerate() {
                let e = ends[(q + 1) * pps as usize - 1] as usize;
                let rec: &[u8; layout::SUMMARY_RECORD] = spares[e - layout::SUMMARY_RECORD..e]
                    .try_into()
                    .expect("a record");
                let time = self.copy_record(m).summary_time();
                r = self.note_record(seg, slot0 + q as u32, rec, time);
                if r.is_err() {
                    break;
                }
            }
        }
        self.spare_run = (spares, ends);
        r?;
        self.commit_run(seg, slot0, &blocks[..n]);
        Ok(n)
    }

    /// Simulation mode: the device operations of a run of `blocks` copied into `seg` from
    /// `slot0`, as one [`Nand::opaque_batch`] ([`Nand::opaque_page_batch`] when slots
    /// are whole pages) — the reads of every block but the first
    /// (which the caller has read) and the data programs of every slot — exactly the
    /// operations the per-block loop of [`Fms::copy_run`] makes. False, with nothing
    /// done, when the device declines (an operation would fail, or a fault plan is
    /// installed): the loop then makes them one at a time.
    fn copy_run_batched(&mut self, seg: u32, slot0: u32, blocks: &[Moving]) -> bool {
        if let Some(p0) = self.lay.page_slots() {
            // Slots that are whole pages: the read pages, and the run's pages from its
            // first ([`Nand::opaque_page_batch`]).
            let mut reads = std::mem::take(&mut self.read_pages);
            reads.clear();
            let geo = self.nand.geometry();
            for m in blocks.iter().skip(1) {
                let (s, slot) = self.split(m.phys);
                reads.push(geo.first_page(s) + p0 + slot as u64);
            }
            let first = geo.first_page(seg) + p0 + slot0 as u64;
            let done = self
                .nand
                .opaque_page_batch(&reads, first, blocks.len() as u32);
            self.read_pages = reads;
            return done;
        }
        let (mut reads, mut progs) = std::mem::take(&mut self.spans);
        reads.clear();
        progs.clear();
        for m in blocks.iter().skip(1) {
            let (s, slot) = self.split(m.phys);
            let first = self.nand.geometry().first_page(s);
            self.lay.slot_spans(first, slot, &mut reads);
        }
        let first = self.nand.geometry().first_page(seg);
        for q in 0..blocks.len() as u32 {
            self.lay.slot_spans(first, slot0 + q, &mut progs);
        }
        let done = self.nand.opaque_batch(&reads, &progs);
        self.spans = (reads, progs);
        done
    }

    /// Program into a specific segment (wear swap target), which must have room.
    pub(super) fn append_into(
        &mut self,
        seg: u32,
        data: Option<&[u8]>,
        rec: &Record,
    ) -> DevResult<u32> {
        let s = &mut self.segs[seg as usize];
        if s.next >= self.lay.slots {
            return Err(DevError::NoSpace);
        }
        let slot = s.next;
        s.next += 1;
        let mut rec = *rec;
        rec.seq = self.seq;
        self.seq += 1;
        self.program_slot(seg, slot, data, &rec)?;
        self.segs[seg as usize].valid += 1;
        self.sync_used(seg);
        Ok(self.phys(seg, slot))
    }

    pub(super) fn averages(&self, victim: u32) -> Averages {
        // Only M4 compares with the average utilisation: over the whole medium, or over the
        // segments holding data, where every valid slot (block or trim list) sits.
        let segs = match self.cfg.m4_average {
            M4Average::Device => self.segs.len() as u64,
            M4Average::Data => self.data_segs,
        };
        let valid = self.valid_slots();
        let slots = self.lay.slots as f64;
        let n = self.mapped.max(1) as f64;
        Averages {
            victim_utilization: self.segs[victim as usize].valid as f64 / slots,
            utilization: valid as f64 / (segs.max(1) as f64 * slots),
            updates: self.update_sum as f64 / n,
            hot_degree: self.hot.total(self.write_clock) / n,
        }
    }

    /// DAC with [`AgeRule::RegionAverage`]: each region's average stamp over the blocks now
    /// in it (0 for an empty region), taken at the start of a cleaning. A scan of the
    /// translation table, so a cleaning costs O(logical blocks) with that rule: fine for
    /// the experiments it serves (the Intel card, 5 735 blocks), slow on the large NAND
    /// presets. Out of line, off the cleaner's path with the paper's rules.
    #[inline(never)]
    pub(super) fn region_means(&self) -> [u64; 8] {
        let mut count = [0u64; 8];
        let mut sum = [0u128; 8];
        for b in self.blocks.iter().filter(|b| b.map != NONE) {
            count[b.region as usize] += 1;
            sum[b.region as usize] += b.region_ps as u128;
        }
        std::array::from_fn(|r| {
            if count[r] == 0 {
                0
            } else {
                (sum[r] / count[r] as u128) as u64
            }
        })
    }

    /// Take the region averages ([`Fms::region_means`]) for this cleaning and the updates
    /// until the next one.
    #[inline(never)]
    fn refresh_region_means(&mut self) -> [u64; 8] {
        let m = self.region_means();
        *self.dac_means = m;
        m
    }

    /// Valid slots and segments holding data (closed or active), summed over the table
    /// (what `(valid_slots(), data_segs)` must give).
    #[cfg(test)]
    pub(super) fn scan_utilization(&self) -> (u64, u64) {
        let data = self
            .segs
            .iter()
            .filter(|s| matches!(s.state, SegState::Used | SegState::Active));
        data.fold((0, 0), |(v, n), s| (v + s.valid as u64, n + 1))
    }

    /// The least-worn segment holding data, the first of equals (what `wear` must give). A
    /// closed segment with no valid block left has nothing to swap: the cleaner reclaims it
    /// at no cost (taking it for a swap would leave the target "used" in RAM with nothing
    /// on flash, free at the next mount).
    pub(super) fn scan_least_worn(&self) -> Option<u32> {
        self.segs
            .iter()
            .enumerate()
            .filter(|(_, s)| {
                s.state == SegState::Active || (s.state == SegState::Used && s.valid > 0)
            })
            .min_by_key(|(_, s)| s.erase_count)
            .map(|(i, _)| i as u32)
    }

    /// Wear levelling (1999 paper, Section 3.2 item 3): when the most-erased free segment
    /// has been erased `threshold` times more than the least-erased segment holding data
    /// (closed, or a stream's active segment), move the (cold) data of the least-erased
    /// segment into the most-erased one, so the worn segment holds cold data and the fresh
    /// one rejoins the free pool.
    pub(super) fn level_wear(&mut self, threshold: u32) -> DevResult<()> {
        let most = self
            .free
            .iter()
            .copied()
            .filter(|&s| self.segs[s as usize].state == SegState::Free)
            .max_by_key(|&s| self.segs[s as usize].erase_count);
        let least = match self.wear.as_ref() {
            Some(ix) => ix.least(),
            None => self.scan_least_worn(),
        };
        let (Some(most), Some(least)) = (most, least) else {
            return Ok(());
        };
        let (hi, lo) = (
            self.segs[most as usize].erase_count,
            self.segs[least as usize].erase_count,
        );
        // Any threshold is accepted, so compare without `lo + threshold`, which overflows.
        if hi.saturating_sub(lo) <= threshold {
            return Ok(());
        }
        self.check_seq_room()?;
        self.free.retain(|&s| s != most);
        if !self.erased_for_use(most)? {
            return Ok(());
        }
        let now = self.nand.clock_ps();
        let src = self.segs[least as usize];
        let s = &mut self.segs[most as usize];
        s.state = SegState::Used;
        s.stream = src.stream;
        s.created_ps = src.created_ps;
        s.last_inval_ps = now;
        s.next = 0;
        s.valid = 0;
        self.sync_used(most);
        match self.evacuate(least, Some(most)) {
            Ok(()) => {}
            Err(DevError::Flash(NandError::ProgramFailed { .. })) if self.nand.is_bad(most) => {
                // The target went bad: the swap stops. The blocks it took move out at the
                // end of the operation (`retiring`); the others stay in `least`, which
                // keeps its role.
                self.segs[most as usize].next = self.lay.slots;
                self.sync_used(most);
                self.note_retired(most);
                return Ok(());
            }
            Err(DevError::Flash(
                NandError::SetsBits { .. }
                | NandError::NopExceeded { .. }
                | NandError::OutOfOrder { .. },
            )) => {
                // The target holds a page it cannot program over that reads erased (a
                // torn operation kept all its bits): the swap stops there too, the target
                // closed where a mount would find it closed (`close_early`).
                self.close_early(most)?;
                return Ok(());
            }
            Err(e) => return Err(e),
        }
        if src.state == SegState::Active {
            // A stream's segment that fills slowly (cold data) would otherwise never be
            // erased: the most-erased segment takes over its data and its role.
            self.segs[most as usize].state = SegState::Active;
            self.sync_used(most);
            self.active[src.stream as usize] = most;
            self.log_active(src.stream, most)?;
        }
        if self.erase_and_header(least, 0)? {
            self.free.push_back(least);
        }
        self.stats.wear_swaps += 1;
        Ok(())
    }
}

/// True when every byte is 0xFF (data that reads as erased flash). Out of line: only
/// storage-mode cleaner runs call it.
#[inline(never)]
fn all_ones(b: &[u8]) -> bool {
    b.iter().all(|&x| x == 0xFF)
}
