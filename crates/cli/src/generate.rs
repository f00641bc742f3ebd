//! `closedloop generate man|completions --out DIR`: the man pages and shell completions the
//! packages install, made from the same clap definition that parses the command line, so a
//! flag documented there is a flag the binary takes. Hidden from `--help`: packagers call it.

use anyhow::{Context, Result};
use clap_complete::Shell;
use std::path::Path;
use std::process::ExitCode;

/// What `generate` writes.
#[derive(Debug, Clone, Copy, clap::ValueEnum)]
pub enum What {
    /// `closedloop.1` and one page per subcommand (`closedloop-serve.1`, …).
    Man,
    /// bash, zsh and fish completion scripts.
    Completions,
}

/// Writes `what` for `cmd` into `out` and lists the files written.
pub fn run(what: What, out: &Path, cmd: clap::Command) -> Result<ExitCode> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let written = match what {
        What::Man => man(out, cmd)?,
        What::Completions => completions(out, cmd)?,
    };
    for file in written {
        println!("{}", file.display());
    }
    Ok(ExitCode::SUCCESS)
}

/// One page for the command and one for each visible subcommand, named as `man` finds them.
fn man(out: &Path, cmd: clap::Command) -> Result<Vec<std::path::PathBuf>> {
    let mut cmd = cmd;
    cmd.build();
    let mut pages = vec![(String::from("closedloop"), cmd.clone())];
    let shown = |s: &&clap::Command| !s.is_hide_set() && s.get_name() != "help";
    for sub in cmd.get_subcommands().filter(shown) {
        // clap names take `&'static str` without its `string` feature; the process ends soon.
        let name: &'static str = format!("closedloop-{}", sub.get_name()).leak();
        pages.push((name.to_string(), sub.clone().name(name)));
    }
    let mut written = Vec::new();
    for (name, page) in pages {
        let path = out.join(format!("{name}.1"));
        let mut text = Vec::new();
        clap_mangen::Man::new(page).render(&mut text)?;
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
        written.push(path);
    }
    Ok(written)
}

/// The completion scripts of the shells Debian packages them for.
fn completions(out: &Path, cmd: clap::Command) -> Result<Vec<std::path::PathBuf>> {
    let mut cmd = cmd;
    let mut written = Vec::new();
    for shell in [Shell::Bash, Shell::Zsh, Shell::Fish] {
        written.push(clap_complete::generate_to(
            shell,
            &mut cmd,
            "closedloop",
            out,
        )?);
    }
    Ok(written)
}
