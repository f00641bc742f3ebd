//! Actions: what a device can be asked to do, and how the engine confirms it was done.

use crate::expr::Expr;
use crate::params::{self, ParamError, ParamSpec, Params};
use crate::template::Template;
use closedloop_contract::{Area, Encoding};

/// One declared action of a device, resolved.
#[derive(Debug, Clone)]
pub struct Action {
    /// Its name (`move_to`).
    pub name: String,
    /// When `done_when` reads only what this action itself writes (`running reads coil:0,
    /// which switch writes`): its completion is a readback, never feedback (`readback.rs`).
    pub readback_only: Option<String>,
    /// Business text for the tool description.
    pub description: String,
    /// Declared parameters, sorted by name; all required.
    pub params: Vec<ParamSpec>,
    /// Interlock: must hold before anything is written, else `INTERLOCK`.
    pub requires: Option<Expr>,
    /// The write plan, in order.
    pub write: Vec<WriteEntry>,
    /// Completion criterion on fresh reads (required for `feedback`).
    pub done_when: Option<Expr>,
    /// Failure criteria, error code → expression, sorted by code.
    pub fail_when: Vec<(String, Expr)>,
    /// Expected duration in seconds, evaluated at dispatch (a constant is an expression too).
    pub expect_s: Expr,
    /// Safe-state writes on failure, timeout, cancel or shutdown.
    pub cancel: Vec<WriteEntry>,
    /// After a cancel, the device stays busy until this holds.
    pub stopped_when: Option<Expr>,
    /// Must be seen true once before `done_when` counts (devices that apply writes late).
    pub started_when: Option<Expr>,
    /// `done_when` must stay true this long across consecutive reads.
    pub hold_ms: u64,
    /// Whether a re-send after a transport error is harmless.
    pub idempotent: bool,
    /// How the outcome can be confirmed.
    pub verification: Verification,
    /// Whether nothing moves until the caller confirms.
    pub confirm: bool,
    /// `checklist`: what the person checks before confirming ("the guard is closed"), each
    /// item its own yes; empty, the confirmation is one yes. Needs `confirm`.
    pub checklist: Vec<String>,
    /// Whether a busy device queues the command (else `DEVICE_BUSY`).
    pub queue: bool,
    /// Deadline = expect_s × timeout_factor + timeout_floor_ms + poll_ms.
    pub timeout_factor: f64,
    /// See `timeout_factor`.
    pub timeout_floor_ms: u64,
    /// Longest time a command may wait in the queue.
    pub queue_timeout_s: f64,
    /// Commands of the same exclusive group run one at a time (default: the device id).
    pub exclusive: String,
    /// MCP `destructiveHint`.
    pub destructive: bool,
    /// The MCP tool name, `{device}_{action}`.
    pub tool_name: String,
    /// `max_rate` (+ `max_burst`): at most so many commands of this action per period; beyond
    /// it a call is rejected `RATE_LIMITED` with how long to wait.
    pub max_rate: Option<crate::RateLimit>,
    /// `keepalive_s`: a dead-man action runs only while its caller keeps asking about it (any
    /// status call renews it); a lapse writes the cancel plan and ends it `DEADMAN`.
    pub keepalive_s: Option<f64>,
    /// `examples`: requests a person might make that this tool should answer ("turn on the
    /// desk lamp"). Nothing at run time reads them; `closedloop lint --examples` ranks every
    /// tool of the plant for each one and reports those for which another tool looks a better
    /// match, because a model choosing among the tools would likely pick that one too.
    pub examples: Vec<String>,
    /// `task`: whether a client must follow the command as an MCP task (see [`TaskSupport`]).
    pub task: TaskSupport,
}

impl Action {
    /// The deadline after dispatch, in seconds, for an expected duration of `expect_s` on
    /// `device`: `expect_s × timeout_factor + timeout_floor_ms + one poll`. When the device
    /// reports when it likes (`reports_when_it_likes`: a push device whose baseline is taken)
    /// at least `expect_s + max_silence_s + timeout_floor_ms`, as its report may take that long.
    /// The one formula: dispatch sets it, `check` warns with it, the prompts say it.
    pub fn deadline_s(
        &self,
        device: &crate::Device,
        expect_s: f64,
        reports_when_it_likes: bool,
    ) -> f64 {
        let floor_s = self.timeout_floor_ms as f64 / 1000.0;
        let budget = expect_s * self.timeout_factor + floor_s + device.poll_ms as f64 / 1000.0;
        if reports_when_it_likes {
            budget.max(expect_s + device.liveness.max_silence_s + floor_s)
        } else {
            budget
        }
    }

    /// Checks a tool call's arguments (without `wait_s` and `idempotency_key`) against the
    /// declared parameters: all required, none unknown, types, whole integers, ranges, enums.
    pub fn check_params(
        &self,
        args: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<Params, ParamError> {
        params::check(&self.params, args)
    }

    /// The parameters a person answers (`ask`): not in the tool's input schema; the server
    /// asks for them in-protocol and puts the answers into the call's arguments.
    pub fn asked(&self) -> impl Iterator<Item = &params::ParamSpec> {
        self.params.iter().filter(|p| p.ask.is_some())
    }

    /// The verification its completions carry: `readback` for a `feedback` action whose
    /// `done_when` reads only what it writes ([`Action::readback_only`]), else as declared. What
    /// a model, a diff or a listing is told; the machine's deadlines follow the declared one.
    pub fn effective_verification(&self) -> Verification {
        match self.readback_only {
            Some(_) => Verification::Readback,
            None => self.verification,
        }
    }

    /// Every signal of its own device that one of its expressions reads.
    pub fn signals_read(&self) -> std::collections::BTreeSet<String> {
        let exprs = self
            .requires
            .iter()
            .chain(self.done_when.iter())
            .chain(self.fail_when.iter().map(|(_, e)| e));
        let exprs = exprs
            .chain(self.stopped_when.iter())
            .chain(self.started_when.iter())
            .chain([&self.expect_s]);
        exprs.flat_map(|e| e.signals().iter().cloned()).collect()
    }

    /// Every other device one of its expressions reads (`devices.<id>.<signal>`), in its
    /// criteria, its expected duration or its write and cancel plans: the engine builds each
    /// command's scope from these alone, so its cost does not grow with the plant.
    pub fn devices_read(&self) -> std::collections::BTreeSet<String> {
        let criteria = self
            .requires
            .iter()
            .chain(self.done_when.iter())
            .chain(self.fail_when.iter().map(|(_, e)| e))
            .chain(self.stopped_when.iter())
            .chain(self.started_when.iter())
            .chain([&self.expect_s]);
        let plans = self.write.iter().chain(self.cancel.iter());
        criteria
            .chain(plans.flat_map(WriteEntry::exprs))
            .flat_map(|e| e.devices().iter().map(|(d, _)| d.clone()))
            .collect()
    }
}

/// How the outcome of an action can be confirmed (docs/architecture.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Verification {
    /// An independent signal senses the effect.
    #[default]
    Feedback,
    /// The written registers are read back; the effect itself is not sensed.
    Readback,
    /// Nothing can be read back: the result is `sent`.
    None,
}

impl Verification {
    /// The plant-file and result spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Verification::Feedback => "feedback",
            Verification::Readback => "readback",
            Verification::None => "none",
        }
    }
}

/// `task`: which clients may call an action. A long action (a furnace ramp of twenty minutes) is
/// one a client that cannot follow a task would start and then lose track of: it hears
/// `accepted`, and only polling `get_command_status` would tell it the outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "lowercase")]
pub enum TaskSupport {
    /// Any client: a Tasks client gets a task, any other the result (or `accepted` and a
    /// command_id to poll).
    #[default]
    Optional,
    /// Only a client that declares the Tasks extension (`io.modelcontextprotocol/tasks`); any
    /// other is refused with JSON-RPC error -32021 before anything is journaled or sent.
    Required,
}

impl TaskSupport {
    /// The plant-file spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            TaskSupport::Optional => "optional",
            TaskSupport::Required => "required",
        }
    }
}

/// One entry of a `write` or `cancel` plan.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub enum WriteEntry {
    /// A coil or holding register (block); `value` is bool for a coil, number or bool for a register.
    Register {
        /// `Coil` or `Holding` (validation refuses the read-only areas).
        area: Area,
        /// 0-based PDU address.
        address: u16,
        /// How the value becomes registers (`bit` is never set).
        encoding: Encoding,
        /// The value to write.
        value: Expr,
    },
    /// An MQTT publish (never retained; QoS as given).
    Mqtt {
        /// Topic.
        topic: String,
        /// Payload with `${...}` interpolations.
        payload: Template,
        /// QoS 0 or 1 (the loader refuses 2).
        qos: u8,
    },
    /// An OPC UA node write.
    OpcuaNode {
        /// NodeId.
        node: String,
        /// The value.
        value: Expr,
    },
    /// An OPC UA method call.
    OpcuaMethod {
        /// Method NodeId.
        method: String,
        /// Object NodeId.
        object: String,
        /// Arguments.
        args: Vec<Expr>,
    },
    /// A CAN message built from DBC signals.
    Can {
        /// Message name or id.
        message: String,
        /// DBC signal name → value, sorted by name.
        signals: Vec<(String, Expr)>,
        /// Repeat period while the command runs, if the device wants cyclic frames.
        cycle_ms: Option<u64>,
    },
}

impl WriteEntry {
    /// The expressions this entry evaluates.
    pub fn exprs(&self) -> Box<dyn Iterator<Item = &Expr> + '_> {
        match self {
            WriteEntry::Register { value, .. } | WriteEntry::OpcuaNode { value, .. } => {
                Box::new(std::iter::once(value))
            }
            WriteEntry::Mqtt { payload, .. } => Box::new(payload.exprs()),
            WriteEntry::OpcuaMethod { args, .. } => Box::new(args.iter()),
            WriteEntry::Can { signals, .. } => Box::new(signals.iter().map(|(_, e)| e)),
        }
    }

    /// Short form for logs and timelines: `holding:0`, `mqtt lab/lamp/set`, ...
    pub fn describe(&self) -> String {
        match self {
            WriteEntry::Register { area, address, .. } => format!("{}:{address}", area.key()),
            WriteEntry::Mqtt { topic, .. } => format!("mqtt {topic}"),
            WriteEntry::OpcuaNode { node, .. } => node.clone(),
            WriteEntry::OpcuaMethod { method, .. } => format!("call {method}"),
            WriteEntry::Can { message, .. } => format!("CAN {message}"),
        }
    }
}
