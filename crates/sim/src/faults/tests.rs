//! Fault injection: each fault's effect on the simulated device, static, timed and injected at run time.

use super::*;

#[test]
fn kinds_round_trip_through_their_plant_spelling() {
    for kind in FaultKind::ALL {
        assert_eq!(kind.to_string().parse::<FaultKind>(), Ok(kind));
    }
    assert!("stal".parse::<FaultKind>().is_err());
}

#[tokio::test(start_paused = true)]
async fn delayed_faults_wait_for_the_first_write() {
    let mut s = Schedule::default();
    let t0 = Instant::now();
    s.push(FaultSpec::after(Fault::Nak, 50), t0);
    assert_eq!(s.next_due(t0 + Duration::from_secs(10)), None);
    let tw = t0 + Duration::from_millis(5);
    s.on_write(tw);
    s.on_write(tw + Duration::from_millis(30)); // only the first write counts
    assert_eq!(s.next_due(tw + Duration::from_millis(49)), None);
    let due = s.next_due(tw + Duration::from_millis(50));
    assert_eq!(due, Some((tw + Duration::from_millis(50), Due::Strike(0))));
}

#[tokio::test(start_paused = true)]
async fn next_event_sees_ahead_and_a_reboot_ends_down_ms_after_it_struck() {
    let mut s = Schedule::default();
    let t0 = Instant::now();
    let ms = Duration::from_millis;
    s.on_write(t0);
    s.push(FaultSpec::after(Fault::Reboot { down_ms: 100 }, 50), t0);
    s.push(FaultSpec::after(Fault::Zombie, 50), t0);
    assert_eq!(s.next_due(t0), None);
    // Ties go to the fault added first.
    assert_eq!(s.next_event(), Some((t0 + ms(50), Due::Strike(0))));
    assert_eq!(
        s.strike(0, t0 + ms(50)),
        Some(Fault::Reboot { down_ms: 100 })
    );
    assert_eq!(
        s.struck().collect::<Vec<_>>(),
        [Fault::Reboot { down_ms: 100 }]
    );
    assert_eq!(s.next_event(), Some((t0 + ms(50), Due::Strike(1))));
    s.strike(1, t0 + ms(50));
    assert_eq!(s.next_event(), Some((t0 + ms(150), Due::Recover(0))));
    assert_eq!(s.next_due(t0 + ms(149)), None);
    assert_eq!(s.take(FaultKind::Zombie), Some((Fault::Zombie, true)));
    assert_eq!(s.take(FaultKind::Zombie), None);
}
