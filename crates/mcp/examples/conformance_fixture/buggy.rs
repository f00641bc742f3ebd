//! `protocol_error_job`: a simulated relay behind a link with a bug built in on purpose — every
//! write panics, as a driver bug would. closedloop's engine ends the command `failed INTERRUPTED`
//! with an `internal_error` entry on its timeline (`closedloop_engine::crash`), and the Tasks
//! layer shows its task `failed` with JSON-RPC error -32603: the suite's "protocol-level error"
//! case, produced by closedloop's own code rather than answered by the fixture.

use closedloop_contract::BoxFuture;
use closedloop_link::{
    Encoded, Evaluated, Link, PlanError, ReadBack, Reporting, Request, Snapshot, SnapshotTx,
    WriteError,
};
use closedloop_plant::WriteEntry;
use std::any::Any;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

/// The device whose link is wrapped.
pub(crate) const DEVICE: &str = "protocol_error";

/// A link that reads through `0` and panics on every write.
pub(crate) struct Buggy(pub Arc<dyn Link>);

impl Link for Buggy {
    fn describe(&self) -> String {
        format!(
            "{} (writes panic: a driver bug, on purpose)",
            self.0.describe()
        )
    }

    fn reporting(&self) -> Reporting {
        self.0.reporting()
    }

    fn samples(&self) -> &SnapshotTx {
        self.0.samples()
    }

    fn current(&self) -> Snapshot {
        self.0.current()
    }

    fn fence(&self) -> u64 {
        self.0.fence()
    }

    fn encode(&self, entry: &WriteEntry, values: &Evaluated) -> Result<Request, PlanError> {
        self.0.encode(entry, values)
    }

    fn send<'a>(
        &'a self,
        request: &'a dyn Encoded,
        _expiry: Duration,
    ) -> BoxFuture<'a, Result<u64, WriteError>> {
        Box::pin(async move { panic!("conformance fixture: a driver bug while sending {request}") })
    }

    fn ask(&self) {
        self.0.ask();
    }

    fn fresh(&self, within: Duration) -> BoxFuture<'_, Snapshot> {
        self.0.fresh(within)
    }

    fn read_back<'a>(&'a self, request: &'a dyn Encoded) -> BoxFuture<'a, Option<ReadBack>> {
        self.0.read_back(request)
    }

    fn run(self: Arc<Self>, stop: Arc<Notify>) -> BoxFuture<'static, ()> {
        Arc::clone(&self.0).run(stop)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
