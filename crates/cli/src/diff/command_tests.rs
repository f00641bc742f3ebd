//! `closedloop diff`'s rules for how a command runs and for the tools beside the plant's:
//! confirmation, tasks, keep-alive, descriptions, the built-in tools and the default wait, on
//! the base plant of [`super::tests`].

use super::Verdict::{self, Breaking, Compatible};
use super::tests::{BASE, diff, plant, row};
use super::{Change, compare};

#[test]
fn confirm_turned_on_breaks_and_turned_off_does_not() {
    let on = diff(&[("idempotent = true", "idempotent = true\nconfirm = true")]);
    assert_eq!(on.len(), 1, "{on:?}");
    assert_eq!((on[0].0.as_str(), on[0].2), ("lamp_switch", Breaking));
    assert!(on[0].1.starts_with("confirm turned on"), "{on:?}");
    let with_confirm = BASE.replacen("idempotent = true", "idempotent = true\nconfirm = true", 1);
    let off = compare(&plant(&with_confirm), &plant(BASE));
    assert_eq!(off.len(), 1, "{off:?}");
    assert_eq!(
        (off[0].tool.as_str(), off[0].verdict),
        ("lamp_switch", Compatible)
    );
}

#[test]
fn a_task_made_required_breaks_and_made_optional_does_not() {
    let required = diff(&[(
        "idempotent = true",
        "idempotent = true\ntask = \"required\"",
    )]);
    assert_eq!(
        required,
        [(
            "lamp_switch".to_string(),
            "task optional → required".to_string(),
            Breaking
        )]
    );
    let with_task = BASE.replacen(
        "idempotent = true",
        "idempotent = true\ntask = \"required\"",
        1,
    );
    let optional = compare(&plant(&with_task), &plant(BASE));
    assert_eq!(optional.len(), 1, "{optional:?}");
    assert_eq!(
        (optional[0].what.as_str(), optional[0].verdict),
        ("task required → optional", Compatible)
    );
}

#[test]
fn a_keepalive_added_or_shortened_breaks() {
    let stopped = "stopped_when = \"!moving\"";
    let k = |s: &str| BASE.replacen(stopped, &format!("{stopped}\nkeepalive_s = {s}"), 1);
    let rows = |a: &str, b: &str| -> Vec<(String, Verdict)> {
        compare(&plant(a), &plant(b))
            .into_iter()
            .filter(|c| c.tool == "slide_move_to")
            .map(|c| (c.what, c.verdict))
            .collect()
    };
    assert_eq!(
        rows(BASE, &k("2")),
        vec![(
            "keepalive_s 2 added: stops unless the caller keeps asking".into(),
            Breaking
        )]
    );
    assert_eq!(
        rows(&k("2"), &k("1")),
        vec![("keepalive_s 2 → 1 s".into(), Breaking)]
    );
    assert_eq!(
        rows(&k("1"), &k("2")),
        vec![("keepalive_s 1 → 2 s".into(), Compatible)]
    );
    assert_eq!(
        rows(&k("2"), BASE),
        vec![("keepalive_s 2 removed".into(), Compatible)]
    );
}

#[test]
fn a_changed_description_is_listed_as_compatible() {
    assert_eq!(
        diff(&[("Switch the lamp.", "Switch the desk lamp on or off.")]),
        vec![row("lamp_switch", "description changed", Compatible)]
    );
    assert_eq!(
        diff(&[("Linear slide\"", "Linear slide, 300 mm\"")]),
        vec![row("slide_move_to", "description changed", Compatible)]
    );
}

#[test]
fn builtin_tools_follow_the_plant() {
    // raw_access adds modbus_read and modbus_write; the tool mode swaps every action tool.
    assert_eq!(
        diff(&[("id = \"lamp\"", "id = \"lamp\"\nraw_access = true")]),
        vec![
            row("modbus_read", "added", Compatible),
            row("modbus_write", "added", Compatible)
        ]
    );
    let raw = |ids: &str| {
        let mut p = BASE.replacen("id = \"lamp\"", "id = \"lamp\"\nraw_access = true", 1);
        if ids.contains("slide") {
            p = p.replacen("id = \"slide\"", "id = \"slide\"\nraw_access = true", 1);
        }
        plant(&p)
    };
    let narrowed = compare(&raw("lamp slide"), &raw("lamp"));
    assert_eq!(
        narrowed,
        vec![
            Change::new(
                "modbus_read",
                "argument device: choice \"slide\" removed",
                Breaking
            ),
            Change::new(
                "modbus_write",
                "argument device: choice \"slide\" removed",
                Breaking
            ),
        ]
    );
    let generic = diff(&[("journal = ", "tools = \"generic\"\njournal = ")]);
    assert_eq!(
        generic,
        vec![
            row(
                "(plant)",
                "tools per_action → generic: actions run through run_action, not their own tools",
                Breaking
            ),
            row("run_action", "added", Compatible),
            row("describe_device", "added", Compatible),
        ]
    );
}

#[test]
fn the_default_wait_is_listed_as_compatible() {
    assert_eq!(
        diff(&[("journal = ", "default_wait_s = 0.5\njournal = ")]),
        vec![row("(plant)", "default wait_s 2 → 0.5 s", Compatible)]
    );
}
