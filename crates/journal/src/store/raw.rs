//! The group-commit writer's own SQLite connection, on SQLite's C API.
//!
//! Through sqlx every statement was a round trip to the connection's worker thread: a batch
//! took five (begin, three statements, commit), each a hand-over between threads that, on a
//! busy two-core machine, cost more than the statement itself, and a durable accept waited for
//! all of them. Here the writer thread runs SQLite itself: a batch is one function call with no
//! hand-over, and its statements are prepared once and kept for the connection's life.
//!
//! sqlx cannot lend its connection for that: it closes a connection by itself (after a cancelled
//! query) with a close that fails while statements it does not know of are still prepared. So
//! this connection is opened here, used on one thread, and closed here.
//!
//! # Invariants
//! - Every statement prepared is finalized before the connection closes ([`Db`]'s `Drop`).
//! - A [`Stmt`] borrows its [`Db`] mutably and is reset when dropped: one statement runs at a
//!   time, and a cached statement never carries an earlier use's bindings or half-read rows.
//! - Text is bound as a copy (`SQLITE_TRANSIENT`): nothing SQLite keeps points into Rust memory.

use crate::JournalError;
use libsqlite3_sys as ffi;
use std::ffi::{CStr, CString, c_int};
use std::marker::PhantomData;
use std::path::Path;
use std::time::Duration;

/// One SQLite connection and the statements prepared on it.
#[derive(Debug)]
pub(crate) struct Db {
    db: *mut ffi::sqlite3,
    cache: Vec<(&'static str, *mut ffi::sqlite3_stmt)>,
}

// SAFETY: a `Db` is used by one thread at a time (it moves to the writer thread and stays
// there), and SQLite is opened in serialized mode, so even a misuse could not race inside it.
unsafe impl Send for Db {}

/// A value to bind to a statement's parameter.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Arg<'a> {
    Null,
    Int(i64),
    Text(&'a str),
}

impl<'a> From<&'a str> for Arg<'a> {
    fn from(v: &'a str) -> Arg<'a> {
        Arg::Text(v)
    }
}

impl<'a> From<&'a String> for Arg<'a> {
    fn from(v: &'a String) -> Arg<'a> {
        Arg::Text(v)
    }
}

impl<'a> From<&'a Option<String>> for Arg<'a> {
    fn from(v: &'a Option<String>) -> Arg<'a> {
        v.as_deref().map_or(Arg::Null, Arg::Text)
    }
}

impl From<i64> for Arg<'_> {
    fn from(v: i64) -> Self {
        Arg::Int(v)
    }
}

impl From<Option<i64>> for Arg<'_> {
    fn from(v: Option<i64>) -> Self {
        v.map_or(Arg::Null, Arg::Int)
    }
}

impl From<bool> for Arg<'_> {
    fn from(v: bool) -> Self {
        Arg::Int(i64::from(v))
    }
}

impl From<Option<bool>> for Arg<'_> {
    fn from(v: Option<bool>) -> Self {
        v.map_or(Arg::Null, |b| Arg::Int(i64::from(b)))
    }
}

impl Db {
    /// Opens the database file at `path` — read-only, or read-write and created if missing —
    /// waiting up to `busy` for another connection's write lock.
    pub(crate) fn open(path: &Path, read_only: bool, busy: Duration) -> Result<Db, JournalError> {
        let name = CString::new(path.to_string_lossy().as_bytes()).map_err(|_| {
            JournalError::Writer(format!("the path {} holds a NUL byte", path.display()))
        })?;
        let flags = ffi::SQLITE_OPEN_FULLMUTEX
            | match read_only {
                true => ffi::SQLITE_OPEN_READONLY,
                false => ffi::SQLITE_OPEN_READWRITE | ffi::SQLITE_OPEN_CREATE,
            };
        let mut db = std::ptr::null_mut();
        // SAFETY: `name` is NUL-terminated; `db` receives a handle (or null when out of memory).
        let rc = unsafe { ffi::sqlite3_open_v2(name.as_ptr(), &mut db, flags, std::ptr::null()) };
        // Even a failed open returns a handle, which must be closed: `Db`'s drop does it.
        let db = Db {
            db,
            cache: Vec::new(),
        };
        db.check(rc)?;
        let ms = c_int::try_from(busy.as_millis()).unwrap_or(c_int::MAX);
        // SAFETY: `db.db` is an open handle.
        db.check(unsafe { ffi::sqlite3_busy_timeout(db.db, ms) })?;
        // Codes as precise as sqlx's: 787 for a foreign key, 2067 for a unique key, not 19.
        // SAFETY: `db.db` is an open handle.
        db.check(unsafe { ffi::sqlite3_extended_result_codes(db.db, 1) })?;
        Ok(db)
    }

    /// Runs `sql` (one or more statements, no parameters, rows discarded).
    pub(crate) fn exec(&mut self, sql: &str) -> Result<(), JournalError> {
        let sql = CString::new(sql).map_err(|_| JournalError::Writer("SQL with a NUL".into()))?;
        let none = std::ptr::null_mut();
        // SAFETY: an open handle and a NUL-terminated statement; no callback.
        let rc = unsafe { ffi::sqlite3_exec(self.db, sql.as_ptr(), None, none, none.cast()) };
        self.check(rc)
    }

    /// Whether a transaction is open (one a failed `ROLLBACK` left behind, say).
    pub(crate) fn in_transaction(&self) -> bool {
        // SAFETY: an open handle.
        unsafe { ffi::sqlite3_get_autocommit(self.db) == 0 }
    }

    /// The statement for `sql`, prepared at its first use and kept for the connection's life.
    pub(crate) fn stmt(&mut self, sql: &'static str) -> Result<Stmt<'_>, JournalError> {
        let stmt = match self.cache.iter().find(|(s, _)| *s == sql) {
            Some((_, stmt)) => *stmt,
            None => {
                let stmt = self.prepare(sql)?;
                self.cache.push((sql, stmt));
                stmt
            }
        };
        Ok(Stmt {
            db: self.db,
            stmt,
            _db: PhantomData,
        })
    }

    fn prepare(&self, sql: &str) -> Result<*mut ffi::sqlite3_stmt, JournalError> {
        let mut stmt = std::ptr::null_mut();
        let len = c_int::try_from(sql.len())
            .map_err(|_| JournalError::Writer("a statement longer than 2 GiB".into()))?;
        // SAFETY: `sql` is valid for `len` bytes; SQLite copies what it keeps.
        let rc = unsafe {
            ffi::sqlite3_prepare_v3(
                self.db,
                sql.as_ptr().cast(),
                len,
                ffi::SQLITE_PREPARE_PERSISTENT,
                &mut stmt,
                std::ptr::null_mut(),
            )
        };
        self.check(rc)?;
        Ok(stmt)
    }

    /// `Ok` for a successful result code, else the connection's error for it.
    fn check(&self, rc: c_int) -> Result<(), JournalError> {
        if matches!(rc, ffi::SQLITE_OK | ffi::SQLITE_ROW | ffi::SQLITE_DONE) {
            return Ok(());
        }
        Err(error(self.db, rc))
    }
}

impl Drop for Db {
    fn drop(&mut self) {
        for (_, stmt) in self.cache.drain(..) {
            // SAFETY: prepared on this handle and finalized once (drained).
            unsafe { ffi::sqlite3_finalize(stmt) };
        }
        // SAFETY: every statement is finalized (else this close would fail, leaving the handle
        // open); closing a null handle is a harmless no-op.
        unsafe { ffi::sqlite3_close(self.db) };
    }
}

/// The error SQLite reports on `db` for result code `rc`.
fn error(db: *mut ffi::sqlite3, rc: c_int) -> JournalError {
    let message = if db.is_null() {
        // SAFETY: sqlite3_errstr returns a static string for any code.
        unsafe { CStr::from_ptr(ffi::sqlite3_errstr(rc)) }
    } else {
        // SAFETY: an open handle's message stays valid until the next call on it.
        unsafe { CStr::from_ptr(ffi::sqlite3_errmsg(db)) }
    };
    JournalError::Sqlite {
        code: rc,
        message: message.to_string_lossy().into_owned(),
    }
}

/// A prepared statement in use: bind, run; reset when dropped.
#[derive(Debug)]
pub(crate) struct Stmt<'db> {
    db: *mut ffi::sqlite3,
    stmt: *mut ffi::sqlite3_stmt,
    _db: PhantomData<&'db mut Db>,
}

impl Stmt<'_> {
    /// Binds `args` to parameters `?1`, `?2`, … in order.
    pub(crate) fn bind(&mut self, args: &[Arg<'_>]) -> Result<(), JournalError> {
        for (i, arg) in args.iter().enumerate() {
            let i = c_int::try_from(i + 1).unwrap_or(c_int::MAX);
            // SAFETY: a live statement; text is copied by SQLite (SQLITE_TRANSIENT).
            let rc = unsafe {
                match *arg {
                    Arg::Null => ffi::sqlite3_bind_null(self.stmt, i),
                    Arg::Int(v) => ffi::sqlite3_bind_int64(self.stmt, i, v),
                    Arg::Text(t) => ffi::sqlite3_bind_text64(
                        self.stmt,
                        i,
                        t.as_ptr().cast(),
                        t.len() as u64,
                        ffi::SQLITE_TRANSIENT(),
                        ffi::SQLITE_UTF8 as u8,
                    ),
                }
            };
            self.check(rc)?;
        }
        Ok(())
    }

    /// Runs the statement to its end: whether it produced a row (an `INSERT … RETURNING` that
    /// inserted, a `SELECT` that found one).
    pub(crate) fn run(&mut self) -> Result<bool, JournalError> {
        let mut any = false;
        loop {
            // SAFETY: a live statement with its parameters bound.
            match unsafe { ffi::sqlite3_step(self.stmt) } {
                ffi::SQLITE_ROW => any = true,
                ffi::SQLITE_DONE => return Ok(any),
                rc => return Err(error(self.db, rc)),
            }
        }
    }

    fn check(&self, rc: c_int) -> Result<(), JournalError> {
        if rc == ffi::SQLITE_OK {
            Ok(())
        } else {
            Err(error(self.db, rc))
        }
    }
}

impl Drop for Stmt<'_> {
    fn drop(&mut self) {
        // SAFETY: a live statement; reset keeps it prepared for the next use.
        unsafe {
            ffi::sqlite3_reset(self.stmt);
            ffi::sqlite3_clear_bindings(self.stmt);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cached_statement_runs_again_with_new_bindings_and_reports_its_rows() {
        let dir = tempfile::tempdir().unwrap();
        let mut db = Db::open(&dir.path().join("t.db"), false, Duration::ZERO).unwrap();
        db.exec("CREATE TABLE t (k TEXT PRIMARY KEY, v INTEGER)")
            .unwrap();
        const INSERT: &str = "INSERT INTO t (k, v) VALUES (?1, ?2) ON CONFLICT (k) DO NOTHING \
                              RETURNING k";
        for (k, v, inserted) in [("a", Arg::Int(1), true), ("a", Arg::Null, false)] {
            let mut s = db.stmt(INSERT).unwrap();
            s.bind(&[Arg::Text(k), v]).unwrap();
            assert_eq!(s.run().unwrap(), inserted, "{k}");
        }
        assert_eq!(db.cache.len(), 1, "prepared once");
        let mut s = db.stmt("SELECT 1 FROM t WHERE k = ?1 AND v = 1").unwrap();
        s.bind(&[Arg::Text("a")]).unwrap();
        assert!(s.run().unwrap(), "the first insert's value stayed");
    }

    #[test]
    fn a_failing_statement_names_sqlite_s_reason() {
        let dir = tempfile::tempdir().unwrap();
        let mut db = Db::open(&dir.path().join("t.db"), false, Duration::ZERO).unwrap();
        let err = db.stmt("INSERT INTO missing VALUES (1)").unwrap_err();
        assert!(err.to_string().contains("no such table: missing"), "{err}");
    }

    #[test]
    fn a_missing_file_is_not_created_to_be_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("none.db");
        let err = Db::open(&path, true, Duration::ZERO).unwrap_err();
        assert!(err.to_string().contains("unable to open"), "{err}");
        assert!(!path.exists());
    }
}
