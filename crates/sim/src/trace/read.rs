//! Streaming trace readers: one `read_until` per line into a reused buffer, fields parsed
//! as byte slices, nothing allocated per record.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::Path;

use flate2::read::MultiGzDecoder;

use super::parse::{
    is_word, parse_time_ns, parse_u64, parse_u64_any, show, split_csv, split_ws, time_error,
};
use super::{check_options, Counts, Format, Record, TraceError, TraceOptions};
use crate::driver::Op;

/// Windows FILETIME of the Unix epoch (100 ns ticks since 1601).
const WINDOWS_EPOCH_TICKS: i128 = 116_444_736_000_000_000;
const BUF_BYTES: usize = 256 << 10;

/// Open a trace file for reading, decompressing it when it starts with the gzip magic bytes.
pub fn open_input(path: &Path) -> Result<BufReader<Box<dyn Read + Send>>, TraceError> {
    let name = path.display().to_string();
    // Traces are read more than once (the format's detection, the run; a job's id hashes
    // the file), which a pipe, a FIFO or a device cannot give (QA stop 27: `/dev/zero`
    // was read for ever). Checked before the open too, which waits for a writer on a FIFO
    // (QA stop 28), and after it, on what was opened.
    let not_regular = || {
        TraceError::new(
            &name,
            None,
            "not a regular file (a trace is read more than once: save a pipe's output to a file first)",
        )
    };
    if std::fs::metadata(path).is_ok_and(|m| !m.is_file()) {
        return Err(not_regular());
    }
    let mut f =
        File::open(path).map_err(|e| TraceError::new(&name, None, format!("cannot open: {e}")))?;
    if !f.metadata().is_ok_and(|m| m.is_file()) {
        return Err(not_regular());
    }
    let mut magic = [0u8; 2];
    let mut got = 0;
    while got < 2 {
        match f.read(&mut magic[got..]) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(TraceError::new(&name, None, format!("cannot read: {e}"))),
        }
    }
    f.seek(SeekFrom::Start(0))
        .map_err(|e| TraceError::new(&name, None, format!("cannot read: {e}")))?;
    let inner: Box<dyn Read + Send> = if got == 2 && magic == [0x1f, 0x8b] {
        Box::new(Pipelined::new(MultiGzDecoder::new(f)))
    } else {
        Box::new(f)
    };
    Ok(BufReader::with_capacity(BUF_BYTES, inner))
}

/// A reader that runs `inner` (the gzip decoder) on its own thread, a few chunks ahead of
/// the parser, so decompression and parsing overlap on two cores.
struct Pipelined {
    rx: Option<std::sync::mpsc::Receiver<std::io::Result<Vec<u8>>>>,
    chunk: Vec<u8>,
    pos: usize,
}

impl Pipelined {
    const CHUNK: usize = 1 << 20;

    fn new<R: Read + Send + 'static>(mut inner: R) -> Pipelined {
        let (tx, rx) = std::sync::mpsc::sync_channel(4);
        std::thread::spawn(move || loop {
            let mut buf = vec![0u8; Pipelined::CHUNK];
            let mut n = 0;
            let res = loop {
                match inner.read(&mut buf[n..]) {
                    Ok(0) => break Ok(()),
                    Ok(k) => {
                        n += k;
                        if n == buf.len() {
                            break Ok(());
                        }
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => break Err(e),
                }
            };
            buf.truncate(n);
            // What was decoded before an error (a truncated file) goes first, so the
            // lines before the damage are read and the error names the line it cut
            // (before, the chunk was dropped and the error named a line up to a
            // megabyte too early: `:1:` for most truncated traces).
            let (data, err) = match res {
                Ok(()) => (buf, None),
                Err(e) => (buf, Some(e)),
            };
            if data.is_empty() && err.is_none() {
                return;
            }
            // A closed receiver (the reader was dropped) ends the thread.
            if !data.is_empty() && tx.send(Ok(data)).is_err() {
                return;
            }
            match err {
                Some(e) => {
                    let _ = tx.send(Err(e));
                    return;
                }
                None if n < Pipelined::CHUNK => return,
                None => {}
            }
        });
        Pipelined {
            rx: Some(rx),
            chunk: Vec::new(),
            pos: 0,
        }
    }
}

impl Read for Pipelined {
    fn read(&mut self, out: &mut [u8]) -> std::io::Result<usize> {
        while self.pos == self.chunk.len() {
            let Some(rx) = &self.rx else { return Ok(0) };
            match rx.recv() {
                Ok(Ok(c)) => {
                    self.chunk = c;
                    self.pos = 0;
                }
                Ok(Err(e)) => {
                    self.rx = None;
                    return Err(e);
                }
                Err(_) => {
                    self.rx = None;
                    return Ok(0);
                }
            }
        }
        let n = out.len().min(self.chunk.len() - self.pos);
        out[..n].copy_from_slice(&self.chunk[self.pos..self.pos + n]);
        self.pos += n;
        Ok(n)
    }
}

/// Strip the line ending, a UTF-8 byte-order mark and leading blanks; `None` for blank
/// lines and `#` comments.
#[inline]
fn content(buf: &[u8], first_line: bool) -> Option<(usize, usize)> {
    let mut end = buf.len();
    while end > 0 && matches!(buf[end - 1], b'\n' | b'\r') {
        end -= 1;
    }
    let mut start = 0;
    if first_line && buf.starts_with(b"\xEF\xBB\xBF") {
        start = 3;
    }
    while start < end && matches!(buf[start], b' ' | b'\t') {
        start += 1;
    }
    while end > start && matches!(buf[end - 1], b' ' | b'\t') {
        end -= 1;
    }
    if start == end || buf[start] == b'#' {
        None
    } else {
        Some((start, end))
    }
}

/// The longest line a trace may have, in bytes. No format's lines come near it; a file
/// that is no trace (a disk image, zeros) has "lines" as long as itself, which were
/// buffered whole (QA stop 27: memory grew with the file until the process aborted).
pub const MAX_LINE_BYTES: u64 = 1 << 16;

/// One line of `input` into `buf`, as `read_until(b'\n')`, but failing (`InvalidData`)
/// rather than buffer more than [`MAX_LINE_BYTES`].
fn read_line(input: &mut impl BufRead, buf: &mut Vec<u8>) -> std::io::Result<usize> {
    let n = input
        .by_ref()
        .take(MAX_LINE_BYTES + 1)
        .read_until(b'\n', buf)?;
    if n as u64 > MAX_LINE_BYTES && buf.last() != Some(&b'\n') {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!(
                "a line longer than {MAX_LINE_BYTES} bytes: not a trace (a binary file, or a \
                 disk image?)"
            ),
        ));
    }
    Ok(n)
}

/// A read's error as a trace error's text.
fn read_error(e: &std::io::Error) -> String {
    if e.kind() == std::io::ErrorKind::InvalidData {
        e.to_string()
    } else {
        format!("read error: {e}")
    }
}

/// Guess the format of a trace from its first lines (see `docs/traces.md`).
pub fn detect_format(path: &Path) -> Result<Format, TraceError> {
    let name = path.display().to_string();
    let mut input = open_input(path)?;
    let mut buf = Vec::new();
    for line in 1..=1000u64 {
        buf.clear();
        match read_line(&mut input, &mut buf) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => return Err(TraceError::new(&name, Some(line), read_error(&e))),
        }
        if let Some((s, e)) = content(&buf, line == 1) {
            if let Some(f) = detect_line(&buf[s..e]) {
                return Ok(f);
            }
        }
    }
    Err(TraceError::new(
        &name,
        None,
        "cannot tell the trace format from its first lines; pass --trace-format \
         msr|spc|blkparse|disksim|fio",
    ))
}

fn is_majmin(b: &[u8]) -> bool {
    match b.iter().position(|&c| c == b',') {
        Some(i) => parse_u64(&b[..i]).is_some() && parse_u64(&b[i + 1..]).is_some(),
        None => false,
    }
}

fn detect_line(line: &[u8]) -> Option<Format> {
    if line.starts_with(b"fio version ") {
        return Some(Format::Fio);
    }
    let mut w = [&b""[..]; 6];
    let nw = split_ws(line, &mut w);
    if nw >= 6 && is_majmin(w[0]) && parse_u64(w[1]).is_some() {
        return Some(Format::Blkparse);
    }
    let mut c = [&b""[..]; 7];
    let nc = split_csv(line, &mut c);
    if nc >= 6
        && parse_u64(c[0]).is_some()
        && (c[3].eq_ignore_ascii_case(b"read") || c[3].eq_ignore_ascii_case(b"write"))
    {
        return Some(Format::Msr);
    }
    if nc >= 5 && parse_u64(c[1]).is_some() && matches!(c[3], b"r" | b"R" | b"w" | b"W") {
        return Some(Format::Spc);
    }
    if nc >= 6 && c[0].eq_ignore_ascii_case(b"timestamp") && c[1].eq_ignore_ascii_case(b"hostname")
    {
        return Some(Format::Msr);
    }
    if nc >= 5 && c[0].eq_ignore_ascii_case(b"asu") {
        return Some(Format::Spc);
    }
    if nc == 1
        && nw >= 5
        && parse_time_ns(w[0], 1).is_ok()
        && w[1..5].iter().all(|f| parse_u64_any(f).is_some())
    {
        return Some(Format::Disksim);
    }
    None
}

/// An MSR time stamp (100 ns Windows ticks) as nanoseconds since 1970, if it fits.
pub(crate) fn msr_time_ns(ticks: impl Into<i128>) -> Option<i64> {
    i64::try_from((ticks.into() - WINDOWS_EPOCH_TICKS) * 100).ok()
}

/// The message for an MSR time stamp outside 64-bit nanoseconds since 1970.
fn msr_range_error(field: &[u8]) -> String {
    let lo = WINDOWS_EPOCH_TICKS + i128::from(i64::MIN) / 100;
    let hi = WINDOWS_EPOCH_TICKS + i128::from(i64::MAX) / 100;
    format!(
        "timestamp '{}' is out of range ({lo} to {hi} ticks of 100 ns since 1601, the years \
         1677 to 2262: time stamps are kept as 64-bit nanoseconds since 1970)",
        show(field)
    )
}

/// What one line is.
enum Parsed {
    Rec {
        /// Absolute time in ns on the trace's own clock.
        t: i64,
        op: Op,
        lba: u64,
        sectors: u64,
        /// The record's disk (MSR DiskNumber, DiskSim devno) when no filter keeps one disk.
        dev: Option<u64>,
    },
    Zero,
    OtherDevice,
    Ignore,
}

/// The per-format line parser and its state.
struct Parser {
    fmt: Format,
    disk: Option<u64>,
    asu: Option<u64>,
    action: Vec<u8>,
    unit_ns: i64,
    /// A data line has been seen (header lines are only accepted before it).
    seen: bool,
    /// blkparse: inside a summary block (until the next event line).
    summary: bool,
    /// fio: 0 before the header line, else 2 or 3.
    fio_version: u8,
    /// fio v2: the clock advanced by `wait` actions.
    clock_ns: i64,
}

type PResult = Result<Parsed, String>;

fn sectors_of(offset: u64, bytes: u64) -> Result<(u64, u64), String> {
    let end = offset
        .checked_add(bytes)
        .ok_or_else(|| format!("offset {offset} + size {bytes} overflows"))?;
    let lba = offset / 512;
    Ok((lba, end.div_ceil(512) - lba))
}

impl Parser {
    #[inline]
    fn header_or(&mut self, field: &[u8], err: String) -> PResult {
        if !self.seen && is_word(field) {
            Ok(Parsed::Ignore)
        } else {
            Err(err)
        }
    }

    #[inline]
    fn parse(&mut self, line: &[u8]) -> PResult {
        match self.fmt {
            Format::Msr => self.msr(line),
            Format::Spc => self.spc(line),
            Format::Blkparse => self.blkparse(line),
            Format::Disksim => self.disksim(line),
            Format::Fio => self.fio(line),
        }
    }

    fn msr(&mut self, line: &[u8]) -> PResult {
        let mut f = [&b""[..]; 7];
        let n = split_csv(line, &mut f);
        let Some(ticks) = parse_u64(f[0]) else {
            let msg = if !f[0].is_empty() && f[0].iter().all(u8::is_ascii_digit) {
                // Digits only: a number beyond 64 bits.
                msr_range_error(f[0])
            } else {
                format!("timestamp '{}' is not a number of 100 ns ticks", show(f[0]))
            };
            return self.header_or(f[0], msg);
        };
        if n < 6 {
            return Err(format!(
                "expected 7 comma-separated fields \
                 Timestamp,Hostname,DiskNumber,Type,Offset,Size,ResponseTime, found {n}"
            ));
        }
        let disk = parse_u64(f[2])
            .ok_or_else(|| format!("disk number '{}' is not a number", show(f[2])))?;
        let op = if f[3].eq_ignore_ascii_case(b"read") {
            Op::Read
        } else if f[3].eq_ignore_ascii_case(b"write") {
            Op::Write
        } else {
            return Err(format!("type '{}' is neither Read nor Write", show(f[3])));
        };
        let offset =
            parse_u64(f[4]).ok_or_else(|| format!("offset '{}' is not a number", show(f[4])))?;
        let size =
            parse_u64(f[5]).ok_or_else(|| format!("size '{}' is not a number", show(f[5])))?;
        self.seen = true;
        if self.disk.is_some_and(|d| d != disk) {
            return Ok(Parsed::OtherDevice);
        }
        if size == 0 {
            return Ok(Parsed::Zero);
        }
        let t = msr_time_ns(ticks as i128).ok_or_else(|| msr_range_error(f[0]))?;
        let (lba, sectors) = sectors_of(offset, size)?;
        Ok(Parsed::Rec {
            t,
            op,
            lba,
            sectors,
            dev: self.disk.is_none().then_some(disk),
        })
    }

    fn spc(&mut self, line: &[u8]) -> PResult {
        let mut f = [&b""[..]; 5];
        let n = split_csv(line, &mut f);
        let Some(asu) = parse_u64(f[0]) else {
            return self.header_or(f[0], format!("ASU '{}' is not a number", show(f[0])));
        };
        if n < 5 {
            return Err(format!(
                "expected at least 5 comma-separated fields ASU,LBA,Size,Opcode,Timestamp, \
                 found {n}"
            ));
        }
        let lba = parse_u64(f[1]).ok_or_else(|| format!("LBA '{}' is not a number", show(f[1])))?;
        let size =
            parse_u64(f[2]).ok_or_else(|| format!("size '{}' is not a number", show(f[2])))?;
        let op = match f[3] {
            b"r" | b"R" => Op::Read,
            b"w" | b"W" => Op::Write,
            o => return Err(format!("opcode '{}' is neither r nor w", show(o))),
        };
        let t = parse_time_ns(f[4], 1_000_000_000).map_err(|e| {
            time_error(
                e,
                "timestamp",
                f[4],
                "not a number of seconds",
                1_000_000_000,
            )
        })?;
        self.seen = true;
        if self.asu.is_some_and(|a| a != asu) {
            return Ok(Parsed::OtherDevice);
        }
        if size == 0 {
            return Ok(Parsed::Zero);
        }
        Ok(Parsed::Rec {
            t,
            op,
            lba,
            sectors: size.div_ceil(512),
            dev: None,
        })
    }

    /// A blkparse line. The summary blkparse prints after the events (`CPU0 (8,0):`,
    /// `Total (8,0):`, `Throughput (R/W): ...`, `Events (8,0): ...` and their indented
    /// counters) is skipped up to the next event line, not to the end of the file: outputs
    /// of several blkparse runs (one per CPU or per device, or per capture) are commonly
    /// concatenated, each with its summary, and all their events are the trace. Summary
    /// lines never start like an event (`MAJ,MIN CPU ...`), so where a summary ends is
    /// unambiguous. `Input file ... added` lines, which begin each output, are skipped
    /// wherever they are.
    fn blkparse(&mut self, line: &[u8]) -> PResult {
        let mut f = [&b""[..]; 10];
        let n = split_ws(line, &mut f);
        if !is_majmin(f[0]) {
            let summary_start = (line.starts_with(b"CPU")
                && line.get(3).is_some_and(u8::is_ascii_digit))
                || line.starts_with(b"Total (")
                || line.starts_with(b"Throughput (")
                || line.starts_with(b"Events (");
            if summary_start {
                self.summary = true;
            }
            if self.summary || line.starts_with(b"Input file ") {
                return Ok(Parsed::Ignore);
            }
            return Err(format!(
                "'{}' is not a blkparse event line (MAJ,MIN CPU SEQ SEC.NSEC PID ACTION RWBS \
                 SECTOR + COUNT [PROC])",
                show(line)
            ));
        }
        // An event: any summary before it is over.
        self.summary = false;
        if n < 6 {
            return Err(format!(
                "expected at least 6 fields MAJ,MIN CPU SEQ SEC.NSEC PID ACTION, found {n}"
            ));
        }
        self.seen = true;
        if f[5] != self.action.as_slice() {
            return Ok(Parsed::Ignore);
        }
        if n < 7 {
            return Err("missing the RWBS field after the action".into());
        }
        let rwbs = f[6];
        let op = if rwbs.contains(&b'D') {
            Op::Trim
        } else if rwbs.contains(&b'W') {
            Op::Write
        } else if rwbs.contains(&b'R') {
            Op::Read
        } else {
            return Ok(Parsed::Ignore);
        };
        if n < 8 || f[7].first() == Some(&b'[') {
            // A flush or barrier without a sector range.
            return Ok(Parsed::Ignore);
        }
        let sector =
            parse_u64(f[7]).ok_or_else(|| format!("sector '{}' is not a number", show(f[7])))?;
        if n < 10 || f[8] != b"+" {
            return Err(format!(
                "expected 'SECTOR + COUNT' after RWBS '{}'",
                show(rwbs)
            ));
        }
        let count = parse_u64(f[9])
            .ok_or_else(|| format!("sector count '{}' is not a number", show(f[9])))?;
        let t = parse_time_ns(f[3], 1_000_000_000)
            .map_err(|e| time_error(e, "time", f[3], "not SEC.NSEC", 1_000_000_000))?;
        if count == 0 {
            return Ok(Parsed::Zero);
        }
        Ok(Parsed::Rec {
            t,
            op,
            lba: sector,
            sectors: count,
            dev: None,
        })
    }

    fn disksim(&mut self, line: &[u8]) -> PResult {
        let mut f = [&b""[..]; 5];
        let n = split_ws(line, &mut f);
        let t = match parse_time_ns(f[0], self.unit_ns) {
            Ok(t) => t,
            Err(e) => {
                let msg = time_error(e, "time", f[0], "not a number", self.unit_ns);
                return self.header_or(f[0], msg);
            }
        };
        if n < 5 {
            return Err(format!(
                "expected 5 fields TIME DEVNO BLKNO BCOUNT FLAGS, found {n}"
            ));
        }
        let dev = parse_u64_any(f[1])
            .ok_or_else(|| format!("device number '{}' is not a number", show(f[1])))?;
        let blk = parse_u64_any(f[2])
            .ok_or_else(|| format!("block number '{}' is not a number", show(f[2])))?;
        let count = parse_u64_any(f[3])
            .ok_or_else(|| format!("block count '{}' is not a number", show(f[3])))?;
        let flags = parse_u64_any(f[4])
            .ok_or_else(|| format!("flags '{}' are not a number", show(f[4])))?;
        self.seen = true;
        if self.disk.is_some_and(|d| d != dev) {
            return Ok(Parsed::OtherDevice);
        }
        if count == 0 {
            return Ok(Parsed::Zero);
        }
        Ok(Parsed::Rec {
            t,
            op: if flags & 1 == 1 { Op::Read } else { Op::Write },
            lba: blk,
            sectors: count,
            dev: self.disk.is_none().then_some(dev),
        })
    }

    fn fio(&mut self, line: &[u8]) -> PResult {
        if self.fio_version == 0 {
            if line.starts_with(b"fio version 2 iolog") {
                self.fio_version = 2;
                return Ok(Parsed::Ignore);
            }
            if line.starts_with(b"fio version 3 iolog") {
                self.fio_version = 3;
                return Ok(Parsed::Ignore);
            }
            return Err(format!(
                "expected the header 'fio version 2 iolog' or 'fio version 3 iolog', found '{}'",
                show(line)
            ));
        }
        let mut f = [&b""[..]; 5];
        let n = split_ws(line, &mut f);
        let (t, rest, m) = if self.fio_version == 3 {
            let t = parse_time_ns(f[0], self.unit_ns)
                .map_err(|e| time_error(e, "timestamp", f[0], "not a number", self.unit_ns))?;
            (t, &f[1..], n.saturating_sub(1))
        } else {
            (self.clock_ns, &f[..], n)
        };
        if m < 2 {
            return Err("expected FILENAME ACTION [OFFSET LENGTH]".into());
        }
        let action = rest[1];
        let op = match action {
            b"read" => Op::Read,
            b"write" => Op::Write,
            b"trim" => Op::Trim,
            b"add" | b"open" | b"close" | b"sync" | b"datasync" => {
                self.seen = true;
                return Ok(Parsed::Ignore);
            }
            b"wait" if self.fio_version == 2 => {
                if m < 3 {
                    return Err("wait needs a delay".to_string());
                }
                let d = parse_u64(rest[2]).ok_or_else(|| {
                    format!(
                        "wait: delay '{}' is not a whole number of time units (0 or more, below 2^64)",
                        String::from_utf8_lossy(rest[2])
                    )
                })?;
                // Beyond 64-bit nanoseconds the clock would saturate (or, before, wrap:
                // a delay above 2^63 was read as negative).
                self.clock_ns = i64::try_from(d)
                    .ok()
                    .and_then(|d| d.checked_mul(self.unit_ns))
                    .and_then(|d| self.clock_ns.checked_add(d))
                    .ok_or_else(|| {
                        format!(
                            "wait '{}' is out of range: the clock would pass {} {} (time \
                             stamps are kept as 64-bit nanoseconds, about 292 years)",
                            show(rest[2]),
                            super::parse::fmt_time(i64::MAX, self.unit_ns, 0),
                            super::parse::unit_name(self.unit_ns)
                        )
                    })?;
                return Ok(Parsed::Ignore);
            }
            a => return Err(format!("unknown fio iolog action '{}'", show(a))),
        };
        if m < 4 {
            return Err(format!(
                "{} needs OFFSET and LENGTH",
                String::from_utf8_lossy(action)
            ));
        }
        let offset = parse_u64(rest[2])
            .ok_or_else(|| format!("offset '{}' is not a number", show(rest[2])))?;
        let len = parse_u64(rest[3])
            .ok_or_else(|| format!("length '{}' is not a number", show(rest[3])))?;
        self.seen = true;
        if len == 0 {
            return Ok(Parsed::Zero);
        }
        let (lba, sectors) = sectors_of(offset, len)?;
        Ok(Parsed::Rec {
            t,
            op,
            lba,
            sectors,
            dev: None,
        })
    }
}

/// The fields of a record's line in `fmt` (at most 17 counted: more count as 17).
fn field_count(fmt: Format, line: &[u8]) -> usize {
    let mut f = [&b""[..]; 16];
    match fmt {
        Format::Msr | Format::Spc => split_csv(line, &mut f),
        Format::Blkparse | Format::Disksim | Format::Fio => split_ws(line, &mut f),
    }
}

/// A streaming reader of one trace file: an iterator of [`Record`]s.
pub struct TraceReader {
    input: BufReader<Box<dyn Read + Send>>,
    buf: Vec<u8>,
    file: String,
    line: u64,
    parser: Parser,
    first: Option<i64>,
    /// The fields of the first record's line ([`field_count`]): an MSR last line
    /// without a newline with fewer was cut short.
    first_fields: Option<usize>,
    max_rel: i64,
    limit: u64,
    skip_bad: bool,
    counts: Counts,
    done: bool,
}

impl TraceReader {
    /// Open `path` with `opts` (detecting the format when it is not given).
    pub fn open(path: &Path, opts: &TraceOptions) -> Result<TraceReader, TraceError> {
        let fmt = match opts.format {
            Some(f) => f,
            None => detect_format(path)?,
        };
        let name = path.display().to_string();
        // Before the file is opened (for reading or, by `convert`, for writing).
        check_options(fmt, opts).map_err(|e| TraceError::new(&name, None, e))?;
        let input = open_input(path)?;
        TraceReader::from_reader(&name, input, fmt, opts)
    }

    /// Read an already opened stream named `file` (for errors) in format `fmt`. Options
    /// that do not apply to `fmt` are refused ([`check_options`]).
    pub fn from_reader(
        file: &str,
        input: BufReader<Box<dyn Read + Send>>,
        fmt: Format,
        opts: &TraceOptions,
    ) -> Result<TraceReader, TraceError> {
        let action = check_options(fmt, opts).map_err(|e| TraceError::new(file, None, e))?;
        let default_unit = match fmt {
            Format::Fio => 1_000,
            _ => 1_000_000,
        };
        Ok(TraceReader {
            input,
            buf: Vec::with_capacity(256),
            file: file.to_string(),
            line: 0,
            parser: Parser {
                fmt,
                disk: opts.disk,
                asu: opts.asu,
                action: action.as_bytes().to_vec(),
                unit_ns: opts.time_unit.map_or(default_unit, |u| u.ns()),
                seen: false,
                summary: false,
                fio_version: 0,
                clock_ns: 0,
            },
            first: None,
            first_fields: None,
            max_rel: i64::MIN,
            limit: opts.limit.unwrap_or(u64::MAX),
            skip_bad: opts.skip_bad_lines,
            counts: Counts::default(),
            done: false,
        })
    }

    pub fn format(&self) -> Format {
        self.parser.fmt
    }

    pub fn file(&self) -> &str {
        &self.file
    }

    /// The line last read (that of the record last delivered), counting from 1.
    pub fn line(&self) -> u64 {
        self.line
    }

    /// What was seen so far besides the records.
    pub fn counts(&self) -> &Counts {
        &self.counts
    }

    fn bad(&mut self, msg: String) -> Option<Result<Record, TraceError>> {
        let e = TraceError::new(&self.file, Some(self.line), msg);
        if self.skip_bad {
            self.counts.skipped_bad_lines += 1;
            if self.counts.first_bad_line.is_none() {
                self.counts.first_bad_line = Some(e.to_string());
            }
            None
        } else {
            self.done = true;
            Some(Err(e))
        }
    }
}

impl Iterator for TraceReader {
    type Item = Result<Record, TraceError>;

    fn next(&mut self) -> Option<Result<Record, TraceError>> {
        if self.done {
            return None;
        }
        loop {
            if self.counts.records >= self.limit {
                self.done = true;
                return None;
            }
            self.buf.clear();
            match read_line(&mut self.input, &mut self.buf) {
                Ok(0) => {
                    self.done = true;
                    return None;
                }
                Ok(_) => {}
                Err(e) => {
                    self.done = true;
                    return Some(Err(TraceError::new(
                        &self.file,
                        Some(self.line + 1),
                        read_error(&e),
                    )));
                }
            }
            self.line += 1;
            self.counts.lines += 1;
            let Some((s, e)) = content(&self.buf, self.line == 1) else {
                continue;
            };
            match self.parser.parse(&self.buf[s..e]) {
                Ok(Parsed::Rec {
                    t,
                    op,
                    lba,
                    sectors,
                    dev,
                }) => {
                    let Ok(sectors) = u32::try_from(sectors) else {
                        match self.bad(format!("request of {sectors} sectors is too large")) {
                            Some(r) => return Some(r),
                            None => continue,
                        }
                    };
                    if lba.checked_add(sectors as u64).is_none() {
                        match self.bad(format!("sector {lba} + {sectors} overflows")) {
                            Some(r) => return Some(r),
                            None => continue,
                        }
                    }
                    let first = *self.first.get_or_insert(t);
                    let Some(rel) = t.checked_sub(first) else {
                        let msg = format!(
                            "time stamp is out of range: more than 2^63 ns (about 292 years) \
                             {} the first record's",
                            if t < first { "before" } else { "after" }
                        );
                        match self.bad(msg) {
                            Some(r) => return Some(r),
                            None => continue,
                        }
                    };
                    if rel < self.max_rel {
                        self.counts.out_of_order += 1;
                    } else {
                        self.max_rel = rel;
                    }
                    // An MSR file cut short inside its last line (a copy or download
                    // that stopped) can still parse, without its response time and with
                    // a shorter size: said when the line has no newline and fewer fields
                    // than the first record's (QA stop 35). MSR lines have a fixed
                    // shape; other formats' do not (blkparse process names with
                    // spaces, SPC's optional fields), and a cut inside a number cannot
                    // be told from a smaller one in any.
                    let line = &self.buf[s..e];
                    let first_fields = *self
                        .first_fields
                        .get_or_insert_with(|| field_count(self.parser.fmt, line));
                    if self.parser.fmt == Format::Msr && self.buf.last() != Some(&b'\n') {
                        let n = field_count(self.parser.fmt, line);
                        if n < first_fields {
                            let msg = format!(
                                "the last line ends without a newline and has {n} fields \
                                 where the first record has {first_fields}: the file looks \
                                 cut short"
                            );
                            match self.bad(msg) {
                                Some(r) => return Some(r),
                                None => continue,
                            }
                        }
                    }
                    if let Some(d) = dev {
                        self.counts.note_device(d);
                    }
                    self.counts.records += 1;
                    return Some(Ok(Record {
                        time_ns: rel,
                        op,
                        lba,
                        sectors,
                    }));
                }
                Ok(Parsed::Zero) => self.counts.skipped_zero_size += 1,
                Ok(Parsed::OtherDevice) => self.counts.skipped_other_device += 1,
                Ok(Parsed::Ignore) => self.counts.ignored_lines += 1,
                Err(msg) => {
                    if let Some(r) = self.bad(msg) {
                        return Some(r);
                    }
                }
            }
        }
    }
}
