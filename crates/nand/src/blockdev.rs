//! The block-device interface: everything that looks like a disk (FTLs, caches).
//!
//! Addresses are 512-byte sectors. Every call has a payload-less form — pass `None` for
//! the buffer — used by simulation mode, so the same FTL code runs with or without data.
//!
//! ## What `flush` promises
//! When `flush` returns `Ok`, every write and trim that returned `Ok` before the flush was
//! called survives a power loss: after the device is reopened, each such sector reads back
//! the content of its last acknowledged write (or zeros if it was trimmed and not written
//! since). Writes acknowledged after the last completed flush may or may not survive, but a
//! sector never reads back content that was never written to it. Implementations may make
//! writes durable earlier than the flush (the FMS does: each block write is durable when it
//! returns), but callers may rely only on `flush`.

use thiserror::Error;

use crate::NandError;

/// Bytes per sector.
pub const SECTOR: usize = 512;

/// Like [`NandError`], two words: wider details are boxed (they only occur on errors), so
/// every FTL result comes back in registers (pinned by a test below).
#[derive(Debug, Error)]
pub enum DevError {
    #[error("sectors {}+{} beyond the end of the device ({} sectors)", .0.lba, .0.count, .0.sectors)]
    OutOfRange(Box<SectorRange>),
    #[error("buffer of {} bytes for {} sectors (need {})", .0.got, .0.count, .0.need)]
    BadBuffer(Box<BufferSize>),
    #[error("device full: no free space left after cleaning")]
    NoSpace,
    #[error("device worn out: {bad} of {blocks} erase blocks went bad in use (worn out or failing), and no free space is left")]
    WornOut { bad: u32, blocks: u32 },
    #[error("power lost")]
    PowerLoss,
    #[error("uncorrectable data at sector {lba}")]
    Uncorrectable { lba: u64 },
    /// A read of data the device knows it lost (an FTL's block whose newest copy sits
    /// behind damaged metadata); writing or trimming it ends the loss.
    #[error("lost data at sector {lba}: its newest copy is behind a damaged segment header (writing or trimming it ends this)")]
    Lost { lba: u64 },
    #[error("corrupt or foreign medium: {0}")]
    Corrupt(Box<String>),
    #[error("configuration: {0}")]
    Config(Box<String>),
    #[error("flash: {0}")]
    Flash(NandError),
}

/// A request beyond the end of a device.
#[derive(Debug)]
pub struct SectorRange {
    pub lba: u64,
    pub count: u64,
    pub sectors: u64,
}

/// A buffer whose length does not match its request.
#[derive(Debug)]
pub struct BufferSize {
    pub count: u64,
    pub got: usize,
    pub need: usize,
}

impl DevError {
    /// A corrupt or foreign medium.
    pub fn corrupt(msg: impl Into<String>) -> DevError {
        DevError::Corrupt(Box::new(msg.into()))
    }
    /// A configuration error.
    pub fn config(msg: impl Into<String>) -> DevError {
        DevError::Config(Box::new(msg.into()))
    }
    /// `count` sectors at `lba` do not fit in `sectors`.
    pub fn out_of_range(lba: u64, count: u64, sectors: u64) -> DevError {
        DevError::OutOfRange(Box::new(SectorRange {
            lba,
            count,
            sectors,
        }))
    }
}

impl From<NandError> for DevError {
    fn from(e: NandError) -> Self {
        match e {
            NandError::PowerLoss => DevError::PowerLoss,
            e => DevError::Flash(e),
        }
    }
}

pub type DevResult<T> = std::result::Result<T, DevError>;

/// A disk of 512-byte sectors.
pub trait BlockDevice {
    /// Capacity in sectors.
    fn sectors(&self) -> u64;
    /// Read `count` sectors from `lba` into `buf` (`count × 512` bytes), or only account
    /// for the read when `buf` is `None`. Never-written and trimmed sectors read as zeros.
    fn read(&mut self, lba: u64, count: u32, buf: Option<&mut [u8]>) -> DevResult<()>;
    /// Write `count` sectors at `lba` from `data`, or without payload when `None`.
    fn write(&mut self, lba: u64, count: u32, data: Option<&[u8]>) -> DevResult<()>;
    /// Declare sectors unused.
    fn trim(&mut self, lba: u64, count: u32) -> DevResult<()>;
    /// Make everything acknowledged so far durable (see the module docs).
    fn flush(&mut self) -> DevResult<()>;
    /// Capacity in bytes.
    fn capacity_bytes(&self) -> u64 {
        self.sectors() * SECTOR as u64
    }
}

/// Check a request against the capacity and the buffer length.
pub fn check_request(sectors: u64, lba: u64, count: u32, buf_len: Option<usize>) -> DevResult<()> {
    if lba
        .checked_add(count as u64)
        .is_none_or(|end| end > sectors)
    {
        return Err(DevError::out_of_range(lba, count as u64, sectors));
    }
    if let Some(got) = buf_len {
        let need = count as usize * SECTOR;
        if got != need {
            return Err(DevError::BadBuffer(Box::new(BufferSize {
                count: count as u64,
                got,
                need,
            })));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_results_stay_two_words() {
        assert!(std::mem::size_of::<DevResult<()>>() <= 16);
    }
}
