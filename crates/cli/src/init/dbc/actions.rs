//! Actions from the messages a `--node` receives: one action per message, one parameter per
//! signal, and `done_when` only where a signal the node sends plainly mirrors a written one.

use super::meta::MessageMeta;
use super::model::{Generated, SignalOut, describe};
use crate::init::names::{fit, float, sentence, snake, stem, unique};
use closedloop_sim_server::can::{Message, Signal};

/// One generated `[[device.action]]`.
#[derive(Debug)]
pub struct ActionOut {
    /// The action's name (`set_` and the message's stem).
    pub name: String,
    /// For the tool description.
    pub description: String,
    /// The DBC message it writes.
    pub message: String,
    /// One parameter per signal.
    pub params: Vec<ParamOut>,
    /// DBC signal → parameter name, in message order.
    pub writes: Vec<(String, String)>,
    /// The completion check, when a sent signal mirrors a written one.
    pub done_when: Option<String>,
}

/// One generated parameter.
#[derive(Debug)]
pub struct ParamOut {
    /// The parameter's name.
    pub name: String,
    /// `bool`, `integer` or `number`.
    pub ty: &'static str,
    /// The range the field and the DBC's declared range both allow (numbers only).
    pub range: Option<(f64, f64)>,
    /// The DBC unit, if any.
    pub unit: Option<String>,
    /// The DBC comment and value table, if any.
    pub description: Option<String>,
    /// Why the range is not the DBC's declared one, for a comment line above the parameters.
    pub note: Option<String>,
}

/// Adds the action writing `m` to device `i`, or says why it is skipped.
pub fn add(g: &mut Generated, i: usize, m: &Message, mm: Option<&MessageMeta>) {
    if m.switch().is_some() {
        g.skipped.push(format!(
            "multiplexed message {}: each frame needs its switch value and only that group's signals; write the action by hand",
            m.name()
        ));
        return;
    }
    let d = &g.devices[i];
    // The tool name is `<device>_<action>`: the action's name gets what the device id leaves.
    let room = closedloop_plant::MAX_TOOL_NAME.saturating_sub(d.id.len() + 1);
    let taken = |n: &str| d.actions.iter().any(|a| a.name == n);
    let mut name = fit(&format!("set_{}", stem(m.name())), room);
    if taken(&name) {
        name = unique(&format!("send_{}", snake(m.name())), room, taken);
    }
    let mut params: Vec<ParamOut> = Vec::new();
    for s in m.signals() {
        let mut p = param(s, mm);
        p.name = unique(&p.name, usize::MAX, |n| params.iter().any(|q| q.name == n));
        params.push(p);
    }
    let writes = m
        .signals()
        .iter()
        .zip(&params)
        .map(|(s, p)| (s.name.clone(), p.name.clone()))
        .collect();
    let checks: Vec<String> = m
        .signals()
        .iter()
        .zip(&params)
        .filter_map(|(s, p)| mirror(s, p, &d.signals))
        .collect();
    let description = match mm.and_then(|mm| mm.comment.as_deref()) {
        Some(c) => format!(
            "{} Sent to the {} as CAN message {}.",
            sentence(c),
            d.id,
            m.name()
        ),
        None => format!("Send the {} command to the {}.", m.name(), d.id),
    };
    let done_when = (!checks.is_empty()).then(|| checks.join(" && "));
    match &done_when {
        None => g.needs_person.push(format!(
            "{}: no status signal mirrors it: verification none (the result is sent, never confirmed); add done_when if a signal shows its effect",
            m.name()
        )),
        Some(_) if checks.len() < params.len() => g.needs_person.push(format!(
            "{}: done_when checks {} of its {} signals; check that it confirms the effect",
            m.name(),
            checks.len(),
            params.len()
        )),
        Some(_) => {}
    }
    g.devices[i].actions.push(ActionOut {
        name,
        description,
        message: m.name().to_string(),
        params,
        writes,
        done_when,
    });
}

/// The parameter for one written signal: bool for 1 bit, integer for whole scale and offset,
/// else number; the range is the declared one, within what the field holds, or the field's
/// when the declared one lies outside it; an integer's bounds are whole (min up, max down).
fn param(s: &Signal, mm: Option<&MessageMeta>) -> ParamOut {
    let sm = mm.and_then(|mm| mm.signals.get(&s.name));
    let whole = s.factor.fract() == 0.0 && s.offset.fract() == 0.0;
    let ty = match (s.length, whole) {
        (1, _) => "bool",
        (_, true) => "integer",
        _ => "number",
    };
    let whole = |(a, b): (f64, f64)| match ty {
        "integer" => (a.ceil(), b.floor()),
        _ => (a, b),
    };
    let field = whole(s.physical_range());
    let declared = s.min < s.max && !(s.min == 0.0 && s.max == 0.0);
    let overlap = (s.min.max(field.0), s.max.min(field.1));
    let within = whole(overlap);
    let (range, note) = match declared {
        true if within.0 <= within.1 => (within, None),
        true => (
            field,
            Some(format!(
                "the DBC's range [{}|{}] is outside what the field holds{}, so the field's range is used",
                float(s.min),
                float(s.max),
                match overlap.0 <= overlap.1 {
                    true => " as whole numbers",
                    false => "",
                }
            )),
        ),
        false => (field, None),
    };
    ParamOut {
        name: snake(&s.name),
        ty,
        range: (ty != "bool" && range.0 <= range.1).then_some(range),
        unit: (!s.unit.is_empty()).then(|| s.unit.clone()),
        description: sm.and_then(|sm| describe(sm.comment.as_deref(), &sm.values)),
        note: (ty != "bool").then_some(note).flatten(),
    }
}

/// The check for one written signal, when a sent signal has its name (or its name without a
/// command or status word): equality for bools, within the coarser resolution for numbers.
fn mirror(s: &Signal, p: &ParamOut, sent: &[SignalOut]) -> Option<String> {
    let t = sent
        .iter()
        .find(|t| t.signal == s.name)
        .or_else(|| sent.iter().find(|t| stem(&t.signal) == stem(&s.name)))?;
    match (p.ty, t.bool) {
        ("bool", true) => Some(format!("{} == params.{}", t.name, p.name)),
        ("bool", false) | (_, true) => None,
        _ => Some(format!(
            "abs({} - params.{}) <= {}",
            t.name,
            p.name,
            float(t.factor.abs().max(s.factor.abs()))
        )),
    }
}
