//! The audit trail at a terminal: `closedloop audit` (who did what, oldest first). It only
//! reads, through `journal_cmds::open`: read-only, nothing created or migrated.

use crate::journal_cmds;
use anyhow::Result;
use closedloop_engine::clock::{days_from_civil, rfc3339};
use closedloop_journal::{AuditFilter, AuditRow};
use closedloop_plant::JournalView;
use std::process::ExitCode;

/// Rows read per page: a long trail is printed page by page, never held whole.
const PAGE: u32 = 1000;

/// `--since` when not given: the last day.
pub const DEFAULT_SINCE: &str = "24h";

/// `closedloop audit PLANT [--since D|T] [--caller NAME]`: one line per command accepted since
/// then, oldest first.
pub async fn audit(plant: &JournalView, since: &str, caller: Option<String>) -> Result<ExitCode> {
    let since_ms = parse_since(since, now_ms()).map_err(|m| anyhow::anyhow!("--since: {m}"))?;
    let journal = journal_cmds::open(plant).await?;
    let mut filter = AuditFilter {
        since_ms,
        caller,
        after: None,
        limit: PAGE,
    };
    let mut total = 0;
    loop {
        let rows = journal.audit(&filter).await?;
        for r in &rows {
            crate::shown::print(&line(r));
        }
        total += rows.len();
        match rows.last() {
            Some(last) if rows.len() == PAGE as usize => {
                let c = &last.command;
                filter.after = Some((c.accepted_at_ms, c.command_id.clone()));
            }
            _ => break,
        }
    }
    if total == 0 {
        println!("no commands since {}", rfc3339(since_ms));
    }
    Ok(ExitCode::SUCCESS)
}

/// One command of the trail: time, caller, device, action, status, error code (`-` when
/// none), who confirmed it, and its id for `closedloop trace`. A raw write shows the block it
/// wrote after `raw_write`.
fn line(r: &AuditRow) -> String {
    let c = &r.command;
    let action = if c.action == "raw_write" {
        let p = &c.params;
        format!(
            "raw_write {} {} {}",
            p["area"].as_str().unwrap_or("?"),
            p["address"],
            p["values"]
        )
    } else {
        c.action.clone()
    };
    let confirmed = match &r.confirmed_by {
        Some(who) => format!("  confirmed by {who}"),
        None => String::new(),
    };
    format!(
        "{}  {}  {}  {}  {}  {}{confirmed}  {}",
        rfc3339(c.accepted_at_ms),
        c.caller.as_deref().unwrap_or("-"),
        c.device,
        action,
        c.status,
        c.error_code.as_deref().unwrap_or("-"),
        c.command_id,
    )
}

/// Wall-clock ms now: what a `--since` duration counts back from.
pub(crate) fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as i64)
}

/// `--since`: a duration back from `now_ms` (`90s`, `30m`, `24h`, `7d`) or a UTC time
/// (`2026-11-29`, `2026-11-29T16:00:00Z`, with optional `.mmm`); wall-clock ms.
pub(crate) fn parse_since(text: &str, now_ms: i64) -> Result<i64, String> {
    let text = text.trim();
    let fix = "give a duration like 30m, 24h or 7d, or a UTC time like 2026-11-29T16:00:00Z";
    if let Some(unit) = text.chars().last().filter(|c| "smhd".contains(*c))
        && let Ok(n) = text[..text.len() - 1].parse::<u32>()
    {
        let per = match unit {
            's' => 1_000,
            'm' => 60_000,
            'h' => 3_600_000,
            _ => 86_400_000,
        };
        return Ok(now_ms - i64::from(n) * per);
    }
    parse_utc(text).ok_or_else(|| format!("{text:?} is neither a duration nor a time: {fix}"))
}

/// `YYYY-MM-DD` (midnight) or `YYYY-MM-DDTHH:MM:SS[.mmm]Z` (also `+00:00`, or a space for
/// `T`) as wall-clock ms. Other zones are refused rather than guessed.
fn parse_utc(text: &str) -> Option<i64> {
    let (date, time) = match text.split_once(['T', ' ']) {
        Some((d, t)) => (d, Some(t)),
        None => (text, None),
    };
    let mut d = date.splitn(3, '-').map(|p| p.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    if !(1..=12).contains(&m) || !(1..=31).contains(&day) {
        return None;
    }
    // A day past the month's end runs on into the next month (2026-02-30 is 2026-03-02), as it
    // always has here; the calendar itself refuses such a day.
    let mut ms = (days_from_civil(y, m as u32, 1)? + day - 1) * 86_400_000;
    if let Some(t) = time {
        let t = t.strip_suffix('Z').or_else(|| t.strip_suffix("+00:00"))?;
        let (hms, frac) = t.split_once('.').unwrap_or((t, "0"));
        let mut p = hms.splitn(3, ':').map(|p| p.parse::<i64>().ok());
        let (h, min, s) = (p.next()??, p.next()??, p.next()??);
        if h > 23 || min > 59 || s > 60 || frac.len() > 3 {
            return None;
        }
        let frac: i64 = format!("{frac:0<3}").parse().ok()?;
        ms += ((h * 60 + min) * 60 + s) * 1000 + frac;
    }
    Some(ms)
}

#[cfg(test)]
mod tests {
    use super::*;
    use closedloop_journal::CommandRow;
    use serde_json::json;

    fn command(action: &str, params: serde_json::Value) -> CommandRow {
        CommandRow {
            command_id: "c1".into(),
            request_id: "r1".into(),
            device: "press".into(),
            action: action.into(),
            params,
            status: "completed".into(),
            verified: true,
            verification: "feedback".into(),
            error_code: None,
            detail: None,
            hint: None,
            evidence: json!({}),
            readback_matched: None,
            accepted_at_ms: 1_795_968_000_123,
            updated_at_ms: 1_795_968_000_123,
            deadline_ms: None,
            dispatched: true,
            caller: Some("ops".into()),
            idempotency_key: None,
        }
    }

    #[test]
    fn a_line_shows_the_confirmation_and_what_a_raw_write_wrote() {
        let confirmed = AuditRow {
            command: command("stroke", json!({})),
            confirmed_by: Some("alice".into()),
        };
        assert_eq!(
            line(&confirmed),
            "2026-11-29T16:00:00.123Z  ops  press  stroke  completed  -  confirmed by alice  c1"
        );
        let mut raw = command(
            "raw_write",
            json!({"area": "holding", "address": 10, "values": [1, 2]}),
        );
        raw.status = "failed".into();
        raw.error_code = Some("DEVICE_BUSY".into());
        raw.caller = None;
        let raw = AuditRow {
            command: raw,
            confirmed_by: None,
        };
        assert_eq!(
            line(&raw),
            "2026-11-29T16:00:00.123Z  -  press  raw_write holding 10 [1,2]  failed  DEVICE_BUSY  c1"
        );
    }

    #[test]
    fn since_takes_durations_back_from_now_and_utc_times() {
        let now = 1_795_968_000_123;
        assert_eq!(parse_since("24h", now), Ok(now - 86_400_000));
        assert_eq!(parse_since("30m", now), Ok(now - 1_800_000));
        assert_eq!(parse_since("7d", now), Ok(now - 7 * 86_400_000));
        assert_eq!(parse_since("2026-11-29", now), Ok(1_795_910_400_000));
        for t in ["2026-11-29T16:00:00.123Z", "2026-11-29 16:00:00.123+00:00"] {
            assert_eq!(parse_since(t, now), Ok(1_795_968_000_123), "{t}");
            assert_eq!(
                rfc3339(parse_since(t, now).unwrap()),
                "2026-11-29T16:00:00.123Z"
            );
        }
        assert_eq!(
            parse_since("2000-02-29T00:00:00Z", now),
            Ok(951_782_400_000)
        );
        // A day past the month's end is read on into the next month, not refused.
        assert_eq!(
            parse_since("2026-02-30", now),
            parse_since("2026-03-02", now)
        );
        for bad in [
            "",
            "yesterday",
            "24",
            "2026-13-01",
            "2026-11-29T16:00:00+01:00",
            "5w",
        ] {
            let err = parse_since(bad, now).unwrap_err();
            assert!(err.contains("24h"), "{bad}: {err}");
        }
    }
}
