//! Recording a block trace: [`Recorder`] passes every request on to the device it wraps
//! and writes it to a [`TraceWriter`] first, time-stamped with the wall-clock time since
//! the recorder was made. `flashkit blockdev mount --record FILE` wraps the FMS in one, so
//! what real programs (mkfs.fat, mtools, fio, a file system's own I/O) asked of the device
//! becomes a trace that `flashkit sim --workload trace:FILE` replays on any configuration.
//!
//! Reads, writes and trims are recorded as they are issued, whatever their outcome; a
//! flush is not (no trace format has one). A trace that cannot be written (a full disk)
//! stops the recording, not the device: the first error is kept and [`Recorder::finish`]
//! returns it.

use std::time::Instant;

use nand::blockdev::{BlockDevice, DevResult};

use super::{Record, TraceError, TraceWriter, WriteSummary};
use crate::driver::Op;

/// A block device whose requests are written to a trace.
pub struct Recorder<D> {
    dev: D,
    out: Option<TraceWriter>,
    t0: Instant,
    error: Option<TraceError>,
}

impl<D: BlockDevice> Recorder<D> {
    pub fn new(dev: D, out: TraceWriter) -> Self {
        Recorder {
            dev,
            out: Some(out),
            t0: Instant::now(),
            error: None,
        }
    }

    /// The device, for what the recorder does not pass on.
    pub fn device(&self) -> &D {
        &self.dev
    }

    fn record(&mut self, op: Op, lba: u64, count: u32) {
        if let Some(w) = self.out.as_mut() {
            let r = Record {
                time_ns: self.t0.elapsed().as_nanos().min(i64::MAX as u128) as i64,
                op,
                lba,
                sectors: count,
            };
            if let Err(e) = w.write(&r) {
                self.error = Some(e);
                self.out = None;
            }
        }
    }

    /// Finish the trace: the device back, and what was written (or the first error).
    pub fn finish(self) -> (D, Result<WriteSummary, TraceError>) {
        let r = match (self.error, self.out) {
            (Some(e), _) => Err(e),
            (None, Some(w)) => w.finish(),
            (None, None) => unreachable!("the writer is dropped only on an error"),
        };
        (self.dev, r)
    }
}

impl<D: BlockDevice> BlockDevice for Recorder<D> {
    fn sectors(&self) -> u64 {
        self.dev.sectors()
    }

    fn read(&mut self, lba: u64, count: u32, buf: Option<&mut [u8]>) -> DevResult<()> {
        self.record(Op::Read, lba, count);
        self.dev.read(lba, count, buf)
    }

    fn write(&mut self, lba: u64, count: u32, data: Option<&[u8]>) -> DevResult<()> {
        self.record(Op::Write, lba, count);
        self.dev.write(lba, count, data)
    }

    fn trim(&mut self, lba: u64, count: u32) -> DevResult<()> {
        self.record(Op::Trim, lba, count);
        self.dev.trim(lba, count)
    }

    fn flush(&mut self) -> DevResult<()> {
        self.dev.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::{Format, TraceOptions, TraceReader};

    /// A RAM disk of 512-byte sectors.
    struct Ram(Vec<u8>);

    impl BlockDevice for Ram {
        fn sectors(&self) -> u64 {
            self.0.len() as u64 / 512
        }
        fn read(&mut self, lba: u64, count: u32, buf: Option<&mut [u8]>) -> DevResult<()> {
            let a = lba as usize * 512;
            if let Some(b) = buf {
                b.copy_from_slice(&self.0[a..a + count as usize * 512]);
            }
            Ok(())
        }
        fn write(&mut self, lba: u64, count: u32, data: Option<&[u8]>) -> DevResult<()> {
            let a = lba as usize * 512;
            if let Some(d) = data {
                self.0[a..a + count as usize * 512].copy_from_slice(d);
            }
            Ok(())
        }
        fn trim(&mut self, lba: u64, count: u32) -> DevResult<()> {
            let a = lba as usize * 512;
            self.0[a..a + count as usize * 512].fill(0);
            Ok(())
        }
        fn flush(&mut self) -> DevResult<()> {
            Ok(())
        }
    }

    /// Requests pass through unchanged and come back from the trace in order, in every
    /// format (trims left out where the format has none).
    #[test]
    fn requests_are_recorded_in_order() {
        let dir = tempfile::tempdir().unwrap();
        for fmt in Format::ALL {
            let path = dir.path().join(format!("t.{}", fmt.name()));
            let w = TraceWriter::create(&path, fmt, false).unwrap();
            let mut r = Recorder::new(Ram(vec![0; 64 * 512]), w);
            r.write(3, 2, Some(&[7u8; 1024])).unwrap();
            let mut b = [0u8; 1024];
            r.read(3, 2, Some(&mut b)).unwrap();
            assert_eq!(b, [7u8; 1024]);
            r.trim(4, 1).unwrap();
            r.flush().unwrap();
            r.write(10, 8, Some(&[1u8; 4096])).unwrap();
            let (dev, s) = r.finish();
            let s = s.unwrap();
            assert_eq!(&dev.0[3 * 512..4 * 512], &[7u8; 512]);
            assert!(dev.0[4 * 512..5 * 512].iter().all(|&x| x == 0));
            let mut want = vec![(Op::Write, 3, 2), (Op::Read, 3, 2)];
            if fmt.can_trim() {
                want.push((Op::Trim, 4, 1));
            }
            want.push((Op::Write, 10, 8));
            assert_eq!(s.records, want.len() as u64, "{fmt}");
            let opts = TraceOptions {
                format: Some(fmt),
                ..Default::default()
            };
            let got: Vec<_> = TraceReader::open(&path, &opts)
                .unwrap()
                .map(|r| r.unwrap())
                .map(|r| (r.op, r.lba, r.sectors))
                .collect();
            assert_eq!(got, want, "{fmt}");
        }
    }
}
