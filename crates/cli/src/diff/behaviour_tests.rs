//! The behaviour rules beyond expressions, one edit of [`super::tests::BASE`] at a time: each
//! yields exactly one line with its key and class (and both directions where they differ).

use super::behaviour::{self, Class, Recorded};
use super::tests::{BASE, plant};

/// `(place, key, class)` of comparing `old` with `old` after each `(from, to)` replacement.
fn shifts_from(old: &str, edits: &[(&str, &str)]) -> Vec<(String, String, Class)> {
    let mut new = old.to_string();
    for (from, to) in edits {
        assert!(new.contains(from), "{from:?} is not in the plant");
        new = new.replacen(from, to, 1);
    }
    behaviour::compare(&plant(old), &plant(&new), &Recorded::new())
        .into_iter()
        .map(|s| (s.place, s.key, s.class))
        .collect()
}

fn shifts(edits: &[(&str, &str)]) -> Vec<(String, String, Class)> {
    shifts_from(BASE, edits)
}

fn one(place: &str, key: &str, class: Class) -> Vec<(String, String, Class)> {
    vec![(place.into(), key.into(), class)]
}

const MOVE: &str = "stopped_when = \"!moving\"";

#[test]
fn the_same_plant_has_no_behaviour_change() {
    assert_eq!(shifts(&[]), vec![]);
}

#[test]
fn waiting_longer_is_looser_and_shorter_stricter() {
    let key = |k: &str| one("slide.move_to", k, Class::Looser);
    let factor = format!("{MOVE}\ntimeout_factor = 4.0");
    assert_eq!(shifts(&[(MOVE, &factor)]), key("timeout_factor"));
    assert_eq!(
        shifts(&[("expect_s = 3.0", "expect_s = 6.0")]),
        key("expect_s")
    );
    let shorter = shifts(&[("expect_s = 3.0", "expect_s = 1.0")]);
    assert_eq!(shorter, one("slide.move_to", "expect_s", Class::Stricter));
    let hold = format!("{MOVE}\nhold_ms = 500");
    assert_eq!(
        shifts(&[(MOVE, &hold)]),
        one("slide.move_to", "hold_ms", Class::Stricter)
    );
}

#[test]
fn queueing_idempotence_and_a_new_group_are_named() {
    let queue = format!("{MOVE}\nqueue = false");
    assert_eq!(
        shifts(&[(MOVE, &queue)]),
        one("slide.move_to", "queue", Class::Stricter)
    );
    let group = format!("{MOVE}\nexclusive = \"axes\"");
    assert_eq!(
        shifts(&[(MOVE, &group)]),
        one("slide.move_to", "exclusive", Class::Changed)
    );
    let not_idem = [("idempotent = true\n", "")];
    assert_eq!(
        shifts(&not_idem),
        one("lamp.switch", "idempotent", Class::Stricter)
    );
}

#[test]
fn a_dead_man_a_confirmation_and_a_checklist_are_stricter_and_removing_them_looser() {
    let keep = format!("{MOVE}\nkeepalive_s = 5.0");
    assert_eq!(
        shifts(&[(MOVE, &keep)]),
        one("slide.move_to", "keepalive_s", Class::Stricter)
    );
    let with = BASE.replacen(MOVE, &keep, 1);
    assert_eq!(
        shifts_from(&with, &[(&keep, MOVE)]),
        one("slide.move_to", "keepalive_s", Class::Looser)
    );
    let confirm = format!("{MOVE}\nconfirm = true\nchecklist = [\"the guard is closed\"]");
    let got = shifts(&[(MOVE, &confirm)]);
    let expected = [("confirm", Class::Stricter), ("checklist", Class::Stricter)]
        .map(|(k, c)| ("slide.move_to".to_string(), k.to_string(), c));
    assert_eq!(got, expected);
}

#[test]
fn a_cancel_entry_removed_is_looser_and_a_write_address_changed() {
    let cancel = [(
        "cancel = [{ coil = 1, value = \"true\" }]\nstopped_when = \"!moving\"\n",
        "",
    )];
    let got = shifts(&cancel);
    let expected = [
        ("stopped_when", Class::Looser),
        ("cancel[0]", Class::Looser),
    ]
    .map(|(k, c)| ("slide.move_to".to_string(), k.to_string(), c));
    assert_eq!(got, expected);
    let address = [(
        "{ holding = 0, type = \"i32\"",
        "{ holding = 4, type = \"i32\"",
    )];
    assert_eq!(
        shifts(&address),
        one("slide.move_to", "write[0]", Class::Changed)
    );
}

#[test]
fn liveness_and_polling_are_named_on_the_device() {
    let silence = [(
        "id = \"slide\"\n",
        "id = \"slide\"\nliveness = { max_silence_s = 30.0 }\n",
    )];
    assert_eq!(
        shifts(&silence),
        one("slide", "liveness.max_silence_s", Class::Looser)
    );
    let unit = [("scale = 0.01, unit = \"mm\"", "scale = 0.01, unit = \"in\"")];
    assert_eq!(
        shifts(&unit),
        one("slide", "signal position_mm unit", Class::Changed)
    );
}

const JOURNAL: &str = "[server]\njournal = \"sqlite::memory:\"\n";
const TOKEN: &str = "\n[[server.token]]\nname = \"agent\"\nsha256 = \"0000000000000000000000000000000000000000000000000000000000000000\"\nscopes = [\"read\"]\n";

#[test]
fn a_token_given_more_scopes_is_looser_and_a_removed_one_stricter() {
    let base = BASE.replacen(JOURNAL, &format!("{JOURNAL}{TOKEN}"), 1);
    let wider = [(
        "scopes = [\"read\"]",
        "scopes = [\"read\", \"actuate:lamp\"]",
    )];
    assert_eq!(
        shifts_from(&base, &wider),
        one("(server)", "token agent", Class::Looser)
    );
    let gone = shifts_from(&base, &[(TOKEN, "")]);
    assert_eq!(gone, one("(server)", "token agent", Class::Stricter));
}

const ALARM: &str = "\n[[alarm]]\nname = \"JAMMED\"\nwhen = \"devices.slide.position_mm > 250.0\"\nblocks = [\"lamp\"]\ndescription = \"Too far.\"\n";

#[test]
fn an_alarm_raised_later_or_cleared_sooner_is_looser() {
    let base = format!("{BASE}{ALARM}");
    let later = [("> 250.0\"", "> 280.0\"")];
    assert_eq!(
        shifts_from(&base, &later),
        one("alarm JAMMED", "when", Class::Looser)
    );
    let hysteresis = [(
        "> 250.0\"",
        "> 250.0\"\nclear_when = \"devices.slide.position_mm < 200.0\"",
    )];
    let got = shifts_from(&base, &hysteresis);
    assert_eq!(got, one("alarm JAMMED", "clear_when", Class::Stricter));
    let slower = [("blocks = [\"lamp\"]", "blocks = [\"lamp\"]\nfor_ms = 500")];
    assert_eq!(
        shifts_from(&base, &slower),
        one("alarm JAMMED", "for_ms", Class::Looser)
    );
    let more = [("blocks = [\"lamp\"]", "blocks = [\"lamp\", \"slide\"]")];
    assert_eq!(
        shifts_from(&base, &more),
        one("alarm JAMMED", "blocks", Class::Stricter)
    );
    let removed = shifts_from(&base, &[(ALARM, "")]);
    assert_eq!(removed, one("alarm JAMMED", "alarm", Class::Looser));
}

#[test]
fn another_journal_is_named_and_confirmers_compared_as_sets() {
    let moved = [(JOURNAL, "[server]\njournal = \"sqlite://other.db\"\n")];
    assert_eq!(shifts(&moved), one("(server)", "journal", Class::Changed));
    let token = |name: &str, scope: &str| {
        let hash = "1".repeat(64);
        format!(
            "\n[[server.token]]\nname = \"{name}\"\nsha256 = \"{hash}\"\nscopes = [\"{scope}\"]\n"
        )
    };
    let tokens = [
        ("agent", "actuate:*"),
        ("operator", "read"),
        ("lead", "read"),
    ]
    .map(|(n, s)| token(n, s))
    .concat();
    let by = |names: &str| format!("{JOURNAL}confirm_by = [{names}]\n{tokens}");
    let (one_name, two_names) = (by("\"operator\""), by("\"operator\", \"lead\""));
    let base = BASE.replacen(JOURNAL, &one_name, 1);
    let got = shifts_from(&base, &[(one_name.as_str(), two_names.as_str())]);
    assert_eq!(got, one("(server)", "confirm_by", Class::Looser));
}

#[test]
fn a_rate_written_another_way_is_changed_and_a_faster_one_with_a_smaller_burst_too() {
    let rated = BASE.replacen(MOVE, &format!("{MOVE}\nmax_rate = \"60/min\""), 1);
    let same = shifts_from(&rated, &[("60/min", "60/minute")]);
    assert_eq!(same, one("slide.move_to", "max_rate", Class::Changed));
    let mixed = shifts_from(&rated, &[("60/min\"", "120/min\"\nmax_burst = 10")]);
    assert_eq!(mixed, one("slide.move_to", "max_rate", Class::Changed));
    let slower = shifts_from(&rated, &[("60/min", "30/min")]);
    assert_eq!(slower, one("slide.move_to", "max_rate", Class::Stricter));
}

#[test]
fn a_reader_made_an_actor_is_looser() {
    let base = BASE.replacen(JOURNAL, &format!("{JOURNAL}{TOKEN}"), 1);
    let actor = [("scopes = [\"read\"]", "scopes = [\"actuate:lamp\"]")];
    assert_eq!(
        shifts_from(&base, &actor),
        one("(server)", "token agent", Class::Looser)
    );
}
