//! `serve --log-file`: a log file that can be rotated. On SIGHUP the file is opened again by
//! its name, so logrotate (or a person) can move the old one away and the next line starts a
//! new file, the way daemons have done it for decades. Before, the process kept writing to the
//! moved file for good (and SIGHUP's default action ended the gateway).

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

/// The log file of this process, once `init_logging` opened one.
static CURRENT: OnceLock<Arc<LogFile>> = OnceLock::new();

/// A file appended to by name, reopened on demand.
pub struct LogFile {
    path: PathBuf,
    file: Mutex<File>,
}

fn open(path: &Path) -> io::Result<File> {
    OpenOptions::new().create(true).append(true).open(path)
}

impl LogFile {
    /// Opens (creating) `path` for appending and makes it the process's log file.
    pub fn install(path: &Path) -> io::Result<Arc<LogFile>> {
        let log = Arc::new(LogFile {
            path: path.to_path_buf(),
            file: Mutex::new(open(path)?),
        });
        let _ = CURRENT.set(Arc::clone(&log));
        Ok(log)
    }

    /// Opens the file by its name again; the old handle is closed once the new one is in.
    pub fn reopen(&self) -> io::Result<()> {
        let fresh = open(&self.path)?;
        *self.lock() = fresh;
        Ok(())
    }

    fn lock(&self) -> MutexGuard<'_, File> {
        self.file.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Writes go to whichever file is current (tracing's `Arc<W>` writer needs `&W: Write`).
impl Write for &LogFile {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.lock().write(buf)
    }

    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        // One lock for the whole line, so a reopen never splits it between two files.
        self.lock().write_all(buf)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.lock().flush()
    }
}

/// While serving: SIGHUP reopens the log file (when there is one) instead of ending the process.
#[cfg(unix)]
pub fn reopen_on_hangup() -> io::Result<()> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut hangups = signal(SignalKind::hangup())?;
    tokio::spawn(async move {
        while hangups.recv().await.is_some() {
            match CURRENT.get().map(|log| (log, log.reopen())) {
                Some((log, Ok(()))) => {
                    tracing::info!(file = %log.path.display(), "log file reopened on SIGHUP")
                }
                Some((log, Err(e))) => {
                    tracing::error!(file = %log.path.display(), error = %e, "could not reopen the log file; still writing to the old one")
                }
                None => tracing::info!("SIGHUP: no --log-file to reopen"),
            }
        }
    });
    Ok(())
}

/// Elsewhere there is no SIGHUP.
#[cfg(not(unix))]
pub fn reopen_on_hangup() -> io::Result<()> {
    Ok(())
}
