//! The sentences of the findings: what the model has instead, what the entry would do, and
//! what to write.

use super::{Field, Sim};
use closedloop_contract::{Area, ValueType, WordOrder};

/// `coil 0 (the commanded coil state, read/write)` for every field of `area` (writable only
/// when `writes`), joined for a sentence.
fn listing(fields: &[Field], area: Area, writes: bool) -> Vec<String> {
    fields
        .iter()
        .filter(|f| f.area == area && (!writes || f.writable))
        .map(Field::describe)
        .collect()
}

/// The area's name in the plural, for sentences (`holding registers`).
fn plural(area: Area) -> &'static str {
    match area {
        Area::Coil => "coils",
        Area::DiscreteInput => "discrete inputs",
        Area::Holding => "holding registers",
        Area::Input => "input registers",
    }
}

/// `a`, `a and b`, `a, b and c`.
fn join(items: &[String]) -> String {
    match items {
        [] => String::new(),
        [one] => one.clone(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// The message for an address the model does not have in that area.
pub(super) fn missing(
    sim: &Sim,
    area: Area,
    address: u16,
    consequence: &str,
    hint: Option<&str>,
    writes: bool,
) -> String {
    if area == Area::DiscreteInput && address == 0 && sim.no_feedback {
        return no_contact(sim, consequence);
    }
    let here = listing(sim.fields, area, writes);
    let has = what_it_has(sim, area, address, &here, writes);
    let fix = missing_fix(sim, area, hint, &here, writes);
    format!("{has}. {}. {fix}", capitalise_first(consequence))
}

/// A relay declared `feedback = false` has no contact: the usual listing would not say why.
fn no_contact(sim: &Sim, consequence: &str) -> String {
    format!(
        "{} has no discrete input 0 with feedback = false: there is no contact to read, and \
         {consequence}. Set feedback = true if the relay has an auxiliary contact; otherwise \
         remove this signal and confirm nothing (verification = \"none\") or only the coil \
         (verification = \"readback\")",
        sim.name
    )
}

/// What the model has instead: the fields of that area (`here`), or every field when the area
/// has none.
fn what_it_has(sim: &Sim, area: Area, address: u16, here: &[String], writes: bool) -> String {
    let label = area.key().replace('_', " ");
    let writable = if writes { "writable " } else { "" };
    if here.is_empty() {
        let all: Vec<String> = sim
            .fields
            .iter()
            .filter(|f| !writes || f.writable)
            .map(Field::describe)
            .collect();
        format!(
            "{} has no {writable}{}; it has {}",
            sim.name,
            plural(area),
            join(&all)
        )
    } else {
        format!(
            "{} has no {label} {address}; its {writable}{}: {}",
            sim.name,
            plural(area),
            join(here)
        )
    }
}

/// The last sentence of [`missing`]: the 0-based address when the entry looks 1-based, else the
/// one field to use, else a pointer to the listing.
fn missing_fix(sim: &Sim, area: Area, hint: Option<&str>, here: &[String], writes: bool) -> String {
    match (hint, here) {
        (Some(h), _) => {
            let mut h = h.to_string();
            if let Some(c) = h.get_mut(0..1) {
                c.make_ascii_uppercase();
            }
            h
        }
        (None, [_]) => {
            let f = sim
                .fields
                .iter()
                .find(|f| f.area == area && (!writes || f.writable))
                .expect("one listed");
            format!("Write {} = {}", area.key(), f.start)
        }
        (None, []) => "Use one of those instead".to_string(),
        (None, _) => format!("Write one of those {}", plural(area)),
    }
}

/// `s` with its first character in upper case, to start a sentence with it.
fn capitalise_first(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}

/// A write to a field the model only reads.
pub(super) fn read_only(sim: &Sim, f: &Field) -> String {
    let writable = listing(sim.fields, f.area, true);
    let instead = if writable.is_empty() {
        match f.area {
            Area::Holding => "It has no writable holding register".to_string(),
            _ => String::new(),
        }
    } else {
        format!("Write {} instead", join(&writable))
    };
    format!(
        "{} of {} is {}: read-only. The simulator refuses the write (exception 2), so every \
         command fails REGISTER_INVALID. {instead}",
        f.span(),
        sim.name,
        f.what
    )
}

/// Alignment, width and byte order of a register value against the field it lands in.
/// Returns the key below the entry (`holding`, `type`, `word_order`, `byte_swap`) and the message.
pub(super) fn shape(
    sim: &Sim,
    f: &Field,
    area: Area,
    address: u16,
    encoding: &closedloop_contract::Encoding,
    writes: bool,
) -> Option<(String, String)> {
    if area.is_bit() {
        return None;
    }
    let verb = if writes { "write" } else { "read" };
    if address != f.start {
        return Some((
            area.key().to_string(),
            low_word(sim, f, area, address, verb),
        ));
    }
    let bit_read = !writes && (encoding.bit.is_some() || encoding.ty == ValueType::Bool);
    let width = if bit_read { 1 } else { encoding.ty.words() };
    if width != f.words() {
        let covers = width_covers(f, area, address, encoding.ty, width, verb);
        return Some(("type".into(), wrong_width(sim, f, &covers)));
    }
    if !bit_read && matches!(encoding.ty, ValueType::F32 | ValueType::F64) {
        return Some(("type".into(), float_for_integer(sim, f, encoding.ty)));
    }
    if f.words() > 1 && encoding.word_order == WordOrder::Little {
        return Some(("word_order".into(), little_word_order(sim, f)));
    }
    if encoding.byte_swap {
        return Some(("byte_swap".into(), byte_swapped(sim, f)));
    }
    None
}

/// An entry at the second word of a multi-word value: it would read or write half of it.
fn low_word(sim: &Sim, f: &Field, area: Area, address: u16, verb: &str) -> String {
    let whole = format!("{} = {}, type = \"{}\"", area.key(), f.start, f.ty);
    format!(
        "{} {address} is the low word of {} of {}, an {} {} over {} (high word first). \
         {} the whole value: {whole}",
        area.key(),
        f.what,
        sim.name,
        f.ty,
        f.units,
        f.span(),
        capitalise_first(verb)
    )
}

/// What an entry of `width` words at the field's start covers: too little, or past its end.
fn width_covers(
    f: &Field,
    area: Area,
    address: u16,
    ty: ValueType,
    width: u16,
    verb: &str,
) -> String {
    if width < f.words() {
        format!(
            "as type = \"{ty}\" this {verb} covers only {} {address}, the high word",
            area.key()
        )
    } else {
        format!(
            "as type = \"{ty}\" this {verb} covers {} {address}–{} and the model has nothing \
             after {} (exception 2)",
            area.key(),
            u32::from(address) + u32::from(width) - 1,
            f.span()
        )
    }
}

/// An entry whose type spans a different number of registers than the field; `covers` says
/// what it spans instead.
fn wrong_width(sim: &Sim, f: &Field, covers: &str) -> String {
    format!(
        "{} of {} is {}, an {} {} over {}; {covers}. Write type = \"{}\"",
        f.span(),
        sim.name,
        f.what,
        f.ty,
        f.units,
        match f.words() {
            1 => "one register",
            2 => "two registers",
            _ => "four registers",
        },
        f.ty
    )
}

/// A float type on an integer field of the same width.
fn float_for_integer(sim: &Sim, f: &Field, ty: ValueType) -> String {
    format!(
        "{} of {} is {}, an integer ({}), not a float; as type = \"{ty}\" its bits would be \
         misread. Write type = \"{}\" (and scale for the units)",
        f.span(),
        sim.name,
        f.what,
        f.ty,
        f.ty
    )
}

/// `word_order = "little"` on a value the simulator sends high word first.
fn little_word_order(sim: &Sim, f: &Field) -> String {
    format!(
        "{} of {} sends the high word first; word_order = \"little\" would swap its \
         halves. Remove word_order (the default \"big\" is right)",
        f.span(),
        sim.name
    )
}

/// `byte_swap = true` on a value the simulator does not byte-swap.
fn byte_swapped(sim: &Sim, f: &Field) -> String {
    format!(
        "{} of {} is not byte-swapped; byte_swap = true would garble it. Remove byte_swap",
        f.span(),
        sim.name
    )
}

/// A bool written to a holding register: it becomes 0 or 1 in the register's raw units.
pub(super) fn bool_into_register(sim: &Sim, f: &Field, value: &closedloop_plant::Expr) -> String {
    let coils = listing(sim.fields, Area::Coil, true);
    let coil_hint = if coils.is_empty() {
        String::new()
    } else {
        format!(
            "; to switch or trigger something write a coil: {}",
            join(&coils)
        )
    };
    format!(
        "value \"{}\" is a bool, and {} of {} is {} ({} {}): the bool would be written as \
         the number 0 or 1. Write a number in the register's units{coil_hint}",
        value.source(),
        f.span(),
        sim.name,
        f.what,
        f.ty,
        f.units
    )
}
