//! A survey of an address space for `closedloop init --opcua`: the objects, variables and
//! methods below a node with what a plant file needs of each — its parent, data type, whether
//! a client may write it, its description, and from its properties its engineering unit
//! (`EngineeringUnits`), its range (`EURange`) and a method's input arguments
//! (`InputArguments`). Bounded like [`OpcuaClient::browse`].

use std::collections::{HashSet, VecDeque};

use opcua::types::{
    Argument, AttributeId, EUInformation, LocalizedText, NodeClass, NodeId, Range, ReadValueId,
    ReferenceTypeId, TimestampsToReturn, Variant,
};

use crate::client::{parse_node, value_id};
use crate::{Error, OpcuaClient, convert};

/// One node found by [`OpcuaClient::survey`].
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Surveyed {
    /// Its node id as a plant file writes it.
    pub node_id: String,
    /// Its browse name without the namespace index.
    pub browse_name: String,
    /// Its display name (what a person reads).
    pub display_name: String,
    /// `Object`, `Variable` or `Method`.
    pub class: String,
    /// The index of the node it hangs below in the survey, `None` below the start node.
    pub parent: Option<usize>,
    /// Its Description attribute, when the server gives one.
    pub description: Option<String>,
    /// Variables: the data type's name (`Double`, `Boolean`, …).
    pub data_type: Option<String>,
    /// Variables: the session's user may write it (UserAccessLevel's CurrentWrite bit).
    pub writable: bool,
    /// Variables: the display name of its `EngineeringUnits`.
    pub unit: Option<String>,
    /// Variables: its `EURange`.
    pub range: Option<(f64, f64)>,
    /// Methods: their `InputArguments`.
    pub arguments: Vec<MethodArgument>,
}

/// One input argument of a method.
#[derive(Debug, Clone, PartialEq)]
pub struct MethodArgument {
    /// Its name.
    pub name: String,
    /// The data type's name.
    pub data_type: String,
    /// Whether it takes an array rather than one value.
    pub array: bool,
    /// Its description, when the server gives one.
    pub description: Option<String>,
}

/// What a survey found, and whether the bound cut it short.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Survey {
    /// Nodes in breadth-first order, each once; a node's parent comes before it.
    pub nodes: Vec<Surveyed>,
    /// `max_results` was reached before the walk was complete.
    pub truncated: bool,
}

/// The properties a survey reads, by browse name.
const PROPERTIES: [&str; 3] = ["EngineeringUnits", "EURange", "InputArguments"];

impl OpcuaClient {
    /// Surveys the objects, variables and methods below `node`, `depth` levels deep, at most
    /// `max_results` of them (properties not counted).
    pub async fn survey(
        &self,
        node: &str,
        depth: u32,
        max_results: usize,
    ) -> Result<Survey, Error> {
        let start = parse_node(node)?;
        self.ensure_connected()?;
        self.check_exists(node, &start).await?;
        let mut out = Survey::default();
        // A start node of the server's own (not namespace 0) that is an object is surveyed as
        // one: its variables and methods are its own.
        let at = match self.start_object(&start).await? {
            Some(me) => {
                out.nodes.push(me);
                Some(0)
            }
            None => None,
        };
        let mut props: Vec<(usize, String, NodeId)> = Vec::new();
        let mut seen = HashSet::from([start.clone()]);
        let mut queue = VecDeque::from([(start, at, 0u32, NodeClass::Object)]);
        while let Some((parent, at, level, class)) = queue.pop_front() {
            // Below the depth only a variable's or a method's properties are still read.
            let properties_only = level >= depth;
            if properties_only && class == NodeClass::Object {
                continue;
            }
            let refs = self.children(&parent, level, 0, usize::MAX).await?;
            for r in refs {
                let id = r.node_id.node_id.clone();
                let name = r.browse_name.name.to_string();
                if r.reference_type_id == ReferenceTypeId::HasProperty {
                    if let Some(i) = at.filter(|_| PROPERTIES.contains(&name.as_str())) {
                        props.push((i, name, id));
                    }
                    continue;
                }
                // Namespace 0 is the standard model every server carries (the Server object and
                // its diagnostics): not the plant's devices.
                if properties_only
                    || r.node_id.server_index != 0
                    || id.namespace == 0
                    || !seen.insert(id.clone())
                {
                    continue;
                }
                let class = match r.node_class {
                    NodeClass::Object => "Object",
                    NodeClass::Variable => "Variable",
                    NodeClass::Method => "Method",
                    _ => continue,
                };
                if out.nodes.len() >= max_results {
                    out.truncated = true;
                    break;
                }
                out.nodes.push(Surveyed {
                    node_id: id.to_string(),
                    browse_name: name,
                    display_name: r.display_name.text.to_string(),
                    class: class.into(),
                    parent: at,
                    ..Surveyed::default()
                });
                queue.push_back((id, Some(out.nodes.len() - 1), level + 1, r.node_class));
            }
        }
        self.read_attributes(&mut out.nodes).await?;
        self.read_properties(&mut out.nodes, &props).await?;
        Ok(out)
    }

    /// The start node as a surveyed object, when it is one outside namespace 0.
    async fn start_object(&self, start: &NodeId) -> Result<Option<Surveyed>, Error> {
        if start.namespace == 0 {
            return Ok(None);
        }
        let ask = |a: AttributeId| ReadValueId {
            attribute_id: a as u32,
            ..value_id(start.clone())
        };
        let ids = [
            ask(AttributeId::NodeClass),
            ask(AttributeId::BrowseName),
            ask(AttributeId::DisplayName),
        ];
        let values = self.read_values(&ids).await?;
        let object = matches!(values.first(), Some(Some(Variant::Int32(c))) if *c == NodeClass::Object as i32);
        if !object {
            return Ok(None);
        }
        let browse_name = match values.get(1) {
            Some(Some(Variant::QualifiedName(q))) => q.name.to_string(),
            _ => start.to_string(),
        };
        let display_name = match values.get(2) {
            Some(Some(Variant::LocalizedText(t))) => t.text.to_string(),
            _ => browse_name.clone(),
        };
        Ok(Some(Surveyed {
            node_id: start.to_string(),
            browse_name,
            display_name,
            class: "Object".into(),
            ..Surveyed::default()
        }))
    }

    /// Description of every node; DataType and UserAccessLevel of the variables.
    async fn read_attributes(&self, nodes: &mut [Surveyed]) -> Result<(), Error> {
        let mut ask: Vec<(usize, AttributeId)> = Vec::new();
        for (i, n) in nodes.iter().enumerate() {
            ask.push((i, AttributeId::Description));
            if n.class == "Variable" {
                ask.push((i, AttributeId::DataType));
                ask.push((i, AttributeId::UserAccessLevel));
            }
        }
        for chunk in ask.chunks(500) {
            let ids: Vec<ReadValueId> = (chunk.iter())
                .map(|(i, a)| ReadValueId {
                    attribute_id: *a as u32,
                    ..value_id(parse_node(&nodes[*i].node_id).unwrap_or_default())
                })
                .collect();
            let values = self.read_values(&ids).await?;
            for ((i, a), v) in chunk.iter().zip(values) {
                let n = &mut nodes[*i];
                match (a, v) {
                    (AttributeId::Description, Some(Variant::LocalizedText(t))) => {
                        n.description = text(&t);
                    }
                    (AttributeId::DataType, Some(Variant::NodeId(dt))) => {
                        n.data_type = Some(convert::data_type_name(&dt));
                    }
                    (AttributeId::UserAccessLevel, Some(Variant::Byte(level))) => {
                        n.writable = level & 0x02 != 0;
                    }
                    _ => {}
                }
            }
        }
        Ok(())
    }

    /// The values of the properties found, onto their nodes.
    async fn read_properties(
        &self,
        nodes: &mut [Surveyed],
        props: &[(usize, String, NodeId)],
    ) -> Result<(), Error> {
        for chunk in props.chunks(500) {
            let ids: Vec<ReadValueId> = chunk
                .iter()
                .map(|(_, _, id)| value_id(id.clone()))
                .collect();
            let values = self.read_values(&ids).await?;
            for ((i, name, _), v) in chunk.iter().zip(values) {
                let (Some(n), Some(v)) = (nodes.get_mut(*i), v) else {
                    continue;
                };
                match name.as_str() {
                    "EngineeringUnits" => n.unit = unit(&v),
                    "EURange" => n.range = range(&v),
                    _ => n.arguments = arguments(&v),
                }
            }
        }
        Ok(())
    }

    /// The values of `ids` (a Bad one is `None`).
    async fn read_values(&self, ids: &[ReadValueId]) -> Result<Vec<Option<Variant>>, Error> {
        let values = self
            .inner
            .session()?
            .read(ids, TimestampsToReturn::Neither, 0.0)
            .await
            .map_err(|e| Error::from_stack("survey (reading attributes)", &e))?;
        Ok(values.into_iter().map(|dv| dv.value).collect())
    }
}

fn text(t: &LocalizedText) -> Option<String> {
    let s = t.text.to_string();
    (!s.trim().is_empty()).then_some(s)
}

fn unit(v: &Variant) -> Option<String> {
    let Variant::ExtensionObject(o) = v else {
        return None;
    };
    text(&o.inner_as::<EUInformation>()?.display_name)
}

fn range(v: &Variant) -> Option<(f64, f64)> {
    let Variant::ExtensionObject(o) = v else {
        return None;
    };
    let r = o.inner_as::<Range>()?;
    (r.low.is_finite() && r.high.is_finite() && r.low < r.high).then_some((r.low, r.high))
}

fn arguments(v: &Variant) -> Vec<MethodArgument> {
    let Variant::Array(a) = v else {
        return Vec::new();
    };
    (a.values.iter())
        .filter_map(|v| match v {
            Variant::ExtensionObject(o) => o.inner_as::<Argument>(),
            _ => None,
        })
        .map(|a| MethodArgument {
            name: a.name.to_string(),
            data_type: convert::data_type_name(&a.data_type),
            array: a.value_rank >= 1,
            description: text(&a.description),
        })
        .collect()
}
