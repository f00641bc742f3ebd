//! Writes and method calls: values converted to the data types the server declares (a node's
//! DataType, a method's InputArguments), looked up once per session and cached.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use closedloop_contract::Value;
use opcua::client::UARequest;
use opcua::client::services::{Call, Write};
use opcua::types::{
    AttributeId, BrowsePath, CallMethodRequest, CallMethodResult, DataValue, NodeId, NumericRange,
    QualifiedName, ReadValueId, ReferenceTypeId, RelativePath, RelativePathElement, StatusCode,
    TimestampsToReturn, Variant, WriteValue,
};
use tokio::time::Instant;

use crate::client::{parse_node, value_id};
use crate::convert::{self, Scalar};
use crate::error::status_name;
use crate::{Ack, Error, OpcuaClient};

/// How a node takes writes: its DataType, resolved to a scalar when closedloop can write it.
#[derive(Debug, Clone)]
pub(crate) struct NodeType {
    scalar: Option<Scalar>,
    name: String,
}

/// Most entries per cache; a plant file names far fewer nodes. Beyond it the cache starts over
/// (the types are read again), so a caller writing to ever-new nodes cannot grow it unbounded.
const CACHE_LIMIT: usize = 4096;

/// Caches that hold per-session knowledge; emptied when a new session is created.
#[derive(Default)]
pub(crate) struct Caches {
    /// Node → its data type, read once (the DataType attribute).
    types: Mutex<HashMap<String, NodeType>>,
    /// Method → the data types of its input arguments (`None`: the method declares none).
    args: Mutex<HashMap<String, Option<Vec<NodeType>>>>,
}

impl Caches {
    pub(crate) fn clear(&self) {
        self.types
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
        self.args
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clear();
    }
}

impl OpcuaClient {
    /// Writes `value` to the Value attribute of `node`, as the node's own data type (its
    /// DataType attribute, read once and cached per session). A value the type cannot hold is
    /// [`Error::Value`] and nothing is sent; a Bad answer is [`Error::Status`].
    pub async fn write(&self, node: &str, value: Value) -> Result<Ack, Error> {
        let id = parse_node(node)?;
        self.ensure_connected()?;
        let ty = self.node_type(node, &id).await?;
        let Some(scalar) = ty.scalar else {
            return Err(Error::Value {
                node: node.to_string(),
                data_type: ty.name,
                why: "closedloop writes only booleans and numbers".into(),
            });
        };
        let variant = scalar.encode(value).map_err(|why| Error::Value {
            node: node.to_string(),
            data_type: ty.name.clone(),
            why,
        })?;
        let op = format!("write {node}");
        let write = WriteValue {
            node_id: id,
            attribute_id: AttributeId::Value as u32,
            index_range: NumericRange::None,
            value: DataValue {
                value: Some(variant),
                ..DataValue::null()
            },
        };
        let session = self.inner.session()?;
        let response = Write::new(session)
            .nodes_to_write(vec![write])
            .send(session.channel())
            .await
            .map_err(|e| Error::from_stack(op.clone(), &e))?;
        let status = response
            .results
            .as_ref()
            .and_then(|r| r.first().copied())
            .unwrap_or(StatusCode::BadUnexpectedError);
        let fence = self.fence();
        if status.is_bad() {
            if status == StatusCode::BadTypeMismatch {
                // The node may have been re-declared: look its type up again next time.
                self.inner
                    .caches
                    .types
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .remove(node);
            }
            return Err(Error::status(op, status));
        }
        Ok(Ack {
            seq: fence,
            status: status_name(status),
            server_ms: convert::unix_ms(&response.response_header.timestamp),
            at: Instant::now(),
        })
    }

    /// Calls `method` on `object` with `args`, each converted to the data type the method
    /// declares for it (its InputArguments, read once and cached); arguments beyond the declared
    /// ones go as Boolean or Double. Returns the acknowledgement and the output arguments as JSON.
    pub async fn call(
        &self,
        object: &str,
        method: &str,
        args: Vec<Value>,
    ) -> Result<(Ack, Vec<serde_json::Value>), Error> {
        let object_id = parse_node(object)?;
        let method_id = parse_node(method)?;
        self.ensure_connected()?;
        let declared = self.input_types(method, &method_id).await?;
        let inputs = encode_arguments(method, declared.as_deref(), args)?;
        let op = format!("call {method} on {object}");
        let request = CallMethodRequest {
            object_id,
            method_id,
            input_arguments: Some(inputs),
        };
        let session = self.inner.session()?;
        let response = Call::new(session)
            .method(request)
            .send(session.channel())
            .await
            .map_err(|e| Error::from_stack(op.clone(), &e))?;
        let fence = self.fence();
        let Some(result) = response.results.and_then(|r| r.into_iter().next()) else {
            return Err(Error::status(op, StatusCode::BadUnexpectedError));
        };
        if result.status_code.is_bad() {
            return Err(call_refused(op, &result));
        }
        let outputs = result
            .output_arguments
            .iter()
            .flatten()
            .map(convert::to_json)
            .collect();
        Ok((
            Ack {
                seq: fence,
                status: status_name(result.status_code),
                server_ms: convert::unix_ms(&response.response_header.timestamp),
                at: Instant::now(),
            },
            outputs,
        ))
    }

    /// The data type a write to `node` must use: cached, else its DataType attribute (and its
    /// current value, whose variant type decides when the DataType is abstract or unknown).
    async fn node_type(&self, node: &str, id: &NodeId) -> Result<NodeType, Error> {
        if let Some(t) = self.cached_type(node) {
            return Ok(t);
        }
        let op = format!("write {node}");
        let to_read = [
            ReadValueId {
                attribute_id: AttributeId::DataType as u32,
                ..value_id(id.clone())
            },
            value_id(id.clone()),
        ];
        let values = self
            .inner
            .session()?
            .read(&to_read, TimestampsToReturn::Neither, 0.0)
            .await
            .map_err(|e| Error::from_stack(op.clone(), &e))?;
        let (Some(dt), current) = (values.first(), values.get(1)) else {
            return Err(Error::status(op, StatusCode::BadUnexpectedError));
        };
        if dt.status().is_bad() {
            return Err(Error::status(
                format!("{op} (reading its DataType)"),
                dt.status(),
            ));
        }
        let Some(Variant::NodeId(dt_id)) = &dt.value else {
            return Err(Error::status(
                format!("{op} (its DataType is not a NodeId)"),
                StatusCode::BadTypeMismatch,
            ));
        };
        let ty = node_type_of(dt_id, current.and_then(|c| c.value.as_ref()));
        let mut types = self
            .inner
            .caches
            .types
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if types.len() >= CACHE_LIMIT {
            types.clear();
        }
        types.insert(node.to_string(), ty.clone());
        Ok(ty)
    }

    fn cached_type(&self, node: &str) -> Option<NodeType> {
        let types = self
            .inner
            .caches
            .types
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        types.get(node).cloned()
    }

    /// The declared input argument types of `method` (`None`: it has no InputArguments).
    async fn input_types(&self, method: &str, id: &NodeId) -> Result<Option<Vec<NodeType>>, Error> {
        {
            let args = self
                .inner
                .caches
                .args
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            if let Some(a) = args.get(method) {
                return Ok(a.clone());
            }
        }
        let op = format!("call {method} (looking up its InputArguments)");
        let path = BrowsePath {
            starting_node: id.clone(),
            relative_path: RelativePath {
                elements: Some(vec![RelativePathElement {
                    reference_type_id: ReferenceTypeId::HasProperty.into(),
                    is_inverse: false,
                    include_subtypes: true,
                    target_name: QualifiedName::new(0, "InputArguments"),
                }]),
            },
        };
        let session = self.inner.session()?;
        let found = session
            .translate_browse_paths_to_node_ids(&[path])
            .await
            .map_err(|e| Error::from_stack(op.clone(), &e))?;
        let target = found
            .first()
            .filter(|r| r.status_code.is_good())
            .and_then(|r| r.targets.as_ref())
            .and_then(|t| t.first())
            .map(|t| t.target_id.node_id.clone());
        let declared = match target {
            None => None,
            Some(args_node) => {
                let values = session
                    .read(&[value_id(args_node)], TimestampsToReturn::Neither, 0.0)
                    .await
                    .map_err(|e| Error::from_stack(op.clone(), &e))?;
                let mut types = Vec::new();
                if let Some(Variant::Array(array)) = values.first().and_then(|v| v.value.as_ref()) {
                    for v in &array.values {
                        let arg = match v {
                            Variant::ExtensionObject(ext) => {
                                ext.inner_as::<opcua::types::Argument>()
                            }
                            _ => None,
                        };
                        let Some(arg) = arg else {
                            return Err(Error::status(op, StatusCode::BadDecodingError));
                        };
                        types.push(node_type_of(&arg.data_type, None));
                    }
                }
                Some(types)
            }
        };
        let mut args = self
            .inner
            .caches
            .args
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if args.len() >= CACHE_LIMIT {
            args.clear();
        }
        args.insert(method.to_string(), declared.clone());
        Ok(declared)
    }
}

/// A write type from a DataType id, falling back to the current value's variant type.
fn node_type_of(data_type: &NodeId, current: Option<&Variant>) -> NodeType {
    let scalar =
        Scalar::from_data_type(data_type).or_else(|| current.and_then(Scalar::from_variant));
    NodeType {
        scalar,
        name: convert::data_type_name(data_type),
    }
}

/// The input arguments of a call to `method`, each converted to its `declared` type; an
/// argument beyond the declared ones (or of a method that declares none) goes as Boolean or
/// Double. The first argument that cannot be converted is the error, and nothing is sent.
fn encode_arguments(
    method: &str,
    declared: Option<&[NodeType]>,
    args: Vec<Value>,
) -> Result<Vec<Variant>, Error> {
    let mut inputs = Vec::with_capacity(args.len());
    for (i, arg) in args.into_iter().enumerate() {
        let ty = declared.and_then(|d| d.get(i));
        let variant = match ty {
            Some(NodeType {
                scalar: Some(s),
                name,
            }) => s.encode(arg).map_err(|why| Error::Value {
                node: format!("{method} argument {}", i + 1),
                data_type: name.clone(),
                why,
            })?,
            Some(NodeType { scalar: None, name }) => {
                return Err(Error::Value {
                    node: format!("{method} argument {}", i + 1),
                    data_type: name.clone(),
                    why: "closedloop passes only booleans and numbers".into(),
                });
            }
            None => match arg {
                Value::Bool(b) => Variant::Boolean(b),
                Value::Number(n) => Variant::Double(n),
            },
        };
        inputs.push(variant);
    }
    Ok(inputs)
}

/// The error for a call answered Bad: `op`, followed by the arguments the server marked Bad
/// (when it says which), so the person sees which argument to fix.
fn call_refused(op: String, result: &CallMethodResult) -> Error {
    let bad_args: Vec<String> = result
        .input_argument_results
        .iter()
        .flatten()
        .enumerate()
        .filter(|(_, s)| s.is_bad())
        .map(|(i, s)| format!("argument {}: {}", i + 1, status_name(*s)))
        .collect();
    let op = if bad_args.is_empty() {
        op
    } else {
        format!("{op} ({})", bad_args.join(", "))
    };
    Error::status(op, result.status_code)
}
