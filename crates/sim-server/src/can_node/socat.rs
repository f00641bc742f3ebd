//! The pty a simulated bus is reached through, made by socat.
//!
//! `socat -d -d pty,raw,echo=0 -` creates a pseudo-terminal and relays it to its own stdin and
//! stdout. The simulator keeps the pipes (the adapter's end: plain pipes, no tty settings to get
//! wrong) and announces the pty (the host's end), which a host opens as the serial port of an
//! slcan adapter. socat reports the pty's path on stderr (`PTY is /dev/pts/N`); it keeps
//! running when the host closes the pty, so a host may come and go.
//!
//! socat is killed when [`Socat`] is dropped, and exits by itself once its stdin closes (when
//! the simulator dies without dropping it).

use std::process::Stdio;
use std::time::Duration;

use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::{Child, ChildStderr, ChildStdin, ChildStdout, Command};

/// How long socat may take to report its pty.
pub(crate) const SOCAT_START: Duration = Duration::from_secs(5);

/// A running socat and the adapter's end of its pty.
#[derive(Debug)]
pub(crate) struct Socat {
    /// socat itself, killed on drop.
    pub(crate) child: Child,
    /// The host's end, as socat reported it (`/dev/pts/N`).
    pub(crate) pty: String,
    /// What the adapter writes reaches the host.
    pub(crate) to_host: ChildStdin,
    /// What the host writes.
    pub(crate) from_host: ChildStdout,
}

/// Starts socat and waits, at most [`SOCAT_START`], for the path of its pty. With `link`, socat
/// also makes that path a symbolic link to the pty, so a plant file can name a path that stays
/// the same from one run to the next. The error is a sentence for the person running
/// `closedloop sim`.
pub(crate) async fn spawn(link: Option<&std::path::Path>) -> Result<Socat, String> {
    if let Some(l) = link
        && std::fs::symlink_metadata(l).is_ok_and(|m| m.file_type().is_symlink())
    {
        // A link left by an earlier run (socat does not always remove it): replace it.
        let _ = std::fs::remove_file(l);
    }
    let mut child = start(link)?;
    let (Some(to_host), Some(from_host), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err("socat started without the pipes asked for".into());
    };
    let mut lines = BufReader::new(stderr).lines();
    let pty = read_pty(&mut lines).await?;
    if let Some(l) = link {
        wait_for_link(l).await?;
    }
    // Keep reading stderr so socat never blocks on a full pipe; it says little after starting.
    tokio::spawn(async move {
        while let Ok(Some(line)) = lines.next_line().await {
            tracing::debug!("socat: {line}");
        }
    });
    Ok(Socat {
        child,
        pty,
        to_host,
        from_host,
    })
}

/// Runs socat with all three pipes, making a pty (linked at `link`, if given).
fn start(link: Option<&std::path::Path>) -> Result<Child, String> {
    let pty = match link {
        Some(l) => format!("pty,raw,echo=0,link={}", l.display()),
        None => "pty,raw,echo=0".to_string(),
    };
    Command::new("socat")
        .args(["-d", "-d", pty.as_str(), "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        // Its own process group: a Ctrl-C meant for `closedloop sim` must not take the bus away
        // before the simulator stops (the simulator kills it; its stdin closing ends it too).
        .process_group(0)
        .spawn()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => "socat is not installed; a simulated CAN bus needs it \
                                             to make its pty: install it (apt-get install socat, \
                                             brew install socat)"
                .to_string(),
            _ => format!("cannot start socat: {e}"),
        })
}

/// Reads socat's stderr, at most [`SOCAT_START`], until it reports its pty; returns the pty's
/// path, or what socat said instead.
async fn read_pty(lines: &mut Lines<BufReader<ChildStderr>>) -> Result<String, String> {
    let mut said = Vec::new();
    let found = tokio::time::timeout(SOCAT_START, async {
        while let Ok(Some(line)) = lines.next_line().await {
            if let Some(path) = line.split("PTY is ").nth(1) {
                return Some(path.trim().to_string());
            }
            said.push(line);
        }
        None
    })
    .await;
    match found {
        Ok(Some(pty)) => Ok(pty),
        Ok(None) => Err(format!(
            "socat exited without making a pty: {}",
            said.join(" / ")
        )),
        Err(_) => Err(format!(
            "socat did not report a pty within {} s",
            SOCAT_START.as_secs()
        )),
    }
}

/// Waits, at most [`SOCAT_START`], for `link` to exist: socat may report the pty a moment before
/// it makes the link.
async fn wait_for_link(link: &std::path::Path) -> Result<(), String> {
    let deadline = tokio::time::Instant::now() + SOCAT_START;
    while std::fs::symlink_metadata(link).is_err() {
        if tokio::time::Instant::now() > deadline {
            return Err(format!("socat did not make the link {}", link.display()));
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    Ok(())
}
