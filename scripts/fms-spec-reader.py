#!/usr/bin/env python3
"""Independent reader of a flashkit FMS image, written from the specs only.

Specs: docs/format/nand-image.md (NAND image container) and docs/format/fms.md
(Flash Memory Server on-flash format and mount rules).  Standard library only.

    fms-spec-reader.py IMAGE [--dump OUT] [--no-blocks] [--lint] [--reserve N] [--streams N]
                       [--no-summary-check]

prints JSON {"block_size", "logical_blocks", "mapped", "blocks": {lbn: sha256}, ...}
(plus the mount figures `fms info --json` reports) and with --dump writes the whole
logical device; unmapped and trimmed blocks read as zeros.  --lint adds "lint": the
documented byte-level invariants that are violated (ECC codes recomputed).  Two inputs
fms.md does not let a reader derive from the medium: --reserve N (segments kept in
reserve, used only when the headers record capacity 0) and --streams N (how many
streams the index entries may name; default: any).  With ECC, a single flipped bit per
512 bytes (BCH-t: up to t) is corrected, an uncorrectable block is an error and a trim
list holding an uncorrectable chunk is unreadable, as flashkit does.  Header-mode
entries' live state is read as the headers' features say: bit 0 alone, or with the live
byte (features bit 1) a majority of bits 0 and 2..7.  A segment header that does not
decode is corrected with the code its page's first chunk carries (features bit 2, up to
the medium's strength in bits), else by one bit (CRC search), as flashkit does.  With
segment summaries (features bit 3), a full segment's records come from its summary when
it is valid for the segment's header ("summaries_read"); the records of such a segment
are read too, and a slot whose record decodes but differs from the summary's copy is
counted in "summary_mismatches" (listed in "summary_mismatch_slots"; --no-summary-check
skips this cross-check: "summary_mismatches" is then null).  With record correction
(features bit 8), a spare record one bit from valid that a later record of its segment
follows is read corrected ("corrected_records"), and a segment whose tail (records after
the last valid one) holds one one or two bits from valid is full.
Any invalid input gives a one-line error on stderr and exit status 1.

The mount is read-only: the repairs mount would make (clearing stale live bits,
recreating a lost index) are only counted, never written.
"""

import collections
import hashlib
import json
import mmap
import os
import struct
import sys


class SpecError(Exception):
    pass


# ---------------------------------------------------------------- crc32c

def _crc_table():
    poly = 0x82F63B78  # 0x1EDC6F41 reflected
    tab = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ poly if c & 1 else c >> 1
        tab.append(c)
    return tab


_CRC_TAB = _crc_table()


def crc32c(data, crc=0):
    c = crc ^ 0xFFFFFFFF
    tab = _CRC_TAB
    for b in data:
        c = tab[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


assert crc32c(b"123456789") == 0xE3069283  # the standard CRC-32C check value

INV = bytes(255 - i for i in range(256))
ALL_FF = {}


def ff(n):
    v = ALL_FF.get(n)
    if v is None:
        v = ALL_FF[n] = b"\xff" * n
    return v


def align(x):
    return (x + 4095) // 4096 * 4096


# ---------------------------------------------------------------- NAND image

NAND_MAGIC = b"FLASHKIT-NAND\x00\x00\x00"


class NandImage:
    def __init__(self, path):
        self.path = path
        try:
            f = open(path, "rb")
        except OSError as e:
            raise SpecError("cannot open: %s" % e.strerror)
        with f:
            size = os.fstat(f.fileno()).st_size
            if size < 4096:
                raise SpecError("truncated: %d bytes, a flashkit NAND image header needs 4096" % size)
            self.mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        h = self.mm[0:4096]
        if h[0:16] != NAND_MAGIC:
            raise SpecError("not a flashkit NAND image (bad magic)")
        ver = struct.unpack_from("<I", h, 16)[0]
        if ver != 1:
            raise SpecError("unsupported image version %d (this build reads 1)" % ver)
        if crc32c(h[0:4092]) != struct.unpack_from("<I", h, 4092)[0]:
            raise SpecError("header checksum mismatch (corrupt image)")
        (self.page_size, self.spare_size, self.ppb, self.blocks, self.nop,
         in_order, self.endurance) = struct.unpack_from("<7I", h, 24)
        self.in_order = in_order != 0
        timings = struct.unpack_from("<6d", h, 56)
        name = h[104:168].split(b"\x00", 1)[0]
        try:
            self.name = name.decode("utf-8")
        except UnicodeDecodeError:
            raise SpecError("header: device configuration: name is not UTF-8")
        ps, ss = self.page_size, self.spare_size
        if not 1 <= ps <= 1 << 20:
            raise SpecError("header: device configuration: geometry.page_size: %d" % ps)
        if ss > ps:
            raise SpecError("header: device configuration: geometry.spare_size: %d > page_size" % ss)
        if self.ppb == 0:
            raise SpecError("header: device configuration: geometry.pages_per_block: 0")
        if self.blocks == 0:
            raise SpecError("header: device configuration: geometry.blocks: 0")
        if self.nop > 255:
            raise SpecError("header: device configuration: geometry.nop: %d" % self.nop)
        self.pages = self.blocks * self.ppb
        if self.pages > 1 << 40:
            raise SpecError("header: device configuration: geometry: more than 2^40 pages")
        for t in timings:
            if not (t == t and t >= 0 and t != float("inf")):
                raise SpecError("header: device configuration: a timing is not finite and >= 0")
        if self.endurance == 0:
            raise SpecError("header: device configuration: endurance: 0")
        block_off, page_off, data_off = struct.unpack_from("<3Q", h, 168)
        exp_page_off = align(4096 + self.blocks * 12)
        exp_data_off = align(exp_page_off + self.pages)
        if (block_off, page_off, data_off) != (4096, exp_page_off, exp_data_off):
            raise SpecError("header: table offsets do not match the geometry")
        self.page_off, self.data_off = page_off, data_off
        self.raw_page = ps + ss
        end = data_off + self.pages * self.raw_page
        if size < end:
            raise SpecError("truncated: %d bytes, the geometry needs %d" % (size, end))
        self.state = []
        self.erase_count = []
        # A corrupt entry (checksum, unknown state) costs its block, not the image: the
        # block is taken as grown bad (2) with the largest valid erase count (nand-image.md,
        # "Opening an image", step 9).
        self.repaired = []
        for b in range(self.blocks):
            e = self.mm[4096 + 12 * b: 4096 + 12 * b + 12]
            cnt, st, c = struct.unpack("<3I", e)
            if crc32c(e[0:8]) != c or st > 2:
                self.repaired.append(b)
                st = 2
            self.state.append(st)
            self.erase_count.append(cnt)
        valid = [n for b, n in enumerate(self.erase_count) if b not in self.repaired]
        for b in self.repaired:
            self.erase_count[b] = max(valid) if valid else 0

    # medium bytes (file bytes inverted)
    def page_data(self, ppn, col=0, n=None):
        if n is None:
            n = self.page_size - col
        o = self.data_off + ppn * self.raw_page + col
        return self.mm[o:o + n].translate(INV)

    def page_spare(self, ppn, col=0, n=None):
        if n is None:
            n = self.spare_size - col
        o = self.data_off + ppn * self.raw_page + self.page_size + col
        return self.mm[o:o + n].translate(INV)

    def seg_bytes(self, seg, off, n):
        """Segment byte offsets: page off // page_size, column off % page_size."""
        ps = self.page_size
        base = seg * self.ppb
        if self.spare_size == 0:
            o = self.data_off + base * ps + off
            return self.mm[o:o + n].translate(INV)
        out = []
        while n > 0:
            p, c = divmod(off, ps)
            k = min(n, ps - c)
            out.append(self.page_data(base + p, c, k))
            off += k
            n -= k
        return b"".join(out)



_PAR = bytes(bin(i).count("1") & 1 for i in range(256))


def smartmedia_ecc(chunk):
    """SEC-DED code of a 512-byte chunk as fms.md describes it: bytes LP7..LP0,
    LP15..LP8, CP5..CP0 LP17 LP16 (first named = most significant bit), each bit the
    inverted parity.  LP(2i)/LP(2i+1): bytes whose address bit i is 0/1; CP0/CP1:
    bit columns with column bit 0 = 0/1, CP2/CP3 column bit 1, CP4/CP5 column bit 2."""
    lp = [0] * 18
    x = 0
    for a, b in enumerate(chunk):
        if _PAR[b]:
            for i in range(9):
                lp[2 * i + ((a >> i) & 1)] ^= 1
        x ^= b
    cp = [0] * 6
    for i in range(3):
        for col in range(8):
            if (x >> col) & 1:
                cp[2 * i + ((col >> i) & 1)] ^= 1
    b0 = sum((lp[i] ^ 1) << i for i in range(8))
    b1 = sum((lp[8 + i] ^ 1) << i for i in range(8))
    b2 = ((lp[16] ^ 1) | (lp[17] ^ 1) << 1 | sum((cp[i] ^ 1) << (2 + i) for i in range(6)))
    return bytes((b0, b1, b2))



def ecc_correct(chunk, stored):
    """(data, status): status 'ok', 'corrected', 'code' (a bit of the code itself
    flipped) or 'uncorrectable'.  Syndrome bits as a 24-bit value b0 | b1<<8 | b2<<16:
    bit i < 18 is LP_i, bits 18..23 are CP0..CP5, so each parity pair is adjacent."""
    calc = smartmedia_ecc(chunk)
    syn = int.from_bytes(bytes(a ^ b for a, b in zip(stored, calc)), "little")
    if syn == 0:
        return chunk, "ok"
    if bin(syn).count("1") == 1:
        return chunk, "code"
    if (syn ^ (syn >> 1)) & 0x555555 == 0x555555:
        addr = sum(((syn >> (2 * i + 1)) & 1) << i for i in range(9))
        bit = sum(((syn >> (19 + 2 * i)) & 1) << i for i in range(3))
        c = bytearray(chunk)
        c[addr] ^= 1 << bit
        return bytes(c), "corrected"
    return chunk, "uncorrectable"


# ---------------------------------------------------------------- BCH (fms.md, "With ECC")

BCH_POLY = 0x201B  # x^13 + x^4 + x^3 + x + 1
BCH_N = 8191       # 2^13 - 1


def _gf_tables():
    exp = [0] * (2 * BCH_N)
    log = [0] * (BCH_N + 1)
    x = 1
    for i in range(BCH_N):
        exp[i] = exp[i + BCH_N] = x
        log[x] = i
        x <<= 1
        if x & 0x2000:
            x ^= BCH_POLY
    if x != 1 or len(set(exp[:BCH_N])) != BCH_N:
        raise AssertionError("0x201B is not primitive")
    return exp, log


_BCH_CODES = {}


class Bch:
    """The shortened binary BCH code of fms.md: 512-byte messages, t = 2..8 bits."""

    def __init__(self, t):
        if not 2 <= t <= 8:
            raise SpecError("BCH strength %d is not 2..8" % t)
        self.t = t
        if "gf" not in _BCH_CODES:
            _BCH_CODES["gf"] = _gf_tables()
        self.exp, self.log = _BCH_CODES["gf"]
        exp, log = self.exp, self.log
        # generator: product of the minimal polynomials of alpha^1, alpha^3, .., alpha^(2t-1)
        g = 1  # GF(2) polynomial as an int, bit i = coefficient of x^i
        seen = set()
        for i in range(1, 2 * t, 2):
            if i in seen:
                continue
            coset = []
            j = i
            while j not in coset:
                coset.append(j)
                j = 2 * j % BCH_N
            seen.update(coset)
            m = [1]  # GF(2^13) coefficients, m[k] = coefficient of x^k
            for r in coset:
                a = exp[r]
                nm = [0] * (len(m) + 1)
                for k, c in enumerate(m):
                    nm[k + 1] ^= c                       # x * c
                    if c:
                        nm[k] ^= exp[log[c] + log[a]]    # a * c
                m = nm
            if any(c not in (0, 1) for c in m):
                raise AssertionError("minimal polynomial not binary")
            mp = sum(c << k for k, c in enumerate(m))
            p = 0
            while mp:  # g *= mp over GF(2)
                if mp & 1:
                    p ^= g
                g <<= 1
                mp >>= 1
            g = p
        self.deg = g.bit_length() - 1
        if self.deg != 13 * t:
            raise AssertionError("generator degree %d, not 13t" % self.deg)
        self.gen = g
        self.nbytes = (13 * t + 7) // 8
        d = self.deg
        mask = (1 << d) - 1
        low = g & mask
        tab = []
        for v in range(256):
            r = v << (d - 8)
            for _ in range(8):
                r = ((r << 1) & mask) ^ low if r >> (d - 1) else r << 1
            tab.append(r)
        self.tab = tab
        self.mask = mask
        self.n = 4096 + d  # shortened code length in bits
        self.erased = self.remainder(ff(512))

    def remainder(self, msg):
        """m(x) x^(13t) mod g(x), msg byte 0 bit 7 the highest coefficient."""
        d8 = self.deg - 8
        mask = self.mask
        tab = self.tab
        r = 0
        for b in msg:
            r = ((r << 8) & mask) ^ tab[(r >> d8) ^ b]
        return r

    def code(self, chunk):
        """The stored code bytes of a 512-byte chunk."""
        v = (self.remainder(chunk) ^ self.erased) ^ ((1 << (8 * self.nbytes)) - 1)
        return v.to_bytes(self.nbytes, "little")

    def correct(self, chunk, stored):
        """(data, status, bits): status 'ok', 'corrected' (`bits` bit errors, data and
        code), 'code' (only code bits flipped) or 'uncorrectable'."""
        r_stored = (int.from_bytes(stored, "little") ^ ((1 << (8 * self.nbytes)) - 1) ^ self.erased) & self.mask
        e = self.remainder(chunk) ^ r_stored
        if e == 0:
            return chunk, "ok", 0
        exp, log, N, t = self.exp, self.log, BCH_N, self.t
        # syndromes S_i = e(alpha^i), i = 1..2t (e is the received word mod g)
        bits = [j for j in range(self.deg) if (e >> j) & 1]
        S = [0] * (2 * t + 1)
        for i in range(1, 2 * t + 1):
            s = 0
            for j in bits:
                s ^= exp[(i * j) % N]
            S[i] = s

        def mul(a, b):
            return exp[log[a] + log[b]] if a and b else 0
        # Berlekamp-Massey
        C = [1] + [0] * (2 * t)
        B = [1] + [0] * (2 * t)
        L, m, bb = 0, 1, 1
        for nn in range(2 * t):
            dlt = S[nn + 1]
            for i in range(1, L + 1):
                dlt ^= mul(C[i], S[nn + 1 - i])
            if dlt == 0:
                m += 1
                continue
            coef = exp[log[dlt] - log[bb] + N]
            T = C[:]
            for i in range(2 * t + 1 - m):
                if B[i]:
                    C[i + m] ^= mul(coef, B[i])
            if 2 * L <= nn:
                L, B, bb, m = nn + 1 - L, T, dlt, 1
            else:
                m += 1
        if L == 0 or L > t or any(C[L + 1:]):
            return chunk, "uncorrectable", 0
        # Chien search: error at position p iff Lambda(alpha^-p) = 0, p < n (shortened)
        lc = [(log[C[i]], i) for i in range(1, L + 1) if C[i]]
        pos = []
        for p in range(self.n):
            s = 1
            for lg, i in lc:
                s ^= exp[(lg - i * p) % N]
            if s == 0:
                pos.append(p)
                if len(pos) == L:
                    break
        if len(pos) != L:
            return chunk, "uncorrectable", 0
        c = bytearray(chunk)
        data_bits = 0
        for p in pos:
            if p >= self.deg:
                q = 4095 - (p - self.deg)   # message bit index from byte 0 bit 7
                c[q >> 3] ^= 0x80 >> (q & 7)
                data_bits += 1
        if data_bits == 0:
            return chunk, "code", L
        return bytes(c), "corrected", L


def bch(t):
    c = _BCH_CODES.get(t)
    if c is None:
        c = _BCH_CODES[t] = Bch(t)
    return c


# ---------------------------------------------------------------- FMS

SEG_MAGIC = 0x484D5346
TRIM_LIST_LBN = 0xFFFFFFFE
TRIM_XOR = 0x5452494D
TRIM_MAGIC = 0x544D5346
INDEX_MAGIC = 0x1DE5


FEATURES_KNOWN = 0x3FF  # bit 0 ECC, bit 1 live byte, bit 2 header code, bit 3 segment
#                         summaries, bits 4-7 BCH strength, bit 8 record correction,
#                         bit 9 first-page slot tests
LIVE_BYTE = 0x02  # features bit 1 (fms.md, "Header-mode entry")
HEADER_CODE = 0x04  # features bit 2 (fms.md, "Segment header")
SUMMARY = 0x08  # features bit 3 (fms.md, "Segment summary (spare mode, features bit 3)")
RECORD_CORRECTION = 0x100  # features bit 8 (fms.md, Mount steps 2 and 4)
FIRST_PAGE = 0x200  # features bit 9 (fms.md, Mount steps 2 and 4)
SUMMARY_MAGIC = 0x53534D46  # bytes 46 4D 53 53, "FMSS"
PAD_RECORD = bytes(15)


def features_error(f):
    """fms.md, segment header offset 48: None when mount accepts the features word, else
    why not (bit 0 ECC; bit 1 live byte; bit 2 header code; bit 3 segment summaries;
    bits 4-7, with bit 0, the BCH strength 2..8; bit 8 record correction; bit 9
    first-page slot tests; other bits zero)."""
    if f & ~FEATURES_KNOWN:
        return "has unknown feature bits 0x%x" % (f & ~FEATURES_KNOWN)
    t = (f >> 4) & 0xF
    if t and not f & 1:
        return "has a BCH strength (%d) without the ECC bit" % t
    if t == 1 or t > 8:
        return "has BCH strength %d (not 2..8)" % t
    if f & HEADER_CODE and not f & 1:
        return "has the header-code bit without the ECC bit"
    return None


def header_code_t(f):
    """fms.md, segment header offset 48, bit 2: the strength of the code the header's
    first chunk carries (1 SEC-DED, 2..8 BCH), or 0 when it carries none."""
    if not (f & HEADER_CODE and f & 1) or features_error(f):
        return 0
    return ((f >> 4) & 0xF) or 1


def header_chunk_code(t, hdr):
    """fms.md, "Segment header": the code of strength t of a header page's first chunk
    (the 64 header bytes, then 448 bytes of 0xFF)."""
    chunk = bytes(hdr) + ff(448)
    return bch(t).code(chunk) if t >= 2 else smartmedia_ecc(chunk)


def header_by_code(t, chunk, code):
    """fms.md, Mount step 1: the header a header page's first chunk and its code of
    strength t correct to (the chunk corrects, its bytes 64..512 read 0xFF, the header
    decodes and says it carries a code of strength t), else None."""
    if t >= 2:
        fixed, st, _ = bch(t).correct(chunk, code)
    else:
        fixed, st = ecc_correct(chunk, code)
    if st == "uncorrectable" or fixed[64:] != ff(448):
        return None
    h = decode_seg_header(fixed[:64])
    if not isinstance(h, dict) or header_code_t(h["features"]) != t:
        return None
    return h


def decode_seg_header(b):
    if b == ff(64):
        return "erased"
    magic, ver = struct.unpack_from("<IH", b, 0)
    if magic != SEG_MAGIC or crc32c(b[0:60]) != struct.unpack_from("<I", b, 60)[0] or ver != 1:
        return "unreadable"
    kind, ec, bs, slots, lb, eseq, tms, fmt, feat = struct.unpack_from("<HIIIIQQQI", b, 6)
    return dict(kind=kind, erase_count=ec, block_size=bs, slots=slots, logical=lb,
                erase_seq=eseq, time_ms=tms, format=fmt, features=feat,
                reserved=b[52:60])


def one_bit_from(b, decode):
    """fms.md, Mount steps 1 and 2: what `decode` gives for `b` with exactly one of its
    bits flipped, or None when no flip or more than one decodes."""
    w = bytearray(b)
    found = None
    for bit in range(len(b) * 8):
        w[bit // 8] ^= 1 << (bit % 8)
        d = decode(bytes(w))
        w[bit // 8] ^= 1 << (bit % 8)
        if d is not None:
            if found is not None:
                return None
            found = d
    return found


def two_bits_from(b, decode):
    """fms.md, Mount step 2 (record correction): whether `b` with some two of its bits
    flipped decodes."""
    w = bytearray(b)
    n = len(b) * 8
    for i in range(n):
        w[i // 8] ^= 1 << (i % 8)
        for j in range(i + 1, n):
            w[j // 8] ^= 1 << (j % 8)
            hit = decode(bytes(w)) is not None
            w[j // 8] ^= 1 << (j % 8)
            if hit:
                return True
        w[i // 8] ^= 1 << (i % 8)
    return False


def decode_summary(b, slots):
    """fms.md, "Segment summary": (segment, erase sequence, format number, slots) of a
    summary of `slots` slots (32 + 19 slots bytes: each slot its 15-byte record and a
    4-byte time), or None when its magic, slot count or checksum is wrong."""
    if len(b) != 32 + 19 * slots:
        return None
    magic, seg, eseq, fmt, n, crc = struct.unpack_from("<IIQQII", b, 0)
    if magic != SUMMARY_MAGIC or n != slots or crc32c(b[32:], crc32c(b[0:28])) != crc:
        return None
    return seg, eseq, fmt, b[32:]


def flags_live(flags, live_byte):
    """fms.md, "Header-mode entry": with the live byte (features bit 1) live when at least
    4 of bits 0 and 2..7 are set; without it, bit 0."""
    if live_byte:
        return bin(flags & 0xFD).count("1") >= 4
    return bool(flags & 1)


def decode_entry(e, live_byte=False):
    """A header-mode entry (checksum over bytes 0..20 with byte 5 as 0xFF), or None."""
    if e == ff(24):
        return None
    chk = e[0:5] + b"\xff" + e[6:20]
    if crc32c(chk) != struct.unpack_from("<I", e, 20)[0]:
        return None
    lbn, region, flags, upd, seq, t = struct.unpack_from("<IBBHQI", e, 0)
    return dict(lbn=lbn, seq=seq, live=flags_live(flags, live_byte), flags=flags, region=region,
                updates=upd)


def decode_spare_record(r):
    """A spare record: ('block' | 'trim', fields), or None."""
    if r == ff(15):
        return None
    lbn = struct.unpack_from("<I", r, 0)[0]
    seq = int.from_bytes(r[4:9], "little")
    crc = struct.unpack_from("<I", r, 11)[0]
    c = crc32c(r[0:11])
    if c == crc:
        return ("block", dict(lbn=lbn, seq=seq, meta=r[9], updates=r[10]))
    if c ^ TRIM_XOR == crc and lbn == TRIM_LIST_LBN:
        return ("trim", dict(seq=seq, meta=r[9], updates=r[10]))
    return None


class Fms:
    def __init__(self, img, reserve=None, streams=None, check_summaries=True):
        self.img = img
        # With segment summaries: also read the records of every segment whose summary
        # is used, and list the slots whose record decodes but differs from the
        # summary's copy (`summary_mismatches`; fms.md: the summary is a copy of the
        # records, so on a medium that saw no torn erase there are none).
        self.check_summaries = check_summaries
        self.summaries = False
        self.summary_page = None
        self.summaries_used = 0
        self.summary_mismatches = []
        self.ecc_bad = 0
        self.ecc_corrected = 0
        self.reserve = reserve
        self.streams = streams
        self.warnings = []
        self.mode = "header" if img.nop == 0 else "spare"
        self.seg_bytes_n = img.ppb * img.page_size
        self._mount()

    def warn(self, msg):
        self.warnings.append(msg)

    # -- geometry of a block size (fms.md "Record modes", "Segment layout")
    def geometry(self, bs):
        img = self.img
        if bs < 512 or bs & (bs - 1):
            raise SpecError("configuration: block size %d is not a power of two of at least 512" % bs)
        if bs > self.seg_bytes_n // 2:
            raise SpecError("configuration: block size %d is larger than half a segment" % bs)
        if img.page_size < 64:
            raise SpecError("configuration: page of %d bytes is smaller than the segment header" % img.page_size)
        if self.mode == "header":
            total = self.seg_bytes_n // bs
            h = -(-(64 + total * 24) // bs)
            self.header_bytes = h * bs
            slots = total - h
            self.pps = None
        else:
            if bs % img.page_size:
                raise SpecError("configuration: block size %d is not a multiple of the page size" % bs)
            if img.spare_size < 16:
                raise SpecError("configuration: spare area of %d bytes is smaller than 16" % img.spare_size)
            self.pps = bs // img.page_size
            slots = (img.ppb - 1) // self.pps
            self.header_bytes = img.page_size
            if slots < 2:
                raise SpecError("configuration: fewer than 2 slots per segment")
        return slots

    # -- segment summaries (fms.md, "Segment summary (spare mode, features bit 3)")
    def summary_room(self):
        """Whether the pages after the last slot hold a summary (spare mode)."""
        if self.mode != "spare":
            return False
        first = 1 + self.slots * self.pps
        return (self.img.ppb - first) * self.img.page_size >= 32 + 19 * self.slots

    def summary_bytes(self, seg):
        return self.img.seg_bytes(seg, self.summary_page * self.img.page_size, 32 + 19 * self.slots)

    def read_summary(self, seg):
        """(status, records): 'none' (the first four bytes read 0xFF: not full, or no
        summaries on this medium), 'invalid' (magic, slot count or checksum wrong),
        'foreign' (decodes but names another segment, or another header's erase sequence
        or format number) or 'used' with the 15 x slots record bytes."""
        if not self.summaries:
            return "none", None
        h = self.hdrs[seg]
        b = self.summary_bytes(seg)
        if b[0:4] == ff(4):
            return "none", None
        d = decode_summary(b, self.slots)
        if d is None:
            return "invalid", None
        sg, eseq, fmt, recs = d
        if not isinstance(h, dict) or (sg, eseq, fmt) != (seg, h["erase_seq"], h["format"]):
            return "foreign", None
        # fms.md: used only when the last slot's copy is not 15 0xFF (written only after
        # the last slot's program)
        if recs[19 * (self.slots - 1):19 * (self.slots - 1) + 15] == ff(15):
            return "unfinished", None
        return "used", recs

    def classify_record(self, r):
        """A spare record as the scan reads it: None (0xFF: no record), or (kind, rec)."""
        if r == ff(15):
            return None
        d = decode_spare_record(r)
        if d is not None:
            return d
        # fms.md, Mount step 2: torn, but one bit from a valid record (not the pad
        # record) naming a block of the capacity or a trim list is reported.
        if r == PAD_RECORD:
            return ("torn", None)

        def fits(w):
            d = decode_spare_record(w)
            if d is not None and d[0] == "block" and d[1]["lbn"] >= self.logical:
                return None
            return d
        fix = one_bit_from(r, decode_spare_record)
        if fix is not None and fix[0] == "block" and fix[1]["lbn"] >= self.logical:
            fix = None
        if fix is not None:
            return ("torn", {"flipped": fix})
        # with record correction, a torn record two bits from valid closes its segment
        # when no decoding record follows it (step 2)
        if getattr(self, "record_correction", False) and two_bits_from(r, fits):
            return ("torn", {"near": True})
        return ("torn", None)

    # -- records
    def segment_records(self, seg):
        """([(slot, kind, rec)] for used slots, whether they came from the segment's
        summary).  fms.md, Mount step 2: a full segment's records come from its summary
        when it decodes, names the segment and carries its header's erase sequence and
        format number; every record it holds is read as the scan would read the spare
        area, without the scan's stop."""
        if self.mode == "spare":
            # fms.md, Mount step 2: the summary is looked for only when slot 0's record
            # does not read 15 0xFF
            first = self.img.page_spare(seg * self.img.ppb + 1 + self.pps - 1, 1, 15)
            st, recs = self.read_summary(seg) if first != ff(15) else ("none", None)
            if st == "used":
                out = []
                for k in range(self.slots):
                    c = self.classify_record(recs[19 * k:19 * k + 15])
                    if c is not None:
                        out.append((k, c[0], c[1]))
                return out, True
        return self.read_records(seg, use_summary=False), False

    def summary_check(self, seg):
        """Slots of `seg` whose record decodes but differs from its summary's copy."""
        st, recs = self.read_summary(seg)
        bad = []
        if st != "used":
            return bad
        base = seg * self.img.ppb
        for k in range(self.slots):
            r = self.img.page_spare(base + 1 + k * self.pps + self.pps - 1, 1, 15)
            if decode_spare_record(r) is not None and r != recs[19 * k:19 * k + 15]:
                bad.append("segment %d slot %d: record %s, summary %s"
                           % (seg, k, r.hex(), recs[19 * k:19 * k + 15].hex()))
        return bad

    def read_records(self, seg, use_summary=True):
        """[(slot, kind, rec)] for used slots; kind 'block' | 'trim' | 'torn'.  In spare
        mode a valid summary stands for the records unless `use_summary` is false."""
        img = self.img
        out = []
        if use_summary and self.mode == "spare":
            return self.segment_records(seg)[0]
        if self.mode == "header":
            raw = img.seg_bytes(seg, 64, 24 * self.slots)
            for k in range(self.slots):
                e = raw[24 * k: 24 * k + 24]
                if e == ff(24):
                    continue
                rec = decode_entry(e, self.live_byte)
                if rec is None:
                    # fms.md, Mount step 2: an entry one bit from a valid one naming a
                    # block of the capacity is read corrected.
                    rec = one_bit_from(e, lambda w: decode_entry(w, self.live_byte))
                    if rec is None or rec["lbn"] >= self.logical:
                        out.append((k, "torn", None))
                        continue
                    rec["corrected"] = True
                out.append((k, "block", rec))
        else:
            base = seg * img.ppb
            for k in range(self.slots):
                last = base + 1 + k * self.pps + self.pps - 1
                r = img.page_spare(last, 1, 15)
                if r == ff(15):
                    # fms.md, Mount step 2: the scan stops at a slot that reads unwritten
                    # when the next slot's record reads erased too.
                    nxt = last + self.pps
                    if (k + 1 >= self.slots or img.page_spare(nxt, 1, 15) == ff(15)) \
                            and self.slot_unwritten(seg, k, not out):
                        break
                    continue
                d = self.classify_record(r)
                out.append((k, d[0], d[1]))
        return out

    def chunk_code(self, chunk):
        """The stored code of a 512-byte chunk: SEC-DED or BCH-t (fms.md, "With ECC")."""
        return self.bch.code(chunk) if self.bch else smartmedia_ecc(chunk)

    def slot_data(self, seg, k, correct=False):
        """A slot's data bytes.  With `correct` on an ECC medium, each 512-byte chunk is
        checked against its code (spare bytes 16 + c per chunk, c = 3 for SEC-DED,
        ceil(13t/8) for BCH-t) and up to 1 (SEC-DED) or t (BCH) flipped bits are
        corrected; the result's `ecc_bad` counts uncorrectable chunks."""
        img = self.img
        self.ecc_bad = 0
        self.ecc_first_bad = None  # byte offset in the slot of the first uncorrectable chunk
        if self.mode == "header":
            return img.seg_bytes(seg, self.header_bytes + k * self.block_size, self.block_size)
        base = seg * img.ppb + 1 + k * self.pps
        pages = [img.page_data(base + j) for j in range(self.pps)]
        if correct and self.ecc:
            cb = self.code_bytes
            for j, d in enumerate(pages):
                codes = img.page_spare(base + j, 16, cb * img.page_size // 512)
                out = []
                for c in range(img.page_size // 512):
                    ch, code = d[512 * c:512 * c + 512], codes[cb * c:cb * c + cb]
                    nbits = 1
                    if self.bch:
                        chunk, st, nbits = self.bch.correct(ch, code)
                    else:
                        chunk, st = ecc_correct(ch, code)
                    if st == "uncorrectable":
                        self.ecc_bad += 1
                        if self.ecc_first_bad is None:
                            self.ecc_first_bad = j * img.page_size + 512 * c
                    elif st == "corrected":
                        # bits corrected (BCH: of data and code, in a chunk whose data had
                        # some); a flip of the code alone is not counted, as for SEC-DED
                        self.ecc_corrected += nbits
                    out.append(chunk)
                pages[j] = b"".join(out)
        return b"".join(pages)

    def slot_unwritten(self, seg, k, empty):
        """fms.md, Mount step 4: a write of slot k was never begun.  With features bit 9,
        where no slot before it holds a record (`empty`), its first page alone, read as
        `slot_erased` reads every page; otherwise every page."""
        if not (empty and self.first_page and self.mode == "spare"):
            return self.slot_erased(seg, k)
        img = self.img
        p = seg * img.ppb + 1 + k * self.pps
        d = img.page_data(p)
        if d != ff(len(d)):
            if not self.ecc:
                return False
            for c in range(0, len(d), 512):
                ch = d[c:c + 512]
                if sum(8 - bin(x).count("1") for x in ch if x != 0xFF) > 1:
                    return False
        return img.page_spare(p) == ff(img.spare_size)

    def slot_erased(self, seg, k):
        img = self.img
        d = self.slot_data(seg, k)
        if d != ff(self.block_size):
            if not self.ecc:
                return False
            # with ECC, "erased" admits one 0 bit per 512 bytes
            for c in range(0, self.block_size, 512):
                ch = d[c:c + 512]
                if ch != ff(512) and sum(8 - bin(x).count("1") for x in ch if x != 0xFF) > 1:
                    return False
        if self.mode == "spare":
            base = seg * img.ppb + 1 + k * self.pps
            for j in range(self.pps):
                if img.page_spare(base + j) != ff(img.spare_size):
                    return False
        return True

    def read_block(self, seg, k):
        """Data of a mapped block.  Spare mode, slots of several pages: a non-last
        page that reads all 0xFF with its page mark 0xFF was erased after the slot
        was written (torn erase); such a block reads as zeros (fms.md)."""
        data = self.slot_data(seg, k, correct=True)
        if self.ecc_bad:
            raise SpecError("segment %d slot %d: uncorrectable ECC error (fms read fails rather than "
                            "return wrong data)" % (seg, k))
        if self.mode == "spare" and self.pps > 1:
            img = self.img
            ps = img.page_size
            base = seg * img.ppb + 1 + k * self.pps
            for j in range(self.pps - 1):
                if data[j * ps:(j + 1) * ps] == ff(ps) and img.page_spare(base + j, 1, 1) == b"\xff":
                    self.torn_erase_reads += 1
                    return bytes(self.block_size)
        return data

    def read_index(self, seg):
        img = self.img
        per_page = img.page_size // 16 if self.mode == "header" else min(img.nop, img.page_size // 16)
        per_page = max(per_page, 1)
        cycle = per_page * (img.ppb - 1)
        entries = []
        for k in range(cycle):
            p = 1 + k // per_page
            e = img.page_data(seg * img.ppb + p, (k % per_page) * 16, 16)
            if e == ff(16):
                break
            magic, stream, kind, g, iseq, crc = struct.unpack("<HBBIII", e)
            if magic != INDEX_MAGIC or crc32c(e[0:12]) != crc:
                continue
            if kind not in (1, 2):
                continue
            entries.append(dict(pos=k, stream=stream, kind=kind, seg=g, iseq=iseq))
        return entries, cycle

    # -- mount
    def _mount(self):
        img = self.img
        nseg = img.blocks
        hdrs = [None] * nseg
        for g in range(nseg):
            if img.state[g] == 1:
                continue  # factory bad: skipped
            hdrs[g] = decode_seg_header(img.seg_bytes(g, 0, 64))
        valid = [g for g in range(nseg) if isinstance(hdrs[g], dict)]
        good_valid = [g for g in valid if img.state[g] == 0]
        if not good_valid:
            raise SpecError("no FMS segment header found: not an FMS medium (format it first)")
        # fms.md, Mount step 1: the medium is the newest format number a good segment's
        # valid header carries; its first such header is "the first header" (stop 28: a
        # format writes its first header where it loses nothing, not always first).
        newest = max(hdrs[g]["format"] for g in good_valid)
        first = hdrs[next(g for g in good_valid if hdrs[g]["format"] == newest)]
        # fms.md, Mount step 1: a header one bit from a valid one is read corrected when
        # it fits the medium (kind 0 or 1, known features, the block size, slots, format
        # number and features of the first good segment's uncorrected header).
        # With the header-code feature (bit 2, from that header), the code of the medium's
        # strength first: up to t bits of the header's first chunk and its code.
        self.corrected_headers = []
        ht = header_code_t(first["features"]) if img.nop != 0 else 0
        for g in range(nseg):
            if hdrs[g] != "unreadable":
                continue
            h = None
            if ht:
                cb = bch(ht).nbytes if ht >= 2 else 3
                h = header_by_code(ht, img.seg_bytes(g, 0, 512), img.page_spare(g * img.ppb, 16, cb))
            if h is None:
                h = one_bit_from(img.seg_bytes(g, 0, 64),
                                 lambda w: (lambda d: d if isinstance(d, dict) else None)(decode_seg_header(w)))
            if (h is not None and h["kind"] <= 1 and features_error(h["features"]) is None
                    and h["block_size"] == first["block_size"] and h["slots"] == first["slots"]
                    and h["format"] == first["format"] and h["features"] == first["features"]):
                hdrs[g] = h
                self.corrected_headers.append(g)
        valid = [g for g in range(nseg) if isinstance(hdrs[g], dict)]
        good_valid = [g for g in valid if img.state[g] == 0]
        # fms.md, Mount step 1: a good segment whose header's format number is smaller than
        # the first's is one a stopped format did not reach: dirty, whatever its block
        # size, slots or features (its erase count and erase sequence still count).
        self.earlier_format = [g for g in good_valid if hdrs[g]["format"] < first["format"]]
        earlier = set(self.earlier_format)
        all_good_valid = good_valid
        good_valid = [g for g in good_valid if g not in earlier]
        # fms.md: good segments' headers, and grown-bad segments' headers of this format
        # (block size, slots, format number), must have a known kind and known features,
        # and the first good header's ECC bit.
        ours = [g for g in valid if (img.state[g] == 0 and g not in earlier) or (
            img.state[g] == 2 and hdrs[g]["block_size"] == first["block_size"]
            and hdrs[g]["slots"] == first["slots"] and hdrs[g]["format"] == first["format"])]
        for g in ours:
            if hdrs[g]["kind"] > 1:
                raise SpecError("segment %d: header kind %d is unknown" % (g, hdrs[g]["kind"]))
            why = features_error(hdrs[g]["features"])
            if why:
                raise SpecError("segment %d: header %s" % (g, why))
        for g in ours:
            if img.state[g] == 2 and hdrs[g]["kind"] != 0:
                continue
            if (hdrs[g]["features"] & FEATURES_KNOWN) != (first["features"] & FEATURES_KNOWN):
                raise SpecError("segment %d: ECC feature bit, live-byte bit, header-code bit, segment-summary bit, "
                                "record-correction bit or BCH strength differs from segment %d's"
                                % (g, good_valid[0]))
        self.ecc = bool(first["features"] & 1)
        self.live_byte = bool(first["features"] & LIVE_BYTE)
        if self.live_byte and self.mode != "header":
            raise SpecError("live-byte feature on a spare-mode (nop >= 1) device")
        self.header_code = header_code_t(first["features"])
        if first["features"] & HEADER_CODE and self.mode != "spare":
            raise SpecError("header-code feature on a header-mode (nop = 0) device")
        # fms.md, segment header offset 48, bit 8: record correction, spare mode only
        self.record_correction = bool(first["features"] & RECORD_CORRECTION)
        if self.record_correction and self.mode != "spare":
            raise SpecError("record-correction feature on a header-mode (nop = 0) device")
        # bit 9: first-page slot tests, spare mode only
        self.first_page = bool(first["features"] & FIRST_PAGE)
        if self.first_page and self.mode != "spare":
            raise SpecError("first-page feature on a header-mode (nop = 0) device")
        self.bch_t = (first["features"] >> 4) & 0xF
        self.bch = bch(self.bch_t) if self.bch_t else None
        self.code_bytes = self.bch.nbytes if self.bch else 3
        self.format_no = first["format"]
        bs = first["block_size"]
        slots = self.geometry(bs)
        self.block_size, self.slots = bs, slots
        # fms.md, "Segment summary": the bit on a medium without room after the last slot
        # for the summary (or in header mode) is refused (corrupt or foreign)
        self.summaries = bool(first["features"] & SUMMARY)
        if self.summaries:
            if not self.summary_room():
                raise SpecError("segment %d: header features 0x%x say segment summaries, but %s"
                                % (good_valid[0], first["features"],
                                   "this is a header-mode device" if self.mode != "spare" else
                                   "the pages after the last slot cannot hold one (%d bytes)" % (32 + 19 * slots)))
            self.summary_page = 1 + slots * self.pps
        if self.ecc:
            if self.mode != "spare":
                raise SpecError("ECC feature on a header-mode (nop = 0) device")
            if img.page_size % 512 or img.spare_size < 16 + self.code_bytes * img.page_size // 512:
                raise SpecError("ECC feature but the page/spare geometry cannot hold the codes")
        for g in good_valid:
            h = hdrs[g]
            if h["block_size"] != bs or h["slots"] != slots:
                raise SpecError("segment %d: formatted with %d-byte blocks (%d per segment); mounting with %d-byte blocks (%d)"
                                % (g, h["block_size"], h["slots"], bs, slots))
        self.logical = first["logical"]
        self.logical_derived = False
        if self.logical == 0:
            # fms.md, Mount step 0: (good segments - reserve) x slots, the reserve being
            # 1 + high_water + streams (7 with the CLI's defaults).
            if self.reserve is None:
                raise SpecError("segment header records no capacity (0) and fms.md does not give "
                                "the derivation (pass --reserve N to use (good segments - N) x slots)")
            good = sum(1 for g in range(nseg) if img.state[g] == 0)
            self.logical = max(good - self.reserve, 0) * slots
            self.logical_derived = True
        if self.logical > nseg * slots:
            raise SpecError("recorded capacity %d is larger than the device's slots (%d)" % (self.logical, nseg * slots))
        # fms.md, Mount step 1: the largest count in any good segment's header.
        max_ec = max(hdrs[g]["erase_count"] for g in all_good_valid)
        self.next_erase_seq = max(hdrs[g]["erase_seq"] for g in valid) + 1

        # segment roles
        role = [None] * nseg
        for g in range(nseg):
            if img.state[g] == 1:
                role[g] = "factory_bad"
            elif img.state[g] == 2:
                role[g] = "bad"
            elif g in earlier:
                role[g] = "dirty"
            elif isinstance(hdrs[g], dict):
                # kinds 0 and 1 only (others were refused above)
                role[g] = "kind1" if hdrs[g]["kind"] == 1 else "data"
            else:
                role[g] = "dirty"
        k1 = [g for g in range(nseg) if role[g] == "kind1"]
        index_seg = None
        if k1:
            # highest erase sequence; on a tie the later segment (fms.md, Mount step 1)
            index_seg = max(k1, key=lambda g: (hdrs[g]["erase_seq"], g))
            for g in k1:
                if g != index_seg:
                    role[g] = "dirty"
            role[index_seg] = "index"
        index_entries, self.index_cycle = ([], 0)
        self.index_stale = False
        # grown-bad kind-1 log (header mode only)
        if self.mode == "header":
            best_good = hdrs[index_seg]["erase_seq"] if index_seg is not None else -1
            cands = [g for g in range(nseg) if img.state[g] == 2 and isinstance(hdrs[g], dict)
                     and hdrs[g]["kind"] == 1 and hdrs[g]["format"] == self.format_no
                     and hdrs[g]["erase_seq"] > best_good]
            for g in sorted(cands, key=lambda g: -hdrs[g]["erase_seq"]):
                ents, _ = self.read_index(g)
                if any(e["kind"] == 2 for e in ents):
                    if index_seg is not None:
                        role[index_seg] = "dirty"
                    index_seg = g
                    self.index_stale = True
                    break
        if index_seg is not None:
            index_entries, self.index_cycle = self.read_index(index_seg)
        retired = {e["seg"] for e in index_entries if e["kind"] == 2}
        self.retired = retired
        self.index_entries = index_entries

        # erase counts
        ec = [None] * nseg
        for g in range(nseg):
            if isinstance(hdrs[g], dict):
                ec[g] = hdrs[g]["erase_count"]
            elif role[g] == "dirty":
                ec[g] = max_ec

        # records (step 2)
        self.hdrs = hdrs
        self.grown_bad_read = 0
        readable = []
        for g in range(nseg):
            if role[g] == "data":
                readable.append(g)
            elif role[g] == "bad":
                h = hdrs[g]
                if (isinstance(h, dict) and h["kind"] == 0 and h["block_size"] == bs
                        and h["slots"] == slots and h["format"] == self.format_no
                        and g not in retired):
                    readable.append(g)
        self.torn_records = 0
        self.corrected_entries = 0
        self.corrected_records = 0
        self.flipped_records = 0
        used_last = {}
        best = {}          # lbn -> (seq, seg, slot, rec)
        all_blocks = []    # (lbn, seq, seg, slot, rec)
        trim_slots = []    # (seq, seg, slot)
        flipped_lists = []  # (seq, seg, slot): trim-list records one bit from valid
        self.summaries_used = 0
        self.summary_mismatches = []
        for g in readable:
            last = -1
            recs, from_summary = self.segment_records(g)
            if from_summary:
                # fms.md, Mount step 2: the segment's first free slot is `slots`
                self.summaries_used += 1
                last = slots - 1
                if self.check_summaries:
                    self.summary_mismatches += self.summary_check(g)
            closed = False
            if self.record_correction and recs:
                # fms.md, Mount step 2 (record correction): a record one bit from valid
                # that a later slot's record that decodes follows is read corrected; a
                # record one or two bits from valid after the last one that decodes (the
                # tail) closes the segment (step 4)
                later = [i for i, (k, kind, rec) in enumerate(recs) if kind != "torn"]
                last = later[-1] if later else -1
                for i in range(max(last, 0)):
                    k, kind, rec = recs[i]
                    if kind == "torn" and rec and rec.get("flipped"):
                        fixed = dict(rec["flipped"][1], corrected_record=True)
                        recs[i] = (k, rec["flipped"][0], fixed)
                closed = any(kind == "torn" and rec for k, kind, rec in recs[last + 1:])
            for k, kind, rec in recs:
                last = max(last, k)
                if kind == "torn":
                    self.torn_records += 1
                    self.flipped_records += bool(rec and rec.get("flipped"))
                    # fms.md "Lost blocks" (stop 26): a trim list's record one bit from
                    # valid is not a list, but its tombstones are rescued
                    if rec and rec.get("flipped") and rec["flipped"][0] == "trim":
                        flipped_lists.append((rec["flipped"][1]["seq"], g, k))
                    continue
                if rec.get("corrected"):
                    self.corrected_entries += 1
                if rec.get("corrected_record"):
                    self.corrected_records += 1
                if kind == "trim":
                    trim_slots.append((rec["seq"], g, k))
                    continue
                lbn = rec["lbn"]
                if lbn >= self.logical:
                    raise SpecError("segment %d slot %d: record names block %d, beyond the capacity %d"
                                    % (g, k, lbn, self.logical))
                all_blocks.append((lbn, rec["seq"], g, k, rec))
                cur = best.get(lbn)
                if cur is None or rec["seq"] > cur[0]:
                    best[lbn] = (rec["seq"], g, k, rec)
            # step 4: a segment closed by its last record is full
            used_last[g] = slots - 1 if closed else last

        # winners (step 3)
        self.mapping = {}
        self.stale_live = 0
        max_seq = -1
        for lbn, (seq, g, k, rec) in best.items():
            max_seq = max(max_seq, seq)
            if self.mode == "header" and not rec["live"]:
                continue
            self.mapping[lbn] = (g, k)
        if self.mode == "header":
            for lbn, seq, g, k, rec in all_blocks:
                if rec["live"] and (g, k) != best[lbn][1:3]:
                    self.stale_live += 1
        winner_segs = {g for (g, k) in self.mapping.values()}
        self.grown_bad_read = sum(1 for g in readable if role[g] == "bad")
        self.tombstones = 0
        self.trim_lists_total = len(trim_slots)
        self.trim_lists_live = 0
        self.unreadable_trim_lists = 0
        valid_trim_slots = set()
        self.rescued_tombstones = 0
        # fms.md "Lost blocks", format/fms.md Mount step 1 (stop 26): trim lists behind a
        # header that is unreadable (not erased, not corrected) are read too, unless
        # segments of an earlier format are left; a tombstone that wins there is taken
        # ("rescued"), but its list is not kept.
        behind = []
        if not self.earlier_format:
            for g in range(nseg):
                if img.state[g] != 0 or hdrs[g] != "unreadable":
                    continue
                behind += [(g, k, kind, rec) for k, kind, rec in self.read_records(g, use_summary=False)]
        rescue = [(rec["seq"], g, k) for g, k, kind, rec in behind if kind == "trim"] + flipped_lists \
            if self.mode == "spare" else []
        if self.mode == "spare":
            cap = (bs - 16) // 12
            tomb = {}  # lbn -> (seq, list seq, (seg, slot))
            for lseq, g, k in trim_slots + rescue:
                max_seq = max(max_seq, lseq)
                d = self.slot_data(g, k, correct=True)
                magic, n, crc = struct.unpack_from("<III", d, 0)
                # fms.md, Mount step 3: an uncorrectable chunk makes the list unreadable
                # unless the list (header and entries) ends before the first such chunk
                bad_at = self.ecc_first_bad
                if ((bad_at is not None and (bad_at < 16 or 16 + 12 * min(n, cap) > bad_at))
                        or magic != TRIM_MAGIC or n > cap
                        or crc32c(d[0:8] + d[16:16 + 12 * n]) != crc):
                    self.unreadable_trim_lists += 1
                    continue
                for i in range(n):
                    lbn, tseq = struct.unpack_from("<IQ", d, 16 + 12 * i)
                    if lbn >= self.logical:
                        raise SpecError("segment %d slot %d: tombstone names block %d, beyond the capacity %d"
                                        % (g, k, lbn, self.logical))
                    max_seq = max(max_seq, tseq)
                    if lbn in best and best[lbn][0] >= tseq:
                        continue  # dead
                    cur = tomb.get(lbn)
                    if cur is None or (tseq, lseq) > (cur[0], cur[1]):
                        tomb[lbn] = (tseq, lseq, (g, k))
            rescued_at = {(g, k) for _, g, k in rescue}
            for lbn, (tseq, lseq, gk) in tomb.items():
                self.mapping.pop(lbn, None)
                if gk in rescued_at:
                    self.rescued_tombstones += 1
                else:
                    valid_trim_slots.add(gk)
            self.tombstones = len(tomb)
            self.trim_lists_live = len(valid_trim_slots)
        # fms.md, "Lost blocks" (format/fms.md, Mount step 1): a good segment whose header
        # is unreadable (not erased, not corrected) is dirty and its records are not taken;
        # the blocks whose record there (valid or corrected, live) is newer than the winner
        # (or than none) and than the block's winning tombstone are named lost.
        # None while segments of an earlier format are left (their medium's records may sit
        # behind the header the stopped format's erase tore).
        tombs = tomb if self.mode == "spare" else {}
        lost = {}
        for g, k, kind, rec in behind:
            if True:
                if kind != "block" or rec["lbn"] >= self.logical:
                    continue
                if self.mode == "header" and not rec["live"]:
                    continue
                lbn, seq = rec["lbn"], rec["seq"]
                if lbn in best and best[lbn][0] >= seq:
                    continue
                if lbn in tombs and tombs[lbn][0] > seq:
                    continue
                if lbn not in lost or lost[lbn][0] < seq:
                    lost[lbn] = (seq, g, k)
        self.lost_blocks = [dict(segment=g, slot=k, block=lbn)
                            for lbn, (seq, g, k) in sorted(lost.items())]
        # fms.md "Lost blocks" (stop 26): a lost block is not mapped to an older copy
        for lbn in lost:
            self.mapping.pop(lbn, None)
        self.next_seq = max_seq + 1

        # first free slot (step 4)
        state = {}
        for g in range(nseg):
            if role[g] != "data":
                continue
            last = used_last.get(g, -1)
            ff_slot = last + 1
            empty = last < 0
            if ff_slot < slots and not self.slot_unwritten(g, ff_slot, empty):
                if not img.in_order:
                    while ff_slot < slots and not self.slot_unwritten(g, ff_slot, empty):
                        ff_slot += 1
            state[g] = "free" if ff_slot == 0 else "used"
        for g in range(nseg):
            if role[g] == "bad" and g in readable:
                pass

        # active segments (step 5)
        newest = {}
        for e in index_entries:
            if e["kind"] != 1:
                continue
            cur = newest.get(e["stream"])
            if cur is None or (e["iseq"], e["pos"]) >= (cur["iseq"], cur["pos"]):
                newest[e["stream"]] = e
        active = {}
        for s, e in newest.items():
            g = e["seg"]
            if g >= nseg or role[g] != "data":
                continue
            # "the stream number is valid": the number of streams is configuration
            # (policy, DAC regions, read-only separation), not recorded on the medium
            if self.streams is not None and s >= self.streams:
                continue
            newer = [x for x in index_entries if x["kind"] == 1 and x["seg"] == g
                     and (x["iseq"], x["pos"]) > (e["iseq"], e["pos"])]
            if newer:
                continue
            active[s] = g
        self.active = active
        self.index_lost = index_seg is None
        act = set(active.values())
        counts = dict(free=0, used=0, active=0, dirty=0, bad=0, index=0)
        for g in range(nseg):
            r = role[g]
            if r == "data":
                counts["active" if g in act else state[g]] += 1
            elif r in ("bad", "factory_bad"):
                counts["bad"] += 1
            elif r == "index":
                counts["index"] += 1
            else:
                counts["dirty"] += 1
        if self.index_lost:
            # step 6: the first free or dirty segment becomes the index (in RAM)
            for g in range(nseg):
                if role[g] == "dirty" or (role[g] == "data" and state[g] == "free" and g not in act):
                    counts["dirty" if role[g] == "dirty" else "free"] -= 1
                    counts["index"] += 1
                    ec[g] = (ec[g] or 0) + 1
                    # "Dirty segments then take the new index header's erase count if it
                    # is larger than every other"
                    others = [ec[x] for x in range(nseg) if x != g and ec[x] is not None and img.state[x] == 0]
                    if all(ec[g] > c for c in others):
                        for x in range(nseg):
                            if x != g and role[x] == "dirty":
                                ec[x] = ec[g]
                    break
        self.counts = counts
        # wear figures: good segments only (what `fms info` reports; not a format matter)
        self.erase_counts = [ec[g] for g in range(nseg) if img.state[g] == 0 and ec[g] is not None]
        self.roles = role
        self.hdrs = hdrs
        self.index_seg = index_seg

    # -- lint: the byte-level claims of the specs that reading does not need
    def lint(self, limit=20):
        """Check the documented invariants of every structure; returns a list of
        violations (strings).  Meant for images that saw no power cut."""
        img = self.img
        bad = []

        def v(msg):
            if len(bad) < limit:
                bad.append(msg)
        h = img.mm[0:4096]
        if struct.unpack_from("<I", h, 20)[0] != 4096:
            v("nand header: header length field is not 4096")
        if struct.unpack_from("<I", h, 44)[0] not in (0, 1):
            v("nand header: in_order written as neither 0 nor 1")
        if h[52:56] != bytes(4) or h[192:4092] != bytes(3900):
            v("nand header: reserved bytes not zero")
        if h[104 + len(img.name.encode()):168] != bytes(168 - 104 - len(img.name.encode())):
            v("nand header: name not NUL-padded")
        be = img.blocks * 12 + 4096
        if img.mm[be:img.page_off] != bytes(img.page_off - be):
            v("nand: padding after the block table not zero")
        pe = img.page_off + img.pages
        if img.mm[pe:img.data_off] != bytes(img.data_off - pe):
            v("nand: padding after the program-count table not zero")
        counts = img.mm[img.page_off:img.page_off + img.pages]
        ps, ss, ppb = img.page_size, img.spare_size, img.ppb
        for b in range(img.blocks):
            st = img.state[b]
            if st == 1 and ss:
                for p in range(min(2, ppb)):
                    if img.page_spare(b * ppb + p, 0, 1) != b"\x00":
                        v("block %d factory bad: spare byte 0 of page %d is not 0x00" % (b, p))
                    if counts[b * ppb + p] != 0:
                        v("block %d factory bad: page %d has a program count" % (b, p))
            for p in range(ppb):
                ppn = b * ppb + p
                c = counts[ppn]
                raw = img.mm[img.data_off + ppn * img.raw_page: img.data_off + (ppn + 1) * img.raw_page]
                if c == 0 and raw.count(0) != len(raw) and st != 1:
                    v("page %d (block %d page %d): program count 0 but not erased" % (ppn, b, p))
                if img.nop and c > img.nop:
                    v("page %d: program count %d above nop %d" % (ppn, c, img.nop))
                if st != 1 and ss and p < 2 and img.page_spare(ppn, 0, 1) != b"\xff":
                    v("block %d page %d: spare byte 0 (bad-block marker) programmed" % (b, p))
            if img.in_order and st == 0:
                cs = counts[b * ppb:(b + 1) * ppb]
                last = max((i for i in range(ppb) if cs[i]), default=-1)
                if any(cs[i] == 0 for i in range(last)):
                    v("block %d: in-order device with a gap in programmed pages" % b)
        for g in range(img.blocks):
            hd = self.hdrs[g]
            if not isinstance(hd, dict):
                continue
            if hd["reserved"] != bytes(8):
                v("segment %d: header bytes 52..60 not zero" % g)
            if img.state[g] == 0 and hd["erase_count"] != img.erase_count[g]:
                v("segment %d: header erase count %d, block table %d" % (g, hd["erase_count"], img.erase_count[g]))
            if hd["logical"] != self.logical and not self.logical_derived:
                v("segment %d: capacity word %d differs from the first header's %d" % (g, hd["logical"], self.logical))
            if hd["format"] != self.format_no and g not in self.earlier_format:
                v("segment %d: format number %d differs from the first header's %d" % (g, hd["format"], self.format_no))
            if self.roles[g] == "index" or (self.roles[g] == "data" and self.mode == "spare"):
                rest = img.page_data(g * ppb, 64)
                spare = img.page_spare(g * ppb) if ss else b""
                if self.header_code and g not in self.corrected_headers:
                    # fms.md: the code of the header's chunk at spare offset 16
                    code = header_chunk_code(self.header_code, img.seg_bytes(g, 0, 64))
                    if spare[16:16 + len(code)] != code:
                        v("segment %d: page 0's spare does not hold the header's code" % g)
                    spare = spare[:16] + ff(len(code)) + spare[16 + len(code):]
                if rest != ff(len(rest)) or spare != ff(len(spare)):
                    v("segment %d: page 0 holds more than the segment header" % g)
            if self.roles[g] != "data":
                continue
            if self.mode == "spare":
                first = 1 + self.slots * self.pps
                # fms.md, "Segment summary": with summaries, the summary (32 + 19 slots
                # bytes from page `first` on) and nothing else; a full segment has one
                # (no power cut, no failed program), naming it, its header's erase
                # sequence and format number, and every slot's spare bytes 1..16 as
                # programmed (0xFF for a slot without a record)
                sb = 32 + 19 * self.slots if self.summaries else 0
                if sb:
                    st, recs = self.read_summary(g)
                    last_rec = img.page_spare(g * ppb + first - 1, 1, 15)
                    if st == "none" and last_rec != ff(15):
                        v("segment %d: full (last slot's record programmed) but no summary" % g)
                    elif st != "none" and st != "used":
                        v("segment %d: summary pages hold an %s summary" % (g, st))
                    elif st == "used":
                        if last_rec == ff(15):
                            v("segment %d: summary, but the last slot's record reads erased" % g)
                        for k in range(self.slots):
                            r = img.page_spare(g * ppb + 1 + k * self.pps + self.pps - 1, 1, 15)
                            if r != recs[19 * k:19 * k + 15]:
                                v("segment %d slot %d: summary copy %s, record %s"
                                  % (g, k, recs[19 * k:19 * k + 15].hex(), r.hex()))
                for p in range(first, ppb):
                    col = max(0, min(ps, sb - (p - first) * ps))
                    if img.page_data(g * ppb + p, col) != ff(ps - col) or img.page_spare(g * ppb + p) != ff(ss):
                        v("segment %d page %d (past the last slot) programmed%s"
                          % (g, p, " beyond the summary" if sb else ""))
            if self.mode == "header":
                raw = img.seg_bytes(g, 64, 24 * self.slots)
                for k in range(self.slots):
                    e = raw[24 * k:24 * k + 24]
                    if e == ff(24):
                        continue
                    if self.live_byte and e[5] & 0xFD not in (0xFD, 0x00):
                        v("segment %d slot %d: entry flags 0x%02x: live bits 0, 2-7 neither all 1 nor all 0"
                          % (g, k, e[5]))
                    if not self.live_byte and e[5] & 0xFC != 0xFC:
                        v("segment %d slot %d: entry flags 0x%02x: bits 2-7 not all 1" % (g, k, e[5]))
                rest = img.seg_bytes(g, 64 + 24 * self.slots, self.header_bytes - 64 - 24 * self.slots)
                if rest != ff(len(rest)):
                    v("segment %d: header region after the entries programmed" % g)
                continue
            pp = self.pps
            used = {k: (kind, rec) for k, kind, rec in self.read_records(g)}
            for k in range(self.slots):
                base = g * ppb + 1 + k * pp
                if k not in used:
                    continue
                kind, rec = used[k]
                for j in range(pp):
                    sp = img.page_spare(base + j)
                    if j < pp - 1:
                        if sp[1:2] != b"\x00":
                            v("segment %d slot %d page %d: page mark is 0x%02x" % (g, k, j, sp[1]))
                        other = sp[2:16]
                    else:
                        other = b""
                        if kind == "block" and rec["meta"] & 0xE0 != 0xE0:
                            v("segment %d slot %d: record meta 0x%02x: bits 5-7 not all 1" % (g, k, rec["meta"]))
                        if kind == "trim" and (rec["meta"] != 0xF0 or rec["updates"] != 0):
                            v("segment %d slot %d: trim-list record meta 0x%02x / update count %d"
                              % (g, k, rec["meta"], rec["updates"]))
                    if sp[0:1] != b"\xff":
                        v("segment %d slot %d page %d: spare byte 0 programmed" % (g, k, j))
                    if other != ff(len(other)):
                        v("segment %d slot %d page %d: spare bytes 2..16 programmed" % (g, k, j))
                    tail = sp[16:]
                    if self.ecc:
                        cb = self.code_bytes
                        n = cb * ps // 512
                        data = img.page_data(base + j)
                        for c in range(ps // 512):
                            want = self.chunk_code(data[512 * c:512 * c + 512])
                            if tail[cb * c:cb * c + cb] != want:
                                v("segment %d slot %d page %d chunk %d: ECC %s, computed %s"
                                  % (g, k, j, c, tail[cb * c:cb * c + cb].hex(), want.hex()))
                        tail = tail[n:]
                    if tail != ff(len(tail)):
                        v("segment %d slot %d page %d: spare bytes past the record/codes programmed" % (g, k, j))
                if kind == "trim":
                    d = self.slot_data(g, k)
                    n = struct.unpack_from("<I", d, 4)[0]
                    if d[12:16] != bytes(4):
                        v("segment %d slot %d: trim list bytes 12..16 not zero" % (g, k))
                    if d[16 + 12 * n:] != ff(len(d) - 16 - 12 * n):
                        v("segment %d slot %d: trim list not 0xFF after its entries" % (g, k))
        seqs = [h["erase_seq"] for h in self.hdrs if isinstance(h, dict)]
        if len(seqs) != len(set(seqs)):
            v("two segment headers carry the same erase sequence")
        rs = collections.Counter()
        for g in range(img.blocks):
            if self.roles[g] == "data" or (self.roles[g] == "bad" and isinstance(self.hdrs[g], dict)
                                           and self.hdrs[g]["kind"] == 0):
                for k, kind, rec in self.read_records(g):
                    if kind != "torn":
                        rs[rec["seq"]] += 1
        dup = [q for q, n in rs.items() if n > 1]
        if dup:
            v("%d sequence number(s) carried by more than one record, e.g. %d" % (len(dup), dup[0]))
        return bad

    def report(self, with_blocks=True):
        img = self.img
        self.torn_erase_reads = 0
        blocks = {}
        if with_blocks:
            for lbn in sorted(self.mapping):
                g, k = self.mapping[lbn]
                blocks[str(lbn)] = hashlib.sha256(self.read_block(g, k)).hexdigest()
        ecs = self.erase_counts or [0]
        n = len(ecs)
        mean = sum(ecs) / n
        out = {
            "device": img.name,
            "mode": self.mode,
            "block_size": self.block_size,
            "slots": self.slots,
            "logical_blocks": self.logical,
            "logical_blocks_derived": self.logical_derived,
            "mapped": len(self.mapping),
            "tombstones": self.tombstones,
            "trim_lists": self.trim_lists_live,
            "trim_list_slots": self.trim_lists_total,
            "unreadable_trim_lists": self.unreadable_trim_lists,
            "torn_records": self.torn_records,
            "corrected_headers": len(self.corrected_headers),
            "corrected_entries": self.corrected_entries,
            "corrected_records": self.corrected_records,
            "flipped_records": self.flipped_records,
            "lost_blocks": self.lost_blocks,
            "rescued_tombstones": self.rescued_tombstones,
            "stale_live_copies": self.stale_live,
            "segments": img.blocks,
            "free_segments": self.counts["free"],
            "used_segments": self.counts["used"],
            "active_segments": self.counts["active"],
            "dirty_segments": self.counts["dirty"],
            "bad_segments": self.counts["bad"],
            "index_segments": self.counts["index"],
            "index_segment": self.index_seg,
            "index_lost": self.index_lost,
            "grown_bad_read": self.grown_bad_read,
            "retired_entries": len(self.retired),
            "index_entries": len(self.index_entries),
            "index_erase_count": (self.hdrs[self.index_seg]["erase_count"]
                                  if self.index_seg is not None and isinstance(self.hdrs[self.index_seg], dict) else None),
            "erase_min": min(ecs),
            "erase_max": max(ecs),
            "erase_mean": mean,
            "ecc": self.ecc,
            "ecc_code": ("BCH-%d" % self.bch_t if self.bch else "SEC-DED") if self.ecc else "none",  # as fms info
            "ecc_corrected": self.ecc_corrected,
            # as fms info: how header-mode entries carry the live state
            "live_flag": ("byte" if self.live_byte else "bit") if self.mode == "header" else "none",
            # as fms info: whether segment headers carry the medium's code (features bit 2)
            "header_code": bool(self.header_code),
            # as fms info: whether the medium has segment summaries (features bit 3), and
            # how many segments' records came from theirs
            "segment_summaries": self.summaries,
            "summaries_read": self.summaries_used,
            # not in fms info: slots whose record decodes but differs from the summary's
            # copy, in segments whose summary was used (None: not checked)
            "summary_mismatches": len(self.summary_mismatches) if self.check_summaries else None,
            "format_number": self.format_no,
            "next_seq": self.next_seq,
            "next_erase_seq": self.next_erase_seq,
            "active": {str(s): g for s, g in sorted(self.active.items())},
        }
        if self.summary_mismatches:
            out["summary_mismatch_slots"] = self.summary_mismatches[:20]
        if with_blocks:
            out["torn_erase_reads"] = self.torn_erase_reads
            out["blocks"] = blocks
        return out

    def dump(self, path):
        zero = bytes(self.block_size)
        self.torn_erase_reads = 0
        with open(path, "wb") as f:
            for lbn in range(self.logical):
                m = self.mapping.get(lbn)
                f.write(self.read_block(*m) if m else zero)


def main(argv):
    args = argv[1:]
    dump = None
    reserve = None
    streams = None
    lint = False
    with_blocks = True
    check_summaries = True
    path = None
    i = 0
    while i < len(args):
        a = args[i]
        if a == "--dump":
            if i + 1 >= len(args):
                raise SpecError("--dump needs a file name")
            dump = args[i + 1]
            i += 2
            continue
        if a == "--reserve":
            if i + 1 >= len(args) or not args[i + 1].isdigit():
                raise SpecError("--reserve needs a number of segments")
            reserve = int(args[i + 1])
            i += 2
            continue
        if a == "--streams":
            if i + 1 >= len(args) or not args[i + 1].isdigit():
                raise SpecError("--streams needs a number")
            streams = int(args[i + 1])
            i += 2
            continue
        if a == "--lint":
            lint = True
        elif a == "--no-blocks":
            with_blocks = False
        elif a == "--no-summary-check":
            check_summaries = False
        elif a in ("-h", "--help"):
            print(__doc__.strip())
            return 0
        elif a.startswith("-"):
            raise SpecError("unknown option %s" % a)
        elif path is None:
            path = a
        else:
            raise SpecError("more than one image given")
        i += 1
    if path is None:
        raise SpecError("usage: fms-spec-reader.py IMAGE [--dump OUT] [--no-blocks] [--lint] [--reserve N] [--streams N] "
                        "[--no-summary-check]")
    fms = Fms(NandImage(path), reserve, streams, check_summaries)
    out = fms.report(with_blocks)
    if lint:
        out["lint"] = fms.lint(limit=1000)
    if dump:
        fms.dump(dump)
    json.dump(out, sys.stdout, indent=1)
    sys.stdout.write("\n")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv))
    except SpecError as e:
        sys.stderr.write("fms-spec-reader: %s\n" % e)
        sys.exit(1)
    except (ValueError, struct.error, OverflowError, MemoryError) as e:
        sys.stderr.write("fms-spec-reader: invalid input: %s\n" % e)
        sys.exit(1)
