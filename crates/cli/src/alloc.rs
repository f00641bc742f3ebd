//! How the process's allocator (glibc's malloc) gives memory back.
//!
//! Left to its defaults, glibc keeps what a burst freed: the 19 MB answer to a hall's
//! `tools/list` raised its dynamic mmap threshold, so the next large buffers came from the heap
//! and stayed there, and each of the runtime's threads could open its own arena (up to eight
//! per core), each holding freed pages of its own. Measured with 8,000 simulated relays at rest:
//! 152 MiB resident with the defaults, 125 MiB with a fixed 256 KiB mmap threshold and one
//! arena per core (`closedloop bench --hall 8000`).

/// Buffers from this size up are mapped on their own and unmapped when freed.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
const MMAP_THRESHOLD: libc::c_int = 256 * 1024;

/// Sets the allocator up as above. Call first thing in `main`, before any thread starts.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
pub fn return_freed_memory() {
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let arenas = cores.clamp(2, 8) as libc::c_int;
    // SAFETY: mallopt only changes malloc's tuning parameters; it is called before any other
    // thread exists, and a refused value (a return of 0) leaves the default in place.
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
        libc::mallopt(libc::M_ARENA_MAX, arenas);
    }
}

/// Other allocators return memory their own way: nothing to set.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
pub fn return_freed_memory() {}
