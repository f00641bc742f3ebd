//! The few protobuf encodings OTLP/HTTP needs (the wire format, written out): varints, length-
//! delimited fields and fixed64 — enough for `ExportTraceServiceRequest` without a protobuf
//! stack or generated code. Field numbers are opentelemetry-proto's (`trace/v1/trace.proto`,
//! `common/v1/common.proto`, `resource/v1/resource.proto`).

/// One protobuf message being written.
#[derive(Debug, Default, Clone)]
pub(crate) struct Msg(Vec<u8>);

impl Msg {
    pub(crate) fn new() -> Msg {
        Msg(Vec::new())
    }

    /// The encoded bytes.
    pub(crate) fn into_bytes(self) -> Vec<u8> {
        self.0
    }

    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push((v as u8) | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    fn key(&mut self, field: u32, wire: u8) {
        self.varint(u64::from(field) << 3 | u64::from(wire));
    }

    /// A length-delimited field (wire type 2): bytes, a string or an embedded message.
    pub(crate) fn bytes(&mut self, field: u32, b: &[u8]) -> &mut Msg {
        self.key(field, 2);
        self.varint(b.len() as u64);
        self.0.extend_from_slice(b);
        self
    }

    pub(crate) fn string(&mut self, field: u32, s: &str) -> &mut Msg {
        self.bytes(field, s.as_bytes())
    }

    pub(crate) fn message(&mut self, field: u32, m: &Msg) -> &mut Msg {
        self.bytes(field, &m.0)
    }

    /// A varint field (wire type 0): an enum, a bool, an unsigned or a non-negative integer.
    pub(crate) fn uint(&mut self, field: u32, v: u64) -> &mut Msg {
        self.key(field, 0);
        self.varint(v);
        self
    }

    /// A fixed64 field (wire type 1): OTLP's times in nanoseconds since the epoch.
    pub(crate) fn fixed64(&mut self, field: u32, v: u64) -> &mut Msg {
        self.key(field, 1);
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
}

/// An attribute (`KeyValue`) whose value (`AnyValue`) is a string (field 1).
pub(crate) fn attr_str(key: &str, value: &str) -> Msg {
    let mut any = Msg::new();
    any.string(1, value);
    let mut kv = Msg::new();
    kv.string(1, key).message(2, &any);
    kv
}

/// An attribute whose value is a bool (`AnyValue.bool_value`, field 2).
pub(crate) fn attr_bool(key: &str, value: bool) -> Msg {
    let mut any = Msg::new();
    any.uint(2, u64::from(value));
    let mut kv = Msg::new();
    kv.string(1, key).message(2, &any);
    kv
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_encode_as_the_protobuf_wire_format_says() {
        let mut m = Msg::new();
        m.uint(1, 150);
        assert_eq!(m.clone().into_bytes(), [0x08, 0x96, 0x01]);
        let mut s = Msg::new();
        s.string(2, "testing");
        assert_eq!(s.into_bytes(), b"\x12\x07testing");
        let mut f = Msg::new();
        f.fixed64(7, 1);
        assert_eq!(f.into_bytes(), [0x39, 1, 0, 0, 0, 0, 0, 0, 0]);
        let mut outer = Msg::new();
        outer.message(3, &m);
        assert_eq!(outer.into_bytes(), [0x1a, 0x03, 0x08, 0x96, 0x01]);
    }
}
