//! A kept `tools/list` answer is byte for byte what serialising the answer writes, for every
//! shape rmcp gives a list, and a list that differs is never answered from another's bytes.

use super::*;
use rmcp::model::{NumberOrString, Tool};
use std::path::Path;

/// The workshop's tools, built as `serve` builds them.
fn workshop_tools() -> Vec<Tool> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let plant = closedloop_plant::load(&dir.join("workshop.toml")).expect("the workshop loads");
    crate::tools::build(&plant)
}

/// A `tools/list` answer shaped as rmcp's handler shapes it for `version`.
fn answer(tools: Vec<Tool>, version: &str, id: NumberOrString) -> TxJsonRpcMessage<RoleServer> {
    let mut result = ServerResult::ListToolsResult(ListToolsResult::with_all_items(tools));
    if version >= "2026-07-28" {
        result.fill_missing_cache_hints();
    } else {
        result.strip_result_type_for_legacy_peer();
        result.strip_non_object_output_for_legacy_peer();
    }
    TxJsonRpcMessage::<RoleServer>::response(result, id)
}

/// What writing `item` without the kept bytes gives.
fn serialised(item: &TxJsonRpcMessage<RoleServer>) -> String {
    let mut line = serde_json::to_vec(item).expect("serialised");
    line.push(b'\n');
    String::from_utf8(line).expect("UTF-8")
}

fn line(listings: &mut Listings, item: &TxJsonRpcMessage<RoleServer>) -> String {
    String::from_utf8(listings.line(item).expect("a line")).expect("UTF-8")
}

#[test]
fn a_kept_tools_list_is_written_as_serialising_it_writes_it() {
    let tools = workshop_tools();
    let mut listings = Listings::default();
    let ids = [
        NumberOrString::Number(7),
        NumberOrString::String("req \"7\"".into()),
    ];
    for version in ["2025-06-18", "2025-11-25", "2026-07-28"] {
        for id in &ids {
            let item = answer(tools.clone(), version, id.clone());
            assert_eq!(
                line(&mut listings, &item),
                serialised(&item),
                "{version} {id:?}"
            );
        }
    }
    assert_eq!(
        listings.kept(),
        2,
        "one list per protocol shape (2025's two are alike)"
    );
}

#[test]
fn a_list_that_differs_is_not_answered_from_a_kept_one() {
    let tools = workshop_tools();
    let mut listings = Listings::default();
    let first = answer(tools.clone(), "2025-06-18", NumberOrString::Number(1));
    line(&mut listings, &first);
    // Same schemas (the same `Arc`s), one description changed; then one tool fewer.
    let mut changed = tools.clone();
    changed[0].description = Some("another description".into());
    let second = answer(changed, "2025-06-18", NumberOrString::Number(2));
    let written = line(&mut listings, &second);
    assert_eq!(written, serialised(&second));
    assert!(written.contains("another description"), "{written}");
    let fewer = answer(tools[1..].to_vec(), "2025-06-18", NumberOrString::Number(3));
    assert_eq!(line(&mut listings, &fewer), serialised(&fewer));
}

#[test]
fn only_the_latest_few_lists_are_kept() {
    let tools = workshop_tools();
    let mut listings = Listings::default();
    for n in 0..MAX_LISTS + 2 {
        let item = answer(tools[n..].to_vec(), "2025-06-18", NumberOrString::Number(1));
        assert_eq!(line(&mut listings, &item), serialised(&item), "list {n}");
    }
    assert_eq!(listings.kept(), MAX_LISTS);
}

#[test]
fn a_list_bigger_than_the_bound_is_written_but_not_kept() {
    let mut tools = workshop_tools();
    tools[0].description = Some("x".repeat(MAX_BYTES).into());
    let mut listings = Listings::default();
    let item = answer(tools, "2025-06-18", NumberOrString::Number(1));
    assert_eq!(line(&mut listings, &item), serialised(&item));
    assert_eq!(
        listings.kept(),
        0,
        "a hall's list is not held for the session"
    );
}

#[test]
fn other_answers_are_serialised_as_they_are() {
    let mut listings = Listings::default();
    let item = crate::stdio::tests::big_answer(100, 3);
    assert_eq!(line(&mut listings, &item), serialised(&item));
    assert_eq!(listings.kept(), 0);
}
