//! Each lint rule once firing and once silent, the warning's form, the `examples` key, and the
//! bundled plants (examples/*.toml) clean with every example ranked first.

use super::{Rule, Warning, examples, lint};
use crate::{Plant, parse};
use std::path::Path;

/// A relay device `id` with `description`, holding the given actions.
fn relay(id: &str, description: &str, actions: &[String]) -> String {
    format!(
        "[[device]]\nid = \"{id}\"\ndescription = \"{description}\"\ndriver = {{ kind = \"sim\", model = \"relay\" }}\n[device.signals]\ncontact = {{ discrete_input = 0 }}\n{}",
        actions.concat()
    )
}

/// An action writing coil 0, with `extra` keys (params, confirm, examples, …) as TOML lines.
fn action(name: &str, description: &str, extra: &str) -> String {
    format!(
        "[[device.action]]\nname = \"{name}\"\ndescription = \"{description}\"\n{extra}\nwrite = [{{ coil = 0, value = \"true\" }}]\ndone_when = \"contact\"\n"
    )
}

fn load(src: &str) -> Plant {
    match parse(src, "t.toml", Path::new("/srv")) {
        Ok(p) => p,
        Err(e) => panic!("{e}\n{src}"),
    }
}

/// The warnings of `rule` for a one-device plant with `actions`, as printed.
fn fired(rule: Rule, actions: &[String]) -> Vec<String> {
    let plant = load(&relay("lamp", "Desk lamp in the study", actions));
    of(rule, lint(&plant, "t.toml"))
}

fn of(rule: Rule, warnings: Vec<Warning>) -> Vec<String> {
    let w = warnings.into_iter().filter(|w| w.rule == rule);
    w.map(|w| w.to_string()).collect()
}

const GOOD: &str = "Turn the desk lamp on or off.";

#[test]
fn a_warning_displays_like_a_plant_error() {
    let w = fired(Rule::DescriptionLength, &[action("switch", "Switch.", "")]);
    assert_eq!(
        w,
        [
            "t.toml: device \"lamp\", key action.switch.description: the description has 7 characters, fewer than 20: too little for a model to choose by; say what the action does, what it does not do and when it is refused"
        ]
    );
}

#[test]
fn description_length() {
    let long = "Turn the lamp on. ".repeat(25);
    let w = fired(Rule::DescriptionLength, &[action("switch", &long, "")]);
    assert!(w[0].contains("449 characters, more than 400"), "{w:?}");
    let w = fired(Rule::DescriptionLength, &[action("switch", "", "")]);
    assert!(w[0].contains("has no description"), "{w:?}");
    assert!(fired(Rule::DescriptionLength, &[action("switch", GOOD, "")]).is_empty());
}

#[test]
fn jargon_in_descriptions_of_actions_params_and_devices() {
    for (text, word) in [
        ("Write coil 2 to clear the latched fault.", "coil"),
        ("Clear the fault by writing 0x1F to the drive.", "0x1f"),
        ("Call ns=2;s=Reset to clear the fault.", "ns="),
        ("Pulse the discrete  input of the drive.", "discrete input"),
        ("Clear the fault through the Modbus gateway.", "modbus"),
    ] {
        let w = fired(Rule::Jargon, &[action("reset", text, "")]);
        assert_eq!(w.len(), 1, "{text}: {w:?}");
        assert!(
            w[0].contains(&format!(
                "key action.reset.description: \"{word}\" is protocol jargon"
            )),
            "{w:?}"
        );
    }
    let param =
        "params = { on = { type = \"bool\", description = \"the holding register value\" } }";
    let w = fired(Rule::Jargon, &[action("switch", GOOD, param)]);
    assert!(
        w[0].contains("key action.switch.params.on.description: \"holding\""),
        "{w:?}"
    );
    let plant = load(&relay(
        "lamp",
        "Relay on coil 3",
        &[action("switch", GOOD, "")],
    ));
    let w = of(Rule::Jargon, lint(&plant, "t.toml"));
    assert!(
        w[0].contains("device \"lamp\", key description: \"coil\""),
        "{w:?}"
    );
    let quiet = "Hold the oven at its setpoint; the registered owner decides (ns = 2).";
    assert!(fired(Rule::Jargon, &[action("hold", quiet, "")]).is_empty());
}

#[test]
fn more_than_five_params() {
    let six = (0..6)
        .map(|i| format!("p{i} = {{ type = \"bool\" }}"))
        .collect::<Vec<_>>();
    let params = |n: usize| format!("params = {{ {} }}", six[..n].join(", "));
    let w = fired(Rule::TooManyParams, &[action("switch", GOOD, &params(6))]);
    assert_eq!(w.len(), 1);
    assert!(
        w[0].contains("key action.switch.params: 6 parameters, more than 5"),
        "{w:?}"
    );
    assert!(fired(Rule::TooManyParams, &[action("switch", GOOD, &params(5))]).is_empty());
}

#[test]
fn numbers_need_a_unit() {
    let bare = "params = { count = { type = \"integer\", min = 1, max = 5 } }";
    let w = fired(
        Rule::Unit,
        &[action("blink", "Blink the desk lamp a few times.", bare)],
    );
    assert_eq!(w.len(), 1);
    assert!(
        w[0].contains("key action.blink.params.count.unit: count is a number without a unit"),
        "{w:?}"
    );
    let with = "params = { count = { type = \"integer\", min = 1, max = 5, unit = \"count\" }, on = { type = \"bool\" } }";
    assert!(
        fired(
            Rule::Unit,
            &[action("blink", "Blink the desk lamp a few times.", with)]
        )
        .is_empty()
    );
}

#[test]
fn motion_targets_need_min_and_max() {
    let half = "params = { target_mm = { type = \"number\", min = 0.0, unit = \"mm\" } }";
    let w = fired(
        Rule::MotionBounds,
        &[action("move_to", "Move the slide to a position.", half)],
    );
    assert_eq!(w.len(), 1);
    assert!(
        w[0].contains(
            "key action.move_to.params.target_mm: target_mm is a motion target without max"
        ),
        "{w:?}"
    );
    // A motion unit makes a target of any action's number; a motion word of any number.
    let by_unit = "params = { depth = { type = \"number\", unit = \"mm\" } }";
    let w = fired(
        Rule::MotionBounds,
        &[action(
            "set_depth",
            "Set the cutting depth of the saw.",
            by_unit,
        )],
    );
    assert!(w[0].contains("without min and max"), "{w:?}");
    let by_word = "params = { rate = { type = \"number\", unit = \"%\" } }";
    assert_eq!(
        fired(
            Rule::MotionBounds,
            &[action("set_rate", "Set the conveyor speed.", by_word)]
        )
        .len(),
        1
    );
    let heat = "params = { setpoint_c = { type = \"number\", unit = \"°C\" } }";
    assert!(
        fired(
            Rule::MotionBounds,
            &[action("heat", "Heat the oven to a setpoint.", heat)]
        )
        .is_empty()
    );
    let bounded =
        "params = { target_mm = { type = \"number\", min = 0.0, max = 300.0, unit = \"mm\" } }";
    assert!(
        fired(
            Rule::MotionBounds,
            &[action("move_to", "Move the slide to a position.", bounded)]
        )
        .is_empty()
    );
}

#[test]
fn irreversible_actions_need_confirm() {
    let erase = "Erase the recorded log of the lamp.";
    let w = fired(Rule::Confirm, &[action("clear_log", erase, "")]);
    assert_eq!(
        w,
        [
            "t.toml: device \"lamp\", key action.clear_log.confirm: lamp_clear_log reads as an action that cannot be undone (\"erase\") and runs on a model's word alone; add confirm = true so that a person agrees first (or destructive = false if it can be undone)"
        ]
    );
    let phrase = "Restore the lamp's factory reset settings.";
    assert_eq!(
        fired(Rule::Confirm, &[action("restore", phrase, "")]).len(),
        1
    );
    assert!(
        fired(
            Rule::Confirm,
            &[action("clear_log", erase, "confirm = true")]
        )
        .is_empty()
    );
    assert!(
        fired(
            Rule::Confirm,
            &[action("clear_log", erase, "destructive = false")]
        )
        .is_empty()
    );
    assert!(fired(Rule::Confirm, &[action("switch", GOOD, "")]).is_empty());
}

#[test]
fn names_start_with_a_verb() {
    let w = fired(Rule::Verb, &[action("state", GOOD, "")]);
    assert_eq!(w.len(), 1);
    assert!(
        w[0].contains(
            "key action.state.name: the tool name lamp_state does not start with a verb (\"state\""
        ),
        "{w:?}"
    );
    assert!(
        fired(
            Rule::Verb,
            &[action("switch", GOOD, ""), action("set_state", GOOD, "")]
        )
        .is_empty()
    );
}

#[test]
fn tools_that_read_alike_unless_one_says_what_it_is_not_for() {
    let two = |floor: &str| {
        let a = relay("desk", "Desk lamp", &[action("switch", GOOD, "")]);
        let b = relay("floor", "Floor lamp", &[action("switch", floor, "")]);
        of(Rule::TooAlike, lint(&load(&format!("{a}{b}")), "t.toml"))
    };
    let w = two("Turn the floor lamp on or off.");
    assert_eq!(
        w,
        [
            "t.toml: device \"floor\", key action.switch.description: reads like the description of desk_switch (67% of their words are shared): a model may pick either; say what sets them apart, or add a sentence \"Not for …\" naming the other"
        ]
    );
    assert!(two("Turn the floor lamp on or off. Not for the desk lamp.").is_empty());
    assert!(two("Turn the extractor fan on or off.").is_empty());
}

#[test]
fn examples_rank_their_own_tool_first_or_are_reported() {
    let lamp = relay(
        "lamp",
        "Desk lamp",
        &[action(
            "switch",
            GOOD,
            "examples = [\"turn on the desk lamp\", \"switch the fan off\", \"do it\"]",
        )],
    );
    let fan = relay(
        "fan",
        "Extractor fan",
        &[action("switch", "Turn the extractor fan on or off.", "")],
    );
    let report = examples(&load(&format!("{lamp}{fan}")), "t.toml");
    assert_eq!((report.checked, report.first), (3, 1));
    let w: Vec<String> = report.warnings.iter().map(|w| w.to_string()).collect();
    assert_eq!(w.len(), 3, "{w:#?}");
    assert!(w[0].starts_with("t.toml: device \"lamp\", key action.switch.examples[1]: example \"switch the fan off\" for lamp_switch ranked 2nd: fan_switch scored higher ("), "{w:#?}");
    assert!(w[1].contains("examples[2]: example \"do it\" for lamp_switch ranked 2nd: fan_switch scored as high (0.00 against 0.00)"), "{w:#?}");
    assert_eq!(
        w[2],
        "t.toml: device \"fan\", key action.switch.examples: fan_switch has no examples: nothing checks that a request for it reaches it; add examples = [\"…\"] with two or three requests a person would make"
    );
    assert_eq!(report.warnings[2].rule, Rule::NoExamples);
}

#[test]
fn the_examples_key_takes_requests_in_words() {
    let plant = load(&relay(
        "lamp",
        "Desk lamp",
        &[action("switch", GOOD, "examples = [\"turn on the lamp\"]")],
    ));
    assert_eq!(plant.devices[0].actions[0].examples, ["turn on the lamp"]);
    assert!(
        load(&relay("lamp", "Desk lamp", &[action("switch", GOOD, "")])).devices[0].actions[0]
            .examples
            .is_empty()
    );
    let src = relay(
        "lamp",
        "Desk lamp",
        &[action("switch", GOOD, "examples = [\"ok lamp\", \" ?\"]")],
    );
    let e = parse(&src, "t.toml", Path::new("/srv")).unwrap_err();
    assert_eq!(
        e.to_string(),
        "t.toml: device \"lamp\", key action.switch.examples[1]: example \" ?\" has no words; write a request a person would make for this action, like \"turn on the desk lamp\", or remove it"
    );
    let src = relay(
        "lamp",
        "Desk lamp",
        &[action("switch", GOOD, "examples = [\"ok\", 3]")],
    );
    let e = parse(&src, "t.toml", Path::new("/srv")).unwrap_err();
    assert!(e.to_string().contains("action.switch.examples"), "{e}");
}

#[test]
fn the_bundled_plants_are_clean_and_rank_every_example_first() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let (mut plants, mut problems) = (0, Vec::new());
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "toml") {
            continue;
        }
        plants += 1;
        let plant = crate::load(&path).unwrap_or_else(|e| panic!("{e}"));
        let label = path.display().to_string();
        let report = examples(&plant, &label);
        let warnings = lint(&plant, &label).into_iter().chain(report.warnings);
        problems.extend(warnings.map(|w| w.to_string()));
        let actions: usize = plant.devices.iter().map(|d| d.actions.len()).sum();
        assert!(
            report.checked >= 2 * actions,
            "{label}: fewer than two examples an action"
        );
    }
    assert!(problems.is_empty(), "{problems:#?}");
    assert!(plants >= 5, "{plants} plants in {}", dir.display());
}

#[test]
fn the_docs_list_every_word_and_threshold_the_rules_use() {
    use super::words::*;
    let page = include_str!("../../../../docs/plant-file.md");
    let section = &page[page.find("## 16. Linting").expect("a Linting section")..];
    let lists = [
        VERBS,
        JARGON,
        JARGON_PHRASES,
        MOTION,
        MOTION_UNITS,
        DESTRUCTIVE,
    ];
    let lists = lists.into_iter().chain([DESTRUCTIVE_PHRASES, STOP_WORDS]);
    for word in lists.flatten() {
        assert!(
            section.contains(&format!("`{word}`")),
            "docs: `{word}` missing"
        );
    }
    for threshold in [
        "**20**",
        "**400**",
        "**5**",
        "**50 %**",
        "k1 = 1.2, b = 0.75",
    ] {
        assert!(section.contains(threshold), "docs: {threshold} missing");
    }
    assert_eq!(
        (
            super::DESCRIPTION_MIN,
            super::DESCRIPTION_MAX,
            super::MAX_PARAMS,
            super::ALIKE
        ),
        (20, 400, 5, 0.5)
    );
    assert_eq!((super::bm25::K1, super::bm25::B), (1.2, 0.75));
}
