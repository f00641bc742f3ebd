//! `STATE_DIRECTORY` at an operator's shell. The packaged unit `closedloop@NAME` serves
//! `/etc/closedloop/NAME.toml` with `STATE_DIRECTORY=/var/lib/closedloop-NAME` (its
//! `StateDirectory=`), and its plant keeps the journal there:
//! `journal = "sqlite://${env:STATE_DIRECTORY}/journal.db"`. An operator running `check`, or a
//! command that reads the journal, on that file from a shell has no such variable: when it is
//! unset these commands take the value the unit gives the file's instance,
//! `/var/lib/closedloop-STEM`, and say so on stderr. `serve` never does: whatever starts it
//! (systemd, an MCP client) gives it its variables.

use std::cell::Cell;
use std::path::{Path, PathBuf};

/// The variable systemd sets to a unit's `StateDirectory=`.
pub(crate) const VAR: &str = "STATE_DIRECTORY";

/// Answers a variable's value, as `std::env::var` does.
type Lookup = Box<dyn Fn(&str) -> Option<String>>;

/// The environment `check` and the journal commands read a plant file with: the process's, and
/// for an unset `STATE_DIRECTORY` the state directory of the file's instance.
pub(crate) struct Env {
    process: Lookup,
    instance: Option<String>,
    state_dir: Option<PathBuf>,
    stood_in: Cell<bool>,
}

impl Env {
    /// The process environment, for the plant file at `plant`.
    pub(crate) fn of(plant: &Path) -> Env {
        Env::with(plant, Box::new(|k| std::env::var(k).ok()))
    }

    /// `process` answering for the environment (tests).
    pub(crate) fn with(plant: &Path, process: Lookup) -> Env {
        let instance = plant
            .file_stem()
            .and_then(|s| s.to_str())
            .filter(|s| !s.is_empty())
            .map(str::to_string);
        let state_dir = instance
            .as_ref()
            .map(|i| PathBuf::from(format!("/var/lib/closedloop-{i}")));
        Env {
            process,
            instance,
            state_dir,
            stood_in: Cell::new(false),
        }
    }

    /// The value of the variable `name`.
    pub(crate) fn get(&self, name: &str) -> Option<String> {
        let value = (self.process)(name);
        if value.is_some() || name != VAR {
            return value;
        }
        let dir = self.state_dir.as_ref()?;
        self.stood_in.set(true);
        Some(dir.display().to_string())
    }

    /// The state directory taken for an unset `STATE_DIRECTORY`, when the file needed it.
    pub(crate) fn stood_in(&self) -> Option<String> {
        let dir = self.state_dir.as_ref().filter(|_| self.stood_in.get())?;
        Some(dir.display().to_string())
    }

    /// What an operator is told when the file was read with the instance's state directory for
    /// an unset `STATE_DIRECTORY`; `None` when it was not.
    pub(crate) fn note(&self) -> Option<String> {
        if !self.stood_in.get() {
            return None;
        }
        let (instance, dir) = (self.instance.as_ref()?, self.state_dir.as_ref()?);
        Some(format!(
            "note: STATE_DIRECTORY is not set, so it was taken as {}, the state directory of the \
             service closedloop@{instance}; to use another, run with STATE_DIRECTORY=DIR",
            dir.display()
        ))
    }
}

/// [`load`] in the process environment with the instance's state directory for an unset
/// `STATE_DIRECTORY`, the note (if any) printed on stderr: for commands an operator runs on a
/// service's plant that never write to its journal (`check`, `lint`, `diff`).
pub(crate) fn load_noted(
    path: &Path,
) -> Result<closedloop_plant::Plant, closedloop_plant::PlantErrors> {
    let env = Env::of(path);
    let loaded = load(path, &env);
    if let Some(note) = env.note() {
        eprintln!("{note}");
    }
    loaded
}

/// Reads, parses and validates the plant file at `path` as `closedloop_plant::load` does, with
/// `${env:NAME}` answered by `env`.
pub(crate) fn load(
    path: &Path,
    env: &Env,
) -> Result<closedloop_plant::Plant, closedloop_plant::PlantErrors> {
    closedloop_plant::load_with_env(path, &|k| env.get(k))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unset(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn an_unset_state_directory_is_the_instance_state_directory_and_is_noted() {
        let env = Env::with(Path::new("/etc/closedloop/workshop.toml"), Box::new(unset));
        assert_eq!(env.note(), None, "nothing noted before it is asked for");
        assert_eq!(env.get("OTHER"), None);
        assert_eq!(env.note(), None, "only STATE_DIRECTORY stands in");
        assert_eq!(
            env.get("STATE_DIRECTORY").as_deref(),
            Some("/var/lib/closedloop-workshop")
        );
        let note = env.note().unwrap();
        assert!(
            note.contains("/var/lib/closedloop-workshop")
                && note.contains("closedloop@workshop")
                && note.contains("STATE_DIRECTORY=DIR"),
            "{note}"
        );
        assert!(!note.contains("MCP"), "{note}");
    }

    #[test]
    fn a_set_state_directory_is_used_as_it_is_without_a_note() {
        let env = Env::with(
            Path::new("/etc/closedloop/workshop.toml"),
            Box::new(|k| (k == "STATE_DIRECTORY").then(|| "/srv/state".to_string())),
        );
        assert_eq!(env.get("STATE_DIRECTORY").as_deref(), Some("/srv/state"));
        assert_eq!(env.note(), None);
    }
}
