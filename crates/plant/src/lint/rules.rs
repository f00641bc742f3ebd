//! The rules that judge one device and its actions on their own (the pairwise one is in
//! `alike.rs`, the example ranking in `examples.rs`).

use super::bm25::stem;
use super::words::{
    DESTRUCTIVE, DESTRUCTIVE_PHRASES, JARGON, JARGON_PHRASES, MOTION, MOTION_UNITS, VERBS,
};
use super::{DESCRIPTION_MAX, DESCRIPTION_MIN, MAX_PARAMS, Rule, Sink, Warning};
use crate::action::Action;
use crate::params::{ParamSpec, ParamType};
use crate::plant::Device;

/// Runs every per-device rule on `device`: its own description, then each action in order.
pub(super) fn device(file: &str, device: &Device, out: &mut Vec<Warning>) {
    let mut sink = Sink::new(file, &device.id, out);
    if let Some(word) = jargon(&device.description) {
        sink.warn(
            "description".into(),
            Rule::Jargon,
            jargon_message(&word, "every tool of this device"),
        );
    }
    for action in &device.actions {
        self::action(&mut sink, action);
    }
}

/// The rules of one action, in the order of its keys.
fn action(sink: &mut Sink, a: &Action) {
    let key = format!("action.{}", a.name);
    verb(sink, &key, a);
    description_length(sink, &key, &a.description);
    if let Some(word) = jargon(&a.description) {
        let msg = jargon_message(&word, "the tool description");
        sink.warn(format!("{key}.description"), Rule::Jargon, msg);
    }
    if a.params.len() > MAX_PARAMS {
        sink.warn(format!("{key}.params"), Rule::TooManyParams, format!(
            "{} parameters, more than {MAX_PARAMS}: models fill long argument lists badly (a value left out or put in the wrong place); split the action, or fix the values that rarely change in the plant",
            a.params.len()
        ));
    }
    let motion = is_motion(a);
    for p in &a.params {
        param(sink, &key, p, motion);
    }
    destructive(sink, &key, a);
}

/// The action name's first word must be an imperative verb ([`VERBS`]).
fn verb(sink: &mut Sink, key: &str, a: &Action) {
    let first = a.name.split('_').next().unwrap_or_default();
    if !VERBS.contains(&first) {
        sink.warn(format!("{key}.name"), Rule::Verb, format!(
            "the tool name {} does not start with a verb (\"{first}\" is not in lint's list of verbs): a model reads the name as what the tool does; start the action name with one, like \"set_{}\", \"switch\" or \"move_to\" (docs/plant-file.md, Linting, lists the verbs)",
            a.tool_name, a.name
        ));
    }
}

/// An action description between [`DESCRIPTION_MIN`] and [`DESCRIPTION_MAX`] characters.
fn description_length(sink: &mut Sink, key: &str, description: &str) {
    let n = description.trim().chars().count();
    let message = if n == 0 {
        format!(
            "the action has no description: a model picks tools by their description; say in {DESCRIPTION_MIN} to {DESCRIPTION_MAX} characters what the action does, what it does not do and when it is refused"
        )
    } else if n < DESCRIPTION_MIN {
        format!(
            "the description has {n} characters, fewer than {DESCRIPTION_MIN}: too little for a model to choose by; say what the action does, what it does not do and when it is refused"
        )
    } else if n > DESCRIPTION_MAX {
        format!(
            "the description has {n} characters, more than {DESCRIPTION_MAX}: clients send every tool's description with every request, and a long one buries what sets this tool apart; keep that and move the rest to comments in the plant"
        )
    } else {
        return;
    };
    sink.warn(
        format!("{key}.description"),
        Rule::DescriptionLength,
        message,
    );
}

/// A parameter's own rules: jargon in its description, a unit for numbers, and bounds for
/// motion targets (a number of a motion action, or one measured in a motion unit).
fn param(sink: &mut Sink, key: &str, p: &ParamSpec, motion: bool) {
    let key = format!("{key}.params.{}", p.name);
    if let Some(word) = p.description.as_deref().and_then(jargon) {
        let msg = jargon_message(&word, "the parameter's description");
        sink.warn(format!("{key}.description"), Rule::Jargon, msg);
    }
    if !matches!(p.ty, ParamType::Number | ParamType::Integer) {
        return;
    }
    let unit = p.unit.as_deref().map(str::trim).unwrap_or_default();
    if unit.is_empty() {
        sink.warn(format!("{key}.unit"), Rule::Unit, format!(
            "{} is a number without a unit: a model cannot tell whether 150 means mm, steps or percent; add unit = \"mm\" (for a plain count, unit = \"count\")",
            p.name
        ));
    }
    let motion_unit = MOTION_UNITS.contains(&unit.to_lowercase().as_str());
    let missing = match (p.min, p.max) {
        (Some(_), Some(_)) => return,
        (None, None) => "min and max",
        (None, Some(_)) => "min",
        (Some(_), None) => "max",
    };
    if motion || motion_unit {
        sink.warn(key, Rule::MotionBounds, format!(
            "{} is a motion target without {missing}: a model sends any number the schema allows, and the axis goes there or crashes trying; add min and max (the travel limits)",
            p.name
        ));
    }
}

/// An action that says it cannot be undone should wait for a person: `confirm = true`.
/// Silent when `destructive = false` (the plant says it can be undone) or it confirms.
fn destructive(sink: &mut Sink, key: &str, a: &Action) {
    if !a.destructive || a.confirm {
        return;
    }
    let lower = a.description.to_lowercase();
    let phrase = DESTRUCTIVE_PHRASES.iter().find(|p| lower.contains(*p));
    let word = said(a, DESTRUCTIVE).or(phrase.map(|p| p.to_string()));
    if let Some(word) = word {
        sink.warn(format!("{key}.confirm"), Rule::Confirm, format!(
            "{} reads as an action that cannot be undone (\"{word}\") and runs on a model's word alone; add confirm = true so that a person agrees first (or destructive = false if it can be undone)",
            a.tool_name
        ));
    }
}

/// Whether the action moves something, judged by its name and description ([`MOTION`]).
fn is_motion(a: &Action) -> bool {
    said(a, MOTION).is_some()
}

/// The first word of the action's name or description that is, stemmed, one of `list`
/// (stemmed too), as written.
fn said(a: &Action, list: &[&str]) -> Option<String> {
    let stems: Vec<String> = list.iter().map(|w| stem(w)).collect();
    let name = a.name.replace('_', " ");
    [name.as_str(), a.description.as_str()]
        .into_iter()
        .flat_map(|text| text.split(|c: char| !c.is_alphanumeric()))
        .map(str::to_lowercase)
        .find(|w| !w.is_empty() && stems.contains(&stem(w)))
}

/// The first protocol word in `text`, if any: a word of [`JARGON`], a phrase of
/// [`JARGON_PHRASES`], a `0x` hex number or an OPC UA node id (`ns=2;…`).
pub(super) fn jargon(text: &str) -> Option<String> {
    let lower = text.to_lowercase();
    for word in lower.split(|c: char| !c.is_alphanumeric()) {
        let hex = word.len() > 2
            && word.starts_with("0x")
            && word[2..].chars().all(|c| c.is_ascii_hexdigit());
        if hex || JARGON.contains(&word) {
            return Some(word.to_string());
        }
    }
    let spaced = lower.split_whitespace().collect::<Vec<_>>().join(" ");
    if let Some(p) = JARGON_PHRASES.iter().find(|p| spaced.contains(*p)) {
        return Some(p.to_string());
    }
    let node = lower.match_indices("ns=").find(|(i, _)| {
        let before = lower[..*i].chars().next_back();
        let after = lower[i + 3..].chars().next();
        !before.is_some_and(char::is_alphanumeric) && after.is_some_and(|c| c.is_ascii_digit())
    });
    node.map(|_| "ns=".to_string())
}

fn jargon_message(word: &str, whose: &str) -> String {
    format!(
        "\"{word}\" is protocol jargon in {whose}: the model acts on the plant, not on its addresses, and cannot use them; say what it does in the plant's words (\"the driver's fault reset\", not \"coil 2\") and leave addresses to signals and write plans"
    )
}
