//! The faults (docs/simulator.md) of simulated CAN nodes, as a host on the pty sees them: silence
//! (`power_off`, `zombie`, `reboot`), late and lost commands (`latency_ms`, `drop_rate`), a
//! stall's fault bit; `nak` and `crc_error` refused at start and at the control endpoint.

mod can_host;

use std::cell::Cell;
use std::collections::BTreeMap;
use std::time::Duration;

use can_host::{Host, fault, lamp, slide};
use closedloop_sim::{Fault, FaultSpec};
use closedloop_sim_server::{
    CanSimError, ControlCommand, ControlServer, Simulated, control, start_buses,
};
use tokio::time::Instant;

/// Switches the lamp on and waits until its contact reports closed.
async fn lamp_on(host: &mut Host) {
    host.send("LampCmd", &[("On", 1.0)]).await;
    host.until("LampStatus", Duration::from_secs(2), |v| {
        v["Contact"] == 1.0
    })
    .await;
}

#[tokio::test]
async fn power_off_silences_the_node_until_cleared_and_it_boots_with_outputs_off() {
    let mut host = Host::start(&[lamp(10, vec![]), slide(vec![])]).await;
    lamp_on(&mut host).await;
    // Through a real control endpoint, as `closedloop sim fault` sends it.
    let server = ControlServer::bind("127.0.0.1:0".parse().unwrap(), host.devices())
        .await
        .unwrap();
    let addr = server.local_addr().unwrap();
    tokio::spawn(server.run());
    let cmd = |line: &str| ControlCommand::parse(line).unwrap();
    control::send(addr, &cmd("fault lamp power_off"))
        .await
        .unwrap();
    host.sync().await;
    host.send("LampCmd", &[("On", 1.0)]).await; // ignored: nobody is listening
    let seen = host.during("LampStatus", Duration::from_millis(300)).await;
    assert!(seen.is_empty(), "a powered-off node sent {seen:?}");
    assert_eq!(
        host.next("SlideStatus").await["Fault"],
        0.0,
        "the other node on the bus goes on"
    );
    control::send(addr, &cmd("clear lamp power_off"))
        .await
        .unwrap();
    let (_, v) = host
        .until("LampStatus", Duration::from_secs(1), |_| true)
        .await;
    assert_eq!(
        (v["Commanded"], v["Contact"]),
        (0.0, 0.0),
        "back with outputs off"
    );
}

#[tokio::test]
async fn zombie_is_silent_but_keeps_its_outputs() {
    let mut host = Host::start(&[lamp(10, vec![])]).await;
    lamp_on(&mut host).await;
    host.control("fault lamp zombie").unwrap();
    host.sync().await;
    host.send("LampCmd", &[("On", 0.0)]).await; // ignored
    let seen = host.during("LampStatus", Duration::from_millis(300)).await;
    assert!(seen.is_empty(), "a zombie sent {seen:?}");
    assert_eq!(
        host.node("lamp").peek().contact,
        Some(true),
        "still running"
    );
    host.control("clear lamp").unwrap();
    let (_, v) = host
        .until("LampStatus", Duration::from_secs(1), |_| true)
        .await;
    assert_eq!((v["Commanded"], v["Contact"]), (1.0, 1.0), "outputs kept");
}

#[tokio::test]
async fn reboot_is_silent_for_down_ms_then_back_with_outputs_off() {
    let mut host = Host::start(&[lamp(10, vec![])]).await;
    lamp_on(&mut host).await;
    let injected = Instant::now();
    host.control("fault lamp reboot down_ms=400").unwrap();
    host.sync().await;
    let (back, v) = host
        .until("LampStatus", Duration::from_secs(2), |_| true)
        .await;
    assert!(
        back - injected >= Duration::from_millis(380),
        "a status {:?} into a 400 ms reboot",
        back - injected
    );
    assert_eq!((v["Commanded"], v["Contact"]), (0.0, 0.0), "{v:?}");
    assert!(host.node("lamp").faults().is_empty(), "the reboot is spent");
    // Working again.
    lamp_on(&mut host).await;
}

#[tokio::test]
async fn a_stall_from_the_table_stops_the_slide_with_its_fault_bit() {
    let mut host = Host::start(&[slide(vec![fault("stall at_mm=50")])]).await;
    host.send("SlideCmd", &[("TargetMm", 120.0), ("Start", 1.0)])
        .await;
    let (_, v) = host
        .until("SlideStatus", Duration::from_secs(2), |v| v["Fault"] == 1.0)
        .await;
    assert_eq!(v["Moving"], 0.0, "{v:?}");
    assert!((v["PositionMm"] - 50.0).abs() <= 0.5, "{v:?}");
    // Reset clears the fault bit; the obstruction is still there until the stall is cleared.
    host.send("SlideCmd", &[("TargetMm", 50.0), ("Reset", 1.0)])
        .await;
    host.until("SlideStatus", Duration::from_secs(1), |v| v["Fault"] == 0.0)
        .await;
    host.control("clear slide stall").unwrap();
    host.send("SlideCmd", &[("TargetMm", 100.0), ("Start", 1.0)])
        .await;
    let (_, v) = host
        .until("SlideStatus", Duration::from_secs(2), |v| {
            v["PositionMm"] == 100.0 && v["Moving"] == 0.0
        })
        .await;
    assert_eq!(v["Fault"], 0.0);
}

#[tokio::test]
async fn latency_delays_commands_while_status_keeps_its_period() {
    let mut host = Host::start(&[lamp(10, vec![])]).await;
    host.control("fault lamp latency_ms ms=400").unwrap();
    host.next("LampStatus").await;
    let sent = Instant::now();
    host.send("LampCmd", &[("On", 1.0)]).await;
    let statuses = Cell::new(0);
    let (at, _) = host
        .until("LampStatus", Duration::from_secs(2), |v| {
            statuses.set(statuses.get() + 1);
            v["Commanded"] == 1.0
        })
        .await;
    let waited = at - sent;
    assert!(
        waited >= Duration::from_millis(400),
        "took effect after {waited:?}"
    );
    // 20 ms periods across the 400 ms wait: about 20 statuses, not one late burst.
    assert!(
        statuses.get() >= 8,
        "only {} statuses while waiting",
        statuses.get()
    );
    host.control("clear lamp latency_ms").unwrap();
    let sent = Instant::now();
    host.send("LampCmd", &[("On", 0.0)]).await;
    let (at, _) = host
        .until("LampStatus", Duration::from_secs(1), |v| {
            v["Commanded"] == 0.0
        })
        .await;
    assert!(at - sent < Duration::from_millis(300), "{:?}", at - sent);
}

#[tokio::test]
async fn drop_rate_one_loses_every_command_while_status_flows() {
    let mut host = Host::start(&[lamp(10, vec![fault("drop_rate p=1")])]).await;
    for _ in 0..5 {
        host.send("LampCmd", &[("On", 1.0)]).await;
    }
    host.sync().await;
    let seen = host.during("LampStatus", Duration::from_millis(300)).await;
    assert!(seen.len() >= 5, "only {} statuses in 300 ms", seen.len());
    assert!(seen.iter().all(|v| v["Commanded"] == 0.0), "{seen:?}");
    assert_eq!(host.node("lamp").peek().coils, [false]);
    assert_eq!(
        host.node("lamp").faults(),
        [FaultSpec::now(Fault::DropRate { p: 1.0 })]
    );
    host.control("clear lamp drop_rate").unwrap();
    lamp_on(&mut host).await;
}

#[tokio::test]
async fn nak_and_crc_error_are_refused_at_start_and_at_the_control_endpoint() {
    for kind in ["nak", "crc_error"] {
        let e = start_buses(&[lamp(10, vec![fault("latency_ms ms=5"), fault(kind)])])
            .await
            .map(|_| ())
            .unwrap_err();
        assert!(matches!(e, CanSimError::Sim { .. }), "{e:?}");
        let msg = e.to_string();
        assert!(
            msg.contains("\"lamp\"") && msg.contains("faults[1].kind") && msg.contains(kind),
            "{msg}"
        );
    }
    let host = Host::start(&[lamp(10, vec![])]).await;
    let devices: BTreeMap<String, Simulated> = host.devices();
    let run = |line: &str| ControlCommand::parse(line).unwrap().execute(&devices);
    for kind in ["nak", "crc_error"] {
        let e = run(&format!("fault lamp {kind}")).unwrap_err();
        assert!(
            e.contains("lamp") && e.contains(kind) && e.contains("CAN"),
            "{e}"
        );
    }
    let e = run("fault lamp stall at_mm=3").unwrap_err();
    assert!(e.contains("stall"), "{e}");
    let e = run("fault lamp latency_ms").unwrap_err();
    assert!(e.contains("fault.ms"), "{e}");
    run("fault lamp latency_ms ms=20 after_ms=100").unwrap();
    run("fault lamp brownout").unwrap();
    assert_eq!(
        host.node("lamp").faults(),
        [
            FaultSpec::now(Fault::Brownout),
            FaultSpec::after(Fault::LatencyMs { ms: 20 }, 100),
        ]
    );
    run("clear lamp").unwrap();
    assert!(host.node("lamp").faults().is_empty());
}
