//! Records the git commit the binary is built from, for `closedloop --version`: a bug report
//! then names the exact code. `CLOSEDLOOP_COMMIT` set in the environment wins (a build from a
//! source archive, without `.git`); without either the commit reads `unknown`.

use std::path::Path;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=CLOSEDLOOP_COMMIT");
    let commit = std::env::var("CLOSEDLOOP_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(git_commit)
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=CLOSEDLOOP_COMMIT={commit}");
}

/// `HEAD`'s short hash; rebuilt when `HEAD` moves. (No `+dirty`: a build script runs again
/// only when what it watches changes, so an edit after it ran would go unnoticed.)
fn git_commit() -> Option<String> {
    let git = |args: &[&str]| {
        let out = Command::new("git").args(args).output().ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).trim().to_string())
    };
    let dir = git(&["rev-parse", "--absolute-git-dir"])?;
    let dir = Path::new(&dir);
    // In a worktree the branches and packed-refs live in the common directory.
    let common = git(&["rev-parse", "--path-format=absolute", "--git-common-dir"])
        .map_or_else(|| dir.to_path_buf(), std::path::PathBuf::from);
    // Only files that exist: cargo runs the script again on every build for a missing one.
    let branch = git(&["symbolic-ref", "-q", "HEAD"]);
    let watched = [dir.join("HEAD"), common.join("packed-refs")].into_iter();
    let refs = branch
        .into_iter()
        .flat_map(|b| [dir.join(&b), common.join(&b)]);
    for file in watched.chain(refs) {
        if file.exists() {
            println!("cargo:rerun-if-changed={}", file.display());
        }
    }
    git(&["rev-parse", "--short=12", "HEAD"])
}
