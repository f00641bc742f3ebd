//! The fixed word lists the lint rules judge by, kept in one place so that docs/plant-file.md
//! ("Linting") can quote them and a reader can see exactly what fires a rule.
//!
//! Every list is lower case. Lists compared with stemmed tokens ([`super::bm25::stem`]) are
//! stemmed when compared, so "moves", "moving" and "moved" all count as "move".

/// Imperative verbs an action name may start with (`switch`, `move_to`, `set_temperature`).
/// A tool name is read by a model as a command; `lamp_state` or `slide_target` reads as a
/// thing to look at, not an action to take.
pub const VERBS: &[&str] = &[
    "acknowledge",
    "activate",
    "align",
    "apply",
    "arm",
    "beep",
    "blink",
    "brake",
    "calibrate",
    "cancel",
    "capture",
    "charge",
    "clamp",
    "clean",
    "clear",
    "close",
    "cool",
    "cut",
    "cycle",
    "deactivate",
    "dim",
    "disable",
    "disarm",
    "dispense",
    "dock",
    "dose",
    "drain",
    "drive",
    "eject",
    "enable",
    "engage",
    "extend",
    "feed",
    "fill",
    "flash",
    "flush",
    "go",
    "grip",
    "heat",
    "hold",
    "home",
    "index",
    "inject",
    "jog",
    "latch",
    "lift",
    "light",
    "load",
    "lock",
    "lower",
    "measure",
    "mix",
    "move",
    "mute",
    "open",
    "park",
    "pause",
    "pick",
    "place",
    "play",
    "power",
    "press",
    "prime",
    "pulse",
    "pump",
    "purge",
    "raise",
    "ramp",
    "read",
    "reboot",
    "record",
    "release",
    "reset",
    "restart",
    "resume",
    "retract",
    "ring",
    "rotate",
    "run",
    "sample",
    "scan",
    "seal",
    "select",
    "send",
    "set",
    "shut",
    "silence",
    "sound",
    "spin",
    "start",
    "step",
    "stir",
    "stop",
    "switch",
    "take",
    "tare",
    "test",
    "tilt",
    "toggle",
    "trigger",
    "turn",
    "unclamp",
    "unlatch",
    "unload",
    "unlock",
    "unmute",
    "vent",
    "wash",
    "water",
    "write",
    "zero",
];

/// Words of a description that speak of the protocol rather than the plant. The model acts on
/// "the slide" and "the lamp"; a register number in its tool tells it nothing it can use, and
/// invites it to reason about addresses it cannot reach. Compared as whole words, unstemmed
/// (so "hold" is fine and "holding" is not). `0x…` hex numbers and OPC UA node ids (`ns=2;…`)
/// are recognised separately.
pub const JARGON: &[&str] = &[
    "coil",
    "coils",
    "dbc",
    "holding",
    "modbus",
    "nodeid",
    "register",
    "registers",
];

/// Two-word jargon, compared on the lower-cased text.
pub const JARGON_PHRASES: &[&str] = &["discrete input", "input register"];

/// Words that make an action a motion: its number parameters are targets a wrong value of
/// which crashes an axis, so they need `min` and `max`. Compared stemmed with the action's
/// name and description.
pub const MOTION: &[&str] = &[
    "move", "position", "travel", "rotate", "jog", "drive", "lift", "lower", "raise", "extend",
    "retract", "tilt", "pan", "spin", "speed", "velocity", "go", "goto", "home", "seek", "slew",
];

/// Units that make a number a motion target on their own: lengths, angles and speeds.
pub const MOTION_UNITS: &[&str] = &[
    "mm", "cm", "m", "um", "µm", "in", "inch", "ft", "deg", "°", "rad", "rev", "steps", "mm/s",
    "m/s", "cm/s", "in/s", "deg/s", "°/s", "rad/s", "rpm",
];

/// Words that say an action cannot be undone; such an action should ask a person first
/// (`confirm = true`). Compared stemmed with the action's name and description.
pub const DESTRUCTIVE: &[&str] = &[
    "erase",
    "delete",
    "wipe",
    "format",
    "purge",
    "discard",
    "destroy",
    "dump",
    "scrap",
    "overwrite",
    "shred",
    "irreversible",
    "permanently",
];

/// Phrases that say the same, compared on the lower-cased text.
pub const DESTRUCTIVE_PHRASES: &[&str] = &["cannot be undone", "can't be undone", "factory reset"];

/// Words too common to tell tools apart, left out of retrieval and similarity. Small on
/// purpose: "on", "off", "up" and "down" are kept, they are what a switch is about.
pub const STOP_WORDS: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "can", "could", "do", "does", "for", "from",
    "i", "if", "in", "is", "it", "its", "me", "my", "of", "or", "our", "please", "so", "that",
    "the", "then", "there", "this", "to", "us", "was", "we", "what", "when", "which", "will",
    "with", "would", "you", "your",
];
