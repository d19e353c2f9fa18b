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

/// `n` bytes of a xorshift stream from `seed`: test data that differs everywhere.
pub fn pattern(n: usize, seed: u32) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

/// Format `img` as a `device` image of `blocks` erase blocks, then as an FMS of
/// `block_size` blocks; the output of the first command that fails, or of the FMS format.
pub fn fms_image_at(img: &Path, device: &str, blocks: &str, block_size: &str) -> Output {
    let o = flashkit([
        "nand",
        "format",
        path_str(img),
        "--device",
        device,
        "--blocks",
        blocks,
    ]);
    if !o.status.success() {
        return o;
    }
    flashkit(["fms", "format", path_str(img), "--block-size", block_size])
}

/// Run `flashkit` with `args` in the directory `dir` (for relative paths).
pub fn flashkit_in<I, S>(dir: &Path, args: I) -> Output
where
    I: IntoIterator<Item = S>,
    S: AsRef<std::ffi::OsStr>,
{
    Command::new(env!("CARGO_BIN_EXE_flashkit"))
        .current_dir(dir)
        .args(args)
        .output()
        .expect("run flashkit")
}

/// A failure as the product contract wants it: exit status 1 (no panic) and exactly one
/// `flashkit: …` line on stderr, mentioning every needle. Returns the line.
pub fn fails_with_all(o: Output, needles: &[&str]) -> String {
    let err = text(&o.stderr);
    assert_eq!(o.status.code(), Some(1), "stderr: {err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(!err.contains("RUST_BACKTRACE"), "panic: {err}");
    assert_eq!(err.lines().count(), 1, "one line: {err:?}");
    assert!(err.starts_with("flashkit: "), "{err}");
    for n in needles {
        assert!(err.contains(n), "stderr should mention {n:?}: {err}");
    }
    err
}

/// Damage the header of segment 1 of an Intel-card image of 16 erase blocks (32 pages of
/// 4 KiB) in place, as bits flipped for good would: the data area ends the file
/// (docs/format/nand-image.md), and byte 20 of a header is in its erase sequence. The
/// blocks whose newest copies it holds become lost.
#[allow(dead_code)]
pub fn damage_intel_segment_1_header(img: &Path) {
    let mut bytes = std::fs::read(img).unwrap();
    let data_off = bytes.len() - 16 * 32 * 4096;
    bytes[data_off + 32 * 4096 + 20] ^= 0x03;
    std::fs::write(img, &bytes).unwrap();
}

/// The block numbers of `fms info --json`'s `lost_blocks`.
#[allow(dead_code)]
pub fn lost_block_numbers(info: &serde_json::Value) -> Vec<u64> {
    info["lost_blocks"]
        .as_array()
        .unwrap_or_else(|| panic!("{info}"))
        .iter()
        .map(|s| s["block"].as_u64().unwrap())
        .collect()
}
