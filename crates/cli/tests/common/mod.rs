//! Helpers shared by the CLI test files: run the binary, check success, read its output.
#![allow(dead_code)]

use std::path::Path;
use std::process::{Command, Output};

/// Run `flashkit` with `args`.
pub fn flashkit<I, S>(args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    Command::new(env!("CARGO_BIN_EXE_flashkit"))
        .args(args)
        .output()
        .expect("run flashkit")
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Assert a zero exit (showing both streams otherwise) and pass the output on.
pub fn ok(o: Output) -> Output {
    assert!(
        o.status.success(),
        "flashkit failed: {:?}\nstdout: {}\nstderr: {}",
        o.status,
        text(&o.stdout),
        text(&o.stderr)
    );
    o
}

pub fn json(o: &Output) -> serde_json::Value {
    serde_json::from_slice(&o.stdout)
        .unwrap_or_else(|e| panic!("stdout is not JSON ({e}): {}", text(&o.stdout)))
}

pub fn path_str(p: &Path) -> &str {
    p.to_str().expect("UTF-8 path")
}
