//! FUSE adaptors.
//!
//! [`serve`] mounts any [`BlockDevice`] as a directory that holds one regular file the
//! size of the device (`disk.img` unless named otherwise): byte `o` of the file is byte
//! `o` of the device. Programs that work on disk images use it as they are: `mkfs.fat`
//! formats it, `mtools` (`mcopy -i`) copies files in and out, `fsck.fat` checks it, `fio`
//! runs on it, `dd` and `cmp` read it. Every request goes to the device in the
//! filesystem's one thread, so the device needs no locking.
//!
//! What each request does (the choices are written here, where the code makes them):
//! - **read**: the sectors covering the range, in one device read; the bytes asked for
//!   are returned (fewer at the end of the file, none past it).
//! - **write**: the sectors covering the range, in one device write. A range that starts
//!   or ends inside a sector reads that sector first (read-modify-write). A write that
//!   starts at or past the end fails `ENOSPC`, as a block device's does; one that crosses
//!   the end writes what fits and returns the shorter count.
//! - **fsync** and **flush** (every `close`): the device's `flush`, so what was written
//!   through any descriptor is durable when `fsync` or `close` returns
//!   (`BlockDevice::flush`'s promise; the FMS makes each write durable as it returns and
//!   its flush syncs the image file).
//! - **fallocate** with `FALLOC_FL_PUNCH_HOLE` (`fallocate --punch-hole`, `blkdiscard`-like
//!   use) or `FALLOC_FL_ZERO_RANGE`: whole sectors inside the range are trimmed (the FMS
//!   unmaps whole blocks and reclaims their space), sectors the range covers in part get
//!   zeros written over that part; the range reads zeros after. Plain allocation inside
//!   the file succeeds and changes nothing (the device is all there); past its end it
//!   fails `ENOSPC`. Other modes fail `EOPNOTSUPP`.
//! - **truncate** to any other size fails `EPERM` (the device's size is fixed), so
//!   `cp file disk.img` or a shell's `>` cannot cut it; `conv=notrunc` is not needed
//!   for `dd`, since truncating to the current size is accepted. `chmod`/`chown` fail
//!   `EPERM`; access and modification times are kept in RAM.
//! - **Directory changes** (create, mkdir, mknod, symlink, link, unlink, rmdir, rename)
//!   fail `EPERM` (`EROFS` on a read-only mount): the directory holds its one file, fixed
//!   (QA stop 35: they failed `ENOSYS`, "Function not implemented", fuser's default).
//! - A device error fails the request with `EIO` (`ENOSPC` when the device is full or
//!   worn out, `EINVAL` out of range). The first one is kept for [`Served::first_error`]
//!   and every one is counted.

use std::cell::RefCell;
use std::ffi::OsStr;
use std::io;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use fuser::{
    FileAttr, FileType, Filesystem, MountOption, ReplyAttr, ReplyCreate, ReplyData, ReplyDirectory,
    ReplyEmpty, ReplyEntry, ReplyOpen, ReplyStatfs, ReplyWrite, Request, Session, TimeOrNow,
};
use nand::blockdev::{BlockDevice, DevError, SECTOR};
use serde::Serialize;

/// Inode of the mount's root directory (FUSE's fixed root).
const ROOT: u64 = 1;
/// Inode of the image file.
const FILE: u64 = 2;
/// How long the kernel may cache attributes and names: nothing but this process changes
/// them.
const TTL: Duration = Duration::from_secs(60);
/// Largest device request the adaptor makes (the kernel sends at most 128 KiB anyway).
const MAX_SECTORS: u64 = 1 << 16;

/// How to present the device.
#[derive(Clone, Debug)]
pub struct Options {
    /// Name of the image file in the mount's directory.
    pub name: String,
    /// Refuse writes (`EROFS`) and mount read-only.
    pub read_only: bool,
    /// What `mount` and `/proc/mounts` show as the source (`fsname=`).
    pub source: String,
    /// `st_blksize` of the file: the size of I/O the device prefers (its block size).
    pub io_size: u32,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            name: "disk.img".into(),
            read_only: false,
            source: "flashkit".into(),
            io_size: 4096,
        }
    }
}

/// What the requests of one mount did (`flashkit blockdev mount --json`).
#[derive(Clone, Debug, Default, Serialize, PartialEq, Eq)]
pub struct Counts {
    pub reads: u64,
    pub read_bytes: u64,
    pub writes: u64,
    pub write_bytes: u64,
    /// Punched or zeroed ranges (`fallocate`), and their bytes.
    pub discards: u64,
    pub discard_bytes: u64,
    /// Device flushes (`fsync`, `close`, unmount).
    pub flushes: u64,
    /// Requests that failed with a device error.
    pub errors: u64,
}

/// A device error as the errno the request fails with.
fn errno(e: &DevError) -> i32 {
    match e {
        DevError::NoSpace | DevError::WornOut { .. } => libc::ENOSPC,
        DevError::OutOfRange(_) | DevError::BadBuffer(_) => libc::EINVAL,
        _ => libc::EIO,
    }
}

/// The device and what happened to it, shared by the filesystem (inside the FUSE
/// session) and [`serve`] (after it).
struct Shared<D> {
    dev: D,
    counts: Counts,
    first_error: Option<String>,
    /// A write or discard was attempted since the last flush (a `close` after reads only
    /// does not sync the image file).
    dirty: bool,
}

/// The byte-level view of a block device: unaligned reads, writes and discards turned
/// into whole-sector device requests. Used by the FUSE filesystem; public for tests and
/// for other adaptors.
pub struct ByteDevice<D> {
    shared: Rc<RefCell<Shared<D>>>,
    size: u64,
}

impl<D: BlockDevice> ByteDevice<D> {
    pub fn new(dev: D) -> Self {
        let size = dev.sectors() * SECTOR as u64;
        ByteDevice {
            shared: Rc::new(RefCell::new(Shared {
                dev,
                counts: Counts::default(),
                first_error: None,
                dirty: false,
            })),
            size,
        }
    }

    /// Size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// What the requests so far did.
    pub fn counts(&self) -> Counts {
        self.shared.borrow().counts.clone()
    }

    fn fail(&self, what: &str, at: u64, e: DevError) -> i32 {
        let mut s = self.shared.borrow_mut();
        s.counts.errors += 1;
        if s.first_error.is_none() {
            s.first_error = Some(format!("{what} at byte {at}: {e}"));
        }
        errno(&e)
    }

    /// Read `len` bytes at `off` (fewer at the end, none past it).
    pub fn read_at(&self, off: u64, len: u64) -> Result<Vec<u8>, i32> {
        let end = off.saturating_add(len).min(self.size);
        if off >= end {
            return Ok(Vec::new());
        }
        let s0 = off / SECTOR as u64;
        let s1 = end.div_ceil(SECTOR as u64);
        let mut buf = vec![0u8; ((s1 - s0) * SECTOR as u64) as usize];
        self.read_sectors(s0, &mut buf)
            .map_err(|e| self.fail("read", off, e))?;
        let mut s = self.shared.borrow_mut();
        s.counts.reads += 1;
        s.counts.read_bytes += end - off;
        let skip = (off - s0 * SECTOR as u64) as usize;
        buf.truncate(skip + (end - off) as usize);
        buf.drain(..skip);
        Ok(buf)
    }

    fn read_sectors(&self, lba: u64, buf: &mut [u8]) -> Result<(), DevError> {
        let mut s = self.shared.borrow_mut();
        for (k, chunk) in buf.chunks_mut(MAX_SECTORS as usize * SECTOR).enumerate() {
            let at = lba + k as u64 * MAX_SECTORS;
            s.dev.read(at, (chunk.len() / SECTOR) as u32, Some(chunk))?;
        }
        Ok(())
    }

    fn write_sectors(&self, lba: u64, buf: &[u8]) -> Result<(), DevError> {
        let mut s = self.shared.borrow_mut();
        s.dirty = true;
        for (k, chunk) in buf.chunks(MAX_SECTORS as usize * SECTOR).enumerate() {
            let at = lba + k as u64 * MAX_SECTORS;
            s.dev
                .write(at, (chunk.len() / SECTOR) as u32, Some(chunk))?;
        }
        Ok(())
    }

    /// Write `data` at `off`; returns how many bytes were written (fewer when the range
    /// crosses the end). `ENOSPC` at or past the end.
    pub fn write_at(&self, off: u64, data: &[u8]) -> Result<usize, i32> {
        if data.is_empty() {
            return Ok(0);
        }
        if off >= self.size {
            return Err(libc::ENOSPC);
        }
        let end = off.saturating_add(data.len() as u64).min(self.size);
        let n = (end - off) as usize;
        self.put(off, &data[..n])
            .map_err(|e| self.fail("write", off, e))?;
        let mut s = self.shared.borrow_mut();
        s.counts.writes += 1;
        s.counts.write_bytes += n as u64;
        Ok(n)
    }

    /// Write `data` at `off` (inside the device) in one device write of the sectors it
    /// covers, reading a sector it covers in part first.
    fn put(&self, off: u64, data: &[u8]) -> Result<(), DevError> {
        let ss = SECTOR as u64;
        let end = off + data.len() as u64;
        let s0 = off / ss;
        let s1 = end.div_ceil(ss);
        let head = (off % ss) as usize;
        if head == 0 && end.is_multiple_of(ss) {
            return self.write_sectors(s0, data);
        }
        let mut buf = vec![0u8; ((s1 - s0) * ss) as usize];
        if head != 0 {
            self.read_sectors(s0, &mut buf[..SECTOR])?;
        }
        if !end.is_multiple_of(ss) && (s1 - 1 > s0 || head == 0) {
            let at = buf.len() - SECTOR;
            self.read_sectors(s1 - 1, &mut buf[at..])?;
        }
        buf[head..head + data.len()].copy_from_slice(data);
        self.write_sectors(s0, &buf)
    }

    /// Make `off..off+len` (clipped to the device) read zeros: whole sectors trimmed,
    /// parts of sectors overwritten with zeros.
    pub fn discard(&self, off: u64, len: u64) -> Result<(), i32> {
        let end = off.saturating_add(len).min(self.size);
        if off >= end {
            return Ok(());
        }
        let ss = SECTOR as u64;
        let a = off.div_ceil(ss);
        let b = end / ss;
        let r = (|| {
            if a >= b {
                // Inside one sector, or across the boundary of two without a whole one.
                return self.put(off, &vec![0u8; (end - off) as usize]);
            }
            if off < a * ss {
                self.put(off, &vec![0u8; (a * ss - off) as usize])?;
            }
            let mut s = self.shared.borrow_mut();
            s.dirty = true;
            let mut lba = a;
            while lba < b {
                let n = (b - lba).min(u32::MAX as u64 & !7);
                s.dev.trim(lba, n as u32)?;
                lba += n;
            }
            drop(s);
            if b * ss < end {
                self.put(b * ss, &vec![0u8; (end - b * ss) as usize])?;
            }
            Ok(())
        })();
        r.map_err(|e| self.fail("discard", off, e))?;
        let mut s = self.shared.borrow_mut();
        s.counts.discards += 1;
        s.counts.discard_bytes += end - off;
        Ok(())
    }

    /// The device's flush, when a write or discard came since the last one.
    pub fn flush(&self) -> Result<(), i32> {
        if !self.shared.borrow().dirty {
            return Ok(());
        }
        let r = self.shared.borrow_mut().dev.flush();
        r.map_err(|e| self.fail("flush", 0, e))?;
        let mut s = self.shared.borrow_mut();
        s.counts.flushes += 1;
        s.dirty = false;
        Ok(())
    }
}

/// The FUSE filesystem: a root directory holding the image file.
struct ImageDir<D> {
    dev: ByteDevice<D>,
    opts: Options,
    uid: u32,
    gid: u32,
    atime: SystemTime,
    mtime: SystemTime,
    ctime: SystemTime,
    created: SystemTime,
}

impl<D: BlockDevice> ImageDir<D> {
    /// The error of a request to change the directory, which holds its one file, fixed:
    /// `EROFS` on a read-only mount, `EPERM` otherwise.
    fn fixed(&self) -> i32 {
        if self.opts.read_only {
            libc::EROFS
        } else {
            libc::EPERM
        }
    }

    fn attr(&self, ino: u64) -> FileAttr {
        let (kind, perm, size, nlink) = if ino == ROOT {
            (FileType::Directory, 0o755, 0, 2)
        } else {
            let perm = if self.opts.read_only { 0o444 } else { 0o644 };
            (FileType::RegularFile, perm, self.dev.size(), 1)
        };
        FileAttr {
            ino,
            size,
            blocks: size.div_ceil(512),
            atime: self.atime,
            mtime: self.mtime,
            ctime: self.ctime,
            crtime: self.created,
            kind,
            perm,
            nlink,
            uid: self.uid,
            gid: self.gid,
            rdev: 0,
            blksize: self.opts.io_size,
            flags: 0,
        }
    }

    fn time(t: TimeOrNow) -> SystemTime {
        match t {
            TimeOrNow::SpecificTime(t) => t,
            TimeOrNow::Now => SystemTime::now(),
        }
    }
}

impl<D: BlockDevice> Filesystem for ImageDir<D> {
    fn destroy(&mut self) {
        // Unmount: whatever the last close left (a flush error is kept as the first).
        let _ = self.dev.flush();
    }

    fn lookup(&mut self, _req: &Request<'_>, parent: u64, name: &OsStr, reply: ReplyEntry) {
        if parent == ROOT && name == OsStr::new(&self.opts.name) {
            reply.entry(&TTL, &self.attr(FILE), 0);
        } else {
            reply.error(libc::ENOENT);
        }
    }

    fn getattr(&mut self, _req: &Request<'_>, ino: u64, _fh: Option<u64>, reply: ReplyAttr) {
        match ino {
            ROOT | FILE => reply.attr(&TTL, &self.attr(ino)),
            _ => reply.error(libc::ENOENT),
        }
    }

    fn setattr(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        mode: Option<u32>,
        uid: Option<u32>,
        gid: Option<u32>,
        size: Option<u64>,
        atime: Option<TimeOrNow>,
        mtime: Option<TimeOrNow>,
        _ctime: Option<SystemTime>,
        _fh: Option<u64>,
        _crtime: Option<SystemTime>,
        _chgtime: Option<SystemTime>,
        _bkuptime: Option<SystemTime>,
        _flags: Option<u32>,
        reply: ReplyAttr,
    ) {
        if ino != FILE && ino != ROOT {
            return reply.error(libc::ENOENT);
        }
        if mode.is_some()
            || uid.is_some_and(|u| u != self.uid)
            || gid.is_some_and(|g| g != self.gid)
        {
            return reply.error(libc::EPERM);
        }
        if let Some(s) = size {
            if ino != FILE || s != self.dev.size() {
                return reply.error(libc::EPERM);
            }
        }
        if atime.is_some() || mtime.is_some() {
            if self.opts.read_only {
                return reply.error(libc::EROFS);
            }
            if let Some(t) = atime {
                self.atime = Self::time(t);
            }
            if let Some(t) = mtime {
                self.mtime = Self::time(t);
            }
            self.ctime = SystemTime::now();
        }
        reply.attr(&TTL, &self.attr(ino));
    }

    fn create(
        &mut self,
        _req: &Request<'_>,
        _parent: u64,
        _name: &OsStr,
        _mode: u32,
        _umask: u32,
        _flags: i32,
        reply: ReplyCreate,
    ) {
        reply.error(self.fixed());
    }

    fn mknod(
        &mut self,
        _req: &Request<'_>,
        _parent: u64,
        _name: &OsStr,
        _mode: u32,
        _umask: u32,
        _rdev: u32,
        reply: ReplyEntry,
    ) {
        reply.error(self.fixed());
    }

    fn mkdir(
        &mut self,
        _req: &Request<'_>,
        _parent: u64,
        _name: &OsStr,
        _mode: u32,
        _umask: u32,
        reply: ReplyEntry,
    ) {
        reply.error(self.fixed());
    }

    fn symlink(
        &mut self,
        _req: &Request<'_>,
        _parent: u64,
        _link_name: &OsStr,
        _target: &Path,
        reply: ReplyEntry,
    ) {
        reply.error(self.fixed());
    }

    fn link(
        &mut self,
        _req: &Request<'_>,
        _ino: u64,
        _newparent: u64,
        _newname: &OsStr,
        reply: ReplyEntry,
    ) {
        reply.error(self.fixed());
    }

    fn unlink(&mut self, _req: &Request<'_>, _parent: u64, _name: &OsStr, reply: ReplyEmpty) {
        reply.error(self.fixed());
    }

    fn rmdir(&mut self, _req: &Request<'_>, _parent: u64, _name: &OsStr, reply: ReplyEmpty) {
        reply.error(self.fixed());
    }

    fn rename(
        &mut self,
        _req: &Request<'_>,
        _parent: u64,
        _name: &OsStr,
        _newparent: u64,
        _newname: &OsStr,
        _flags: u32,
        reply: ReplyEmpty,
    ) {
        reply.error(self.fixed());
    }

    fn open(&mut self, _req: &Request<'_>, ino: u64, flags: i32, reply: ReplyOpen) {
        if ino != FILE {
            return reply.error(libc::EISDIR);
        }
        if self.opts.read_only && flags & libc::O_ACCMODE != libc::O_RDONLY {
            return reply.error(libc::EROFS);
        }
        reply.opened(0, 0);
    }

    fn read(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        size: u32,
        _flags: i32,
        _lock_owner: Option<u64>,
        reply: ReplyData,
    ) {
        if ino != FILE {
            return reply.error(libc::EISDIR);
        }
        let Ok(off) = u64::try_from(offset) else {
            return reply.error(libc::EINVAL);
        };
        match self.dev.read_at(off, size as u64) {
            Ok(b) => reply.data(&b),
            Err(e) => reply.error(e),
        }
    }

    fn write(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        data: &[u8],
        _write_flags: u32,
        _flags: i32,
        _lock_owner: Option<u64>,
        reply: ReplyWrite,
    ) {
        if ino != FILE {
            return reply.error(libc::EISDIR);
        }
        if self.opts.read_only {
            return reply.error(libc::EROFS);
        }
        let Ok(off) = u64::try_from(offset) else {
            return reply.error(libc::EINVAL);
        };
        match self.dev.write_at(off, data) {
            Ok(n) => {
                self.mtime = SystemTime::now();
                self.ctime = self.mtime;
                reply.written(n as u32)
            }
            Err(e) => reply.error(e),
        }
    }

    fn flush(&mut self, _req: &Request<'_>, _ino: u64, _fh: u64, _lo: u64, reply: ReplyEmpty) {
        if self.opts.read_only {
            return reply.ok();
        }
        match self.dev.flush() {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn fsync(&mut self, _req: &Request<'_>, _ino: u64, _fh: u64, _ds: bool, reply: ReplyEmpty) {
        if self.opts.read_only {
            return reply.ok();
        }
        match self.dev.flush() {
            Ok(()) => reply.ok(),
            Err(e) => reply.error(e),
        }
    }

    fn readdir(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        mut reply: ReplyDirectory,
    ) {
        if ino != ROOT {
            return reply.error(libc::ENOTDIR);
        }
        let entries = [
            (ROOT, FileType::Directory, "."),
            (ROOT, FileType::Directory, ".."),
            (FILE, FileType::RegularFile, self.opts.name.as_str()),
        ];
        for (i, (ino, kind, name)) in entries.iter().enumerate().skip(offset.max(0) as usize) {
            if reply.add(*ino, i as i64 + 1, *kind, name) {
                break;
            }
        }
        reply.ok();
    }

    fn statfs(&mut self, _req: &Request<'_>, _ino: u64, reply: ReplyStatfs) {
        let bs = self.opts.io_size.max(512) as u64;
        let blocks = self.dev.size() / bs;
        reply.statfs(blocks, 0, 0, 1, 0, bs as u32, 255, bs as u32);
    }

    fn fallocate(
        &mut self,
        _req: &Request<'_>,
        ino: u64,
        _fh: u64,
        offset: i64,
        length: i64,
        mode: i32,
        reply: ReplyEmpty,
    ) {
        if ino != FILE {
            return reply.error(libc::EISDIR);
        }
        if self.opts.read_only {
            return reply.error(libc::EROFS);
        }
        let (Ok(off), Ok(len)) = (u64::try_from(offset), u64::try_from(length)) else {
            return reply.error(libc::EINVAL);
        };
        let punch = libc::FALLOC_FL_PUNCH_HOLE | libc::FALLOC_FL_KEEP_SIZE;
        let zero = libc::FALLOC_FL_ZERO_RANGE;
        let r = if mode == punch || mode == zero || mode == zero | libc::FALLOC_FL_KEEP_SIZE {
            self.dev.discard(off, len)
        } else if mode == 0 || mode == libc::FALLOC_FL_KEEP_SIZE {
            if mode == 0 && off.saturating_add(len) > self.dev.size() {
                Err(libc::ENOSPC)
            } else {
                Ok(())
            }
        } else {
            Err(libc::EOPNOTSUPP)
        };
        match r {
            Ok(()) => {
                if mode != 0 && mode != libc::FALLOC_FL_KEEP_SIZE {
                    self.mtime = SystemTime::now();
                    self.ctime = self.mtime;
                }
                reply.ok()
            }
            Err(e) => reply.error(e),
        }
    }
}

/// A finished mount: the device back, and what the requests did.
pub struct Served<D> {
    pub dev: D,
    pub counts: Counts,
    /// The first device error a request met (`read at byte N: …`), if any.
    pub first_error: Option<String>,
}

/// Set by SIGINT, SIGTERM and SIGHUP while [`serve`] runs.
static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::SeqCst);
}

/// Mount `dev` at `mountpoint` as a directory holding one image file, and serve it until
/// the mount is unmounted (`fusermount3 -u MOUNTPOINT`, `umount`) or the process gets
/// SIGINT, SIGTERM or SIGHUP (it then unmounts; if the mount is busy, it detaches it
/// lazily after two seconds, and the session ends when the last file on it is closed).
/// `ready` is called once the mount is in place. The device is flushed at unmount.
pub fn serve<D: BlockDevice>(
    dev: D,
    mountpoint: &Path,
    opts: Options,
    ready: impl FnOnce(&Path),
) -> io::Result<Served<D>> {
    let bytes = ByteDevice::new(dev);
    let shared = Rc::clone(&bytes.shared);
    let now = SystemTime::now();
    // SAFETY: geteuid and getegid cannot fail and have no preconditions.
    let (uid, gid) = unsafe { (libc::geteuid(), libc::getegid()) };
    let mut mount_opts = vec![
        MountOption::FSName(opts.source.clone()),
        MountOption::Subtype("flashkit".into()),
        MountOption::DefaultPermissions,
        MountOption::NoAtime,
    ];
    mount_opts.push(if opts.read_only {
        MountOption::RO
    } else {
        MountOption::RW
    });
    let fs = ImageDir {
        dev: bytes,
        opts,
        uid,
        gid,
        atime: now,
        mtime: now,
        ctime: now,
        created: now,
    };
    let mut session = Session::new(fs, mountpoint, &mount_opts)?;
    STOP.store(false, Ordering::SeqCst);
    // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
    unsafe {
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::signal(sig, on_signal as *const () as libc::sighandler_t);
        }
    }
    let running = Arc::new(AtomicBool::new(true));
    let mut unmounter = session.unmount_callable();
    let watch = {
        let running = Arc::clone(&running);
        let path: PathBuf = mountpoint.to_path_buf();
        std::thread::spawn(move || {
            while running.load(Ordering::SeqCst) {
                if STOP.load(Ordering::SeqCst) {
                    let _ = unmounter.unmount();
                    // Busy (a file still open on it): detach it lazily.
                    for _ in 0..40 {
                        if !running.load(Ordering::SeqCst) {
                            return;
                        }
                        std::thread::sleep(Duration::from_millis(50));
                    }
                    if let Ok(c) = std::ffi::CString::new(path.as_os_str().as_encoded_bytes()) {
                        // SAFETY: a valid NUL-terminated path.
                        unsafe { libc::umount2(c.as_ptr(), libc::MNT_DETACH) };
                    }
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
        })
    };
    ready(mountpoint);
    let r = session.run();
    running.store(false, Ordering::SeqCst);
    drop(session);
    let _ = watch.join();
    // SAFETY: restoring the default disposition.
    unsafe {
        for sig in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
            libc::signal(sig, libc::SIG_DFL);
        }
    }
    r?;
    let shared = Rc::try_unwrap(shared)
        .map_err(|_| io::Error::other("the filesystem outlived its session"))?
        .into_inner();
    Ok(Served {
        dev: shared.dev,
        counts: shared.counts,
        first_error: shared.first_error,
    })
}

#[cfg(test)]
mod tests;
