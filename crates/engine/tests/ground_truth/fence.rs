//! A paused-clock runtime whose clock never moves while the journal is working.
//!
//! Under `start_paused`, tokio advances the clock to the next timer whenever the runtime has
//! nothing to run. The journal's SQLite connections live on sqlx's own worker threads, so while
//! the engine waits for a commit the runtime looks idle and the clock jumps ahead — poll after
//! poll, as fast as the CPU runs them. Measured here before the fence: a `dispatched` record
//! took ~400 ms of virtual time, a relay whose expect_s is 20 ms failed `DEVICE_OFFLINE` (its
//! deadline passed before the supervisor could judge a single read) and `Journal::open` failed
//! `PoolTimedOut`. That models a journal hundreds of times slower than the devices: a real
//! condition, under which the engine errs on the side of failure (never a false success in
//! those runs), but not a deterministic one, so no exact outcome and no deadline could be
//! checked.
//!
//! The fence: the runtime's `on_thread_park` hook runs before every park (and so before every
//! auto-advance) and waits, in real time, until neither the journal's writer thread (group
//! commit) nor an sqlx worker thread is running (state `R` or `D` in `/proc/self/task/*/stat`). A worker that finishes wakes the engine's task first,
//! which makes the park return without advancing the clock. A thread sqlx has just spawned
//! carries this thread's name until it names itself, so threads named like this one count too.
//! Virtual time then passes only on timers: a journal write takes no virtual time at all, as if
//! the disk were infinitely fast, and a case replays the same way every time.
//!
//! Elsewhere than Linux the fence does nothing and the clock may jump during journal writes.

use std::time::Duration;

/// The runtime every case runs in: current-thread, paused clock, journal fence.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .start_paused(true)
        .on_thread_park(journal_fence)
        .build()
        .expect("a current-thread runtime")
}

/// Waits (bounded, in real time) until no journal worker thread is busy.
fn journal_fence() {
    let start = std::time::Instant::now();
    let mut spins = 0u32;
    while busy() && start.elapsed() < Duration::from_secs(5) {
        spins += 1;
        // A journal write takes some hundred microseconds: spin briefly, then sleep.
        if spins < 64 {
            std::thread::yield_now();
        } else {
            std::thread::sleep(Duration::from_micros(20));
        }
    }
}

#[cfg(target_os = "linux")]
fn busy() -> bool {
    WATCH.with(|w| w.borrow_mut().get_or_insert_with(linux::Watch::new).busy())
}

#[cfg(target_os = "linux")]
thread_local! {
    static WATCH: std::cell::RefCell<Option<linux::Watch>> = const { std::cell::RefCell::new(None) };
}

#[cfg(not(target_os = "linux"))]
fn busy() -> bool {
    false
}

#[cfg(target_os = "linux")]
mod linux {
    use std::collections::BTreeMap;
    use std::fs::File;
    use std::os::unix::fs::FileExt;

    /// The threads that may be doing journal work, their `stat` files kept open (re-read with
    /// `pread`: opening a /proc path costs more than reading it).
    pub struct Watch {
        me: String,
        my_name: String,
        /// /proc/self/task, whose link count is the number of threads + 2.
        task_dir: Option<File>,
        threads: usize,
        /// tid → its stat and wchan files, for the threads to watch; `None` for threads to
        /// ignore.
        tasks: BTreeMap<String, Option<(File, File)>>,
        calls: u64,
    }

    /// The name and the state letter of a `stat` line ("tid (comm) S ...").
    fn parse(stat: &str) -> Option<(&str, char, &str)> {
        let open = stat.find('(')?;
        let close = stat.rfind(')')?;
        let rest = stat[close + 1..].trim_start();
        Some((&stat[open + 1..close], rest.chars().next()?, rest))
    }

    fn read(f: &File, buf: &mut [u8]) -> Option<String> {
        let n = f.read_at(buf, 0).ok()?;
        (n > 0).then(|| String::from_utf8_lossy(&buf[..n]).into_owned())
    }

    impl Watch {
        pub fn new() -> Watch {
            let me = std::fs::read_link("/proc/thread-self")
                .ok()
                .and_then(|p| p.file_name().map(|s| s.to_string_lossy().into_owned()))
                .unwrap_or_default();
            let my_name = std::fs::read_to_string("/proc/thread-self/comm")
                .unwrap_or_default()
                .trim_end()
                .to_string();
            let mut w = Watch {
                me,
                my_name,
                task_dir: File::open("/proc/self/task").ok(),
                threads: 0,
                tasks: BTreeMap::new(),
                calls: 0,
            };
            w.rescan();
            w
        }

        /// The process's thread count, from the link count of /proc/self/task (an `fstat`, far
        /// cheaper than reading /proc/self/stat).
        fn thread_count(&self) -> usize {
            use std::os::unix::fs::MetadataExt;
            self.task_dir
                .as_ref()
                .and_then(|d| d.metadata().ok())
                .map_or(0, |m| m.nlink().saturating_sub(2) as usize)
        }

        /// Lists the threads again: new ones are classified, gone ones forgotten.
        fn rescan(&mut self) {
            let Ok(dir) = std::fs::read_dir("/proc/self/task") else {
                return;
            };
            let mut seen = BTreeMap::new();
            // Counted from the listing itself: a thread that ends while a new one starts between
            // a count and a listing would otherwise leave the count unchanged and the newcomer
            // unwatched.
            self.threads = 0;
            for entry in dir.flatten() {
                self.threads += 1;
                let tid = entry.file_name().to_string_lossy().into_owned();
                if tid == self.me {
                    continue;
                }
                let file = match self.tasks.remove(&tid) {
                    Some(f) => f,
                    None => {
                        let file = File::open(entry.path().join("stat")).ok();
                        let mut buf = [0u8; 512];
                        let watch =
                            file.as_ref()
                                .and_then(|f| read(f, &mut buf))
                                .is_some_and(|s| {
                                    parse(&s).is_some_and(|(name, _, _)| {
                                        name.starts_with("sqlx-sqlite-wor")
                                            || name == "journal-writer"
                                            || name == self.my_name
                                    })
                                });
                        let wchan = File::open(entry.path().join("wchan")).ok();
                        file.filter(|_| watch).zip(wchan)
                    }
                };
                seen.insert(tid, file);
            }
            self.tasks = seen;
        }

        /// Whether a watched thread is running (or in uninterruptible sleep: disk I/O).
        pub fn busy(&mut self) -> bool {
            self.calls += 1;
            if self.calls.is_multiple_of(64) || self.thread_count() != self.threads {
                self.rescan();
            }
            match self.running() {
                Some(busy) => busy,
                None => {
                    // A watched thread is gone: another may have taken its place.
                    self.rescan();
                    self.running().unwrap_or(true)
                }
            }
        }

        /// Whether a watched thread is running; `None` when one of them could not be read.
        ///
        /// A thread asleep in a timed sleep counts as running: that is SQLite's busy handler
        /// waiting out a lock (another connection checkpointing the WAL as it closes), which
        /// would otherwise let the clock jump past sqlx's 30 s acquire timeout (`PoolTimedOut`).
        /// An idle worker waits on a futex, never in `nanosleep`.
        fn running(&self) -> Option<bool> {
            let mut buf = [0u8; 512];
            for (stat, wchan) in self.tasks.values().flatten() {
                let n = stat.read_at(&mut buf, 0).ok().filter(|n| *n > 0)?;
                let line = &buf[..n];
                let close = line.iter().rposition(|b| *b == b')')?;
                let state = line[close + 1..].iter().find(|b| **b != b' ')?;
                if matches!(state, b'R' | b'D') {
                    return Some(true);
                }
                let n = wchan.read_at(&mut buf, 0).unwrap_or(0);
                if buf[..n].windows(9).any(|w| w == b"nanosleep") {
                    return Some(true);
                }
            }
            Some(false)
        }
    }
}
