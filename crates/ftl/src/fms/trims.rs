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
//! **How long a tombstone lives.** Until its block is written again: the new record beats
//! it, at mount as in RAM, and a list left without a live tombstone is garbage. It is not
//! dropped earlier, when no copy of the block older than it is left on flash: the FMS does
//! not know where a block's stale copies are, and a rule based on the segments' lowest
//! record numbers cannot be recomputed exactly at mount after a failed program, or when a
//! list stays on a segment that went bad (a randomised torture sweep found both: the
//! remounted tables differed from the running ones). So a block holds at most one
//! tombstone and one list entry (12 bytes), and live tombstones plus mapped blocks never
//! exceed the logical blocks: lists cannot eat the reserve. The cleaner, meeting a
//! victim's lists, writes their live tombstones together into as few new slots as they
//! fill, which also gathers lists that have few left.
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
    /// The trim-list slot that holds it, `NONE` until its list is programmed.
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
}

impl Trims {
    /// RAM of the tombstones and the lists (ordered-map nodes counted at their payload,
    /// doubled for the tree's overhead): about 50 bytes a trimmed block.
    pub(super) fn ram_bytes(&self) -> u64 {
        self.tomb.len() as u64 * 2 * 16
            + self
                .lists
                .values()
                .map(|l| 32 + l.entries.len() as u64 * 16)
                .sum::<u64>()
    }
}

impl Fms {
    /// Spare mode: the live tombstones (blocks trimmed and not written since) and the
    /// trim-list slots holding them.
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
        if self.lost.as_ref().is_some_and(|l| !l.rescued.is_empty()) {
            self.rescued_written();
        }
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

    /// Spare mode: move the trim lists of `victim` (after its blocks, before its erase):
    /// read each (as the cleaner reads a block it copies) and write their live tombstones
    /// together into new slots of the trim stream (or the wear swap's target `forced`).
    /// Each new slot is programmed before the old lists' state drops what it took, so a
    /// failed program (a wear swap's target going bad stops the swap) leaves the rest as
    /// it was.
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
        let mut live = Vec::new();
        let mut buf = std::mem::take(&mut self.buf);
        buf.resize(self.lay.block_size as usize, 0);
        for &phys in &lists {
            // Read as the cleaner reads a block it copies; the entries come from RAM, so
            // a list ECC cannot correct is still moved whole.
            match self.read_phys(phys, Some(&mut buf[..])) {
                Ok(()) | Err(DevError::Corrupt(_)) => {}
                Err(e) => {
                    self.buf = buf;
                    return Err(e);
                }
            }
            let l = &self.trims.lists[&phys];
            live.extend(
                l.entries
                    .iter()
                    .filter(|&&(lbn, seq)| {
                        self.trims.tomb.get(&lbn) == Some(&Tomb { seq, at: phys })
                    })
                    .map(|&(lbn, seq)| (lbn, seq, phys)),
            );
        }
        self.buf = buf;
        let stream = self.trim_stream();
        for chunk in live.chunks(self.trim_list_capacity()) {
            let entries = chunk.iter().map(|&(lbn, seq, _)| (lbn, seq)).collect();
            self.append_trim_list(entries, |f, data, rec| match forced {
                Some(target) => f.append_into(target, data, rec),
                None => f.append(stream, data, rec),
            })?;
            self.stats.blocks_copied += 1;
            for &(_, _, old) in chunk {
                let l = self.trims.lists.get_mut(&old).expect("listed above");
                l.live -= 1;
                if l.live == 0 {
                    self.trims.lists.remove(&old);
                    self.invalidate(old, false)?;
                }
            }
        }
        Ok(())
    }
}
