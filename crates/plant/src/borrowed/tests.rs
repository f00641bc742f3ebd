use super::typed;
use crate::model::{RawAction, RawServer, RawSignal, RawWrite};
use serde::de::DeserializeOwned;
use std::fmt::Debug;
use toml::Value;

/// Types `value` both ways and requires the same result, and a result whenever toml has one.
fn same<T: DeserializeOwned + Debug>(value: &Value, what: &str) -> usize {
    let owned = value.clone().try_into::<T>();
    let borrowed = typed::<T>(value);
    match (&owned, &borrowed) {
        (Ok(o), Some(b)) => assert_eq!(format!("{o:?}"), format!("{b:?}"), "{what}"),
        (Ok(o), None) => panic!("{what}: toml typed it ({o:?}), the borrowed reader did not"),
        (Err(_), Some(b)) => panic!("{what}: toml refused it, the borrowed reader typed {b:?}"),
        (Err(_), None) => {}
    }
    1
}

/// Every server, signal, action and write entry of `doc`, typed both ways; how many.
fn every_piece(doc: &toml::Table, file: &str) -> usize {
    let mut n = 0;
    if let Some(server) = doc.get("server") {
        n += same::<RawServer>(server, &format!("{file}: [server]"));
    }
    let devices = doc.get("device").and_then(Value::as_array);
    for device in devices.into_iter().flatten() {
        let id = device.get("id").and_then(Value::as_str).unwrap_or("?");
        let signals = device.get("signals").and_then(Value::as_table);
        for (name, signal) in signals.into_iter().flatten() {
            n += same::<RawSignal>(signal, &format!("{file}: {id} signal {name}"));
        }
        let actions = device.get("action").and_then(Value::as_array);
        for action in actions.into_iter().flatten() {
            n += same::<RawAction>(action, &format!("{file}: {id} action"));
            for plan in ["write", "cancel"] {
                let entries = action.get(plan).and_then(Value::as_array);
                for entry in entries.into_iter().flatten() {
                    n += same::<RawWrite>(entry, &format!("{file}: {id} {plan} {entry:?}"));
                }
            }
        }
    }
    n
}

#[test]
fn every_piece_of_every_plant_in_the_repository_is_typed_as_toml_types_it() {
    let mut pieces = 0;
    for (path, src) in crate::repository_plants::all() {
        let doc: toml::Table = src.parse().unwrap();
        pieces += every_piece(&doc, &path.display().to_string());
    }
    assert!(pieces > 100, "only {pieces} pieces were typed");
}

#[test]
fn a_piece_with_a_mistake_is_left_to_toml() {
    let doc: toml::Table = r#"
        [[device]]
        id = "a"
        [device.signals]
        fine = { coil = 0 }
        typo = { coyl = 0 }
        wrong_type = { coil = "zero" }
        [[device.action]]
        name = "go"
        expect_s = "soon"
        write = [{ coil = 0, value = true, extra = 1 }, { coil = 70000, value = "true" }]
    "#
    .parse()
    .unwrap();
    assert_eq!(every_piece(&doc, "mistakes"), 6);
    let signals = doc["device"][0]["signals"].as_table().unwrap();
    assert!(typed::<RawSignal>(&signals["fine"]).is_some());
    assert!(typed::<RawSignal>(&signals["typo"]).is_none());
    assert!(typed::<RawSignal>(&signals["wrong_type"]).is_none());
}

#[test]
fn a_date_time_and_an_enum_written_as_a_table_are_left_to_toml() {
    let doc: toml::Table = "when = 1979-05-27T07:32:00Z\nverification = { feedback = 1 }"
        .parse()
        .unwrap();
    assert!(typed::<String>(&doc["when"]).is_none());
    assert!(typed::<crate::action::Verification>(&doc["verification"]).is_none());
    let ok: toml::Table = "verification = \"readback\"".parse().unwrap();
    let v = typed::<crate::action::Verification>(&ok["verification"]);
    assert_eq!(v, Some(crate::action::Verification::Readback));
}
