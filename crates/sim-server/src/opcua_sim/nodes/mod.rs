//! The simulated devices as OPC UA nodes: each device an object `ns=2;s={device}`, its natural
//! variables `ns=2;s={device}.{Name}` and methods, every access delegated to the device's
//! register map (docs/simulator.md) through its `Driver` implementation — so the device's faults
//! (nak, latency, drop_rate, stall, brownout, swapped contacts) act on OPC UA exactly as on Modbus.

mod point;

use std::collections::HashMap;
use std::time::Duration;

use async_trait::async_trait;
use closedloop_contract::{Answer, Driver, Exception, TransportError, Write};
use closedloop_sim::SimDevice;
use opcua::server::address_space::{AddressSpace, MethodBuilder, ObjectBuilder, VariableBuilder};
use opcua::server::diagnostics::NamespaceMetadata;
use opcua::server::node_manager::memory::InMemoryNodeManagerImpl;
use opcua::server::node_manager::{
    MethodCall, ParsedReadValueId, RequestContext, ServerContext, WriteNode,
};
use opcua::sync::RwLock;
use opcua::types::{
    AttributeId, DataTypeId, DataValue, DateTime, NodeId, ObjectId, ObjectTypeId, QualifiedName,
    StatusCode, TimestampsToReturn, VariableTypeId, Variant,
};
use tokio::task::JoinSet;

use point::{Point, layout};

/// The namespace of the simulated devices: index 2, after OPC UA (0) and the server's own
/// application URI (1), which must differ from it.
pub const NAMESPACE: &str = "urn:closedloop:sim";

/// One variable of a device.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Var {
    pub device: usize,
    pub point: Point,
    pub writable: bool,
}

/// The node manager of the simulated devices.
pub(crate) struct SimNodes {
    ns: u16,
    pub devices: Vec<(String, SimDevice)>,
    pub vars: HashMap<NodeId, Var>,
    methods: HashMap<NodeId, (usize, u16)>,
}

impl SimNodes {
    /// Registers the namespace and adds every device's object, variables and methods.
    pub fn build(
        devices: Vec<(String, SimDevice)>,
        context: &ServerContext,
        space: &mut AddressSpace,
    ) -> SimNodes {
        let ns = opcua::server::address_space::add_namespaces(context, space, &[NAMESPACE])[0];
        let mut vars = HashMap::new();
        let mut methods = HashMap::new();
        for (index, (id, device)) in devices.iter().enumerate() {
            let object = NodeId::new(ns, id.clone());
            ObjectBuilder::new(&object, QualifiedName::new(ns, id.as_str()), id.as_str())
                .description(format!("simulated {}", device.model().name()))
                .organized_by(ObjectId::ObjectsFolder)
                .has_type_definition(ObjectTypeId::BaseObjectType)
                .insert(space);
            let (points, calls) = layout(device.model());
            for (name, point, writable) in points {
                let node = NodeId::new(ns, format!("{id}.{name}"));
                let (data_type, initial) = if point.is_bool() {
                    (DataTypeId::Boolean, Variant::Boolean(false))
                } else {
                    (DataTypeId::Double, Variant::Double(0.0))
                };
                let mut builder = VariableBuilder::new(&node, QualifiedName::new(ns, name), name)
                    .data_type(data_type)
                    .value(initial)
                    .component_of(object.clone())
                    .has_type_definition(VariableTypeId::BaseDataVariableType)
                    .minimum_sampling_interval(super::SAMPLE_PERIOD.as_secs_f64() * 1000.0);
                if writable {
                    builder = builder.writable();
                }
                builder.insert(space);
                vars.insert(
                    node,
                    Var {
                        device: index,
                        point,
                        writable,
                    },
                );
            }
            for (name, coil) in calls {
                let node = NodeId::new(ns, format!("{id}.{name}"));
                MethodBuilder::new(&node, QualifiedName::new(ns, name), name)
                    .component_of(object.clone())
                    .executable(true)
                    .user_executable(true)
                    .insert(space);
                methods.insert(node, (index, coil));
            }
        }
        SimNodes {
            ns,
            devices,
            vars,
            methods,
        }
    }

    /// The variables of device `index`.
    pub fn device_vars(&self, index: usize) -> Vec<(NodeId, Var)> {
        self.vars
            .iter()
            .filter(|(_, v)| v.device == index)
            .map(|(id, v)| (id.clone(), *v))
            .collect()
    }
}

/// Reads one variable from its device now: Good with both timestamps, or the Bad status the
/// device's answer maps to.
pub(crate) async fn read_var(device: &SimDevice, point: Point) -> DataValue {
    let (area, start, count) = point.read_span();
    let answer = with_timeout(device, device.read(area, start, count)).await;
    let now = DateTime::now();
    match answer.and_then(|data| {
        point
            .decode(&data)
            .ok_or(StatusCode::BadDataEncodingInvalid)
    }) {
        Ok(v) => DataValue {
            value: Some(v),
            status: Some(StatusCode::Good),
            source_timestamp: Some(now),
            server_timestamp: Some(now),
            ..DataValue::null()
        },
        Err(status) => DataValue {
            value: None,
            status: Some(status),
            server_timestamp: Some(now),
            ..DataValue::null()
        },
    }
}

/// Waits for a device's answer at most its request timeout (`timeout_ms`, default 500): a
/// gateway answers `Bad_Timeout` for a device that is silent or lost the request.
async fn with_timeout<T>(
    device: &SimDevice,
    answer: impl std::future::Future<Output = Answer<T>>,
) -> Result<T, StatusCode> {
    let limit = Duration::from_millis(device.request_timeout_ms());
    match tokio::time::timeout(limit, answer).await {
        Err(_) => Err(StatusCode::BadTimeout),
        Ok(Err(TransportError::Crc)) => Err(StatusCode::BadCommunicationError),
        Ok(Err(_)) => Err(StatusCode::BadCommunicationError),
        Ok(Ok(Err(exception))) => Err(exception_status(exception)),
        Ok(Ok(Ok(v))) => Ok(v),
    }
}

/// The OPC UA status for a Modbus exception of the register map.
pub(crate) fn exception_status(e: Exception) -> StatusCode {
    match e {
        Exception::ILLEGAL_FUNCTION => StatusCode::BadNotSupported,
        Exception::ILLEGAL_DATA_ADDRESS => StatusCode::BadNodeIdUnknown,
        Exception::ILLEGAL_DATA_VALUE => StatusCode::BadOutOfRange,
        Exception::SERVER_DEVICE_BUSY => StatusCode::BadResourceUnavailable,
        _ => StatusCode::BadInternalError,
    }
}

/// `dv` with only the timestamps the client asked for.
fn stamped(mut dv: DataValue, which: TimestampsToReturn) -> DataValue {
    match which {
        TimestampsToReturn::Source => dv.server_timestamp = None,
        TimestampsToReturn::Server => dv.source_timestamp = None,
        TimestampsToReturn::Neither => {
            dv.source_timestamp = None;
            dv.server_timestamp = None;
        }
        _ => {}
    }
    dv
}

#[async_trait]
impl InMemoryNodeManagerImpl for SimNodes {
    async fn init(&self, _space: &mut AddressSpace, _context: ServerContext) {}

    fn name(&self) -> &str {
        "closedloop-sim"
    }

    fn namespaces(&self) -> Vec<NamespaceMetadata> {
        vec![NamespaceMetadata {
            is_namespace_subset: Some(false),
            namespace_uri: NAMESPACE.to_string(),
            namespace_index: self.ns,
            ..Default::default()
        }]
    }

    /// Device variables are read from the device at the time of the request (a fresh read, with
    /// the device's latency); everything else from the address space.
    async fn read_values(
        &self,
        context: &RequestContext,
        space: &RwLock<AddressSpace>,
        nodes: &[&ParsedReadValueId],
        max_age: f64,
        which: TimestampsToReturn,
    ) -> Vec<DataValue> {
        let mut out = vec![DataValue::null(); nodes.len()];
        let mut reads = JoinSet::new();
        {
            let space = space.read();
            for (i, node) in nodes.iter().enumerate() {
                let Some(var) = self.vars.get(&node.node_id) else {
                    out[i] = space.read(context, node, max_age, which);
                    continue;
                };
                if let Err(status) = space.validate_node_read(context, node) {
                    out[i] = DataValue {
                        status: Some(status),
                        ..DataValue::null()
                    };
                    continue;
                }
                let device = self.devices[var.device].1.clone();
                let point = var.point;
                reads.spawn(async move { (i, read_var(&device, point).await) });
            }
        }
        while let Some(done) = reads.join_next().await {
            if let Ok((i, dv)) = done {
                out[i] = stamped(dv, which);
            }
        }
        out
    }

    /// Writes go to the device's registers; the value must be exactly the variable's type
    /// (Boolean or Double), as a strict PLC would demand.
    async fn write(
        &self,
        context: &RequestContext,
        space: &RwLock<AddressSpace>,
        nodes: &mut [&mut WriteNode],
    ) -> Result<(), StatusCode> {
        let mut planned = Vec::new();
        {
            let mut space = space.write();
            let type_tree = context.type_tree.read();
            for (i, node) in nodes.iter_mut().enumerate() {
                let request = node.value();
                let Some(var) = self.vars.get(&request.node_id).filter(|v| v.writable) else {
                    // Read-only (or not a device variable): the access level says so, and the
                    // answer is the one the specification gives for it.
                    let known = space.find(&request.node_id).is_some();
                    node.set_status(if known {
                        StatusCode::BadNotWritable
                    } else {
                        StatusCode::BadNodeIdUnknown
                    });
                    continue;
                };
                if let Err(status) = space.validate_node_write(context, request, &*type_tree) {
                    node.set_status(status);
                    continue;
                }
                if request.attribute_id != AttributeId::Value {
                    node.set_status(StatusCode::BadNotWritable);
                    continue;
                }
                if request.index_range.has_range() {
                    node.set_status(StatusCode::BadWriteNotSupported);
                    continue;
                }
                let value = request.value.value.clone().unwrap_or_default();
                match var.point.encode(&value) {
                    Ok(write) => planned.push((i, var.device, write)),
                    Err(status) => node.set_status(status),
                }
            }
        }
        for (i, device, write) in planned {
            let device = &self.devices[device].1;
            let status = match with_timeout(device, device.write(write)).await {
                Ok(()) => StatusCode::Good,
                Err(status) => status,
            };
            nodes[i].set_status(status);
        }
        Ok(())
    }

    /// A method pulses its command coil (Start: coil 0, Stop: 1, Reset: 2).
    async fn call(
        &self,
        _context: &RequestContext,
        _space: &RwLock<AddressSpace>,
        methods: &mut [&mut &mut MethodCall],
    ) -> Result<(), StatusCode> {
        for method in methods.iter_mut() {
            let Some(&(index, coil)) = self.methods.get(method.method_id()) else {
                method.set_status(StatusCode::BadMethodInvalid);
                continue;
            };
            let device = &self.devices[index].1;
            let write = Write::Coils {
                start: coil,
                values: vec![true],
            };
            match with_timeout(device, device.write(write)).await {
                Ok(()) => {
                    method.set_outputs(Vec::new());
                    method.set_status(StatusCode::Good);
                }
                Err(status) => method.set_status(status),
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exceptions_map_to_the_statuses_the_client_classifies() {
        assert_eq!(
            exception_status(Exception::ILLEGAL_DATA_VALUE),
            StatusCode::BadOutOfRange
        );
        assert_eq!(
            exception_status(Exception::SERVER_DEVICE_FAILURE),
            StatusCode::BadInternalError
        );
    }
}
