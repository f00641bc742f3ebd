//! The heater's thermostat physics and the sensor's reading (docs/simulator.md).

mod common;

use closedloop_contract::Area;
use common::*;

async fn temperature(d: &closedloop_sim::SimDevice) -> i16 {
    words(d, Area::Input, 0, 1).await[0] as i16
}

#[tokio::test(start_paused = true)]
async fn heats_to_the_setpoint_at_rate_then_holds() {
    let d = device(r#"model = "heater""#);
    assert_eq!(temperature(&d).await, 250, "starts at ambient");
    assert_eq!(regs(&d, 0, &[600]).await, Ok(Ok(())));
    assert_eq!(words(&d, Area::Holding, 0, 1).await, vec![600]);
    advance_ms(1000).await;
    assert_eq!(temperature(&d).await, 250, "not enabled: no heating");
    coils(&d, 0, &[true]).await.unwrap().unwrap();
    assert!(bit(&d, Area::Coil, 0).await);
    advance_ms(10_000).await;
    assert_eq!(temperature(&d).await, 450);
    advance_ms(7_400).await;
    assert!(temperature(&d).await < 600);
    advance_ms(100).await;
    assert_eq!(
        temperature(&d).await,
        600,
        "25 → 60 °C at 2 °C/s takes 17.5 s"
    );
    advance_ms(30_000).await;
    assert_eq!(temperature(&d).await, 600, "holds at the setpoint");
    assert_eq!(d.peek().temperature_c, Some(60.0));
}

#[tokio::test(start_paused = true)]
async fn cools_toward_ambient_and_never_below() {
    let d = device("model = \"heater\"\nrate_c_per_s = 5.0\ncool_c_per_s = 1.0\nambient_c = 20.0");
    regs(&d, 0, &[700]).await.unwrap().unwrap();
    coils(&d, 0, &[true]).await.unwrap().unwrap();
    advance_ms(10_000).await;
    assert_eq!(temperature(&d).await, 700);
    coils(&d, 0, &[false]).await.unwrap().unwrap();
    advance_ms(10_000).await;
    assert_eq!(temperature(&d).await, 600);
    advance_ms(100_000).await;
    assert_eq!(temperature(&d).await, 200, "floors at ambient");
}

#[tokio::test(start_paused = true)]
async fn heater_map_edges() {
    let d = device(r#"model = "heater""#);
    assert_eq!(regs(&d, 1, &[1]).await, exception(2));
    assert_eq!(coils(&d, 1, &[true]).await, exception(2));
    assert_eq!(read(&d, Area::Input, 0, 2).await, exception(2));
    assert_eq!(read(&d, Area::DiscreteInput, 0, 1).await, exception(2));
    assert_eq!(
        regs(&d, 0, &[(-100i16) as u16]).await,
        Ok(Ok(())),
        "setpoints are i16"
    );
    assert_eq!(d.peek().setpoint_c, Some(-10.0));
}

#[tokio::test(start_paused = true)]
async fn sensor_reads_value_times_ten() {
    let d = device("model = \"sensor\"\nvalue = 42.0");
    assert_eq!(words(&d, Area::Input, 0, 1).await, vec![420]);
    assert_eq!(read(&d, Area::Input, 1, 1).await, exception(2));
    assert_eq!(read(&d, Area::Holding, 0, 1).await, exception(2));
    assert_eq!(regs(&d, 0, &[1]).await, exception(2));
    assert_eq!(coils(&d, 0, &[true]).await, exception(2));
    assert_eq!(d.peek().value, Some(42.0));
}

#[tokio::test(start_paused = true)]
async fn sensor_noise_is_bounded_and_seeded() {
    let a = device("model = \"sensor\"\nvalue = 42.0\nnoise = 0.5\nseed = 3");
    let b = device("model = \"sensor\"\nvalue = 42.0\nnoise = 0.5\nseed = 3");
    let c = device("model = \"sensor\"\nvalue = 42.0\nnoise = 0.5\nseed = 4");
    let (mut xs, mut zs) = (Vec::new(), Vec::new());
    for _ in 0..50 {
        let x = words(&a, Area::Input, 0, 1).await[0];
        assert_eq!(x, words(&b, Area::Input, 0, 1).await[0]);
        assert!((415..=425).contains(&x), "{x}");
        xs.push(x);
        zs.push(words(&c, Area::Input, 0, 1).await[0]);
    }
    assert_ne!(xs, zs, "another seed, another sequence");
}
