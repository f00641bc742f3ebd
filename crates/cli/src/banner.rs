//! The start-up banner of `closedloop serve` on stderr: which plant, how many of its devices
//! answer, where to reach the gateway (MCP, `/metrics`) and where its journal is — what an
//! operator checks first when a gateway starts, without reading the log.
//!
//! Printed once every device has answered or been declared offline, or after
//! [`SETTLE`] at most (a device that is still `unknown` then is named as such), by a task of its
//! own: serving never waits for it.

use closedloop_engine::{Engine, Liveness};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// How long the banner waits for the devices' first answers before it tells what it knows.
pub const SETTLE: Duration = Duration::from_secs(3);

/// How many device names a line lists before it says "and N more".
const NAMES: usize = 6;

/// Prints the banner once the devices have settled (at most [`SETTLE`] from now), in a task of
/// its own. `endpoints` are (what, where) pairs: `("MCP", "http://…/mcp")`.
pub fn print_when_settled(
    engine: &Arc<Engine>,
    plant_path: &Path,
    endpoints: Vec<(String, String)>,
) {
    let engine = Arc::clone(engine);
    let plant = plant_path.display().to_string();
    tokio::spawn(async move {
        let deadline = tokio::time::Instant::now() + SETTLE;
        while tokio::time::Instant::now() < deadline && unknown(&engine) > 0 {
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        eprint!("{}", banner(&engine, &plant, &endpoints));
    });
}

fn unknown(engine: &Engine) -> usize {
    engine
        .health()
        .iter()
        .filter(|h| h.liveness == Liveness::Unknown)
        .count()
}

/// The banner's lines, as the devices are now.
pub fn banner(engine: &Engine, plant_path: &str, endpoints: &[(String, String)]) -> String {
    let plant = engine.plant();
    let health = engine.health();
    let named = |want: Liveness| -> Vec<&str> {
        health
            .iter()
            .filter(|h| h.liveness == want)
            .map(|h| h.device)
            .collect()
    };
    let (online, offline, unknown) = (
        named(Liveness::Online),
        named(Liveness::Offline),
        named(Liveness::Unknown),
    );
    let mut out = format!(
        "closedloop: plant {:?} ({plant_path}): {} devices: {} online{}{}\n",
        plant.server.name,
        health.len(),
        online.len(),
        listed(", {} offline", &offline),
        listed(", {} unknown", &unknown),
    );
    // What unknown means, in the words of each protocol an unknown device speaks.
    let mut said = Vec::new();
    for d in plant
        .devices
        .iter()
        .filter(|d| unknown.contains(&d.id.as_str()))
    {
        let means = closedloop_engine::unknown_means(&d.driver);
        if !said.contains(&means) {
            said.push(means);
            out.push_str(&format!("closedloop: unknown: {means}\n"));
        }
    }
    let journal = closedloop_journal::shown_url(&plant.server.journal);
    out.push_str(&match engine.shared_instance() {
        Some((me, lease)) => format!(
            "closedloop: journal {journal}, shared: this gateway is instance {me:?}, leases of {} s\n",
            lease.as_secs_f64()
        ),
        None => format!("closedloop: journal {journal}\n"),
    });
    for (what, at) in endpoints {
        out.push_str(&format!("closedloop: {what} {at}\n"));
    }
    out
}

/// `", 2 offline (fan, pump)"` for `names`, or nothing when there are none.
fn listed(head: &str, names: &[&str]) -> String {
    if names.is_empty() {
        return String::new();
    }
    let shown = names[..names.len().min(NAMES)].join(", ");
    let more = match names.len().saturating_sub(NAMES) {
        0 => String::new(),
        n => format!(" and {n} more"),
    };
    format!(
        "{} ({shown}{more})",
        head.replace("{}", &names.len().to_string())
    )
}

#[cfg(test)]
mod tests {
    use super::listed;

    #[test]
    fn a_long_list_of_names_is_cut_short_with_a_count() {
        assert_eq!(listed(", {} offline", &[]), "");
        assert_eq!(listed(", {} offline", &["fan"]), ", 1 offline (fan)");
        let many = ["a", "b", "c", "d", "e", "f", "g", "h"];
        assert_eq!(
            listed(", {} offline", &many),
            ", 8 offline (a, b, c, d, e, f and 2 more)"
        );
    }
}
