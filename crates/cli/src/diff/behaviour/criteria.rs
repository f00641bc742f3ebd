//! An expression that changed, classed by trying both in the same states
//! ([`crate::diff::exprs`]): the line says which way it moved and shows a state where the two
//! disagree, or how many states were tried without finding one.

use super::{Class, Shift};
use crate::diff::exprs::{self, Found};
use closedloop_plant::Expr;

/// One expression's role: what it holding means, and whether holding in more states lets more
/// through (`done_when`: completes more) or less (`fail_when`: fails more).
pub(crate) struct Role<'a> {
    /// What holding means, as the line says it: `completed`, `failed MOTOR_STALL`, `allowed
    /// to start`, `raised`.
    pub holds: &'a str,
    /// Holding in more states is looser.
    pub more_is_looser: bool,
    /// What an absent expression means: `true` (always holds: `requires`, `started_when`) or
    /// `false` (never: `fail_when`, an alarm's `when`).
    pub absent_holds: bool,
}

/// The line for `key` when its expression differs between the files; `None` when both are
/// absent or written identically.
pub(crate) fn shift(
    place: &str,
    key: &str,
    (old, new): (Option<&Expr>, Option<&Expr>),
    role: &Role,
    cx: &exprs::Context,
) -> Option<Shift> {
    let text = |e: Option<&Expr>| e.map_or_else(|| "none".to_string(), |e| e.source().to_string());
    if text(old) == text(new) {
        return None;
    }
    let absent = Expr::compile(if role.absent_holds { "true" } else { "false" })
        .expect("a constant compiles");
    let found = exprs::compare(old.unwrap_or(&absent), new.unwrap_or(&absent), cx);
    let (meaning, class) = words(&found, role);
    Some(Shift::new(
        place,
        key,
        (text(old), text(new)),
        meaning,
        class,
    ))
}

/// The meaning and class of what the sampled states showed.
pub(crate) fn words(found: &Found, role: &Role) -> (String, Class) {
    let what = role.holds;
    match found {
        Found::NewHoldsMore(state) => (
            format!("{what} now where the old file was not, e.g. {state}"),
            Class::wider(role.more_is_looser),
        ),
        Found::OldHoldsMore(state) => (
            format!("no longer {what} where the old file was, e.g. {state}"),
            Class::wider(!role.more_is_looser),
        ),
        Found::Both(new, old) => (
            format!(
                "{what} now where the old file was not ({new}), and no longer where it was ({old})"
            ),
            Class::Changed,
        ),
        Found::NoDifference(0) => (
            "could not compare: no sampled state let both be evaluated".to_string(),
            Class::Changed,
        ),
        Found::NoDifference(n) => (
            format!("written differently; no difference found in {n} states"),
            Class::Changed,
        ),
    }
}
