//! One file per subcommand (or subcommand family). To add a subcommand: create
//! `cmd/NAME.rs` with an `Args` (or `Subcommand`) type and a `run` function, declare it
//! here, and add one variant plus one dispatch line to `Command` in `main.rs`. Shared
//! argument groups (device selection, report flags) live in [`common`] and
//! [`crate::output`].

pub mod bench;
pub mod blockdev;
pub mod common;
pub mod devices;
pub mod fms;
pub mod nand;
pub mod reproduce;
pub mod sim;
pub mod sweep;
pub mod torture;
pub mod trace;
