//! Crash-safe RDB file replacement: temp file in the same directory, fsync, rename, fsync dir.

use std::fs::File;
use std::io::BufWriter;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use tracing::instrument;

use crate::error::{RdbError, Result};
use crate::writer::RdbWriter;

static TEMP_COUNTER: AtomicU64 = AtomicU64::new(0);

/// An RDB file being written next to its final path. Nothing replaces the target until
/// [`AtomicRdbFile::commit`]; dropping it uncommitted removes the temp file.
pub struct AtomicRdbFile {
    writer: Option<RdbWriter<BufWriter<File>>>,
    tmp: PathBuf,
    target: PathBuf,
}

impl AtomicRdbFile {
    /// Creates `temp-<pid>-<n>.rdb` in the target's directory and writes the RDB header.
    pub fn create(target: &Path) -> Result<Self> {
        let name = format!(
            "temp-{}-{}.rdb",
            std::process::id(),
            TEMP_COUNTER.fetch_add(1, Ordering::Relaxed)
        );
        Self::create_named(target, &name)
    }

    /// [`AtomicRdbFile::create`] with the temp file's name chosen by the caller (Redis's
    /// foreground save writes `temp-<pid>.rdb`, which its shutdown removes by that name).
    /// The caller makes sure no other save uses the same name at the same time.
    pub fn create_named(target: &Path, temp_name: &str) -> Result<Self> {
        let dir = parent_dir(target);
        let tmp = dir.join(temp_name);
        let file = File::create(&tmp)?;
        let mut this = AtomicRdbFile {
            writer: None,
            tmp,
            target: target.to_path_buf(),
        };
        this.writer = Some(RdbWriter::new(BufWriter::with_capacity(1 << 20, file))?);
        Ok(this)
    }

    /// The writer for aux fields, databases and entries.
    pub fn writer(&mut self) -> &mut RdbWriter<BufWriter<File>> {
        self.writer
            .as_mut()
            .expect("writer is present until commit consumes self")
    }

    /// Path of the temp file (for logs).
    pub fn temp_path(&self) -> &Path {
        &self.tmp
    }

    /// Writes the trailer, fsyncs, renames over the target and fsyncs the directory.
    /// Returns the file size.
    #[instrument(skip(self), fields(path = %self.target.display()))]
    pub fn commit(mut self) -> Result<u64> {
        let w = self
            .writer
            .take()
            .expect("writer is present until commit consumes self");
        let file = w
            .finish()?
            .into_inner()
            .map_err(|e| RdbError::Io(e.into_error()))?;
        file.sync_all()?;
        let size = file.metadata()?.len();
        drop(file);
        std::fs::rename(&self.tmp, &self.target)?;
        File::open(parent_dir(&self.target))?.sync_all()?;
        Ok(size)
    }
}

impl Drop for AtomicRdbFile {
    fn drop(&mut self) {
        // After a successful commit the temp path no longer exists; otherwise clean up.
        if self.tmp.exists() {
            let _ = std::fs::remove_file(&self.tmp);
        }
    }
}

fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Writes an RDB file crash-safely (see [`AtomicRdbFile`]): a crash at any point leaves either
/// the old or the new file at `path`. `fill` writes aux fields, databases and entries; header
/// and trailer are added here. Returns the file size.
pub fn write_atomic<F>(path: &Path, fill: F) -> Result<u64>
where
    F: FnOnce(&mut RdbWriter<BufWriter<File>>) -> Result<()>,
{
    let mut f = AtomicRdbFile::create(path)?;
    fill(f.writer())?;
    f.commit()
}
