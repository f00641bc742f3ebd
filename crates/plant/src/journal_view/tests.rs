use super::*;

const PLANT: &str = r#"
[server]
journal = "sqlite://${env:JOURNAL_DIR}/j.db"
retain = "30d"

[[device]]
id = "slide"
max_rate = "60/h"
driver = { kind = "modbus-tcp", address = "${env:STEPDRIVE_ADDR}", unit = 1 }
[device.signals]
position = { holding = 0, type = "u16" }
[[device.action]]
name = "move_to"
description = "Move the slide to a position in mm."
params = { mm = { type = "integer", min = 0, max = 300 } }
write = [{ holding = 1, value = "params.mm" }]
done_when = "position == params.mm"
max_rate = "6/min"
max_burst = 2
"#;

fn write(dir: &Path, text: &str) -> PathBuf {
    let path = dir.join("plant.toml");
    std::fs::write(&path, text).unwrap();
    path
}

fn env(vars: &'static [(&'static str, &'static str)]) -> impl Fn(&str) -> Option<String> {
    move |k| {
        vars.iter()
            .find(|(n, _)| *n == k)
            .map(|(_, v)| v.to_string())
    }
}

/// A desk without the drivers' variables reads the journal all the same.
#[test]
fn an_unset_driver_variable_does_not_stop_a_journal_reader() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), PLANT);
    let view = load_journal_view(&path, &env(&[("JOURNAL_DIR", "/srv/plant")])).unwrap();
    assert_eq!(view.journal, "sqlite:///srv/plant/j.db");
    assert_eq!(view.retain, Some(Duration::from_secs(30 * 86_400)));
    // 60/h with its default burst of 60 looks back two hours; 6/min burst 2 forty seconds.
    assert_eq!(view.rate_horizon, Duration::from_secs(7200));
    let tools = [("slide".into(), "move_to".into(), "slide_move_to".into())];
    assert_eq!(view.tools, tools);
}

/// The same answers as the loaded plant's, when everything is set.
#[test]
fn the_view_of_a_loaded_plant_reads_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), PLANT);
    let vars = env(&[
        ("JOURNAL_DIR", "/srv/plant"),
        ("STEPDRIVE_ADDR", "10.0.0.5:502"),
    ]);
    let plant = crate::validate::run(PLANT, "plant.toml", dir.path(), &vars).unwrap();
    let mut of = JournalView::of(&plant);
    of.file = std::path::absolute(&path).unwrap();
    assert_eq!(load_journal_view(&path, &vars).unwrap(), of);
}

/// The horizon is the longest of every rate, an action's and its burst's included, as the
/// loaded plant computes it.
#[test]
fn the_rate_horizon_is_the_longest_of_every_rate_and_burst() {
    let dir = tempfile::tempdir().unwrap();
    let vars = env(&[("JOURNAL_DIR", "/srv"), ("STEPDRIVE_ADDR", "10.0.0.5:502")]);
    // The action's 1/h with a burst of 48 looks back 96 h, past the device's 60/h.
    let text = PLANT.replace(
        "max_rate = \"6/min\"\nmax_burst = 2",
        "max_rate = \"1/h\"\nmax_burst = 48",
    );
    let path = write(dir.path(), &text);
    let view = load_journal_view(&path, &vars).unwrap();
    assert_eq!(view.rate_horizon, Duration::from_secs(96 * 3600));
    let plant = crate::validate::run(&text, "plant.toml", dir.path(), &vars).unwrap();
    assert_eq!(JournalView::of(&plant).rate_horizon, view.rate_horizon);
    // A burst that is not a count is named, as the full loader names it.
    let path = write(
        dir.path(),
        &text.replace("max_burst = 48", "max_burst = \"48\""),
    );
    let errors = load_journal_view(&path, &vars).unwrap_err();
    assert_eq!(errors.0[0].key.as_deref(), Some("action.move_to.max_burst"));
}

/// A TOML file that declares neither a server nor a device is not taken for a plant that
/// names the default journal.
#[test]
fn a_file_without_server_or_device_is_not_a_plant() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "title = \"notes\"\n");
    let text = load_journal_view(&path, &env(&[])).unwrap_err().to_string();
    assert!(text.contains("not a plant file"), "{text}");
}

/// A variable the journal's location needs is named with its key and the fix.
#[test]
fn an_unset_journal_variable_names_the_key_and_the_clients_env_block() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), PLANT);
    let errors = load_journal_view(&path, &env(&[])).unwrap_err();
    let text = errors.to_string();
    assert!(text.contains("key server.journal: the environment variable JOURNAL_DIR is not set"));
    assert!(
        text.contains(r#"config's "env" block: add "JOURNAL_DIR""#),
        "{text}"
    );
    assert_eq!(errors.len(), 1, "{text}");
}

/// A wrong key the view reads is reported as the full loader would; one it does not read is not.
#[test]
fn only_the_keys_read_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let text = PLANT
        .replace("\"6/min\"", "\"6 per minute\"")
        .replace("retain = \"30d\"", "retain = 30");
    let path = write(
        dir.path(),
        &(text + "\n[[device]]\nid = \"x\"\ndriver = 5\n"),
    );
    let vars = env(&[("JOURNAL_DIR", "/srv")]);
    let lines: Vec<String> = load_journal_view(&path, &vars)
        .unwrap_err()
        .iter()
        .map(|e| format!("{:?} {:?}", e.device, e.key))
        .collect();
    assert_eq!(
        lines,
        [
            "None Some(\"server.retain\")",
            "Some(\"slide\") Some(\"action.move_to.max_rate\")"
        ]
    );
}

/// With no `[server] journal`, the journal is the default file beside the plant.
#[test]
fn the_default_journal_sits_beside_the_plant_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = write(dir.path(), "[[device]]\nid = \"a\"\n");
    let view = load_journal_view(&path, &env(&[])).unwrap();
    let beside = dir.path().join("closedloop.db");
    assert_eq!(view.journal, format!("sqlite://{}", beside.display()));
    assert_eq!((view.retain, view.rate_horizon), (None, Duration::ZERO));
}

/// The variables a client's `env` block must pass: each once, in file order.
#[test]
fn env_variables_names_each_variable_once_in_file_order() {
    let names = crate::env_variables(&format!(
        "{PLANT}\n[[alarm]]\nwhen = \"${{env:JOURNAL_DIR}}\"\n"
    ));
    assert_eq!(names, ["JOURNAL_DIR", "STEPDRIVE_ADDR"]);
    assert!(crate::env_variables("not = [toml").is_empty());
}
