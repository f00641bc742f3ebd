//! The live-command map's rules for several gateways: one command per id at a time, and a
//! command let go of never takes its successor of the same id down with it.

use super::Context;
use crate::context::live::LiveCommand;
use closedloop_journal::Journal;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

async fn context() -> Context {
    let src = "[server]\nname = \"t\"\n[[device]]\nid = \"lamp\"\n\
               driver = { kind = \"sim\", model = \"relay\" }\n\
               [device.signals]\ncontact = { discrete_input = 0 }\n";
    let plant = closedloop_plant::parse(src, "t.toml", std::path::Path::new("/tmp")).unwrap();
    let journal = Journal::open("sqlite::memory:").await.unwrap();
    let ownership = crate::ownership::Ownership::new("gw".into(), Duration::from_secs(5), None);
    let clock = closedloop_link::Clock::new();
    Context::new(Arc::new(plant), journal, clock, BTreeMap::new(), ownership)
}

fn command(id: &str, epoch: i64) -> Arc<LiveCommand> {
    let row = crate::fixtures::row(id, "accepted");
    Arc::new(LiveCommand::new(row, Vec::new(), Some(epoch)))
}

#[tokio::test]
async fn a_second_command_of_one_id_is_not_registered_while_the_first_is_live() {
    let ctx = context().await;
    let (first, second) = (command("c1", 1), command("c1", 1));
    assert!(ctx.remember_new(Arc::clone(&first)));
    assert!(!ctx.remember_new(Arc::clone(&second)));
    assert!(ctx.holds("c1", &first) && !ctx.holds("c1", &second));
}

/// Regression: `forget` removed whatever command had the id, so the task of a command let go
/// of under a lost lease, ending after the command was recovered under the next lease, took
/// the recovered one out of the live map (its status then answered from the journal only).
#[tokio::test]
async fn forgetting_a_command_let_go_of_leaves_its_successor_of_the_same_id_live() {
    let ctx = context().await;
    let (stale, recovered) = (command("c1", 1), command("c1", 2));
    ctx.remember(Arc::clone(&stale));
    ctx.drop_fenced(&stale);
    ctx.remember(Arc::clone(&recovered));
    ctx.forget(&stale);
    assert!(
        ctx.holds("c1", &recovered),
        "the recovered command was forgotten"
    );
    ctx.forget(&recovered);
    assert!(ctx.live("c1").is_none());
}
