//! The client against the simulated OPC UA server over loopback: browse, read, monitor, write
//! with the fence rule, method calls, refusals and a server without subscriptions
//! (`opcua_server_gone.rs`: the ways a server goes away).

mod opcua_devices;

use closedloop_contract::Value;
use closedloop_opcua::{Class, Error, MonitorMode, classify};
use closedloop_sim::{Fault, FaultSpec, SimConfig};
use closedloop_sim_server::opcua_sim::{SimOptions, SimServer};
use opcua_devices::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn browse_lists_devices_their_variables_and_methods() {
    let dark_lamp = device(
        "relay",
        SimConfig {
            feedback: Some(false),
            ..SimConfig::default()
        },
    );
    let server = serve(vec![
        ("lamp", relay()),
        ("slide", stepper()),
        ("bare", dark_lamp),
    ])
    .await;
    let client = connect(server.endpoint_url()).await;

    let found = client.browse("i=85", 2, 100).await.expect("browse");
    assert!(!found.truncated);
    let get = |id: &str| found.entries.iter().find(|e| e.node_id == id);
    let lamp = get("ns=2;s=lamp").expect("the lamp object");
    assert_eq!((lamp.node_class.as_str(), lamp.depth), ("Object", 1));
    let commanded = get("ns=2;s=lamp.Commanded").expect("lamp.Commanded");
    assert_eq!(commanded.node_class, "Variable");
    assert_eq!(commanded.data_type.as_deref(), Some("Boolean"));
    assert_eq!(commanded.browse_name, "2:Commanded");
    assert_eq!(commanded.depth, 2);
    assert_eq!(
        get("ns=2;s=slide.TargetMm").and_then(|e| e.data_type.clone()),
        Some("Double".into())
    );
    assert_eq!(
        get("ns=2;s=slide.Start").map(|e| e.node_class.as_str()),
        Some("Method")
    );
    assert!(get("ns=2;s=lamp.Contact").is_some());
    assert!(
        get("ns=2;s=bare.Contact").is_none(),
        "feedback = false has no contact"
    );

    let bounded = client.browse("i=85", 2, 3).await.expect("bounded browse");
    assert!(bounded.truncated);
    assert_eq!(bounded.entries.len(), 3);

    let err = client.browse("ns=2;s=nothing", 1, 10).await.unwrap_err();
    assert_eq!(classify(&err), Class::RegisterInvalid, "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reads_carry_values_statuses_and_reserved_numbers() {
    let server = serve(vec![("lamp", relay()), ("slide", stepper())]).await;
    let client = connect(server.endpoint_url()).await;
    let nodes = [
        node("lamp", "Commanded"),
        node("slide", "PositionMm"),
        node("lamp", "Nothing"),
    ];
    let got = client.read(&nodes).await.expect("read");
    assert_eq!(got[0].value, Some(Value::Bool(false)));
    assert!(got[0].good && got[0].status == "Good");
    assert_eq!(got[0].value_type, "Boolean");
    assert!(got[0].source_ms.is_some());
    assert_eq!(got[1].value, Some(Value::Number(0.0)));
    assert_eq!(got[2].status, "Bad_NodeIdUnknown");
    assert!(!got[2].good && got[2].value.is_none());
    // One request, consecutive numbers; a later read is numbered after.
    assert_eq!(got[1].seq, got[0].seq + 1);
    let again = client.read(&nodes[..1]).await.expect("read");
    assert!(again[0].seq > got[2].seq);

    let err = client.read(&["not a node".to_string()]).await.unwrap_err();
    assert!(matches!(err, Error::InvalidNodeId(_)));
    assert_eq!(classify(&err), Class::RegisterInvalid);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_relay_switching_is_seen_only_after_the_fence() {
    let server = serve(vec![("lamp", relay())]).await;
    let client = connect(server.endpoint_url()).await;
    let (commanded, contact) = (node("lamp", "Commanded"), node("lamp", "Contact"));
    let mut monitor = client.monitor(&[commanded.clone(), contact.clone()], 20);
    let open = next_where(&mut monitor, &contact, |u| {
        u.value == Some(Value::Bool(false))
    })
    .await;
    assert_eq!(monitor.mode(), MonitorMode::Subscription);

    let ack = client
        .write(&commanded, Value::Bool(true))
        .await
        .expect("write");
    assert_eq!(ack.status, "Good");
    assert!(
        open.seq <= ack.seq,
        "a value seen before the write is behind the fence"
    );
    let closed = next_where(&mut monitor, &contact, |u| {
        u.value == Some(Value::Bool(true))
    })
    .await;
    assert!(closed.good);
    assert!(
        closed.seq > ack.seq,
        "evidence comes after the fence: {} vs {}",
        closed.seq,
        ack.seq
    );
    assert!(server.device("lamp").unwrap().peek().contact == Some(true));

    // A read issued after the acknowledgement is fresh too.
    let read = client
        .read(std::slice::from_ref(&contact))
        .await
        .expect("read");
    assert!(read[0].seq > ack.seq);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_and_stop_move_the_stepper() {
    let server = serve(vec![("slide", stepper())]).await;
    let client = connect(server.endpoint_url()).await;
    let moving = node("slide", "Moving");
    let mut monitor = client.monitor(&[moving.clone(), node("slide", "PositionMm")], 20);
    next_where(&mut monitor, &moving, |u| {
        u.value == Some(Value::Bool(false))
    })
    .await;

    client
        .write(&node("slide", "TargetMm"), Value::Number(150.0))
        .await
        .expect("target");
    let (ack, outputs) = client
        .call("ns=2;s=slide", &node("slide", "Start"), vec![])
        .await
        .expect("Start()");
    assert!(outputs.is_empty());
    // Moving goes true in the same instant as the start, so its change may be published before
    // the acknowledgement; the position, changing for 1.5 s, shows motion after the fence.
    next_where(&mut monitor, &moving, |u| {
        u.value == Some(Value::Bool(true))
    })
    .await;
    let position = node("slide", "PositionMm");
    let moved = next_where(&mut monitor, &position, |u| {
        u.seq > ack.seq && matches!(u.value, Some(Value::Number(mm)) if mm > 0.0)
    })
    .await;
    assert!(moved.good);

    let (stop_ack, _) = client
        .call("ns=2;s=slide", &node("slide", "Stop"), vec![])
        .await
        .expect("Stop()");
    next_where(&mut monitor, &moving, |u| {
        u.value == Some(Value::Bool(false))
    })
    .await;
    let after = client
        .read(&[moving.clone(), position.clone()])
        .await
        .expect("read");
    assert!(after[0].seq > stop_ack.seq);
    assert_eq!(after[0].value, Some(Value::Bool(false)));
    let Some(Value::Number(mm)) = after[1].value else {
        panic!("position {:?}", after[1])
    };
    assert!(mm > 0.0 && mm < 150.0, "stopped on the way, at {mm} mm");

    let err = client
        .call("ns=2;s=slide", "ns=2;s=slide.Fly", vec![])
        .await
        .unwrap_err();
    assert_eq!(classify(&err), Class::RegisterInvalid, "{err}");
    let err = client
        .call(
            "ns=2;s=slide",
            &node("slide", "Start"),
            vec![Value::Number(1.0)],
        )
        .await
        .unwrap_err();
    assert!(err.to_string().contains("Bad_TooManyArguments"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn refused_writes_say_why_and_classify() {
    let server = serve(vec![("slide", stepper()), ("lamp", relay())]).await;
    let client = connect(server.endpoint_url()).await;

    let err = client
        .write(&node("slide", "TargetMm"), Value::Number(400.0))
        .await
        .unwrap_err();
    assert_eq!(
        err.to_string(),
        "write ns=2;s=slide.TargetMm: Bad_OutOfRange"
    );
    assert_eq!(classify(&err), Class::RegisterInvalid);

    let err = client
        .write(&node("slide", "PositionMm"), Value::Number(1.0))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("Bad_NotWritable"), "{err}");
    assert_eq!(classify(&err), Class::RegisterInvalid);

    let err = client
        .write(&node("slide", "Nothing"), Value::Number(1.0))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("Bad_NodeIdUnknown"), "{err}");
    assert_eq!(classify(&err), Class::RegisterInvalid);

    // Not representable in the node's type: refused before anything is sent.
    let err = client
        .write(&node("lamp", "Commanded"), Value::Number(2.0))
        .await
        .unwrap_err();
    assert!(matches!(err, Error::Value { .. }), "{err}");
    assert_eq!(classify(&err), Class::RegisterInvalid);

    server
        .device("lamp")
        .unwrap()
        .inject(FaultSpec::now(Fault::Nak));
    let err = client
        .write(&node("lamp", "Commanded"), Value::Bool(true))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("Bad_InternalError"), "{err}");
    assert_eq!(classify(&err), Class::Nak);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_subscriptions_is_polled_with_the_same_fence() {
    let devices = vec![("lamp".to_string(), relay())];
    let options = SimOptions {
        subscriptions: false,
        ..SimOptions::default()
    };
    let server = SimServer::start_with("127.0.0.1:0".parse().unwrap(), devices, options)
        .await
        .expect("sim server");
    let client = connect(server.endpoint_url()).await;
    let (commanded, contact) = (node("lamp", "Commanded"), node("lamp", "Contact"));
    let mut monitor = client.monitor(&[commanded.clone(), contact.clone()], 20);
    next_where(&mut monitor, &contact, |u| {
        u.value == Some(Value::Bool(false))
    })
    .await;
    assert_eq!(
        monitor.mode(),
        MonitorMode::Polling("Bad_TooManySubscriptions".into())
    );

    let ack = client
        .write(&commanded, Value::Bool(true))
        .await
        .expect("write");
    // A poll issued before the fence may already show the new state: it does not count, a poll
    // issued after it does.
    let closed = next_where(&mut monitor, &contact, |u| {
        u.value == Some(Value::Bool(true)) && u.seq > ack.seq
    })
    .await;
    assert!(closed.good);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn device_faults_act_through_the_register_map() {
    let sensor = device(
        "sensor",
        SimConfig {
            value: Some(42.0),
            ..SimConfig::default()
        },
    );
    let server = serve(vec![
        ("lamp", relay()),
        ("gripper", relay()),
        ("slide", stepper()),
        ("probe", sensor),
    ])
    .await;
    let client = connect(server.endpoint_url()).await;
    let fault = |id: &str, f: Fault| server.device(id).unwrap().inject(FaultSpec::now(f));

    // brownout: the write is acknowledged, the contact never closes.
    fault("lamp", Fault::Brownout);
    client
        .write(&node("lamp", "Commanded"), Value::Bool(true))
        .await
        .expect("write");
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    let contact = client.read(&[node("lamp", "Contact")]).await.expect("read");
    assert_eq!(contact[0].value, Some(Value::Bool(false)));

    // stall: the axis stops at the obstruction with its fault output active.
    fault("slide", Fault::Stall { at_mm: Some(20.0) });
    client
        .write(&node("slide", "TargetMm"), Value::Number(150.0))
        .await
        .expect("target");
    let mut monitor = client.monitor(&[node("slide", "Fault")], 20);
    client
        .call("ns=2;s=slide", &node("slide", "Start"), vec![])
        .await
        .expect("Start()");
    next_where(&mut monitor, &node("slide", "Fault"), |u| {
        u.value == Some(Value::Bool(true))
    })
    .await;
    let at = client
        .read(&[node("slide", "PositionMm")])
        .await
        .expect("read")[0]
        .value;
    assert_eq!(at, Some(Value::Number(20.0)));

    // drop_rate 1: the request is lost, the gateway times out, the device counts as offline.
    fault("gripper", Fault::DropRate { p: 1.0 });
    let err = client
        .write(&node("gripper", "Commanded"), Value::Bool(true))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("Bad_Timeout"), "{err}");
    assert_eq!(classify(&err), Class::Offline);

    // latency: answers come late, and right.
    fault("probe", Fault::LatencyMs { ms: 300 });
    let t0 = std::time::Instant::now();
    let value = client.read(&[node("probe", "Value")]).await.expect("read");
    assert!(
        t0.elapsed() >= std::time::Duration::from_millis(300),
        "{:?}",
        t0.elapsed()
    );
    assert_eq!(value[0].value, Some(Value::Number(42.0)));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slow_reader_loses_the_oldest_updates_and_is_told() {
    let noisy = device(
        "sensor",
        SimConfig {
            value: Some(20.0),
            noise: Some(5.0),
            ..SimConfig::default()
        },
    );
    let server = serve(vec![("probe", noisy)]).await;
    let mut cfg = quick(server.endpoint_url());
    cfg.buffer = 4;
    let client = closedloop_opcua::OpcuaClient::connect(cfg).expect("config");
    wait_session(&client, true).await;
    let value = node("probe", "Value");
    let mut monitor = client.monitor(std::slice::from_ref(&value), 20);
    next_where(&mut monitor, &value, |u| u.good).await;
    // A new value every sample; nobody reads for a while.
    tokio::time::sleep(std::time::Duration::from_millis(600)).await;
    let mut last = 0;
    for _ in 0..4 {
        let u = next_where(&mut monitor, &value, |u| u.good).await;
        assert!(u.seq > last, "still in order");
        last = u.seq;
    }
    assert!(monitor.lagged() > 0, "the overflow is counted");
}
