//! `flashkit fms`: the FMS in storage mode on an image file, across processes.

mod common;
use common::*;
use std::path::Path;

fn run_ok(args: &[&str]) -> String {
    let out = flashkit(args);
    assert!(
        out.status.success(),
        "flashkit {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `fms info IMG --json`, parsed.
fn info_json(img: &str) -> serde_json::Value {
    serde_json::from_str(&run_ok(&["fms", "info", img, "--json"])).unwrap()
}

/// Create `img`, an erased NAND image of `device` with `blocks` erase blocks (and `nand
/// format`'s `extra` options).
fn nand_image(img: &str, device: &str, blocks: &str, extra: &[&str]) {
    let mut args = vec![
        "nand", "format", img, "--device", device, "--blocks", blocks,
    ];
    args.extend_from_slice(extra);
    run_ok(&args);
}

/// The first `len` bytes of FMS image `img`, read by `fms read` into a file in `dir`.
fn read_all(img: &str, len: usize, dir: &Path) -> Vec<u8> {
    let out = dir.join("o.bin");
    ok(flashkit([
        "fms",
        "read",
        img,
        "--length",
        &len.to_string(),
        "--output",
        path_str(&out),
    ]));
    std::fs::read(&out).unwrap()
}

/// Format `img` as a `device` image of `blocks` erase blocks, then as an FMS of
/// `block_size` blocks.
fn fms_image(img: &str, device: &str, blocks: &str, block_size: &str) {
    ok(fms_image_at(Path::new(img), device, blocks, block_size));
}

/// `card.img` in `dir`: an Intel card of 16 erase blocks, an FMS of 4 KiB blocks, and
/// `len` bytes of `pattern(len, seed)` written from offset 0. Returns its path.
fn written_card(dir: &Path, len: usize, seed: u32) -> String {
    let img = dir.join("card.img");
    let img = path_str(&img).to_string();
    fms_image(&img, "intel-series2plus-24m", "16", "4KiB");
    let input = dir.join("in.bin");
    std::fs::write(&input, pattern(len, seed)).unwrap();
    run_ok(&["fms", "write", &img, "--input", path_str(&input)]);
    img
}

#[test]
fn format_write_read_across_processes_on_nand_and_nor() {
    let dir = tempfile::tempdir().unwrap();
    for (device, blocks, bs) in [
        ("nandsim-256m", "64", "1KiB"),
        ("intel-series2plus-24m", "12", "4KiB"),
    ] {
        let img = dir.path().join(format!("{device}.img"));
        let img = img.to_str().unwrap();
        nand_image(img, device, blocks, &[]);
        let formatted: serde_json::Value = serde_json::from_str(&run_ok(&[
            "fms",
            "format",
            img,
            "--block-size",
            bs,
            "--json",
        ]))
        .unwrap();
        assert_eq!(
            formatted["block_size"].as_u64(),
            parse_bs(bs),
            "{device}: {formatted}"
        );
        assert!(
            formatted["format_time_s"].as_f64().unwrap() > 0.0,
            "{formatted}"
        );
        let formatted_blocks = formatted["logical_blocks"].clone();
        // Several overwrites so the cleaner runs; a partial last sector keeps the rest.
        let input = dir.path().join("in.bin");
        let mut expect = vec![0u8; 200 * 1024];
        for round in 0..12u32 {
            let data = pattern(150_000 + round as usize, round + 1);
            let off = (round as usize % 3) * 8192;
            std::fs::write(&input, &data).unwrap();
            run_ok(&[
                "fms",
                "write",
                img,
                "--offset",
                &off.to_string(),
                "--input",
                input.to_str().unwrap(),
            ]);
            expect[off..off + data.len()].copy_from_slice(&data);
        }
        let back = dir.path().join("back.bin");
        run_ok(&[
            "fms",
            "read",
            img,
            "--offset",
            "0",
            "--length",
            &expect.len().to_string(),
            "--output",
            back.to_str().unwrap(),
        ]);
        assert!(
            std::fs::read(&back).unwrap() == expect,
            "{device}: read back differs"
        );
        let info: serde_json::Value =
            serde_json::from_str(&run_ok(&["fms", "info", img, "--json"])).unwrap();
        for key in [
            "logical_blocks",
            "capacity_bytes",
            "free_segments",
            "wear_max",
            "wear_stddev",
            "mount_time_s",
        ] {
            assert!(info.get(key).is_some(), "{device}: info lacks {key}");
        }
        assert!(
            info["wear_max"].as_u64().unwrap() > 1,
            "{device}: the cleaner never ran"
        );
        assert!(info["mount_time_s"].as_f64().unwrap() > 0.0);
        assert_eq!(info["logical_blocks"], formatted_blocks, "{device}");
        // Written by commands that each flushed before exiting: the mount found nothing
        // to repair.
        for key in [
            "torn_records",
            "stale_live_copies",
            "unreadable_trim_lists",
            "grown_bad_read",
            "index_lost",
            "mount_dirty_segments",
            "read_retries",
        ] {
            assert_eq!(info[key], 0, "{device}: {key}");
        }
        // The contract's names only (erase_* was renamed to wear_*).
        assert!(info.get("erase_max").is_none(), "{info}");
        let text = run_ok(&["fms", "info", img]);
        assert!(
            text.lines()
                .any(|l| l.starts_with("mount found ") && l.trim_end().ends_with(" clean")),
            "{device}: {text}"
        );
        // Every segment is in exactly one of the listed states.
        let states: u64 = ["free", "used", "active", "dirty", "bad", "index"]
            .iter()
            .map(|k| info[format!("{k}_segments")].as_u64().unwrap())
            .sum();
        assert_eq!(Some(states), info["segments"].as_u64(), "{device}");
        // The segment table (`--segments`) adds up to the summary: a row per segment,
        // the states counted alike, the erase counts' extremes, the valid blocks the
        // mapped blocks and live trim lists.
        let rows: Vec<serde_json::Value> =
            serde_json::from_str(&run_ok(&["fms", "info", img, "--segments", "--json"])).unwrap();
        assert_eq!(
            Some(rows.len() as u64),
            info["segments"].as_u64(),
            "{device}"
        );
        for (i, r) in rows.iter().enumerate() {
            assert_eq!(r["segment"], i as u64, "{device}");
            assert_eq!(
                r["stream"].is_null(),
                r["state"] != "active",
                "{device}: {r}"
            );
            assert!(
                r["used_slots"].as_u64() >= r["valid_blocks"].as_u64(),
                "{r}"
            );
        }
        for k in ["free", "used", "active", "dirty", "bad", "index"] {
            let n = rows.iter().filter(|r| r["state"] == k).count() as u64;
            assert_eq!(
                Some(n),
                info[format!("{k}_segments")].as_u64(),
                "{device}: {k}"
            );
        }
        // Rows read from a summary: as many as the summary says, each a full segment.
        let summarised: Vec<&serde_json::Value> =
            rows.iter().filter(|r| r["summary"] == true).collect();
        assert_eq!(
            Some(summarised.len() as u64),
            info["summaries_read"].as_u64(),
            "{device}"
        );
        assert!(
            summarised
                .iter()
                .all(|r| r["used_slots"] == info["blocks_per_segment"]),
            "{device}"
        );
        assert_eq!(summarised.is_empty(), device != "nandsim-256m", "{device}");
        let good = rows.iter().filter(|r| r["state"] != "bad");
        let max = good
            .clone()
            .map(|r| r["erase_count"].as_u64().unwrap())
            .max();
        let min = good.map(|r| r["erase_count"].as_u64().unwrap()).min();
        assert_eq!(
            (min, max),
            (info["wear_min"].as_u64(), info["wear_max"].as_u64())
        );
        let valid: u64 = rows
            .iter()
            .map(|r| r["valid_blocks"].as_u64().unwrap())
            .sum();
        assert_eq!(
            valid,
            info["mapped_blocks"].as_u64().unwrap() + info["trim_lists"].as_u64().unwrap(),
            "{device}"
        );
        let csv = dir.path().join("segments.csv");
        let text = run_ok(&[
            "fms",
            "info",
            img,
            "--segments",
            "--csv",
            csv.to_str().unwrap(),
        ]);
        assert_eq!(
            text.lines().count(),
            rows.len() + 2,
            "{device}: header, rule, rows"
        );
        let csv = std::fs::read_to_string(&csv).unwrap();
        assert_eq!(csv.lines().count(), rows.len() + 1, "{device}");
        assert!(csv.starts_with("segment,state,bad,erase_count,valid_blocks,used_slots,"));
    }
}

fn parse_bs(bs: &str) -> Option<u64> {
    bs.strip_suffix("KiB")?
        .parse::<u64>()
        .ok()
        .map(|k| k * 1024)
}

#[test]
fn unformatted_or_foreign_images_are_one_line_errors() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("raw.img");
    let img = img.to_str().unwrap();
    nand_image(img, "mlc2-2g", "16", &[]);
    for args in [
        vec!["fms", "info", img],
        vec!["fms", "read", img, "--length", "512"],
        vec!["fms", "info", "/dev/null"],
    ] {
        let out = flashkit(&args);
        assert!(!out.status.success(), "{args:?} must fail");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.starts_with("flashkit: ") && !err.contains("panicked"),
            "{err}"
        );
    }
    run_ok(&["fms", "format", img, "--block-size", "2KiB"]);
    let out = flashkit(["fms", "read", img, "--offset", "100", "--length", "5"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--offset"));
}

/// `fms read --output` naming the image itself is refused before anything is written.
#[test]
fn read_refuses_to_overwrite_the_image() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("card.img");
    let img = img.to_str().unwrap();
    run_ok(&["nand", "format", img, "--device", "intel-series2plus-24m"]);
    run_ok(&["fms", "format", img]);
    let before = std::fs::read(img).unwrap();
    for args in [
        vec!["fms", "read", img, "--length", "4096", "--output", img],
        // A report's --csv naming the image would replace it too.
        vec!["fms", "info", img, "--csv", img],
        vec!["fms", "format", img, "--csv", img],
        vec!["nand", "info", img, "--csv", img],
    ] {
        let out = flashkit(&args);
        assert!(!out.status.success(), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains("is the image being"), "{args:?}: {err}");
    }
    assert!(
        std::fs::read(img).unwrap() == before,
        "the image was modified"
    );
}

/// Offsets and lengths are exact byte counts: a fraction of a byte or a value past 2^64 is
/// an error naming the flag (never rounded or clamped), and values above 2^53 keep every
/// byte.
#[test]
fn offsets_and_lengths_are_exact() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("i.img");
    let img = img.to_str().unwrap();
    fms_image(img, "nandsim-256m", "32", "1KiB");
    let input = dir.path().join("in.bin");
    std::fs::write(&input, pattern(1024, 7)).unwrap();
    let input = input.to_str().unwrap();
    let fails = |args: &[&str], needles: &[&str]| {
        let out = flashkit(args);
        let err = text(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(err.starts_with("flashkit: "), "{err}");
        for n in needles {
            assert!(err.contains(n), "{args:?}: {err} lacks {n:?}");
        }
    };
    fn write<'a>(img: &'a str, input: &'a str, offset: &'a str) -> Vec<&'a str> {
        vec!["fms", "write", img, "--input", input, "--offset", offset]
    }
    fails(
        &write(img, input, "511.6"),
        &["--offset", "'511.6'", "whole number of bytes"],
    );
    fails(
        &["fms", "read", img, "--length", "100.4"],
        &["--length", "'100.4'", "whole number of bytes"],
    );
    // A multiple of 512 above 2^53 is read exactly (and does not fit the device).
    fails(
        &write(img, input, "18446744073709551104"),
        &["at offset 18446744073709551104 do not fit"],
    );
    fails(
        &["fms", "read", img, "--length", "18446744073709551616"],
        &["--length", "too large"],
    );
    fails(
        &write(img, input, "18446744073709551616"),
        &["--offset", "too large"],
    );
    fails(
        &["fms", "format", img, "--block-size", "18446744073709551616"],
        &["--block-size", "too large"],
    );
    // Whole numbers of bytes with a fraction of a unit still work.
    run_ok(&write(img, input, "0.5KiB"));
    let out = flashkit(["fms", "read", img, "--offset", "512", "--length", "0.25KiB"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert_eq!(out.stdout, pattern(1024, 7)[..256]);
}

/// `nand info`, `fms info` and `fms read` open the image read-only and never change it,
/// even when the mount repairs something (here it recreates a lost index segment): the
/// repair stays in RAM, and the reports and bytes read are those of a writable mount.
#[test]
fn inspection_commands_never_write_the_image() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("lost-index.img");
    let img = img.to_str().unwrap();
    fms_image(img, "intel-series2plus-24m", "8", "1KiB");
    let input = dir.path().join("in.bin");
    let data = pattern(5000, 3);
    std::fs::write(&input, &data).unwrap();
    run_ok(&["fms", "write", img, "--input", input.to_str().unwrap()]);
    // Erase the index segment's header (segment 0; data bytes are stored inverted, so
    // file zeros are erased flash): the next mount finds no index and makes a new one.
    let mut bytes = std::fs::read(img).unwrap();
    let data_off = u64::from_le_bytes(bytes[184..192].try_into().unwrap()) as usize;
    bytes[data_off..data_off + 64].fill(0);
    std::fs::write(img, &bytes).unwrap();
    let mut perm = std::fs::metadata(img).unwrap().permissions();
    perm.set_readonly(true);
    std::fs::set_permissions(img, perm.clone()).unwrap();

    let info: serde_json::Value =
        serde_json::from_str(&run_ok(&["fms", "info", img, "--json"])).unwrap();
    assert_eq!(info["index_segments"], 1, "{info}");
    assert_eq!(info["mapped_blocks"], 5, "{info}");
    run_ok(&["nand", "info", img]);
    read_leaves_the_image(img, &data, &bytes);

    // A write needs write access, and its mount makes the repair on the image.
    #[allow(clippy::permissions_set_readonly_false)]
    perm.set_readonly(false);
    std::fs::set_permissions(img, perm).unwrap();
    run_ok(&[
        "fms",
        "write",
        img,
        "--offset",
        "8192",
        "--input",
        input.to_str().unwrap(),
    ]);
    assert!(std::fs::read(img).unwrap() != bytes);
    let info: serde_json::Value =
        serde_json::from_str(&run_ok(&["fms", "info", img, "--json"])).unwrap();
    assert_eq!(info["index_segments"], 1, "{info}");
    assert_eq!(info["mapped_blocks"], 10, "{info}");
}

/// A medium worn out by writes: the write that finds no space left fails with one line
/// naming the image, and the medium still mounts and reads back what was written (a single
/// grown-bad segment used to make it unmountable: "logical_blocks … does not fit").
#[test]
fn a_worn_out_image_says_so_and_stays_readable() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("worn.img");
    let img = img.to_str().unwrap();
    nand_image(img, "intel-series2plus-24m", "8", &["--endurance", "3"]);
    run_ok(&["fms", "format", img, "--block-size", "4KiB"]);
    let input = dir.path().join("in.bin");
    // Each rewrite with other bytes, so that what a failed one wrote shows.
    let (mut err, mut data, mut before) = (None, Vec::new(), Vec::new());
    for i in 0..40 {
        before = std::mem::replace(&mut data, pattern(100_000, 9 + i));
        std::fs::write(&input, &data).unwrap();
        let out = flashkit(["fms", "write", img, "--input", input.to_str().unwrap()]);
        if !out.status.success() {
            err = Some(text(&out.stderr));
            break;
        }
    }
    let err = err.expect("an endurance of 3 cannot last 40 rewrites");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.starts_with(&format!("flashkit: {img}: write: device worn out")),
        "{err}"
    );
    // It says how much of the input reached the medium; the reads below show it did.
    let written: usize = match err.split("; the first ").nth(1) {
        Some(rest) => rest.split(' ').next().unwrap().parse().unwrap(),
        None => {
            assert!(err.contains("nothing was written"), "{err}");
            0
        }
    };
    assert!(
        err.contains("nothing after it was written") || written == 0,
        "{err}"
    );
    let info: serde_json::Value =
        serde_json::from_str(&run_ok(&["fms", "info", img, "--json"])).unwrap();
    assert!(info["bad_segments"].as_u64().unwrap() > 0, "{info}");
    // Its lifetime as `fms info` tells it: every bad segment grew bad in use, the
    // most-erased segment has used its life up, and no spare segment is left.
    assert_eq!(info["endurance"], 3, "{info}");
    assert_eq!(info["factory_bad_segments"], 0, "{info}");
    assert_eq!(info["grown_bad_segments"], info["bad_segments"], "{info}");
    // The segment table names the same segments bad, grown bad.
    let rows: Vec<serde_json::Value> =
        serde_json::from_str(&run_ok(&["fms", "info", img, "--segments", "--json"])).unwrap();
    let bad: Vec<_> = rows.iter().filter(|r| r["state"] == "bad").collect();
    assert_eq!(
        Some(bad.len() as u64),
        info["bad_segments"].as_u64(),
        "{rows:?}"
    );
    assert!(bad.iter().all(|r| r["bad"] == "grown"), "{rows:?}");
    assert!(rows
        .iter()
        .all(|r| (r["bad"] == "") == (r["state"] != "bad")));
    assert_eq!(
        info["good_segments"].as_u64().unwrap() + info["bad_segments"].as_u64().unwrap(),
        8,
        "{info}"
    );
    assert!(info["life_used"].as_f64().unwrap() >= 1.0, "{info}");
    // Past the point where the capacity can be kept: how far past, not "0 more may go
    // bad" (what it said at the limit and beyond alike).
    let short = info["segments_short"].as_u64().unwrap();
    assert_eq!(info["spare_segments"], 0, "{info}");
    let text_info = run_ok(&["fms", "info", img]);
    if short > 0 {
        assert!(
            text_info.contains(&format!(
                "the capacity can no longer be kept: {short} segment{} short",
                if short == 1 { "" } else { "s" }
            )),
            "{text_info}"
        );
    } else {
        assert!(
            text_info.contains("at the limit: none more may go bad"),
            "{text_info}"
        );
    }
    let out = flashkit(["fms", "read", img, "--length", "100000"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(
        out.stdout[..written] == data[..written],
        "the bytes said written"
    );
    let next = (written / 4096 + 1) * 4096;
    if next < data.len() {
        assert!(
            out.stdout[next..] == before[next..],
            "the bytes after the failed block"
        );
    }
}

/// While a process writes an image (it holds the image's lock), another command is refused
/// with one line naming the image, instead of writing behind the first one's tables or
/// reading its half-done work.
#[test]
fn an_image_in_use_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("busy.img");
    let img_s = img.to_str().unwrap();
    fms_image(img_s, "nandsim-256m", "32", "1KiB");
    let input = dir.path().join("in.bin");
    std::fs::write(&input, pattern(3000, 4)).unwrap();
    let writer = nand::image::open_device(&img).unwrap();
    for (args, needle) in [
        (
            vec!["fms", "write", img_s, "--input", input.to_str().unwrap()],
            "in use by another process",
        ),
        (
            vec![
                "nand",
                "format",
                img_s,
                "--device",
                "nandsim-256m",
                "--force",
            ],
            "in use by another process",
        ),
        // fms format first looks (read-only) for an FMS it would destroy.
        (
            vec!["fms", "format", img_s],
            "being written by another process",
        ),
        (
            vec!["fms", "read", img_s, "--length", "512"],
            "being written by another process",
        ),
        (
            vec!["fms", "info", img_s],
            "being written by another process",
        ),
    ] {
        let out = flashkit(&args);
        let err = text(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(
            err.starts_with(&format!("flashkit: image {img_s}: {needle}")),
            "{args:?}: {err}"
        );
    }
    drop(writer);
    run_ok(&["fms", "write", img_s, "--input", input.to_str().unwrap()]);
    let out = flashkit(["fms", "read", img_s, "--length", "3000"]);
    assert!(out.status.success() && out.stdout == pattern(3000, 4));
}

/// Input that does not fit is refused before anything is written, and is read only as far
/// as the device has room: an endless input (`/dev/zero`) used to be read into memory
/// until allocation failed. The image itself as input is refused.
#[test]
fn write_input_is_read_only_as_far_as_it_fits() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("z.img");
    let img_s = img.to_str().unwrap();
    fms_image(img_s, "nandsim-256m", "32", "1KiB");
    let before = std::fs::read(&img).unwrap();
    // Under a memory limit, so that reading without bound fails fast instead of
    // exhausting the machine.
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "ulimit -v 1000000 && exec \"{}\" fms write \"{img_s}\" --input /dev/zero",
            env!("CARGO_BIN_EXE_flashkit")
        ))
        .output()
        .unwrap();
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.starts_with(&format!("flashkit: {img_s}: more than "))
            && err.contains("bytes at offset 0 do not fit"),
        "{err}"
    );
    // Nothing at all past the end either.
    let empty = dir.path().join("empty");
    std::fs::write(&empty, b"").unwrap();
    let empty = empty.to_str().unwrap();
    let cap = 384_000;
    run_ok(&[
        "fms",
        "write",
        img_s,
        "--input",
        empty,
        "--offset",
        &cap.to_string(),
    ]);
    let out = flashkit([
        "fms",
        "write",
        img_s,
        "--input",
        empty,
        "--offset",
        &(cap + 512).to_string(),
    ]);
    assert!(
        text(&out.stderr).contains("0 bytes at offset 384512 do not fit"),
        "{}",
        text(&out.stderr)
    );
    assert!(
        std::fs::read(&img).unwrap() == before,
        "a refused write changed the image"
    );
    // A pipe from the same image: the input is read before the image is locked.
    std::fs::write(dir.path().join("head.bin"), pattern(4096, 8)).unwrap();
    run_ok(&[
        "fms",
        "write",
        img_s,
        "--input",
        dir.path().join("head.bin").to_str().unwrap(),
    ]);
    let out = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!(
            "set -e; f=\"{}\"; \"$f\" fms read \"{img_s}\" --length 4096 | \"$f\" fms write \"{img_s}\" --offset 8192",
            env!("CARGO_BIN_EXE_flashkit")
        ))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    let out = flashkit(["fms", "read", img_s, "--offset", "8192", "--length", "4096"]);
    assert!(
        out.stdout == pattern(4096, 8),
        "the pipe copied the wrong bytes"
    );
    let before = std::fs::read(&img).unwrap();
    let out = flashkit(["fms", "write", img_s, "--input", img_s]);
    assert!(!out.status.success());
    assert!(
        text(&out.stderr).contains("is the image being written"),
        "{}",
        text(&out.stderr)
    );
    assert!(std::fs::read(&img).unwrap() == before, "the image changed");
}

/// An output that cannot be written is named in the one-line error (it used to be a bare
/// "No space left on device").
#[test]
fn read_errors_name_the_output() {
    if !Path::new("/dev/full").exists() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("o.img");
    let img = img.to_str().unwrap();
    fms_image(img, "intel-series2plus-24m", "8", "4KiB");
    let out = flashkit([
        "fms",
        "read",
        img,
        "--length",
        "100000",
        "--output",
        "/dev/full",
    ]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.starts_with("flashkit: /dev/full: "), "{err}");
}

/// `fms read --output FILE` writes FILE under a temporary name and renames it when
/// complete: an existing FILE is replaced whole, and no temporary file stays behind.
#[test]
fn read_output_replaces_the_file_whole() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("r.img");
    let img = img.to_str().unwrap();
    fms_image(img, "intel-series2plus-24m", "8", "4KiB");
    let input = dir.path().join("in.bin");
    std::fs::write(&input, pattern(10_000, 5)).unwrap();
    run_ok(&["fms", "write", img, "--input", input.to_str().unwrap()]);
    let out = dir.path().join("out.bin");
    std::fs::write(&out, vec![0xAA; 50_000]).unwrap();
    run_ok(&[
        "fms",
        "read",
        img,
        "--length",
        "10000",
        "--output",
        out.to_str().unwrap(),
    ]);
    assert_eq!(std::fs::read(&out).unwrap(), pattern(10_000, 5));
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.iter().all(|n| !n.ends_with(".tmp")),
        "left behind: {names:?}"
    );
}

/// Piped input is read ahead before the image is locked, in memory up to 64 MiB and in an
/// unnamed temporary file past that (an image can be larger than RAM): a 66 MiB pipe is
/// written whole, and a pipe larger than the device is refused before anything is written.
#[test]
fn large_piped_input_is_read_ahead_through_a_temporary_file() {
    use std::io::Write as _;
    use std::process::{Command, Stdio};
    let dir = tempfile::tempdir().unwrap();
    let pipe = |img: &str, data: &[u8]| {
        let mut child = Command::new(env!("CARGO_BIN_EXE_flashkit"))
            .args(["fms", "write", img])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        // The writer may refuse (and close its end) before reading everything.
        let _ = child.stdin.take().unwrap().write_all(data);
        child.wait_with_output().unwrap()
    };
    let data: Vec<u8> = (0..66u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    let big = dir.path().join("big.img");
    let big = big.to_str().unwrap();
    fms_image(big, "nandsim-256m", "16384", "4KiB");
    let out = pipe(big, &data);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let back = flashkit(["fms", "read", big, "--length", &data.len().to_string()]);
    assert!(back.status.success(), "{}", text(&back.stderr));
    assert!(back.stdout == data, "read back differs");
    // 72 MiB of flash (about 54 MiB exported): refused, and nothing written.
    let small = dir.path().join("small.img");
    let small = small.to_str().unwrap();
    fms_image(small, "nandsim-256m", "4608", "4KiB");
    let before = std::fs::read(small).unwrap();
    let mut more = data.clone();
    more.extend_from_slice(&data[..20 << 20]);
    let out = pipe(small, &more);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("do not fit in the"), "{err}");
    assert!(std::fs::read(small).unwrap() == before, "the image changed");
}

/// An image where a segment holding data went bad in use and its blocks were not moved out
/// yet (its erase failed behind the FMS's back, as a power cut right after a failed
/// program would leave it): `fms info` and `fms read` mount it read-only, read those
/// blocks from the bad segment, and leave the file as it was; the next write moves them
/// out and the segment then counts as bad.
#[test]
fn inspecting_an_image_with_a_bad_segment_not_yet_moved_out() {
    use ftl::fms::{Fms, FmsConfig};
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("pending.img");
    let img = img.to_str().unwrap();
    fms_image(img, "intel-series2plus-24m", "12", "1KiB");
    let input = dir.path().join("in.bin");
    let data = pattern(40_000, 5);
    std::fs::write(&input, &data).unwrap();
    run_ok(&["fms", "write", img, "--input", input.to_str().unwrap()]);
    let seg = {
        let mut nd = nand::image::open_device(Path::new(img)).unwrap();
        let h = Fms::probe(&mut nd).unwrap().unwrap();
        let cfg = FmsConfig {
            block_size: h.block_size,
            ..FmsConfig::default()
        };
        let f = Fms::mount(nd, cfg).unwrap();
        f.segments().iter().position(|s| s.valid > 0).unwrap() as u32
    };
    {
        let mut nd = nand::image::open_device(Path::new(img)).unwrap();
        nd.set_faults(nand::FaultPlan {
            fail_ops: vec![1],
            ..nand::FaultPlan::default()
        });
        assert!(nd.erase(seg).is_err() && nd.is_bad(seg));
        nd.sync().unwrap();
    }
    let bytes = std::fs::read(img).unwrap();
    let mut perm = std::fs::metadata(img).unwrap().permissions();
    perm.set_readonly(true);
    std::fs::set_permissions(img, perm.clone()).unwrap();

    let info: serde_json::Value =
        serde_json::from_str(&run_ok(&["fms", "info", img, "--json"])).unwrap();
    assert_eq!(info["mapped_blocks"], 40, "{info}");
    // Still holding blocks that the next write moves out, but bad.
    assert_eq!(info["bad_segments"], 1, "{info}");
    let parts = ["free", "used", "active", "dirty", "bad", "index"]
        .map(|k| info[format!("{k}_segments")].as_u64().unwrap())
        .iter()
        .sum::<u64>();
    assert_eq!(Some(parts), info["segments"].as_u64(), "{info}");
    read_leaves_the_image(img, &data, &bytes);

    #[allow(clippy::permissions_set_readonly_false)]
    perm.set_readonly(false);
    std::fs::set_permissions(img, perm).unwrap();
    std::fs::write(&input, [7u8; 512]).unwrap();
    run_ok(&[
        "fms",
        "write",
        img,
        "--offset",
        "65536",
        "--input",
        input.to_str().unwrap(),
    ]);
    let info: serde_json::Value =
        serde_json::from_str(&run_ok(&["fms", "info", img, "--json"])).unwrap();
    assert_eq!(info["bad_segments"], 1, "{info}");
    assert_eq!(info["mapped_blocks"], 41, "{info}");
    let out = flashkit(["fms", "read", img, "--length", "40000"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(out.stdout == data, "read back differs after the move");
}

/// `fms read` of the image's first `data.len()` bytes returns `data`, and the image file
/// still holds `bytes` (an inspection never writes).
fn read_leaves_the_image(img: &str, data: &[u8], bytes: &[u8]) {
    let len = data.len().to_string();
    let out = flashkit(["fms", "read", img, "--length", len.as_str()]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    assert!(out.stdout == data, "read back differs");
    assert!(
        std::fs::read(img).unwrap() == bytes,
        "an inspection command wrote to the image"
    );
}

/// `fms trim`: the bytes read as zeros from then on, in every later process, on NAND
/// (spare mode: tombstones in trim lists) and NOR (header mode: live bits cleared); whole
/// blocks are unmapped, the parts of blocks at either end rewritten with zeros. Bad
/// offsets and lengths are one-line errors that leave the image as it was.
#[test]
fn trim_reads_zeros_in_later_processes() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.bin");
    let data = pattern(40 * 1024, 5);
    std::fs::write(&input, &data).unwrap();
    let back = dir.path().join("back.bin");
    for (device, blocks, bs, lists) in [
        ("nandsim-256m", "64", "1KiB", true),
        ("mlc2-2g", "16", "2KiB", true),
        ("intel-series2plus-24m", "12", "4KiB", false),
    ] {
        let img = dir.path().join(format!("{device}.img"));
        let img = img.to_str().unwrap();
        fms_image(img, device, blocks, bs);
        run_ok(&["fms", "write", img, "--input", input.to_str().unwrap()]);
        // 512 bytes into the first block through 1.5 KiB into a later one.
        let (off, len) = (512usize, 20 * 1024usize);
        run_ok(&[
            "fms",
            "trim",
            img,
            "--offset",
            &off.to_string(),
            "--length",
            &len.to_string(),
        ]);
        let info: serde_json::Value =
            serde_json::from_str(&run_ok(&["fms", "info", img, "--json"])).unwrap();
        let whole = info["tombstones"].as_u64().unwrap();
        if lists {
            let bsz = info["block_size"].as_u64().unwrap() as usize;
            let first_whole = off.div_ceil(bsz);
            let last_whole = (off + len) / bsz;
            assert_eq!(whole as usize, last_whole - first_whole, "{device}: {info}");
            assert!(info["trim_lists"].as_u64().unwrap() >= 1, "{info}");
        } else {
            assert_eq!((whole, info["trim_lists"].as_u64()), (0, Some(0)), "{info}");
        }
        run_ok(&[
            "fms",
            "read",
            img,
            "--length",
            &data.len().to_string(),
            "--output",
            back.to_str().unwrap(),
        ]);
        let got = std::fs::read(&back).unwrap();
        let mut want = data.clone();
        want[off..off + len].fill(0);
        assert!(
            got == want,
            "{device}: the trimmed range reads zeros, the rest as written"
        );
        // Written again: the tombstones die.
        run_ok(&["fms", "write", img, "--input", input.to_str().unwrap()]);
        let info: serde_json::Value =
            serde_json::from_str(&run_ok(&["fms", "info", img, "--json"])).unwrap();
        assert_eq!(info["tombstones"], 0, "{device}: {info}");
        let before = std::fs::read(img).unwrap();
        for (offset, length, what) in [
            ("100", "1KiB", "--offset: 100 is not a multiple of 512"),
            ("0", "1000", "--length: 1000 is not a multiple of 512"),
            (
                "0",
                "10GiB",
                "--offset/--length: 10737418240 bytes at offset 0 exceed",
            ),
        ] {
            let out = flashkit(["fms", "trim", img, "--offset", offset, "--length", length]);
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success() && err.contains(what), "{err}");
            assert_eq!(err.trim().lines().count(), 1, "{err}");
        }
        // A read past the end names the image too; a missing input names its option.
        let out = flashkit([
            "fms",
            "read",
            img,
            "--length",
            "10GiB",
            "--output",
            "/dev/null",
        ]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.starts_with(&format!("flashkit: {img}: --offset/--length: ")),
            "{err}"
        );
        let out = flashkit(["fms", "write", img, "--input", "/nonexistent/in.bin"]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.starts_with("flashkit: --input: /nonexistent/in.bin: "),
            "{err}"
        );
        assert!(
            std::fs::read(img).unwrap() == before,
            "{device}: refused trims change nothing"
        );
    }
}

/// `fms format --ecc`: the image records it, later commands use it without being told
/// (`fms info` says so), data written reads back across processes, and a device whose
/// spare area cannot hold the codes is refused in one line naming why.
#[test]
fn ecc_is_a_format_option_the_image_remembers() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("mlc.img");
    let img = img.to_str().unwrap();
    nand_image(img, "mlc2-2g", "24", &[]);
    let f: serde_json::Value = serde_json::from_str(&run_ok(&[
        "fms",
        "format",
        img,
        "--block-size",
        "4KiB",
        "--ecc",
        "--json",
    ]))
    .unwrap();
    assert_eq!(f["ecc"], true, "{f}");
    let data = pattern(200_000, 9);
    let input = dir.path().join("in.bin");
    std::fs::write(&input, &data).unwrap();
    run_ok(&[
        "fms",
        "write",
        img,
        "--offset",
        "8192",
        "--input",
        input.to_str().unwrap(),
    ]);
    let out = dir.path().join("out.bin");
    run_ok(&[
        "fms",
        "read",
        img,
        "--offset",
        "8192",
        "--length",
        "200000",
        "--output",
        out.to_str().unwrap(),
    ]);
    assert_eq!(std::fs::read(&out).unwrap(), data);
    let info: serde_json::Value =
        serde_json::from_str(&run_ok(&["fms", "info", img, "--json"])).unwrap();
    assert_eq!(info["ecc"], true, "{info}");
    assert_eq!(info["read_retries"], 0, "{info}");
    assert!(run_ok(&["fms", "info", img]).contains("SEC-DED"));
    // Re-reads are a mount option of every command that mounts (no flips here).
    let info: serde_json::Value = serde_json::from_str(&run_ok(&[
        "fms",
        "info",
        img,
        "--read-retries",
        "0",
        "--json",
    ]))
    .unwrap();
    assert_eq!(info["mapped_blocks"], 49, "{info}");
    let o = flashkit(["fms", "read", img, "--length", "512", "--read-retries", "x"]);
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("--read-retries"));

    let small = dir.path().join("nandsim.img");
    let small = small.to_str().unwrap();
    nand_image(small, "nandsim-256m", "32", &[]);
    let o = flashkit(["fms", "format", small, "--block-size", "1KiB", "--ecc"]);
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("16-byte spare area"), "{err}");
    // Without --ecc the image says none.
    run_ok(&["fms", "format", small, "--block-size", "1KiB"]);
    let info: serde_json::Value =
        serde_json::from_str(&run_ok(&["fms", "info", small, "--json"])).unwrap();
    assert_eq!(info["ecc"], false, "{info}");
}

/// `fms info`'s "mount found" names every recovery path the mount took (dirty segments and
/// re-reads were left out, so a damaged image read "clean"), in torture's words.
#[test]
fn info_reports_every_recovery_path_of_a_damaged_image() {
    let dir = tempfile::tempdir().unwrap();
    let img = written_card(dir.path(), 600_000, 7);
    let img = img.as_str();
    // The review's damage: 200 000 random bytes from offset 20 000 (the first segment's
    // header and records).
    let mut bytes = std::fs::read(img).unwrap();
    let junk = pattern(200_000, 99);
    bytes[20_000..220_000].copy_from_slice(&junk);
    let bad = dir.path().join("c2.img");
    std::fs::write(&bad, &bytes).unwrap();
    let bad = bad.to_str().unwrap();
    let info: serde_json::Value =
        serde_json::from_str(&run_ok(&["fms", "info", bad, "--json"])).unwrap();
    let found = run_ok(&["fms", "info", bad]);
    let line = found
        .lines()
        .find(|l| l.starts_with("mount found "))
        .unwrap_or_else(|| panic!("{found}"));
    assert!(!line.ends_with(" clean"), "{found}");
    assert!(info["index_lost"].is_u64(), "a count: {info}");
    for (key, words) in [
        ("torn_records", "torn records "),
        ("stale_live_copies", "stale live copies "),
        ("mount_dirty_segments", "dirty segments "),
        ("unreadable_trim_lists", "unreadable trim lists "),
        ("grown_bad_read", "grown-bad segments read "),
        ("index_lost", "index lost "),
        ("read_retries", "re-reads "),
    ] {
        let n = info[key].as_u64().unwrap();
        assert_eq!(line.contains(words), n > 0, "{key} = {n}: {line}");
    }
    assert!(
        info["mount_dirty_segments"].as_u64().unwrap() > 0,
        "the damage leaves a dirty segment: {info}"
    );
}

/// `fms format` on an image that holds an FMS is refused without --force (it used to wipe
/// the data silently), naming what it found; a fresh NAND image needs no --force.
#[test]
fn format_refuses_an_existing_fms_without_force() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("card.img");
    let img = img.to_str().unwrap();
    fms_image(img, "intel-series2plus-24m", "16", "4KiB");
    let input = dir.path().join("in.bin");
    std::fs::write(&input, pattern(50_000, 3)).unwrap();
    run_ok(&["fms", "write", img, "--input", input.to_str().unwrap()]);
    let before = std::fs::read(img).unwrap();
    let out = flashkit(["fms", "format", img, "--block-size", "1KiB"]);
    let err = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with(&format!("flashkit: {img}: already holds an FMS ("))
            && err.contains("logical blocks of 4 KiB")
            && err.contains("--force"),
        "{err}"
    );
    assert_eq!(
        std::fs::read(img).unwrap(),
        before,
        "the image is untouched"
    );
    let f: serde_json::Value = serde_json::from_str(&run_ok(&[
        "fms",
        "format",
        img,
        "--block-size",
        "1KiB",
        "--force",
        "--json",
    ]))
    .unwrap();
    assert_eq!(f["block_size"], 1024);
    let info: serde_json::Value =
        serde_json::from_str(&run_ok(&["fms", "info", img, "--json"])).unwrap();
    assert_eq!(info["mapped_blocks"], 0, "reformatted: {info}");
}

/// An FMS whose every segment header is damaged (no header decodes, the pages still
/// programmed) is not "not an FMS": `fms info` says the header pages are programmed
/// (and does not advise formatting), and `fms format` without `--force` refuses to erase
/// it, leaving the image untouched (QA stop 32: it formatted over it). With `--force` it
/// formats. An image that was never formatted still formats without `--force`.
#[test]
fn format_refuses_a_damaged_fms_without_force() {
    let dir = tempfile::tempdir().unwrap();
    let img = written_card(dir.path(), 50_000, 4);
    // Every segment header (the image keeps page bytes inverted; the data area ends the
    // file): its first 64 bytes changed, so no header decodes.
    let mut bytes = std::fs::read(&img).unwrap();
    let data_off = bytes.len() - 16 * 32 * 4096;
    for seg in 0..16 {
        let at = data_off + seg * 32 * 4096;
        for b in &mut bytes[at..at + 64] {
            *b ^= 0x5A;
        }
    }
    std::fs::write(&img, &bytes).unwrap();
    let err = fails_with_all(
        flashkit(["fms", "info", &img]),
        &[
            "no FMS segment header decodes",
            "programmed pages remain in segments 0, 1, 2, 3, 4 and 11 more",
        ],
    );
    assert!(!err.contains("run `flashkit fms format` first"), "{err}");
    fails_with_all(
        flashkit(["fms", "format", &img]),
        &["holds no FMS header that decodes", "programmed", "--force"],
    );
    assert!(
        std::fs::read(&img).unwrap() == bytes,
        "the image is untouched"
    );
    ok(flashkit(["fms", "format", &img, "--force"]));
    let info: serde_json::Value =
        serde_json::from_str(&run_ok(&["fms", "info", &img, "--json"])).unwrap();
    assert_eq!(info["mapped_blocks"], 0, "reformatted: {info}");
    // Never formatted: no header page programmed, nothing to refuse.
    let fresh = dir.path().join("fresh.img");
    nand_image(path_str(&fresh), "intel-series2plus-24m", "16", &[]);
    let err = fails_with_all(
        flashkit(["fms", "info", path_str(&fresh)]),
        &["not an FMS medium"],
    );
    assert!(err.contains("run `flashkit fms format` first"), "{err}");
    ok(flashkit(["fms", "format", path_str(&fresh)]));
    // Header pages a torn erase emptied (erased bytes, program count 0), data pages kept:
    // until stop 33 only the first page was read, and this medium was formatted over.
    let torn = tempfile::tempdir().unwrap();
    let img = written_card(torn.path(), 50_000, 4);
    let mut bytes = std::fs::read(&img).unwrap();
    let pages = 16 * 32;
    let data_off = bytes.len() - pages * 4096;
    let page_off = 8192; // align(4096 + 16 blocks × 12)
    for seg in 0..16 {
        let at = data_off + seg * 32 * 4096;
        bytes[at..at + 4096].fill(0); // inverted: reads 0xFF
        bytes[page_off + seg * 32] = 0;
    }
    std::fs::write(&img, &bytes).unwrap();
    fails_with_all(
        flashkit(["fms", "format", &img]),
        &[
            "holds no FMS header that decodes",
            "programmed pages remain in segments 0, 1 (",
        ],
    );
    assert!(
        std::fs::read(&img).unwrap() == bytes,
        "the image is untouched"
    );
}

/// Wear levelling in storage mode: `--wear-threshold` on the commands that write (it is
/// not recorded on flash). A small nandsim image with an endurance of 15 erasures, 60 %
/// filled with cold data, then one 16 KiB area rewritten until the device wears out: with
/// swaps the cold data's segments take their share of the erasures and the device lasts
/// longer. (Before, only `sim` and `torture` could turn levelling on.)
#[test]
fn wear_levelling_in_storage_mode_lengthens_life() {
    let dir = tempfile::tempdir().unwrap();
    let hot = dir.path().join("hot.bin");
    std::fs::write(&hot, pattern(16384, 9)).unwrap();
    let cold = dir.path().join("cold.bin");
    std::fs::write(&cold, pattern(82944, 10)).unwrap();
    let mut lasted = Vec::new();
    for wear in [None, Some("2")] {
        let img = dir.path().join("w.img");
        let img = img.to_str().unwrap();
        let _ = std::fs::remove_file(img);
        nand_image(img, "nandsim-256m", "16", &["--endurance", "15"]);
        run_ok(&["fms", "format", img, "--block-size", "1KiB"]);
        let with = |v: &[&str]| -> Vec<String> {
            let mut v: Vec<String> = v.iter().map(|s| s.to_string()).collect();
            if let Some(w) = wear {
                v.extend(["--wear-threshold".to_string(), w.to_string()]);
            }
            v
        };
        let (cold, hot) = (cold.to_str().unwrap(), hot.to_str().unwrap());
        ok(flashkit(with(&[
            "fms", "write", img, "--offset", "16384", "--input", cold,
        ])));
        let mut n = 0;
        loop {
            let out = flashkit(with(&["fms", "write", img, "--input", hot]));
            if !out.status.success() {
                let err = text(&out.stderr);
                assert!(err.contains("worn out"), "{err}");
                break;
            }
            n += 1;
            assert!(n < 1000, "never wore out");
        }
        lasted.push(n);
    }
    assert!(
        lasted[1] as f64 > lasted[0] as f64 * 1.15,
        "rewrites until worn out without / with wear levelling: {lasted:?}"
    );
}

/// `fms format` says where the medium goes (bad segments, the reserve, slots per
/// segment) and names a block size that exports clearly more: on nandsim's 512-byte
/// pages 4 KiB blocks lose a slot per segment to the header's page.
#[test]
fn format_explains_the_capacity() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("n.img");
    let img = img.to_str().unwrap();
    nandsim_32_with_two_bad(img);
    let out = run_ok(&["fms", "format", img]);
    assert!(
        out.contains("69 blocks of 4 KiB (3 per segment), 276 KiB exported")
            && out.contains("of 512 KiB raw (32 segments of 16 KiB): 2 bad, 7 kept in reserve")
            && out.contains("--block-size 512 B would export 356.5 KiB"),
        "{out}"
    );
    // The hint counts the good segments, as the format does: formatting with the size it
    // names exports what it said (it counted all 32 and promised 387.5 KiB).
    let out = run_ok(&["fms", "format", img, "--force", "--block-size", "512"]);
    assert!(out.contains("356.5 KiB exported"), "{out}");
    // Half the blocks bad: no block size exports more than 5 % more (the hint promised
    // 2 KiB blocks 14.1 MiB where they give 6.2).
    let img = dir.path().join("half.img");
    let img = img.to_str().unwrap();
    nand_image(img, "mlc2-2g", "64", &["--bad-fraction", "0.5"]);
    let out = run_ok(&["fms", "format", img]);
    assert!(
        out.contains("32 bad") && !out.contains("would export"),
        "{out}"
    );
    // On the Intel card 4 KiB is within 5 % of the best: no advice.
    let img = dir.path().join("i.img");
    let img = img.to_str().unwrap();
    run_ok(&["nand", "format", img, "--device", "intel-series2plus-24m"]);
    let out = run_ok(&["fms", "format", img]);
    assert!(
        out.contains("0 bad, 7 kept in reserve") && !out.contains("--block-size"),
        "{out}"
    );
}

/// A corrupt block-table entry in the image file (the simulator's own record of a block's
/// erase count and state) costs its block, not the image: every command names the entry
/// on stderr, the FMS reads what the block held (as a grown-bad segment's), a read-only
/// command leaves the file as it is, and the first command that writes rewrites the entry,
/// after which nothing more is said.
#[test]
fn a_corrupt_block_table_entry_loses_no_data() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("t.img");
    ok(fms_image_at(&img, "nandsim-256m", "64", "4KiB"));
    let data = pattern(300_000, 11);
    let input = dir.path().join("d.bin");
    std::fs::write(&input, &data).unwrap();
    let (img_s, in_s) = (path_str(&img), path_str(&input));
    ok(flashkit(["fms", "write", img_s, "--input", in_s]));
    let mut bytes = std::fs::read(&img).unwrap();
    for b in 0..3 {
        bytes[4096 + 12 * b + 1] ^= 0x01;
    }
    std::fs::write(&img, &bytes).unwrap();
    let out = dir.path().join("o.bin");
    let read = |expect: &[u8]| {
        let o = ok(flashkit([
            "fms",
            "read",
            img_s,
            "--length",
            "300000",
            "--output",
            path_str(&out),
        ]));
        assert_eq!(std::fs::read(&out).unwrap(), expect);
        text(&o.stderr)
    };
    let err = read(&data);
    for b in 0..3 {
        assert!(
            err.contains(&format!(
                "block table entry {b} corrupt (checksum mismatch)"
            )),
            "{err}"
        );
    }
    assert!(err.contains("image left as it is (read-only)"), "{err}");
    assert_eq!(std::fs::read(&img).unwrap(), bytes, "a read wrote nothing");
    // A write repairs the entries and keeps every block.
    let patch = pattern(8192, 12);
    std::fs::write(&input, &patch).unwrap();
    let o = ok(flashkit([
        "fms", "write", img_s, "--input", in_s, "--offset", "102400",
    ]));
    assert!(text(&o.stderr).contains("entry rewritten"));
    let mut want = data.clone();
    want[102_400..110_592].copy_from_slice(&patch);
    assert!(!read(&want).contains("corrupt"));
    let o = ok(flashkit(["nand", "info", img_s, "--json"]));
    assert_eq!(json(&o)["grown_bad"], 3);
}

/// A block table overwritten whole (every entry corrupt): every command that would write
/// fails naming it, and leaves the file as it was (stop 35: the open wrote every entry
/// back grown bad first, so that even `fms format --force` then found no good block).
#[test]
fn a_command_that_fails_on_a_corrupt_block_table_leaves_the_image_as_it_was() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("t.img");
    ok(fms_image_at(&img, "nandsim-256m", "64", "4KiB"));
    let input = dir.path().join("d.bin");
    std::fs::write(&input, pattern(100_000, 3)).unwrap();
    let (img_s, in_s) = (path_str(&img), path_str(&input));
    ok(flashkit(["fms", "write", img_s, "--input", in_s]));
    let mut bytes = std::fs::read(&img).unwrap();
    bytes[4096..4096 + 64 * 12].fill(0);
    std::fs::write(&img, &bytes).unwrap();
    for args in [
        &["fms", "check", img_s, "--repair"][..],
        &["fms", "write", img_s, "--input", in_s],
        &["fms", "trim", img_s, "--offset", "0", "--length", "4096"],
        &["fms", "format", img_s],
    ] {
        let o = flashkit(args);
        let err = text(&o.stderr);
        assert_eq!(o.status.code(), Some(1), "{args:?}: {err}");
        assert!(
            err.contains("because their block-table entries are corrupt")
                || err.contains("programmed pages remain"),
            "{args:?}: {err}"
        );
        assert_eq!(
            std::fs::read(&img).unwrap(),
            bytes,
            "{args:?} wrote the image"
        );
    }
}

/// `fms format --ecc-bits T` gives a BCH code of T bits per 512 bytes: the format names
/// it, data round-trips, a strength whose codes do not fit the spare area is refused
/// naming the bytes, and one outside 1..8 is refused by the parser.
/// A scrub threshold the medium's code cannot reach, or on a medium without ECC, is one
/// line (it was accepted and scrubbing silently never happened); 0 (never) and 1 to T are
/// taken.
#[test]
fn a_scrub_threshold_the_code_cannot_reach_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let plain = dir.path().join("plain.img");
    let plain = plain.to_str().unwrap();
    nand_image(plain, "mlc2-2g", "32", &[]);
    run_ok(&["fms", "format", plain]);
    fails_with_all(
        flashkit([
            "fms",
            "write",
            plain,
            "--input",
            "/dev/null",
            "--scrub-threshold",
            "2",
        ]),
        &["plain.img", "scrub_threshold", "no ECC"],
    );
    run_ok(&[
        "fms",
        "write",
        plain,
        "--input",
        "/dev/null",
        "--scrub-threshold",
        "0",
    ]);
    let bch = dir.path().join("bch.img");
    let bch = bch.to_str().unwrap();
    nand_image(bch, "mlc2-2g", "32", &[]);
    run_ok(&["fms", "format", bch, "--ecc-bits", "4"]);
    fails_with_all(
        flashkit(["fms", "check", bch, "--repair", "--scrub-threshold", "5"]),
        &["bch.img", "scrub_threshold", "5 bits", "BCH-4", "1 to 4"],
    );
    run_ok(&["fms", "check", bch, "--repair", "--scrub-threshold", "4"]);
}

#[test]
fn ecc_bits_format_a_bch_medium() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("b.img");
    let s = path_str(&img);
    nand_image(s, "mlc2-2g", "32", &[]);
    let o = ok(flashkit(["fms", "format", s, "--ecc-bits", "4", "--json"]));
    let v = json(&o);
    assert_eq!(v["ecc"], true);
    assert_eq!(v["ecc_code"], "BCH-4");
    let data = pattern(100_000, 5);
    let input = dir.path().join("d.bin");
    std::fs::write(&input, &data).unwrap();
    ok(flashkit(["fms", "write", s, "--input", path_str(&input)]));
    assert_eq!(read_all(s, 100_000, dir.path()), data);
    fails_with_all(
        flashkit(["fms", "format", s, "--ecc-bits", "8", "--force"]),
        &["64-byte spare area", "52 code bytes", "BCH-8", "68 bytes"],
    );
    let o = flashkit(["fms", "format", s, "--ecc-bits", "9", "--force"]);
    assert!(!o.status.success());
    assert!(text(&o.stderr).contains("'9' for '--ecc-bits"));
}

/// `fms info` tells the medium's lifetime: the device's endurance, erase counts (the
/// contract's wear_* keys), life used, good and bad segments, the reserve and the spare
/// segments left before the capacity can no longer be kept.
#[test]
fn info_reports_endurance_life_and_spare_segments() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("n.img");
    let img = img.to_str().unwrap();
    nandsim_32_with_two_bad(img);
    let nand: serde_json::Value =
        serde_json::from_str(&run_ok(&["nand", "info", img, "--json"])).unwrap();
    run_ok(&["fms", "format", img, "--block-size", "512"]);
    let input = dir.path().join("in.bin");
    std::fs::write(&input, pattern(150_000, 3)).unwrap();
    for _ in 0..6 {
        run_ok(&["fms", "write", img, "--input", input.to_str().unwrap()]);
    }
    let info: serde_json::Value =
        serde_json::from_str(&run_ok(&["fms", "info", img, "--json"])).unwrap();
    assert_eq!(info["endurance"], nand["endurance"], "{info}");
    let endurance = info["endurance"].as_f64().unwrap();
    let (max, mean) = (
        info["wear_max"].as_f64().unwrap(),
        info["wear_mean"].as_f64().unwrap(),
    );
    assert!(
        max > 1.0 && info["wear_stddev"].as_f64().is_some(),
        "{info}"
    );
    assert_eq!(info["life_used"].as_f64().unwrap(), max / endurance);
    assert_eq!(info["life_used_mean"].as_f64().unwrap(), mean / endurance);
    assert_eq!(info["good_segments"], 30, "{info}");
    assert_eq!(info["factory_bad_segments"], 2, "{info}");
    assert_eq!(info["grown_bad_segments"], 0, "{info}");
    assert_eq!(info["bad_segments"], 2, "{info}");
    // The reserve `fms format` names; the capacity fills the rest but the reserve, so
    // spare: the reserve less the index and one segment to clean into.
    assert_eq!(info["reserve_segments"], 7, "{info}");
    assert_eq!(info["spare_segments"], 5, "{info}");
    let text = run_ok(&["fms", "info", img]);
    for needle in [
        format!(
            "endurance       {} erase cycles: life used ",
            nand["endurance"]
        ),
        "bad segments    2 factory, 0 grown; 5 more may go bad before the capacity can no \
         longer be kept (7 in reserve)"
            .to_string(),
        // Every new spare-mode format corrects records (stop 32).
        "records         record correction: a spare record one bit from valid before a later \
         one is corrected"
            .to_string(),
    ] {
        assert!(text.contains(&needle), "{needle:?} not in:\n{text}");
    }
}

/// Each command is a new process whose device clock starts at 0; the mount moves it to
/// the newest time on the medium, so time goes on across commands instead of restarting
/// (cost-benefit, CAT and DAC ages mean something across `fms write`s). On the Intel
/// card each entry carries its write's time, so the next command resumes within a write
/// of where the last one ended; in spare mode (nandsim) only segment headers carry a time,
/// and it resumes at the newest of them.
#[test]
fn the_device_clock_goes_on_across_commands() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.bin");
    std::fs::write(&input, pattern(100_000, 5)).unwrap();
    let input = input.to_str().unwrap();
    for (device, blocks, bs) in [
        ("intel-series2plus-24m", "12", "4KiB"),
        ("nandsim-256m", "24", "1KiB"),
    ] {
        let img = dir.path().join(format!("{device}.img"));
        let img = img.to_str().unwrap();
        fms_image(img, device, blocks, bs);
        let info = |what: &str| -> serde_json::Value {
            let i: serde_json::Value =
                serde_json::from_str(&run_ok(&["fms", "info", img, "--json"])).unwrap();
            assert!(i["medium_time_s"].as_f64().is_some(), "{what}: {i}");
            i
        };
        let write = || -> serde_json::Value {
            serde_json::from_str(&run_ok(&["fms", "write", img, "--input", input, "--json"]))
                .unwrap()
        };
        let formatted = info("formatted")["medium_time_s"].as_f64().unwrap();
        let (mut medium, mut clock) = (formatted, 0.0);
        let header_mode = device.starts_with("intel");
        for round in 0..8 {
            let w = write();
            let end = w["device_clock_s"].as_f64().unwrap();
            let spent = w["device_time_s"].as_f64().unwrap();
            // This command's clock went on from the medium's time, not from 0 (its mount's
            // reads before it found that time are within it).
            assert!(
                end >= medium + spent - 1e-9,
                "{device} round {round}: ended at {end} s, the medium said {medium} s ({w})"
            );
            let now = info("written")["medium_time_s"].as_f64().unwrap();
            assert!(
                now >= medium && now <= end,
                "{device} round {round}: {now} after {medium}, ended {end}"
            );
            if header_mode {
                // The newest entry is the last write's (ms; a 4 KiB program on the card
                // takes 31 ms): the next command starts about where this one ended.
                assert!(end > clock, "{device} round {round}: {end} after {clock}");
                assert!(end - now < 0.1, "{device} round {round}: {now} vs {end}");
            }
            (medium, clock) = (now, end);
        }
        // Spare mode too has moved on from the format's time: the cleaner's headers.
        assert!(medium > formatted, "{device}: {medium}");
    }
}

/// `fms write|read|trim --json` and `nand format --json` print one JSON object on stdout
/// (the one-line summaries on stderr go); `fms read --json` needs `--output FILE`, the
/// data and the report cannot share stdout.
#[test]
fn write_read_trim_and_nand_format_print_json() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("j.img");
    let img = img.to_str().unwrap();
    let o = ok(flashkit([
        "nand",
        "format",
        img,
        "--device",
        "nandsim-256m",
        "--blocks",
        "32",
        "--bad-blocks",
        "5",
        "--json",
    ]));
    let n = json(&o);
    assert_eq!(n["blocks"], 32, "{n}");
    assert_eq!(n["page_size"], 512, "{n}");
    assert_eq!(n["factory_bad_blocks"], serde_json::json!([5]), "{n}");
    assert_eq!(n["capacity_bytes"].as_u64().unwrap(), 32 * 32 * 512, "{n}");
    run_ok(&["fms", "format", img, "--block-size", "1KiB"]);
    let input = dir.path().join("in.bin");
    std::fs::write(&input, pattern(20_000, 7)).unwrap();
    let o = ok(flashkit([
        "fms",
        "write",
        img,
        "--offset",
        "2048",
        "--input",
        input.to_str().unwrap(),
        "--json",
    ]));
    assert!(o.stderr.is_empty(), "{}", text(&o.stderr));
    let w = json(&o);
    assert_eq!(w["offset"], 2048, "{w}");
    assert_eq!(w["bytes_written"], 20_000, "{w}");
    // 20 000 bytes from 2 KiB: blocks 2..=21, the last one partly (read, then written).
    assert_eq!(w["user_writes"], 20, "{w}");
    assert_eq!(w["flash_writes"], 20, "{w}");
    for key in ["blocks_copied", "erasures"] {
        assert_eq!(w[key], 0, "{key}: {w}");
    }
    for key in ["device_time_s", "mount_time_s", "device_clock_s"] {
        assert!(w[key].as_f64().unwrap() > 0.0, "{key}: {w}");
    }
    // The read's report: the data to the file, the report to stdout.
    let back = dir.path().join("back.bin");
    let o = ok(flashkit([
        "fms",
        "read",
        img,
        "--offset",
        "2048",
        "--length",
        "20000",
        "--output",
        back.to_str().unwrap(),
        "--json",
    ]));
    let r = json(&o);
    assert_eq!(
        std::fs::read(&back).unwrap(),
        std::fs::read(&input).unwrap()
    );
    assert_eq!(r["bytes_read"], 20_000, "{r}");
    assert_eq!(r["user_reads"], 20, "{r}");
    assert_eq!(r["output"], back.to_str().unwrap(), "{r}");
    assert_eq!(r["user_writes"], 0, "{r}");
    fails_with_all(
        flashkit(["fms", "read", img, "--length", "512", "--json"]),
        &["--json", "--output FILE"],
    );
    // Trim 8 KiB from 1 KiB: blocks 1..=8; block 1 was never written.
    let o = ok(flashkit([
        "fms", "trim", img, "--offset", "1024", "--length", "8192", "--json",
    ]));
    assert!(o.stderr.is_empty(), "{}", text(&o.stderr));
    let t = json(&o);
    assert_eq!(t["bytes_trimmed"], 8192, "{t}");
    assert_eq!(t["blocks_trimmed"], 7, "{t}");
    assert_eq!(t["user_writes"], 0, "{t}");
    // A spare-mode trim programs its tombstones into a trim list.
    assert_eq!(t["flash_writes"], 1, "{t}");
    // --csv too, as every report.
    let csv = dir.path().join("t.csv");
    run_ok(&[
        "fms",
        "trim",
        img,
        "--offset",
        "0",
        "--length",
        "1024",
        "--csv",
        csv.to_str().unwrap(),
    ]);
    let c = std::fs::read_to_string(&csv).unwrap();
    assert!(
        c.starts_with("image,offset,bytes_trimmed,blocks_trimmed,"),
        "{c}"
    );
}

/// A bit flipped for good in a segment header of an image (a segment holding data): `fms
/// read` gives the data back (the mount corrects the header; before, it took the segment
/// for dirty and read zeros), and `fms info` names the correction, in text and JSON.
#[test]
fn a_header_bit_flipped_in_the_image_is_corrected_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("card.img");
    let img = img.to_str().unwrap();
    fms_image(img, "intel-series2plus-24m", "16", "4KiB");
    let input = dir.path().join("in.bin");
    let data = pattern(200_000, 5);
    std::fs::write(&input, &data).unwrap();
    run_ok(&["fms", "write", img, "--input", input.to_str().unwrap()]);
    let info: serde_json::Value =
        serde_json::from_str(&run_ok(&["fms", "info", img, "--json"])).unwrap();
    assert_eq!(info["corrected_headers"], serde_json::json!([]), "{info}");
    // The image keeps page bytes inverted: find the segment headers' magic ("FSMH")
    // that way. The first is the index segment's, the second segment 1's, which holds
    // the first 124 KiB written.
    let mut bytes = std::fs::read(img).unwrap();
    let magic: Vec<u8> = b"FSMH".iter().map(|b| !b).collect();
    let at: Vec<usize> = bytes
        .windows(4)
        .enumerate()
        .filter(|(_, w)| *w == &magic[..])
        .map(|(i, _)| i)
        .collect();
    assert!(at.len() >= 3, "segment headers found at {at:?}");
    bytes[at[1] + 9] ^= 0x20; // the erase count
    std::fs::write(img, &bytes).unwrap();
    let back = dir.path().join("back.bin");
    run_ok(&[
        "fms",
        "read",
        img,
        "--length",
        &data.len().to_string(),
        "--output",
        back.to_str().unwrap(),
    ]);
    assert!(std::fs::read(&back).unwrap() == data, "the data reads back");
    let info: serde_json::Value =
        serde_json::from_str(&run_ok(&["fms", "info", img, "--json"])).unwrap();
    assert_eq!(info["corrected_headers"], serde_json::json!([1]), "{info}");
    assert_eq!(info["mount_dirty_segments"], 0, "{info}");
    let text = run_ok(&["fms", "info", img]);
    assert!(
        text.lines()
            .any(|l| l.starts_with("bit flips for good")
                && l.contains("header of segment 1 corrected")),
        "{text}"
    );
}

/// A 32-block `nandsim-256m` image at `img` with blocks 3 and 7 factory bad.
fn nandsim_32_with_two_bad(img: &str) {
    nand_image(img, "nandsim-256m", "32", &["--bad-blocks", "3,7"]);
}

/// `fms check` reads every mapped block and reports what the reads found. On an ECC
/// image (SEC-DED, 2 KiB blocks on slc-large pages) with one bit flipped for good in block
/// 3 and two in one 512-byte chunk of block 7 (bytes found in the image by their content, stored
/// inverted): block 3 reads corrected, block 7 is unreadable, named in the JSON and in
/// the one-line error, with exit status 1. Without `--repair` the image is not written;
/// `--repair` scrubs block 3 (SEC-DED's threshold is one bit), after which it reads
/// clean. An undamaged image checks clean with status 0.
#[test]
fn check_reads_every_block_and_names_the_unreadable_ones() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("ecc.img");
    let img = img.to_str().unwrap();
    nand_image(img, "slc-large-1g", "16", &[]);
    run_ok(&["fms", "format", img, "--block-size", "2KiB", "--ecc"]);
    let input = dir.path().join("in.bin");
    let data = pattern(20 * 2048, 11);
    std::fs::write(&input, &data).unwrap();
    run_ok(&["fms", "write", img, "--input", input.to_str().unwrap()]);
    let clean: serde_json::Value =
        serde_json::from_str(&run_ok(&["fms", "check", img, "--json"])).unwrap();
    assert_eq!(clean["blocks_checked"], 20, "{clean}");
    assert_eq!(clean["blocks_clean"], 20, "{clean}");
    assert_eq!(clean["unreadable_blocks"], serde_json::json!([]), "{clean}");

    let mut bytes = std::fs::read(img).unwrap();
    let find = |bytes: &[u8], lbn: usize| -> usize {
        let want: Vec<u8> = data[lbn * 2048..lbn * 2048 + 64]
            .iter()
            .map(|b| !b)
            .collect();
        let at: Vec<usize> = bytes
            .windows(64)
            .enumerate()
            .filter(|(_, w)| *w == &want[..])
            .map(|(i, _)| i)
            .collect();
        assert_eq!(at.len(), 1, "block {lbn} found at {at:?}");
        at[0]
    };
    let b3 = find(&bytes, 3);
    bytes[b3 + 100] ^= 0x04;
    let b7 = find(&bytes, 7);
    bytes[b7 + 10] ^= 0x01;
    bytes[b7 + 300] ^= 0x80;
    std::fs::write(img, &bytes).unwrap();

    let o = flashkit(["fms", "check", img, "--json"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["blocks_checked"], 20, "{r}");
    assert_eq!(r["blocks_corrected"], 1, "{r}");
    assert_eq!(r["bits_corrected"], 1, "{r}");
    assert_eq!(r["blocks_clean"], 18, "{r}");
    assert_eq!(r["unreadable_blocks"], serde_json::json!([7]), "{r}");
    assert_eq!(r["scrubbed"], 0, "{r}");
    let err = text(&o.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(
        err.contains("1 block(s) unreadable") && err.trim_end().ends_with(": 7"),
        "{err}"
    );
    assert!(
        std::fs::read(img).unwrap() == bytes,
        "check wrote the image"
    );

    let o = flashkit(["fms", "check", img, "--repair"]);
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    let out = text(&o.stdout);
    assert!(out.contains("1 block(s) scrubbed"), "{out}");
    assert!(
        out.contains("20 checked: 18 clean, 1 corrected (1 bits), 0 re-read, 1 unreadable"),
        "{out}"
    );
    let o = flashkit(["fms", "check", img, "--json"]);
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["blocks_corrected"], 0, "scrubbed: {r}");
    assert_eq!(r["blocks_clean"], 19, "{r}");
    let back = dir.path().join("back.bin");
    run_ok(&[
        "fms",
        "read",
        img,
        "--length",
        "14336",
        "--output",
        back.to_str().unwrap(),
    ]);
    assert!(
        std::fs::read(&back).unwrap() == data[..14336],
        "blocks 0-6 read back"
    );
}

/// `fms format` and `fms info` name how header-mode entries carry their live state
/// (`live_flag`): `byte` on a new header-mode medium (header features bit 1), `none` in
/// spare mode, and `bit` on a medium formatted before the live byte (made here through
/// the library, `FmsConfig::live_byte = false`), which the CLI still writes, trims and
/// reads.
#[test]
fn format_and_info_name_the_live_flag() {
    let dir = tempfile::tempdir().unwrap();
    for (device, blocks, want) in [
        ("intel-series2plus-24m", "8", "byte"),
        ("nandsim-256m", "32", "none"),
    ] {
        let img = dir.path().join(format!("{device}.img"));
        let s = path_str(&img);
        nand_image(s, device, blocks, &[]);
        let v = json(&ok(flashkit(["fms", "format", s, "--json"])));
        assert_eq!(v["live_flag"], want, "{device}");
        let v = json(&ok(flashkit(["fms", "info", s, "--json"])));
        assert_eq!(v["live_flag"], want, "{device}");
        let t = text(&ok(flashkit(["fms", "info", s])).stdout);
        let line = t.lines().find(|l| l.contains("live flag")).unwrap();
        assert!(
            line.contains(if want == "byte" { "majority" } else { "none" }),
            "{line}"
        );
    }
    let img = dir.path().join("old.img");
    let spec = nand::DeviceSpec::preset("intel-series2plus-24m").map(|mut s| {
        s.geometry.blocks = 8;
        s
    });
    let nd = nand::image::create_device(&img, &spec.unwrap(), false).unwrap();
    let cfg = ftl::fms::FmsConfig {
        live_byte: false,
        ..ftl::fms::FmsConfig::default()
    };
    let mut f = ftl::fms::Fms::format(nd, cfg).unwrap();
    nand::blockdev::BlockDevice::flush(&mut f).unwrap();
    drop(f);
    let s = path_str(&img);
    let v = json(&ok(flashkit(["fms", "info", s, "--json"])));
    assert_eq!(v["live_flag"], "bit");
    let t = text(&ok(flashkit(["fms", "info", s])).stdout);
    assert!(t.contains("bit 0 of each entry's flags byte"), "{t}");
    let data = pattern(40_000, 9);
    let input = dir.path().join("d.bin");
    std::fs::write(&input, &data).unwrap();
    ok(flashkit(["fms", "write", s, "--input", path_str(&input)]));
    ok(flashkit([
        "fms",
        "write",
        s,
        "--input",
        path_str(&input),
        "--offset",
        "4096",
    ]));
    ok(flashkit([
        "fms", "trim", s, "--offset", "8192", "--length", "4096",
    ]));
    let mut want = vec![0u8; 4096];
    want.extend_from_slice(&data);
    want[0..4096].copy_from_slice(&data[0..4096]);
    want[8192..12288].fill(0);
    assert!(read_all(s, want.len(), dir.path()) == want);
    let v = json(&ok(flashkit(["fms", "info", s, "--json"])));
    assert_eq!(
        (v["live_flag"].as_str(), v["stale_live_copies"].as_u64()),
        (Some("bit"), Some(0))
    );
}

/// `fms format` and `fms info` say whether segment headers carry the medium's code
/// (`header_code`, header features bit 2): yes on a new format with ECC, no without ECC,
/// and no on an ECC medium formatted before header codes (made here through the library,
/// `FmsConfig::header_code = false`), which the CLI still writes and reads, its headers
/// staying without a code.
#[test]
fn format_and_info_say_whether_headers_carry_a_code() {
    let dir = tempfile::tempdir().unwrap();
    for (ecc, want) in [(Some("4"), true), (Some("1"), true), (None, false)] {
        let img = dir.path().join(format!("mlc-{ecc:?}.img"));
        let s = path_str(&img);
        nand_image(s, "mlc2-2g", "12", &[]);
        let mut args = vec!["fms", "format", s, "--json"];
        if let Some(t) = ecc {
            args.extend(["--ecc-bits", t]);
        }
        let v = json(&ok(flashkit(args)));
        assert_eq!(v["header_code"], want, "{ecc:?}");
        let v = json(&ok(flashkit(["fms", "info", s, "--json"])));
        assert_eq!(v["header_code"], want, "{ecc:?}");
        let t = text(&ok(flashkit(["fms", "info", s])).stdout);
        let line = t.lines().find(|l| l.contains("header code")).unwrap();
        assert_eq!(line.contains("yes"), want, "{line}");
    }
    let img = dir.path().join("old.img");
    let spec = nand::DeviceSpec::preset("mlc2-2g").map(|mut s| {
        s.geometry.blocks = 12;
        s
    });
    let nd = nand::image::create_device(&img, &spec.unwrap(), false).unwrap();
    let cfg = ftl::fms::FmsConfig {
        ecc: true,
        ecc_strength: 4,
        header_code: false,
        ..ftl::fms::FmsConfig::default()
    };
    let mut f = ftl::fms::Fms::format(nd, cfg).unwrap();
    nand::blockdev::BlockDevice::flush(&mut f).unwrap();
    drop(f);
    let s = path_str(&img);
    let t = text(&ok(flashkit(["fms", "info", s])).stdout);
    assert!(t.contains("formatted before header codes"), "{t}");
    let data = pattern(300_000, 5);
    let input = dir.path().join("d.bin");
    std::fs::write(&input, &data).unwrap();
    for _ in 0..16 {
        ok(flashkit(["fms", "write", s, "--input", path_str(&input)]));
    }
    assert!(read_all(s, data.len(), dir.path()) == data);
    let v = json(&ok(flashkit(["fms", "info", s, "--json"])));
    assert_eq!(v["header_code"], false);
    assert!(v["wear_max"].as_u64().unwrap() > 1, "the cleaner ran: {v}");
}

/// Segment summaries (stop 23): `fms format` says whether the medium has them (4 KiB blocks
/// on MLC: yes; `--no-segment-summaries` or 2 KiB blocks, which leave no room: no); `fms
/// info` says how many full segments the mount read from theirs; the data reads back
/// either way, and the mount that reads summaries takes less device time.
#[test]
fn format_and_info_say_whether_segments_carry_summaries() {
    let dir = tempfile::tempdir().unwrap();
    let data = pattern(3_000_000, 9);
    let input = dir.path().join("d.bin");
    std::fs::write(&input, &data).unwrap();
    let mut mount_s = Vec::new();
    for (bs, off, want) in [
        ("4KiB", false, true),
        ("4KiB", true, false),
        ("2KiB", false, false),
    ] {
        let img = dir.path().join(format!("mlc-{bs}-{off}.img"));
        let s = path_str(&img);
        nand_image(s, "mlc2-2g", "24", &[]);
        let mut args = vec!["fms", "format", s, "--json", "--block-size", bs];
        if off {
            args.push("--no-segment-summaries");
        }
        let v = json(&ok(flashkit(args)));
        assert_eq!(v["segment_summaries"], want, "{bs} {off}");
        // Every new spare-mode format has record correction (stop 32).
        assert_eq!(v["record_correction"], true, "{bs} {off}");
        ok(flashkit(["fms", "write", s, "--input", path_str(&input)]));
        let v = json(&ok(flashkit(["fms", "info", s, "--json"])));
        assert_eq!(v["segment_summaries"], want, "{bs} {off}");
        assert_eq!(v["record_correction"], true, "{bs} {off}");
        assert_eq!(v["corrected_records"], serde_json::json!([]), "{v}");
        let read = v["summaries_read"].as_u64().unwrap();
        assert_eq!(read > 0, want, "{bs} {off}: {v}");
        if bs == "4KiB" {
            mount_s.push(v["mount_time_s"].as_f64().unwrap());
        }
        let t = text(&ok(flashkit(["fms", "info", s])).stdout);
        let line = t.lines().find(|l| l.starts_with("summaries")).unwrap();
        assert_eq!(line.contains("yes"), want, "{line}");
        assert!(read_all(s, data.len(), dir.path()) == data, "{bs} {off}");
    }
    assert!(mount_s[0] < mount_s[1], "mount device time {mount_s:?}");
    // Without room, the text names the block size that leaves some.
    let img = dir.path().join("hint.img");
    let s = path_str(&img);
    nand_image(s, "mlc2-2g", "12", &[]);
    let t = text(&ok(flashkit(["fms", "format", s, "--block-size", "2KiB"])).stdout);
    assert!(
        t.contains("no segment summaries: 2 KiB blocks fill each segment; --block-size 4 KiB"),
        "{t}"
    );
}

/// A FIFO given as the image is one line, not a wait for a writer that never comes (the
/// open blocked for ever); a header whose device name is not UTF-8 (with a valid
/// checksum) is refused as the format says, not printed with replacement characters.
#[test]
fn a_fifo_or_a_header_name_not_utf8_is_one_line() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("fifo.img");
    let st = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo");
    assert!(st.success());
    let fifo = fifo.to_str().unwrap();
    for args in [
        vec!["nand", "info", fifo],
        vec!["fms", "info", fifo],
        vec!["fms", "write", fifo, "--input", "/dev/null"],
        vec!["nand", "format", fifo, "--device", "mlc2-2g", "--force"],
    ] {
        fails_with_all(flashkit(&args), &["fifo.img", "a FIFO, not an image file"]);
    }
    let img = dir.path().join("name.img");
    let img = img.to_str().unwrap();
    nand_image(img, "mlc2-2g", "16", &[]);
    let mut h = std::fs::read(img).unwrap();
    h[104..107].copy_from_slice(&[0xFF, 0xFE, 0x41]);
    // CRC-32C, bit by bit (docs/format/nand-image.md).
    let crc = !h[..4092].iter().fold(!0u32, |mut c, &b| {
        c ^= b as u32;
        for _ in 0..8 {
            c = (c >> 1) ^ if c & 1 == 1 { 0x82F6_3B78 } else { 0 };
        }
        c
    });
    h[4092..4096].copy_from_slice(&crc.to_le_bytes());
    std::fs::write(img, &h).unwrap();
    fails_with_all(
        flashkit(["nand", "info", img]),
        &["name.img", "name: not UTF-8"],
    );
    // A bad block past the device names the range as a user writes one.
    let out = flashkit([
        "nand",
        "format",
        &format!("{img}.2"),
        "--device",
        "mlc2-2g",
        "--blocks",
        "64",
        "--bad-blocks",
        "64",
    ]);
    fails_with_all(out, &["block 64 out of range (device has 64 blocks, 0-63)"]);
}

/// A block table overwritten whole: a few lines name the first entries and count the
/// rest (one line per block before), and the mount says every block is bad instead of
/// "not an FMS medium (run fms format first)", which pointed at the command that would
/// wipe what the blocks still hold.
#[test]
fn a_block_table_corrupt_whole_is_a_few_lines_and_says_every_block_is_bad() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("t.img");
    let img = img.to_str().unwrap();
    nand_image(img, "mlc2-2g", "64", &[]);
    run_ok(&["fms", "format", img]);
    let mut bytes = std::fs::read(img).unwrap();
    // Block table entries: 12 bytes a block from offset 4096 (docs/format/nand-image.md).
    for (i, b) in bytes[4096..4096 + 64 * 12].iter_mut().enumerate() {
        *b = (i * 37 % 251) as u8;
    }
    std::fs::write(img, &bytes).unwrap();
    let out = flashkit(["fms", "info", img]);
    assert_eq!(out.status.code(), Some(1));
    let err = text(&out.stderr);
    let lines: Vec<&str> = err.lines().collect();
    assert_eq!(lines.len(), 9, "{err}");
    assert!(
        lines[7].contains("and 57 more block-table entries corrupt"),
        "{err}"
    );
    assert!(
        lines[8].contains("every erase block is bad (64 of 64, 64 of them because their block-table entries are corrupt)")
            && !err.contains("fms format"),
        "{err}"
    );
}

/// `fms format --no-segment-summaries` where the medium would have none anyway is an
/// option with no effect, refused as `sim` refuses it (QA stop 25): a header-mode card,
/// and 2 KiB blocks on mlc2-2g (no room after the last slot).
#[test]
fn format_refuses_no_segment_summaries_where_there_are_none() {
    let dir = tempfile::tempdir().unwrap();
    for (device, extra, needle) in [
        ("intel-series2plus-24m", vec![], "header-mode devices"),
        (
            "mlc2-2g",
            vec!["--block-size", "2KiB"],
            "have no room for a summary",
        ),
    ] {
        let img = dir.path().join(format!("{device}.img"));
        let img = path_str(&img);
        nand_image(img, device, "16", &[]);
        let mut a = vec!["fms", "format", img, "--no-segment-summaries"];
        a.extend(&extra);
        let err = fails_with_all(
            flashkit(&a),
            &["--no-segment-summaries: has no effect", needle],
        );
        assert_eq!(err.trim().lines().count(), 1, "{err}");
    }
    let img = dir.path().join("m.img");
    let img = path_str(&img);
    nand_image(img, "mlc2-2g", "16", &[]);
    run_ok(&["fms", "format", img, "--no-segment-summaries"]);
}

/// Two bits flipped for good in a segment header (no code on this NOR card corrects
/// them) lose the blocks whose only copies it held: `fms read` returned zeros with exit 0
/// and `fms check` said "all clean" (QA stop 25). Now every command that mounts warns and
/// names them, `fms info --json` lists them, `fms check` fails, and `fms read` refuses a
/// range over them.
#[test]
fn blocks_lost_behind_a_damaged_header_are_never_silent() {
    let dir = tempfile::tempdir().unwrap();
    let img = written_card(dir.path(), 300_000, 3);
    let img = img.as_str();
    damage_intel_segment_1_header(Path::new(img));

    let o = ok(flashkit(["fms", "info", img, "--json"]));
    let v = json(&o);
    let lost = v["lost_blocks"].as_array().unwrap_or_else(|| panic!("{v}"));
    assert!(lost.len() >= 20, "{v}");
    assert!(lost.iter().all(|s| s["segment"] == 1), "{v}");
    // Held, and why: every lost block named under its segment.
    let held = v["held_segments"]
        .as_array()
        .unwrap_or_else(|| panic!("{v}"));
    assert_eq!(held.len(), 1, "{v}");
    assert_eq!(held[0]["segment"], 1, "{v}");
    assert_eq!(held[0]["rescued_trims"], false, "{v}");
    let mut named: Vec<u64> = lost.iter().map(|s| s["block"].as_u64().unwrap()).collect();
    named.sort_unstable();
    assert_eq!(held[0]["lost_blocks"], serde_json::json!(named), "{v}");
    // The segment table says held, not dirty.
    let rows = json(&ok(flashkit(["fms", "info", img, "--segments", "--json"])));
    assert_eq!(rows[1]["state"], "held", "{rows}");
    // `fms check` names the held segment too (and fails for the lost blocks).
    let o = flashkit(["fms", "check", img, "--json"]);
    assert!(!o.status.success());
    let c = json(&o);
    assert_eq!(c["held_segments"][0]["segment"], 1, "{c}");
    let warn = text(&o.stderr);
    assert!(
        warn.contains("warning") && warn.contains("blocks lost"),
        "{warn}"
    );
    let first = lost[0]["block"].as_u64().unwrap();
    let o = flashkit(["fms", "check", img]);
    assert!(!o.status.success());
    let err = text(&o.stderr);
    assert!(
        err.contains(&format!("{} block(s) lost", lost.len())),
        "{err}"
    );
    let o = flashkit([
        "fms",
        "read",
        img,
        "--offset",
        &(first * 4096).to_string(),
        "--length",
        "4096",
    ]);
    assert!(!o.status.success());
    let err = text(&o.stderr);
    assert!(err.contains("covers 1 lost block(s)"), "{err}");
    assert!(o.stdout.is_empty(), "no data for a lost block");
    // Salvage: --allow-lost reads it anyway (zeros: it had no older copy).
    let o = ok(flashkit([
        "fms",
        "read",
        img,
        "--offset",
        &(first * 4096).to_string(),
        "--length",
        "4096",
        "--allow-lost",
    ]));
    assert_eq!(o.stdout, vec![0u8; 4096]);
    assert!(text(&o.stderr).contains("1 lost block(s) read as zeros"));

    // --salvage reads the lost copies: the whole input back, lost blocks included.
    let want = pattern(300_000, 3);
    let saved = dir.path().join("saved.bin");
    let saved = path_str(&saved);
    let o = ok(flashkit([
        "fms",
        "read",
        img,
        "--length",
        "300000",
        "--salvage",
        "--output",
        saved,
        "--json",
    ]));
    let r = json(&o);
    assert_eq!(r["lost_read_as"], "salvaged", "{r}");
    assert_eq!(
        r["lost_blocks"].as_array().unwrap().len(),
        lost.len(),
        "{r}"
    );
    assert!(
        std::fs::read(saved).unwrap() == want,
        "salvaged data differs"
    );

    // A trim of part of a lost block ends its name (QA stop 26: it did nothing): the
    // block is rewritten, the trimmed sector zeros and the rest what the FMS maps.
    let off = (first * 4096).to_string();
    let o = ok(flashkit([
        "fms", "trim", img, "--offset", &off, "--length", "512", "--json",
    ]));
    assert_eq!(
        json(&o)["lost_blocks_resolved"],
        serde_json::json!([first]),
        "the trim's report names the name it ended"
    );
    assert!(
        text(&o.stderr).contains("1 lost block(s) written or trimmed, lost no longer"),
        "{}",
        text(&o.stderr)
    );
    let v = json(&ok(flashkit(["fms", "info", img, "--json"])));
    let now = v["lost_blocks"].as_array().unwrap();
    assert_eq!(now.len(), lost.len() - 1, "{v}");
    assert!(now.iter().all(|s| s["block"] != first), "{v}");

    // Writing elsewhere, many times the free space: the damaged segment is held, so the
    // names stay (stop 26; before, the first cleaning erased them away).
    let other = dir.path().join("other.bin");
    std::fs::write(&other, pattern(400 * 1024, 9)).unwrap();
    for _ in 0..8 {
        let o = ok(flashkit([
            "fms",
            "write",
            img,
            "--offset",
            "512KiB",
            "--input",
            path_str(&other),
        ]));
        assert!(text(&o.stderr).contains("kept until each block is written or trimmed"));
    }
    let v = json(&ok(flashkit(["fms", "info", img, "--json"])));
    assert_eq!(
        v["lost_blocks"].as_array().map(Vec::len),
        Some(lost.len() - 1),
        "{v}"
    );

    // Writing the salvaged data back ends the names: the card checks clean and reads
    // the input.
    let o = ok(flashkit(["fms", "write", img, "--input", saved, "--json"]));
    let ended = json(&o)["lost_blocks_resolved"].as_array().unwrap().len();
    assert_eq!(
        ended,
        lost.len() - 1,
        "the write's report names the names it ended"
    );
    let o = ok(flashkit(["fms", "check", img]));
    assert!(!text(&o.stderr).contains("lost"), "{}", text(&o.stderr));
    let v = json(&ok(flashkit(["fms", "info", img, "--json"])));
    assert_eq!(v["held_segments"], serde_json::json!([]), "{v}");
    let o = ok(flashkit(["fms", "read", img, "--length", "300000"]));
    assert!(o.stdout == want, "the restored data differs");
}

/// `fms read --salvage` over a lost block whose lost copy no read can correct (an ECC
/// medium, its header and one data chunk damaged beyond the code): the other lost blocks
/// are salvaged, the whole output is written (that block as zeros), JSON names it in
/// `unsalvaged_blocks`, and the exit status is non-zero with one line saying so (QA stop
/// 26: the read stopped at that block, calling it a trim list).
#[test]
fn salvage_reads_past_a_lost_copy_no_read_can_correct() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("m.img");
    let img = path_str(&img);
    nand_image(img, "mlc2-2g", "16", &[]);
    run_ok(&["fms", "format", img, "--block-size", "4KiB", "--ecc"]);
    let want = pattern(1_500_000, 7);
    let input = dir.path().join("in.bin");
    std::fs::write(&input, &want).unwrap();
    run_ok(&["fms", "write", img, "--input", path_str(&input)]);
    // Segment 2 (128 pages of 2048 + 64 bytes; the data area ends the file): two bits of
    // its header, and two bits of one chunk of its third slot (block 65), whose code
    // corrects one.
    let mut bytes = std::fs::read(img).unwrap();
    let seg = bytes.len() - 16 * 270_336 + 2 * 270_336;
    bytes[seg + 20] ^= 0x03;
    bytes[seg + 5 * 2112 + 10] ^= 0x03;
    std::fs::write(img, &bytes).unwrap();
    let out = dir.path().join("out.bin");
    let out = path_str(&out);
    let o = flashkit([
        "fms",
        "read",
        img,
        "--length",
        "1500000",
        "--salvage",
        "--output",
        out,
        "--json",
    ]);
    assert!(!o.status.success());
    let err = text(&o.stderr);
    let last = err.trim().lines().last().unwrap();
    assert!(
        last.contains("1 lost block(s) not salvaged") && last.contains(": 65"),
        "{err}"
    );
    let r: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(r["unsalvaged_blocks"], serde_json::json!([65]), "{r}");
    assert_eq!(r["lost_read_as"], "salvaged", "{r}");
    let got = std::fs::read(out).unwrap();
    assert_eq!(got.len(), want.len());
    let (b65, b66) = (65 * 4096, 66 * 4096);
    assert!(got[b65..b66].iter().all(|&b| b == 0), "block 65 as zeros");
    assert!(
        got[..b65] == want[..b65] && got[b66..] == want[b66..],
        "the rest salvaged"
    );
}

/// Twenty damaged segments, each holding one lost block among trimmed ones, leave the
/// cleaner nothing to clean: writes fail for want of space, naming the held segments and
/// what frees them; and the remedy works: a trim of a lost block goes through in the room
/// left in its stream's segment and releases its segment, after which writes succeed
/// again (QA stop 26: every write and trim failed for good, the remedy included).
#[test]
fn trims_of_lost_blocks_free_a_medium_that_holds_left_full() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("w.img");
    let img = path_str(&img);
    nand_image(img, "nandsim-256m", "32", &[]);
    run_ok(&["fms", "format", img, "--block-size", "1KiB"]);
    let full = dir.path().join("full.bin");
    std::fs::write(&full, pattern(384_000, 5)).unwrap();
    run_ok(&["fms", "write", img, "--input", path_str(&full)]);
    for k in 0..20 {
        let off = ((15 * k + 1) * 1024).to_string();
        run_ok(&["fms", "trim", img, "--offset", &off, "--length", "14336"]);
    }
    // Segments 1..=20 (32 pages of 512 + 16 bytes; the data area ends the file).
    let mut bytes = std::fs::read(img).unwrap();
    let data = bytes.len() - 32 * 16_896;
    for s in 1..=20 {
        bytes[data + s * 16_896 + 20] ^= 0x03;
    }
    std::fs::write(img, &bytes).unwrap();
    let w14 = dir.path().join("w14.bin");
    std::fs::write(&w14, pattern(14_336, 6)).unwrap();
    // 14 KiB from block 15k + 1.
    let write_at = |k: usize| {
        let off = ((15 * k + 1) * 1024).to_string();
        flashkit([
            "fms",
            "write",
            img,
            "--input",
            path_str(&w14),
            "--offset",
            &off,
        ])
    };
    let mut refused = None;
    for i in 1..=6 {
        let o = write_at(i % 6 + 1);
        if !o.status.success() {
            refused = Some(text(&o.stderr));
            break;
        }
    }
    let err = refused.expect("the held segments leave no room");
    let last = err.trim().lines().last().unwrap();
    assert!(
        last.contains("device full") && last.contains("hold lost blocks"),
        "{err}"
    );
    // The remedy: trim the lost blocks (their data saved first, were it wanted).
    let v = json(&ok(flashkit(["fms", "info", img, "--json"])));
    let lost = lost_block_numbers(&v);
    assert!(lost.len() >= 10, "{v}");
    for b in &lost {
        let off = (b * 1024).to_string();
        run_ok(&["fms", "trim", img, "--offset", &off, "--length", "1024"]);
    }
    let v = json(&ok(flashkit(["fms", "info", img, "--json"])));
    assert_eq!(v["lost_blocks"], serde_json::json!([]), "{v}");
    assert_eq!(v["held_segments"], serde_json::json!([]), "{v}");
    for k in 1..=6 {
        ok(write_at(k));
    }
    ok(flashkit(["fms", "check", img]));
}

/// A trim list behind a damaged header (spare mode) is rescued: the trim stands, every
/// report names it (`fms info`, and `fms check`, which passed silently before: QA stop
/// 26), its segment is held until the next writing command writes the tombstone again,
/// and the segment table shows the hold.
#[test]
fn rescued_trims_are_named_by_every_report_until_written_again() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("nandsim.img");
    let img = path_str(&img);
    fms_image(img, "nandsim-256m", "16", "1KiB");
    let input = dir.path().join("in.bin");
    std::fs::write(&input, pattern(40 * 1024, 4)).unwrap();
    run_ok(&["fms", "write", img, "--input", path_str(&input)]);
    run_ok(&["fms", "trim", img, "--offset", "0", "--length", "1KiB"]);
    // The trim list went to the coldest stream, the last one (`trims.rs`): the active
    // segment of the largest stream.
    let rows = json(&ok(flashkit(["fms", "info", img, "--segments", "--json"])));
    let seg = rows
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["state"] == "active")
        .max_by_key(|r| r["stream"].as_u64())
        .unwrap_or_else(|| panic!("{rows}"))["segment"]
        .as_u64()
        .unwrap() as usize;
    // Its header: erase blocks of 32 pages of 512 + 16 bytes at the end of the file;
    // byte 20 is in its erase sequence.
    let mut bytes = std::fs::read(img).unwrap();
    let block = 32 * (512 + 16);
    let data_off = bytes.len() - 16 * block;
    bytes[data_off + seg * block + 20] ^= 0x03;
    std::fs::write(img, &bytes).unwrap();

    let v = json(&ok(flashkit(["fms", "info", img, "--json"])));
    assert_eq!(v["rescued_tombstones"], 1, "{v}");
    let held = v["held_segments"].as_array().unwrap();
    assert!(
        held.iter()
            .any(|h| h["segment"] == seg as u64 && h["rescued_trims"] == true),
        "{v}"
    );
    let rows = json(&ok(flashkit(["fms", "info", img, "--segments", "--json"])));
    assert_eq!(rows[seg]["state"], "held", "{rows}");
    // `fms check` names the rescued trim and the hold; without lost blocks it passes.
    let lost = !v["lost_blocks"].as_array().unwrap().is_empty();
    let o = flashkit(["fms", "check", img]);
    let out = text(&o.stdout);
    assert!(
        out.contains("rescued trims") && out.contains("1 tombstone(s)"),
        "{out}"
    );
    assert!(out.contains("held segments"), "{out}");
    assert_eq!(o.status.success(), !lost, "{}", text(&o.stderr));
    let c = json(&flashkit(["fms", "check", img, "--json"]));
    assert_eq!(c["rescued_tombstones"], 1, "{c}");
    // The trimmed block reads zeros: the trim stands.
    let o = ok(flashkit(["fms", "read", img, "--length", "1KiB"]));
    assert_eq!(o.stdout, vec![0u8; 1024]);

    // A write elsewhere writes the tombstone again: the rescue is over, and the segment
    // stays held only if it holds lost blocks.
    run_ok(&[
        "fms",
        "write",
        img,
        "--offset",
        "60KiB",
        "--input",
        path_str(&input),
    ]);
    let v = json(&ok(flashkit(["fms", "info", img, "--json"])));
    assert_eq!(v["rescued_tombstones"], 0, "{v}");
    for h in v["held_segments"].as_array().unwrap() {
        assert_eq!(h["rescued_trims"], false, "{v}");
        assert!(!h["lost_blocks"].as_array().unwrap().is_empty(), "{v}");
    }
    let o = ok(flashkit(["fms", "read", img, "--length", "1KiB"]));
    assert_eq!(
        o.stdout,
        vec![0u8; 1024],
        "the trim stands after the rescue"
    );
}

/// A file whose size says 0 but that holds data (`/proc`, `/sys`) is written whole, read
/// to its end as a pipe is (QA stop 27: `--input /proc/cpuinfo` wrote 0 bytes, exit 0).
#[test]
fn input_files_that_say_size_0_are_read_to_their_end() {
    let want = std::fs::read("/proc/version").expect("/proc/version");
    assert_eq!(std::fs::metadata("/proc/version").unwrap().len(), 0);
    assert!(!want.is_empty());
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("i.img");
    let img = path_str(&img);
    fms_image(img, "nandsim-256m", "16", "1KiB");
    let o = ok(flashkit([
        "fms",
        "write",
        img,
        "--input",
        "/proc/version",
        "--json",
    ]));
    assert_eq!(json(&o)["bytes_written"], want.len() as u64);
    let len = want.len().to_string();
    let o = ok(flashkit(["fms", "read", img, "--length", &len]));
    assert!(o.stdout == want);
}

/// Options that act only while the FMS writes are refused by the commands that only read
/// (QA stop 27: `fms info --wear-threshold 3` was accepted in silence); `check --repair`
/// writes and takes them.
#[test]
fn writing_options_are_refused_where_the_image_is_only_read() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("i.img");
    let img = path_str(&img);
    fms_image(img, "nandsim-256m", "16", "1KiB");
    for args in [
        vec!["fms", "info", img, "--wear-threshold", "3"],
        vec![
            "fms",
            "read",
            img,
            "--length",
            "512",
            "--wear-threshold",
            "3",
        ],
        vec!["fms", "check", img, "--index-wear-gap", "2"],
        vec!["fms", "check", img, "--policy", "greedy"],
        vec!["fms", "read", img, "--length", "512", "--policy", "cat"],
        vec!["fms", "check", img, "--scrub-threshold", "0"],
        vec!["fms", "check", img, "--failure-reserve", "2"],
        vec![
            "fms",
            "read",
            img,
            "--length",
            "512",
            "--failure-reserve-from",
            "start",
        ],
    ] {
        fails_with_all(
            flashkit(&args),
            &["has no effect: this command only reads the image"],
        );
    }
    ok(flashkit([
        "fms",
        "check",
        img,
        "--repair",
        "--wear-threshold",
        "3",
        "--policy",
        "greedy",
    ]));
    // `none` (off) as sim, sweep and bench take it (QA stop 28: refused here).
    ok(flashkit([
        "fms",
        "write",
        img,
        "--input",
        "/dev/null",
        "--wear-threshold",
        "none",
    ]));
    ok(flashkit([
        "torture",
        "--device",
        "nandsim-256m",
        "--ops",
        "20",
        "--cuts",
        "2",
        "--wear-threshold",
        "none",
    ]));
    // A number too large says so (QA stop 32: "is not a number of erasures").
    for flag in ["--wear-threshold", "--index-wear-gap"] {
        let o = flashkit([
            "fms",
            "write",
            img,
            "--input",
            "/dev/null",
            flag,
            "99999999999",
        ]);
        let err = text(&o.stderr);
        assert!(!o.status.success(), "{err}");
        assert!(
            err.contains(flag) && err.contains("99999999999 is too large (at most 4294967295)"),
            "{err}"
        );
    }
}

/// `fms format --capacity`: a size of whole blocks or a percentage of the most the medium
/// holds beside the reserve; the capacity is recorded (later commands mount it without
/// the option) and data written up to it reads back; sizes that are not whole blocks,
/// more than the medium holds, and percentages out of range are refused, the image
/// untouched.
#[test]
fn format_takes_a_capacity() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("c.img");
    let img = path_str(&img);
    nand_image(img, "nandsim-256m", "64", &[]);
    let most: serde_json::Value = serde_json::from_str(&run_ok(&[
        "fms",
        "format",
        img,
        "--block-size",
        "1KiB",
        "--json",
    ]))
    .unwrap();
    assert_eq!(most["slack_segments"], 0, "{most}");
    let most = most["logical_blocks"].as_u64().unwrap();
    let ninety = ["--block-size", "1KiB", "--capacity", "90% ", "--force"];
    let out = run_ok(&[&["fms", "format", img][..], &ninety[..]].concat());
    let o = ok(flashkit(
        [&["fms", "format", img, "--json"][..], &ninety[..]].concat(),
    ));
    let slack = json(&o)["slack_segments"].as_u64().unwrap();
    assert!(slack >= 2, "{slack}");
    assert!(
        out.contains(&format!("{slack} segments of slack beside the reserve")),
        "{out}"
    );
    let info = info_json(img);
    assert_eq!(info["logical_blocks"].as_u64().unwrap(), most * 9 / 10);
    ok(flashkit([
        "fms",
        "format",
        img,
        "--block-size",
        "1KiB",
        "--capacity",
        "200KiB",
        "--force",
    ]));
    let input = dir.path().join("in.bin");
    std::fs::write(&input, pattern(200 * 1024, 3)).unwrap();
    run_ok(&["fms", "write", img, "--input", path_str(&input)]);
    let info = info_json(img);
    assert_eq!(info["logical_blocks"], 200);
    assert_eq!(info["mapped_blocks"], 200);
    assert_eq!(
        read_all(img, 200 * 1024, dir.path()),
        pattern(200 * 1024, 3)
    );
    let before = std::fs::read(img).unwrap();
    for (capacity, says) in [
        ("1000", "is not a whole number of 1 KiB blocks"),
        ("10GiB", "is more than this medium holds beside the reserve"),
        ("0", "is less than one block"),
        ("-5%", "is no percentage"),
        ("0%", "is no percentage above 0 and at most 100"),
        ("101%", "is no percentage"),
        ("x%", "is no percentage"),
        ("0.0001%", "is less than one block"),
    ] {
        fails_with_all(
            flashkit([
                "fms",
                "format",
                img,
                "--block-size",
                "1KiB",
                "--capacity",
                capacity,
                "--force",
            ]),
            &["--capacity", says],
        );
    }
    // A malformed capacity is named before the image is looked at (not "already holds an
    // FMS: pass --force").
    fails_with_all(
        flashkit([
            "fms",
            "format",
            img,
            "--block-size",
            "1KiB",
            "--capacity",
            "x%",
        ]),
        &["--capacity", "is no percentage"],
    );
    assert!(
        std::fs::read(img).unwrap() == before,
        "the image is untouched"
    );
}

/// `fms info` says where the failure reserve stands: ready on an empty medium, without
/// room once data fills the capacity (a segment going bad would leave none), ready again
/// on a medium formatted with slack, and engaged (marks 3 and 4) once a segment has worn
/// out in use (nandsim, endurance 15, one 16 KiB area rewritten).
#[test]
fn info_reports_the_failure_reserve() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("r.img");
    let img = path_str(&img);
    let info = info_json;
    nand_image(img, "nandsim-256m", "16", &["--endurance", "15"]);
    run_ok(&["fms", "format", img, "--block-size", "1KiB"]);
    let i = info(img);
    assert_eq!(i["failure_reserve"], "ready");
    let full = dir.path().join("full.bin");
    let capacity = i["capacity_bytes"].as_u64().unwrap() as usize;
    std::fs::write(&full, pattern(capacity, 4)).unwrap();
    run_ok(&["fms", "write", img, "--input", path_str(&full)]);
    let i = info(img);
    assert_eq!(
        (i["failure_reserve"].as_str(), &i["water_marks"]),
        (Some("no-room"), &serde_json::json!([2, 3]))
    );
    let text = run_ok(&["fms", "info", img]);
    assert!(
        text.contains("failure reserve without room (the valid data"),
        "{text}"
    );
    run_ok(&[
        "fms",
        "format",
        img,
        "--block-size",
        "1KiB",
        "--capacity",
        "90KiB",
        "--force",
    ]);
    assert_eq!(info(img)["failure_reserve"], "ready");
    let cold = dir.path().join("cold.bin");
    std::fs::write(&cold, pattern(40960, 10)).unwrap();
    run_ok(&[
        "fms",
        "write",
        img,
        "--offset",
        "16384",
        "--input",
        path_str(&cold),
    ]);
    let hot = dir.path().join("hot.bin");
    let mut n = 0;
    let i = loop {
        std::fs::write(&hot, pattern(16384, n)).unwrap();
        run_ok(&["fms", "write", img, "--input", path_str(&hot)]);
        let i = info(img);
        if i["grown_bad_segments"].as_u64() > Some(0) {
            break i;
        }
        assert_eq!(i["failure_reserve"], "ready");
        n += 1;
        assert!(n < 500, "no segment wore out");
    };
    assert_eq!(i["failure_reserve"], "engaged", "{i}");
    assert_eq!(i["water_marks"], serde_json::json!([3, 4]));
    let text = run_ok(&["fms", "info", img]);
    assert!(
        text.contains(
            "cleans when fewer than 3 segments are free, up to 4; failure reserve engaged"
        ),
        "{text}"
    );
    assert_eq!(read_all(img, 16384, dir.path()), pattern(16384, n));
    // Kept from the start (not recorded on flash: given to each command), on a medium
    // that never failed; `fms info` takes the options for the state it reports.
    let img = dir.path().join("new.img");
    let img = path_str(&img);
    nand_image(img, "nandsim-256m", "16", &[]);
    run_ok(&["fms", "format", img, "--block-size", "1KiB"]);
    let from = ["--failure-reserve-from", "start"];
    let o = ok(flashkit(["fms", "info", img, "--json", from[0], from[1]]));
    let i = json(&o);
    assert_eq!(
        (
            &i["failure_reserve"],
            &i["failure_reserve_from"],
            &i["water_marks"]
        ),
        (
            &serde_json::json!("engaged"),
            &serde_json::json!("start"),
            &serde_json::json!([3, 4])
        ),
        "{i}"
    );
    assert_eq!(i["grown_bad_segments"], 0);
    let text = run_ok(&["fms", "info", img, from[0], from[1]]);
    assert!(
        text.contains("failure reserve engaged (from the start: marks raised)"),
        "{text}"
    );
    let o = ok(flashkit([
        "fms",
        "info",
        img,
        "--json",
        "--failure-reserve",
        "2",
        from[0],
        from[1],
    ]));
    assert_eq!(json(&o)["water_marks"], serde_json::json!([4, 5]));
    fails_with_all(
        flashkit([
            "fms",
            "info",
            img,
            "--failure-reserve",
            "0",
            from[0],
            from[1],
        ]),
        &["--failure-reserve-from: has no effect: --failure-reserve is 0"],
    );
    assert_eq!(info(img)["failure_reserve"], "ready");
    let o = flashkit(["fms", "info", img, from[0], "always"]);
    let err = common::text(&o.stderr);
    assert!(!o.status.success(), "{err}");
    for n in ["--failure-reserve-from", "'always'", "first-failure, start"] {
        assert!(err.contains(n), "{err}");
    }
}

/// DAC regions and the redistribution in storage mode (QA stop 35: the `fms` commands and
/// `blockdev mount` ran each policy with its paper pairing and one region): taken by the
/// commands that write, per command; more streams than the medium has room for refused
/// before anything is written, naming the reserve, until `fms format --regions N` leaves
/// the room; refused where the image is only read; the data round-trips whatever the
/// configuration of each write.
#[test]
fn dac_regions_and_redistribution_in_storage_mode() {
    let dir = tempfile::tempdir().unwrap();
    let img = dir.path().join("r.img");
    let img = path_str(&img).to_string();
    fms_image(&img, "nandsim-256m", "64", "4KiB");
    let default_blocks = info_json(&img)["logical_blocks"].as_u64().unwrap();
    let input = dir.path().join("in.bin");
    let data = pattern(300_000, 5);
    std::fs::write(&input, &data).unwrap();
    let in_s = path_str(&input);
    let write = |extra: &[&str]| {
        let mut a = vec!["fms", "write", &img, "--input", in_s];
        a.extend_from_slice(extra);
        flashkit(a)
    };
    let before = std::fs::read(&img).unwrap();
    fails_with_all(
        write(&["--regions", "4"]),
        &[
            "--regions 4: 5 stream(s) need a reserve of 9 segments",
            "this medium has 7 segments",
            "format it with --regions 4",
        ],
    );
    assert_eq!(
        std::fs::read(&img).unwrap(),
        before,
        "refused before writing"
    );
    fails_with_all(
        write(&["--regions", "2", "--redistribution", "m3"]),
        &["--redistribution: has no effect: DAC regions"],
    );
    fails_with_all(write(&["--regions", "9"]), &["--regions: 9 must be 1..8"]);
    fails_with_all(
        write(&["--region-threshold", "1s"]),
        &["--region-threshold: has no effect: it applies to DAC"],
    );
    // Two regions fit the default's room; every redistribution too.
    ok(write(&["--regions", "2", "--region-threshold", "1s"]));
    for m in ["m1", "m2", "m3", "m4", "m5", "m6"] {
        ok(write(&["--redistribution", m]));
    }
    assert_eq!(read_all(&img, data.len(), dir.path()), data);
    let out = dir.path().join("o.bin");
    fails_with_all(
        flashkit([
            "fms",
            "read",
            &img,
            "--length",
            "4096",
            "--output",
            path_str(&out),
            "--regions",
            "2",
        ]),
        &["--regions: has no effect: this command only reads the image"],
    );
    // A format for four regions: fewer blocks, and four regions' streams.
    run_ok(&["fms", "format", &img, "--force", "--regions", "4"]);
    let blocks = info_json(&img)["logical_blocks"].as_u64().unwrap();
    assert!(blocks < default_blocks, "{blocks} vs {default_blocks}");
    for _ in 0..4 {
        ok(write(&[
            "--regions",
            "4",
            "--region-select",
            "most-garbage",
        ]));
    }
    assert_eq!(read_all(&img, data.len(), dir.path()), data);
    let segs: serde_json::Value = serde_json::from_str(&run_ok(&[
        "fms",
        "info",
        &img,
        "--segments",
        "--json",
        "--regions",
        "4",
    ]))
    .unwrap();
    let top = segs
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["stream"].as_u64())
        .max();
    assert!(top >= Some(2), "blocks promoted past two regions: {top:?}");
    fails_with_all(
        write(&["--regions", "8"]),
        &["--regions 8: 9 stream(s) need a reserve of 13 segments"],
    );
}
