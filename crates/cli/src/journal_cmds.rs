//! `closedloop commands` and `closedloop trace`: read a plant's journal for a person at a
//! terminal.

use anyhow::{Result, bail};
use closedloop_journal::{Journal, ListFilter};
use closedloop_plant::JournalView;
use std::process::ExitCode;

/// Opens the plant's journal to read it. These commands only read: the journal is opened
/// read-only (nothing created or migrated), a journal that does not exist yet is refused, and so
/// is an in-memory one, which only its serving process can see.
pub(crate) async fn open(plant: &JournalView) -> Result<Journal> {
    open_url(&plant.journal, &plant.file.display().to_string()).await
}

/// Opens the journal at `url` to read it, as [`open`] does; `named_by` (the plant file, or the
/// URL as given) is what an error names.
pub(crate) async fn open_url(url: &str, named_by: &str) -> Result<Journal> {
    if url.contains(":memory:") {
        bail!(
            "{named_by}: the journal is {url}, which lives only inside the serving process: nothing to read here"
        );
    }
    if let Some(path) = sqlite_path(url) {
        match path.try_exists() {
            Ok(true) => {}
            Ok(false) => bail!("no journal at {} yet: nothing has run", path.display()),
            Err(e) => bail!("{}", unreadable(&path, &e)),
        }
    }
    Ok(Journal::open_read_only(url).await?)
}

/// Why the journal file at `path` cannot even be looked at. A service instance's state directory
/// belongs to the service's own user (systemd's `DynamicUser=`), so an operator reads it as root.
fn unreadable(path: &std::path::Path, e: &std::io::Error) -> String {
    match e.kind() {
        std::io::ErrorKind::PermissionDenied => format!(
            "cannot look at the journal {}: {e}; a service's state directory belongs to the \
             service's user: run this command as root (sudo)",
            path.display()
        ),
        _ => format!("cannot look at the journal {}: {e}", path.display()),
    }
}

/// The file of a `sqlite://PATH` or `sqlite:PATH` URL (without `?options`).
fn sqlite_path(url: &str) -> Option<std::path::PathBuf> {
    let rest = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))?;
    let path = rest.split('?').next().unwrap_or(rest);
    (!path.is_empty()).then(|| std::path::PathBuf::from(path))
}

/// Prints one line per command, newest first.
pub async fn commands(
    plant: &JournalView,
    device: Option<String>,
    status: Option<String>,
    limit: u32,
) -> Result<ExitCode> {
    if let Some(s) = &status
        && closedloop_engine::Status::parse(s).is_none()
    {
        bail!(
            "--status {s:?} is not a status; use one of accepted, running, completed, failed, timeout, sent, cancelled, rejected"
        );
    }
    let journal = open(plant).await?;
    let rows = journal
        .list(&ListFilter {
            device,
            status,
            limit: limit.clamp(1, 10_000),
        })
        .await?;
    if rows.is_empty() {
        crate::shown::print("no commands");
    }
    for r in rows {
        crate::shown::print(&format!(
            "{}  {}  {:<10} {}.{} {}  {}{}",
            r.command_id,
            closedloop_engine::clock::rfc3339(r.accepted_at_ms),
            r.status,
            r.device,
            r.action,
            r.params,
            r.error_code.as_deref().unwrap_or(""),
            if r.verified { " verified" } else { "" },
        ));
    }
    Ok(ExitCode::SUCCESS)
}

/// Prints a command's timeline with the milliseconds between steps.
pub async fn trace(plant: &JournalView, command_id: &str) -> Result<ExitCode> {
    let journal = open(plant).await?;
    let Some(row) = journal.get(command_id).await? else {
        eprintln!("no command has id {command_id:?}; `closedloop commands PLANT` lists them");
        return Ok(ExitCode::from(1));
    };
    let events = journal.events(command_id).await?;
    crate::shown::print(&format!(
        "{} {}.{} {}",
        row.command_id, row.device, row.action, row.params
    ));
    crate::shown::print(&format!(
        "request {}  verification {}",
        row.request_id, row.verification
    ));
    let start = events
        .first()
        .map(|e| e.at_ms)
        .unwrap_or(row.accepted_at_ms);
    let mut prev = start;
    for e in &events {
        let data = if e.data.is_null() {
            String::new()
        } else {
            e.data.to_string()
        };
        crate::shown::print(&format!(
            "{}  +{:>6} ms  (Δ {:>5} ms)  {:<12} {}",
            closedloop_engine::clock::rfc3339(e.at_ms),
            e.at_ms - start,
            e.at_ms - prev,
            e.event,
            data
        ));
        prev = e.at_ms;
    }
    crate::shown::print(&format!(
        "status {}{}",
        row.status,
        if row.verified { " (verified)" } else { "" }
    ));
    if let Some(code) = &row.error_code {
        crate::shown::print(&format!(
            "error  {code}: {}",
            row.detail.as_deref().unwrap_or("")
        ));
    }
    if let Some(hint) = &row.hint {
        crate::shown::print(&format!("hint   {hint}"));
    }
    Ok(ExitCode::SUCCESS)
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_journal_it_may_not_look_at_is_not_said_to_be_missing_and_root_is_named() {
        let denied = std::io::Error::from(std::io::ErrorKind::PermissionDenied);
        let said = super::unreadable(
            std::path::Path::new("/var/lib/closedloop-workshop/journal.db"),
            &denied,
        );
        assert!(
            said.contains("/var/lib/closedloop-workshop/journal.db")
                && said.contains("as root (sudo)")
                && !said.contains("nothing has run"),
            "{said}"
        );
    }

    #[test]
    fn sqlite_paths_are_read_from_the_url() {
        assert_eq!(
            super::sqlite_path("sqlite:///srv/a.db?mode=rwc"),
            Some("/srv/a.db".into())
        );
        assert_eq!(
            super::sqlite_path("sqlite:/srv/a.db"),
            Some("/srv/a.db".into())
        );
        assert_eq!(super::sqlite_path("postgres://x"), None);
    }
}
