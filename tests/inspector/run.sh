#!/usr/bin/env bash
# The MCP Inspector's CLI mode against `closedloop serve examples/workshop.toml --http 127.0.0.1:0`
# (a tmp copy of the plant, a port the OS picks). The Inspector is pinned in
# tests/conformance/package.json (`inspector-2.12` = @modelcontextprotocol/inspector@2.12.0) and
# installed with node 22 by scripts/node-env, outside the clone.
#
# Checks, each printed as it passes; any mismatch exits 1 with the evidence:
#   1. tools/list (2025-11-25 session, the CLI's default era) lists lamp_switch with an outputSchema.
#   2. tools/call lamp_switch on=true on the 2026-07-28 era (--protocol-era modern). The CLI
#      declares the Tasks extension (io.modelcontextprotocol/tasks) in every request, so closedloop
#      answers with a task whose taskId is the command_id; the CLI polls tasks/get itself (it has
#      no `--method tasks/get`) and prints the final tool result. Asserted: the structured content
#      (completed, verified, the contact as evidence) and, from the JSON-RPC traffic recorded by a
#      fetch hook (record-fetch.mjs, written below), that the task path was really taken.
#   3. get_command_status for that command_id (2025-11-25 session) reports the same completion.
#   4. SIGTERM stops the server with exit status 0.
# The Inspector's own files (~/.mcp-inspector) go to a temporary HOME. Everything lives in a
# temporary directory outside the clone, kept (and named) only when a check fails, or always with
# INSPECTOR_KEEP=1.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-/var/tmp/closedloop-target}"

node="$(bash scripts/node-env | tail -n 1)"
modules="$(cd "$(dirname "$node")/../.." && pwd)"
inspector="$modules/inspector-2.12/clients/launcher/build/index.js"
[[ -f "$inspector" ]] || { echo "inspector: $inspector missing; is inspector-2.12 in tests/conformance/package.json?" >&2; exit 2; }
version="$("$node" -p "require('$modules/inspector-2.12/package.json').version")"

echo "inspector: building the closedloop binary" >&2
cargo build --locked -q -p closedloop
bin="$CARGO_TARGET_DIR/debug/closedloop"

work="$(mktemp -d "${TMPDIR:-/tmp}/closedloop-inspector.XXXXXX")"
server_pid=""
ok=0
cleanup() {
  if [[ -n "$server_pid" ]]; then
    kill "$server_pid" 2>/dev/null || true
    wait "$server_pid" 2>/dev/null || true
  fi
  if [[ $ok == 1 && "${INSPECTOR_KEEP:-0}" != 1 ]]; then
    rm -rf "$work"
  else
    echo "inspector: server log, CLI output and JSON-RPC traffic kept in $work" >&2
  fi
}
trap cleanup EXIT

fail() {
  echo "inspector: FAILED: $*" >&2
  echo "--- closedloop stderr (tail)" >&2
  tail -n 40 "$work/serve.log" >&2 || true
  exit 1
}

# The fetch hook: appends one JSON line per POST the Inspector makes (the JSON-RPC request and the
# messages of its response) to $INSPECTOR_WIRE_LOG. The long-lived GET stream is not recorded.
cat >"$work/record-fetch.mjs" <<'EOF'
import { appendFileSync } from "node:fs";
const out = process.env.INSPECTOR_WIRE_LOG;
const realFetch = globalThis.fetch;
const parse = (text) => { try { return JSON.parse(text); } catch { return text; } };
const messages = (type, text) => type.includes("text/event-stream")
  ? text.split(/\r?\n/).filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trim()).filter(Boolean).map(parse)
  : text ? [parse(text)] : [];
// The body as far as it came: the CLI may close a stream once it has its answer, and what had
// arrived before must still be recorded (a whole-body read failed then and lost it all).
const readAll = async (body) => {
  if (!body) return "";
  const decoder = new TextDecoder();
  let text = "";
  try {
    for await (const chunk of body) text += decoder.decode(chunk, { stream: true });
  } catch (e) {
    return `${text}\n<cut short: ${e}>`;
  }
  return text + decoder.decode();
};
globalThis.fetch = async function (input, init) {
  const method = (init?.method ?? input?.method ?? "GET").toUpperCase();
  const res = await realFetch(input, init);
  if (out && method === "POST") {
    const request = typeof init?.body === "string" ? parse(init.body) : null;
    const type = res.headers.get("content-type") ?? "";
    const record = (text) => appendFileSync(out, JSON.stringify({ status: res.status, request, response: messages(type, text) }) + "\n");
    const pending = readAll(res.clone().body).then(record);
    if (!type.includes("text/event-stream")) await pending;
  }
  return res;
};
EOF

mkdir -p "$work/plant" "$work/home"
cp examples/workshop.toml "$work/plant/"
"$bin" serve "$work/plant/workshop.toml" --http 127.0.0.1:0 2>"$work/serve.log" &
server_pid=$!
url=""
for ((i = 0; i < 600; i++)); do
  url="$(grep -o 'closedloop: listening on http://[^ ]*' "$work/serve.log" | head -n 1 | cut -d' ' -f4 || true)"
  [[ -n "$url" ]] && break
  kill -0 "$server_pid" 2>/dev/null || fail "closedloop serve exited before listening"
  sleep 0.1
done
[[ -n "$url" ]] || fail "closedloop serve printed no address within 60 s"
echo "inspector: @modelcontextprotocol/inspector $version (node $("$node" --version)) against $url"

# cli NAME ARGS...: one Inspector CLI run, JSON on $work/NAME.json, stderr on $work/NAME.err,
# JSON-RPC traffic on $work/NAME.wire.jsonl. A non-zero exit is a failure.
cli() {
  local name="$1"; shift
  local rc=0
  HOME="$work/home" INSPECTOR_WIRE_LOG="$work/$name.wire.jsonl" \
    timeout 60 "$node" --import "$work/record-fetch.mjs" "$inspector" --cli "$url" --transport http \
    --connect-timeout 10000 --format json "$@" >"$work/$name.json" 2>"$work/$name.err" || rc=$?
  if [[ $rc -ne 0 ]]; then
    echo "--- inspector $* (exit $rc)" >&2
    cat "$work/$name.json" "$work/$name.err" >&2
    fail "the Inspector CLI exited $rc for $name"
  fi
}

# check NAME JS: runs JS (an ES module) with `out` = the parsed $work/NAME.json and `wire` = the
# recorded traffic; it throws on a mismatch and prints what it checked.
check() {
  local name="$1" js="$2"
  OUT="$work/$name.json" WIRE="$work/$name.wire.jsonl" "$node" --input-type=module -e "
    import { readFileSync, existsSync } from 'node:fs';
    const out = JSON.parse(readFileSync(process.env.OUT, 'utf8'));
    const wire = existsSync(process.env.WIRE)
      ? readFileSync(process.env.WIRE, 'utf8').split('\n').filter(Boolean).map((l) => JSON.parse(l)) : [];
    const expect = (cond, what, got) => {
      if (!cond) throw new Error(what + '\n  got: ' + JSON.stringify(got, null, 2));
      console.log('  ok: ' + what);
    };
    $js
  " || { echo "--- $name output:" >&2; cat "$work/$name.json" >&2; fail "check $name"; }
}

echo "== tools/list (2025-11-25 session)"
cli tools-list --method tools/list
check tools-list '
  const tools = out.result?.tools ?? [];
  const lamp = tools.find((t) => t.name === "lamp_switch");
  expect(lamp !== undefined, "tools/list lists lamp_switch (" + tools.length + " tools)", tools.map((t) => t.name));
  expect(lamp.outputSchema?.type === "object", "lamp_switch has an object outputSchema", lamp.outputSchema);
  expect(lamp.inputSchema?.properties?.on?.type === "boolean", "lamp_switch takes a boolean `on`", lamp.inputSchema);
'

echo "== tools/call lamp_switch on=true (2026-07-28, Tasks extension)"
cli lamp --protocol-era modern --method tools/call --tool-name lamp_switch --tool-arg on=true
check lamp '
  const r = out.result;
  const sc = r?.structuredContent;
  expect(r?.isError === false, "isError is false", r);
  expect(sc?.device === "lamp" && sc?.action === "switch", "structuredContent is the lamp switch command", sc);
  expect(sc.status === "completed", "status is completed", sc.status);
  expect(sc.verified === true && sc.verification === "feedback", "verified true, by feedback", sc);
  expect(sc.params?.on === true, "params.on is true", sc.params);
  expect(sc.evidence?.contact?.value === true, "evidence: contact = true", sc.evidence);
  expect(sc.estimated_remaining_seconds === null && sc.error_code == null, "no remaining time, no error_code", sc);
  expect(sc.timeline?.at(-1)?.event === "completed", "timeline ends with completed", sc.timeline?.map((e) => e.event));
  expect(/^[0-9a-f-]{36}$/.test(sc.command_id), "command_id is a UUID: " + sc.command_id, sc.command_id);

  // The JSON-RPC traffic: the call returned a task, and the CLI followed it with tasks/get.
  expect(wire.length > 0, "the fetch hook recorded the Inspector traffic (" + wire.length + " POSTs)", wire);
  const call = wire.find((w) => w.request?.method === "tools/call" && w.request?.params?.name === "lamp_switch");
  expect(call !== undefined, "a tools/call for lamp_switch went out", wire.map((w) => w.request?.method));
  const declared = call.request.params?._meta?.["io.modelcontextprotocol/clientCapabilities"]?.extensions ?? {};
  expect("io.modelcontextprotocol/tasks" in declared, "the Inspector declared io.modelcontextprotocol/tasks on that call", declared);
  const created = call.response.find((m) => m?.id === call.request.id)?.result;
  expect(created?.resultType === "task" && created?.status === "working", "closedloop answered with a working task", created);
  expect(created.taskId === sc.command_id, "taskId is the command_id", created);
  const gets = wire.filter((w) => w.request?.method === "tasks/get");
  expect(gets.length > 0 && gets.every((w) => w.request.params?.taskId === created.taskId),
    "the CLI polled tasks/get for that task (" + gets.length + "x)", gets.map((w) => w.request));
  const last = gets.at(-1).response.find((m) => m?.id === gets.at(-1).request.id)?.result;
  expect(last?.status === "completed" && last?.result?.structuredContent?.status === "completed",
    "the last tasks/get is completed and carries the completed result object", last);
  expect(last.result.structuredContent.command_id === sc.command_id, "tasks/get result is the same command", last.result.structuredContent);
'
command_id="$("$node" -p "JSON.parse(require('fs').readFileSync('$work/lamp.json','utf8')).result.structuredContent.command_id")"

echo "== tools/call get_command_status command_id=$command_id (2025-11-25 session)"
cli status --method tools/call --tool-name get_command_status --tool-args-json "{\"command_id\":\"$command_id\",\"wait_s\":0}"
check status "
  const r = out.result;
  const sc = r?.structuredContent;
  expect(r?.isError === false, 'isError is false', r);
  expect(sc?.command_id === '$command_id', 'get_command_status reports command $command_id', sc);
  expect(sc.status === 'completed' && sc.verified === true, 'status completed, verified true', sc);
  expect(sc.evidence?.contact?.value === true, 'evidence: contact = true', sc.evidence);
"

echo "== tools/call lamp_switch on=false wait_s=3 (2025-11-25 session: a plain tool result, no task)"
cli lamp2025 --method tools/call --tool-name lamp_switch --tool-args-json '{"on":false,"wait_s":3}'
check lamp2025 '
  const r = out.result;
  const sc = r?.structuredContent;
  expect(r?.isError === false, "isError is false", r);
  expect(sc?.status === "completed" && sc?.verified === true, "status completed, verified true", sc);
  expect(sc.evidence?.contact?.value === false, "evidence: contact = false", sc.evidence);
  const call = wire.find((w) => w.request?.method === "tools/call");
  const res = call?.response.find((m) => m?.id === call.request.id)?.result;
  expect(res?.resultType !== "task" && res?.structuredContent?.command_id === sc.command_id,
    "the 2025 session got the result itself, not a task", res);
'

echo "== SIGTERM"
kill -TERM "$server_pid"
rc=0
wait "$server_pid" || rc=$?
server_pid=""
[[ $rc -eq 0 ]] || fail "closedloop serve exited $rc on SIGTERM, not 0"
echo "  ok: closedloop serve exited 0 on SIGTERM"

echo "inspector: all checks passed"
ok=1
