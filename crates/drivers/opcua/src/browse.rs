//! Browsing a server's address space, bounded: for a person (or an agent) finding the node ids
//! to put in a plant file, never an unbounded walk of a large PLC.

use std::collections::{HashSet, VecDeque};

use opcua::types::{
    AttributeId, BrowseDescription, BrowseDescriptionResultMask, BrowseDirection, BrowseResult,
    ByteString, NodeClass, NodeClassMask, NodeId, ReadValueId, ReferenceDescription,
    ReferenceTypeId, TimestampsToReturn, Variant,
};

use crate::client::{parse_node, value_id};
use crate::{Error, OpcuaClient, convert};

/// Most references asked for per node and request; continuation points fetch the rest.
const PAGE: u32 = 200;

/// One node found by [`OpcuaClient::browse`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BrowseEntry {
    /// Its node id as a plant file writes it (`ns=2;s=Pump1.Speed`).
    pub node_id: String,
    /// Its browse name, prefixed with the namespace index when not 0 (`2:Speed`).
    pub browse_name: String,
    /// Its display name.
    pub display_name: String,
    /// `Object`, `Variable`, `Method`, …
    pub node_class: String,
    /// For variables, the data type (`Double`, `Boolean`, or a node id for other types).
    pub data_type: Option<String>,
    /// Levels below the browsed node (its children are at 1).
    pub depth: u32,
}

/// The result of a browse: what was found, and whether the bound cut it short.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Browse {
    /// Nodes in breadth-first order, each once.
    pub entries: Vec<BrowseEntry>,
    /// `max_results` was reached before the walk was complete.
    pub truncated: bool,
}

impl OpcuaClient {
    /// Lists the nodes below `node` (e.g. `i=85`, the Objects folder) along hierarchical
    /// references, `depth` levels deep (1: its children only), at most `max_results` entries.
    /// Continuation points are followed until the bound, then released.
    pub async fn browse(
        &self,
        node: &str,
        depth: u32,
        max_results: usize,
    ) -> Result<Browse, Error> {
        let start = parse_node(node)?;
        self.ensure_connected()?;
        self.check_exists(node, &start).await?;
        let mut walk = Walk::new(start, max_results);
        while let Some((parent, level)) = walk.queue.pop_front() {
            if level >= depth {
                continue;
            }
            let references = self
                .children(&parent, level, walk.entries.len(), max_results)
                .await?;
            if !walk.record(references, level) {
                break;
            }
        }
        self.fill_data_types(&mut walk.entries, &walk.variables)
            .await?;
        Ok(Browse {
            entries: walk.entries,
            truncated: walk.truncated,
        })
    }

    /// Refuses a start node the server does not know. Some servers answer a browse of an
    /// unknown node with an empty Good result; its NodeClass tells an unknown node from a leaf.
    pub(crate) async fn check_exists(&self, node: &str, start: &NodeId) -> Result<(), Error> {
        let op = format!("browse {node}");
        let class = ReadValueId {
            attribute_id: AttributeId::NodeClass as u32,
            ..value_id(start.clone())
        };
        let status = self
            .inner
            .session()?
            .read(&[class], TimestampsToReturn::Neither, 0.0)
            .await
            .map_err(|e| Error::from_stack(op.clone(), &e))?
            .first()
            .map(|dv| dv.status())
            .unwrap_or(opcua::types::StatusCode::BadUnexpectedError);
        if status.is_bad() {
            return Err(Error::status(op, status));
        }
        Ok(())
    }

    /// The hierarchical references below `parent` (at `level`), page after page. Once `found`
    /// entries plus these reach `max_results`, the rest is not fetched: the continuation point
    /// is released instead. A child that cannot be browsed has none; a start node (level 0)
    /// that cannot be browsed is an error.
    pub(crate) async fn children(
        &self,
        parent: &NodeId,
        level: u32,
        found: usize,
        max_results: usize,
    ) -> Result<Vec<ReferenceDescription>, Error> {
        let mut references = Vec::new();
        let op = format!("browse {parent}");
        let session = self.inner.session()?;
        let description = BrowseDescription {
            node_id: parent.clone(),
            browse_direction: BrowseDirection::Forward,
            reference_type_id: ReferenceTypeId::HierarchicalReferences.into(),
            include_subtypes: true,
            node_class_mask: NodeClassMask::all().bits(),
            result_mask: BrowseDescriptionResultMask::all().bits(),
        };
        let mut result = first(session.browse(&[description], PAGE, None).await, &op)?;
        loop {
            if result.status_code.is_bad() {
                if level == 0 {
                    return Err(Error::status(op, result.status_code));
                }
                break;
            }
            references.extend(result.references.take().unwrap_or_default());
            let continuation: ByteString = result.continuation_point.clone();
            if continuation.is_null() {
                break;
            }
            if found + references.len() >= max_results {
                let _ = session.browse_next(true, &[continuation]).await;
                break;
            }
            result = first(session.browse_next(false, &[continuation]).await, &op)?;
        }
        Ok(references)
    }

    /// Reads the DataType attribute of the variables found, in one request.
    async fn fill_data_types(
        &self,
        entries: &mut [BrowseEntry],
        variables: &[(usize, NodeId)],
    ) -> Result<(), Error> {
        if variables.is_empty() {
            return Ok(());
        }
        let to_read: Vec<ReadValueId> = variables
            .iter()
            .map(|(_, id)| ReadValueId {
                attribute_id: AttributeId::DataType as u32,
                ..value_id(id.clone())
            })
            .collect();
        let values = self
            .inner
            .session()?
            .read(&to_read, TimestampsToReturn::Neither, 0.0)
            .await
            .map_err(|e| Error::from_stack("browse (reading data types)", &e))?;
        for ((index, _), dv) in variables.iter().zip(values) {
            if let (Some(entry), Some(Variant::NodeId(dt))) = (entries.get_mut(*index), dv.value) {
                entry.data_type = Some(convert::data_type_name(&dt));
            }
        }
        Ok(())
    }
}

/// The state of a breadth-first walk: what was found so far and what is left to browse.
struct Walk {
    entries: Vec<BrowseEntry>,
    truncated: bool,
    /// Every node met, the start included, so a node reachable twice is listed once.
    seen: HashSet<NodeId>,
    /// Nodes still to browse, with their level (the start is at 0).
    queue: VecDeque<(NodeId, u32)>,
    /// The variables among `entries` (index, node), whose data types are read at the end.
    variables: Vec<(usize, NodeId)>,
    max_results: usize,
}

impl Walk {
    fn new(start: NodeId, max_results: usize) -> Walk {
        Walk {
            entries: Vec::new(),
            truncated: false,
            seen: HashSet::from([start.clone()]),
            queue: VecDeque::from([(start, 0u32)]),
            variables: Vec::new(),
            max_results,
        }
    }

    /// Adds the nodes `references` point to (children of a node at `level`) that are new and
    /// on this server, and queues them for browsing. `false` once `max_results` is reached and
    /// a further node was left out: the walk stops there, truncated.
    fn record(&mut self, references: Vec<ReferenceDescription>, level: u32) -> bool {
        for r in references {
            let Some(entry) = entry(&r, level + 1) else {
                continue;
            };
            let id = r.node_id.node_id.clone();
            if !self.seen.insert(id.clone()) {
                continue;
            }
            if self.entries.len() >= self.max_results {
                self.truncated = true;
                return false;
            }
            if r.node_class == NodeClass::Variable {
                self.variables.push((self.entries.len(), id.clone()));
            }
            self.entries.push(entry);
            self.queue.push_back((id, level + 1));
        }
        true
    }
}

/// The single result of a one-node browse request.
fn first(
    answer: Result<Vec<BrowseResult>, opcua::types::Error>,
    op: &str,
) -> Result<BrowseResult, Error> {
    let results = answer.map_err(|e| Error::from_stack(op, &e))?;
    results.into_iter().next().ok_or_else(|| Error::Status {
        op: op.to_string(),
        status: "Bad_UnexpectedError".into(),
    })
}

/// An entry for a reference to a node on this server (references to other servers are skipped).
fn entry(r: &ReferenceDescription, depth: u32) -> Option<BrowseEntry> {
    if r.node_id.server_index != 0 {
        return None;
    }
    let name = &r.browse_name;
    let browse_name = if name.namespace_index == 0 {
        name.name.to_string()
    } else {
        format!("{}:{}", name.namespace_index, name.name)
    };
    Some(BrowseEntry {
        node_id: r.node_id.node_id.to_string(),
        browse_name,
        display_name: r.display_name.text.to_string(),
        node_class: format!("{:?}", r.node_class),
        data_type: None,
        depth,
    })
}
