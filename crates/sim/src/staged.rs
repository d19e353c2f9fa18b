//! Output files that appear whole or not at all.

use std::fs::File;
use std::io;
use std::path::{Path, PathBuf};

/// A file being written under a temporary name in its directory, renamed to its own name
/// by [`Staged::commit`] and removed if dropped before, so an output that stops on an
/// error (a record its format cannot hold, a malformed input line, a failed read) leaves
/// no partial file behind, and a file it would replace stays as it was.
pub struct Staged {
    tmp: PathBuf,
    dest: PathBuf,
    committed: bool,
}

impl Staged {
    /// Create the file to write for output `path`: a temporary file beside it and the
    /// [`Staged`] that renames it, or `path` itself (and `None`) for a device, FIFO or
    /// other special file such as `/dev/stdout`, which cannot be replaced by a rename. A
    /// link to a regular file stages its target, so the link stays a link. An existing
    /// `path` the user may not write is refused (the rename would replace it regardless).
    pub fn create(path: &Path) -> io::Result<(File, Option<Staged>)> {
        let staged = Staged::plan(path);
        if let Some(s) = staged.as_ref().filter(|s| s.dest.exists()) {
            std::fs::OpenOptions::new().write(true).open(&s.dest)?;
        }
        let target = staged.as_ref().map_or(path, |s| s.tmp.as_path());
        Ok((File::create(target)?, staged))
    }

    fn plan(path: &Path) -> Option<Staged> {
        let dest = match std::fs::symlink_metadata(path) {
            Err(_) => path.to_path_buf(),
            Ok(m) if m.file_type().is_file() => path.to_path_buf(),
            Ok(m) if m.file_type().is_symlink() => match std::fs::canonicalize(path) {
                Ok(t) if t.is_file() => t,
                _ => return None,
            },
            Ok(_) => return None,
        };
        let dir = match dest.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let name = dest.file_name()?.to_string_lossy().into_owned();
        Some(Staged {
            tmp: dir.join(format!(".{name}.flashkit-{}.tmp", std::process::id())),
            dest,
            committed: false,
        })
    }

    /// Give the finished file its name (call after flushing it).
    pub fn commit(mut self) -> io::Result<()> {
        std::fs::rename(&self.tmp, &self.dest)?;
        self.committed = true;
        Ok(())
    }
}

impl Drop for Staged {
    fn drop(&mut self) {
        if !self.committed {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}
