//! Tests of DBC loading: what loads, what is refused and with which words.

use super::*;

const FILE: &str = r#"VERSION ""

NS_ :

BS_:

BU_: ECU

BO_ 496 Engine: 8 ECU
 SG_ Temperature : 0|12@0- (0.01,250) [229.52|270.47] "degK" Vector__XXX
 SG_ Enable : 7|1@0+ (1,0) [0|0] "-" Vector__XXX
 SG_ Speed : 24|16@1+ (0.1,0) [0|6553.5] "km/h" Vector__XXX

BO_ 2147484000 Ext: 8 ECU
 SG_ Mode M : 0|8@1+ (1,0) [0|0] "" Vector__XXX
 SG_ A m1 : 8|16@1- (1,0) [0|0] "" Vector__XXX
 SG_ B m2 : 8|8@1+ (1,0) [0|0] "" Vector__XXX

BO_ 300 Floaty: 8 ECU
 SG_ F : 0|32@1- (1,0) [0|0] "" Vector__XXX

BO_ 301 Outside: 2 ECU
 SG_ Wide : 8|16@1+ (1,0) [0|0] "" Vector__XXX

SIG_VALTYPE_ 300 F : 1;
"#;

#[test]
fn loads_what_it_supports_and_refuses_the_rest_by_name() {
    let dbc = Dbc::parse("t.dbc", FILE).unwrap();
    let names: Vec<&str> = dbc.messages().iter().map(Message::name).collect();
    assert_eq!(names, ["Engine", "Ext"]);
    let engine = dbc.message("Engine").unwrap();
    assert_eq!(
        (engine.id(), engine.extended(), engine.size()),
        (496, false, 8)
    );
    let t = engine.signal("Temperature").unwrap();
    assert_eq!(
        (t.start_bit, t.length, t.byte_order, t.signed),
        (0, 12, ByteOrder::Big, true)
    );
    assert_eq!(
        (t.factor, t.offset, t.min, t.max),
        (0.01, 250.0, 229.52, 270.47)
    );
    assert_eq!(t.unit, "degK");
    let ext = dbc.message("Ext").unwrap();
    assert_eq!((ext.id(), ext.extended()), (352, true));
    assert_eq!(ext.switch().map(|s| s.name.as_str()), Some("Mode"));
    assert_eq!(ext.signal("B").unwrap().mux, Mux::When(2));
    assert!(std::ptr::eq(dbc.message_for(352, true).unwrap(), ext));
    assert!(dbc.message_for(352, false).is_none());

    let float = dbc.message("Floaty").unwrap_err().to_string();
    assert_eq!(
        float,
        "t.dbc: message Floaty, signal F: IEEE float signals (SIG_VALTYPE_ 1 or 2) are not supported"
    );
    let outside = dbc.message("Outside").unwrap_err().to_string();
    assert!(
        outside.starts_with("t.dbc: message Outside, signal Wide: bit 16"),
        "{outside}"
    );
    assert_eq!(dbc.refused().count(), 2);
    assert_eq!(
        dbc.message("Nope").unwrap_err().to_string(),
        "t.dbc: no message named Nope"
    );
}

#[test]
fn syntax_errors_name_the_file() {
    let e = Dbc::parse("bad.dbc", "BO_ x").unwrap_err().to_string();
    assert!(e.starts_with("bad.dbc: "), "{e}");
}

#[test]
fn a_missing_file_names_the_path() {
    let e = Dbc::load("/nonexistent/x.dbc").unwrap_err().to_string();
    assert!(e.starts_with("/nonexistent/x.dbc: cannot read"), "{e}");
}

#[test]
fn standard_ids_wider_than_11_bits_are_refused_not_truncated() {
    let text = FILE.replace("BO_ 496 Engine", "BO_ 66032 Engine");
    let dbc = Dbc::parse("t.dbc", &text).unwrap();
    let e = dbc.message("Engine").unwrap_err().to_string();
    assert!(
        e.contains("does not fit a standard 11-bit identifier"),
        "{e}"
    );
}

#[test]
fn extended_multiplexing_is_refused_but_restated_simple_multiplexing_is_not() {
    let text = format!("{FILE}\nSG_MUL_VAL_ 2147484000 A Mode 1-1;\n");
    assert!(Dbc::parse("t.dbc", &text).unwrap().message("Ext").is_ok());
    let text = format!("{FILE}\nSG_MUL_VAL_ 2147484000 A Mode 1-1, 3-4;\n");
    let dbc = Dbc::parse("t.dbc", &text).unwrap();
    let e = dbc.message("Ext").unwrap_err().to_string();
    assert_eq!(
        e,
        "t.dbc: message Ext, signal A: extended multiplexing is not supported (SG_MUL_VAL_ selects it by Mode in 1-1, 3-4)"
    );
}

#[test]
fn long_names_and_fd_come_from_attributes() {
    let text = format!(
        "{FILE}\nBA_DEF_ BO_ \"VFrameFormat\" ENUM \"StandardCAN\",\"ExtendedCAN\",\"StandardCAN_FD\";\n\
         BA_DEF_ SG_ \"SystemSignalLongSymbol\" STRING ;\n\
         BA_DEF_DEF_ \"VFrameFormat\" \"StandardCAN\";\n\
         BA_ \"VFrameFormat\" BO_ 496 2;\n\
         BA_ \"SystemSignalLongSymbol\" SG_ 496 Speed \"VehicleSpeedOverGround\";\n"
    );
    let dbc = Dbc::parse("t.dbc", &text).unwrap();
    let engine = dbc.message("Engine").unwrap();
    assert!(engine.fd());
    assert!(engine.signal("VehicleSpeedOverGround").is_some());
    assert!(!dbc.message("Ext").unwrap().fd());
}

#[test]
fn values_the_file_labels_not_available_decode_to_no_value_and_the_rest_to_numbers() {
    let text = format!(
        "{FILE}\nVAL_ 496 Speed 65535 \"SNA\" 65534 \"Error\" 0 \"Stopped\" ;\n\
         VAL_ 496 Enable 1 \"Signal not available\" ;\n"
    );
    let dbc = Dbc::parse("t.dbc", &text).unwrap();
    let engine = dbc.message("Engine").unwrap();
    let speed = engine.signal("Speed").unwrap();
    assert_eq!(speed.not_available, vec![(65535, "SNA".to_string())]);
    let all_ones = [0, 0, 0, 0xFF, 0xFF, 0, 0, 0];
    assert_eq!(crate::not_available(speed, &all_ones), Some((65535, "SNA")));
    let error = [0, 0, 0, 0xFE, 0xFF, 0, 0, 0];
    assert_eq!(
        crate::not_available(speed, &error),
        None,
        "Error is a reading"
    );
    assert_eq!(
        crate::not_available(speed, &[0; 3]),
        None,
        "too short: no field"
    );
    let enable = engine.signal("Enable").unwrap();
    assert_eq!(
        crate::not_available(enable, &[0x80, 0, 0, 0, 0, 0, 0, 0])
            .unwrap()
            .0,
        1
    );
    // `read`, which every consumer of received frames uses, says the same per signal: a
    // value, or not available — never the scaled number of the mark.
    let fields = crate::read(engine, &all_ones);
    let field = |name: &str| fields.iter().find(|(n, _)| *n == name).map(|(_, f)| *f);
    let sna = crate::Field::NotAvailable {
        raw: 65535,
        label: "SNA",
    };
    assert_eq!(field("Speed"), Some(sna));
    assert_eq!(field("Speed").and_then(crate::Field::value), None);
    let decoded = crate::decode(engine, &all_ones);
    assert_eq!(fields.len(), decoded.len(), "the same signals as decode");
    for ((n, f), (m, v)) in fields.iter().zip(&decoded) {
        assert_eq!(n, m);
        if *n != "Speed" {
            assert_eq!(*f, crate::Field::Value(*v), "{n}");
        }
    }
    let error = crate::read(engine, &error);
    assert!(matches!(
        error.iter().find(|(n, _)| *n == "Speed"),
        Some((_, crate::Field::Value(_)))
    ));
}

#[test]
fn labels_that_say_not_available_are_recognised_whatever_their_spelling() {
    for label in [
        "SNA",
        "sna",
        "Not Available",
        "N/A",
        "signal_not_available",
        "Invalid",
    ] {
        assert!(means_not_available(label), "{label}");
    }
    for label in ["Error", "Off", "Snap", "Not ready", ""] {
        assert!(!means_not_available(label), "{label}");
    }
}

#[test]
fn a_signed_signal_s_not_available_mark_written_as_its_bit_pattern_matches() {
    // Temperature is 12 bits, signed: all ones reads -1, and files write the mark as 4095.
    let text = format!("{FILE}\nVAL_ 496 Temperature 4095 \"SNA\" ;\n");
    let dbc = Dbc::parse("t.dbc", &text).unwrap();
    let t = dbc
        .message("Engine")
        .unwrap()
        .signal("Temperature")
        .unwrap();
    assert_eq!(crate::not_available(t, &[0xFF; 8]), Some((4095, "SNA")));
    assert_eq!(crate::not_available(t, &[0; 8]), None);
}
