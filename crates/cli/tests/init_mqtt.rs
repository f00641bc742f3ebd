//! `closedloop init --mqtt` through the binary against a Mosquitto of its own: discovery
//! configs published retained become a plant (printed, or written with `--out`) that passes
//! `check` and `lint`, and every
//! wrong turn gets a message naming it — an unreachable broker, a prefix with nothing under it,
//! a listening time that is not one, `--node` without `--dbc`, both sources at once. The
//! mapping of every component is tested in `src/init/ha_tests.rs`; devices shaped as ESPHome,
//! Tasmota and Zigbee2MQTT announce themselves and are switched through the generated plant in
//! `tests/python/test_init_mqtt.py`.

mod common;

use closedloop_mqtt::testing::{Mosquitto, publish_retained};
use common::{closedloop, init, stderr};

const RELAY: &str = r#"{"name":"Relay","stat_t":"desk/relay/state","cmd_t":"desk/relay/set","avty_t":"desk/status","dev":{"ids":"d1","name":"Desk board","mf":"espressif"}}"#;

#[tokio::test]
async fn retained_discovery_configs_become_a_plant_printed_or_written() {
    let broker = Mosquitto::start().await;
    let client = broker.client("publisher").await;
    publish_retained(&client, "homeassistant/switch/desk/relay/config", RELAY)
        .await
        .unwrap();
    publish_retained(
        &client,
        "homeassistant/switch/desk/broken/config",
        "{not json",
    )
    .await
    .unwrap();
    printed_the_relay_is_mapped_and_the_broken_config_skipped(&broker.url).await;

    // Written, it passes `check` and `lint`: its descriptions are worded for a model.
    let dir = tempfile::tempdir().unwrap();
    let fresh = dir.path().join("fresh.toml");
    let wrote = written_it_passes_check_and_lint(&broker.url, &fresh).await;
    let written = std::fs::read_to_string(&fresh).unwrap();
    init_and_check_agree_on_the_deadline(&fresh, &written, &wrote);
    // Without the promise, check warns — and so would init: the same pass.
    let silent = dir.path().join("silent.toml");
    std::fs::write(
        &silent,
        written.replace(", reports_after_command = true", ""),
    )
    .unwrap();
    let checked = closedloop().arg("check").arg(&silent).output().unwrap();
    assert!(checked.status.success());
    assert!(
        stderr(&checked).contains("shorter than desk_board's max_silence_s"),
        "{}",
        stderr(&checked)
    );

    an_existing_file_is_never_overwritten(&broker.url, &dir.path().join("plant.toml")).await;
}

/// `init --mqtt URL ARGS…` on a blocking thread, finished.
async fn init_mqtt(url: &str, args: &[&str]) -> std::process::Output {
    let mut all = vec!["--mqtt".to_string(), url.to_string()];
    all.extend(args.iter().map(|a| a.to_string()));
    tokio::task::spawn_blocking(move || {
        let all: Vec<&str> = all.iter().map(String::as_str).collect();
        init(&all)
    })
    .await
    .unwrap()
}

/// `--dry-run` prints the plant: the relay as a device, a signal and an action; the config that
/// is not JSON skipped, saying why.
async fn printed_the_relay_is_mapped_and_the_broken_config_skipped(url: &str) {
    let out = init_mqtt(url, &["--listen", "500ms", "--dry-run"]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    let text = String::from_utf8(out.stdout.clone()).unwrap();
    assert!(text.contains("id = \"desk_board\""), "{text}");
    assert!(
        text.contains(r#"relay = { topic = "desk/relay/state", true_values = ["ON"]"#),
        "{text}"
    );
    assert!(text.contains("name = \"switch_relay\""), "{text}");
    let err = stderr(&out);
    assert!(
        err.starts_with("printed the plant: 1 devices, 1 signals, 1 actions, 1 skipped"),
        "{err}"
    );
    assert!(
        err.contains("  skipped: homeassistant/switch/desk/broken/config: the payload is not JSON"),
        "{err}"
    );
}

/// `--out fresh` writes the plant, which passes `check` and `lint` without a warning: what init
/// said.
async fn written_it_passes_check_and_lint(
    url: &str,
    fresh: &std::path::Path,
) -> std::process::Output {
    let to = fresh.display().to_string();
    let wrote = init_mqtt(url, &["--listen", "300ms", "--out", &to]).await;
    assert!(wrote.status.success(), "{}", stderr(&wrote));
    for tool in ["check", "lint"] {
        let o = closedloop().arg(tool).arg(fresh).output().unwrap();
        assert!(o.status.success(), "{tool}: {}", stderr(&o));
    }
    let lint = closedloop().arg("lint").arg(fresh).output().unwrap();
    assert!(String::from_utf8_lossy(&lint.stdout).ends_with(": 0 warnings\n"));
    wrote
}

/// Its header and `check` agree: the board reports after every command, the file says so,
/// and neither init nor check warns about its deadline (issue 56).
fn init_and_check_agree_on_the_deadline(
    fresh: &std::path::Path,
    written: &str,
    wrote: &std::process::Output,
) {
    assert!(
        written.contains("reports_after_command = true"),
        "{written}"
    );
    assert!(written.contains("so `check` does not warn"), "{written}");
    let warned = |e: &str| {
        e.lines()
            .filter(|l| l.starts_with("warning:"))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    let checked = closedloop().arg("check").arg(fresh).output().unwrap();
    assert_eq!(
        warned(&stderr(&checked)),
        warned(&stderr(wrote)),
        "init and check differ"
    );
    assert!(
        !stderr(&checked).contains("max_silence_s"),
        "{}",
        stderr(&checked)
    );
}

/// `--out` onto an existing file is refused, and the file kept as it was.
async fn an_existing_file_is_never_overwritten(url: &str, plant: &std::path::Path) {
    std::fs::write(plant, "# mine\n").unwrap();
    let to = plant.display().to_string();
    let refused = init_mqtt(url, &["--listen", "300ms", "--out", &to]).await;
    assert_eq!(refused.status.code(), Some(1));
    assert!(stderr(&refused).contains("exists; pass --force to overwrite it"));
    assert_eq!(
        std::fs::read_to_string(plant).unwrap(),
        "# mine\n",
        "nothing lost"
    );
    let checked = closedloop().arg("check").arg(plant).output().unwrap();
    assert!(!checked.status.success(), "the placeholder is no plant");
}

#[tokio::test]
async fn a_broker_with_nothing_mappable_says_what_it_skipped() {
    let broker = Mosquitto::start().await;
    let client = broker.client("publisher").await;
    let hvac = r#"{"name":"HVAC","dev":{"ids":"h1","name":"Heat pump"}}"#;
    publish_retained(&client, "plain/climate/h1/hvac/config", hvac)
        .await
        .unwrap();
    let url = broker.url.clone();
    let out = tokio::task::spawn_blocking(move || {
        init(&["--mqtt", &url, "--prefix", "plain", "--listen", "300ms"])
    })
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out).trim(),
        format!(
            "{}: no discovered device has an entity closedloop init maps:\n  climate hvac (plain/climate/h1/hvac/config): closedloop init does not map the component climate\n  device Heat pump: none of its entities could be mapped",
            broker.url
        )
    );
}

#[tokio::test]
async fn a_prefix_with_no_configs_under_it_says_where_it_listened() {
    let broker = Mosquitto::start().await;
    let url = broker.url.clone();
    let out = tokio::task::spawn_blocking(move || {
        init(&[
            "--mqtt",
            &url,
            "--prefix",
            "nothing-here",
            "--listen",
            "300ms",
        ])
    })
    .await
    .unwrap();
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out).trim(),
        format!(
            "{}: no discovery messages under nothing-here/# within 0.3 s; check --prefix, or --listen longer",
            broker.url
        )
    );
}

#[test]
fn an_unreachable_broker_is_named_with_what_to_check() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("mqtt://{}", closed.local_addr().unwrap());
    drop(closed);
    let out = init(&["--mqtt", &url, "--listen", "1s"]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.starts_with(&format!(
            "{url}: could not connect (I/O: Connection refused"
        )),
        "{err}"
    );
    assert!(
        err.contains("check the URL, and --username with MQTT_PASSWORD, or --ca-file"),
        "{err}"
    );
}

#[test]
fn wrong_arguments_are_refused_before_anything_is_opened() {
    let listen = init(&["--mqtt", "mqtt://127.0.0.1:1", "--listen", "forever"]);
    assert_eq!(listen.status.code(), Some(2));
    assert!(
        stderr(&listen).contains("\"forever\" is not a listening time: write e.g. 5s, 500ms or 1m"),
        "{}",
        stderr(&listen)
    );
    let node = init(&["--mqtt", "mqtt://127.0.0.1:1", "--node", "Lamp"]);
    assert_eq!(node.status.code(), Some(2));
    assert!(
        stderr(&node).contains("the argument '--mqtt <URL>' cannot be used with '--node <NAME>'"),
        "{}",
        stderr(&node)
    );
    let both = init(&["--mqtt", "mqtt://127.0.0.1:1", "--dbc", "x.dbc"]);
    assert_eq!(both.status.code(), Some(2));
    assert!(
        stderr(&both).contains("cannot be used with"),
        "{}",
        stderr(&both)
    );
    let none = init(&[]);
    assert_eq!(none.status.code(), Some(2));
    assert!(
        stderr(&none).contains("--dbc <FILE>|--mqtt <URL>"),
        "{}",
        stderr(&none)
    );
}

/// Issue 56: two plants made from one broker once shared `closedloop-mqtt-127-0-0-1`, and their
/// gateways closed each other's connection every 100 ms. Each run writes its own id.
#[tokio::test]
async fn two_plants_from_one_broker_get_client_ids_that_do_not_collide() {
    let broker = Mosquitto::start().await;
    let client = broker.client("publisher").await;
    publish_retained(&client, "homeassistant/switch/desk/relay/config", RELAY)
        .await
        .unwrap();
    let mut ids = Vec::new();
    for _ in 0..2 {
        let url = broker.url.clone();
        let out = tokio::task::spawn_blocking(move || {
            init(&["--mqtt", &url, "--listen", "200ms", "--dry-run"])
        })
        .await
        .unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        let text = String::from_utf8(out.stdout).unwrap();
        let id = text
            .split("client_id = \"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .expect("a client_id")
            .to_string();
        let suffix = id.strip_prefix("closedloop-mqtt-127-0-0-1-").expect(&id);
        assert!(
            suffix.len() == 6 && suffix.bytes().all(|b| b.is_ascii_hexdigit()),
            "{id}"
        );
        ids.push(id);
    }
    assert_ne!(ids[0], ids[1]);
}
