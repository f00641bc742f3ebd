// A mixer served over OPC UA by node-opcua, a stack no one here wrote, for
// tests/python/test_opcua_nodeopcua.py (issue 10): the same mixer as ../mixer_server.py (asyncua).
//
// Address space (namespace "urn:closedloop:test:mixer", index 2):
//   ns=2;s=Mixer             object
//   ns=2;s=Mixer.Speed       Double, read-only (rpm): ramps towards Setpoint at 200 rpm/s, set by
//                            the server with setValueFromSource (source and server timestamps)
//   ns=2;s=Mixer.Setpoint    Double, writable (rpm)
//   ns=2;s=Mixer.Running     Boolean, read-only
//   ns=2;s=Mixer.Start(rpm: Double) -> ok: Boolean
//                            sets Setpoint and Running = true inside the call, so both values are
//                            stamped before the call's answer: a subscription never sends them
//                            again, only a read after the answer shows them
//
// Usage: node mixer_server.cjs PORT (0: a port the system picks). node-opcua is found through
// NODE_PATH (scripts/opcua-node-env installs it outside the clone). Prints its endpoint URL as the
// only line on stdout once it accepts connections; logs go to stderr. Runs until killed or until
// stdin closes.
"use strict";

const {
  OPCUAServer,
  DataType,
  Variant,
  StatusCodes,
  MessageSecurityMode,
  SecurityPolicy,
} = require("node-opcua");

const NAMESPACE = "urn:closedloop:test:mixer";
const RAMP_RPM_PER_S = 200.0;
const TICK_MS = 50;

async function main() {
  const port = Number(process.argv[2] ?? "0");
  const server = new OPCUAServer({
    port,
    hostname: "127.0.0.1",
    resourcePath: "/closedloop/mixer",
    securityModes: [MessageSecurityMode.None],
    securityPolicies: [SecurityPolicy.None],
    allowAnonymous: true,
    buildInfo: { productName: "closedloop test mixer (node-opcua)" },
  });
  await server.initialize();
  const addressSpace = server.engine.addressSpace;
  const ns = addressSpace.registerNamespace(NAMESPACE);
  if (ns.index !== 2) {
    throw new Error(`namespace ${NAMESPACE} got index ${ns.index}, not 2`);
  }

  const mixer = ns.addObject({
    organizedBy: addressSpace.rootFolder.objects,
    nodeId: "s=Mixer",
    browseName: "Mixer",
  });
  const variable = (name, dataType, value, writable) =>
    ns.addVariable({
      componentOf: mixer,
      nodeId: `s=Mixer.${name}`,
      browseName: name,
      dataType,
      accessLevel: writable ? "CurrentRead | CurrentWrite" : "CurrentRead",
      userAccessLevel: writable ? "CurrentRead | CurrentWrite" : "CurrentRead",
      value: new Variant({ dataType, value }),
    });
  const speed = variable("Speed", DataType.Double, 0.0, false);
  const setpoint = variable("Setpoint", DataType.Double, 0.0, true);
  const running = variable("Running", DataType.Boolean, false, false);
  // A device's own value, stamped now (setValueFromSource sets the source and server timestamps).
  const set = (node, dataType, value) =>
    node.setValueFromSource(new Variant({ dataType, value }), StatusCodes.Good, new Date());

  const start = ns.addMethod(mixer, {
    nodeId: "s=Mixer.Start",
    browseName: "Start",
    inputArguments: [{ name: "rpm", dataType: DataType.Double, valueRank: -1 }],
    outputArguments: [{ name: "ok", dataType: DataType.Boolean, valueRank: -1 }],
  });
  start.bindMethod(async (inputArguments, _context) => {
    set(setpoint, DataType.Double, inputArguments[0].value);
    set(running, DataType.Boolean, true);
    return {
      statusCode: StatusCodes.Good,
      outputArguments: [new Variant({ dataType: DataType.Boolean, value: true })],
    };
  });

  // Speed follows Setpoint at RAMP_RPM_PER_S; set only when it changes.
  let current = 0.0;
  let last = process.hrtime.bigint();
  const ramp = setInterval(() => {
    const now = process.hrtime.bigint();
    const step = (RAMP_RPM_PER_S * Number(now - last)) / 1e9;
    last = now;
    const target = setpoint.readValue().value.value;
    if (current === target) {
      return;
    }
    current = target > current ? Math.min(target, current + step) : Math.max(target, current - step);
    set(speed, DataType.Double, current);
  }, TICK_MS);

  await server.start();
  const bound = server.endpoints[0].port;
  process.stdout.write(`opc.tcp://127.0.0.1:${bound}/closedloop/mixer\n`);

  // Exit when the parent goes away (stdin closes), so a crashed test leaves no server behind.
  const shutdown = async () => {
    clearInterval(ramp);
    await server.shutdown(0);
    process.exit(0);
  };
  process.stdin.on("end", shutdown);
  process.stdin.on("close", shutdown);
  process.stdin.resume();
  process.on("SIGTERM", shutdown);
}

main().catch((err) => {
  process.stderr.write(`mixer_server.cjs: ${err.stack ?? err}\n`);
  process.exit(1);
});
