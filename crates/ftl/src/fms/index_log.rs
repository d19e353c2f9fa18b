//! The index segment: an appended log of each stream's active segment (1999 paper,
//! Fig. 9) and of retired segments, wrapped (erased and restarted) when full and moved to
//! another segment when its own goes bad. Byte layout in `docs/format/fms.md`.

use super::*;

/// Where the index log is written: its segment, the slot of its next entry, and the
/// sequence number its next entry carries.
#[derive(Clone)]
pub(super) struct IndexLog {
    pub(super) seg: u32,
    pub(super) next: u32,
    pub(super) seq: u32,
}

impl Fms {
    /// Append "stream → seg" to the index log.
    pub(super) fn log_active(&mut self, stream: u8, seg: u32) -> DevResult<()> {
        self.log(IndexEntry::active(stream, seg))
    }

    /// Append `e` (its `seq` is assigned here) to the index segment, wrapping (erase, then
    /// rewrite every other active stream and every retired segment) when it is full or
    /// when the place of the next entry is not programmable (leftovers of a torn erase or
    /// program of the index segment, or a program that failed). When the index segment's
    /// own erase block went bad, a free segment becomes the index segment.
    pub(super) fn log(&mut self, e: IndexEntry) -> DevResult<()> {
        if self.index_tail_unchecked {
            self.index_tail_unchecked = false;
            if self.index_tail_programmed()? {
                return self.wrap_index(Some(e));
            }
        }
        let Some(ix) = self.index.as_ref() else {
            return Ok(());
        };
        if ix.next < self.lay.index_capacity() {
            match self.append_index(e) {
                Err(DevError::Flash(
                    NandError::SetsBits { .. }
                    | NandError::NopExceeded { .. }
                    | NandError::OutOfOrder { .. }
                    | NandError::ProgramFailed { .. }
                    | NandError::BadBlock { .. },
                )) => {}
                r => return r,
            }
        }
        self.wrap_index(Some(e))
    }

    /// Whether a page after the one of the log's next entry holds anything: a torn erase
    /// of the index segment (a cut in a wrap) erases a random subset of its pages, and
    /// mount reads the log only up to its first erased entry. Entries appended into that
    /// gap would make the old cycle's entries beyond it, whose sequence numbers are
    /// higher, readable again at the next mount, where they would win. Checked once, at
    /// the first entry after a mount (`index_tail_unchecked`), so a mount reads no more
    /// than before (a simulation never appends after its mount). The first entry of each
    /// later page tells: erases are whole pages, and a cycle fills its pages in order.
    fn index_tail_programmed(&mut self) -> DevResult<bool> {
        let Some(ix) = self.index.as_ref() else {
            return Ok(false);
        };
        let first = self.nand.geometry().first_page(ix.seg);
        let from = (ix.next / self.lay.index_per_page + 2) as u64;
        let mut e = [0u8; layout::INDEX_ENTRY];
        for page in from..self.lay.pages_per_seg as u64 {
            let erased = mount::read_until(
                self,
                &mut e,
                |n, b| n.read(first + page, 0, b),
                |b| b.iter().all(|&x| x == 0xFF),
            )?;
            if !erased {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// Erase the index segment and rewrite the log: every retired segment, every active
    /// segment (but `e`'s stream's), then `e`. When the index segment went bad, a free
    /// segment becomes the index; when none is left (a cleaning under way has taken them),
    /// the FMS goes on without an index until the end of the operation
    /// ([`Fms::repair`]), as after a torn wrap: mount then closes the partly written
    /// segments and reads every grown-bad one, which loses nothing.
    pub(super) fn wrap_index(&mut self, e: Option<IndexEntry>) -> DevResult<()> {
        let need = self.active.iter().filter(|&&a| a != NONE).count()
            + self.retired.len()
            + e.is_some() as usize;
        if need > self.lay.index_capacity() as usize {
            return Err(DevError::corrupt(format!(
                "index segment full: {} retired segments and the active ones need {need} of its {} entries",
                self.retired.len(),
                self.lay.index_capacity()
            )));
        }
        if self.lay.mode == RecordMode::Header && !self.retired.is_empty() {
            return self.move_index(e);
        }
        if self.index_worn() {
            return self.move_index(e);
        }
        if self.index.is_none() {
            let Some(s) = self.free.pop_front() else {
                self.index_stale = true;
                return Ok(());
            };
            self.index = Some(IndexLog {
                seg: s,
                next: 0,
                seq: 1,
            });
        }
        for _attempt in 0..8 {
            let ix_seg = self.index.as_ref().unwrap().seg;
            if !self.erase_and_header(ix_seg, 1)? {
                // The index segment went bad: take a free one for it.
                let Some(s) = self.free.pop_front() else {
                    self.index = None;
                    self.index_stale = true;
                    return Ok(());
                };
                self.index.as_mut().unwrap().seg = s;
                continue;
            }
            self.segs[ix_seg as usize].state = SegState::Index;
            self.sync_used(ix_seg);
            self.index.as_mut().unwrap().next = 0;
            self.index_stale = false;
            match self.rewrite_index(e) {
                Err(DevError::Flash(NandError::ProgramFailed { .. })) => continue,
                r => return r,
            }
        }
        Err(self.no_space())
    }

    /// Whether the index log, about to wrap, should move to the free segment at the head
    /// of the free list instead ([`FmsConfig::index_wear_gap`]): its segment has been
    /// erased more than the gap beyond that one. Compared with the head, the segment the
    /// move would take, rather than with the least-erased segment: the move must make the
    /// index segment younger, and the head is what the next data segment would be.
    fn index_worn(&self) -> bool {
        let gap = match (self.cfg.index_wear_gap, self.cfg.wear_threshold) {
            (Some(g), Some(t)) => g.min(t),
            (Some(g), None) => g,
            (None, _) => return false,
        };
        let (Some(ix), Some(&head)) = (self.index.as_ref(), self.free.front()) else {
            return false;
        };
        if self.nand.is_bad(ix.seg) {
            return false;
        }
        let ec = |s: u32| self.segs[s as usize].erase_count as u64;
        ec(ix.seg) > ec(head) + gap as u64
    }

    /// Write the log anew in a free segment and only then give the old index segment up
    /// (erased, to the free list): with retired segments (header mode), and when the index
    /// segment has worn ahead of the free ones ([`Fms::index_worn`]).
    ///
    /// Header mode writes the new log's header last. A cut at any point leaves one whole
    /// log with every retired entry: the old one until the new header is programmed (a
    /// segment without a header is dirty), the new one after (mount takes the kind-1
    /// header with the highest erase sequence). Erasing the index segment in place, as
    /// the other wraps do, would leave none for a while, and a mount then would read the
    /// retired segments' stale copies again. Header mode has no page order to keep.
    ///
    /// Spare mode writes the header first, as an in-place wrap does (page 0 comes first on
    /// in-order devices): a cut after it leaves the new log with part of its entries,
    /// which costs what a cut in an in-place wrap costs (mount closes the active segments
    /// whose entries are missing; spare mode records no retired segments), and the old
    /// log, older by its erase sequence, is dirty.
    ///
    /// With no free segment, the old log stays as it is and entries are dropped
    /// (`index_stale`) until the end of the operation ([`Fms::repair`]).
    ///
    /// Once the new log is whole, the old log's segment is erased, given a data header
    /// and joins the free list ready for use (every move since stop 29; until then a move
    /// for retired segments left it dirty). Left dirty, a payload-less store would keep its
    /// pages until the free list came round to it, and on a device with many free segments
    /// several old logs would wait there at once (the RAM estimate counts one log); and in
    /// header mode a whole old log would stay on flash beside the new one, told apart only
    /// by the erase sequence in the new log's header, so a new header damaged past its
    /// code (two or more bit flips) would have let a mount take the old log for the index.
    /// The erase comes when it would have come anyway, at reuse; a cut in it leaves a torn
    /// old log, which mount takes for dirty (its erase sequence is the older).
    fn move_index(&mut self, e: Option<IndexEntry>) -> DevResult<()> {
        let old = self.index.take();
        let seq = old.as_ref().map_or(1, |o| o.seq);
        let header_first = self.lay.mode == RecordMode::Spare;
        for _attempt in 0..8 {
            let Some(s) = self.free.pop_front() else {
                break;
            };
            let ready = if header_first {
                self.erase_and_header(s, 1)?
            } else {
                self.erase_segment(s, 0)?
            };
            if !ready {
                continue;
            }
            self.index = Some(IndexLog {
                seg: s,
                next: 0,
                seq,
            });
            if header_first {
                self.segs[s as usize].state = SegState::Index;
                self.sync_used(s);
            }
            match self.rewrite_index(e) {
                Ok(()) => {}
                Err(DevError::Flash(NandError::ProgramFailed { .. })) => {
                    // Bad before its header: it holds no record, so needs no retired
                    // entry, and a mount finds it without an erase count (`went_bad`).
                    if self.nand.is_bad(s) {
                        self.went_bad(s, 1, true)?;
                    }
                    continue;
                }
                Err(err) => {
                    self.index = old;
                    return Err(err);
                }
            }
            if !header_first {
                if !self.program_header(s, 1)? {
                    continue;
                }
                self.segs[s as usize].state = SegState::Index;
                self.sync_used(s);
            }
            if let Some(o) = old {
                if !self.nand.is_bad(o.seg) {
                    // As the cleaner leaves a victim: erased, with a data header carrying
                    // its erase count, free (or bad, as a cleaned victim that fails).
                    if self.erase_and_header(o.seg, 0)? {
                        self.free.push_back(o.seg);
                    }
                } else if self.segs[o.seg as usize].state == SegState::Index {
                    // Its entry program failed (the move's cause): bad, counted once.
                    self.went_bad(o.seg, 1, true)?;
                }
            }
            self.index_stale = false;
            self.stats.index_moves += 1;
            return Ok(());
        }
        // Nowhere to go now: keep the old log (whole on flash), full so that every entry
        // comes back here.
        self.index = old;
        if let Some(ix) = self.index.as_mut() {
            ix.next = self.lay.index_capacity();
        }
        self.index_stale = true;
        Ok(())
    }

    /// After a wrap: every retired segment, every other stream's active segment, then `e`.
    /// Retired entries first: a power cut in the middle of the rewrite then loses active
    /// entries (mount closes the segments they name, losing nothing) before retired ones
    /// (mount would read those segments' stale copies again).
    fn rewrite_index(&mut self, e: Option<IndexEntry>) -> DevResult<()> {
        for seg in self.retired.clone() {
            self.append_index(IndexEntry::retired(seg))?;
        }
        for (st, &a) in self.active.clone().iter().enumerate() {
            let same = e.is_some_and(|e| e.kind == IndexEntry::ACTIVE && st == e.stream as usize);
            if a != NONE && !same {
                self.append_index(IndexEntry::active(st as u8, a))?;
            }
        }
        match e {
            Some(e) => self.append_index(e),
            None => Ok(()),
        }
    }

    fn append_index(&mut self, mut e: IndexEntry) -> DevResult<()> {
        let ix = self.index.as_mut().unwrap();
        e.seq = ix.seq;
        // Saturates (a corrupt entry may carry the largest number): mount breaks ties by
        // position in the log.
        ix.seq = ix.seq.saturating_add(1);
        let k = ix.next;
        ix.next += 1;
        let (ix_seg, per_page) = (ix.seg, self.lay.index_per_page);
        // Entries start after the segment header page region.
        let page = k / per_page + 1;
        if page >= self.lay.pages_per_seg {
            return Err(DevError::corrupt("index segment overflow"));
        }
        let col = (k % per_page) * layout::INDEX_ENTRY as u32;
        let ppn = self.nand.geometry().first_page(ix_seg) + page as u64;
        self.nand
            .program(ppn, col, Data::Bytes(&e.encode()), None)?;
        self.stats.index_appends += 1;
        Ok(())
    }
}
