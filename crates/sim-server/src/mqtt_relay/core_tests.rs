//! Tests of the relay's state machine ([`Core`]): what each event and fault does, at exact
//! instants, with no broker and no clock.

use super::*;

const PULL_IN: Duration = Duration::from_millis(10);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

/// A booted core whose connection is up, and the instant it came up.
fn connected(faults: &[FaultSpec]) -> (Core, Instant) {
    let t0 = Instant::now();
    let mut core = Core::new(PULL_IN, 7, t0);
    assert_eq!(core.boot(faults, t0), vec![Effect::Connect]);
    let fx = core.on_connected(t0);
    assert!(fx.contains(&Effect::Online), "{fx:?}");
    (core, t0)
}

fn states(fx: &[Effect]) -> Vec<bool> {
    fx.iter()
        .filter_map(|e| match e {
            Effect::State { on, .. } => Some(*on),
            _ => None,
        })
        .collect()
}

#[test]
fn the_state_follows_a_set_after_pull_in_with_increasing_seq() {
    let (mut core, t0) = connected(&[]);
    let fx = core.on_set(true, t0 + ms(5));
    assert!(states(&fx).is_empty(), "not before pull_in: {fx:?}");
    assert_eq!(core.next_deadline(t0 + ms(5)), Some(t0 + ms(15)));
    let fx = core.advance(t0 + ms(15));
    assert_eq!(fx, vec![Effect::State { on: true, seq: 2 }]);
    assert_eq!(
        core.heartbeat(t0 + ms(100)),
        vec![Effect::State { on: true, seq: 3 }]
    );
}

#[test]
fn brownout_opens_the_contact_and_clearing_lets_it_follow_again() {
    let (mut core, t0) = connected(&[]);
    core.on_set(true, t0);
    core.advance(t0 + ms(10));
    let fx = core.inject(FaultSpec::now(Fault::Brownout), t0 + ms(20));
    assert_eq!(states(&fx), vec![false], "published on change");
    assert!(states(&core.on_set(true, t0 + ms(30))).is_empty());
    assert_eq!(states(&core.advance(t0 + ms(40))), vec![false]);
    assert!(states(&core.clear(FaultKind::Brownout, t0 + ms(50))).is_empty());
    assert_eq!(states(&core.advance(t0 + ms(60))), vec![true]);
}

#[test]
fn swapped_contacts_report_the_opposite() {
    let (mut core, t0) = connected(&[FaultSpec::now(Fault::SwappedContacts)]);
    assert_eq!(states(&core.heartbeat(t0)), vec![true]);
    core.on_set(true, t0);
    assert_eq!(states(&core.advance(t0 + ms(10))), vec![false]);
}

#[test]
fn a_zombie_ignores_sets_and_publishes_nothing_until_cleared() {
    let (mut core, t0) = connected(&[]);
    assert!(core.inject(FaultSpec::now(Fault::Zombie), t0).is_empty());
    assert!(core.on_set(true, t0).is_empty());
    assert!(core.heartbeat(t0 + ms(100)).is_empty());
    let fx = core.clear(FaultKind::Zombie, t0 + ms(200));
    assert_eq!(
        states(&fx),
        vec![false],
        "back at once, the set was ignored"
    );
}

#[test]
fn power_off_cuts_and_clearing_boots_afresh() {
    let (mut core, t0) = connected(&[]);
    core.on_set(true, t0);
    core.advance(t0 + ms(10));
    assert_eq!(
        core.inject(FaultSpec::now(Fault::PowerOff), t0 + ms(20)),
        vec![Effect::Cut]
    );
    assert!(core.heartbeat(t0 + ms(100)).is_empty());
    assert!(core.on_set(true, t0 + ms(110)).is_empty());
    assert_eq!(
        core.clear(FaultKind::PowerOff, t0 + ms(200)),
        vec![Effect::Connect]
    );
    let fx = core.on_connected(t0 + ms(210));
    assert_eq!(
        fx,
        vec![Effect::Online, Effect::State { on: false, seq: 1 }]
    );
}

#[test]
fn a_reboot_comes_back_by_itself_and_drops_the_pending_set() {
    let (mut core, t0) = connected(&[FaultSpec::now(Fault::LatencyMs { ms: 50 })]);
    core.on_set(true, t0);
    let fx = core.inject(FaultSpec::now(Fault::Reboot { down_ms: 100 }), t0 + ms(10));
    assert_eq!(fx, vec![Effect::Cut]);
    assert_eq!(core.next_deadline(t0 + ms(10)), Some(t0 + ms(110)));
    assert!(core.advance(t0 + ms(109)).is_empty());
    assert_eq!(core.advance(t0 + ms(110)), vec![Effect::Connect]);
    let fx = core.on_connected(t0 + ms(120));
    assert_eq!(states(&fx), vec![false]);
    assert!(states(&core.advance(t0 + ms(500))).is_empty());
    assert_eq!(
        core.specs(),
        vec![FaultSpec::now(Fault::LatencyMs { ms: 50 })]
    );
}

#[test]
fn latency_delays_the_set_taking_effect() {
    let (mut core, t0) = connected(&[FaultSpec::now(Fault::LatencyMs { ms: 100 })]);
    core.on_set(true, t0);
    assert!(states(&core.advance(t0 + ms(100))).is_empty());
    assert_eq!(states(&core.advance(t0 + ms(110))), vec![true]);
}

#[test]
fn drop_rate_one_loses_every_set_and_zero_none() {
    let (mut core, t0) = connected(&[FaultSpec::now(Fault::DropRate { p: 1.0 })]);
    for i in 0..50 {
        core.on_set(true, t0 + ms(i));
    }
    assert_eq!(states(&core.heartbeat(t0 + ms(100))), vec![false]);
    core.inject(FaultSpec::now(Fault::DropRate { p: 0.0 }), t0 + ms(100));
    core.on_set(true, t0 + ms(100));
    assert_eq!(states(&core.advance(t0 + ms(110))), vec![true]);
}

#[test]
fn after_ms_counts_from_the_first_set_or_from_the_injection() {
    let (mut core, t0) = connected(&[FaultSpec::after(Fault::PowerOff, 100)]);
    assert!(core.advance(t0 + ms(1000)).is_empty(), "waits for a set");
    core.on_set(true, t0 + ms(1000));
    assert_eq!(states(&core.advance(t0 + ms(1010))), vec![true]);
    assert_eq!(core.advance(t0 + ms(1100)), vec![Effect::Cut]);
    core.clear(FaultKind::PowerOff, t0 + ms(1200));
    core.on_connected(t0 + ms(1200));
    // A set was taken already: a new delayed fault counts from its injection.
    core.inject(FaultSpec::after(Fault::Brownout, 50), t0 + ms(1300));
    core.on_set(true, t0 + ms(1300));
    assert_eq!(states(&core.advance(t0 + ms(1310))), vec![true]);
    assert_eq!(states(&core.advance(t0 + ms(1350))), vec![false]);
}
