//! # ftl — flash translation layers
//!
//! Block devices over raw flash ([`nand::Nand`]). Each FTL implements
//! [`nand::blockdev::BlockDevice`] and runs unchanged in storage mode (real bytes) and in
//! simulation mode (payload-less device, `None` buffers).
//!
//! * [`fms`] — the Flash Memory Server of Chiang & Chang (cleaning policies greedy,
//!   cost-benefit, CAT, adaptive; redistribution M1–M6; DAC regions; wear levelling).

pub mod fms;

pub use nand::blockdev::{BlockDevice, DevError, DevResult, SECTOR};
