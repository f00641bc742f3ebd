//! Cells: the devices that must be driven by one gateway when several share a journal. Actions
//! that name one `exclusive` group run one at a time — but only a gateway can hold a group, so
//! every device with an action in a group, and every device sharing another group with those
//! (transitively), forms one cell, and a cell's device leases go to one gateway together.
//!
//! A cell may be reached only by the gateways every one of its devices lists (`gateways`; a
//! device without the key is reachable by any). When those lists have no gateway in common the
//! group cannot be exclusive across gateways: the plant is refused at load (`validate`).

use crate::Device;
use std::collections::HashMap;

/// One cell: its devices (in file order) and the gateways that may drive all of them.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// The cell's first device in file order: the name its placement is hashed by, so a cell of
    /// one device is placed exactly as the device alone would be.
    pub key: String,
    /// Its devices, in file order.
    pub devices: Vec<String>,
    /// The gateways in every device's `gateways` list; empty when no device has one (any
    /// gateway), or when the lists have none in common ([`Cell::disjoint`]).
    pub gateways: Vec<String>,
    /// Some devices list gateways and no gateway is on every list.
    pub disjoint: bool,
}

/// Every device's cell.
#[derive(Debug, Clone, Default)]
pub struct Cells {
    cells: Vec<Cell>,
    of: HashMap<String, usize>,
}

impl Cells {
    /// The cells of `devices`: union-find over devices joined by the exclusive groups their
    /// actions name.
    pub fn of(devices: &[&Device]) -> Cells {
        let mut parent: Vec<usize> = (0..devices.len()).collect();
        let mut first_in_group: HashMap<&str, usize> = HashMap::new();
        for (i, d) in devices.iter().enumerate() {
            for a in &d.actions {
                let j = *first_in_group.entry(a.exclusive.as_str()).or_insert(i);
                let (ri, rj) = (root(&mut parent, i), root(&mut parent, j));
                // The earlier device stays the root, so a cell's key is its first device.
                parent[ri.max(rj)] = ri.min(rj);
            }
        }
        let mut cells: Vec<Cell> = Vec::new();
        let mut lists: Vec<Vec<&Vec<String>>> = Vec::new();
        let mut at_root: HashMap<usize, usize> = HashMap::new();
        let mut of = HashMap::new();
        for (i, d) in devices.iter().enumerate() {
            let r = root(&mut parent, i);
            let c = *at_root.entry(r).or_insert_with(|| {
                cells.push(Cell {
                    key: devices[r].id.clone(),
                    devices: Vec::new(),
                    gateways: Vec::new(),
                    disjoint: false,
                });
                lists.push(Vec::new());
                cells.len() - 1
            });
            cells[c].devices.push(d.id.clone());
            lists[c].push(&d.gateways);
            of.insert(d.id.clone(), c);
        }
        for (cell, lists) in cells.iter_mut().zip(lists) {
            (cell.gateways, cell.disjoint) = common(lists.into_iter());
        }
        Cells { cells, of }
    }

    /// The cell of device `id`.
    pub fn cell(&self, id: &str) -> Option<&Cell> {
        self.of.get(id).map(|&i| &self.cells[i])
    }

    /// Every cell, in the file order of their first devices.
    pub fn iter(&self) -> impl Iterator<Item = &Cell> {
        self.cells.iter()
    }
}

/// The root of `i` in the union-find forest, halving paths on the way.
fn root(parent: &mut [usize], mut i: usize) -> usize {
    while parent[i] != i {
        parent[i] = parent[parent[i]];
        i = parent[i];
    }
    i
}

/// The gateways on every non-empty list, and whether there were lists with none in common.
fn common<'a>(lists: impl Iterator<Item = &'a Vec<String>>) -> (Vec<String>, bool) {
    let mut shared: Option<Vec<String>> = None;
    for list in lists.filter(|l| !l.is_empty()) {
        shared = Some(match shared {
            None => list.clone(),
            Some(s) => s.into_iter().filter(|g| list.contains(g)).collect(),
        });
    }
    match shared {
        None => (Vec::new(), false),
        Some(s) => {
            let disjoint = s.is_empty();
            (s, disjoint)
        }
    }
}
