//! `closedloop journal verify` at a terminal: whether the journal's hash chain still holds. It
//! only reads, through `journal_cmds::open`: read-only, nothing created or migrated.

use crate::journal_cmds;
use anyhow::Result;
use closedloop_journal::{Break, JournalKey, VerifyReport};
use closedloop_plant::JournalView;
use std::process::ExitCode;

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

#[cfg(test)]
mod tests {
    use super::*;
    use closedloop_journal::BrokenLink;

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
}
