//! Differential test of the device model's fast program paths against its general path.
//!
//! `Nand::program` takes specialised paths when no fault plan is armed: a data-only
//! program of known bytes is checked for every rule but the bit rule by the device and then
//! compared and programmed by the store in one call (`Store::program_bytes_if_clears`), an
//! opaque data-only program is one short store call (`Store::program_opaque_data`). An
//! armed fault plan that never fires (a power cut at operation `u64::MAX`) sends every
//! program through the general path instead (`check_program`, `Store::program`), which
//! checks the bit rule before anything is written. The same random operations are applied
//! to five devices of every preset (shrunk to a few small blocks):
//!
//! * RAM store, fast paths; RAM store, general path; image file, general path;
//! * payload-less store, fast paths; payload-less store, general path;
//!
//! A batch of opaque reads and programs (`Nand::opaque_batch`, the cleaner's copy of a run
//! in simulation mode) is taken whole by the payload-less store when every call would
//! succeed; where it is declined (a call would fail, a fault plan is armed, the store does
//! not batch) the test makes the same calls one at a time, so every device must reach the
//! same outcome either way. Its whole-page form (`Nand::opaque_page_batch`: page reads,
//! then programs of consecutive whole pages, the cleaner's copy when slots are whole
//! pages) is driven the same way.
//!
//! A read of one byte followed by a program of it with some bits cleared
//! (`Nand::read_then_clear_byte`, the FMS's clear of a live flag) is one store call
//! (`Store::clear_byte_in_place`) on the fast devices when no fault plan is armed, no bit
//! flip is due and every rule of the program but the bit rule passes; the general devices
//! (and the fast ones otherwise) make the read and the program a call at a time.
//!
//! Every outcome must be identical: the same `Ok`/`Err` (variant and fields), the same
//! bytes read, the same counters, clock and operation count, the same program count of
//! every page and state of every block, and at every reopen the same bytes on the medium.
//! Reads are also checked against a plain model of the medium kept by the test (a byte
//! array, programmed where the RAM device said `Ok`).
//!
//! The payload-less store cannot check the bit rule over data it dropped (opaque
//! programs), where the RAM store compares with the zeros it stored; so a byte program
//! over a page whose data the payload-less store does not know is made to clear bits only
//! (its bytes are and-ed with the model's), and everywhere else programs that set bits are
//! generated freely.

use nand::image::create_device;
use nand::{
    presets, Counters, Data, DeviceSpec, FaultPlan, Nand, NandError, Span, Store, TornMode,
};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// A fault plan that is armed (programs take the general path) but never fires.
fn never_fires() -> FaultPlan {
    FaultPlan {
        power_cut_at: Some(u64::MAX),
        ..FaultPlan::default()
    }
}

struct Dev {
    name: &'static str,
    nand: Nand,
    /// Forced onto the general program path (a fault plan that never fires).
    general: bool,
}

impl Dev {
    fn base_plan(&self) -> FaultPlan {
        if self.general {
            never_fires()
        } else {
            FaultPlan::default()
        }
    }
}

#[derive(Clone, Debug)]
enum Op {
    Program {
        ppn: u64,
        col: u32,
        data: DataArg,
        spare: Option<(u32, Vec<u8>)>,
    },
    /// `Nand::program_bytes`: data, spare or both, by raw column.
    ProgramBytes {
        ppn: u64,
        col: u32,
        bytes: Vec<u8>,
    },
    Read {
        ppn: u64,
        col: u32,
        len: usize,
    },
    ReadPage {
        ppn: u64,
        data: Option<usize>,
        spare: Option<usize>,
    },
    ReadOpaque {
        ppn: u64,
        col: u32,
        len: u32,
    },
    /// `Nand::opaque_batch`, and where it declines, the same reads and then the same
    /// opaque programs one call at a time, up to the first failure.
    OpaqueBatch {
        reads: Vec<Span>,
        programs: Vec<Span>,
    },
    /// `Nand::opaque_page_batch`, and where it declines, the same whole-page reads and
    /// then the same whole-page opaque programs one call at a time, up to the first
    /// failure.
    OpaquePages {
        reads: Vec<u64>,
        first: u64,
        count: u32,
    },
    /// `Nand::opaque_page_batch_spare`, and where it declines, the same whole-page reads
    /// and then the same whole-page opaque programs, each with its spare bytes, one call
    /// at a time, up to the first failure.
    OpaquePagesSpare {
        reads: Vec<u64>,
        first: u64,
        spare_col: u32,
        spares: Vec<Vec<u8>>,
    },
    /// `Nand::read_then_clear_byte`.
    ReadClear {
        ppn: u64,
        col: u32,
        clear: u8,
    },
    Erase(u32),
    Flip {
        ppn: u64,
        col: u32,
        bit: u8,
    },
    Reopen,
    /// Random bit flips in reads from now until the next reopen (and the end of a power
    /// cut pending).
    FlipRate {
        rate: f64,
        seed: u64,
    },
    PowerCut {
        after: u64,
        torn: TornMode,
        seed: u64,
    },
}

#[derive(Clone, Debug)]
enum DataArg {
    None,
    Bytes(Vec<u8>),
    Opaque(u32),
}

/// The test's own model of the medium (data and spare of every page).
struct Model {
    raw: usize,
    ps: usize,
    ppb: usize,
    bytes: Vec<u8>,
    /// Scripted flips not consumed yet: (ppn, col, bit).
    flips: Vec<(u64, u32, u8)>,
    /// Random flips are on: reads are not compared with the model.
    noisy: bool,
}

impl Model {
    fn page(&self, ppn: u64) -> &[u8] {
        let o = ppn as usize * self.raw;
        &self.bytes[o..o + self.raw]
    }
    fn set(&mut self, ppn: u64, col: usize, b: &[u8]) {
        let o = ppn as usize * self.raw + col;
        self.bytes[o..o + b.len()].copy_from_slice(b);
    }
    fn fill(&mut self, ppn: u64, col: usize, len: usize, v: u8) {
        let o = ppn as usize * self.raw + col;
        self.bytes[o..o + len].fill(v);
    }
    /// What a read of `len` bytes at `col` returns, consuming the flips it meets.
    fn read(&mut self, ppn: u64, col: usize, len: usize) -> Vec<u8> {
        let mut out = self.page(ppn)[col..col + len].to_vec();
        let end = col + len;
        self.flips.retain(|&(p, c, bit)| {
            let hit = p == ppn && (c as usize) >= col && (c as usize) < end;
            if hit {
                out[c as usize - col] ^= 1 << bit;
            }
            !hit
        });
        out
    }
}

/// Random bytes, biased to only clear bits of `cur` (`cur` shorter than `len` where the
/// range leaves the page).
fn bytes(rng: &mut Xoshiro256PlusPlus, len: usize, cur: &[u8]) -> Vec<u8> {
    let mode = rng.gen_range(0..12);
    (0..len)
        .map(|i| {
            let c = cur.get(i).copied().unwrap_or(0xFF);
            match mode {
                0 => 0xFF,
                1 => 0,
                2 => c,
                3..=6 => rng.gen::<u8>() & c,
                // A single set bit somewhere, the rest clearing.
                7..=8 => {
                    if rng.gen_bool(0.05) {
                        c | (1 << rng.gen_range(0..8))
                    } else {
                        c
                    }
                }
                _ => rng.gen(),
            }
        })
        .collect()
}

/// A page: usually one a program may come to next (the next page of a block in order, or
/// the last one programmed), sometimes any page, sometimes beyond the device.
fn pick_page(rng: &mut Xoshiro256PlusPlus, n: &Nand, last: u64) -> u64 {
    let g = n.geometry();
    let pages = g.pages();
    match rng.gen_range(0..20) {
        0 => pages + rng.gen_range(0..3),
        1..=3 => last.min(pages - 1),
        4..=9 => rng.gen_range(0..pages),
        _ => {
            let b = rng.gen_range(0..g.blocks);
            let first = g.first_page(b);
            let wp = (0..g.pages_per_block)
                .rev()
                .find(|&i| n.page_programs(first + i as u64) > 0)
                .map_or(0, |i| i + 1);
            let i = if wp > 0 && rng.gen_bool(0.3) {
                wp - 1
            } else {
                wp.min(g.pages_per_block - 1)
            };
            first + i as u64
        }
    }
}

/// A column and length within `[0, area)`, now and then sticking out of it.
fn pick_range(rng: &mut Xoshiro256PlusPlus, area: u32) -> (u32, u32) {
    let col = match rng.gen_range(0..10) {
        0..=3 => 0,
        4..=7 => rng.gen_range(0..area.max(1)),
        8 => area.saturating_sub(rng.gen_range(1..=8)),
        _ => area + rng.gen_range(0..3),
    };
    let room = area.saturating_sub(col);
    let len = match rng.gen_range(0..12) {
        0 => 0,
        1 => 1.min(room),
        2 => 8.min(room),
        3 => 24.min(room),
        4 => room,
        5 => room + 1,
        6 => rng.gen_range(0..=room.min(70)),
        _ => rng.gen_range(0..=room),
    };
    (col, len)
}

/// A batch as the cleaner makes one: a few opaque reads anywhere, then opaque programs of
/// consecutive pages from `ppn` (usually whole pages, now and then a part, the same page
/// again, a step back, or past the block's end).
fn gen_batch(rng: &mut Xoshiro256PlusPlus, n: &Nand, ppn: u64) -> Op {
    let g = n.geometry();
    let (ps, ss) = (g.page_size, g.spare_size);
    let reads = (0..rng.gen_range(0..4))
        .map(|_| {
            let p = match rng.gen_range(0..10) {
                0 => g.pages() + rng.gen_range(0..2),
                _ => rng.gen_range(0..g.pages()),
            };
            let (col, len) = if rng.gen_bool(0.7) {
                (0, ps)
            } else {
                pick_range(rng, ps + ss)
            };
            (p, col, len)
        })
        .collect();
    let mut p = ppn;
    let programs = (0..rng.gen_range(0..5))
        .map(|k| {
            if k > 0 {
                match rng.gen_range(0..20) {
                    0 => {}
                    1 => p = p.saturating_sub(1),
                    _ => p += 1,
                }
            }
            let (col, len) = if rng.gen_bool(0.7) {
                (0, ps)
            } else {
                pick_range(rng, ps)
            };
            (p, col, len)
        })
        .collect();
    Op::OpaqueBatch { reads, programs }
}

/// A batch of whole pages as the cleaner makes one when its slots are whole pages: a few
/// page reads anywhere (now and then past the device), then programs of `count`
/// consecutive pages from `ppn` (now and then past the block's end).
fn gen_page_batch(rng: &mut Xoshiro256PlusPlus, n: &Nand, ppn: u64) -> Op {
    let g = n.geometry();
    let reads = (0..rng.gen_range(0..4))
        .map(|_| match rng.gen_range(0..10) {
            0 => g.pages() + rng.gen_range(0..2),
            _ => rng.gen_range(0..g.pages()),
        })
        .collect();
    let count = match rng.gen_range(0..10) {
        0 => 0,
        1 => g.pages_per_block + rng.gen_range(0..2),
        _ => rng.gen_range(1..=4),
    };
    Op::OpaquePages {
        reads,
        first: ppn,
        count,
    }
}

/// [`gen_page_batch`] whose programs carry spare bytes, as the spare-mode cleaner makes
/// them: at one spare column, each page's bytes (a mark or a record: lengths vary) usually
/// only clearing bits of what the model holds there, now and then setting one or reaching
/// past the spare area.
fn gen_page_batch_spare(rng: &mut Xoshiro256PlusPlus, n: &Nand, model: &Model, ppn: u64) -> Op {
    let Op::OpaquePages {
        reads,
        first,
        count,
    } = gen_page_batch(rng, n, ppn)
    else {
        unreachable!()
    };
    let g = n.geometry();
    let (ps, ss) = (g.page_size as usize, g.spare_size);
    let spare_col = match rng.gen_range(0..10) {
        0 => rng.gen_range(0..ss.max(1)),
        1 => ss.saturating_sub(1),
        _ => 1.min(ss),
    };
    let spares = (0..count as u64)
        .map(|k| {
            let room = ss.saturating_sub(spare_col) as usize;
            let len = match rng.gen_range(0..20) {
                0 => room + 1,
                1 => 0,
                2..=9 => 1.min(room),
                _ => 15.min(room),
            };
            let p = first + k;
            let cur = if p < g.pages() {
                let page = model.page(p);
                let lo = (ps + spare_col as usize).min(page.len());
                page[lo..(lo + len).min(page.len())].to_vec()
            } else {
                vec![]
            };
            bytes(rng, len, &cur)
        })
        .collect();
    Op::OpaquePagesSpare {
        reads,
        first,
        spare_col,
        spares,
    }
}

fn gen_op(rng: &mut Xoshiro256PlusPlus, n: &Nand, model: &Model, last: &mut u64) -> Op {
    let g = n.geometry().clone();
    let (ps, ss) = (g.page_size, g.spare_size);
    let ppn = pick_page(rng, n, *last);
    *last = ppn;
    let cur = |col: u32, len: u32| -> Vec<u8> {
        if ppn < g.pages() {
            let p = model.page(ppn);
            let lo = (col as usize).min(p.len());
            p[lo..(col as usize + len as usize).min(p.len())].to_vec()
        } else {
            vec![]
        }
    };
    match rng.gen_range(0..116) {
        114..=115 => gen_page_batch_spare(rng, n, model, ppn),
        112..=113 => gen_page_batch(rng, n, ppn),
        0..=49 => {
            let (col, len) = pick_range(rng, ps);
            let data = match rng.gen_range(0..10) {
                0..=1 => DataArg::None,
                2..=4 => DataArg::Opaque(len),
                _ => DataArg::Bytes(bytes(rng, len as usize, &cur(col, len))),
            };
            let spare = if ss > 0 && rng.gen_bool(0.3) {
                let (off, len) = pick_range(rng, ss);
                Some((off, bytes(rng, len as usize, &cur(ps + off, len))))
            } else if rng.gen_bool(0.03) {
                Some((0, vec![0xFF; rng.gen_range(0..2)]))
            } else {
                None
            };
            Op::Program {
                ppn,
                col,
                data,
                spare,
            }
        }
        50..=56 => {
            let (col, len) = pick_range(rng, ps + ss);
            Op::ProgramBytes {
                ppn,
                col,
                bytes: bytes(rng, len as usize, &cur(col, len)),
            }
        }
        57..=71 => {
            let (col, len) = pick_range(rng, ps + ss);
            Op::Read {
                ppn,
                col,
                len: len as usize,
            }
        }
        72..=76 => {
            let d = rng.gen_bool(0.6).then(|| pick_range(rng, ps).1 as usize);
            let s = rng.gen_bool(0.6).then(|| pick_range(rng, ss).1 as usize);
            Op::ReadPage {
                ppn,
                data: d,
                spare: s,
            }
        }
        77 => {
            let (col, len) = pick_range(rng, ps + ss);
            Op::ReadOpaque { ppn, col, len }
        }
        78..=79 => gen_batch(rng, n, ppn),
        // A byte's read and clear, now and then where a scripted flip is due.
        100..=103 if !model.flips.is_empty() => {
            let (ppn, col, _) = model.flips[rng.gen_range(0..model.flips.len())];
            Op::ReadClear {
                ppn,
                col,
                clear: 1 << rng.gen_range(0..8),
            }
        }
        // Usually within the data area.
        100..=111 => Op::ReadClear {
            ppn,
            col: match rng.gen_range(0..10) {
                0 => ps + rng.gen_range(0..ss.max(1) + 1),
                1 => ps.saturating_sub(1),
                _ => rng.gen_range(0..ps),
            },
            clear: match rng.gen_range(0..4) {
                0 => rng.gen(),
                1 => 0,
                _ => 1 << rng.gen_range(0..8),
            },
        },
        80..=87 => Op::Erase(match rng.gen_range(0..20) {
            0 => g.blocks + rng.gen_range(0..2),
            _ if ppn < g.pages() && rng.gen_bool(0.5) => g.block_of(ppn),
            _ => rng.gen_range(0..g.blocks),
        }),
        88..=94 if ppn < g.pages() => Op::Flip {
            ppn,
            col: rng.gen_range(0..ps + ss),
            bit: rng.gen_range(0..8),
        },
        95..=97 => Op::Reopen,
        98 if rng.gen_bool(0.3) => Op::FlipRate {
            rate: [0.001, 0.02, 0.3][rng.gen_range(0..3)],
            seed: rng.gen(),
        },
        98..=99 => Op::PowerCut {
            after: rng.gen_range(1..6),
            torn: match rng.gen_range(0..4) {
                0 => TornMode::Random,
                1 => TornMode::Nothing,
                2 => TornMode::Partial,
                _ => TornMode::Complete,
            },
            seed: rng.gen(),
        },
        _ => Op::Reopen,
    }
}

/// Outcome of an operation, compared across devices: the result (errors by variant and
/// fields, through `Debug`) and the bytes read.
#[derive(Debug, PartialEq)]
struct Outcome {
    result: String,
    read: Vec<Vec<u8>>,
}

fn outcome<T: std::fmt::Debug>(r: &nand::Result<T>, read: Vec<Vec<u8>>) -> Outcome {
    Outcome {
        result: format!("{r:?}"),
        read,
    }
}

fn apply(n: &mut Nand, op: &Op) -> (nand::Result<()>, Vec<Vec<u8>>) {
    match op {
        Op::Program {
            ppn,
            col,
            data,
            spare,
        } => {
            let spare = spare.as_ref().map(|(o, s)| (*o, s.as_slice()));
            let data = match data {
                DataArg::None => Data::None,
                DataArg::Bytes(b) => Data::Bytes(b),
                DataArg::Opaque(n) => Data::Opaque(*n),
            };
            (n.program(*ppn, *col, data, spare), vec![])
        }
        Op::ProgramBytes { ppn, col, bytes } => (n.program_bytes(*ppn, *col, bytes), vec![]),
        Op::Read { ppn, col, len } => {
            let mut buf = vec![0u8; *len];
            let r = n.read(*ppn, *col, &mut buf);
            (r, vec![buf])
        }
        Op::ReadPage { ppn, data, spare } => {
            let mut d = vec![0u8; data.unwrap_or(0)];
            let mut s = vec![0u8; spare.unwrap_or(0)];
            let r = n.read_page(
                *ppn,
                data.map(|_| d.as_mut_slice()),
                spare.map(|_| s.as_mut_slice()),
            );
            (r, vec![d, s])
        }
        Op::ReadOpaque { ppn, col, len } => (n.read_opaque(*ppn, *col, *len), vec![]),
        Op::OpaqueBatch { reads, programs } => {
            // The outcome: the first failure (if any) and how many programs were made.
            if n.opaque_batch(reads, programs) {
                return (Ok(()), vec![vec![programs.len() as u8]]);
            }
            let mut done = 0u8;
            let r = reads
                .iter()
                .try_for_each(|&(p, c, l)| n.read_opaque(p, c, l))
                .and_then(|()| {
                    programs.iter().try_for_each(|&(p, c, l)| {
                        n.program(p, c, Data::Opaque(l), None)?;
                        done += 1;
                        Ok(())
                    })
                });
            (r, vec![vec![done]])
        }
        Op::OpaquePages {
            reads,
            first,
            count,
        } => {
            if n.opaque_page_batch(reads, *first, *count) {
                return (Ok(()), vec![vec![*count as u8]]);
            }
            let ps = n.geometry().page_size;
            let mut done = 0u8;
            let r = reads
                .iter()
                .try_for_each(|&p| n.read_opaque(p, 0, ps))
                .and_then(|()| {
                    (0..*count as u64).try_for_each(|k| {
                        n.program(first + k, 0, Data::Opaque(ps), None)?;
                        done += 1;
                        Ok(())
                    })
                });
            (r, vec![vec![done]])
        }
        Op::OpaquePagesSpare {
            reads,
            first,
            spare_col,
            spares,
        } => {
            let flat: Vec<u8> = spares.concat();
            let ends: Vec<u32> = spares
                .iter()
                .scan(0u32, |at, b| {
                    *at += b.len() as u32;
                    Some(*at)
                })
                .collect();
            if n.opaque_page_batch_spare(reads, *first, *spare_col, &flat, &ends) {
                return (Ok(()), vec![vec![spares.len() as u8]]);
            }
            let ps = n.geometry().page_size;
            let mut done = 0u8;
            let r = reads
                .iter()
                .try_for_each(|&p| n.read_opaque(p, 0, ps))
                .and_then(|()| {
                    spares.iter().enumerate().try_for_each(|(k, b)| {
                        n.program(first + k as u64, 0, Data::Opaque(ps), Some((*spare_col, b)))?;
                        done += 1;
                        Ok(())
                    })
                });
            (r, vec![vec![done]])
        }
        Op::ReadClear { ppn, col, clear } => match n.read_then_clear_byte(*ppn, *col, *clear) {
            // A failed read: nothing read, nothing programmed.
            Err(e) => (Err(e), vec![]),
            Ok((b, r)) => (r, vec![vec![b]]),
        },
        Op::Erase(b) => (n.erase(*b), vec![]),
        Op::Flip { ppn, col, bit } => {
            n.inject_bitflip(*ppn, *col, *bit);
            (Ok(()), vec![])
        }
        Op::Reopen | Op::PowerCut { .. } | Op::FlipRate { .. } => unreachable!(),
    }
}

/// Update the model after an operation the device completed (`Ok`).
fn model_apply(
    m: &mut Model,
    op: &Op,
    r: &nand::Result<()>,
    read: &[Vec<u8>],
) -> Result<(), TestCaseError> {
    let ps = m.ps;
    let ok = r.is_ok();
    match op {
        Op::Program {
            ppn,
            col,
            data,
            spare,
        } if ok => {
            let col = *col as usize;
            match data {
                DataArg::None => {}
                DataArg::Bytes(b) => m.set(*ppn, col, b),
                DataArg::Opaque(n) => m.fill(*ppn, col, *n as usize, 0),
            }
            if let Some((o, s)) = spare {
                m.set(*ppn, ps + *o as usize, s);
            }
        }
        Op::ProgramBytes { ppn, col, bytes } if ok => m.set(*ppn, *col as usize, bytes),
        Op::Erase(b) if ok => {
            for p in 0..m.ppb {
                m.fill((*b as usize * m.ppb + p) as u64, 0, m.raw, 0xFF);
            }
        }
        Op::Read { ppn, col, len } if ok && !m.noisy => {
            let want = m.read(*ppn, *col as usize, *len);
            prop_assert_eq!(
                &read[0],
                &want,
                "read of page {} col {} vs the model",
                ppn,
                col
            );
        }
        Op::ReadPage { ppn, data, spare } if ok && !m.noisy => {
            if let Some(d) = data {
                let want = m.read(*ppn, 0, *d);
                prop_assert_eq!(&read[0], &want, "read_page data of {} vs the model", ppn);
            }
            if let Some(s) = spare {
                let want = m.read(*ppn, ps, *s);
                prop_assert_eq!(&read[1], &want, "read_page spare of {} vs the model", ppn);
            }
        }
        Op::ReadClear { ppn, col, clear } if !read.is_empty() => {
            // The read took place (and met the flips due): the byte read is the model's.
            let want = m.read(*ppn, *col as usize, 1);
            if !m.noisy {
                prop_assert_eq!(
                    &read[0],
                    &want,
                    "read_then_clear_byte of {} col {}",
                    ppn,
                    col
                );
            }
            if ok {
                m.set(*ppn, *col as usize, &[read[0][0] & !clear]);
            }
        }
        Op::Flip { ppn, col, bit } => m.flips.push((*ppn, *col, *bit & 7)),
        Op::OpaqueBatch { programs, .. } => {
            for &(p, c, l) in &programs[..read[0][0] as usize] {
                m.fill(p, c as usize, l as usize, 0);
            }
        }
        Op::OpaquePages { first, .. } => {
            for k in 0..read[0][0] as u64 {
                m.fill(first + k, 0, ps, 0);
            }
        }
        Op::OpaquePagesSpare {
            first,
            spare_col,
            spares,
            ..
        } => {
            for (k, b) in spares[..read[0][0] as usize].iter().enumerate() {
                m.fill(first + k as u64, 0, ps, 0);
                m.set(first + k as u64, ps + *spare_col as usize, b);
            }
        }
        _ => {}
    }
    Ok(())
}

/// Everything a store holds: every raw page, its program count, every block's state.
fn medium(store: &mut dyn Store) -> (Vec<u8>, Vec<u8>, Vec<String>) {
    let g = store.geometry().clone();
    let raw = g.raw_page_size() as usize;
    let mut bytes = vec![0u8; g.pages() as usize * raw];
    let mut progs = vec![];
    for p in 0..g.pages() {
        store
            .read(p, 0, &mut bytes[p as usize * raw..(p as usize + 1) * raw])
            .unwrap();
        progs.push(store.page_programs(p));
    }
    let blocks = (0..g.blocks)
        .map(|b| format!("{:?}", store.block_info(b)))
        .collect();
    (bytes, progs, blocks)
}

struct State {
    counters: Counters,
    clock: u64,
    ops: u64,
    dead: bool,
    programs: Vec<u32>,
    bad: Vec<bool>,
    wear: Vec<u32>,
}

fn state(n: &Nand) -> State {
    let g = n.geometry();
    State {
        counters: n.counters().clone(),
        clock: n.clock_ps(),
        ops: n.op_count(),
        dead: n.is_dead(),
        programs: (0..g.pages()).map(|p| n.page_programs(p)).collect(),
        bad: (0..g.blocks).map(|b| n.is_bad(b)).collect(),
        wear: (0..g.blocks).map(|b| n.erase_count(b)).collect(),
    }
}

fn same_state(a: &State, b: &State, who: &str, i: usize, op: &Op) -> Result<(), TestCaseError> {
    let ctx = format!("{who}, op {i} {op:?}");
    prop_assert_eq!(&a.counters, &b.counters, "counters: {}", ctx);
    prop_assert_eq!(a.clock, b.clock, "clock: {}", ctx);
    prop_assert_eq!(a.ops, b.ops, "op count: {}", ctx);
    prop_assert_eq!(a.dead, b.dead, "dead: {}", ctx);
    prop_assert_eq!(&a.programs, &b.programs, "page programs: {}", ctx);
    prop_assert_eq!(&a.bad, &b.bad, "bad blocks: {}", ctx);
    prop_assert_eq!(&a.wear, &b.wear, "erase counts: {}", ctx);
    Ok(())
}

/// Reopen every device on its store (power restored), after checking that every store
/// holds the same medium; the model is resynchronised from the first (a torn operation
/// left bits the model cannot predict, the same on every device).
fn reopen_all(devs: Vec<Dev>, m: &mut Model, i: usize) -> Result<Vec<Dev>, TestCaseError> {
    let mut out = Vec::new();
    let mut first = None;
    for d in devs {
        let spec = d.nand.spec().clone();
        let general = d.general;
        let name = d.name;
        let mut store = d.nand.into_store();
        let med = medium(&mut *store);
        match &first {
            None => {
                m.bytes.clone_from(&med.0);
                first = Some(med);
            }
            Some(f) => {
                prop_assert!(f.0 == med.0, "medium bytes differ: {} at op {}", name, i);
                prop_assert_eq!(&f.1, &med.1, "program counts: {} at op {}", name, i);
                prop_assert_eq!(&f.2, &med.2, "block table: {} at op {}", name, i);
            }
        }
        let mut nand = Nand::open(spec, store).unwrap();
        nand.set_faults(if general {
            never_fires()
        } else {
            FaultPlan::default()
        });
        out.push(Dev {
            name,
            nand,
            general,
        });
    }
    m.flips.clear();
    m.noisy = false;
    Ok(out)
}

/// The page a program names.
fn op_page(op: &Op) -> Option<u64> {
    match op {
        Op::Program { ppn, .. } | Op::ProgramBytes { ppn, .. } | Op::ReadClear { ppn, .. } => {
            Some(*ppn)
        }
        _ => None,
    }
}

/// The bytes a program puts at raw columns, in the order the device checks them (data,
/// then spare).
fn op_writes(op: &Op, ps: u32) -> Vec<(u32, &[u8])> {
    match op {
        Op::Program {
            col, data, spare, ..
        } => {
            let mut w = vec![];
            if let DataArg::Bytes(b) = data {
                w.push((*col, b.as_slice()));
            }
            if let Some((o, s)) = spare {
                w.push((ps + o, s.as_slice()));
            }
            w
        }
        Op::ProgramBytes { col, bytes, .. } => vec![(*col, bytes.as_slice())],
        _ => vec![],
    }
}

/// What a program's rules depend on, read before it: the program counts of its block's
/// pages, the page's index in the block, and whether the block is bad.
struct Before {
    programs: Vec<u32>,
    idx: usize,
    bad: bool,
}

impl Before {
    fn of(n: &Nand, ppn: u64) -> Before {
        let g = n.geometry();
        let b = g.block_of(ppn);
        let first = g.first_page(b);
        Before {
            programs: (0..g.pages_per_block as u64)
                .map(|i| n.page_programs(first + i))
                .collect(),
            idx: (ppn - first) as usize,
            bad: n.is_bad(b),
        }
    }
    /// In-order devices: the page may be programmed (the next page of its block, or the
    /// last one programmed again).
    fn in_order_ok(&self) -> bool {
        let wp = self
            .programs
            .iter()
            .rposition(|&c| c > 0)
            .map_or(0, |i| i + 1);
        self.idx == wp || (wp > 0 && self.idx == wp - 1)
    }
}

/// The rules checked against the test's model, independently of the device's code (the
/// devices share the bit comparison and the placement checks, so comparing them with each
/// other cannot find a fault there): a program that succeeded lay within the device and
/// the page, cleared bits only, hit a good block, stayed within the page's NOP and came in
/// order; one refused for setting bits names the first byte that does; a bad-block, NOP or
/// order refusal is one the rules call for.
fn rules_oracle(
    m: &Model,
    g: &nand::Geometry,
    op: &Op,
    r: &nand::Result<()>,
    before: Option<&Before>,
) -> Result<(), TestCaseError> {
    let Some(ppn) = op_page(op) else {
        return Ok(());
    };
    match r {
        Ok(()) => {
            let Some(before) = before else {
                return Err(TestCaseError::fail(format!(
                    "program {op:?} of a page beyond the device succeeded"
                )));
            };
            prop_assert!(!before.bad, "program {:?} of a bad block succeeded", op);
            prop_assert!(
                !g.in_order || before.in_order_ok(),
                "program {:?} out of order succeeded ({:?})",
                op,
                before.programs
            );
            if let Op::Program {
                col, data, spare, ..
            } = op
            {
                let len = match data {
                    DataArg::None => 0,
                    DataArg::Bytes(b) => b.len() as u32,
                    DataArg::Opaque(n) => *n,
                };
                prop_assert!(col + len <= g.page_size, "{:?} overran the data area", op);
                if let Some((o, s)) = spare {
                    prop_assert!(
                        o + s.len() as u32 <= g.spare_size,
                        "{:?} overran the spare area",
                        op
                    );
                }
            }
            for (col, b) in op_writes(op, g.page_size) {
                prop_assert!(col as usize + b.len() <= m.raw, "{:?} overran the page", op);
            }
            let page = m.page(ppn);
            for (col, b) in op_writes(op, g.page_size) {
                for (i, x) in b.iter().enumerate() {
                    let old = page[col as usize + i];
                    prop_assert!(
                        x & !old == 0,
                        "program {:?} succeeded but sets a bit at column {} ({:#04x} over {:#04x})",
                        op,
                        col as usize + i,
                        x,
                        old
                    );
                }
            }
            let done = before.programs[before.idx];
            prop_assert!(
                g.nop == 0 || done < g.nop,
                "program {:?} succeeded after {} programs (nop {})",
                op,
                done,
                g.nop
            );
        }
        Err(NandError::SetsBits { col: bad, .. }) => {
            let page = m.page(ppn);
            let first = op_writes(op, g.page_size).into_iter().find_map(|(col, b)| {
                b.iter()
                    .enumerate()
                    .find(|&(i, x)| x & !page[col as usize + i] != 0)
                    .map(|(i, _)| col + i as u32)
            });
            prop_assert_eq!(first, Some(*bad), "SetsBits column of {:?}", op);
        }
        Err(NandError::BadBlock { .. }) => {
            prop_assert!(before.is_some_and(|b| b.bad), "{:?}: {:?}", op, r);
        }
        Err(NandError::NopExceeded { done, nop, .. }) => {
            let b = before.expect("a page of the device");
            prop_assert!(
                g.nop != 0 && *nop as u32 == g.nop && *done as u32 == b.programs[b.idx],
                "{:?}: {:?}",
                op,
                r
            );
            prop_assert!(*done as u32 >= g.nop, "{:?}: {:?}", op, r);
        }
        Err(NandError::OutOfOrder { .. }) => {
            let b = before.expect("a page of the device");
            prop_assert!(g.in_order && !b.in_order_ok(), "{:?}: {:?}", op, r);
        }
        Err(_) => {}
    }
    Ok(())
}

/// Make a byte program over data the payload-less store does not know clear bits only.
/// A read and clear there programs what it read: with a bit flip due (scripted for the
/// page, or random) it may set a bit only the RAM store can see, so it becomes a read.
fn tame(op: &mut Op, pl: &Nand, m: &Model) {
    if let Op::ReadClear { ppn, col, .. } = *op {
        let flips = m.noisy || m.flips.iter().any(|f| f.0 == ppn);
        if flips && ppn < pl.geometry().pages() && !pl.store().data_known(ppn) {
            *op = Op::Read { ppn, col, len: 1 };
        }
        return;
    }
    let (ppn, col, b) = match op {
        Op::Program {
            ppn,
            col,
            data: DataArg::Bytes(b),
            ..
        } => (*ppn, *col as usize, b),
        Op::ProgramBytes { ppn, col, bytes } => (*ppn, *col as usize, bytes),
        _ => return,
    };
    if ppn >= pl.geometry().pages() || pl.store().data_known(ppn) {
        return;
    }
    let page = m.page(ppn);
    for (i, x) in b.iter_mut().enumerate() {
        if col + i < m.ps {
            *x &= page[col + i];
        }
    }
}

fn shrink(spec: &DeviceSpec, blocks: u32, ppb: u32) -> DeviceSpec {
    let mut s = spec.clone();
    s.geometry.blocks = blocks;
    s.geometry.pages_per_block = ppb;
    // A few erases wear a block out (erase failure, grown bad block).
    s.endurance = 6;
    s
}

fn run(spec: DeviceSpec, seed: u64, n_ops: usize) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let g = spec.geometry.clone();
    let mut devs = vec![
        Dev {
            name: "ram fast",
            nand: Nand::ram(spec.clone()).unwrap(),
            general: false,
        },
        Dev {
            name: "ram general",
            nand: Nand::ram(spec.clone()).unwrap(),
            general: true,
        },
        Dev {
            name: "image general",
            nand: create_device(&dir.path().join("img"), &spec, false).unwrap(),
            general: true,
        },
        Dev {
            name: "payload-less fast",
            nand: Nand::payloadless(spec.clone()).unwrap(),
            general: false,
        },
        Dev {
            name: "payload-less general",
            nand: Nand::payloadless(spec.clone()).unwrap(),
            general: true,
        },
    ];
    const PL: usize = 3;
    let raw = g.raw_page_size() as usize;
    let mut m = Model {
        raw,
        ps: g.page_size as usize,
        bytes: vec![0xFF; g.pages() as usize * raw],
        ppb: g.pages_per_block as usize,
        flips: vec![],
        noisy: false,
    };
    // Now and then a factory-bad block.
    let factory: Vec<u32> = (0..g.blocks).filter(|_| rng.gen_bool(0.15)).collect();
    for d in &mut devs {
        d.nand.mark_factory_bad(&factory).unwrap();
        let plan = d.base_plan();
        d.nand.set_faults(plan);
    }
    if g.spare_size > 0 {
        for &b in &factory {
            for p in 0..g.pages_per_block.min(2) as u64 {
                m.set(g.first_page(b) + p, m.ps, &[0]);
            }
        }
    }
    let mut last = 0;
    let mut cut_pending = false;
    for i in 0..n_ops {
        let mut op = gen_op(&mut rng, &devs[0].nand, &m, &mut last);
        if devs[0].nand.is_dead() && rng.gen_bool(0.5) {
            op = Op::Reopen;
        }
        match op {
            Op::Reopen => {
                devs = reopen_all(devs, &mut m, i)?;
                cut_pending = false;
                continue;
            }
            Op::PowerCut { after, torn, seed } => {
                if !cut_pending && !devs[0].nand.is_dead() {
                    for d in &mut devs {
                        d.nand.set_faults(FaultPlan {
                            power_cut_at: Some(after),
                            torn,
                            seed,
                            ..FaultPlan::default()
                        });
                    }
                    cut_pending = true;
                }
                continue;
            }
            Op::FlipRate { rate, seed } => {
                for d in &mut devs {
                    let plan = FaultPlan {
                        bitflip_rate: rate,
                        seed,
                        ..d.base_plan()
                    };
                    d.nand.set_faults(plan);
                }
                m.noisy = true;
                cut_pending = false;
                continue;
            }
            _ => {}
        }
        tame(&mut op, &devs[PL].nand, &m);
        let was_dead = devs[0].nand.is_dead();
        let before = op_page(&op)
            .filter(|&p| p < g.pages())
            .map(|p| Before::of(&devs[0].nand, p));
        let (r0, read0) = apply(&mut devs[0].nand, &op);
        let out0 = outcome(&r0, read0.clone());
        let st0 = state(&devs[0].nand);
        for d in devs.iter_mut().skip(1) {
            let (r, read) = apply(&mut d.nand, &op);
            prop_assert_eq!(
                &out0,
                &outcome(&r, read),
                "{} against ram fast, op {} {:?}",
                d.name,
                i,
                op
            );
            same_state(&st0, &state(&d.nand), d.name, i, &op)?;
        }
        match &op {
            // The program a read and clear made (none when its read failed).
            Op::ReadClear { ppn, col, clear } => {
                if let Some(b) = read0.first() {
                    let prog = Op::Program {
                        ppn: *ppn,
                        col: *col,
                        data: DataArg::Bytes(vec![b[0] & !clear]),
                        spare: None,
                    };
                    rules_oracle(&m, &g, &prog, &r0, before.as_ref())?;
                }
            }
            _ => rules_oracle(&m, &g, &op, &r0, before.as_ref())?,
        }
        let torn = !was_dead && matches!(r0, Err(NandError::PowerLoss));
        if !torn {
            model_apply(&mut m, &op, &r0, &read0)?;
        }
    }
    reopen_all(devs, &mut m, n_ops)?;
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// Every preset, shrunk to a few blocks of a few pages (a power of two or not: the
    /// device finds a page's block by a shift or a division).
    #[test]
    fn fast_and_general_program_paths_agree(
        seed in any::<u64>(),
        blocks in 2u32..5,
        ppb in prop::sample::select(vec![2u32, 3, 4, 5, 8]),
    ) {
        for p in presets() {
            run(shrink(&p, blocks, ppb), seed, 400)?;
        }
    }
}

/// `Nand::opaque_batch` accepts the batches the cleaner makes (reads anywhere, whole-page
/// or part-page programs of consecutive pages from a block's write pointer) and then
/// leaves the device as one call at a time does; it declines, changing nothing, whenever
/// one of those calls would fail or a fault plan is installed.
#[test]
fn opaque_batches_are_taken_when_they_succeed_and_declined_whole_otherwise() {
    for spec in presets() {
        let spec = shrink(&spec, 4, 8);
        let g = spec.geometry.clone();
        let ps = g.page_size;
        let fresh = || {
            let mut n = Nand::payloadless(spec.clone()).unwrap();
            n.mark_factory_bad(&[3]).unwrap();
            // Block 1 half written, one call at a time.
            for p in 0..4 {
                n.program(g.first_page(1) + p, 0, Data::Opaque(ps), None)
                    .unwrap();
            }
            n
        };
        let one_by_one = |n: &mut Nand, reads: &[Span], progs: &[Span]| {
            for &(p, c, l) in reads {
                n.read_opaque(p, c, l).unwrap();
            }
            for &(p, c, l) in progs {
                n.program(p, c, Data::Opaque(l), None).unwrap();
            }
        };
        let b1 = g.first_page(1);
        let reads = vec![(b1, 0, ps), (b1 + 2, 0, ps), (g.first_page(2), 0, ps / 2)];
        let mut taken: Vec<Vec<Span>> = vec![
            (0..4).map(|k| (b1 + 4 + k, 0, ps)).collect(),
            (0..8).map(|k| (g.first_page(2) + k, 0, ps)).collect(),
            vec![],
        ];
        if !g.in_order {
            // Any page of the block, in page order.
            taken.push(vec![(b1 + 5, 0, ps), (b1 + 7, 0, ps)]);
        }
        if g.nop == 0 || g.nop >= 2 {
            // Two part programs of one page, then the next page.
            taken.push(vec![
                (b1 + 4, 0, ps / 2),
                (b1 + 4, ps / 2, ps / 2),
                (b1 + 5, 0, ps),
            ]);
        }
        for progs in &taken {
            let (mut a, mut b) = (fresh(), fresh());
            assert!(a.opaque_batch(&reads, progs), "{}: {progs:?}", spec.name);
            one_by_one(&mut b, &reads, progs);
            assert_eq!(a.counters(), b.counters(), "{}", spec.name);
            assert_eq!(a.clock_ps(), b.clock_ps(), "{}", spec.name);
            assert_eq!(a.op_count(), b.op_count(), "{}", spec.name);
            for p in 0..g.pages() {
                assert_eq!(
                    a.page_programs(p),
                    b.page_programs(p),
                    "{} page {p}",
                    spec.name
                );
            }
            // The write pointers agree: the next page programs (or fails) alike.
            let next = progs.last().map_or(b1 + 4, |&(p, _, _)| p + 1);
            if next < g.first_page(g.block_of(next.saturating_sub(1)) + 1) {
                let ra = a.program(next, 0, Data::Opaque(ps), None);
                let rb = b.program(next, 0, Data::Opaque(ps), None);
                assert_eq!(format!("{ra:?}"), format!("{rb:?}"), "{}", spec.name);
            }
        }
        let mut declined: Vec<(&str, Vec<Span>, Vec<Span>)> = vec![
            ("a read past the device", vec![(g.pages(), 0, ps)], vec![]),
            (
                "a read past the page",
                vec![(0, 1, g.raw_page_size())],
                vec![],
            ),
            (
                "a program past the data area",
                vec![],
                vec![(b1 + 4, 1, ps)],
            ),
            (
                "a program past the device",
                vec![],
                vec![(g.pages(), 0, ps)],
            ),
            ("a bad block", vec![], vec![(g.first_page(3), 0, ps)]),
            ("two blocks", vec![], vec![(b1 + 7, 0, ps), (b1 + 8, 0, ps)]),
            (
                "pages out of order",
                vec![],
                vec![(b1 + 5, 0, ps), (b1 + 4, 0, ps)],
            ),
        ];
        if g.in_order {
            declined.push(("a skipped page", vec![], vec![(b1 + 5, 0, ps)]));
            declined.push(("a rewind", vec![], vec![(b1 + 1, 0, ps)]));
        }
        if g.nop != 0 {
            let again = (0..g.nop).map(|_| (b1 + 3, 0, 1)).collect();
            declined.push(("the program budget", vec![], again));
        }
        for (why, reads, progs) in &declined {
            let mut a = fresh();
            let before = (a.counters().clone(), a.clock_ps(), a.op_count());
            let progs_before: Vec<u32> = (0..g.pages()).map(|p| a.page_programs(p)).collect();
            assert!(!a.opaque_batch(reads, progs), "{}: {why}", spec.name);
            assert_eq!(
                before,
                (a.counters().clone(), a.clock_ps(), a.op_count()),
                "{why}"
            );
            let after: Vec<u32> = (0..g.pages()).map(|p| a.page_programs(p)).collect();
            assert_eq!(progs_before, after, "{}: {why}", spec.name);
        }
        // A fault plan, even one that never fires, and a dead device: declined.
        let mut a = fresh();
        a.set_faults(never_fires());
        assert!(!a.opaque_batch(&reads, &taken[0]), "{}", spec.name);
        let mut a = fresh();
        a.set_faults(FaultPlan {
            power_cut_at: Some(1),
            ..FaultPlan::default()
        });
        let _ = a.program(b1 + 4, 0, Data::Opaque(ps), None);
        assert!(a.is_dead());
        a.set_faults(FaultPlan::default());
        assert!(!a.opaque_batch(&reads, &[]), "{}", spec.name);
        // A store that does not batch (RAM): declined.
        let mut r = Nand::ram(spec.clone()).unwrap();
        assert!(!r.opaque_batch(&[], &[(0, 0, ps)]), "{}", spec.name);
    }
}

/// `Nand::opaque_page_batch` (whole pages) accepts the batches the cleaner makes when its
/// slots are whole pages (page reads anywhere, programs of consecutive pages from a
/// block's write pointer, over erased, opaque and kept pages) and then leaves the device
/// as one call at a time does; it declines, changing nothing, whenever one of those calls
/// would fail, a fault plan is installed or the store does not batch.
#[test]
fn opaque_page_batches_are_taken_when_they_succeed_and_declined_whole_otherwise() {
    for spec in presets() {
        let spec = shrink(&spec, 4, 8);
        let g = spec.geometry.clone();
        let ps = g.page_size;
        let b1 = g.first_page(1);
        let fresh = || {
            let mut n = Nand::payloadless(spec.clone()).unwrap();
            n.mark_factory_bad(&[3]).unwrap();
            // Block 1 half written, one call at a time: opaque, then known bytes (a kept
            // page), then part opaque.
            n.program(b1, 0, Data::Opaque(ps), None).unwrap();
            n.program(b1 + 1, 0, Data::Bytes(&[0x5A; 24]), None)
                .unwrap();
            n.program(b1 + 2, 0, Data::Opaque(ps / 2), None).unwrap();
            n.program(b1 + 3, 0, Data::Opaque(ps), None).unwrap();
            n
        };
        let one_by_one = |n: &mut Nand, reads: &[u64], first: u64, count: u32| {
            for &p in reads {
                n.read_opaque(p, 0, ps).unwrap();
            }
            for k in 0..count as u64 {
                n.program(first + k, 0, Data::Opaque(ps), None).unwrap();
            }
        };
        let reads = vec![b1, b1 + 2, g.first_page(2), g.pages() - 1];
        let mut taken: Vec<(u64, u32)> = vec![(b1 + 4, 4), (g.first_page(2), 8), (b1 + 4, 0)];
        if !g.in_order {
            // Any pages of the block.
            taken.push((b1 + 5, 2));
        }
        if g.nop == 0 || g.nop >= 2 {
            // Again over the last page programmed (kept, part opaque, opaque), and on.
            if g.in_order {
                taken.push((b1 + 3, 3));
            } else {
                taken.push((b1, 6));
            }
        }
        for &(first, count) in &taken {
            let (mut a, mut b) = (fresh(), fresh());
            assert!(
                a.opaque_page_batch(&reads, first, count),
                "{}: {first} {count}",
                spec.name
            );
            one_by_one(&mut b, &reads, first, count);
            assert_eq!(a.counters(), b.counters(), "{}", spec.name);
            assert_eq!(a.clock_ps(), b.clock_ps(), "{}", spec.name);
            assert_eq!(a.op_count(), b.op_count(), "{}", spec.name);
            for p in 0..g.pages() {
                assert_eq!(
                    a.page_programs(p),
                    b.page_programs(p),
                    "{} page {p}",
                    spec.name
                );
                let (mut da, mut db) = (vec![0u8; ps as usize], vec![0u8; ps as usize]);
                a.read(p, 0, &mut da).unwrap();
                b.read(p, 0, &mut db).unwrap();
                assert_eq!(da, db, "{} page {p}", spec.name);
                assert_eq!(
                    a.store().data_known(p),
                    b.store().data_known(p),
                    "{} page {p}",
                    spec.name
                );
            }
            // The write pointers agree: the next pages program (or fail) alike.
            let next = if count == 0 {
                first
            } else {
                first + count as u64
            };
            for p in [next.saturating_sub(1), next] {
                if p < g.pages() {
                    let ra = a.program(p, 0, Data::Opaque(ps), None);
                    let rb = b.program(p, 0, Data::Opaque(ps), None);
                    assert_eq!(format!("{ra:?}"), format!("{rb:?}"), "{}", spec.name);
                }
            }
        }
        let mut declined: Vec<(&str, Vec<u64>, u64, u32)> = vec![
            ("a read past the device", vec![0, g.pages()], b1 + 4, 1),
            (
                "a read past the device, no program",
                vec![g.pages()],
                b1 + 4,
                0,
            ),
            ("a program past the device", vec![], g.pages(), 1),
            ("a bad block", vec![], g.first_page(3), 1),
            ("past the block's end", vec![], b1 + 4, 5),
            ("the last block's end", vec![], g.first_page(2) + 1, 8),
        ];
        if g.in_order {
            declined.push(("a skipped page", vec![], b1 + 5, 1));
            declined.push(("a rewind", vec![], b1 + 2, 1));
        }
        if g.nop == 1 {
            declined.push(("the program budget", vec![], b1 + 3, 2));
        }
        for (why, reads, first, count) in &declined {
            let mut a = fresh();
            let before = (a.counters().clone(), a.clock_ps(), a.op_count());
            let progs_before: Vec<u32> = (0..g.pages()).map(|p| a.page_programs(p)).collect();
            assert!(
                !a.opaque_page_batch(reads, *first, *count),
                "{}: {why}",
                spec.name
            );
            assert_eq!(
                before,
                (a.counters().clone(), a.clock_ps(), a.op_count()),
                "{why}"
            );
            let after: Vec<u32> = (0..g.pages()).map(|p| a.page_programs(p)).collect();
            assert_eq!(progs_before, after, "{}: {why}", spec.name);
        }
        if g.nop >= 2 {
            // Pages that used up their budget, one call at a time.
            let mut a = fresh();
            for _ in 1..g.nop {
                a.program(b1 + 3, 0, Data::Opaque(1), None).unwrap();
            }
            assert!(
                !a.opaque_page_batch(&[], b1 + 3, 2),
                "{}: the program budget",
                spec.name
            );
            assert!(a.opaque_page_batch(&[], b1 + 4, 2), "{}", spec.name);
        }
        // A fault plan, even one that never fires, and a dead device: declined.
        let mut a = fresh();
        a.set_faults(never_fires());
        assert!(!a.opaque_page_batch(&reads, b1 + 4, 1), "{}", spec.name);
        let mut a = fresh();
        a.set_faults(FaultPlan {
            power_cut_at: Some(1),
            ..FaultPlan::default()
        });
        let _ = a.program(b1 + 4, 0, Data::Opaque(ps), None);
        assert!(a.is_dead());
        a.set_faults(FaultPlan::default());
        assert!(!a.opaque_page_batch(&reads, b1 + 5, 0), "{}", spec.name);
        // A store that does not batch (RAM): declined.
        let mut r = Nand::ram(spec.clone()).unwrap();
        assert!(!r.opaque_page_batch(&[], 0, 1), "{}", spec.name);
    }
}

/// `Nand::opaque_page_batch_spare` (whole pages with spare bytes, the spare-mode cleaner's
/// copy runs) is taken when every program would succeed, leaving what the calls one at a
/// time leave (data areas, spare areas, program counts, counters, clock, write pointer),
/// and declined whole, changing nothing, on what a call at a time would refuse — among
/// them the rules of the spare bytes: their range and the bit rule.
#[test]
fn opaque_page_batches_with_spare_bytes_are_taken_or_declined_whole() {
    for spec in presets() {
        let spec = shrink(&spec, 4, 8);
        let g = spec.geometry.clone();
        if g.spare_size < 16 {
            continue;
        }
        let (ps, raw) = (g.page_size, g.raw_page_size() as usize);
        let b1 = g.first_page(1);
        let fresh = || {
            let mut n = Nand::payloadless(spec.clone()).unwrap();
            n.mark_factory_bad(&[3]).unwrap();
            n.program(b1, 0, Data::Opaque(ps), Some((1, &[0x00][..])))
                .unwrap();
            n.program(b1 + 1, 0, Data::Bytes(&[0x5A; 24]), None)
                .unwrap();
            n.program(b1 + 2, 0, Data::Opaque(ps), Some((1, &[0x0F; 15][..])))
                .unwrap();
            n.program(b1 + 3, 0, Data::Opaque(ps), Some((3, &[0xF0; 2][..])))
                .unwrap();
            n
        };
        // A two-page slot's mark and record, then another's.
        let rec = |x: u8| -> Vec<u8> { (0..15u8).map(|i| i.wrapping_mul(x)).collect() };
        let pages: Vec<Vec<u8>> = vec![vec![0x00], rec(3), vec![0x00], rec(7)];
        let flat = |p: &[Vec<u8>]| -> (Vec<u8>, Vec<u32>) {
            let mut ends = vec![];
            let mut at = 0;
            for b in p {
                at += b.len() as u32;
                ends.push(at);
            }
            (p.concat(), ends)
        };
        let reads = vec![b1, b1 + 2, g.first_page(2), g.pages() - 1];
        let (bytes, ends) = flat(&pages);
        let mut a = fresh();
        let mut b = fresh();
        assert!(
            a.opaque_page_batch_spare(&reads, b1 + 4, 1, &bytes, &ends),
            "{}",
            spec.name
        );
        for &p in &reads {
            b.read_opaque(p, 0, ps).unwrap();
        }
        for (k, s) in pages.iter().enumerate() {
            b.program(b1 + 4 + k as u64, 0, Data::Opaque(ps), Some((1, s)))
                .unwrap();
        }
        assert_eq!(a.counters(), b.counters(), "{}", spec.name);
        assert_eq!(a.clock_ps(), b.clock_ps(), "{}", spec.name);
        assert_eq!(a.op_count(), b.op_count(), "{}", spec.name);
        for p in 0..g.pages() {
            assert_eq!(a.page_programs(p), b.page_programs(p), "{} {p}", spec.name);
            let (mut ra, mut rb) = (vec![0u8; raw], vec![0u8; raw]);
            a.read(p, 0, &mut ra).unwrap();
            b.read(p, 0, &mut rb).unwrap();
            assert_eq!(ra, rb, "{} page {p}", spec.name);
        }
        // The write pointer: the next page programs (or fails) alike.
        for p in [b1 + 7, b1 + 8] {
            let ra = a.program(p, 0, Data::Opaque(ps), Some((1, &[0u8][..])));
            let rb = b.program(p, 0, Data::Opaque(ps), Some((1, &[0u8][..])));
            assert_eq!(format!("{ra:?}"), format!("{rb:?}"), "{}", spec.name);
        }
        let ss = g.spare_size;
        let long = vec![0u8; ss as usize];
        let mut declined: Vec<(&str, u64, u32, Vec<Vec<u8>>)> = vec![
            (
                "spare bytes past the spare area",
                b1 + 4,
                1,
                vec![long.clone()],
            ),
            (
                "a spare column past the spare area",
                b1 + 4,
                ss,
                vec![vec![0]],
            ),
            ("a bad block", g.first_page(3), 1, vec![vec![0]]),
            ("past the block's end", b1 + 7, 1, vec![vec![0], vec![0]]),
            ("a program past the device", g.pages(), 1, vec![vec![0]]),
            ("no program", b1 + 4, 1, vec![]),
        ];
        if g.nop == 0 || g.nop >= 2 {
            // Page b1 + 2's record cleared bits that 0xFF would set again (and the
            // budget or order allows the program otherwise).
            if !g.in_order {
                declined.push(("a spare byte setting a bit", b1 + 2, 1, vec![vec![0xFF]]));
            }
        }
        if g.in_order {
            declined.push(("a skipped page", b1 + 5, 1, vec![vec![0]]));
        }
        // Every raw page and its program count, read through the device.
        let snapshot = |n: &mut Nand| -> (Vec<u8>, Vec<u32>) {
            let mut bytes = vec![0u8; g.pages() as usize * raw];
            for (p, page) in bytes.chunks_exact_mut(raw).enumerate() {
                n.read(p as u64, 0, page).unwrap();
            }
            (bytes, (0..g.pages()).map(|p| n.page_programs(p)).collect())
        };
        for (why, first, col, pages) in &declined {
            let (mut a, mut c) = (fresh(), fresh());
            let (bytes, ends) = flat(pages);
            assert!(
                !a.opaque_page_batch_spare(&[b1], *first, *col, &bytes, &ends),
                "{}: {why}",
                spec.name
            );
            assert_eq!(
                (c.counters().clone(), c.clock_ps(), c.op_count()),
                (a.counters().clone(), a.clock_ps(), a.op_count()),
                "{}: {why}",
                spec.name
            );
            assert!(snapshot(&mut a) == snapshot(&mut c), "{}: {why}", spec.name);
        }
        // Ends that do not match the bytes: declined.
        let mut a = fresh();
        assert!(!a.opaque_page_batch_spare(&[], b1 + 4, 1, &[0, 0], &[1]));
        assert!(!a.opaque_page_batch_spare(&[], b1 + 4, 1, &[0, 0], &[2, 1]));
        // A fault plan, even one that never fires: declined; a RAM store: declined.
        let mut a = fresh();
        a.set_faults(never_fires());
        assert!(!a.opaque_page_batch_spare(&[], b1 + 4, 1, &[0], &[1]));
        let mut r = Nand::ram(spec.clone()).unwrap();
        assert!(!r.opaque_page_batch_spare(&[], 0, 1, &[0], &[1]));
    }
}
