#!/usr/bin/env python3
"""Writes the seed corpus of every fuzz target (fuzz/corpus/<target>/): a handful of small, valid
and nearly valid inputs each, in the input format its target's doc comment describes. Run it after
changing a format; `bash scripts/fuzz` never modifies these files (it fuzzes a copy)."""
import os, struct, re
root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
C = os.path.join(root, 'fuzz/corpus')
def put(target, name, data):
    d = os.path.join(C, target); os.makedirs(d, exist_ok=True)
    if isinstance(data, str): data = data.encode()
    open(os.path.join(d, name), 'wb').write(data)

def crc16(b):
    crc = 0xFFFF
    for x in b:
        crc ^= x
        for _ in range(8):
            crc = (crc >> 1) ^ 0xA001 if crc & 1 else crc >> 1
    return crc
def seal(b): return bytes(b) + struct.pack('<H', crc16(bytes(b)))

# modbus_rtu_answer: unit, kind, start(2), count(2), flags, rest
t = 'modbus_rtu_answer'
put(t, 'read-holding-2', bytes([1, 2, 0, 0, 0, 2, 0x02]) + bytes([1, 3, 4, 0x12, 0x34, 0xAB, 0xCD]))
put(t, 'read-holding-oracle-chunked', bytes([7, 2, 0, 10, 0, 3, 0x01 | (2 << 2), 0x00, 0, 1, 0xFF, 0xFE, 0x80, 0]))
put(t, 'exception-2', bytes([1, 3, 0, 0, 0, 1, 0x02, 1, 0x84, 0x02]))
put(t, 'read-coils-3', bytes([1, 0, 0, 0, 0, 3, 0x02, 1, 1, 1, 0b101]))
put(t, 'write-registers-oracle-1-byte-reads', bytes([1, 5, 0, 1, 0, 2, 0x01 | (1 << 2), 0x00, 0, 0x0A, 1, 2, 3, 4]))
put(t, 'bad-crc', bytes([1, 2, 0, 0, 0, 1, 0x00, 1, 3, 2, 0, 5, 0xFF, 0xFF]))
put(t, 'write-coil-echo', bytes([1, 4, 0, 0xAC, 0, 0, 0x02, 1, 5, 0, 0xAC, 0xFF, 0]))

# sim_modbus_tcp_request: chunk, stream
t = 'sim_modbus_tcp_request'
def adu(tid, unit, pdu): return struct.pack('>HHH', tid, 0, len(pdu) + 1) + bytes([unit]) + bytes(pdu)
put(t, 'read-holding', bytes([0]) + adu(0x1234, 7, [3, 0, 2, 0, 2]))
put(t, 'write-coils-fc15-3-byte-chunks', bytes([3]) + adu(1, 1, [15, 0, 0, 0, 10, 2, 0x05, 0x02]))
put(t, 'fc16-then-fc05-1-byte-chunks', bytes([1]) + adu(2, 1, [16, 0, 0, 0, 2, 4, 0, 0, 0x75, 0x30]) + adu(3, 1, [5, 0, 1, 0xFF, 0]))
put(t, 'unknown-function', bytes([0]) + adu(4, 1, [0x2B, 0x0E, 1, 0]))
put(t, 'not-modbus', bytes([0]) + bytes([0, 1, 0, 9, 0, 6, 1, 3, 0, 0, 0, 1]))
put(t, 'fc06-fc01-fc04-past-end', bytes([2]) + adu(5, 2, [6, 0, 9, 0x12, 0x34]) + adu(6, 2, [1, 0, 0, 0x07, 0xD0]) + adu(7, 2, [4, 0xFF, 0xFF, 0, 2]))

# slcan_decode: chunk, stream
t = 'slcan_decode'
put(t, 'standard-frame', b'\x00t1F0201AB\r')
put(t, 'extended-and-remote', b'\x03T18daf1108ffffffffffffffff\rr1232\rR000001232\r')
put(t, 'acks-naks-replies', b'\x01\r\x07z\rZ\rV1013\r\r\n')
put(t, 'timestamps-and-errors', b'\x00t1F0201ABEA5F\rt80000\rt1009\rxyz\rt1F0201ABE\r')
put(t, 'bel-and-overlong', b'\x05t12\x07t1000\r' + b'7' * 70 + b'\rt10001234\r')

# dbc_signals: n, frame, text
t = 'dbc_signals'
workshop = open(os.path.join(root, 'examples/can-workshop.dbc'), 'rb').read()
workshop = re.sub(rb'\nCM_[^\n]*', b'', workshop)  # comments are not what is fuzzed here
put(t, 'can-workshop', bytes([5]) + bytes([0x10, 0x27, 0, 0, 0x05]) + workshop)
model = '''VERSION ""

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
'''
put(t, 'mux-float-outside', bytes([8, 1, 0xFF, 0x12, 0x34, 0x56, 0x78, 0x9A, 0xBC]) + model.encode())
attrs = model + '''
SG_MUL_VAL_ 2147484000 A Mode 1-1;
BA_DEF_ BO_ "VFrameFormat" ENUM "StandardCAN","ExtendedCAN","StandardCAN_FD";
BA_DEF_ SG_ "SystemSignalLongSymbol" STRING ;
BA_DEF_DEF_ "VFrameFormat" "StandardCAN";
BA_ "VFrameFormat" BO_ 496 2;
BA_ "SystemSignalLongSymbol" SG_ 496 Speed "VehicleSpeedOverGround";
'''
put(t, 'attributes-and-mux-values', bytes([8, 2, 0x80, 0x7F, 0, 0, 0, 0, 1]) + attrs.encode())
wide = '''VERSION ""

BU_: A

BO_ 100 Wide: 16 A
 SG_ BigU : 7|64@0+ (1,0) [0|0] "" A
 SG_ LittleS : 64|64@1- (0.5,-3) [0|0] "" A
'''
put(t, 'fd-64-bit-signals', bytes([16]) + bytes(range(0xF0, 0x100)) + wide.encode())
cp = b'\xef\xbb\xbfVERSION ""\r\n\r\nBU_: A\r\n\r\nBO_ 5 T: 2 A\r\n SG_ Temp : 0|16@1- (0.1,-40) [-40|125] "\xc2\xb0C" A\r\n'
put(t, 'bom-crlf', bytes([2, 0x2C, 0x01]) + cp)
put(t, 'windows-1252', bytes([2, 0xFF, 0xFF]) + cp[3:].replace(b'\xc2\xb0', b'\xb0'))

# mqtt_payload: flags, pointer 0 true-values 0 payload
t = 'mqtt_payload'
put(t, 'json-bool', b'\x10/on\x00\x00{"on": true, "seq": 7}')
put(t, 'json-string-number', b'\x18/t/c\x00\x00{"t": {"c": "21.5"}}')
put(t, 'text-true-values', b'\x00workshop/lamp/state\x00ON,1\x00 ON\n')
put(t, 'text-f32', b'\x07lab/+/state\x00\x00-1.25e3')
put(t, 'json-escaped-pointer', b'\x11/a~1b/0\x00\x00{"a/b": [1e3, null]}')
put(t, 'number-bytes', b'\x08$SYS/x\x00\x00' + struct.pack('<d', 273.15) + b'#')

# register_encoding: ty, flags, bit, scale(8), offset(8), value(8), words
t = 'register_encoding'
def enc(ty, flags, bit, scale, offset, value, words):
    sc = scale if isinstance(scale, bytes) else struct.pack('<d', scale)
    of = offset if isinstance(offset, bytes) else struct.pack('<d', offset)
    return bytes([ty, flags, bit]) + sc + of + struct.pack('<d', value) + b''.join(struct.pack('>H', w) for w in words)
idx = lambda i: bytes([i]) + bytes(7)
put(t, 'i16-scale-0.1', enc(2, 0, 0, idx(1), idx(0), 42.04, [420]))
put(t, 'u32-little-offset-minus-40', enc(3, 1, 0, idx(0), idx(1), 25.0, [0x0041, 0x0000]))
put(t, 'f32-byte-swap', enc(7, 2, 0, idx(0), idx(0), 1.5, [0xC03F, 0x0000]))
put(t, 'f64-own-scale', enc(8, 8, 0, 0.001, idx(2), -0.25, [0xBFD0, 0, 0, 0]))
put(t, 'bit-3', enc(1, 4, 3, idx(0), idx(0), 1.0, [0b1000]))
put(t, 'i64-own-offset', enc(6, 16, 0, idx(0), 1e6, -1.0, [0xFFFF] * 4))
put(t, 'bool', enc(0, 0, 0, idx(0), idx(0), 2.0, [1]))

# plant_parse: TOML text
t = 'plant_parse'
def strip_comments(s):
    return '\n'.join(l for l in s.split('\n') if not l.startswith('#')).strip() + '\n'
base = open(os.path.join(root, 'crates/plant/tests/common/mod.rs')).read()
base = base.split('pub const BASE: &str = r#"', 1)[1].split('"#;', 1)[0]
put(t, 'sim-relay-and-stepper', base.lstrip())
for ex in ['mqtt-workshop', 'can-workshop', 'opcua-workshop']:
    put(t, ex, strip_comments(open(os.path.join(root, f'examples/{ex}.toml')).read()))
put(t, 'modbus-rtu-and-tcp', '''[server]
name = "bench"
journal = "sqlite://bench.db"
[[server.token]]
name = "ops"
token = "${env:FUZZ_TOKEN}"
scopes = ["read", "act"]

[[device]]
id = "heater"
driver = { kind = "modbus-rtu", port = "/dev/ttyUSB0", baud = 19200, parity = "E", unit = 3, timeout_ms = 300 }
[device.signals]
temp_c = { input = 0, type = "i16", scale = 0.1 }
power = { holding = 1, type = "f32", word_order = "little" }
alarm = { holding = 2, bit = 4 }
[[device.action]]
name = "set_power"
description = "Set the heater power."
params = { watts = { type = "number", min = 0, max = 2000 } }
write = [{ holding = 1, type = "f32", word_order = "little", value = "params.watts" }]
verification = "readback"

[[device]]
id = "meter"
driver = { kind = "modbus-tcp", address = "[::1]:502", unit = 1 }
[device.signals]
energy = { holding = 0, type = "u64", byte_swap = true }
''')
put(t, 'syntax-error', '[[device]]\nid = "x"\ndriver = { kind = "sim", model = \n')

# plant_pieces: TOML text, parsed in pieces and whole; the plant_parse seeds and some that test
# where a piece may start.
t = 'plant_pieces'
for name in sorted(os.listdir(os.path.join(C, 'plant_parse'))):
    put(t, name, open(os.path.join(C, 'plant_parse', name), 'rb').read())
Q3, A3 = '"' * 3, "'" * 3
put(t, 'header-in-multi-line-strings', '[[device]]\nid = "a"\nnote = ' + Q3 + '\n[[device]]\n\\' + Q3
    + ' still inside\n' + Q3 + '\nx = ' + A3 + '\n[[alarm]]\n' + A3 + '\n[[device]]  # b\nid = "b"\n'
    + '[[alarm]]\nname = \'z\'\n')
put(t, 'table-after-devices', '[[device]]\nid = "a"\n[server]\nname = "late"\n[[device]]\nid = "b"\n')
put(t, 'inline-device-list', 'device = [{ id = "a" }]\n[[device]]\nid = "b"\n')

# host_origin: Host, newline, Origin, newline, an allow-list entry.
t = 'host_origin'
put(t, 'loopback', 'localhost:8080\nhttps://app.example\nhttp://localhost:*')
put(t, 'no-origin', 'gw.example:8443')
put(t, 'ipv6', '[::1]:9\nnull\n[::1]')
put(t, 'rebinding', 'evil.example\nhttps://evil.example\nevil.example:80')
put(t, 'userinfo', 'user@localhost\nhttps://app.example:443/\nhttps://APP.example:*')
