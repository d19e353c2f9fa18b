//! SmartMedia-style Hamming ECC for NAND pages (SEC-DED per 512-byte chunk).
//!
//! This is the classic software ECC used by SmartMedia, YAFFS, ScaleFFS and
//! Linux's `nand_ecc.c` (in its 512-byte, "SmartMedia byte order" flavour):
//! every 512-byte chunk gets 3 bytes (24 bits) of code that can **correct any
//! single flipped bit** (in the data or in the code itself) and **detect any two
//! flipped data bits**.
//!
//! # Parities
//!
//! A data bit is addressed by its byte index `i` (0..512, 9 bits `i8..i0`)
//! and its bit index `b` within the byte (0..8, 3 bits `b2..b0`, bit 0 = LSB).
//!
//! * **Line (row) parities** `LP0..LP17`: for each byte-address bit `k` in
//!   0..9, `LP(2k)` is the parity (XOR) of all data bits of the bytes whose
//!   index has bit `k` = 0 and `LP(2k+1)` that of the bytes whose index has
//!   bit `k` = 1.
//! * **Column parities** `CP0..CP5`: for each bit-address bit `k` in 0..3,
//!   `CP(2k)` is the parity of all data bits (in every byte) whose bit index
//!   has bit `k` = 0, and `CP(2k+1)` that of those whose bit index has bit `k`
//!   = 1. In masks over the XOR of all bytes: CP0 = `0x55`, CP1 = `0xAA`,
//!   CP2 = `0x33`, CP3 = `0xCC`, CP4 = `0x0F`, CP5 = `0xF0`.
//!
//! # On-flash layout (format-defining)
//!
//! The 3 code bytes, most significant bit first:
//!
//! | byte | bit 7 | bit 6 | bit 5 | bit 4 | bit 3 | bit 2 | bit 1 | bit 0 |
//! |------|-------|-------|-------|-------|-------|-------|-------|-------|
//! | 0    | LP7   | LP6   | LP5   | LP4   | LP3   | LP2   | LP1   | LP0   |
//! | 1    | LP15  | LP14  | LP13  | LP12  | LP11  | LP10  | LP9   | LP8   |
//! | 2    | CP5   | CP4   | CP3   | CP2   | CP1   | CP0   | LP17  | LP16  |
//!
//! Equivalently, read as a little-endian 24-bit word `code[0] | code[1] << 8 |
//! code[2] << 16`, bit `j` is `LPj` for `j < 18` and bit `18 + j` is `CPj`.
//! This is the order Linux uses with `sm_order` (SmartMedia order); the
//! non-SmartMedia Linux order merely swaps bytes 0 and 1.
//!
//! **Every stored bit is the inverted parity** (1 = even parity). Consequently
//! an erased (all-`0xFF`) chunk has the erased code `FF FF FF`, so an erased
//! page reads back as ECC-clean without special casing. (All-`0x00` data also
//! yields `FF FF FF`.)
//!
//! # Decoding
//!
//! The syndrome is `stored XOR computed` (inversion cancels out). Parities come
//! in complementary pairs `(bit 2m, bit 2m+1)` of the 24-bit word:
//!
//! * syndrome 0 — clean;
//! * every one of the 12 pairs is `01` or `10` — exactly one data bit flipped;
//!   the odd bits (LP1, LP3, .., LP17) spell the byte index and CP1, CP3, CP5
//!   the bit index;
//! * exactly one syndrome bit set — a bit of the stored code itself flipped;
//! * anything else — uncorrectable. In particular any two data-bit errors give
//!   pairs that are each `00` or `11` (not all `00`), which can match neither
//!   of the correctable patterns, so double data-bit errors are always
//!   reported as [`EccOutcome::Uncorrectable`].

use std::fmt;

/// Bytes of ECC code per 512-byte chunk.
pub const ECC_BYTES: usize = 3;

/// Size in bytes of the data chunk covered by one ECC code.
pub const ECC_CHUNK: usize = 512;

/// Result of checking one chunk against its stored code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EccOutcome {
    /// Data and code agree.
    Clean,
    /// A single flipped data bit was found and fixed in place: `byte` is its
    /// index in the chunk (0..512), `bit` its index in the byte (0 = LSB).
    Corrected { byte: usize, bit: u8 },
    /// A single bit of the stored code was wrong; the data is fine and was
    /// left untouched.
    CodeCorrected,
    /// Two or more bit errors were detected; the data was left untouched.
    Uncorrectable,
}

/// Errors from the page-level helpers (caller bugs: bad buffer lengths).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EccError {
    /// The data length is not a multiple of [`ECC_CHUNK`].
    DataLength { len: usize },
    /// The code buffer length is not `data.len() / ECC_CHUNK * ECC_BYTES`.
    CodeLength { expected: usize, actual: usize },
}

impl fmt::Display for EccError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            EccError::DataLength { len } => write!(
                f,
                "ECC data length {len} is not a multiple of {ECC_CHUNK} bytes"
            ),
            EccError::CodeLength { expected, actual } => {
                write!(f, "ECC code buffer is {actual} bytes, expected {expected}")
            }
        }
    }
}

impl std::error::Error for EccError {}

/// Summary of [`ecc_correct_page`] over all chunks of a page.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PageEccReport {
    /// Number of single-bit errors corrected, counting both flipped data bits
    /// (fixed in place) and flipped bits of the stored code (data was fine).
    /// Useful as a scrub / wear indicator.
    pub corrected_bits: u32,
    /// Number of chunks with an uncorrectable (≥ 2 bit) error; their data
    /// is left as read.
    pub uncorrectable_chunks: u32,
    /// The most bits corrected in one chunk (how close the page came to its code's
    /// limit: what scrubbing decides on).
    pub most_in_a_chunk: u32,
}

/// Byte parity flag in [`ECC_TABLE`] entries.
const PARITY_BIT: u8 = 0x40;

/// Per-byte lookup table (as in the original Linux `nand_ecc.c`): bits 0..=5
/// are the column parities CP0..CP5 of the byte value, bit 6 is the parity of
/// the whole byte. Being linear, the XOR of entries is the entry of the XOR.
static ECC_TABLE: [u8; 256] = build_table();

const fn build_table() -> [u8; 256] {
    const CP_MASKS: [u8; 6] = [0x55, 0xAA, 0x33, 0xCC, 0x0F, 0xF0];
    let mut t = [0u8; 256];
    let mut v = 0;
    while v < 256 {
        let mut e = 0u8;
        let mut k = 0;
        while k < 6 {
            if ((v as u8) & CP_MASKS[k]).count_ones() & 1 == 1 {
                e |= 1 << k;
            }
            k += 1;
        }
        if (v as u8).count_ones() & 1 == 1 {
            e |= PARITY_BIT;
        }
        t[v] = e;
        v += 1;
    }
    t
}

/// Mask of the even bits of the 24-bit code word (LP0, LP2, .., CP4).
const EVEN_BITS: u32 = 0x55_5555;

/// Compute the raw (non-inverted) 24-bit parity word of a chunk, in the
/// layout documented at module level.
fn parity_word(chunk: &[u8; ECC_CHUNK]) -> u32 {
    // Eight bytes at a time. `all`: XOR of every word, folded below into the XOR of all
    // bytes, whose table entry is the XOR of the bytes' entries (CP bits + total parity).
    // `lanes`: bit 8j is the XOR over all words of the parity of their byte j, giving the
    // bits of `addr` (the XOR of the indices of all bytes with odd parity; its bit k is
    // LP(2k+1)) for the byte's place in its word; `words` gives the rest: the XOR of the
    // indices of the words holding an odd number of odd-parity bytes.
    const ONES: u64 = 0x0101_0101_0101_0101;
    let (mut all, mut lanes, mut words) = (0u64, 0u64, 0u32);
    for (w, c) in chunk.chunks_exact(8).enumerate() {
        let x = u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]);
        all ^= x;
        let mut p = x ^ (x >> 4);
        p ^= p >> 2;
        p ^= p >> 1;
        let p = p & ONES;
        lanes ^= p;
        let odd = (p.wrapping_mul(ONES) >> 56) as u32 & 1;
        words ^= (w as u32) & odd.wrapping_neg();
    }
    let lane = |mask: u64| (lanes & mask).count_ones() & 1;
    let addr = lane(0x0100_0100_0100_0100)
        | lane(0x0101_0000_0101_0000) << 1
        | lane(0x0101_0101_0000_0000) << 2
        | words << 3;
    let mut b = all ^ (all >> 32);
    b ^= b >> 16;
    b ^= b >> 8;
    let acc = ECC_TABLE[(b & 0xFF) as usize];
    let total = u32::from(acc >> 6) & 1;
    let odd_lp = spread_odd(addr & 0x1ff);
    let even_lp = spread_odd((addr ^ total.wrapping_neg()) & 0x1ff) >> 1;
    let cp = u32::from(acc & 0x3f) << 18;
    odd_lp | even_lp | cp
}

/// Place bit k of `x` (9 bits) at bit 2k+1.
#[inline]
fn spread_odd(x: u32) -> u32 {
    let mut out = 0;
    for k in 0..9 {
        out |= ((x >> k) & 1) << (2 * k + 1);
    }
    out
}

/// Gather the odd bits 1, 3, .., 23 of `x` into bits 0..12.
#[inline]
fn gather_odd(x: u32) -> u32 {
    let mut out = 0;
    for k in 0..12 {
        out |= ((x >> (2 * k + 1)) & 1) << k;
    }
    out
}

#[inline]
fn word_to_code(w: u32) -> [u8; ECC_BYTES] {
    let b = w.to_le_bytes();
    [b[0], b[1], b[2]]
}

#[inline]
fn code_to_word(c: &[u8; ECC_BYTES]) -> u32 {
    u32::from_le_bytes([c[0], c[1], c[2], 0])
}

/// Compute the 3-byte code of one 512-byte chunk (layout: see module docs;
/// all bits stored inverted so erased data has code `FF FF FF`).
pub fn ecc_compute(chunk: &[u8; ECC_CHUNK]) -> [u8; ECC_BYTES] {
    word_to_code(!parity_word(chunk) & 0xff_ffff)
}

/// Check `chunk` against the `stored` code; fix a single flipped data bit in
/// place.
///
/// Returns [`EccOutcome::Clean`] if there is no error,
/// [`EccOutcome::Corrected`] with the position of the data bit that was
/// flipped back, [`EccOutcome::CodeCorrected`] if the single error was in the
/// stored code (data untouched), or [`EccOutcome::Uncorrectable`] if two or
/// more bit errors were detected (data untouched).
pub fn ecc_correct(chunk: &mut [u8; ECC_CHUNK], stored: &[u8; ECC_BYTES]) -> EccOutcome {
    let computed = code_to_word(&ecc_compute(chunk));
    let syndrome = computed ^ code_to_word(stored);
    if syndrome == 0 {
        return EccOutcome::Clean;
    }
    if (syndrome ^ (syndrome >> 1)) & EVEN_BITS == EVEN_BITS {
        let pos = gather_odd(syndrome);
        let byte = (pos & 0x1ff) as usize;
        let bit = (pos >> 9) as u8;
        chunk[byte] ^= 1 << bit;
        return EccOutcome::Corrected { byte, bit };
    }
    if syndrome.count_ones() == 1 {
        return EccOutcome::CodeCorrected;
    }
    EccOutcome::Uncorrectable
}

fn check_lengths(data_len: usize, code_len: usize) -> Result<(), EccError> {
    let chunks = data_len / ECC_CHUNK;
    if chunks * ECC_CHUNK != data_len {
        return Err(EccError::DataLength { len: data_len });
    }
    let expected = chunks * ECC_BYTES;
    if code_len != expected {
        return Err(EccError::CodeLength {
            expected,
            actual: code_len,
        });
    }
    Ok(())
}

/// Compute the code of a whole page: `data.len()` must be a multiple of
/// [`ECC_CHUNK`] and `code_out.len()` must be `data.len() / ECC_CHUNK *
/// ECC_BYTES`; chunk `n`'s code goes to `code_out[3n..3n + 3]`.
pub fn ecc_compute_page(data: &[u8], code_out: &mut [u8]) -> Result<(), EccError> {
    check_lengths(data.len(), code_out.len())?;
    for (chunk, out) in data
        .chunks_exact(ECC_CHUNK)
        .zip(code_out.chunks_exact_mut(ECC_BYTES))
    {
        let chunk: &[u8; ECC_CHUNK] = chunk.try_into().expect("exact chunk");
        out.copy_from_slice(&ecc_compute(chunk));
    }
    Ok(())
}

/// Check and correct a whole page in place against `code` (laid out as by
/// [`ecc_compute_page`]). Every chunk is processed even after an
/// uncorrectable one; the report counts corrected bits and bad chunks.
pub fn ecc_correct_page(data: &mut [u8], code: &[u8]) -> Result<PageEccReport, EccError> {
    check_lengths(data.len(), code.len())?;
    let mut report = PageEccReport::default();
    for (chunk, stored) in data
        .chunks_exact_mut(ECC_CHUNK)
        .zip(code.chunks_exact(ECC_BYTES))
    {
        let chunk: &mut [u8; ECC_CHUNK] = chunk.try_into().expect("exact chunk");
        let stored: &[u8; ECC_BYTES] = stored.try_into().expect("exact code");
        match ecc_correct(chunk, stored) {
            EccOutcome::Clean => {}
            EccOutcome::Corrected { .. } | EccOutcome::CodeCorrected => {
                report.corrected_bits += 1;
                report.most_in_a_chunk = 1;
            }
            EccOutcome::Uncorrectable => report.uncorrectable_chunks += 1,
        }
    }
    Ok(report)
}

/// The strongest code, in bits corrected per 512-byte chunk, that [`code_bytes`],
/// [`compute_page_t`] and [`correct_page_t`] take.
pub const MAX_STRENGTH: u8 = crate::bch::MAX_T as u8;

/// Stored code bytes per chunk of a code of strength `t`, the bits it corrects per
/// 512-byte chunk: 0 for no code, 3 for 1 (this module's SEC-DED code), ceil(13·t / 8)
/// for 2..=[`MAX_STRENGTH`] (a BCH code, [`crate::bch`]). The FMS records the strength in
/// its segment headers.
pub fn code_bytes(t: u8) -> usize {
    match t {
        0 => 0,
        1 => ECC_BYTES,
        t => bch(t).code_bytes(),
    }
}

/// The BCH code of strength `t` (2..=[`MAX_STRENGTH`]), built once per process.
fn bch(t: u8) -> &'static crate::bch::Bch {
    static CODES: [std::sync::OnceLock<crate::bch::Bch>; MAX_STRENGTH as usize + 1] =
        [const { std::sync::OnceLock::new() }; MAX_STRENGTH as usize + 1];
    assert!((2..=MAX_STRENGTH).contains(&t), "ECC strength {t}");
    CODES[t as usize].get_or_init(|| crate::bch::Bch::new(t as u32).expect("strength in range"))
}

/// [`ecc_compute_page`] for a code of strength `t` (0..=[`MAX_STRENGTH`]; 0: no code,
/// nothing to write): `code_out` holds [`code_bytes`]`(t)` bytes per chunk.
pub fn compute_page_t(t: u8, data: &[u8], code_out: &mut [u8]) -> Result<(), EccError> {
    match t {
        0 => Ok(()),
        1 => ecc_compute_page(data, code_out),
        t => bch(t).compute_page(data, code_out),
    }
}

/// [`ecc_correct_page`] for a code of strength `t` (0..=[`MAX_STRENGTH`]; 0: no code,
/// nothing corrected).
pub fn correct_page_t(t: u8, data: &mut [u8], code: &[u8]) -> Result<PageEccReport, EccError> {
    match t {
        0 => Ok(PageEccReport::default()),
        1 => ecc_correct_page(data, code),
        t => bch(t).correct_page(data, code),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Small xorshift64* PRNG so the tests need no crates.
    struct Rng(u64);

    impl Rng {
        fn new(seed: u64) -> Self {
            Rng(seed | 1)
        }
        fn next(&mut self) -> u64 {
            let mut x = self.0;
            x ^= x >> 12;
            x ^= x << 25;
            x ^= x >> 27;
            self.0 = x;
            x.wrapping_mul(0x2545_F491_4F6C_DD1D)
        }
        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
        fn chunk(&mut self) -> [u8; ECC_CHUNK] {
            let mut c = [0u8; ECC_CHUNK];
            for b in c.iter_mut() {
                *b = self.next() as u8;
            }
            c
        }
    }

    /// Bit-by-bit reference straight from the definitions in the module docs.
    fn reference_code(chunk: &[u8; ECC_CHUNK]) -> [u8; ECC_BYTES] {
        let mut lp = [0u8; 18];
        let mut cp = [0u8; 6];
        for (i, &byte) in chunk.iter().enumerate() {
            for b in 0..8 {
                let v = (byte >> b) & 1;
                for k in 0..9 {
                    lp[2 * k + ((i >> k) & 1)] ^= v;
                }
                for k in 0..3 {
                    cp[2 * k + ((b >> k) & 1)] ^= v;
                }
            }
        }
        let mut code = [0u8; 3];
        for j in 0..8 {
            code[0] |= (lp[j] ^ 1) << j;
            code[1] |= (lp[8 + j] ^ 1) << j;
        }
        code[2] = (lp[16] ^ 1) | ((lp[17] ^ 1) << 1);
        for (k, &p) in cp.iter().enumerate() {
            code[2] |= (p ^ 1) << (k + 2);
        }
        code
    }

    #[test]
    fn table_matches_definition() {
        for (v, &e) in ECC_TABLE.iter().enumerate() {
            let b = v as u8;
            assert_eq!(e >> 7, 0);
            assert_eq!(u32::from((e >> 6) & 1), b.count_ones() & 1);
            assert_eq!(u32::from(e & 1), (b & 0x55).count_ones() & 1);
            assert_eq!(u32::from((e >> 5) & 1), (b & 0xF0).count_ones() & 1);
        }
    }

    #[test]
    fn matches_reference() {
        let mut rng = Rng::new(0x1234_5678);
        for _ in 0..200 {
            let c = rng.chunk();
            assert_eq!(ecc_compute(&c), reference_code(&c));
        }
        // Sparse chunks exercise individual line parities.
        for i in 0..ECC_CHUNK {
            let mut c = [0u8; ECC_CHUNK];
            c[i] = 1 << (i % 8);
            assert_eq!(ecc_compute(&c), reference_code(&c), "byte {i}");
        }
    }

    #[test]
    fn erased_and_zero_chunks_have_erased_code() {
        assert_eq!(ecc_compute(&[0xFF; ECC_CHUNK]), [0xFF, 0xFF, 0xFF]);
        assert_eq!(ecc_compute(&[0x00; ECC_CHUNK]), [0xFF, 0xFF, 0xFF]);
        let mut c = [0xFF; ECC_CHUNK];
        assert_eq!(ecc_correct(&mut c, &[0xFF; 3]), EccOutcome::Clean);
    }

    #[test]
    fn known_vector_single_bit() {
        // Only byte 0x1A5, bit 6 set: odd LPs spell 0x1A5, CP1/CP3/CP5 spell 6.
        let mut c = [0u8; ECC_CHUNK];
        c[0x1A5] = 1 << 6;
        let raw = !code_to_word(&ecc_compute(&c)) & 0xff_ffff;
        for k in 0..9 {
            let bitk = (0x1A5 >> k) & 1;
            assert_eq!((raw >> (2 * k + 1)) & 1, bitk, "LP{}", 2 * k + 1);
            assert_eq!((raw >> (2 * k)) & 1, bitk ^ 1, "LP{}", 2 * k);
        }
        for k in 0..3 {
            let bitk = (6 >> k) & 1;
            assert_eq!((raw >> (18 + 2 * k + 1)) & 1, bitk, "CP{}", 2 * k + 1);
            assert_eq!((raw >> (18 + 2 * k)) & 1, bitk ^ 1, "CP{}", 2 * k);
        }
    }

    #[test]
    fn clean_chunks_are_clean() {
        let mut rng = Rng::new(42);
        for _ in 0..100 {
            let orig = rng.chunk();
            let code = ecc_compute(&orig);
            let mut c = orig;
            assert_eq!(ecc_correct(&mut c, &code), EccOutcome::Clean);
            assert_eq!(c, orig);
        }
    }

    #[test]
    fn every_single_data_bit_is_corrected() {
        let mut rng = Rng::new(0xDEAD_BEEF);
        for round in 0..20 {
            let orig = rng.chunk();
            let code = ecc_compute(&orig);
            // Every bit for the first few chunks, a random sample afterwards.
            let positions: Vec<usize> = if round < 4 {
                (0..ECC_CHUNK * 8).collect()
            } else {
                (0..256).map(|_| rng.below(ECC_CHUNK * 8)).collect()
            };
            for pos in positions {
                let (byte, bit) = (pos / 8, (pos % 8) as u8);
                let mut c = orig;
                c[byte] ^= 1 << bit;
                assert_eq!(
                    ecc_correct(&mut c, &code),
                    EccOutcome::Corrected { byte, bit }
                );
                assert_eq!(c, orig, "data not restored for byte {byte} bit {bit}");
            }
        }
    }

    #[test]
    fn every_single_code_bit_is_code_corrected() {
        let mut rng = Rng::new(7);
        let mut chunks = vec![[0xFF; ECC_CHUNK], [0x00; ECC_CHUNK]];
        chunks.extend((0..20).map(|_| rng.chunk()));
        for orig in chunks {
            let code = ecc_compute(&orig);
            for bit in 0..24 {
                let mut bad = code;
                bad[bit / 8] ^= 1 << (bit % 8);
                let mut c = orig;
                assert_eq!(ecc_correct(&mut c, &bad), EccOutcome::CodeCorrected);
                assert_eq!(c, orig);
            }
        }
    }

    #[test]
    fn double_data_bit_errors_are_uncorrectable() {
        let mut rng = Rng::new(0xC0FFEE);
        for _ in 0..50 {
            let orig = rng.chunk();
            let code = ecc_compute(&orig);
            for _ in 0..400 {
                let p = rng.below(ECC_CHUNK * 8);
                let mut q = rng.below(ECC_CHUNK * 8 - 1);
                if q >= p {
                    q += 1;
                }
                let mut c = orig;
                c[p / 8] ^= 1 << (p % 8);
                c[q / 8] ^= 1 << (q % 8);
                let damaged = c;
                assert_eq!(
                    ecc_correct(&mut c, &code),
                    EccOutcome::Uncorrectable,
                    "bits {p} and {q}"
                );
                assert_eq!(c, damaged, "uncorrectable chunk must be left untouched");
            }
        }
    }

    #[test]
    fn adjacent_and_same_byte_double_errors_are_uncorrectable() {
        let orig = Rng::new(99).chunk();
        let code = ecc_compute(&orig);
        for byte in 0..ECC_CHUNK {
            for (a, b) in [(0u8, 1u8), (3, 7), (2, 5)] {
                let mut c = orig;
                c[byte] ^= (1 << a) | (1 << b);
                assert_eq!(ecc_correct(&mut c, &code), EccOutcome::Uncorrectable);
            }
            // Same bit in two different bytes.
            let other = (byte + 1 + byte % 37) % ECC_CHUNK;
            let mut c = orig;
            c[byte] ^= 0x10;
            c[other] ^= 0x10;
            assert_eq!(ecc_correct(&mut c, &code), EccOutcome::Uncorrectable);
        }
    }

    #[test]
    fn data_plus_code_bit_error_is_not_silently_clean() {
        let mut rng = Rng::new(5);
        let orig = rng.chunk();
        let code = ecc_compute(&orig);
        for _ in 0..500 {
            let p = rng.below(ECC_CHUNK * 8);
            let cb = rng.below(24);
            let mut c = orig;
            c[p / 8] ^= 1 << (p % 8);
            let mut bad = code;
            bad[cb / 8] ^= 1 << (cb % 8);
            assert_ne!(ecc_correct(&mut c, &bad), EccOutcome::Clean);
        }
    }

    #[test]
    fn page_helpers_round_trip() {
        let mut rng = Rng::new(0xABCDEF);
        let mut page = vec![0u8; 4 * ECC_CHUNK];
        for b in page.iter_mut() {
            *b = rng.next() as u8;
        }
        let mut code = vec![0u8; 4 * ECC_BYTES];
        ecc_compute_page(&page, &mut code).unwrap();
        for (n, chunk) in page.chunks_exact(ECC_CHUNK).enumerate() {
            let chunk: &[u8; ECC_CHUNK] = chunk.try_into().unwrap();
            assert_eq!(&code[n * 3..n * 3 + 3], &ecc_compute(chunk));
        }

        let orig = page.clone();
        assert_eq!(
            ecc_correct_page(&mut page, &code).unwrap(),
            PageEccReport::default()
        );
        assert_eq!(page, orig);

        // Chunk 0: one data bit; chunk 1: one code bit; chunk 2: two data
        // bits; chunk 3: clean.
        page[100] ^= 0x04;
        let mut bad_code = code.clone();
        bad_code[3 + 2] ^= 0x80;
        page[2 * ECC_CHUNK + 10] ^= 0x01;
        page[2 * ECC_CHUNK + 300] ^= 0x40;
        let report = ecc_correct_page(&mut page, &bad_code).unwrap();
        assert_eq!(
            report,
            PageEccReport {
                corrected_bits: 2,
                uncorrectable_chunks: 1,
                most_in_a_chunk: 1,
            }
        );
        assert_eq!(page[..2 * ECC_CHUNK], orig[..2 * ECC_CHUNK]);
        assert_eq!(page[3 * ECC_CHUNK..], orig[3 * ECC_CHUNK..]);
        assert_ne!(
            page[2 * ECC_CHUNK..3 * ECC_CHUNK],
            orig[2 * ECC_CHUNK..3 * ECC_CHUNK]
        );

        // Erased page: erased code, clean.
        let mut erased = vec![0xFF; 2 * ECC_CHUNK];
        let mut ecode = vec![0u8; 2 * ECC_BYTES];
        ecc_compute_page(&erased, &mut ecode).unwrap();
        assert!(ecode.iter().all(|&b| b == 0xFF));
        assert_eq!(
            ecc_correct_page(&mut erased, &ecode).unwrap(),
            PageEccReport::default()
        );

        // Empty page is fine.
        ecc_compute_page(&[], &mut []).unwrap();
    }

    #[test]
    fn page_helpers_reject_bad_lengths() {
        let mut out = [0u8; 3];
        assert_eq!(
            ecc_compute_page(&[0u8; 511], &mut out),
            Err(EccError::DataLength { len: 511 })
        );
        assert_eq!(
            ecc_compute_page(&[0u8; 1024], &mut out),
            Err(EccError::CodeLength {
                expected: 6,
                actual: 3
            })
        );
        let mut data = [0u8; 512];
        assert_eq!(
            ecc_correct_page(&mut data, &[0u8; 4]),
            Err(EccError::CodeLength {
                expected: 3,
                actual: 4
            })
        );
        let e = EccError::DataLength { len: 7 };
        assert!(e.to_string().contains("multiple of 512"));
        let _: &dyn std::error::Error = &e;
    }
}
