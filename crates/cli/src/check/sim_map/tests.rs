//! The maps against the simulator itself: every address of every area is read and
//! written through `SimDevice` as a `Driver`, and must answer exception 2 exactly where the
//! table has nothing (or nothing writable); the types are checked by what the registers hold.

use super::*;
use closedloop_contract::{Data, Driver, Exception, Write};
use closedloop_sim::SimDevice;

const AREAS: [Area; 4] = [Area::Coil, Area::DiscreteInput, Area::Holding, Area::Input];

fn device(model: &str, extra: impl FnOnce(&mut SimConfig)) -> (SimDevice, &'static [Field]) {
    let mut cfg = SimConfig {
        model: model.into(),
        ..SimConfig::default()
    };
    extra(&mut cfg);
    let fields = map(&cfg.validate().unwrap().model).unwrap();
    (SimDevice::from_config(&cfg).unwrap(), fields)
}

fn models() -> Vec<(&'static str, SimDevice, &'static [Field])> {
    let (relay, rf) = device("relay", |_| {});
    let (mute, mf) = device("relay", |c| c.feedback = Some(false));
    let (stepper, sf) = device("stepper", |_| {});
    let (heater, hf) = device("heater", |_| {});
    let (sensor, nf) = device("sensor", |c| c.value = Some(-1.5));
    vec![
        ("relay", relay, rf),
        ("relay feedback=false", mute, mf),
        ("stepper", stepper, sf),
        ("heater", heater, hf),
        ("sensor", sensor, nf),
    ]
}

/// Addresses probed: the low ones, and the 1-based numbers people write by mistake.
fn addresses() -> impl Iterator<Item = u16> {
    (0..64).chain([10001, 30001, 40001, 40002, 65535])
}

#[tokio::test(flavor = "current_thread")]
async fn every_readable_address_is_in_the_table_and_nothing_else() {
    for (name, dev, fields) in models() {
        for area in AREAS {
            for addr in addresses() {
                let answer = dev.read(area, addr, 1).await.unwrap();
                let listed = field_at(fields, area, addr).is_some();
                match answer {
                    Ok(_) => assert!(listed, "{name}: {area} {addr} answers but is not listed"),
                    Err(e) => {
                        assert_eq!(e, Exception::ILLEGAL_DATA_ADDRESS, "{name} {area} {addr}");
                        assert!(!listed, "{name}: {area} {addr} is listed but refused");
                    }
                }
            }
        }
    }
}

#[tokio::test(flavor = "current_thread")]
async fn every_writable_address_is_writable_in_the_table_and_nothing_else() {
    for (name, dev, fields) in models() {
        for addr in addresses() {
            // false triggers nothing on a stepper's command coils; 0 is inside travel.
            let coil = dev
                .write(Write::Coils {
                    start: addr,
                    values: vec![false],
                })
                .await
                .unwrap();
            let writable = field_at(fields, Area::Coil, addr).is_some_and(|f| f.writable);
            assert_eq!(coil.is_ok(), writable, "{name}: coil {addr} write {coil:?}");
            let reg = dev
                .write(Write::Registers {
                    start: addr,
                    values: vec![0],
                })
                .await
                .unwrap();
            let writable = field_at(fields, Area::Holding, addr).is_some_and(|f| f.writable);
            assert_eq!(
                reg.is_ok(),
                writable,
                "{name}: holding {addr} write {reg:?}"
            );
            if let Err(e) = reg {
                assert_eq!(e, Exception::ILLEGAL_DATA_ADDRESS, "{name} holding {addr}");
            }
        }
    }
}

#[tokio::test(flavor = "current_thread")]
async fn the_types_are_what_the_registers_hold() {
    // stepper: the target is an i32 in 0.01 mm over holding 0–1, high word first, and the
    // encoder position over holding 2–3 reaches it after a start on coil 0.
    let (slide, _) = device("stepper", |c| {
        c.travel_mm = Some([-300.0, 300.0]);
        c.speed_mm_s = Some(1000.0);
    });
    let raw = (-15000i32) as u32;
    let words = vec![(raw >> 16) as u16, raw as u16];
    let w = Write::Registers {
        start: 0,
        values: words.clone(),
    };
    assert_eq!(slide.write(w).await, Ok(Ok(())));
    let start = Write::Coils {
        start: 0,
        values: vec![true],
    };
    assert_eq!(slide.write(start).await, Ok(Ok(())));
    assert_eq!(
        slide.read(Area::DiscreteInput, 0, 2).await,
        Ok(Ok(Data::Bits(vec![true, false])))
    );
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;
    assert_eq!(
        slide.read(Area::Holding, 2, 2).await,
        Ok(Ok(Data::Words(words)))
    );
    // heater: setpoint and temperature are i16 in 0.1 °C (ambient 25.0 reads 250).
    let (oven, _) = device("heater", |_| {});
    assert_eq!(
        oven.read(Area::Input, 0, 1).await,
        Ok(Ok(Data::Words(vec![250])))
    );
    assert_eq!(
        oven.read(Area::Holding, 0, 1).await,
        Ok(Ok(Data::Words(vec![250])))
    );
    // sensor: an i16 in tenths (-1.5 reads -15).
    let (probe, _) = device("sensor", |c| c.value = Some(-1.5));
    assert_eq!(
        probe.read(Area::Input, 0, 1).await,
        Ok(Ok(Data::Words(vec![(-15i16) as u16])))
    );
}

#[test]
fn one_based_hints_name_the_0_based_address() {
    assert_eq!(
        one_based_hint(Area::Holding, 40001).unwrap(),
        "did you mean holding = 0? Addresses are 0-based PDU addresses; 40001 is holding = 0"
    );
    assert_eq!(
        one_based_hint(Area::Input, 30011).unwrap(),
        "did you mean input = 10? Addresses are 0-based PDU addresses; 30001 is input = 0"
    );
    assert!(one_based_hint(Area::Holding, 40000).is_none());
    assert!(one_based_hint(Area::Coil, 40001).is_none());
}
