//! The shards against a driver that answers only when the test lets it: when cycles are issued,
//! that an asked read is issued after the cycle in flight, that a silent device holds up no
//! other, and that stopping ends the shard's task.

use super::*;
use closedloop_contract::{Answer, Area, BoxFuture, Data, Driver, Write};
use closedloop_link::{Clock, Link, fence_passed};
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::sync::Semaphore;

/// A driver counting its reads; each read waits for a permit of `gate` (none: answers at once).
#[derive(Default)]
struct Gated {
    reads: AtomicUsize,
    gate: Option<Semaphore>,
}

impl Gated {
    fn shut() -> Arc<Gated> {
        Arc::new(Gated {
            reads: AtomicUsize::new(0),
            gate: Some(Semaphore::new(0)),
        })
    }

    fn reads(&self) -> usize {
        self.reads.load(Ordering::SeqCst)
    }
}

impl Driver for Gated {
    fn read(&self, _: Area, _: u16, count: u16) -> BoxFuture<'_, Answer<Data>> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        Box::pin(async move {
            if let Some(gate) = &self.gate {
                gate.acquire().await.expect("open").forget();
            }
            Ok(Ok(Data::Bits(vec![true; usize::from(count)])))
        })
    }

    fn write(&self, _: Write) -> BoxFuture<'_, Answer<()>> {
        Box::pin(async { Ok(Ok(())) })
    }

    fn describe(&self) -> String {
        "gated".into()
    }
}

/// A relay polled every `poll_ms` whose reads time out after a minute.
fn relay(id: &str, poll_ms: u64) -> Arc<closedloop_plant::Device> {
    let text = format!(
        r#"
[[device]]
id = "{id}"
description = "test"
driver = {{ kind = "sim", model = "relay", timeout_ms = 60000 }}
poll_ms = {poll_ms}
[device.signals]
contact = {{ discrete_input = 0 }}
"#
    );
    let plant =
        closedloop_plant::parse(&text, "t.toml", std::path::Path::new(".")).expect("plant parses");
    Arc::clone(&plant.devices[0])
}

fn link(id: &str, poll_ms: u64, driver: &Arc<Gated>, shards: &mut Shards) -> Arc<RegisterLink> {
    let driver: Arc<dyn Driver> = driver.clone();
    Arc::new(RegisterLink::new(
        relay(id, poll_ms),
        driver,
        Clock::new(),
        shards,
    ))
}

/// Polls `f` once: its output if it is ready.
async fn poll_once<F: Future>(mut f: std::pin::Pin<&mut F>) -> Option<F::Output> {
    let polled = std::future::poll_fn(|cx| std::task::Poll::Ready(f.as_mut().poll(cx))).await;
    match polled {
        std::task::Poll::Ready(out) => Some(out),
        std::task::Poll::Pending => None,
    }
}

/// Waits (bounded) until `cond` holds.
async fn until(what: &str, cond: impl Fn() -> bool) {
    for _ in 0..500 {
        if cond() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("never: {what}");
}

#[test]
fn devices_of_one_poll_period_fill_shards_of_shard_size() {
    let mut shards = Shards::default();
    let seats: Vec<Seat> = (0..SHARD_SIZE * 2 + 10).map(|_| shards.seat(100)).collect();
    let other = shards.seat(250);
    let first = &seats[0].shard;
    assert!(
        seats[..SHARD_SIZE]
            .iter()
            .all(|s| Arc::ptr_eq(&s.shard, first))
    );
    assert!(!Arc::ptr_eq(&seats[SHARD_SIZE].shard, first));
    assert_eq!(seats[SHARD_SIZE * 2 + 9].shard.seats(), 10);
    assert_eq!(seats[SHARD_SIZE + 3].slot, 3);
    assert!(seats.iter().all(|s| !Arc::ptr_eq(&s.shard, &other.shard)));
    assert_eq!(other.shard.period, Duration::from_millis(250));
}

/// The fence rule through a shard: a read asked for while a cycle is in flight is answered by
/// the cycle issued after it, at once — not by the one in flight, and not at the next tick a
/// minute later.
#[tokio::test]
async fn a_read_asked_for_during_a_cycle_is_issued_right_after_it() {
    let driver = Gated::shut();
    let mut shards = Shards::default();
    let relay = link("r", 60_000, &driver, &mut shards);
    let stop = Arc::new(Notify::new());
    let running = tokio::spawn(Arc::clone(&relay).run(Arc::clone(&stop)));
    until("the reader's own first cycle is issued", || {
        driver.reads() == 1
    })
    .await;
    driver.gate.as_ref().expect("gated").add_permits(1);
    until("the shard's first cycle is issued", || driver.reads() == 2).await;
    let fence = relay.fence();
    let mut fresh = std::pin::pin!(relay.fresh(Duration::from_secs(30)));
    assert!(poll_once(fresh.as_mut()).await.is_none(), "no read yet");
    // The ask is in; once the shard has taken it, the first cycle is let answer.
    until("the shard takes the ask", || {
        relay.seat.shard.lock().asked.is_empty()
    })
    .await;
    driver.gate.as_ref().expect("gated").add_permits(1);
    until("the next cycle is issued", || driver.reads() == 3).await;
    let early = poll_once(fresh.as_mut()).await;
    assert!(
        early.is_none(),
        "the cycle in flight answered a read asked after it"
    );
    driver.gate.as_ref().expect("gated").add_permits(1);
    let snap = fresh.await;
    assert!(fence_passed(&snap, fence), "seq {} fence {fence}", snap.seq);
    assert_eq!(snap.seq, 3);
    stop.notify_waiters();
    running.await.expect("stopped");
}

/// A value is stamped with when its read was asked for, not when the answer came: a read held
/// 300 ms on the line carries the time it was issued, so the "already so" rule cannot take a
/// value read during a pull-in for one read after it.
#[tokio::test]
async fn a_value_is_stamped_when_its_read_was_issued_not_when_it_was_answered() {
    let driver = Gated::shut();
    let mut shards = Shards::default();
    let relay = link("r", 60_000, &driver, &mut shards);
    let clock = Clock::new();
    let stop = Arc::new(Notify::new());
    let before = clock.now_ms();
    let running = tokio::spawn(Arc::clone(&relay).run(Arc::clone(&stop)));
    until("the reader's first cycle is issued", || driver.reads() == 1).await;
    let issued_by = clock.now_ms();
    tokio::time::sleep(Duration::from_millis(300)).await;
    driver.gate.as_ref().expect("gated").add_permits(1);
    let mut samples = relay.samples().subscribe();
    let snap = samples
        .wait_for(|s| s.reading("contact").is_some())
        .await
        .expect("a sample")
        .clone();
    let at_ms = snap.read_after("contact", 0).expect("read").at_ms;
    assert!(
        // Two clocks, each rounding to the millisecond: a few ms of slack, against 300 of delay.
        (before - 5..=issued_by + 5).contains(&at_ms),
        "stamped {at_ms}, issued between {before} and {issued_by}, answered {}",
        clock.now_ms()
    );
    stop.notify_waiters();
    running.await.expect("stopped");
}

/// The same rule before the device is seated: a read asked for while its reader's own first
/// cycle is in flight (the shard already running for another device) is answered by the cycle
/// that seating starts at once, not at the shard's next tick a minute later.
#[tokio::test]
async fn a_read_asked_for_during_the_readers_first_cycle_is_issued_when_seated() {
    let quick = Arc::new(Gated::default());
    let gated = Gated::shut();
    let mut shards = Shards::default();
    let a = link("a", 60_000, &quick, &mut shards);
    let b = link("b", 60_000, &gated, &mut shards);
    let stop = Arc::new(Notify::new());
    let first = tokio::spawn(Arc::clone(&a).run(Arc::clone(&stop)));
    until("the shard runs", || a.seat.shard.lock().running).await;
    let second = tokio::spawn(Arc::clone(&b).run(Arc::clone(&stop)));
    until("b's reader issues its first cycle", || gated.reads() == 1).await;
    let fence = b.fence();
    let mut fresh = std::pin::pin!(b.fresh(Duration::from_secs(30)));
    assert!(poll_once(fresh.as_mut()).await.is_none(), "no read yet");
    gated.gate.as_ref().expect("gated").add_permits(1);
    until("a cycle is issued once b is seated", || gated.reads() == 2).await;
    gated.gate.as_ref().expect("gated").add_permits(1);
    let snap = fresh.await;
    assert!(fence_passed(&snap, fence), "seq {} fence {fence}", snap.seq);
    stop.notify_waiters();
    first.await.expect("stopped");
    second.await.expect("stopped");
}

/// A device that never answers waits out its own timeout; the others of its shard keep their
/// period, and it gets no second cycle while its first is in flight. Stopped, its hanging read
/// is dropped with the shard's task.
#[tokio::test]
async fn a_silent_device_holds_up_no_other_in_its_shard() {
    let silent = Gated::shut();
    // It answers its reader's first read, then no more.
    silent.gate.as_ref().expect("gated").add_permits(1);
    let quick = Arc::new(Gated::default());
    let mut shards = Shards::default();
    let a = link("a", 5, &silent, &mut shards);
    let b = link("b", 5, &quick, &mut shards);
    assert!(Arc::ptr_eq(&a.seat.shard, &b.seat.shard));
    let stop = Arc::new(Notify::new());
    let readers = [
        tokio::spawn(Arc::clone(&a).run(Arc::clone(&stop))),
        tokio::spawn(Arc::clone(&b).run(Arc::clone(&stop))),
    ];
    until("the quick device reads ten times", || quick.reads() >= 10).await;
    assert_eq!(silent.reads(), 2, "cycles of the silent device overlapped");
    // Every tick it skipped is counted for /metrics: its reads come less often than poll_ms.
    until("the silent device's skipped ticks are counted", || {
        a.polls_missed() >= 5
    })
    .await;
    stop.notify_waiters();
    for r in readers {
        r.await.expect("stopped");
    }
    // Its read still hangs: stopped devices are not waited for.
    until("the shard's task ends", || !a.seat.shard.lock().running).await;
}

/// Stopping the devices takes them out of their shard; the shard's task then ends and reads
/// nothing more.
#[tokio::test]
async fn stopped_devices_end_their_shards_task() {
    let driver = Arc::new(Gated::default());
    let mut shards = Shards::default();
    let relays: Vec<_> = (0..3)
        .map(|i| link(&format!("r{i}"), 5, &driver, &mut shards))
        .collect();
    let stop = Arc::new(Notify::new());
    let readers: Vec<_> = relays
        .iter()
        .map(|r| tokio::spawn(Arc::clone(r).run(Arc::clone(&stop))))
        .collect();
    until("every device is read", || driver.reads() >= 6).await;
    stop.notify_waiters();
    for r in readers {
        r.await.expect("stopped");
    }
    let shard = &relays[0].seat.shard;
    until("the shard's task ends", || !shard.lock().running).await;
    let reads = driver.reads();
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(driver.reads(), reads, "read after stop");
    assert_eq!(shard.lock().joined, 0);
}

/// A tick behind a cycle issued a whole period ago or more is a poll missed; one behind a read
/// asked since the last tick is not (reads then come more often than the period, not less).
#[tokio::test(start_paused = true)]
async fn only_a_tick_behind_a_cycle_a_whole_period_old_counts_as_a_poll_missed() {
    let driver = Gated::shut();
    let mut shards = Shards::default();
    let relay = link("r", 100, &driver, &mut shards);
    let period = Duration::from_millis(100);
    let mut slot = Slot {
        link: Some(Arc::clone(&relay)),
        busy: true,
        issued: Some(tokio::time::Instant::now()),
        ..Slot::default()
    };
    tokio::time::advance(Duration::from_millis(30)).await;
    missed(&slot, period);
    assert_eq!(relay.polls_missed(), 0, "an asked read 30 ms old");
    tokio::time::advance(Duration::from_millis(70)).await;
    missed(&slot, period);
    assert_eq!(relay.polls_missed(), 1, "a cycle a whole period old");
    slot.busy = false;
    missed(&slot, period);
    assert_eq!(relay.polls_missed(), 1, "nothing in flight");
}
