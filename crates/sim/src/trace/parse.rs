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

/// A decimal number of `unit_ns` nanoseconds (`12`, `12.5`, `-0.25`, `1e3`), converted to
/// whole nanoseconds. Plain decimals are converted exactly (digits beyond a nanosecond are
/// truncated); other spellings fall back to a float parse.
#[inline]
pub(crate) fn parse_time_ns(b: &[u8], unit_ns: i64) -> Option<i64> {
    let (neg, body) = match b.first() {
        Some(b'-') => (true, &b[1..]),
        Some(b'+') => (false, &b[1..]),
        _ => (false, b),
    };
    let (ip, fp) = match body.iter().position(|&c| c == b'.') {
        Some(i) => (&body[..i], &body[i + 1..]),
        None => (body, &body[..0]),
    };
    if ip.is_empty() && fp.is_empty() {
        return None;
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
            let v: f64 = std::str::from_utf8(body).ok()?.parse().ok()?;
            let ns = v * unit_ns as f64;
            if !ns.is_finite() || ns.abs() >= i64::MAX as f64 {
                return None;
            }
            ns.round() as i64
        }
    };
    Some(if neg { -ns } else { ns })
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
        assert_eq!(parse_time_ns(b"0.551706", 1_000_000_000), Some(551_706_000));
        assert_eq!(parse_time_ns(b"12.5", 1_000_000), Some(12_500_000));
        assert_eq!(parse_time_ns(b"-1.5", 1_000), Some(-1_500));
        assert_eq!(parse_time_ns(b"1e3", 1), Some(1000));
        assert_eq!(parse_time_ns(b".5", 1_000_000_000), Some(500_000_000));
        assert_eq!(
            parse_time_ns(b"1.0000000001", 1_000_000_000),
            Some(1_000_000_000)
        );
        assert_eq!(parse_time_ns(b"x", 1), None);
        assert_eq!(parse_time_ns(b"-", 1), None);
        assert_eq!(parse_time_ns(b"NaN", 1), None);
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
