//! The audit trail at a terminal: `closedloop audit` (who did what, oldest first) and
//! `closedloop journal verify` (whether the journal's hash chain still holds).
//!
//! Both only read, through `journal_cmds::open`: read-only, nothing created or migrated.

use crate::journal_cmds;
use anyhow::Result;
use closedloop_engine::clock::rfc3339;
use closedloop_journal::{AuditFilter, AuditRow, Break, JournalKey, VerifyReport};
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

/// `closedloop journal verify PLANT`: re-hashes the journal's events and checks its command rows
/// against them; exit 0 when the chain is intact, 1 with the first broken link (or edited
/// command row) named.
pub async fn verify(plant: &JournalView, heads: &[(i64, String)]) -> Result<ExitCode> {
    let key = match &plant.journal_key {
        None => None,
        Some(Ok(secret)) => Some(JournalKey::new(&secret.0).map_err(anyhow::Error::msg)?),
        Some(Err(why)) => anyhow::bail!(
            "{}: the plant keys its journal (server.journal_key) and verify needs that key: {why}",
            plant.file.display()
        ),
    };
    let journal = journal_cmds::open(plant).await?;
    let report = match &key {
        Some(key) => journal.verify_keyed(heads, key).await?,
        None => journal.verify_heads(heads).await?,
    };
    journal.close().await;
    print!("{}", render(&report));
    Ok(if report.intact() {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

/// `--head SEQ:HASH`: a head a verify printed, kept outside the journal.
pub fn kept_head(s: &str) -> Result<(i64, String), String> {
    let (seq, hash) = s.split_once(':').ok_or_else(|| {
        format!("{s:?}: write SEQ:HASH, as `journal verify` printed `head seq SEQ hash HASH`")
    })?;
    let seq: i64 = (seq.trim().parse().ok())
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("{seq:?} is not a seq (a whole number from 1)"))?;
    let hash = hash.trim();
    if hash.len() != 64 || !hash.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(format!(
            "{hash:?} is not a chain hash (64 hexadecimal digits)"
        ));
    }
    Ok((seq, hash.to_ascii_lowercase()))
}

/// The report as lines: what was checked, then `intact` or the broken link.
fn render(r: &VerifyReport) -> String {
    let events_held = r
        .broken
        .as_ref()
        .is_none_or(|b| b.kind == Break::RowChanged);
    let mut out = format!("checked {} chained event(s)\n", r.checked);
    if r.legacy > 0 {
        out += &format!(
            "{} legacy event(s) written before the chain began: not checkable\n",
            r.legacy
        );
    }
    if let Some(a) = &r.anchor {
        out += &format!("pruned below seq {} (the chain resumes there)\n", a.seq);
    }
    if events_held {
        out += &format!(
            "checked {} command row(s) against the chain (their caller, device, action, params, idempotency key, status, error code and verified; detail, hint, evidence, times, dispatched and readback_matched are not covered: the timeline's events record what they say)\n",
            r.rows_checked
        );
    }
    out += &coverage(r, events_held);
    if let Some(seq) = r.keyed_from {
        out += &format!("keyed with the plant's journal_key from seq {seq}\n");
    }
    if let Some((seq, hash)) = &r.head {
        let what = if events_held { "head" } else { "last good" };
        out += &format!("{what} seq {seq} hash {hash}\n");
    }
    match &r.broken {
        None => out += "intact\n",
        Some(b) => {
            let command = b
                .command_id
                .as_deref()
                .map(|c| format!(" (command {c})"))
                .unwrap_or_default();
            // A row the chain never saw has no event to stand at.
            let at = match b.seq {
                0 => String::new(),
                seq => format!(" at seq {seq}"),
            };
            out += &format!("BROKEN{at}{command}: {}: {}\n", b.kind, b.detail);
        }
    }
    out
}

/// Where the chain's cover of command rows starts, when not with the journal (events hashed
/// with the v1 encoding, written before it covered rows), and the rows it does not cover.
fn coverage(r: &VerifyReport, events_held: bool) -> String {
    let mut out = String::new();
    match r.covered_from {
        Some(seq) if r.v1 > 0 => {
            out += &format!(
                "command rows covered from seq {seq}: the {} event(s) before it were hashed without them (v1)\n",
                r.v1
            );
        }
        None if r.v1 > 0 || r.legacy > 0 => {
            out += "command rows not covered yet: no event records them; the next one written starts their cover\n";
        }
        _ => {}
    }
    if events_held && r.rows_uncovered > 0 {
        out += &format!(
            "{} command row(s) not covered: written before the cover started, or their timeline pruned\n",
            r.rows_uncovered
        );
    }
    out
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
    let mut ms = days_from_civil(y, m, day) * 86_400_000;
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

/// Days since 1970-01-01 of a proleptic Gregorian date (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let doy = (153 * (if m > 2 { m - 3 } else { m + 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;
    use closedloop_journal::{BrokenLink, CommandRow};
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
    fn a_report_names_the_first_broken_link() {
        let report = VerifyReport {
            checked: 3,
            legacy: 2,
            head: Some((5, "ab".into())),
            broken: Some(BrokenLink {
                seq: 6,
                command_id: Some("c2".into()),
                kind: Break::ContentChanged,
                detail: "the row hashes to x, not to its stored y".into(),
            }),
            ..VerifyReport::default()
        };
        assert_eq!(
            render(&report),
            "checked 3 chained event(s)\n\
             2 legacy event(s) written before the chain began: not checkable\n\
             command rows not covered yet: no event records them; the next one written starts their cover\n\
             last good seq 5 hash ab\n\
             BROKEN at seq 6 (command c2): content changed: the row hashes to x, not to its stored y\n"
        );
    }

    #[test]
    fn a_report_says_where_the_rows_cover_starts_and_names_an_edited_row() {
        let mut report = VerifyReport {
            checked: 9,
            v1: 3,
            covered_from: Some(4),
            keyed_from: Some(7),
            rows_checked: 2,
            rows_uncovered: 1,
            head: Some((9, "ab".into())),
            ..VerifyReport::default()
        };
        let top = "checked 9 chained event(s)\n\
                   checked 2 command row(s) against the chain (their caller, device, action, params, idempotency key, status, error code and verified; detail, hint, evidence, times, dispatched and readback_matched are not covered: the timeline's events record what they say)\n\
                   command rows covered from seq 4: the 3 event(s) before it were hashed without them (v1)\n\
                   1 command row(s) not covered: written before the cover started, or their timeline pruned\n\
                   keyed with the plant's journal_key from seq 7\n\
                   head seq 9 hash ab\n";
        assert_eq!(render(&report), format!("{top}intact\n"));
        report.broken = Some(BrokenLink {
            seq: 6,
            command_id: Some("c2".into()),
            kind: Break::RowChanged,
            detail: "field caller differs from what the chain recorded at seq 6".into(),
        });
        assert_eq!(
            render(&report),
            format!(
                "{top}BROKEN at seq 6 (command c2): command row changed: field caller differs from what the chain recorded at seq 6\n"
            )
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
