//! Durable trims in spare mode: trim lists.
//!
//! In header mode a trim clears the live bit of the block's copy on flash. A spare record
//! cannot be changed, so until stop 16 a trimmed block came back at the next mount from
//! the newest copy of it still on flash. Now each trim is a *tombstone*: the trim takes a
//! sequence number `seq` (the next one, as a write would), and before the trim returns
//! the tombstones are programmed into a *trim-list slot*: an ordinary slot of the coldest
//! stream whose data lists `(lbn, seq)` pairs and whose spare record carries
//! [`TRIM_LIST_LBN`] (`docs/format/fms.md`, "Trim lists"). At mount an entry unmaps its
//! block unless a record of the block with a number of at least `seq` exists (a later
//! write). [`Fms::trim_blocks`] lets the cleaner make room first, then unmaps the blocks
//! and programs their list with no cleaning in between: a cleaning there could erase a
//! block's last copy before its tombstone is on flash, and a cut would then bring back an
//! older copy.
//!
//! **How long a tombstone lives.** Until the block is written again (the new record beats
//! it), or until no copy of the block older than the trim can be on flash. The FMS does not
//! know where a block's stale copies are (spare records are never marked), so it keeps
//! the lowest record sequence number of every data segment ([`Trims::first_seq`]) and
//! takes a tombstone as needed while any segment that a mount would read holds a record
//! older than it. That is decided when the cleaner meets the trim list: the victim counts
//! too (a torn erase of it can keep any of its pages), the live tombstones that are still
//! needed are written into a new trim-list slot before the victim is erased, and the others
//! are dropped. The check is conservative: a cold segment that is never cleaned keeps every
//! later tombstone alive, at 12 bytes each; a block has at most one.
//!
//! A trim-list slot counts as a valid slot of its segment while it holds a live tombstone
//! (the cleaner weighs it as a block to copy); once the last one dies (its block was
//! written again) it is garbage. The reverse map does not name it (`rev` stays `NONE`, so
//! the cleaner's loop over a victim's blocks is unchanged): [`Trims::lists`] does.
//!
//! Simulation mode runs the same code. The lists are kept in RAM ([`Trims::lists`]), so
//! the cleaner never parses a slot's data: it reads the slot as it reads a block it copies,
//! and programs the new list as it programs a copy. A list is programmed with its real
//! bytes in both modes (a payload-less store keeps such pages, as it keeps headers), so a
//! mount of a simulated medium finds the same tombstones.

use std::collections::BTreeMap;

use super::layout::{TrimList, TRIM_LIST_LBN};
use super::*;

/// A block's tombstone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Tomb {
    /// The sequence number the trim took.
    pub seq: u64,
    /// The trim-list slot that holds it, `NONE` while it waits for a flush.
    pub at: u32,
}

/// A trim-list slot on flash, as RAM knows it.
#[derive(Clone, Debug, Default)]
pub(super) struct ListSlot {
    /// The entries written there (some may have died since).
    pub entries: Vec<(u32, u64)>,
    /// How many are still live: the block's tombstone is this entry, at this slot.
    pub live: u32,
}

/// The FMS's tombstones (spare mode; empty in header mode, whose trims clear live bits).
#[derive(Clone, Debug, Default)]
pub(super) struct Trims {
    /// Every live tombstone, by block.
    pub tomb: BTreeMap<u32, Tomb>,
    /// Blocks whose tombstone is not on flash yet: between a trim's unmapping and its
    /// list's program, or after a list's program failed (the next flush tries again). May
    /// repeat, or name a block written again since: `write_trims` takes only those still
    /// waiting.
    pub pending: Vec<u32>,
    /// Trim-list slots holding a live tombstone, by physical slot.
    pub lists: BTreeMap<u32, ListSlot>,
    /// Spare mode: the lowest record sequence number of each segment (`u64::MAX` when it
    /// holds none), kept from the first program after an erase; empty in header mode.
    pub first_seq: Vec<u64>,
}

impl Trims {
    pub(super) fn new(mode: RecordMode, segments: usize) -> Trims {
        Trims {
            first_seq: if mode == RecordMode::Spare {
                vec![u64::MAX; segments]
            } else {
                Vec::new()
            },
            ..Trims::default()
        }
    }

    /// RAM of the tombstones and the lists (ordered-map nodes counted at their payload,
    /// doubled for the tree's overhead), and of `first_seq`.
    pub(super) fn ram_bytes(&self) -> u64 {
        self.tomb.len() as u64 * 2 * 16
            + self
                .lists
                .values()
                .map(|l| 32 + l.entries.len() as u64 * 16)
                .sum::<u64>()
            + self.first_seq.len() as u64 * 8
    }

    /// What an FMS without tombstones holds ([`Fms::estimate_ram`]): `first_seq`. Each
    /// tombstone adds about 50 bytes while it lives (at most one per logical block).
    pub(super) fn ram_bytes_for(mode: RecordMode, segments: u64) -> u64 {
        if mode == RecordMode::Spare {
            segments * 8
        } else {
            0
        }
    }
}

impl Fms {
    /// Spare mode: a program into slot `seq`'s segment took number `seq`.
    #[inline(always)]
    pub(super) fn note_first_seq(&mut self, seg: u32, seq: u64) {
        if let Some(f) = self.trims.first_seq.get_mut(seg as usize) {
            *f = (*f).min(seq);
        }
    }

    /// Spare mode: segment `seg` was erased (it holds no record now).
    #[inline(always)]
    pub(super) fn forget_first_seq(&mut self, seg: u32) {
        if let Some(f) = self.trims.first_seq.get_mut(seg as usize) {
            *f = u64::MAX;
        }
    }

    /// Spare mode: the live tombstones (trimmed blocks an older copy of which may still be
    /// on flash) and the trim-list slots holding them.
    pub fn tombstones(&self) -> (u64, u64) {
        (self.trims.tomb.len() as u64, self.trims.lists.len() as u64)
    }

    /// Valid slots on flash: the mapped blocks and the trim lists holding a live
    /// tombstone.
    #[inline]
    pub(super) fn valid_slots(&self) -> u64 {
        self.mapped + self.trims.lists.len() as u64
    }

    /// Entries of one trim-list slot.
    pub(super) fn trim_list_capacity(&self) -> usize {
        TrimList::capacity(self.lay.block_size)
    }

    /// The stream trim lists go to: the coldest (DAC's bottom region; otherwise the last
    /// stream: M4–M6's cold one, or the read-only one, as they are never rewritten).
    fn trim_stream(&self) -> usize {
        if self.cfg.regions > 1 {
            0
        } else {
            self.cfg.streams() - 1
        }
    }

    /// Spare mode: the tombstone of `lbn`, just unmapped by a trim. It takes a sequence
    /// number, so a later write of the block beats it.
    pub(super) fn add_tomb(&mut self, lbn: u32) -> DevResult<()> {
        // A number not filling a slot: check that those left still cover the open
        // segments' slots (`check_seq_room`), this one included.
        let open = self.active.len() as u64 + 1;
        if open * self.lay.slots as u64 + 1 > self.lay.seq_end().saturating_sub(self.seq) {
            return Err(seq_exhausted(self.seq, self.lay.seq_end()));
        }
        let seq = self.seq;
        self.seq += 1;
        self.trims.tomb.insert(lbn, Tomb { seq, at: NONE });
        self.trims.pending.push(lbn);
        Ok(())
    }

    /// `lbn` is mapped again (written): its tombstone, if any, dies. A trim list left
    /// without a live entry is garbage.
    #[inline(never)]
    pub(super) fn forget_tomb(&mut self, lbn: u32) -> DevResult<()> {
        let Some(t) = self.trims.tomb.remove(&lbn) else {
            return Ok(());
        };
        if t.at == NONE {
            return Ok(());
        }
        let l = self
            .trims
            .lists
            .get_mut(&t.at)
            .expect("a written tombstone's list is kept");
        l.live -= 1;
        if l.live == 0 {
            self.trims.lists.remove(&t.at);
            self.invalidate(t.at, false)?;
        }
        Ok(())
    }

    /// Write the waiting tombstones into trim-list slots, without cleaning first: the
    /// caller made room ([`Fms::trim_blocks`]), before it unmapped their blocks. Also at a
    /// flush, for tombstones an operation that failed left waiting.
    pub(super) fn write_trims(&mut self) -> DevResult<()> {
        if self.trims.pending.is_empty() {
            return Ok(());
        }
        let mut pending = std::mem::take(&mut self.trims.pending);
        pending.sort_unstable();
        pending.dedup();
        let waiting: Vec<(u32, u64)> = pending
            .iter()
            .filter_map(|l| {
                self.trims
                    .tomb
                    .get(l)
                    .filter(|t| t.at == NONE)
                    .map(|t| (*l, t.seq))
            })
            .collect();
        // Kept until every list is programmed: after an error (no space left, say) the
        // next flush tries again; those written meanwhile are no longer waiting.
        self.trims.pending = pending;
        let cap = self.trim_list_capacity();
        for chunk in waiting.chunks(cap) {
            let stream = self.trim_stream();
            self.append_trim_list(chunk.to_vec(), |f, data, rec| f.append(stream, data, rec))?;
            self.stats.trim_lists += 1;
        }
        self.trims.pending.clear();
        Ok(())
    }

    /// Program a trim-list slot holding `entries` through `put` (`append` into a stream,
    /// or `append_into` a wear swap's target) and enter it in the tables.
    fn append_trim_list(
        &mut self,
        entries: Vec<(u32, u64)>,
        put: impl FnOnce(&mut Fms, Option<&[u8]>, &Record) -> DevResult<u32>,
    ) -> DevResult<u32> {
        let rec = Record {
            lbn: TRIM_LIST_LBN,
            region: 0,
            readonly: false,
            live: true,
            updates: 0,
            seq: 0,
            time_ms: 0,
        };
        // Real bytes in simulation mode too: a payload-less store keeps them (as it keeps
        // headers), so a mount there finds the same tombstones.
        let mut data = vec![0u8; self.lay.block_size as usize];
        TrimList::encode(&entries, &mut data);
        let phys = put(self, Some(&data), &rec)?;
        for &(lbn, _) in &entries {
            if let Some(t) = self.trims.tomb.get_mut(&lbn) {
                t.at = phys;
            }
        }
        let live = entries.len() as u32;
        self.trims.lists.insert(phys, ListSlot { entries, live });
        Ok(phys)
    }

    /// The lowest record sequence number on flash that a mount reads (closed, open or
    /// grown-bad segments, the victim of the cleaning under way included): a tombstone
    /// taken at `seq` may still be needed while this is below `seq`.
    fn oldest_record(&self) -> u64 {
        self.trims
            .first_seq
            .iter()
            .zip(&self.segs)
            .filter(|(_, s)| matches!(s.state, SegState::Used | SegState::Active | SegState::Bad))
            .map(|(&f, _)| f)
            .min()
            .unwrap_or(u64::MAX)
    }

    /// Spare mode: move the trim lists of `victim` (after its blocks, before its erase).
    #[inline(never)]
    pub(super) fn move_trim_lists(&mut self, victim: u32, forced: Option<u32>) -> DevResult<()> {
        let base = self.phys(victim, 0);
        let next = self.segs[victim as usize].next;
        let lists: Vec<u32> = self
            .trims
            .lists
            .range(base..base + next)
            .map(|(&p, _)| p)
            .collect();
        for phys in lists {
            self.move_trim_list(phys, forced)?;
        }
        Ok(())
    }

    /// The cleaner found the trim-list slot `phys` in its victim: read it (as it reads a
    /// block it copies), drop the tombstones no longer needed, and write the others into
    /// a new slot (the wear swap's target `forced`, or the trim stream). The old slot is
    /// then garbage, erased with the victim.
    fn move_trim_list(&mut self, phys: u32, forced: Option<u32>) -> DevResult<()> {
        let mut buf = std::mem::take(&mut self.buf);
        buf.resize(self.lay.block_size as usize, 0);
        let r = self.read_phys(phys, Some(&mut buf[..]));
        self.buf = buf;
        r?;
        let l = self
            .trims
            .lists
            .get(&phys)
            .expect("a trim-list slot in use is listed");
        let oldest = self.oldest_record();
        let (mut keep, mut drop) = (Vec::with_capacity(l.live as usize), Vec::new());
        for &(lbn, seq) in &l.entries {
            if self.trims.tomb.get(&lbn) != Some(&Tomb { seq, at: phys }) {
                continue;
            }
            if oldest < seq {
                keep.push((lbn, seq));
            } else {
                drop.push(lbn);
            }
        }
        // The new list first: if its program fails (a wear swap's target going bad stops
        // the swap), the old one stays as it was.
        if !keep.is_empty() {
            let stream = self.trim_stream();
            self.append_trim_list(keep, |f, data, rec| match forced {
                Some(target) => f.append_into(target, data, rec),
                None => f.append(stream, data, rec),
            })?;
            self.stats.blocks_copied += 1;
        }
        for lbn in drop {
            self.trims.tomb.remove(&lbn);
        }
        self.trims.lists.remove(&phys);
        self.invalidate(phys, false)?;
        Ok(())
    }
}
