//! The plant file parsed one `[[device]]` at a time (`closedloop_plant::parse_toml_in_pieces`,
//! what the loader runs) against `toml`'s parse of the whole text.
//!
//! Input: the file's text (non-UTF-8 input is read lossily).
//!
//! Property: both give the same table, or both refuse the text with the same error (message and
//! place): a split in the wrong place, such as inside a multi-line string, would give a table
//! the file does not say, or move a syntax error's line.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let pieces = closedloop_plant::parse_toml_in_pieces(&text);
    let whole = text.parse::<toml::Table>();
    match (pieces, whole) {
        (Ok(p), Ok(w)) => assert_eq!(p, w, "the pieces and the whole text differ"),
        (Err(p), Err(w)) => assert_eq!(p.to_string(), w.to_string()),
        (p, w) => panic!("pieces: {p:?}\nwhole: {w:?}"),
    }
});
