// Judges the conformance results against expected-failures.txt (run by scripts/conformance).
//
// usage: node compare.mjs RESULTS_DIR EXPECTED_FILE
//   RESULTS_DIR/LABEL/server-SCENARIO-TIMESTAMP/checks.json, one LABEL per suite run;
//   EXPECTED_FILE lines: `LABEL SCENARIO reason` (the whole scenario may fail) or
//   `LABEL SCENARIO:CHECK reason` (only that check may fail); `#` comments and blank lines.
// A scenario fails when one of its checks has status FAILURE. Exit 1 when a failing check is not
// excused, or when an entry no longer fails (or its scenario did not run): the list stays true.
import fs from 'node:fs';
import path from 'node:path';

const [resultsDir, expectedFile] = process.argv.slice(2);
if (!resultsDir || !expectedFile) {
  console.error('usage: node compare.mjs RESULTS_DIR EXPECTED_FILE');
  process.exit(2);
}

const entries = [];
fs.readFileSync(expectedFile, 'utf8').split('\n').forEach((raw, i) => {
  const line = raw.trim();
  if (!line || line.startsWith('#')) return;
  const m = line.match(/^(\S+)\s+(\S+)\s+(\S.*)$/);
  if (!m) {
    console.error(`${expectedFile}:${i + 1}: want "LABEL SCENARIO[:CHECK] reason", got: ${line}`);
    process.exit(2);
  }
  const [scenario, check] = m[2].split(/:(.*)/s);
  entries.push({ label: m[1], scenario, check: check || null, reason: m[3], line: i + 1, used: false });
});

// label -> scenario -> [{id, status, errorMessage}]
const results = new Map();
for (const label of fs.readdirSync(resultsDir).sort()) {
  const scenarios = new Map();
  for (const dir of fs.readdirSync(path.join(resultsDir, label)).sort()) {
    const m = dir.match(/^server-(.+)-\d{4}-\d{2}-\d{2}T[\d-]+Z$/);
    if (!m) continue;
    const file = path.join(resultsDir, label, dir, 'checks.json');
    const checks = fs.existsSync(file)
      ? JSON.parse(fs.readFileSync(file, 'utf8'))
      : [{ id: 'checks-json-missing', status: 'FAILURE', errorMessage: 'the suite wrote no checks.json' }];
    scenarios.set(m[1], checks);
  }
  results.set(label, scenarios);
}

const unexpected = [];
let passed = 0;
let expectedFailed = 0;
for (const [label, scenarios] of results) {
  let p = 0, xf = 0, f = 0;
  for (const [scenario, checks] of scenarios) {
    const failing = checks.filter((c) => c.status === 'FAILURE');
    if (failing.length === 0) {
      p++;
      continue;
    }
    const whole = entries.find((e) => e.label === label && e.scenario === scenario && !e.check);
    let excused = true;
    if (whole) whole.used = true;
    for (const c of failing) {
      const one = entries.find((e) => e.label === label && e.scenario === scenario && e.check === c.id);
      if (one) one.used = true;
      if (!whole && !one) {
        excused = false;
        unexpected.push(`${label} ${scenario}:${c.id} — ${(c.errorMessage || c.description || '').slice(0, 300)}`);
      }
    }
    if (excused) xf++;
    else f++;
  }
  passed += p;
  expectedFailed += xf;
  console.log(`conformance ${label}: ${scenarios.size} scenarios: ${p} pass, ${xf} fail as expected, ${f} fail unexpectedly`);
}

const stale = entries.filter((e) => !e.used);
for (const e of stale) {
  const ran = results.get(e.label)?.has(e.scenario);
  console.log(`STALE ${expectedFile}:${e.line}: ${e.label} ${e.scenario}${e.check ? ':' + e.check : ''} ` +
    (ran ? 'now passes: remove the entry' : 'did not run: remove or fix the entry'));
}
for (const u of unexpected) console.log(`UNEXPECTED FAILURE ${u}`);
console.log(`conformance: ${expectedFailed} scenarios fail as listed in expected-failures.txt`);
console.log(`conformance: ${passed} passed, ${unexpected.length + stale.length} failed`);
process.exit(unexpected.length + stale.length > 0 ? 1 : 0);
