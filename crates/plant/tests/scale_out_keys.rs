//! The scale-out and telemetry keys: `[server] lease_s` (how long a device lease lasts when
//! several gateways share a PostgreSQL journal), a device's `gateways` (which instances may own
//! it) and `[server] otlp` (where trace spans go).

mod common;

use closedloop_plant::{Plant, parse_with_env};
use common::{BASE, edit, env, expect_one};
use std::path::Path;

fn parsed(src: &str) -> Plant {
    parse_with_env(src, "workshop.toml", Path::new("/srv"), &env).unwrap()
}

#[test]
fn lease_s_defaults_to_5_and_is_held_between_1_and_60_seconds() {
    let plant = parsed(BASE);
    assert_eq!(plant.server.lease_s, 5.0);
    assert!(plant.devices.iter().all(|d| d.gateways.is_empty()));
    for bad in ["0.5", "120"] {
        let e = expect_one(
            &edit(
                "name = \"workshop\"",
                &format!("name = \"workshop\"\nlease_s = {bad}"),
            ),
            None,
            "server.lease_s",
            "outside the allowed range 1 to 60 s",
        );
        assert!(
            e.message.contains("remove lease_s for the default 5"),
            "{e}"
        );
    }
}

#[test]
fn gateways_name_each_instance_once_and_none_empty() {
    let ok = edit(
        "id = \"lamp\"",
        "id = \"lamp\"\ngateways = [\"cell_a\", \"cell_b\"]",
    );
    let plant = parsed(&ok);
    assert_eq!(plant.device("lamp").unwrap().gateways, ["cell_a", "cell_b"]);
    expect_one(
        &edit(
            "id = \"lamp\"",
            "id = \"lamp\"\ngateways = [\"cell_a\", \"cell_a\"]",
        ),
        Some("lamp"),
        "gateways[1]",
        "gateway \"cell_a\" is listed twice",
    );
    expect_one(
        &edit("id = \"lamp\"", "id = \"lamp\"\ngateways = [\" \"]"),
        Some("lamp"),
        "gateways[0]",
        "an empty gateway name",
    );
}

#[test]
fn otlp_is_a_plain_http_collector_address() {
    assert_eq!(parsed(BASE).server.otlp, None);
    let with = |url: &str| {
        edit(
            "name = \"workshop\"",
            &format!("name = \"workshop\"\notlp = \"{url}\""),
        )
    };
    let plant = parsed(&with("http://collector.lan:4318/"));
    assert_eq!(
        plant.server.otlp.as_deref(),
        Some("http://collector.lan:4318")
    );
    expect_one(
        &with("https://collector.lan:4318"),
        None,
        "server.otlp",
        "plain HTTP only",
    );
    expect_one(&with("http://:4318"), None, "server.otlp", "give a host");
    expect_one(&with("http://c:99999"), None, "server.otlp", "give a host");
}
