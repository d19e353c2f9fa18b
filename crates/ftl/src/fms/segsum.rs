//! Segment summaries (spare mode; `layout::FEATURE_SUMMARY`, `docs/format/fms.md`,
//! "Segment summary"): when a segment's last slot is programmed, the FMS programs a copy
//! of every slot's spare record into the pages after the last slot, so that a mount reads
//! one page for a full segment instead of one spare area per slot.
//!
//! The summary is a cache of the records, never their replacement: a mount that finds no
//! valid summary for the segment's header reads the records, and a summary that is torn,
//! stale or unreadable is simply not used. It can be trusted because a spare-mode slot is
//! never programmed again once the segment is full: the records it copies are the ones
//! on flash until the segment is next erased, and an erase (torn or not) only ever
//! follows the moving of every valid block out of the segment, so a summary kept by a torn
//! erase, with the old header, names only stale copies, as the records kept with it would.

use super::mount;
use super::*;
use layout::{SegSummary, SUMMARY_RECORD, SUMMARY_SLOT};

/// The records programmed into a segment not yet full, from slot `from` on (the slots
/// before it were programmed before this FMS was mounted, or padded: their records are
/// read back when the summary is written, their times left unknown), each with its
/// block's time, as the summary holds them ([`SUMMARY_SLOT`] bytes a slot).
#[derive(Clone, Debug)]
pub(super) struct Pending {
    seg: u32,
    from: u32,
    slots: Vec<u8>,
}

/// What writing segment summaries needs: each segment's header erase sequence (which its
/// summary carries), as this FMS wrote or mount read it (0: unknown), and the records of
/// the segments being written.
#[derive(Clone, Debug)]
pub(super) struct Summaries {
    hdr_seq: Vec<u64>,
    pending: Vec<Pending>,
    /// Buffers of summaries written, for the next segments' (no allocation per segment
    /// in the simulator's runs), and the summary's bytes as programmed.
    spare_bufs: Vec<Vec<u8>>,
    scratch: Vec<u8>,
}

impl Summaries {
    /// For a medium laid out as `lay`: `None` without summaries.
    pub(super) fn for_layout(lay: &Layout) -> Option<Box<Summaries>> {
        lay.summary_page.map(|_| {
            Box::new(Summaries {
                hdr_seq: vec![0; lay.segments as usize],
                pending: Vec::new(),
                spare_bufs: Vec::new(),
                scratch: Vec::new(),
            })
        })
    }

    pub(super) fn set_header(&mut self, seg: u32, erase_seq: u64) {
        self.hdr_seq[seg as usize] = erase_seq;
    }

    pub(super) fn header(&self, seg: u32) -> u64 {
        self.hdr_seq[seg as usize]
    }

    /// `seg` was erased: what was kept of its records is void.
    pub(super) fn erased(&mut self, seg: u32) {
        if let Some(i) = self.pending.iter().position(|p| p.seg == seg) {
            let p = self.pending.swap_remove(i);
            self.spare_bufs.push(p.slots);
        }
    }

    pub(super) fn ram_bytes(&self) -> u64 {
        self.hdr_seq.len() as u64 * 8
    }
}

impl Fms {
    /// Slot `slot` of `seg` was programmed with spare record `rec` for a block last written
    /// by a user at `time_ms` ([`Record::summary_time`]): keep them, and after the
    /// segment's last slot program the summary. Out of line: spare mode with summaries.
    #[inline(never)]
    pub(super) fn note_record(
        &mut self,
        seg: u32,
        slot: u32,
        rec: &[u8; SUMMARY_RECORD],
        time_ms: u32,
    ) -> Result<(), NandError> {
        let slots = self.lay.slots;
        let s = self.segsum.as_mut().expect("summaries");
        let i = match s.pending.iter().position(|p| p.seg == seg) {
            Some(i) => i,
            None => {
                // Every slot from `from` on is written before the summary; those before it
                // are read back then.
                let mut buf = s.spare_bufs.pop().unwrap_or_default();
                buf.resize(slots as usize * SUMMARY_SLOT, 0xFF);
                s.pending.push(Pending {
                    seg,
                    from: slot,
                    slots: buf,
                });
                s.pending.len() - 1
            }
        };
        let at = slot as usize * SUMMARY_SLOT;
        let entry = &mut s.pending[i].slots[at..at + SUMMARY_SLOT];
        entry[..SUMMARY_RECORD].copy_from_slice(rec);
        entry[SUMMARY_RECORD..].copy_from_slice(&time_ms.to_le_bytes());
        if slot + 1 < slots {
            return Ok(());
        }
        let p = s.pending.swap_remove(i);
        self.write_summary(p)
    }

    /// Program the summary of the full segment `p.seg`. The slots before `p.from` are read
    /// back (a segment opened before this mount, or a padded slot); a record that does not
    /// decode after the re-reads is copied as read, where a mount reading the records would
    /// also take it for torn. A program that cannot be made (leftovers of a torn erase on
    /// the summary's page) leaves the segment without a summary, and one that fails
    /// retires the segment as any failed program does; neither fails the write that
    /// filled the segment, which is on flash.
    #[cold]
    #[inline(never)]
    fn write_summary(&mut self, mut p: Pending) -> Result<(), NandError> {
        let seg = p.seg;
        let col = self.lay.page_size + 1;
        for slot in 0..p.from {
            let page = mount::record_page(self, seg, slot);
            let mut rec = [0u8; SUMMARY_RECORD];
            let ok = |b: &[u8]| {
                b.iter().all(|&x| x == 0xFF)
                    || b == layout::PAD_RECORD
                    || Record::decode_spare(b).is_some()
            };
            if !mount::read_until(self, &mut rec, |n, b| n.read(page, col, b), ok)? {
                rec = self.agreed_record(page, col, rec)?;
            }
            let at = slot as usize * SUMMARY_SLOT;
            p.slots[at..at + SUMMARY_RECORD].copy_from_slice(&rec);
            p.slots[at + SUMMARY_RECORD..at + SUMMARY_SLOT].fill(0xFF);
        }
        let s = self.segsum.as_mut().expect("summaries");
        let mut bytes = std::mem::take(&mut s.scratch);
        bytes.resize(self.lay.summary_bytes(), 0);
        SegSummary {
            seg,
            erase_seq: s.header(seg),
            format_id: self.format_id,
        }
        .encode(&p.slots, &mut bytes);
        let r = self.program_summary(seg, &bytes);
        let s = self.segsum.as_mut().expect("summaries");
        s.scratch = bytes;
        s.spare_bufs.push(p.slots);
        r
    }

    /// A record that does not decode after the re-reads (`last`, the last read): copied
    /// into the summary only as two reads agree on its bytes, the rule mount follows
    /// before it corrects a record one bit from valid (`mount::settle`); otherwise the
    /// pad record, which no mount corrects. A transient flip in the one read copied would
    /// stay in the summary for good, and could bring a record torn two bits short one bit
    /// from valid (review, stop 32).
    fn agreed_record(
        &mut self,
        page: u64,
        col: u32,
        last: [u8; SUMMARY_RECORD],
    ) -> Result<[u8; SUMMARY_RECORD], NandError> {
        let mut seen = vec![last];
        for _ in 0..self.cfg.meta_read_retries().max(1) {
            let mut b = [0u8; SUMMARY_RECORD];
            self.stats.read_retries += 1;
            self.nand.read(page, col, &mut b)?;
            if seen.contains(&b) {
                return Ok(b);
            }
            seen.push(b);
        }
        Ok(layout::PAD_RECORD)
    }

    /// Program summary `bytes` into `seg`'s summary pages, one program a page.
    fn program_summary(&mut self, seg: u32, bytes: &[u8]) -> Result<(), NandError> {
        let first = self.nand.geometry().first_page(seg);
        let off = self.lay.summary_page.expect("summaries") as u64 * self.lay.page_size as u64;
        for (page, col, at, n) in self.lay.pages_of(off, bytes.len() as u64) {
            match self
                .nand
                .program(first + page, col, Data::Bytes(&bytes[at..at + n]), None)
            {
                Ok(()) => {}
                Err(
                    NandError::SetsBits { .. }
                    | NandError::NopExceeded { .. }
                    | NandError::OutOfOrder { .. },
                ) => return Ok(()),
                Err(NandError::ProgramFailed { .. }) => {
                    self.note_retired(seg);
                    return Ok(());
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// Mount: the slots of `seg` from its summary ([`SUMMARY_SLOT`] bytes each: record and
/// time), when the medium has summaries, the
/// configuration reads them, and the summary pages hold a valid summary of this segment
/// under the header it has (`expect`: the header's erase sequence and format number)
/// whose last slot's copy is not erased.
/// `None`: read the records. Unwritten summary pages (the segment is not full) read
/// erased at once; a summary that fails its checksum is read again (as every structure
/// is) before it is given up.
pub(super) fn read_summary(
    f: &mut Fms,
    seg: u32,
    expect: (u64, u64),
) -> DevResult<Option<Vec<u8>>> {
    let Some(page) = f.lay.summary_page.filter(|_| f.cfg.segment_summaries) else {
        return Ok(None);
    };
    let lay = f.lay.clone();
    let slots = lay.slots;
    let first = f.nand.geometry().first_page(seg);
    let off = page as u64 * lay.page_size as u64;
    let mut buf = vec![0u8; lay.summary_bytes()];
    let ok = |b: &[u8]| b[..4].iter().all(|&x| x == 0xFF) || SegSummary::decode(b, slots).is_some();
    let read = |n: &mut Nand, b: &mut [u8]| mount::read_span(n, &lay, first, off, b);
    if !mount::read_until(f, &mut buf, read, ok)? {
        return Ok(None);
    }
    let Some((s, entries)) = SegSummary::decode(&buf, slots) else {
        return Ok(None);
    };
    // The FMS writes a summary only after programming the last slot, with its record or
    // the pad record: one whose last copy is erased was not written by it.
    let (last, _) = SegSummary::slot(&entries[entries.len() - SUMMARY_SLOT..]);
    if s.seg != seg || (s.erase_seq, s.format_id) != expect || last.iter().all(|&b| b == 0xFF) {
        return Ok(None);
    }
    f.mount_report.summarised.push(seg);
    Ok(Some(entries.to_vec()))
}
