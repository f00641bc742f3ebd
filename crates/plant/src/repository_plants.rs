//! The plant files this repository holds (examples and test plants), for tests that hold a
//! piece of the loader to another way of doing the same on every real plant.

use std::path::PathBuf;

/// Every plant file of the repository, with its text; at least ten of them.
pub(crate) fn all() -> Vec<(PathBuf, String)> {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let mut plants = Vec::new();
    for dir in ["examples", "tests/plants", "crates/plant/tests/plants"] {
        for entry in std::fs::read_dir(format!("{root}/{dir}")).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|e| e == "toml") {
                let text = std::fs::read_to_string(&path).unwrap();
                plants.push((path, text));
            }
        }
    }
    assert!(
        plants.len() > 10,
        "only {} plant files were found",
        plants.len()
    );
    plants
}
