//! The contract's codes and statuses round-trip through their spelling; register answers map to the right code.

use super::*;

fn w() -> Write {
    Write::Coils {
        start: 0,
        values: vec![true],
    }
}

#[test]
fn exceptions_map_to_contract_codes() {
    let code = |e: u8| {
        register_write(Ok(Err(Exception(e))), &w())
            .unwrap_err()
            .code
    };
    assert_eq!(code(1), ErrorCode::RegisterInvalid);
    assert_eq!(code(2), ErrorCode::RegisterInvalid);
    assert_eq!(code(3), ErrorCode::RegisterInvalid);
    assert_eq!(code(4), ErrorCode::BusNak);
    assert_eq!(code(0x0B), ErrorCode::DeviceOffline);
    assert_eq!(code(0x0A), ErrorCode::DeviceOffline);
    assert!(
        register_write(Ok(Err(Exception(6))), &w())
            .unwrap_err()
            .transient
    );
    assert!(register_write(Ok(Err(Exception(5))), &w()).is_ok());
    let e = register_write(Ok(Err(Exception(4))), &w()).unwrap_err();
    assert!(e.detail.contains("Server Device Failure"), "{}", e.detail);
}

#[test]
fn transport_errors_are_transient_and_may_have_applied() {
    let e = register_write(Err(TransportError::Crc), &w()).unwrap_err();
    assert_eq!(
        (e.code, e.transient, e.maybe_applied),
        (ErrorCode::CrcMismatch, true, true)
    );
    let e = register_write(Err(TransportError::Timeout(500)), &w()).unwrap_err();
    assert_eq!((e.code, e.maybe_applied), (ErrorCode::DeviceOffline, true));
}

#[test]
fn codes_round_trip_through_their_spelling() {
    let signal = ErrorCode::Signal("MOTOR_STALL".into());
    for c in ErrorCode::FIXED.into_iter().chain([signal]) {
        assert_eq!(ErrorCode::parse(c.as_str()), c);
        assert!(!c.hint().is_empty());
    }
}

#[test]
fn statuses_round_trip_and_classify() {
    for s in [
        "rejected",
        "accepted",
        "running",
        "completed",
        "failed",
        "timeout",
        "sent",
        "cancelled",
    ] {
        assert_eq!(Status::parse(s).map(Status::as_str), Some(s));
    }
    assert!(!Status::Running.is_terminal());
    assert!(Status::Sent.is_terminal());
    assert!(Status::Timeout.is_error());
    assert!(!Status::Cancelled.is_error());
}

#[test]
fn every_code_closedloop_reports_is_reserved_and_no_plant_code_is() {
    for c in ErrorCode::FIXED {
        assert!(ErrorCode::is_reserved(c.as_str()), "{c:?}");
    }
    for code in ["MOTOR_STALL", "OVERCURRENT", "TIMEOUT_2", "no_feedback"] {
        assert!(!ErrorCode::is_reserved(code), "{code}");
    }
}
