//! Several gateways on one PostgreSQL journal: waiting until the relays' leases have settled
//! (so a bench through several gateways measures commands, not start-up), and the failover
//! figure — the gateway that drives a relay killed with SIGKILL, the time until the survivor
//! completes the next command for it — repeated, the killed gateway restarted each time.

use super::http::{Connection, Served, Topology, start, with_logs};
use super::stats::{Latencies, Progress};
use anyhow::{Result, bail};
use serde_json::{Value, json};
use std::path::Path;
use std::time::{Duration, Instant};

/// How long the leases may take to settle, and a failover to complete, before the bench gives up.
const PATIENCE: Duration = Duration::from_secs(60);

/// The owner of `relay` as the gateway behind `c` reports it (`null` while none holds it).
async fn owner(c: &mut Connection, relay: usize) -> Result<Value> {
    let device = json!({"device": format!("relay{relay}")});
    Ok(c.tool("get_device_state", device).await?["owner"].clone())
}

/// The owner of each of `relays` relays, relay `r` asked through `conns[r % len]`.
async fn owners(conns: &mut [Connection], relays: usize) -> Result<Vec<Value>> {
    let mut out = Vec::with_capacity(relays);
    for relay in 0..relays {
        let n = conns.len();
        out.push(owner(&mut conns[relay % n], relay).await?);
    }
    Ok(out)
}

/// Waits until every relay has an owner and none changed for a whole lease period, `lease_s`
/// (the first gateway up holds every relay until the others are live, then hands theirs over
/// between commands, one keeper round — a third of the lease — at a time: a shorter quiet spell
/// can fall between two rounds and end the wait before the hand-overs).
pub async fn settled(conns: &mut [Connection], relays: usize, lease_s: u32) -> Result<()> {
    let until = Instant::now() + PATIENCE;
    let quiet = Duration::from_secs(u64::from(lease_s));
    let mut last = owners(conns, relays).await?;
    let mut since = Instant::now();
    while Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(500)).await;
        let now = owners(conns, relays).await?;
        if now != last || !now.iter().all(Value::is_string) {
            last = now;
            since = Instant::now();
        } else if since.elapsed() >= quiet {
            return Ok(());
        }
    }
    bail!(
        "the relays' leases did not settle within {} s",
        PATIENCE.as_secs()
    )
}

/// `rounds` failovers between two gateways on the PostgreSQL database `journal` with 1 s
/// leases: each time the owner of relay0 is killed (SIGKILL), the survivor is asked to switch
/// it until a command completes, and the killed gateway is started again under its name.
pub async fn measure(
    exe: &Path,
    dir: &Path,
    addr: &str,
    journal: &str,
    rounds: usize,
) -> Result<Latencies> {
    let topo = Topology {
        journal: Some(journal),
        gateways: 2,
        lease_s: 1,
    };
    let plant = super::http::plant(dir, topo)?;
    let names = ["g1", "g2"];
    let mut up: Vec<Served> = Vec::with_capacity(2);
    for name in names {
        up.push(start(exe, &plant, addr, Some(name)).await?);
    }
    let mut bar = Progress::new("failover: owner killed, next command", rounds);
    let mut samples = Vec::with_capacity(rounds);
    let all = Instant::now();
    for round in 0..rounds {
        let on = round.is_multiple_of(2);
        let lease = Duration::from_secs(u64::from(topo.lease_s));
        let (owner, took) =
            (kill_owner(&mut up, &names, on, lease).await).map_err(|e| with_logs(e, &up))?;
        samples.push(took);
        up[owner] =
            (start(exe, &plant, addr, Some(names[owner])).await).map_err(|e| with_logs(e, &up))?;
        bar.step();
    }
    bar.finish();
    Ok(Latencies::new(samples, all.elapsed()))
}

/// One failover: the owner of relay0 among `up` killed (SIGKILL), then the survivor asked to
/// switch it to `on` until a command completes; which gateway was killed, and the time it took.
async fn kill_owner(
    up: &mut [Served],
    names: &[&str; 2],
    on: bool,
    lease: Duration,
) -> Result<(usize, Duration)> {
    let owner = owner_of_relay0(up, names, lease).await?;
    let mut survivor = Connection::open(up[1 - owner].at).await?;
    up[owner].child.start_kill()?;
    let _ = up[owner].child.wait().await;
    let killed = Instant::now();
    next_completed(&mut survivor, on, killed).await?;
    Ok((owner, killed.elapsed()))
}

/// Which of the gateways `up` drives relay0, once both report the same owner and it has not
/// changed for `quiet` (a lease period: a hand-over takes keeper rounds, a third of the lease
/// each, and killing a gateway that is giving relay0 up would time a hand-over, not a failover).
async fn owner_of_relay0(up: &[Served], names: &[&str; 2], quiet: Duration) -> Result<usize> {
    let until = Instant::now() + PATIENCE;
    let mut conns = Vec::with_capacity(up.len());
    for g in up {
        conns.push(Connection::open(g.at).await?);
    }
    let mut last = Value::Null;
    let mut since = Instant::now();
    while Instant::now() < until {
        let a = owner(&mut conns[0], 0).await?;
        let b = owner(&mut conns[1], 0).await?;
        if a != b || a != last {
            last = if a == b { a } else { Value::Null };
            since = Instant::now();
        } else if since.elapsed() >= quiet {
            let name = a.as_str().unwrap_or_default();
            if let Some(i) = names.iter().position(|n| *n == name) {
                return Ok(i);
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    bail!(
        "relay0's owner did not settle within {} s",
        PATIENCE.as_secs()
    )
}

/// Asks `survivor` to switch relay0 to `on` until a command completes (a call made before the
/// lease moved is handed to the dead owner and taken over with the device, or refused).
async fn next_completed(survivor: &mut Connection, on: bool, killed: Instant) -> Result<()> {
    while killed.elapsed() < PATIENCE {
        let r = survivor
            .tool("relay0_switch", json!({"on": on, "wait_s": 5}))
            .await?;
        match r["status"].as_str() {
            Some("completed") => return Ok(()),
            Some("rejected" | "accepted") => {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            _ => bail!(
                "relay0 ended {} after a failover: {}",
                r["status"],
                r["detail"]
            ),
        }
    }
    bail!(
        "no command completed within {} s of the kill",
        PATIENCE.as_secs()
    )
}
