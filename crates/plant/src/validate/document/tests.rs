use super::{parse, split};
use toml::Table;

/// The whole text parsed at once: what [`parse`] must always agree with.
fn whole(src: &str) -> Table {
    src.parse().expect("the test's text is valid TOML")
}

const TWO: &str = r#"
[server]
name = "two"

[[device]]
id = "a"  # the first
driver = { kind = "sim", model = "relay" }
[device.signals]
contact = { discrete_input = 0 }
[[device.action]]
name = "switch"

[[device]]
id = "b"
driver = { kind = "sim", model = "lamp" }
"#;

#[test]
fn a_plant_parsed_in_pieces_is_the_table_parsed_whole() {
    assert_eq!(split(TWO).len(), 3);
    assert_eq!(parse(TWO).unwrap(), whole(TWO));
}

#[test]
fn every_plant_in_the_repository_parses_in_pieces_as_it_does_whole() {
    for (path, src) in crate::repository_plants::all() {
        assert_eq!(parse(&src).unwrap(), whole(&src), "{}", path.display());
    }
}

#[test]
fn a_file_that_starts_with_a_device_is_split_before_it() {
    let src = "[[device]]\nid = \"a\"\n[[device]]\nid = \"b\"\n";
    assert_eq!(
        split(src),
        ["", "[[device]]\nid = \"a\"\n", "[[device]]\nid = \"b\"\n"]
    );
    assert_eq!(parse(src).unwrap(), whole(src));
}

#[test]
fn a_device_header_inside_a_multi_line_string_does_not_split_the_file() {
    let src = concat!(
        "[[device]]\nid = \"a\"\ndescription = \"\"\"\n[[device]]\nnot a header \\\"\"\"\n",
        "[[device]]  # still inside\n\"\"\"\nnote = '''\n[[device]]\n'''\n",
        "[[device]]\nid = \"b\"  # a \"quote\" in a comment: \"\"\"\n[[device]]\nid = \"c\"\n",
    );
    assert_eq!(split(src).len(), 4, "{:#?}", split(src));
    let table = parse(src).unwrap();
    assert_eq!(table, whole(src));
    assert_eq!(table["device"].as_array().unwrap().len(), 3);
}

#[test]
fn quotes_in_one_line_strings_open_no_multi_line_string() {
    let src = "[[device]]\nid = \"a\\\"\\\"\\\"\"\nnote = '\"\"\"'\n[[device]]\nid = \"b\"\n";
    assert_eq!(split(src).len(), 3);
    assert_eq!(parse(src).unwrap(), whole(src));
}

#[test]
fn alarms_and_devices_in_any_order_parse_as_they_do_whole() {
    let src = "[[alarm]]\nname = \"x\"\n[[device]]\nid = \"a\"\n[[alarm]]\nname = \"y\"\n\
               [[device]]\nid = \"b\"\n";
    assert_eq!(split(src).len(), 5);
    assert_eq!(parse(src).unwrap(), whole(src));
}

#[test]
fn a_table_after_the_devices_is_parsed_with_the_whole_text() {
    let src = "[[device]]\nid = \"a\"\n[server]\nname = \"late\"\n";
    assert_eq!(parse(src).unwrap(), whole(src));
    assert_eq!(parse(src).unwrap()["server"]["name"].as_str(), Some("late"));
}

#[test]
fn a_device_list_written_inline_keeps_the_whole_texts_error() {
    let src = "device = [{ id = \"a\" }]\n[[device]]\nid = \"b\"\n";
    let pieces = parse(src).unwrap_err();
    let whole = src.parse::<Table>().unwrap_err();
    assert_eq!(pieces.to_string(), whole.to_string());
}

#[test]
fn a_syntax_error_in_a_later_device_keeps_its_line_in_the_whole_text() {
    let src = "[[device]]\nid = \"a\"\n[[device]]\nid = \"b\"\npoll_ms = = 5\n";
    let err = parse(src).unwrap_err();
    let span = err.span().expect("the error has a place");
    assert_eq!(&src[..span.start].lines().count(), &5, "{err}");
    assert_eq!(
        err.to_string(),
        src.parse::<Table>().unwrap_err().to_string()
    );
}

#[test]
fn a_key_given_twice_in_one_device_is_the_whole_texts_error() {
    let src = "[[device]]\nid = \"a\"\n[[device]]\nid = \"b\"\nid = \"c\"\n";
    let err = parse(src).unwrap_err();
    assert_eq!(
        err.to_string(),
        src.parse::<Table>().unwrap_err().to_string()
    );
}

#[test]
fn text_that_is_not_ascii_is_scanned_without_splitting_a_character() {
    let src =
        "[[device]]\nid = \"ä\"\ndescription = \"\"\"Größe \\\n°C\"\"\"\n[[device]]\nid = 'ö'\n";
    assert_eq!(split(src).len(), 3);
    assert_eq!(parse(src).unwrap(), whole(src));
}
