//! # nand — the flash device model
//!
//! The lowest layer of flashkit. It models raw flash exactly enough that every layer above
//! is forced to obey what real parts obey:
//!
//! * a program may only clear bits (1→0); setting a 0 bit back to 1 is [`NandError::SetsBits`];
//! * a page may be programmed at most `nop` times between erases ([`NandError::NopExceeded`]);
//!   `nop = 0` models NOR-style unlimited bit clearing;
//! * on in-order (MLC) devices page k of a block cannot be programmed before page k−1 or
//!   after a later page ([`NandError::OutOfOrder`]);
//! * erase sets the whole block, data and spare, to 0xFF; reads never change state;
//! * blocks wear out: the erase after `endurance` cycles fails and the block goes bad;
//!   factory-bad blocks, injected bit flips and program/erase failures are available;
//! * a [`FaultPlan`] cuts power at the N-th program or erase, tearing it; every later
//!   operation fails with [`NandError::PowerLoss`] and reopening the store shows exactly
//!   what reached the medium.
//!
//! Every operation advances a virtual clock by the preset's latency and is counted.
//! Stores: [`RamStore`], [`image::ImageStore`] (a self-describing image file), and the
//! payload-less [`PayloadlessStore`] for simulation mode.
//!
//! [`blockdev::BlockDevice`] is the disk-like interface every FTL and cache implements.

pub mod bch;
pub mod blockdev;
pub mod cgroup;
mod device;
pub mod ecc;
mod error;
mod geometry;
pub mod image;
mod store;
pub mod table;

pub use device::{Counters, Data, FaultPlan, Nand, TornMode, WearStats};
pub use error::{ColumnRange, ImageError, NandError, PageRange, Result};
pub use geometry::{presets, quoted_number, DeviceSpec, FlatSpec, Geometry, Timing};
pub use store::{BadState, BlockInfo, PayloadlessStore, RamStore, Span, Store};
pub use table::{available_ram, table};
