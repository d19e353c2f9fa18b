//! Typed errors of the device model. Every flash rule violation has its own variant so the
//! layers above (and the tests) can tell them apart.

use thiserror::Error;

pub type Result<T, E = NandError> = std::result::Result<T, E>;

#[derive(Debug, Error)]
pub enum NandError {
    #[error("page {ppn} out of range (device has {pages} pages)")]
    PageOutOfRange { ppn: u64, pages: u64 },
    #[error("block {block} out of range (device has {blocks} blocks)")]
    BlockOutOfRange { block: u32, blocks: u32 },
    #[error("column range {col}+{len} exceeds page {ppn} ({raw} bytes with spare)")]
    ColumnOutOfRange {
        ppn: u64,
        col: u32,
        len: usize,
        raw: u32,
    },
    #[error("program of page {ppn} would set bit(s) from 0 to 1 at column {col} (only an erase sets bits)")]
    SetsBits { ppn: u64, col: u32 },
    #[error("page {ppn} already programmed {done} time(s); the device allows {nop} partial programs per erase")]
    NopExceeded { ppn: u64, done: u32, nop: u32 },
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
    Config(String),
    #[error("image {path}: {msg}")]
    Image { path: String, msg: String },
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
}

impl NandError {
    /// True for the error every operation returns after a power cut.
    pub fn is_power_loss(&self) -> bool {
        matches!(self, NandError::PowerLoss)
    }
}
