//! Byte-slice parsing helpers shared by the readers: no allocation, no UTF-8 validation.

/// An unsigned decimal integer (digits only, no sign, no spaces).
#[inline]
pub(crate) fn parse_u64(b: &[u8]) -> Option<u64> {
    if b.is_empty() || b.len() > 20 {
        return None;
    }
    let mut v: u64 = 0;
    for &c in b {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            return None;
        }
        v = v.checked_mul(10)?.checked_add(d as u64)?;
    }
    Some(v)
}

/// An unsigned integer in decimal or `0x` hexadecimal.
#[inline]
pub(crate) fn parse_u64_any(b: &[u8]) -> Option<u64> {
    match b {
        [b'0', b'x' | b'X', hex @ ..] if !hex.is_empty() => {
            let s = std::str::from_utf8(hex).ok()?;
            u64::from_str_radix(s, 16).ok()
        }
        _ => parse_u64(b),
    }
}

/// Why a time stamp field was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TimeError {
    /// Not a number at all (`x`, `NaN`, `inf`, `1.2.3`).
    NotNumber,
    /// A number, but beyond 64-bit nanoseconds (about ±292 years).
    OutOfRange,
}

/// A decimal number of `unit_ns` nanoseconds (`12`, `12.5`, `-0.25`, `1e3`), converted to
/// whole nanoseconds. Plain decimals are converted exactly (digits beyond a nanosecond are
/// truncated); other spellings fall back to a float parse. A number whose nanoseconds do
/// not fit in an `i64` is [`TimeError::OutOfRange`], not [`TimeError::NotNumber`].
#[inline]
pub(crate) fn parse_time_ns(b: &[u8], unit_ns: i64) -> Result<i64, TimeError> {
    let (neg, body) = match b.first() {
        Some(b'-') => (true, &b[1..]),
        Some(b'+') => (false, &b[1..]),
        _ => (false, b),
    };
    // One sign only (`--5` is no number; the float parse below would read `-5`).
    if matches!(body.first(), Some(b'-' | b'+')) {
        return Err(TimeError::NotNumber);
    }
    let (ip, fp) = match body.iter().position(|&c| c == b'.') {
        Some(i) => (&body[..i], &body[i + 1..]),
        None => (body, &body[..0]),
    };
    if ip.is_empty() && fp.is_empty() {
        return Err(TimeError::NotNumber);
    }
    let exact = (|| {
        let i = if ip.is_empty() { 0 } else { parse_u64(ip)? };
        let mut ns = i64::try_from(i).ok()?.checked_mul(unit_ns)?;
        if !fp.is_empty() {
            let mut num: i64 = 0;
            let mut den: i64 = 1;
            for &c in fp {
                let d = c.wrapping_sub(b'0');
                if d > 9 {
                    return None;
                }
                if den < 1_000_000_000_000_000 {
                    num = num * 10 + d as i64;
                    den *= 10;
                }
            }
            let frac = if unit_ns % den == 0 {
                num * (unit_ns / den)
            } else {
                (num as i128 * unit_ns as i128 / den as i128) as i64
            };
            ns = ns.checked_add(frac)?;
        }
        Some(ns)
    })();
    let ns = match exact {
        Some(ns) => ns,
        None => {
            let text = std::str::from_utf8(body).map_err(|_| TimeError::NotNumber)?;
            let v: f64 = text.parse().map_err(|_| TimeError::NotNumber)?;
            if v.is_nan() {
                return Err(TimeError::NotNumber);
            }
            // `inf` is no time stamp; `1e400` (parsed as infinite) is a number too large.
            if v.is_infinite()
                && text
                    .bytes()
                    .any(|c| c.is_ascii_alphabetic() && c != b'e' && c != b'E')
            {
                return Err(TimeError::NotNumber);
            }
            let ns = v * unit_ns as f64;
            if !ns.is_finite() || ns.abs() >= i64::MAX as f64 {
                return Err(TimeError::OutOfRange);
            }
            ns.round() as i64
        }
    };
    Ok(if neg { -ns } else { ns })
}

/// The name of a time unit of `unit_ns` nanoseconds, for messages.
pub(crate) fn unit_name(unit_ns: i64) -> &'static str {
    match unit_ns {
        1 => "ns",
        1_000 => "us",
        1_000_000 => "ms",
        1_000_000_000 => "s",
        _ => "units",
    }
}

/// The message for a time stamp field `field` (named `what`) that [`parse_time_ns`]
/// refused: `what 'x' is <not_number>`, or, for a number beyond 64-bit nanoseconds, `what
/// '1e300' is out of range (at most 9223372036.854775807 s: ...)`.
pub(crate) fn time_error(
    e: TimeError,
    what: &str,
    field: &[u8],
    not_number: &str,
    unit_ns: i64,
) -> String {
    match e {
        TimeError::NotNumber => format!("{what} '{}' is {not_number}", show(field)),
        TimeError::OutOfRange => {
            let neg = field.first() == Some(&b'-');
            format!(
                "{what} '{}' is out of range ({} {}{} {}: time stamps are kept as 64-bit \
                 nanoseconds, about ±292 years)",
                show(field),
                if neg { "at least" } else { "at most" },
                if neg { "-" } else { "" },
                fmt_time(i64::MAX, unit_ns, 0),
                unit_name(unit_ns)
            )
        }
    }
}

/// Parse a byte size: `4096`, `4KiB`, `4K`, `192MiB`, `1.5GiB`, `64 TiB`, `8EiB` (binary
/// units B, KiB, MiB, GiB, TiB, PiB, EiB; K/M/G/T/P/E and KB/.../EB are read as binary
/// too, as storage tools usually do). The value is exact: it must fit in 64 bits (at most
/// 16 EiB − 1 byte), and a fractional part is allowed only when it makes a whole number of
/// bytes (`1.5KiB` is 1536; `0.3B` is an error). The sizes of the `trace` commands
/// (`--space`, `--unit`) are read with it.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let (int, frac) = num.split_once('.').unwrap_or((num, ""));
    if (int.is_empty() && frac.is_empty()) || frac.contains('.') {
        return Err(format!("'{s}': not a size (e.g. 4096, 4KiB, 192MiB, 8EiB)"));
    }
    // The unit as a power of two.
    let shift: u32 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 0,
        "k" | "kb" | "kib" => 10,
        "m" | "mb" | "mib" => 20,
        "g" | "gb" | "gib" => 30,
        "t" | "tb" | "tib" => 40,
        "p" | "pb" | "pib" => 50,
        "e" | "eb" | "eib" => 60,
        _ => {
            return Err(format!(
                "'{s}': unknown size unit '{}' (B, KiB, MiB, GiB, TiB, PiB, EiB)",
                unit.trim()
            ))
        }
    };
    let too_large = || {
        format!(
            "'{s}': size too large (at most {} bytes, 16 EiB - 1)",
            u64::MAX
        )
    };
    // Only digits are left, so a failed parse is an overflow.
    let whole = match int.trim_start_matches('0') {
        "" => 0,
        digits => digits.parse::<u64>().map_err(|_| too_large())?,
    };
    let whole = whole.checked_mul(1 << shift).ok_or_else(too_large)?;
    // The fraction 0.F (n digits) times 2^shift bytes is F / 5^n * 2^(shift - n): whole
    // only when n <= shift and 5^n divides F (F without trailing zeros ends in a digit
    // other than 0, so a larger n always leaves a fraction of a byte). F is divided by 5
    // n times as a decimal digit string (n <= 60: 5^n would not fit in 128 bits).
    let frac = frac.trim_end_matches('0');
    let mut part = 0u64;
    if !frac.is_empty() {
        let n = frac.len() as u32;
        let not_whole = || format!("'{s}': not a whole number of bytes");
        if n > shift {
            return Err(not_whole());
        }
        let mut digits: Vec<u32> = frac.bytes().map(|d| u32::from(d - b'0')).collect();
        for _ in 0..n {
            let mut rem = 0;
            for d in digits.iter_mut() {
                let cur = rem * 10 + *d;
                *d = cur / 5;
                rem = cur % 5;
            }
            if rem != 0 {
                return Err(not_whole());
            }
        }
        // F / 5^n < 10^n / 5^n = 2^n <= 2^60.
        let q = digits.iter().fold(0u128, |q, &d| q * 10 + u128::from(d));
        part = u64::try_from(q << (shift - n)).map_err(|_| too_large())?;
    }
    whole.checked_add(part).ok_or_else(too_large)
}

/// Split a comma-separated line into at most `out.len()` fields (spaces around a field
/// trimmed); returns how many fields the line has, counting any beyond `out.len()` as one.
#[inline]
pub(crate) fn split_csv<'a>(line: &'a [u8], out: &mut [&'a [u8]]) -> usize {
    let mut n = 0;
    let mut rest = line;
    loop {
        if n == out.len() {
            return n + usize::from(!rest.is_empty());
        }
        match rest.iter().position(|&c| c == b',') {
            Some(i) => {
                out[n] = trim(&rest[..i]);
                n += 1;
                rest = &rest[i + 1..];
            }
            None => {
                out[n] = trim(rest);
                return n + 1;
            }
        }
    }
}

/// Split a line at runs of spaces and tabs into at most `out.len()` fields; returns how
/// many were found (a remainder beyond `out.len()` counts as one more).
#[inline]
pub(crate) fn split_ws<'a>(line: &'a [u8], out: &mut [&'a [u8]]) -> usize {
    let mut n = 0;
    let mut i = 0;
    let len = line.len();
    while i < len {
        while i < len && (line[i] == b' ' || line[i] == b'\t') {
            i += 1;
        }
        if i == len {
            break;
        }
        if n == out.len() {
            return n + 1;
        }
        let start = i;
        while i < len && line[i] != b' ' && line[i] != b'\t' {
            i += 1;
        }
        out[n] = &line[start..i];
        n += 1;
    }
    n
}

#[inline]
pub(crate) fn trim(b: &[u8]) -> &[u8] {
    let mut s = 0;
    let mut e = b.len();
    while s < e && (b[s] == b' ' || b[s] == b'\t') {
        s += 1;
    }
    while e > s && (b[e - 1] == b' ' || b[e - 1] == b'\t') {
        e -= 1;
    }
    &b[s..e]
}

/// A field for an error message: lossy UTF-8, shortened, control characters escaped
/// (`\u{1b}`, `\r`, ...): a malformed trace must not move the terminal's cursor or break the
/// error's one line.
pub(crate) fn show(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(b);
    let short: String = s.chars().take(40).collect();
    let mut out = escape_controls(&short).into_owned();
    if s.chars().count() > 40 {
        out.push('…');
    }
    out
}

/// `s` with its control characters escaped (`\u{1b}`, `\r`, `\n`): text from a file (a
/// trace's field, an image's device name) that is printed on a terminal, where such bytes
/// would move the cursor or split a one-line message.
pub fn escape_controls(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return s.into();
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if c.is_control() {
            out.extend(c.escape_debug());
        } else {
            out.push(c);
        }
    }
    out.into()
}

/// Whether a field starts like a word (a header line's column name).
#[inline]
pub(crate) fn is_word(b: &[u8]) -> bool {
    b.first().is_some_and(|c| c.is_ascii_alphabetic())
}

/// `value` nanoseconds written in units of `unit_ns` with at least `min_dec` decimals and
/// as many more as the value needs to stay exact.
pub(crate) fn fmt_time(ns: i64, unit_ns: i64, min_dec: usize) -> String {
    let neg = ns < 0;
    let a = ns.unsigned_abs();
    let unit = unit_ns as u64;
    let ip = a / unit;
    let frac = a % unit;
    let digits = unit.ilog10() as usize;
    let mut s = if neg {
        format!("-{ip}")
    } else {
        ip.to_string()
    };
    if digits > 0 {
        let f = format!("{frac:0digits$}");
        let keep = f.trim_end_matches('0').len().max(min_dec.min(digits));
        if keep > 0 {
            s.push('.');
            s.push_str(&f[..keep]);
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_in_errors_escape_control_characters() {
        assert_eq!(show(b"12ab"), "12ab");
        assert_eq!(show(b"1\x1b[2J\x0b2\r"), "1\\u{1b}[2J\\u{b}2\\r");
        assert_eq!(show("é".as_bytes()), "é");
        assert_eq!(show(&[0xFF]), "\u{FFFD}");
        let long = show(&[b'7'; 50]);
        assert_eq!(long.chars().count(), 41);
        assert!(long.ends_with('…'));
    }

    #[test]
    fn numbers() {
        assert_eq!(parse_u64(b"0"), Some(0));
        assert_eq!(parse_u64(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(parse_u64(b"18446744073709551616"), None);
        assert_eq!(parse_u64(b""), None);
        assert_eq!(parse_u64(b"1x"), None);
        assert_eq!(parse_u64_any(b"0x10"), Some(16));
        assert_eq!(parse_time_ns(b"0.551706", 1_000_000_000), Ok(551_706_000));
        assert_eq!(parse_time_ns(b"12.5", 1_000_000), Ok(12_500_000));
        assert_eq!(parse_time_ns(b"-1.5", 1_000), Ok(-1_500));
        assert_eq!(parse_time_ns(b"1e3", 1), Ok(1000));
        assert_eq!(parse_time_ns(b".5", 1_000_000_000), Ok(500_000_000));
        assert_eq!(
            parse_time_ns(b"1.0000000001", 1_000_000_000),
            Ok(1_000_000_000)
        );
        let not = Err(TimeError::NotNumber);
        for b in [
            &b"x"[..],
            b"-",
            b"NaN",
            b"inf",
            b"-inf",
            b"--5",
            b"+-5",
            b"1.2.3",
        ] {
            assert_eq!(parse_time_ns(b, 1), not, "{}", show(b));
        }
    }

    #[test]
    fn time_stamps_beyond_64_bit_nanoseconds_are_out_of_range_not_malformed() {
        // QA stop 24, F11: these were "not a number".
        let out = Err(TimeError::OutOfRange);
        let s = 1_000_000_000;
        assert_eq!(parse_time_ns(b"1e300", s), out);
        assert_eq!(parse_time_ns(b"-1e300", s), out);
        assert_eq!(parse_time_ns(b"1e400", s), out);
        assert_eq!(parse_time_ns(b"99999999999.5", s), out);
        assert_eq!(parse_time_ns(b"18446744073.709551615", s), out);
        assert_eq!(parse_time_ns(b"18446744073709551615", 1_000), out);
        assert_eq!(parse_time_ns(b"1e10", s), out);
        // The largest time stamp that fits still reads.
        assert_eq!(parse_time_ns(b"9223372036.854775807", s), Ok(i64::MAX));
        let m = time_error(TimeError::OutOfRange, "timestamp", b"1e300", "a number", s);
        assert_eq!(
            m,
            "timestamp '1e300' is out of range (at most 9223372036.854775807 s: time stamps \
             are kept as 64-bit nanoseconds, about ±292 years)"
        );
        let m = time_error(TimeError::NotNumber, "time", b"1x", "not SEC.NSEC", s);
        assert_eq!(m, "time '1x' is not SEC.NSEC");
    }

    #[test]
    fn sizes_with_every_binary_unit_up_to_eib() {
        // QA stop 24, F10: docs/traces.md shows an 8 EiB space.
        assert_eq!(parse_size("8EiB"), Ok(1 << 63));
        assert_eq!(parse_size("8 EiB"), Ok(1 << 63));
        assert_eq!(parse_size("2PiB"), Ok(2 << 50));
        assert_eq!(parse_size("1p"), Ok(1 << 50));
        assert_eq!(parse_size("64 TiB"), Ok(64 << 40));
        assert_eq!(parse_size("1.5GiB"), Ok(3 << 29));
        assert_eq!(parse_size("192MiB"), Ok(192 << 20));
        assert_eq!(parse_size("4096"), Ok(4096));
        assert_eq!(parse_size("15.5EiB"), Ok(31 << 59));
        // 2^-60 EiB is one byte: 60 decimals, exact.
        let one = format!(
            "0.{}EiB",
            "000000000000000000867361737988403547205962240695953369140625"
        );
        assert_eq!(parse_size(&one), Ok(1));
        assert!(parse_size("0.3B")
            .unwrap_err()
            .contains("not a whole number of bytes"));
        assert!(parse_size("0.1EiB")
            .unwrap_err()
            .contains("not a whole number of bytes"));
        for big in ["16EiB", "16384PiB", "18446744073709551616"] {
            let e = parse_size(big).unwrap_err();
            assert!(
                e.contains("size too large (at most 18446744073709551615 bytes"),
                "{e}"
            );
        }
        assert!(parse_size("4XB")
            .unwrap_err()
            .contains("unknown size unit 'XB'"));
        assert!(parse_size("KiB").is_err());
    }

    #[test]
    fn splitting() {
        let mut f = [&b""[..]; 3];
        assert_eq!(split_csv(b"a, b ,c", &mut f), 3);
        assert_eq!(f, [&b"a"[..], b"b", b"c"]);
        assert_eq!(split_csv(b"a,b,c,d,e", &mut f), 4);
        assert_eq!(split_csv(b"a", &mut f), 1);
        assert_eq!(split_ws(b"  8,0  1\t2 ", &mut f), 3);
        assert_eq!(f, [&b"8,0"[..], b"1", b"2"]);
        assert_eq!(split_ws(b"1 2 3 4", &mut f), 4);
        assert_eq!(split_ws(b"   ", &mut f), 0);
    }

    #[test]
    fn time_format() {
        assert_eq!(fmt_time(551_706_000, 1_000_000_000, 6), "0.551706");
        assert_eq!(fmt_time(1_000_000_001, 1_000_000_000, 6), "1.000000001");
        assert_eq!(fmt_time(12_500_000, 1_000_000, 3), "12.500");
        assert_eq!(fmt_time(-1_500, 1_000, 0), "-1.5");
        assert_eq!(fmt_time(7_000, 1_000, 0), "7");
        assert_eq!(fmt_time(7, 1, 0), "7");
    }
}
