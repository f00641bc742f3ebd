//! A CAN plant is checked against its DBC file when the drivers are built (`closedloop check`
//! builds them too): a message or signal the DBC lacks is refused, naming the device and the key.

use closedloop_connect::{ConnectError, build_drivers};

const DBC: &str = r#"VERSION ""

NS_ :

BS_:

BU_: NODE

BO_ 256 LampCmd: 1 GW
 SG_ On : 0|1@1+ (1,0) [0|1] "" NODE

BO_ 257 LampStatus: 1 NODE
 SG_ Contact : 0|1@1+ (1,0) [0|1] "" GW
"#;

fn plant(dir: &std::path::Path, signal: &str, write: &str) -> closedloop_plant::Plant {
    std::fs::write(dir.join("lamp.dbc"), DBC).unwrap();
    let src = format!(
        r#"
[[device]]
id = "lamp"
description = "Lamp node"
driver = {{ kind = "can", interface = "slcan:/dev/null-adapter", bitrate = 500000, dbc = "lamp.dbc" }}
[device.signals]
contact = {{ message = "LampStatus", signal = "{signal}", type = "bool" }}
[[device.action]]
name = "switch"
description = "Switch the lamp."
params = {{ on = {{ type = "bool" }} }}
write = [{{ message = "{write}", signals = {{ On = "params.on" }} }}]
done_when = "contact == params.on"
expect_s = 0.05
"#
    );
    closedloop_plant::parse(&src, "lamp.toml", dir).unwrap_or_else(|e| panic!("{e}"))
}

fn refusal(p: &closedloop_plant::Plant) -> String {
    match build_drivers(p) {
        Err(e @ ConnectError::Driver { .. }) => e.to_string(),
        Err(e) => panic!("another error: {e}"),
        Ok(_) => panic!("accepted"),
    }
}

#[test]
fn signals_and_writes_must_exist_in_the_dbc() {
    let dir = tempfile::tempdir().unwrap();
    assert!(build_drivers(&plant(dir.path(), "Contact", "LampCmd")).is_ok());
    assert!(build_drivers(&plant(dir.path(), "Contact", "0x100")).is_ok());

    let e = refusal(&plant(dir.path(), "Contakt", "LampCmd"));
    assert!(
        e.contains("\"lamp\"") && e.contains("signals.contact") && e.contains("Contakt"),
        "{e}"
    );
    let e = refusal(&plant(dir.path(), "Contact", "LampCommand"));
    assert!(
        e.contains("action switch: write") && e.contains("LampCommand"),
        "{e}"
    );
    let e = refusal(&plant(dir.path(), "Contact", "0x300"));
    assert!(e.contains("0x300"), "{e}");
}
