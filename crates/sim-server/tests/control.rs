//! The control endpoint over a real loopback socket: faults injected and cleared at run time,
//! errors that name what was wrong, and loopback only.

use closedloop_sim::{Fault, FaultSpec, SimConfig, SimDevice};
use closedloop_sim_server::{ControlCommand, ControlError, ControlServer, Simulated, control};
use std::collections::BTreeMap;
use std::net::SocketAddr;

async fn control_for(devices: BTreeMap<String, Simulated>) -> SocketAddr {
    let server = ControlServer::bind("127.0.0.1:0".parse().unwrap(), devices)
        .await
        .unwrap();
    let addr = server.local_addr().unwrap();
    tokio::spawn(server.run());
    addr
}

fn cmd(line: &str) -> ControlCommand {
    ControlCommand::parse(line).unwrap()
}

#[tokio::test]
async fn faults_are_injected_and_cleared_through_the_socket() {
    let slide = SimDevice::from_config(&SimConfig {
        model: "stepper".into(),
        ..SimConfig::default()
    })
    .unwrap();
    let addr = control_for(BTreeMap::from([(
        "slide".to_string(),
        slide.clone().into(),
    )]))
    .await;
    control::send(addr, &cmd("fault slide latency_ms ms=30"))
        .await
        .unwrap();
    control::send(addr, &cmd("fault slide stall at_mm=70"))
        .await
        .unwrap();
    assert_eq!(
        slide.faults(),
        vec![
            FaultSpec::now(Fault::LatencyMs { ms: 30 }),
            FaultSpec::now(Fault::Stall { at_mm: Some(70.0) })
        ]
    );
    control::send(addr, &cmd("clear slide stall"))
        .await
        .unwrap();
    assert_eq!(
        slide.faults(),
        vec![FaultSpec::now(Fault::LatencyMs { ms: 30 })]
    );
    control::send(addr, &cmd("clear slide")).await.unwrap();
    assert!(slide.faults().is_empty());

    let refused = control::send(addr, &cmd("fault slide brownout")).await;
    let Err(ControlError::Refused(msg)) = refused else {
        panic!("{refused:?}")
    };
    assert!(msg.contains("slide") && msg.contains("brownout"), "{msg}");
    let refused = control::send(addr, &cmd("clear gripper")).await;
    let Err(ControlError::Refused(msg)) = refused else {
        panic!("{refused:?}")
    };
    assert!(msg.contains("gripper") && msg.contains("slide"), "{msg}");
}

#[tokio::test]
async fn the_endpoint_refuses_to_bind_beyond_loopback() {
    let bound = ControlServer::bind("0.0.0.0:0".parse().unwrap(), BTreeMap::new()).await;
    assert!(
        matches!(bound, Err(ControlError::NotLoopback(_))),
        "{bound:?}"
    );
}
