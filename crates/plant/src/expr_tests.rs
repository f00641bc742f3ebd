use super::*;
use crate::params::ParamValue;

struct Fixture {
    signals: BTreeMap<String, Value>,
    params: Params,
    devices: BTreeMap<String, BTreeMap<String, Value>>,
}

impl Fixture {
    fn new() -> Fixture {
        let mut signals = BTreeMap::new();
        signals.insert("position_mm".to_string(), Value::Number(70.2));
        signals.insert("moving".to_string(), Value::Bool(false));
        signals.insert("fault".to_string(), Value::Bool(true));
        let mut params = Params::new();
        params.insert("target_mm".into(), ParamValue::Number(150.0));
        params.insert("on".into(), ParamValue::Bool(true));
        let mut slide = BTreeMap::new();
        slide.insert("fault".to_string(), Value::Bool(false));
        let mut devices = BTreeMap::new();
        devices.insert("slide".to_string(), slide);
        Fixture {
            signals,
            params,
            devices,
        }
    }

    fn scope(&self) -> Scope<'_> {
        Scope {
            signals: &self.signals,
            params: &self.params,
            devices: &self.devices,
            extra_strings: &[],
        }
    }
}

fn eval(src: &str) -> Result<Value, EvalError> {
    let f = Fixture::new();
    Expr::compile(src).unwrap().eval(&f.scope())
}

#[test]
fn integer_literals_are_doubles() {
    assert_eq!(eval("position_mm * 100"), Ok(Value::Number(7020.0)));
    assert_eq!(eval("params.target_mm * 100"), Ok(Value::Number(15000.0)));
    assert_eq!(eval("position_mm / 9 > 7"), Ok(Value::Bool(true)));
}

#[test]
fn abs_min_max_over_doubles() {
    assert_eq!(
        eval("abs(position_mm - params.target_mm)"),
        Ok(Value::Number(79.8))
    );
    assert_eq!(eval("min(position_mm, 10)"), Ok(Value::Number(10.0)));
    assert_eq!(eval("max(position_mm, 10)"), Ok(Value::Number(70.2)));
}

#[test]
fn the_slide_criteria() {
    let f = Fixture::new();
    let done =
        Expr::compile("abs(position_mm - params.target_mm) <= 0.2 && !moving && !fault").unwrap();
    assert_eq!(done.eval_bool(&f.scope()), Ok(false));
    let stall = Expr::compile("fault").unwrap();
    assert_eq!(stall.eval_bool(&f.scope()), Ok(true));
    let expect = Expr::compile("abs(params.target_mm - position_mm) / 100 + 0.05").unwrap();
    assert!((expect.eval_f64(&f.scope()).unwrap() - 0.848).abs() < 1e-9);
}

#[test]
fn names_are_collected() {
    let e = Expr::compile("!devices.slide.fault && !moving && params.on == contact").unwrap();
    assert_eq!(
        e.signals().iter().collect::<Vec<_>>(),
        ["contact", "moving"]
    );
    assert_eq!(e.params().iter().collect::<Vec<_>>(), ["on"]);
    assert_eq!(
        e.devices().iter().collect::<Vec<_>>(),
        [&("slide".to_string(), "fault".to_string())]
    );
    let macro_vars = Expr::compile("[1, 2].exists(x, x > position_mm)").unwrap();
    assert_eq!(
        macro_vars.signals().iter().collect::<Vec<_>>(),
        ["position_mm"]
    );
}

#[test]
fn missing_values_are_reported_by_name() {
    let f = Fixture::new();
    let e = Expr::compile("contact").unwrap();
    assert_eq!(
        e.eval(&f.scope()),
        Err(EvalError::Missing {
            name: "contact".into()
        })
    );
    assert!(e.eval(&f.scope()).unwrap_err().is_missing());
    let e = Expr::compile("devices.slide.moving").unwrap();
    assert_eq!(
        e.eval(&f.scope()),
        Err(EvalError::Missing {
            name: "devices.slide.moving".into()
        })
    );
    let e = Expr::compile("params.speed > 1").unwrap();
    assert_eq!(
        e.eval(&f.scope()),
        Err(EvalError::Missing {
            name: "params.speed".into()
        })
    );
}

#[test]
fn wrong_result_types_are_errors() {
    let f = Fixture::new();
    let e = Expr::compile("position_mm").unwrap();
    assert!(matches!(
        e.eval_bool(&f.scope()),
        Err(EvalError::Type { .. })
    ));
    let e = Expr::compile("'text'").unwrap();
    assert!(matches!(e.eval(&f.scope()), Err(EvalError::Type { .. })));
    let e = Expr::compile("!position_mm").unwrap();
    let err = e.eval(&f.scope()).unwrap_err().to_string();
    assert!(err.contains("'!' cannot be applied to a number"), "{err}");
}

#[test]
fn params_and_devices_must_be_fully_named() {
    assert!(
        Expr::compile("params")
            .unwrap_err()
            .contains("params.<name>")
    );
    assert!(
        Expr::compile("devices.slide")
            .unwrap_err()
            .contains("devices.<id>.<signal>")
    );
    assert!(
        Expr::compile("1 +")
            .unwrap_err()
            .contains("not a valid CEL expression")
    );
}

#[test]
fn expr_is_clone_send_sync() {
    fn check<T: Clone + Send + Sync + 'static>() {}
    check::<Expr>();
}

#[test]
fn another_device_s_signal_has_one_spelling_read_and_written_by_one_pair() {
    assert_eq!(
        other_device("devices.meter.contact"),
        Some(("meter", "contact"))
    );
    assert_eq!(other_device("contact"), None);
    assert_eq!(other_device("devices.meter"), None);
    let name = other_device_name("meter", "contact");
    assert_eq!(other_device(&name), Some(("meter", "contact")));
}
