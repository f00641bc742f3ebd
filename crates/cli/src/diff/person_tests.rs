//! `closedloop diff`'s rules for what a person answers: parameters asked of the person (`ask`)
//! and confirmation checklists (`checklist`), on the base plant of [`super::tests`].

use super::Verdict::{Breaking, Compatible};
use super::compare;
use super::tests::{BASE, diff, plant, row};

#[test]
fn asking_the_person_for_a_parameter_breaks_and_so_does_no_longer_asking() {
    let asked = "on = { type = \"bool\", ask = \"Switch it on?\" }";
    assert_eq!(
        diff(&[("on = { type = \"bool\" }", asked)]),
        vec![row(
            "lamp_switch",
            "parameter on: now asked of the person: a value passed is refused",
            Breaking
        )]
    );
    let mut old = BASE.replacen("on = { type = \"bool\" }", asked, 1);
    let back = compare(&plant(&old), &plant(BASE));
    assert_eq!(
        back[0].what,
        "parameter on: no longer asked of the person: callers must pass it"
    );
    assert_eq!(back[0].verdict, Breaking);
    let reworded = old.replacen("Switch it on?", "Light the lamp?", 1);
    let changed = compare(&plant(&old), &plant(&reworded));
    assert_eq!(
        changed[0].what,
        "parameter on: question to the person changed"
    );
    assert_eq!(changed[0].verdict, Compatible);
    old = BASE.replacen(
        "{ on = { type = \"bool\" } }",
        "{ on = { type = \"bool\" }, signer = { type = \"string\", ask = \"Who?\" } }",
        1,
    );
    let added = compare(&plant(BASE), &plant(&old));
    assert_eq!(added[0].what, "new parameter signer asked of the person");
    assert_eq!(added[0].verdict, Breaking);
    let removed = compare(&plant(&old), &plant(BASE));
    assert_eq!(
        removed[0].what,
        "parameter signer (asked of the person) removed"
    );
    assert_eq!(removed[0].verdict, Compatible);
}

#[test]
fn a_checklist_item_added_breaks_and_a_reworded_one_does_not() {
    let confirmed = "idempotent = true\n\n[[device]]\nid = \"slide\"";
    let with = |items: &str| {
        format!(
            "idempotent = true\nconfirm = true\nchecklist = [{items}]\n\n[[device]]\nid = \"slide\""
        )
    };
    let one = BASE.replacen(confirmed, &with("\"the lamp is wired\""), 1);
    let two = BASE.replacen(
        confirmed,
        &with("\"the lamp is wired\", \"the room is empty\""),
        1,
    );
    let reworded = BASE.replacen(confirmed, &with("\"the lamp is connected\""), 1);
    let added = compare(&plant(&one), &plant(&two));
    assert_eq!(added.len(), 1);
    assert_eq!(
        (added[0].what.as_str(), added[0].verdict),
        (
            "checklist 1 → 2 items: the confirmation asks other questions",
            Breaking
        )
    );
    let changed = compare(&plant(&one), &plant(&reworded));
    assert_eq!(
        (changed[0].what.as_str(), changed[0].verdict),
        ("checklist items reworded", Compatible)
    );
}
