//! Image-file store: the medium kept in a self-describing file that reopens across
//! processes. The byte layout is specified in `docs/format/nand-image.md`.
//!
//! Every store operation is written through to the file at once (positioned I/O, no
//! buffering in the process), so a process that dies — or a simulated power cut — leaves
//! the file holding exactly what reached the medium. `sync` adds an fsync.
//!
//! Data bytes are stored inverted (`!b`), so an all-zero (sparse) file region is an erased
//! medium and formatting a large image costs no writes.
//!
//! [`ImageStore::open_readonly`] opens the file without write access, for inspection: the
//! device then behaves exactly as over a writable image, but whatever is programmed or
//! erased (e.g. the repairs a mount makes) is kept in RAM, in a per-page overlay, and
//! dropped on close. The file is never written.

use std::collections::HashMap;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::error::{ImageError, NandError, Result};
use crate::geometry::{DeviceSpec, Geometry, Timing};
use crate::store::{BadState, BlockInfo, Store};

pub const MAGIC: &[u8; 16] = b"FLASHKIT-NAND\0\0\0";
pub const VERSION: u32 = 1;
pub const HEADER_LEN: u64 = 4096;
const BLOCK_ENTRY: u64 = 12;

/// An open image file.
pub struct ImageStore {
    path: PathBuf,
    file: File,
    geo: Geometry,
    raw: u64,
    block_off: u64,
    page_off: u64,
    data_off: u64,
    blocks: Vec<BlockInfo>,
    programs: Vec<u8>,
    buf: Vec<u8>,
    /// Opened read-only: the pages changed since opening, as file bytes (inverted) of the
    /// whole page, data then spare. `None` when the file is writable.
    overlay: Option<HashMap<u64, Vec<u8>>>,
    /// What opening the image had to repair (corrupt block-table entries), a line each.
    repairs: Vec<String>,
    /// Writable image: the blocks whose corrupt entries the open repaired in RAM, written
    /// to the file with the first change to it ([`ImageStore::write_repairs`]).
    unwritten_repairs: Vec<u32>,
}

fn align(x: u64) -> u64 {
    x.div_ceil(4096) * 4096
}

fn layout(geo: &Geometry) -> (u64, u64, u64, u64) {
    let block_off = HEADER_LEN;
    let page_off = align(block_off + geo.blocks as u64 * BLOCK_ENTRY);
    let data_off = align(page_off + geo.pages());
    let end = data_off + geo.pages() * geo.raw_page_size() as u64;
    (block_off, page_off, data_off, end)
}

fn encode_block(info: BlockInfo) -> [u8; 12] {
    let mut e = [0u8; 12];
    e[0..4].copy_from_slice(&info.erase_count.to_le_bytes());
    let state: u32 = match info.bad {
        BadState::Good => 0,
        BadState::Factory => 1,
        BadState::Grown => 2,
    };
    e[4..8].copy_from_slice(&state.to_le_bytes());
    let crc = crc32c::crc32c(&e[0..8]);
    e[8..12].copy_from_slice(&crc.to_le_bytes());
    e
}

fn header_bytes(spec: &DeviceSpec, block_off: u64, page_off: u64, data_off: u64) -> Vec<u8> {
    let g = &spec.geometry;
    let t = &spec.timing;
    let mut h = vec![0u8; HEADER_LEN as usize];
    h[0..16].copy_from_slice(MAGIC);
    let mut put32 = |o: usize, v: u32| h[o..o + 4].copy_from_slice(&v.to_le_bytes());
    put32(16, VERSION);
    put32(20, HEADER_LEN as u32);
    put32(24, g.page_size);
    put32(28, g.spare_size);
    put32(32, g.pages_per_block);
    put32(36, g.blocks);
    put32(40, g.nop);
    put32(44, g.in_order as u32);
    put32(48, spec.endurance);
    let times = [
        t.read_us,
        t.read_ns_per_byte,
        t.spare_read_us,
        t.program_us,
        t.program_ns_per_byte,
        t.erase_us,
    ];
    for (i, v) in times.iter().enumerate() {
        h[56 + i * 8..64 + i * 8].copy_from_slice(&v.to_le_bytes());
    }
    let name = spec.name.as_bytes();
    h[104..104 + name.len()].copy_from_slice(name);
    h[168..176].copy_from_slice(&block_off.to_le_bytes());
    h[176..184].copy_from_slice(&page_off.to_le_bytes());
    h[184..192].copy_from_slice(&data_off.to_le_bytes());
    let crc = crc32c::crc32c(&h[0..4092]);
    h[4092..4096].copy_from_slice(&crc.to_le_bytes());
    h
}

impl ImageStore {
    fn err(path: &Path, msg: impl Into<String>) -> NandError {
        NandError::Image(Box::new(ImageError {
            path: path.display().to_string(),
            msg: msg.into(),
        }))
    }

    /// Create a new, fully erased image for `spec`. Refuses to overwrite an existing file
    /// unless `overwrite`.
    pub fn create(path: &Path, spec: &DeviceSpec, overwrite: bool) -> Result<ImageStore> {
        spec.validate()?;
        // Opening the image will need its block table and program counts in RAM: refuse
        // before writing anything if it could not.
        let g = &spec.geometry;
        crate::table::check_fits(g.blocks as u64 * BLOCK_ENTRY + g.pages(), "its tables")
            .map_err(|e| Self::err(path, format!("cannot create: {e}")))?;
        Self::refuse_fifo(path, "cannot create")?;
        let mut opts = OpenOptions::new();
        opts.read(true).write(true);
        if overwrite {
            // Truncated only once locked: an image another process is using is refused,
            // not destroyed under it.
            opts.create(true).truncate(false);
        } else {
            opts.create_new(true);
        }
        let file = opts
            .open(path)
            .map_err(|e| Self::err(path, format!("cannot create: {e}")))?;
        Self::lock(path, &file, true)?;
        file.set_len(0)
            .map_err(|e| Self::err(path, format!("cannot create: {e}")))?;
        let made = Self::fill_new(path, &file, spec).and_then(|()| {
            drop(file);
            Ok(ImageStore::open(path)?.1)
        });
        if made.is_err() {
            // No half-made image is left behind (a fresh one is ours; one being
            // overwritten was truncated already).
            let _ = std::fs::remove_file(path);
        }
        made
    }

    /// Write the header and an all-good block table into a new, empty image file.
    fn fill_new(path: &Path, file: &File, spec: &DeviceSpec) -> Result<()> {
        let (block_off, page_off, data_off, end) = layout(&spec.geometry);
        let io = |e: std::io::Error| Self::err(path, format!("write failed: {e}"));
        file.set_len(end).map_err(io)?;
        file.write_all_at(&header_bytes(spec, block_off, page_off, data_off), 0)
            .map_err(io)?;
        // In chunks: the table of a large device need not be in RAM at once.
        let entry = encode_block(BlockInfo::default());
        let chunk: Vec<u8> = (0..4096).flat_map(|_| entry).collect();
        let mut left = spec.geometry.blocks as u64;
        let mut at = block_off;
        while left > 0 {
            let n = left.min(4096);
            let bytes = &chunk[..(n * BLOCK_ENTRY) as usize];
            file.write_all_at(bytes, at).map_err(io)?;
            at += bytes.len() as u64;
            left -= n;
        }
        file.sync_all().map_err(io)
    }

    /// Take the image's advisory lock (`flock`) for as long as `file` stays open: exclusive
    /// to write, shared to read. Two processes writing one image would each program slots
    /// and erase segments that the other's tables do not know about; a reader could see a
    /// writer's half-done work. A file system without locks is used unlocked.
    ///
    /// A lock found taken is tried again for a moment before giving up: a process that
    /// forks (to run another program) while it has the image open holds the lock until
    /// the child's `exec` closes the file, so an image just closed can look busy briefly.
    fn lock(path: &Path, file: &File, exclusive: bool) -> Result<()> {
        let attempt = || {
            if exclusive {
                file.try_lock()
            } else {
                file.try_lock_shared()
            }
        };
        let mut r = attempt();
        for _ in 0..50 {
            if !matches!(r, Err(std::fs::TryLockError::WouldBlock)) {
                break;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
            r = attempt();
        }
        match r {
            Ok(()) | Err(std::fs::TryLockError::Error(_)) => Ok(()),
            Err(std::fs::TryLockError::WouldBlock) => Err(Self::err(
                path,
                if exclusive {
                    "in use by another process (locked); a command that writes needs the image to itself"
                } else {
                    "being written by another process (locked)"
                },
            )),
        }
    }

    /// Open an existing image for reading and writing; returns the device description
    /// stored in it.
    pub fn open(path: &Path) -> Result<(DeviceSpec, ImageStore)> {
        Self::open_with(path, true)
    }

    /// Open an existing image without write access (it may be read-only), for inspection.
    /// Programs and erases succeed as on a writable image, but they change only a copy in
    /// RAM of the pages they touch (and the in-RAM tables): the file is never written, and
    /// the changes are lost on close.
    pub fn open_readonly(path: &Path) -> Result<(DeviceSpec, ImageStore)> {
        Self::open_with(path, false)
    }

    /// True when opened with [`ImageStore::open_readonly`].
    pub fn is_readonly(&self) -> bool {
        self.overlay.is_some()
    }

    /// An existing FIFO or socket at `path` is refused before it is opened: the open
    /// (or the first read) would wait for a writer for ever.
    fn refuse_fifo(path: &Path, what: &str) -> Result<()> {
        use std::os::unix::fs::FileTypeExt;
        if let Ok(m) = std::fs::metadata(path) {
            let t = m.file_type();
            if t.is_fifo() || t.is_socket() {
                let kind = if t.is_fifo() { "a FIFO" } else { "a socket" };
                return Err(Self::err(
                    path,
                    format!("{what}: {kind}, not an image file"),
                ));
            }
        }
        Ok(())
    }

    fn open_with(path: &Path, writable: bool) -> Result<(DeviceSpec, ImageStore)> {
        let how = if writable { " for writing" } else { "" };
        Self::refuse_fifo(path, &format!("cannot open{how}"))?;
        let file = OpenOptions::new()
            .read(true)
            .write(writable)
            .open(path)
            .map_err(|e| Self::err(path, format!("cannot open{how}: {e}")))?;
        Self::lock(path, &file, writable)?;
        let len = file
            .metadata()
            .map_err(|e| Self::err(path, e.to_string()))?
            .len();
        if len < HEADER_LEN {
            return Err(Self::err(
                path,
                format!("truncated: {len} bytes, a flashkit NAND image header needs {HEADER_LEN}"),
            ));
        }
        let mut h = vec![0u8; HEADER_LEN as usize];
        file.read_exact_at(&mut h, 0)
            .map_err(|e| Self::err(path, e.to_string()))?;
        if &h[0..16] != MAGIC {
            return Err(Self::err(path, "not a flashkit NAND image (bad magic)"));
        }
        let get32 = |o: usize| u32::from_le_bytes(h[o..o + 4].try_into().unwrap());
        let get64 = |o: usize| u64::from_le_bytes(h[o..o + 8].try_into().unwrap());
        let version = get32(16);
        if version != VERSION {
            return Err(Self::err(
                path,
                format!("unsupported image version {version} (this build reads {VERSION})"),
            ));
        }
        let crc = get32(4092);
        if crc != crc32c::crc32c(&h[0..4092]) {
            return Err(Self::err(path, "header checksum mismatch (corrupt image)"));
        }
        let geometry = Geometry {
            page_size: get32(24),
            spare_size: get32(28),
            pages_per_block: get32(32),
            blocks: get32(36),
            nop: get32(40),
            in_order: get32(44) != 0,
        };
        let f = |o: usize| f64::from_le_bytes(h[o..o + 8].try_into().unwrap());
        let timing = Timing {
            read_us: f(56),
            read_ns_per_byte: f(64),
            spare_read_us: f(72),
            program_us: f(80),
            program_ns_per_byte: f(88),
            erase_us: f(96),
        };
        // At most 63 bytes of UTF-8, NUL-padded (docs/format/nand-image.md, step 6).
        let name = h[104..168]
            .iter()
            .position(|&b| b == 0)
            .and_then(|end| std::str::from_utf8(&h[104..104 + end]).ok())
            .ok_or_else(|| {
                Self::err(
                    path,
                    "header: device configuration: name: not UTF-8 of at most 63 bytes",
                )
            })?
            .to_owned();
        let description = crate::presets()
            .into_iter()
            .find(|p| p.name == name && p.geometry == geometry)
            .map(|p| p.description)
            .unwrap_or_default();
        let spec = DeviceSpec {
            name,
            description,
            geometry,
            timing,
            endurance: get32(48),
        };
        spec.validate_stored()
            .map_err(|e| Self::err(path, format!("header: {e}")))?;
        let (block_off, page_off, data_off, end) = layout(&spec.geometry);
        if (get64(168), get64(176), get64(184)) != (block_off, page_off, data_off) {
            return Err(Self::err(
                path,
                "header: table offsets do not match the geometry",
            ));
        }
        if len < end {
            return Err(Self::err(
                path,
                format!("truncated: {len} bytes, the geometry needs {end}"),
            ));
        }
        let g = &spec.geometry;
        let alloc = |n: u64, what: &str| {
            crate::table(n, 0u8, what).map_err(|e| Self::err(path, format!("header: {e}")))
        };
        // Both tables first: a header naming a huge sparse file fails here, not mid-way.
        let mut table = alloc(g.blocks as u64 * BLOCK_ENTRY, "the block table")?;
        let mut programs = alloc(g.pages(), "the program counts")?;
        file.read_exact_at(&mut table, block_off)
            .map_err(|e| Self::err(path, e.to_string()))?;
        let mut blocks = Vec::new();
        blocks
            .try_reserve_exact(g.blocks as usize)
            .map_err(|_| Self::err(path, "header: the block table does not fit in RAM"))?;
        // A corrupt entry (wrong checksum, unknown state) costs its block, not the image:
        // the block is taken as grown bad, which keeps its pages readable (a layer above
        // can move what it holds) and refuses programs and erases, with the largest erase
        // count of the valid entries (its own is not to be trusted). A writable open
        // rewrites the entry so, with the first change it makes to the image (so that a
        // command that fails before it changes anything leaves the image as it was); every
        // open says what it did (`repairs`).
        let mut corrupt = Vec::new();
        let mut most = 0;
        for (b, e) in table.chunks_exact(12).enumerate() {
            let crc = u32::from_le_bytes(e[8..12].try_into().unwrap());
            let bad = match u32::from_le_bytes(e[4..8].try_into().unwrap()) {
                _ if crc != crc32c::crc32c(&e[0..8]) => Err("checksum mismatch".to_string()),
                0 => Ok(BadState::Good),
                1 => Ok(BadState::Factory),
                2 => Ok(BadState::Grown),
                s => Err(format!("unknown state {s}")),
            };
            blocks.push(BlockInfo {
                erase_count: u32::from_le_bytes(e[0..4].try_into().unwrap()),
                bad: *bad.as_ref().unwrap_or(&BadState::Grown),
            });
            match bad {
                Ok(_) => most = most.max(blocks[b].erase_count),
                Err(why) => corrupt.push((b as u32, why)),
            }
        }
        let mut repairs = Vec::with_capacity(corrupt.len());
        for (b, why) in &corrupt {
            blocks[*b as usize] = BlockInfo {
                erase_count: most,
                bad: BadState::Grown,
            };
            let done = if writable {
                "entry rewritten with the first change to the image"
            } else {
                "image left as it is (read-only)"
            };
            repairs.push(format!(
                "block table entry {b} corrupt ({why}): block {b} taken as grown bad with \
                 erase count {most} (the largest of the valid entries); {done}"
            ));
        }
        file.read_exact_at(&mut programs, page_off)
            .map_err(|e| Self::err(path, e.to_string()))?;
        let store = ImageStore {
            path: path.to_path_buf(),
            file,
            raw: g.raw_page_size() as u64,
            geo: g.clone(),
            block_off,
            page_off,
            data_off,
            blocks,
            programs,
            buf: Vec::new(),
            overlay: (!writable).then(HashMap::new),
            repairs,
            unwritten_repairs: if writable {
                corrupt.iter().map(|&(b, _)| b).collect()
            } else {
                Vec::new()
            },
        };
        Ok((spec, store))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// An I/O error on the image file, naming it.
    fn io_err(&self, e: std::io::Error) -> NandError {
        Self::err(&self.path, format!("i/o: {e}"))
    }

    #[inline]
    fn off(&self, ppn: u64, col: u32) -> u64 {
        self.data_off + ppn * self.raw + col as u64
    }

    /// Read-only image: the overlay copy of page `ppn` (file bytes), made from the file on
    /// first use.
    fn overlay_page(&mut self, ppn: u64) -> Result<&mut Vec<u8>> {
        let off = self.off(ppn, 0);
        let raw = self.raw as usize;
        let path = &self.path;
        let pages = self.overlay.as_mut().expect("a read-only image");
        if let std::collections::hash_map::Entry::Vacant(v) = pages.entry(ppn) {
            let mut page = vec![0u8; raw];
            self.file
                .read_exact_at(&mut page, off)
                .map_err(|e| Self::err(path, format!("i/o: {e}")))?;
            v.insert(page);
        }
        Ok(pages.get_mut(&ppn).expect("just inserted"))
    }

    /// Before the first change to a writable image: the block-table entries the open
    /// repaired (taken as grown bad), as the blocks stand now. Not at the open itself, so
    /// that a command that fails before it changes anything leaves the file as it was
    /// (a table overwritten whole would otherwise be written back all grown bad by a
    /// command that then found nothing to do).
    fn write_repairs(&mut self) -> Result<()> {
        if self.unwritten_repairs.is_empty() || self.overlay.is_some() {
            return Ok(());
        }
        // Each entry leaves the list once written: a failed write keeps the rest for the
        // next change.
        while let Some(&b) = self.unwritten_repairs.last() {
            let at = self.block_off + b as u64 * BLOCK_ENTRY;
            self.file
                .write_all_at(&encode_block(self.blocks[b as usize]), at)
                .map_err(|e| self.io_err(e))?;
            self.unwritten_repairs.pop();
        }
        Ok(())
    }

    /// Write file bytes `bytes` at column `col` of page `ppn`: to the file, or to the
    /// overlay of a read-only image.
    fn put(&mut self, ppn: u64, col: u32, bytes: &[u8]) -> Result<()> {
        if self.overlay.is_some() {
            let page = self.overlay_page(ppn)?;
            page[col as usize..col as usize + bytes.len()].copy_from_slice(bytes);
            return Ok(());
        }
        self.write_repairs()?;
        self.file
            .write_all_at(bytes, self.off(ppn, col))
            .map_err(|e| self.io_err(e))
    }

    /// Write table bytes at file offset `at`, unless the image is read-only (the tables
    /// are in RAM too).
    fn put_table(&mut self, bytes: &[u8], at: u64) -> Result<()> {
        if self.overlay.is_some() {
            return Ok(());
        }
        self.write_repairs()?;
        self.file
            .write_all_at(bytes, at)
            .map_err(|e| self.io_err(e))
    }
}

impl Store for ImageStore {
    fn geometry(&self) -> &Geometry {
        &self.geo
    }
    fn repairs(&self) -> &[String] {
        &self.repairs
    }
    fn keeps_payload(&self) -> bool {
        true
    }
    fn read(&mut self, ppn: u64, col: u32, buf: &mut [u8]) -> Result<()> {
        match self.overlay.as_ref().and_then(|o| o.get(&ppn)) {
            Some(page) => buf.copy_from_slice(&page[col as usize..col as usize + buf.len()]),
            None => self
                .file
                .read_exact_at(buf, self.off(ppn, col))
                .map_err(|e| self.io_err(e))?,
        }
        buf.iter_mut().for_each(|b| *b = !*b);
        Ok(())
    }
    fn write(&mut self, ppn: u64, col: u32, bytes: &[u8]) -> Result<()> {
        let mut buf = std::mem::take(&mut self.buf);
        buf.clear();
        buf.extend(bytes.iter().map(|b| !b));
        let r = self.put(ppn, col, &buf);
        self.buf = buf;
        r
    }
    fn program_opaque(&mut self, ppn: u64, col: u32, len: u32) -> Result<()> {
        let zeros = vec![0u8; len as usize];
        self.write(ppn, col, &zeros)
    }
    fn data_known(&self, _ppn: u64) -> bool {
        true
    }
    fn erase(&mut self, block: u32) -> Result<()> {
        let first = self.geo.first_page(block);
        let n = self.geo.pages_per_block as usize;
        if let Some(pages) = self.overlay.as_mut() {
            for ppn in first..first + n as u64 {
                pages.insert(ppn, vec![0u8; self.raw as usize]);
            }
        } else {
            // Only a block that is not erased already is zeroed: erasing never-written
            // blocks (formatting a fresh image) keeps the file sparse.
            self.write_repairs()?;
            let off = self.off(first, 0);
            let mut cur = std::mem::take(&mut self.buf);
            cur.resize(n * self.raw as usize, 0);
            let mut r = self.file.read_exact_at(&mut cur, off);
            if r.is_ok() && cur.iter().any(|&b| b != 0) {
                cur.fill(0);
                r = self.file.write_all_at(&cur, off);
            }
            self.buf = cur;
            r.map_err(|e| self.io_err(e))?;
        }
        let counts = &mut self.programs[first as usize..first as usize + n];
        if counts.iter().any(|&c| c != 0) {
            counts.fill(0);
            self.put_table(&vec![0u8; n], self.page_off + first)?;
        }
        Ok(())
    }
    fn erase_page(&mut self, ppn: u64) -> Result<()> {
        self.put(ppn, 0, &vec![0u8; self.raw as usize])?;
        self.set_page_programs(ppn, 0)
    }
    fn page_programs(&self, ppn: u64) -> u8 {
        self.programs[ppn as usize]
    }
    fn set_page_programs(&mut self, ppn: u64, n: u8) -> Result<()> {
        self.programs[ppn as usize] = n;
        self.put_table(&[n], self.page_off + ppn)
    }
    fn block_info(&self, block: u32) -> BlockInfo {
        self.blocks[block as usize]
    }
    fn set_block_info(&mut self, block: u32, info: BlockInfo) -> Result<()> {
        self.blocks[block as usize] = info;
        self.put_table(
            &encode_block(info),
            self.block_off + block as u64 * BLOCK_ENTRY,
        )
    }
    fn sync(&mut self) -> Result<()> {
        if self.overlay.is_some() {
            return Ok(());
        }
        self.file.sync_data().map_err(|e| self.io_err(e))?;
        Ok(())
    }
    fn ram_bytes(&self) -> u64 {
        let overlay = self
            .overlay
            .as_ref()
            .map_or(0, |o| o.len() as u64 * self.raw);
        (self.programs.len() + self.blocks.len() * 8) as u64 + overlay
    }
}

/// Open an image as a device.
pub fn open_device(path: &Path) -> Result<crate::Nand> {
    let (spec, store) = ImageStore::open(path)?;
    crate::Nand::open(spec, Box::new(store))
}

/// Open an image as a device without write access ([`ImageStore::open_readonly`]): for
/// inspection; what the device programs or erases stays in RAM.
pub fn open_device_readonly(path: &Path) -> Result<crate::Nand> {
    let (spec, store) = ImageStore::open_readonly(path)?;
    crate::Nand::open(spec, Box::new(store))
}

/// Create an image for `spec` and open it as a device.
pub fn create_device(path: &Path, spec: &DeviceSpec, overwrite: bool) -> Result<crate::Nand> {
    let store = ImageStore::create(path, spec, overwrite)?;
    crate::Nand::open(spec.clone(), Box::new(store))
}
