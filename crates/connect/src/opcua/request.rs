//! What an OPC UA device is sent: a variable write or a method call, encoded from the plan.

use closedloop_contract::Value;
use closedloop_link::{Encoded, Evaluated, PlanError, Request};
use closedloop_plant::WriteEntry;
use std::any::Any;
use std::fmt;
use std::sync::Arc;

/// An OPC UA request: a variable written in the node's own data type, or a method called.
#[derive(Debug, Clone, PartialEq)]
pub enum OpcuaRequest {
    /// A variable write.
    Write {
        /// NodeId.
        node: String,
        /// The value.
        value: Value,
    },
    /// A method call.
    Call {
        /// The object the method is called on.
        object: String,
        /// The method's NodeId.
        method: String,
        /// Its arguments.
        args: Vec<Value>,
    },
}

impl fmt::Display for OpcuaRequest {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpcuaRequest::Write { node, value } => write!(f, "write {node} = {value}"),
            OpcuaRequest::Call { method, args, .. } => {
                let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
                write!(f, "call {method}({})", args.join(", "))
            }
        }
    }
}

impl Encoded for OpcuaRequest {
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// An OPC UA write or call from its entry and the values the plan evaluated.
pub fn encode(entry: &WriteEntry, values: &Evaluated) -> Result<Request, PlanError> {
    match entry {
        WriteEntry::OpcuaNode { node, .. } => Ok(Arc::new(OpcuaRequest::Write {
            node: node.clone(),
            value: values
                .values
                .first()
                .copied()
                .ok_or_else(|| PlanError(format!("{node}: no value was evaluated")))?,
        })),
        WriteEntry::OpcuaMethod { method, object, .. } => Ok(Arc::new(OpcuaRequest::Call {
            object: object.clone(),
            method: method.clone(),
            args: values.values.clone(),
        })),
        other => Err(PlanError(format!(
            "{} is not an OPC UA write; an OPC UA device takes `node` and `method` write entries",
            other.describe()
        ))),
    }
}
