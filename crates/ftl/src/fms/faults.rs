//! What the FMS does about failures and power cuts while it runs: a program or erase the
//! device rejects (the segment is closed, retired and its blocks moved), and what a torn
//! operation left after a segment's first free slot (checked before the first write there
//! after a mount). Mount's side is in `mount.rs`; the design in `docs/fms.md`.

use super::*;

impl Fms {
    /// A program into segment `seg` failed: when the device retired its erase block, the
    /// segment is closed (if a stream was writing it; `append` and `copy_run` close their
    /// own) and its valid blocks must move before a mount (which skips bad blocks) could
    /// lose them.
    ///
    /// Counts the segment retired (`FmsStats::retired_segments`) the first time.
    pub(super) fn note_retired(&mut self, seg: u32) {
        if !self.nand.is_bad(seg) {
            return;
        }
        self.update_marks();
        let s = &mut self.segs[seg as usize];
        if s.state == SegState::Active {
            s.next = self.lay.slots;
            s.state = SegState::Used;
            let stream = s.stream as usize;
            if self.active.get(stream) == Some(&seg) {
                self.active[stream] = NONE;
            }
            self.sync_used(seg);
        }
        if !self.retiring.contains(&seg) && self.segs[seg as usize].state != SegState::Bad {
            self.stats.retired_segments += 1;
            self.retiring.push(seg);
        }
    }

    /// `append`, `copy_run` or a wear swap met a program error in `seg`. A segment whose
    /// block went bad is closed, taken from the stream whose segment it is
    /// ([`Fms::drop_active`]) and queued (`note_retired` counts it retired). Out of line:
    /// an error path, kept off the copy loop.
    ///
    /// A segment whose block is still good met bytes it cannot program over: a page that
    /// a torn program or erase left reading erased while the device counts it programmed
    /// (all its bits kept at 1: [`Fms::check_tail`] cannot see it), or old bytes in a
    /// closed segment's tail. Its first free slot becomes the one a mount would find
    /// (`mount::first_free_on_flash`, reading the segment's records and the slots after
    /// them) and it is never written again ([`Tail::Garbage`]). A stream's segment stays
    /// the stream's, as a mount would rebuild it: the index log still names it, and names
    /// another only when the stream next writes (`active_slot_segment` finds no room, closes
    /// it and opens a fresh one). Closing it here, before that entry, left the running
    /// tables different from a mount's whenever the stream did not write again (randomised
    /// sweep, seed 1605: a cleaning borrowing the segment for another stream). With no
    /// record on flash (a mount would take it for free, or for the stream's, empty) it is
    /// erased instead: a stream's in place, as [`Fms::mark_garbage`] does, and any other
    /// (a wear swap's target) into the free list.
    #[cold]
    #[inline(never)]
    pub(super) fn close_early(&mut self, seg: u32) -> DevResult<()> {
        if self.nand.is_bad(seg) {
            let s = &mut self.segs[seg as usize];
            s.next = self.lay.slots;
            s.state = SegState::Used;
            self.drop_active(seg);
            self.sync_used(seg);
            self.note_retired(seg);
            return Ok(());
        }
        self.stats.closed_early += 1;
        let (next, _torn) = mount::first_free_on_flash(self, seg)?;
        let s = &mut self.segs[seg as usize];
        let streams = s.state == SegState::Active;
        if next == 0 {
            // Nothing valid was committed to it: every block has a record.
            debug_assert_eq!(s.valid, 0);
            if streams {
                s.next = 0;
                self.mark_garbage(seg)?;
            } else {
                s.next = self.lay.slots;
                s.state = SegState::Used;
                self.sync_used(seg);
                if self.erase_and_header(seg, 0)? {
                    self.free.push_back(seg);
                }
            }
            return Ok(());
        }
        s.next = next;
        s.tail = Tail::Garbage;
        if !streams {
            s.state = SegState::Used;
        }
        self.sync_used(seg);
        Ok(())
    }

    /// Move the valid blocks out of the segments whose erase blocks went bad
    /// (`note_retired`, a failed erase), as the cleaner would, mark them bad and, in
    /// header mode, append "segment S retired" to the index log. Called at the end of every
    /// write and trim and at flush, so the blocks leave a bad erase block before the
    /// operation returns.
    ///
    /// Until the entry is on flash, mount reads the bad segment's records like any other
    /// (they are authoritative, resolved by sequence number), so a power cut before or
    /// during the move loses nothing; it queues the segment again. After it, mount no
    /// longer reads them: the segment keeps stale copies with their live bits set (a bad
    /// block cannot be programmed), and one would come back if its block were trimmed and
    /// the newer copy's segment cleaned. In spare mode nothing is appended: a record there
    /// has no live bit to clear, every stale copy is resolved by sequence number alone, and
    /// a trimmed block's tombstone lives until the block is written again, beating the bad
    /// segment's stale copies at every mount (docs/fms.md, "Program and erase failures").
    fn evacuate_retired(&mut self) -> DevResult<()> {
        while let Some(seg) = self.retiring.pop() {
            if let Err(e) = self.retire(seg) {
                // Still to do (mount would find it again anyway).
                self.retiring.push(seg);
                return Err(e);
            }
        }
        Ok(())
    }

    /// What a failure left to do at the end of an operation: the queued segments
    /// ([`Fms::evacuate_retired`]), then an index segment that went bad when no free
    /// segment could take its place ([`Fms::log`]).
    pub(super) fn repair(&mut self) -> DevResult<()> {
        self.evacuate_retired()?;
        if self.index_stale {
            // Entries appended meanwhile by `log` went nowhere: the new log holds every
            // active and retired segment.
            self.ensure_space()?;
            self.wrap_index(None)?;
        }
        Ok(())
    }

    fn retire(&mut self, seg: u32) -> DevResult<()> {
        let si = seg as usize;
        if self.segs[si].state == SegState::Used && self.segs[si].valid > 0 {
            self.ensure_space()?;
            // The cleaner may have taken it meanwhile (its erase then failed).
            if self.segs[si].state == SegState::Used && self.segs[si].valid > 0 {
                self.cleaning = true;
                let r = self.evacuate(seg, None);
                self.cleaning = false;
                r?;
            }
        }
        self.set_bad(seg);
        // A wrap rewrites every retired entry, and must keep room for one entry per stream
        // besides: a segment beyond that is not recorded (mount reads its records again,
        // and queues it again).
        let room = self.retired.len() + self.active.len() < self.lay.index_capacity() as usize;
        if self.lay.mode == RecordMode::Header && !self.retired.contains(&seg) && room {
            self.log(IndexEntry::retired(seg))?;
            self.retired.push(seg);
        }
        Ok(())
    }

    /// Mark a segment bad in the tables: nothing valid, no free slot, never a candidate.
    fn set_bad(&mut self, seg: u32) {
        let slots = self.lay.slots;
        let s = &mut self.segs[seg as usize];
        debug_assert_eq!(s.valid, 0, "segment {seg} marked bad with valid blocks");
        s.state = SegState::Bad;
        s.next = slots;
        self.sync_used(seg);
        self.update_marks();
    }

    /// `seg`'s erase or header program failed (`newly`: it went bad just now, and is
    /// counted retired) or met a block already bad.
    pub(super) fn went_bad(&mut self, seg: u32, kind: u16, newly: bool) -> DevResult<()> {
        if newly {
            self.stats.retired_segments += 1;
        }
        if self.nand.store().keeps_payload() {
            // The erase count a mount will find: the header's, or none (0) when the header
            // is unreadable (a failed header program, or an erase that failed on a segment
            // whose header was already lost). Storage mode only: simulation mode never
            // mounts, and this read would change its device time.
            // A corrected header counts when it is of this medium, as at mount.
            let medium = Some((self.format_id, self.lay.features()));
            self.segs[seg as usize].erase_count =
                match mount::read_header(self, seg, self.lay.header_code_t())? {
                    mount::HeaderRead::Valid(h) => h.erase_count,
                    mount::HeaderRead::Corrected(h)
                        if mount::header_fits(&h, &self.lay, medium) =>
                    {
                        h.erase_count
                    }
                    _ => 0,
                };
        }
        self.segs[seg as usize].valid = 0;
        self.set_bad(seg);
        if kind == 0 && !self.retiring.contains(&seg) {
            self.retiring.push(seg);
        }
        Ok(())
    }

    /// Read the slots of `seg` from `next` on, which mount took for erased without
    /// reading them ([`Tail`]); true when they are. Otherwise the segment is marked
    /// [`Tail::Garbage`] ([`Fms::mark_garbage`]) and never written again. Out of line: at
    /// most once per segment after a mount.
    #[cold]
    #[inline(never)]
    pub(super) fn check_tail(&mut self, seg: u32) -> DevResult<bool> {
        match self.segs[seg as usize].tail {
            Tail::Garbage => return Ok(false),
            Tail::Torn => {
                if !self.pad_torn_slot(seg)? {
                    if self.nand.is_bad(seg) {
                        return Ok(false);
                    }
                    return self.mark_garbage(seg);
                }
                let s = &mut self.segs[seg as usize];
                s.next += 1;
                s.tail = Tail::Unchecked;
                if s.next >= self.lay.slots {
                    s.tail = Tail::Erased;
                    return Ok(false);
                }
            }
            _ => {}
        }
        // Read as a program there needs them: with no bit held at 0
        // (`mount::page_programmable`).
        for slot in self.segs[seg as usize].next..self.lay.slots {
            if !mount::slot_programmable(self, seg, slot)? {
                return self.mark_garbage(seg);
            }
        }
        // The summary's pages too (`segsum.rs`): a torn erase that kept the header may
        // have kept the old summary, which names this header's erase sequence; a mount
        // would take it for the summary of the slots written from here on.
        if let Some(p) = self.lay.summary_page {
            let first = self.nand.geometry().first_page(seg);
            for k in 0..self.lay.summary_pages() as u64 {
                if !mount::page_programmable(self, first + p as u64 + k)? {
                    return self.mark_garbage(seg);
                }
            }
        }
        self.segs[seg as usize].tail = Tail::Erased;
        Ok(true)
    }

    /// `seg`'s slots from `next` on cannot all be programmed ([`Tail::Garbage`]): never
    /// write there again. A stream's segment stays the stream's, full as far as writes go,
    /// until the stream next writes and `active_slot_segment` closes it and logs a fresh
    /// one: until that entry, a mount rebuilds it as the stream's, at the same `next`
    /// (`close_early`). A stream's segment with nothing written (`next` 0) is instead erased
    /// in place and stays the stream's: a mount would find it free, and named by the index
    /// log, the stream's. True when it can be written again.
    fn mark_garbage(&mut self, seg: u32) -> DevResult<bool> {
        let s = &mut self.segs[seg as usize];
        if s.state == SegState::Active && s.next == 0 {
            let stream = s.stream as usize;
            if self.erase_and_header(seg, 0)? {
                self.open_empty(seg, stream);
                return Ok(true);
            }
            self.drop_active(seg);
            return Ok(false);
        }
        s.tail = Tail::Garbage;
        Ok(false)
    }

    /// Spare mode on an in-order device: program the pages of the torn slot at `next`
    /// that read erased — the marks of its pages, then [`layout::PAD_RECORD`] in its last
    /// page's spare, data left erased — so that the next slot's first page follows the
    /// last programmed one. Mount then counts the slot used, with no block in it. False
    /// when a page cannot take the program (a torn page that reads erased but is counted
    /// programmed: the caller marks the segment [`Tail::Garbage`], and a mount finds the
    /// same first free slot) or the block went bad (queued, `note_retired`).
    #[cold]
    #[inline(never)]
    fn pad_torn_slot(&mut self, seg: u32) -> DevResult<bool> {
        let slot = self.segs[seg as usize].next;
        let first = self.nand.geometry().first_page(seg);
        let p0 = first + self.lay.slot_offset(slot) / self.lay.page_size as u64;
        let pps = self.lay.pages_per_slot as u64;
        for k in 0..pps {
            if !mount::page_erased(self, p0 + k)? {
                continue;
            }
            let sp: &[u8] = if k == pps - 1 {
                &layout::PAD_RECORD
            } else {
                &layout::PAGE_MARK
            };
            match self.nand.program(p0 + k, 0, Data::None, Some((1, sp))) {
                Ok(()) => {}
                Err(
                    NandError::SetsBits { .. }
                    | NandError::NopExceeded { .. }
                    | NandError::OutOfOrder { .. },
                ) => return Ok(false),
                Err(NandError::ProgramFailed { .. }) => {
                    self.note_retired(seg);
                    return Ok(false);
                }
                Err(e) => return Err(e.into()),
            }
        }
        Ok(true)
    }
}
