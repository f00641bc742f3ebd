//! Where a `sqlite::memory:` journal lives: a file of its own in the system's temporary folder,
//! deleted (with its `-wal` and `-shm`) when the journal is dropped.
//!
//! SQLite keeps an in-memory database per connection, and the journal writes through two (the
//! group's own and sqlx's) and reads through more: only a file is one database for all of them.
//! The file is never fsynced (`synchronous = OFF`), so a test journal costs about what memory did.

use crate::JournalError;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// A journal file that is deleted when this is dropped.
#[derive(Debug)]
pub(crate) struct TempFile {
    path: PathBuf,
}

/// Journals opened in memory by this process so far: part of each file's name.
static OPENED: AtomicU64 = AtomicU64::new(0);

impl TempFile {
    /// A name no other journal of any process uses (nothing is created yet).
    pub(crate) fn new() -> Result<TempFile, JournalError> {
        let n = OPENED.fetch_add(1, Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let name = format!("closedloop-journal-{}-{n}-{nanos}.db", std::process::id());
        let path = std::env::temp_dir().join(name);
        if path.exists() {
            return Err(JournalError::Writer(format!(
                "{} already exists: remove it",
                path.display()
            )));
        }
        Ok(TempFile { path })
    }

    /// The database file's path.
    pub(crate) fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TempFile {
    /// Connections still open keep working on the deleted files (POSIX), and close them later.
    fn drop(&mut self) {
        for suffix in ["", "-wal", "-shm", "-journal"] {
            let mut file = self.path.clone().into_os_string();
            file.push(suffix);
            let _ = std::fs::remove_file(file);
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::Journal;
    use crate::store::fixtures::row;

    #[tokio::test]
    async fn a_memory_journal_leaves_no_file_behind() {
        let j = Journal::open("sqlite::memory:").await.unwrap();
        j.insert(&row("c1", "lamp", "accepted", 10), &[])
            .await
            .unwrap();
        let path = j.sqlite()._temp.as_ref().unwrap().path().to_path_buf();
        assert!(path.exists(), "{} is where it lives", path.display());
        j.close().await;
        drop(j);
        for suffix in ["", "-wal", "-shm"] {
            let mut file = path.clone().into_os_string();
            file.push(suffix);
            assert!(!std::path::Path::new(&file).exists(), "{file:?} stayed");
        }
    }
}
