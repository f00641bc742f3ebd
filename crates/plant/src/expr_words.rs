//! How evaluation errors of plant-file expressions are worded: in the plant's terms (operators
//! as written, "a number" for CEL's double), not `cel`'s internal names (`_+_`, `double`).

use cel::ExecutionError;

/// How a CEL value is named in messages.
pub(crate) fn kind_of(v: &cel::Value) -> String {
    match v {
        cel::Value::Bool(b) => format!("the bool {b}"),
        cel::Value::Float(f) => format!("the number {f}"),
        cel::Value::Int(i) => format!("the integer {i}"),
        cel::Value::UInt(u) => format!("the unsigned integer {u}"),
        cel::Value::String(s) => format!("the string {:?}", s.as_str()),
        cel::Value::Null => "null".to_string(),
        cel::Value::List(_) => "a list".to_string(),
        cel::Value::Map(_) => "a map".to_string(),
        other => format!("{:?}", other.type_of()),
    }
}

/// Rewords a `cel` execution error in plant-file terms (operators as written, "number").
pub(crate) fn describe(e: &ExecutionError) -> String {
    match e {
        ExecutionError::NoSuchOverload(o) => {
            let args: Vec<String> = o.argument_types().iter().map(|t| type_word(t)).collect();
            match operator(o.function()) {
                Some(op) => format!("'{op}' cannot be applied to {}", args.join(" and ")),
                None => format!("{}() cannot take ({})", o.function(), args.join(", ")),
            }
        }
        ExecutionError::UnsupportedBinaryOperator(op, a, b) => {
            let op = match *op {
                "add" => "+",
                "sub" => "-",
                "mul" => "*",
                "div" => "/",
                "rem" => "%",
                other => other,
            };
            format!(
                "'{op}' cannot be applied to {} and {}",
                kind_of(a),
                kind_of(b)
            )
        }
        ExecutionError::UndeclaredReference(name) => format!("unknown name or function \"{name}\""),
        other => other.to_string(),
    }
}

fn operator(function: &str) -> Option<&'static str> {
    Some(match function {
        "!_" => "!",
        "-_" => "-",
        "_+_" => "+",
        "_-_" => "-",
        "_*_" => "*",
        "_/_" => "/",
        "_%_" => "%",
        "_==_" => "==",
        "_!=_" => "!=",
        "_<_" => "<",
        "_<=_" => "<=",
        "_>_" => ">",
        "_>=_" => ">=",
        "_&&_" => "&&",
        "_||_" => "||",
        "_?_:_" => "?:",
        "_[_]" => "[]",
        "_._" => ".",
        "@in" => "in",
        _ => return None,
    })
}

fn type_word(t: &str) -> String {
    match t {
        "double" => "a number".into(),
        "bool" => "a bool".into(),
        "string" => "a string".into(),
        "int" => "an integer".into(),
        other => other.to_string(),
    }
}
