//! The papers' "mapping onto flash space": a trace's addresses are mapped into the
//! simulated (pre-filled) logical space, and its records become driver [`Request`]s.
//!
//! * `modulo` — sector number modulo the space; a request crossing the end of the space is
//!   split and its tail wraps to sector 0; a request larger than the space is cut to it.
//! * `compact` — the distinct FTL blocks the trace touches are renumbered densely in
//!   first-touch order (a first pass over the trace builds the table; only the table is
//!   kept in memory), which keeps order and locality: blocks first touched together stay
//!   together. A request whose blocks are not consecutive after renumbering is split into
//!   runs. When the trace touches more blocks than the space has, the numbers wrap.
//!
//! Arrival times are relative to the first record; a record earlier than the one before it
//! arrives at the same time as that one (the driver's clock never goes backwards) and is
//! counted in `clamped_arrivals`.
//!
//! The trace is read and mapped on a thread of its own, in batches a few steps ahead of the
//! simulation, so parsing overlaps with simulating.

use std::sync::mpsc::{sync_channel, Receiver};

use serde::Serialize;

use super::{FxHashMap, Record, TraceError, TraceMap, TraceReader, TraceSpec};
use crate::driver::{Op, Request};

/// What a simulation run read from its trace.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct TraceRunInfo {
    pub path: String,
    pub format: String,
    pub map: String,
    pub records: u64,
    pub read_requests: u64,
    pub write_requests: u64,
    pub trim_requests: u64,
    pub write_bytes: u64,
    pub read_bytes: u64,
    pub skipped_bad_lines: u64,
    pub skipped_zero_size: u64,
    pub skipped_other_device: u64,
    /// Records earlier than the record before them, issued at that record's time.
    pub clamped_arrivals: u64,
    /// Extra requests made by splitting records at the end of the space (modulo) or at
    /// discontinuities of the renumbered blocks (compact).
    pub split_requests: u64,
    /// Records larger than the whole space, cut to it.
    pub truncated_records: u64,
    /// Distinct blocks the trace touches (compact mapping only).
    pub distinct_blocks: Option<u64>,
    /// The first malformed line skipped (`--skip-bad-lines`).
    pub first_bad_line: Option<String>,
    /// The records came from several disks and were read as one address space (no
    /// `--trace-disk`): the warning to give ([`super::Counts::merged_devices_warning`]).
    /// Not a key of the results: the command that ran the trace prints it.
    #[serde(skip)]
    pub merged_devices_warning: Option<String>,
}

/// Requests per batch handed from the reading thread to the simulation.
const BATCH: usize = 4096;

enum Msg {
    Batch(Vec<Request>),
    Err(TraceError),
    Done(Box<TraceRunInfo>),
}

/// The requests of a trace mapped onto the simulated space, in trace order.
pub struct TraceRequests {
    rx: Receiver<Msg>,
    batch: std::vec::IntoIter<Request>,
    info: TraceRunInfo,
    done: bool,
}

/// The mapping itself, run on the reading thread.
struct Mapper {
    reader: TraceReader,
    map: TraceMap,
    space: u64,
    bsec: u64,
    space_blocks: u64,
    table: FxHashMap<u64, u64>,
    pending: Vec<Request>,
    next_pending: usize,
    last_s: f64,
    info: TraceRunInfo,
}

/// Open `spec` for a space of `space_sectors` sectors made of FTL blocks of `block_sectors`
/// sectors. The compact mapping reads the trace once here to build its table.
pub fn requests(
    spec: &TraceSpec,
    space_sectors: u64,
    block_sectors: u64,
) -> Result<TraceRequests, TraceError> {
    let name = spec.path.display().to_string();
    if block_sectors == 0 || space_sectors < block_sectors {
        return Err(TraceError::new(
            &name,
            None,
            format!("no space to map the trace onto ({space_sectors} sectors)"),
        ));
    }
    let mut opts = spec.options.clone();
    if opts.format.is_none() {
        opts.format = Some(super::detect_format(&spec.path)?);
    }
    let mut table = FxHashMap::default();
    let mut distinct = None;
    if spec.map == TraceMap::Compact {
        let mut next = 0u64;
        for r in TraceReader::open(&spec.path, &opts)? {
            let r = r?;
            // A request larger than the space is cut to it, as when it is mapped (below):
            // its blocks past that never reach the table (a 1 TiB request put 2^28 blocks
            // there, option fuzzer, stop 19).
            let n = (r.sectors as u64).min(space_sectors);
            let first = r.lba / block_sectors;
            let last = (r.lba + n - 1) / block_sectors;
            for b in first..=last {
                table.entry(b).or_insert_with(|| {
                    next += 1;
                    next - 1
                });
            }
        }
        distinct = Some(next);
    }
    let reader = TraceReader::open(&spec.path, &opts)?;
    let info = TraceRunInfo {
        path: name,
        format: reader.format().name().into(),
        map: spec.map.name().into(),
        distinct_blocks: distinct,
        ..Default::default()
    };
    let mut m = Mapper {
        reader,
        map: spec.map,
        space: space_sectors,
        bsec: block_sectors,
        space_blocks: space_sectors / block_sectors,
        table,
        pending: Vec::new(),
        next_pending: 0,
        last_s: 0.0,
        info: info.clone(),
    };
    let (tx, rx) = sync_channel(8);
    std::thread::Builder::new()
        .name("trace-reader".into())
        .spawn(move || {
            let mut batch = Vec::with_capacity(BATCH);
            loop {
                match m.next() {
                    Some(Ok(r)) => {
                        batch.push(r);
                        if batch.len() == BATCH {
                            let full = std::mem::replace(&mut batch, Vec::with_capacity(BATCH));
                            // The simulation stopped (an error): stop reading too.
                            if tx.send(Msg::Batch(full)).is_err() {
                                return;
                            }
                        }
                    }
                    Some(Err(e)) => {
                        let _ = tx.send(Msg::Batch(batch));
                        let _ = tx.send(Msg::Err(e));
                        return;
                    }
                    None => {
                        let _ = tx.send(Msg::Batch(batch));
                        let _ = tx.send(Msg::Done(Box::new(m.info())));
                        return;
                    }
                }
            }
        })
        .map_err(|e| TraceError::new(&info.path, None, format!("cannot start a thread: {e}")))?;
    Ok(TraceRequests {
        rx,
        batch: Vec::new().into_iter(),
        info,
        done: false,
    })
}

impl TraceRequests {
    /// What was read from the trace; complete once the iterator has been exhausted.
    pub fn info(&self) -> TraceRunInfo {
        self.info.clone()
    }
}

impl Iterator for TraceRequests {
    type Item = Result<Request, TraceError>;

    #[inline]
    fn next(&mut self) -> Option<Result<Request, TraceError>> {
        loop {
            if let Some(r) = self.batch.next() {
                return Some(Ok(r));
            }
            if self.done {
                return None;
            }
            match self.rx.recv() {
                Ok(Msg::Batch(b)) => self.batch = b.into_iter(),
                Ok(Msg::Err(e)) => {
                    self.done = true;
                    return Some(Err(e));
                }
                Ok(Msg::Done(i)) => {
                    self.info = *i;
                    self.done = true;
                }
                Err(_) => {
                    self.done = true;
                    return Some(Err(TraceError::new(
                        &self.info.path,
                        None,
                        "the trace reading thread failed",
                    )));
                }
            }
        }
    }
}

impl Mapper {
    fn info(&self) -> TraceRunInfo {
        let c = self.reader.counts();
        let mut i = self.info.clone();
        i.records = c.records;
        i.skipped_bad_lines = c.skipped_bad_lines;
        i.skipped_zero_size = c.skipped_zero_size;
        i.skipped_other_device = c.skipped_other_device;
        i.first_bad_line = c.first_bad_line.clone();
        i.merged_devices_warning =
            c.merged_devices_warning(self.reader.file(), self.reader.format());
        i
    }

    fn push(&mut self, arrival: f64, op: Op, lba: u64, sectors: u64) {
        let continues = !self.pending.is_empty();
        self.pending.push(Request {
            arrival_s: Some(arrival),
            op,
            lba,
            sectors: sectors as u32,
            continues,
        });
    }

    fn map_record(&mut self, r: &Record) {
        let mut t = r.time_ns as f64 / 1e9;
        if t < self.last_s {
            self.info.clamped_arrivals += 1;
            t = self.last_s;
        }
        self.last_s = t;
        self.pending.clear();
        self.next_pending = 0;
        match self.map {
            TraceMap::Modulo => {
                let mut n = r.sectors as u64;
                if n > self.space {
                    n = self.space;
                    self.info.truncated_records += 1;
                }
                let start = r.lba % self.space;
                let room = self.space - start;
                if n <= room {
                    self.push(t, r.op, start, n);
                } else {
                    self.push(t, r.op, start, room);
                    self.push(t, r.op, 0, n - room);
                }
            }
            TraceMap::Compact => {
                let b = self.bsec;
                let mut n = r.sectors as u64;
                if n > self.space {
                    n = self.space;
                    self.info.truncated_records += 1;
                }
                let end = r.lba + n;
                let first = r.lba / b;
                let last = (end - 1) / b;
                let mut run: Option<(u64, u64)> = None;
                for blk in first..=last {
                    let id = self.table.get(&blk).copied().unwrap_or(0) % self.space_blocks;
                    let s0 = if blk == first { r.lba % b } else { 0 };
                    let s1 = if blk == last { (end - 1) % b + 1 } else { b };
                    let at = id * b + s0;
                    run = match run {
                        Some((rs, rn)) if rs + rn == at => Some((rs, rn + s1 - s0)),
                        Some((rs, rn)) => {
                            self.push(t, r.op, rs, rn);
                            Some((at, s1 - s0))
                        }
                        None => Some((at, s1 - s0)),
                    };
                }
                if let Some((rs, rn)) = run {
                    self.push(t, r.op, rs, rn);
                }
            }
        }
        self.info.split_requests += self.pending.len() as u64 - 1;
        let bytes: u64 = self.pending.iter().map(|q| q.sectors as u64 * 512).sum();
        match r.op {
            Op::Read => {
                self.info.read_requests += 1;
                self.info.read_bytes += bytes;
            }
            Op::Write => {
                self.info.write_requests += 1;
                self.info.write_bytes += bytes;
            }
            Op::Trim => self.info.trim_requests += 1,
        }
    }
}

impl Iterator for Mapper {
    type Item = Result<Request, TraceError>;

    #[inline]
    fn next(&mut self) -> Option<Result<Request, TraceError>> {
        if let Some(&r) = self.pending.get(self.next_pending) {
            self.next_pending += 1;
            return Some(Ok(r));
        }
        match self.reader.next()? {
            Ok(rec) => {
                self.map_record(&rec);
                self.next_pending = 1;
                Some(Ok(self.pending[0]))
            }
            Err(e) => Some(Err(e)),
        }
    }
}
