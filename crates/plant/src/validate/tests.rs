//! The check of a file read one `[[device]]` at a time gives the report of the same file parsed
//! whole ([`super::whole`]): the same plant, or the same problems in the same order.

use super::{Ctx, document, run, whole};
use std::path::Path;

/// What a check gave, as text to compare: the plant's tool surface, or every problem.
fn outcome(r: Result<crate::Plant, crate::PlantErrors>) -> String {
    match r {
        Ok(plant) => format!("ok\n{}", crate::render_surface(&plant)),
        Err(errors) => format!("errors\n{errors}"),
    }
}

/// Only `SET` is set.
fn lookup(name: &str) -> Option<String> {
    (name == "SET").then(|| "42".to_string())
}

/// Both ways of reading `src`, as [`outcome`]s.
fn both(src: &str) -> (String, String) {
    let base = Path::new("/srv/plants");
    let by_pieces = outcome(run(src, "hall.toml", base, &lookup));
    let ctx = Ctx::new("hall.toml", base, &lookup);
    (by_pieces, outcome(whole(&ctx, src)))
}

const HALL: &str = r#"
[server]
name = "hall"

[[server.token]]
name = "ops"
sha256 = "0000000000000000000000000000000000000000000000000000000000000000"
scopes = ["read", "actuate:lamp", "actuate:fan"]

[[device]]
id = "lamp"
driver = { kind = "sim", model = "relay" }
[device.signals]
contact = { discrete_input = 0 }
[[device.action]]
name = "switch"
params = { on = { type = "bool" } }
write = [{ coil = 0, value = "params.on" }]
done_when = "contact == params.on"
expect_s = 0.02

[[alarm]]
name = "LAMP_ON"
when = "devices.lamp.contact"
blocks = ["fan"]
description = "The lamp is on."

[[device]]
id = "fan"
description = "A fan."
driver = { kind = "sim", model = "relay" }
[device.signals]
contact = { discrete_input = 0 }
[[device.action]]
name = "switch"
params = { on = { type = "bool" } }
write = [{ coil = 0, value = "params.on" }]
done_when = "contact == params.on"
expect_s = 0.02
"#;

/// `HALL` with each `(from, to)` replaced once.
fn edit(edits: &[(&str, &str)]) -> String {
    let mut src = HALL.to_string();
    for (from, to) in edits {
        assert!(src.contains(from), "{from:?} is not in the hall");
        src = src.replacen(from, to, 1);
    }
    src
}

#[test]
fn a_hall_checked_piece_by_piece_reports_what_the_whole_text_reports() {
    let unset = |s: &str| format!("\"${{env:{s}}}\"");
    let cases = [
        edit(&[]),
        // Unset variables under every top-level key, with keys sorting before `alarm`, between
        // `device` and `server`, and after it, and problems of every section after them.
        edit(&[
            (
                "\n[server]\nname = \"hall\"",
                &format!(
                    "aa = {}\nzz = {}\nfoo = {}\nother = 1\n[server]\nname = {}",
                    unset("AA"),
                    unset("Z"),
                    unset("F"),
                    unset("S")
                ),
            ),
            (
                "description = \"A fan.\"",
                &format!("description = {}", unset("D")),
            ),
            (
                "description = \"The lamp is on.\"",
                &format!("description = {}", unset("A")),
            ),
            (
                "kind = \"sim\", model = \"relay\" }",
                &format!("kind = \"sim\", model = {} }}", unset("M")),
            ),
            ("\"actuate:fan\"", "\"actuate:fna\""),
            (
                "done_when = \"contact == params.on\"",
                "done_when = \"contact == params.of\"",
            ),
            ("blocks = [\"fan\"]", "blocks = [\"fun\"]"),
        ]),
        // A device without an id, an id given twice, an unknown key, a variable that is set.
        edit(&[(
            "id = \"fan\"",
            "id = \"lamp\"\nspeed = 3\npoll_ms = \"${env:SET}\"",
        )]),
        edit(&[("id = \"fan\"\n", &format!("poll_ms = {}\n", unset("P")))]),
        // No device at all (only alarms), and a device that is not a table.
        "[[alarm]]\nname = \"X\"\nwhen = \"true\"\n".to_string(),
        "[server]\nname = \"x\"\ndevice = 3\n".to_string(),
        // A piece only the whole text reads, after devices with problems of their own.
        edit(&[("expect_s = 0.02\n\n[[alarm]]", "expect_s = -1\n\n[[alarm]]")])
            + "\n[server.limits]\nx = 1\n",
        edit(&[("id = \"fan\"", "id = \"fan\"\nid = \"again\"")]),
    ];
    for (i, src) in cases.iter().enumerate() {
        let (by_pieces, by_whole) = both(src);
        assert_eq!(by_pieces, by_whole, "case {i}:\n{src}");
    }
    // The hall and its variants with problems are read piece by piece (the last two need
    // the whole text).
    for src in &cases[..4] {
        let (_, texts) = document::head_and_pieces(src).expect("read in pieces");
        assert!(texts.iter().all(|t| document::piece(t).is_some()));
    }
    the_report_is_in_the_order_of_the_steps(&cases[1]);
}

/// Read one device at a time, `src`'s report is still in the order of the steps run over the
/// whole file: unset variables (by top-level key, as the TOML table orders them), unknown
/// top-level keys, `[server]`, then the devices, the alarms and the actions.
fn the_report_is_in_the_order_of_the_steps(src: &str) {
    let errors = run(src, "hall.toml", Path::new("/srv"), &lookup).unwrap_err();
    let places: Vec<String> = errors
        .iter()
        .map(|e| {
            format!(
                "{} {}",
                e.device.as_deref().unwrap_or("-"),
                e.key.as_deref().unwrap_or("")
            )
        })
        .collect();
    let expected = [
        "- aa",
        "- alarm[0].description",
        "lamp driver.model",
        "fan description",
        "- foo",
        "- server.name",
        "- zz",
        "- other",
        "- server.token[0].scopes[2]",
        "- alarm[0].blocks",
        "lamp action.switch.done_when",
    ];
    assert_eq!(places, expected, "{errors}");
}

#[test]
fn every_plant_in_the_repository_is_checked_piece_by_piece_as_it_is_whole() {
    for (path, src) in crate::repository_plants::all() {
        let (by_pieces, by_whole) = both(&src);
        assert_eq!(by_pieces, by_whole, "{}", path.display());
    }
}

/// Each problem of `src` as `device key: message`.
fn problems(src: &str) -> Vec<String> {
    let errors = run(src, "p.toml", Path::new("/srv"), &lookup).unwrap_err();
    errors
        .iter()
        .map(|e| {
            let device = e.device.as_deref().unwrap_or("-");
            format!("{device} {}: {}", e.key.as_deref().unwrap_or(""), e.message)
        })
        .collect()
}

/// The report of the whole-file loader, for a plant of alarms only whose alarm reads an unset
/// variable: the variable counts as a problem before "no device" is considered.
#[test]
fn an_unset_variable_in_an_alarm_is_reported_before_a_missing_device_would_be() {
    let src = "[[alarm]]\nname = \"X\"\nwhen = \"${env:UNSET}\"\n";
    assert_eq!(
        problems(src),
        [
            "- alarm[0].when: the environment variable UNSET is not set; set it before starting \
             closedloop (an MCP client passes only the variables in its config's \"env\" \
             block: add \"UNSET\": \"…\" there), or write the value in the file",
            "- alarm[0].blocks: an alarm blocks devices: write blocks = [\"<device id>\", …]",
        ]
    );
}

/// The report of the whole-file loader: a key muted for its unset variable in a later device
/// of the same id silences that key in an earlier one, read before the mute was known.
#[test]
fn a_key_muted_by_a_later_device_of_the_same_id_is_silent_in_an_earlier_one() {
    let device = "[[device]]\nid = \"a\"\ndriver = { kind = \"sim\", model = \"relay\" }\n";
    let src = format!("{device}poll_ms = 0\n{device}poll_ms = \"${{env:P}}\"\n");
    assert_eq!(
        problems(&src),
        [
            "a poll_ms: the environment variable P is not set; set it before starting \
             closedloop (an MCP client passes only the variables in its config's \"env\" \
             block: add \"P\": \"…\" there), or write the value in the file",
            "a id: the device id \"a\" is used twice; give each device its own id",
        ]
    );
}
