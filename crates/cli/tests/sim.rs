//! `closedloop sim` as its own process: the example Modbus plant served on free ports announced
//! on stdout, a fault injected and cleared through `closedloop sim fault` / `clear`, observed by
//! a Modbus client no one here wrote (tokio-modbus), and a clean exit on SIGTERM.

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, Output, Stdio};
use tokio_modbus::ExceptionCode;
use tokio_modbus::client::{Reader, tcp};

fn closedloop() -> Command {
    Command::new(env!("CARGO_BIN_EXE_closedloop"))
}

/// Kills the simulator if the test fails before its orderly SIGTERM.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// What `closedloop sim` announced: each device's (unit, address), and the control endpoint.
struct Announced {
    units: BTreeMap<String, (u8, SocketAddr)>,
    control: SocketAddr,
}

/// Reads the announcement lines up to the control endpoint's; they come only once every port
/// accepts connections, so nothing here sleeps.
fn announced(child: &mut Child) -> Announced {
    let stdout = child.stdout.take().expect("piped stdout");
    let mut lines = BufReader::new(stdout).lines();
    let mut units = BTreeMap::new();
    loop {
        let line = lines
            .next()
            .expect("closedloop sim exited before announcing its control endpoint")
            .expect("utf-8 stdout");
        let words: Vec<&str> = line.split_whitespace().collect();
        match words.as_slice() {
            ["closedloop", "sim:", "control", "on", addr] => {
                return Announced {
                    units,
                    control: addr.parse().expect("an ip:port"),
                };
            }
            ["closedloop", "sim:", device, "unit", unit, "on", addr] => {
                let unit = unit.parse().expect("a unit id");
                units.insert(
                    device.to_string(),
                    (unit, addr.parse().expect("an ip:port")),
                );
            }
            _ => panic!("unexpected stdout line {line:?}"),
        }
    }
}

fn sim_request(control: SocketAddr, args: &[&str]) -> Output {
    closedloop()
        .arg("sim")
        .arg(args[0])
        .arg("--control")
        .arg(control.to_string())
        .args(&args[1..])
        .output()
        .unwrap()
}

#[tokio::test]
async fn sim_serves_the_example_plant_and_takes_faults_at_run_time() {
    let example = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../examples/modbus-workshop.toml");
    let text = std::fs::read_to_string(example).unwrap();
    let text = text.replace("listen = \"127.0.0.1:1502\"", "listen = \"127.0.0.1:0\"");
    let dir = tempfile::tempdir().unwrap();
    let plant = dir.path().join("modbus-workshop.toml");
    std::fs::write(&plant, text).unwrap();

    let child = closedloop()
        .arg("sim")
        .arg(&plant)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut sim = Running(child);
    let Announced { units, control } = announced(&mut sim.0);
    let names: Vec<&str> = units.keys().map(String::as_str).collect();
    assert_eq!(names, ["gripper", "lamp", "oven", "slide"]);
    let (unit, addr) = units["slide"];
    assert_ne!(addr.port(), 0, "the real port is announced");
    let mut slide = tcp::connect_slave(addr, unit.into()).await.unwrap();
    assert_eq!(
        slide.read_holding_registers(2, 2).await.unwrap(),
        Ok(vec![0, 0])
    );

    let out = sim_request(control, &["fault", "slide", "nak"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let answer = slide.read_holding_registers(2, 2).await.unwrap();
    assert_eq!(answer, Err(ExceptionCode::ServerDeviceFailure));

    let out = sim_request(control, &["fault", "conveyor", "nak"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("conveyor") && stderr.contains("slide"),
        "{stderr}"
    );

    let out = sim_request(control, &["clear", "slide", "nak"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        slide.read_holding_registers(2, 2).await.unwrap(),
        Ok(vec![0, 0])
    );

    let pid = sim.0.id().to_string();
    assert!(
        Command::new("kill")
            .args(["-TERM", &pid])
            .status()
            .unwrap()
            .success()
    );
    let status = sim.0.wait().unwrap();
    assert_eq!(status.code(), Some(0), "SIGTERM is a clean exit");
}
