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

/// BASE with the lamp's and the slide's actions in one exclusive group, and a third device in a
/// group of its own; `lamp_gw` and `slide_gw` are their `gateways` lines ("" for none).
fn cell_plant(lamp_gw: &str, slide_gw: &str) -> String {
    let src = edit("id = \"lamp\"", &format!("id = \"lamp\"\n{lamp_gw}"))
        .replacen("id = \"slide\"", &format!("id = \"slide\"\n{slide_gw}"), 1)
        .replacen(
            "expect_s = 0.02",
            "expect_s = 0.02\nexclusive = \"bench\"",
            1,
        )
        .replacen(
            "stopped_when = \"!moving\"",
            "stopped_when = \"!moving\"\nexclusive = \"bench\"",
            1,
        );
    src + r#"
[[device]]
id = "fan"
driver = { kind = "sim", model = "relay" }
[device.signals]
contact = { discrete_input = 0 }
"#
}

#[test]
fn devices_joined_by_an_exclusive_group_form_one_cell_placed_by_its_first_device() {
    let plant = parsed(&cell_plant(
        "gateways = [\"a\", \"b\"]",
        "gateways = [\"b\", \"c\"]",
    ));
    let cells = plant.cells();
    let bench = cells.cell("slide").unwrap();
    assert_eq!(bench.key, "lamp");
    assert_eq!(bench.devices, ["lamp", "slide"]);
    assert_eq!(bench.gateways, ["b"]);
    assert!(!bench.disjoint);
    assert_eq!(cells.cell("lamp"), Some(bench));
    let fan = cells.cell("fan").unwrap();
    assert_eq!((fan.key.as_str(), fan.devices.len()), ("fan", 1));
    assert!(fan.gateways.is_empty(), "no list: any gateway");
    assert_eq!(cells.iter().count(), 2);
}

#[test]
fn a_cell_whose_gateways_lists_share_no_gateway_is_refused() {
    let e = expect_one(
        &cell_plant("gateways = [\"a\"]", "gateways = [\"b\"]"),
        Some("lamp"),
        "gateways",
        "lamp shares an exclusive group with slide, and no gateway is on every one",
    );
    assert!(
        e.message.contains("list a gateway that reaches them all"),
        "{e}"
    );
    // One list alone constrains the cell without being disjoint.
    let plant = parsed(&cell_plant("", "gateways = [\"b\"]"));
    assert_eq!(plant.cells().cell("lamp").unwrap().gateways, ["b"]);
}
