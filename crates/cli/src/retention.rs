//! Journal retention: `[server] retain` applied by `serve` (at start, then every hour) and by
//! `closedloop journal prune`.
//!
//! A cut-off never reaches into a rate limit's horizon: `max_rate` counts the commands the
//! journal holds, so pruning one that still counts would let a device be driven faster than its
//! plant allows after a restart.

use anyhow::{Result, bail};
use closedloop_journal::Journal;
use closedloop_plant::JournalView;
use std::process::ExitCode;
use std::time::Duration;

/// How often `serve` prunes.
const EVERY: Duration = Duration::from_secs(3600);

/// Wall-clock ms before which finished commands may go, keeping at least `keep`.
fn cutoff_ms(plant: &JournalView, keep: Duration, now_ms: i64) -> i64 {
    let keep = keep.max(plant.rate_horizon);
    now_ms - keep.as_millis().min(i64::MAX as u128) as i64
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// With `[server] retain`, prunes now and every hour for as long as the process runs.
pub fn keep_pruned(plant: &JournalView, journal: Journal) {
    let Some(keep) = plant.retain else {
        return;
    };
    let horizon = plant.rate_horizon;
    tokio::spawn(async move {
        let mut every = tokio::time::interval(EVERY);
        loop {
            every.tick().await;
            let cutoff = now_ms() - keep.max(horizon).as_millis() as i64;
            match journal.prune(cutoff).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(
                    pruned = n,
                    ?keep,
                    "finished commands past retention left the journal"
                ),
                Err(e) => {
                    tracing::warn!(error = %e, "journal prune failed; trying again in an hour")
                }
            }
        }
    });
}

/// `closedloop journal prune PLANT [--older-than D]`: deletes the finished commands older than
/// D (default: the plant's `retain`) and says how many went.
pub async fn prune(plant: &JournalView, older_than: Option<String>) -> Result<ExitCode> {
    let keep = match (older_than, plant.retain) {
        (Some(text), _) => closedloop_plant::parse_retention(&text)
            .map_err(|m| anyhow::anyhow!("--older-than: {m}"))?,
        (None, Some(keep)) => keep,
        (None, None) => bail!(
            "{}: no [server] retain and no --older-than: say how long to keep finished commands, e.g. --older-than 30d",
            plant.file.display()
        ),
    };
    let url = &plant.journal;
    if url.contains(":memory:") {
        bail!(
            "{}: the journal is {url}: nothing outlives its process to prune",
            plant.file.display()
        );
    }
    let journal = Journal::open(url).await?;
    let cutoff = cutoff_ms(plant, keep, now_ms());
    let n = journal.prune(cutoff).await?;
    journal.close().await;
    let horizon = plant.rate_horizon;
    let kept = if horizon > keep {
        format!(" (kept {} h for max_rate)", horizon.as_secs() / 3600)
    } else {
        String::new()
    };
    println!(
        "pruned {n} finished command(s) older than {} h{kept}",
        keep.max(horizon).as_secs() / 3600
    );
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plant(rate: &str) -> JournalView {
        let src = format!(
            "[[device]]\nid = \"lamp\"\ndescription = \"Lamp\"\ndriver = {{ kind = \"sim\", model = \"relay\" }}\n{rate}\n[device.signals]\non = {{ discrete_input = 0 }}\n"
        );
        JournalView::of(
            &closedloop_plant::parse(&src, "p.toml", std::path::Path::new("/srv")).unwrap(),
        )
    }

    #[test]
    fn a_cutoff_never_reaches_into_a_rate_limit_s_horizon() {
        let hour = Duration::from_secs(3600);
        assert_eq!(
            cutoff_ms(&plant(""), hour, 10_000_000),
            10_000_000 - 3_600_000
        );
        // 48 a burst at one an hour looks back 48 hours: an hour's retention keeps them.
        let slow = plant("max_rate = \"1/h\"\nmax_burst = 48");
        assert!(slow.rate_horizon >= 47 * hour, "{:?}", slow.rate_horizon);
        assert!(cutoff_ms(&slow, hour, 1_000_000_000) <= 1_000_000_000 - 47 * 3_600_000);
    }
}
