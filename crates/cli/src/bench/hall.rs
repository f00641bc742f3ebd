//! Figures at a factory hall's size: how long `closedloop check` and `serve` take to load a
//! plant of thousands of relays, and what `serve` holds in memory and spends in CPU at rest.

use super::rpc::Rpc;
use super::stats::Latencies;
use anyhow::{Context, Result, bail};
use serde_json::Value;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

/// Linux reports CPU time in /proc in clock ticks of 1/100 s (`USER_HZ`, fixed at 100 for
/// user space whatever the kernel's own tick).
const USER_HZ: f64 = 100.0;
/// How long the server is left to settle before its memory and CPU are read.
const SETTLE: Duration = Duration::from_secs(3);
/// How long its CPU time is watched at rest.
const AT_REST: Duration = Duration::from_secs(5);

/// A plant of `n` simulated relays, each with a `switch` action, polled every `poll_ms`. A
/// 2 s deadline floor: a bench measures how fast a relay confirms, and a loaded machine (a debug
/// build among tests) that misses a read for a few hundred ms must not end the run `failed`.
pub fn relays(n: usize, poll_ms: u64, pull_in_ms: u64) -> String {
    let mut s = String::from("[server]\nname = \"bench\"\njournal = \"sqlite://bench.db\"\n");
    for i in 0..n {
        s.push_str(&format!(
            r#"
[[device]]
id = "relay{i}"
description = "A simulated relay with a contact read back."
driver = {{ kind = "sim", model = "relay", pull_in_ms = {pull_in_ms} }}
poll_ms = {poll_ms}
[device.signals]
contact = {{ discrete_input = 0 }}
[[device.action]]
name = "switch"
description = "Switch the relay on or off and confirm it on the contact."
params = {{ on = {{ type = "bool" }} }}
write = [{{ coil = 0, value = "params.on" }}]
done_when = "contact == params.on"
expect_s = {expect_s}
timeout_floor_ms = 2000
idempotent = true
"#,
            expect_s = pull_in_ms as f64 / 1000.0
        ));
    }
    s
}

/// What the hall measurement found.
pub struct Hall {
    /// Relays in the big plant.
    pub relays: usize,
    /// `closedloop check` of 1,000 relays, whole process (median of [`CHECK_RUNS`]).
    pub check_1000: Duration,
    /// `closedloop check` of the big plant (median of [`CHECK_RUNS`]).
    pub check_big: Duration,
    /// From starting `serve` to its answer to `tools/list`.
    pub tools_list_after_start: Duration,
    /// Resident memory of `serve` at rest, bytes.
    pub resident: u64,
    /// CPU of `serve` at rest, fraction of one core.
    pub cpu_at_rest: f64,
}

/// Runs `closedloop check` on a plant of `n` relays in `dir`; its wall time.
async fn check(exe: &Path, dir: &Path, n: usize) -> Result<Duration> {
    let path = dir.join(format!("hall-{n}.toml"));
    std::fs::write(&path, relays(n, 100, 10))?;
    let start = Instant::now();
    let status = tokio::process::Command::new(exe)
        .arg("check")
        .arg(&path)
        .current_dir(dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .await?;
    if !status.success() {
        bail!("closedloop check of {n} relays failed ({status})");
    }
    Ok(start.elapsed())
}

/// Runs of `check` per size: its time is their median, the two sizes timed in turn, so one busy
/// moment of the machine does not decide the ratio (timed once each, the ratio read 7.1–10.8 ×
/// on one day).
pub const CHECK_RUNS: usize = 5;

/// The median time of [`CHECK_RUNS`] `check`s of 1,000 relays and of `n` relays.
async fn checks(exe: &Path, dir: &Path, n: usize) -> Result<(Duration, Duration)> {
    let (mut small, mut big) = (Vec::new(), Vec::new());
    for _ in 0..CHECK_RUNS {
        small.push(check(exe, dir, 1000).await?);
        big.push(check(exe, dir, n).await?);
    }
    let median = |runs| Latencies::new(runs, Duration::ZERO).p50();
    Ok((median(small), median(big)))
}

/// Measures the hall figures with `n` relays polled every 100 ms.
pub async fn measure(exe: &Path, dir: &Path, n: usize) -> Result<Hall> {
    let (check_1000, check_big) = checks(exe, dir, n).await?;
    let path = dir.join(format!("hall-{n}.toml"));
    let start = Instant::now();
    let path_text = path.display().to_string();
    let mut rpc = Rpc::start(exe, &["serve", &path_text], dir).await?;
    let tools = rpc.call("tools/list", Value::Null).await?;
    let tools_list_after_start = start.elapsed();
    if tools["tools"].as_array().is_none_or(|t| t.len() < n) {
        bail!("serve listed fewer tools than the {n} relays have");
    }
    tokio::time::sleep(SETTLE).await;
    let pid = rpc.pid().context("serve has no process id")?;
    let resident = resident_bytes(pid)?;
    let before = cpu_ticks(pid)?;
    tokio::time::sleep(AT_REST).await;
    let cpu_at_rest = (cpu_ticks(pid)? - before) as f64 / USER_HZ / AT_REST.as_secs_f64();
    rpc.stop().await;
    Ok(Hall {
        relays: n,
        check_1000,
        check_big,
        tools_list_after_start,
        resident,
        cpu_at_rest,
    })
}

/// `VmRSS` of a process, bytes.
fn resident_bytes(pid: u32) -> Result<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kib = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
        .context("no VmRSS in /proc/PID/status")?;
    Ok(kib * 1024)
}

/// User plus system CPU time of a process, in clock ticks.
fn cpu_ticks(pid: u32) -> Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The command name (field 2) may hold spaces: fields are counted after its closing paren.
    let after = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or("");
    let fields: Vec<&str> = after.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of the whole line: 11 and 12 after the paren.
    let tick = |i: usize| fields.get(i).and_then(|f| f.parse::<u64>().ok());
    match (tick(11), tick(12)) {
        (Some(u), Some(s)) => Ok(u + s),
        _ => bail!("/proc/{pid}/stat has no utime and stime"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_generated_plant_loads_with_every_relay() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("p.toml");
        std::fs::write(&path, relays(3, 5, 10)).unwrap();
        let plant = closedloop_plant::load(&path).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(plant.devices.len(), 3);
        assert_eq!(plant.devices[2].id, "relay2");
    }

    #[test]
    fn this_process_has_memory_and_cpu_time_in_proc() {
        let pid = std::process::id();
        assert!(resident_bytes(pid).unwrap() > 0);
        // Spend a little CPU so the count cannot be zero for a fresh process.
        let mut x = 0u64;
        for i in 0..50_000_000u64 {
            x = x.wrapping_add(i ^ (x >> 3));
        }
        assert!(x != 1);
        assert!(cpu_ticks(pid).unwrap() > 0);
    }
}
