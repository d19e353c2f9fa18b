//! # sim — workloads, the simulation driver, reports, reproductions, torture
//!
//! Drives the FTLs of `ftl` with synthetic workloads or block traces ([`trace`]) on the
//! payload-less device model and reports erasures, copies, wear, write amplification,
//! device time and RAM. The code under test is the storage-mode code: only the data
//! buffers are absent.

pub mod driver;
pub mod plot;
pub mod ram;
pub mod reproduce;
pub mod speed;
pub mod staged;
pub mod sweep;
pub mod torture;
pub mod trace;
pub mod workload;

pub use driver::{run, run_all, Arrival, SimConfig, SimResult};
pub use workload::{Workload, WorkloadSpec};
