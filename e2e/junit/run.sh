#!/usr/bin/env bash
# End to end: the JUnit report of `sharedos test --junit` (passing, failing and skipped
# tests, names with markup, and an invalid scenario file as an <error>) is valid against testdata/junit/junit.xsd,
# checked by libxml2's own validator (xmllint-wasm 5.3.0, libxml2 compiled to WebAssembly,
# installed from the npm registry into a temp dir with `npm install --no-save`). A report
# broken on purpose must be refused, so the check cannot pass vacuously. Skips (exit 0,
# saying so) only when npm is missing.
#
#   e2e/junit/run.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
if ! command -v npm >/dev/null 2>&1 || ! command -v node >/dev/null 2>&1; then
  echo "junit e2e: SKIPPED — npm/node not installed (xmllint-wasm cannot be installed)"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go build -o "$tmp/sharedos" .
mkdir -p "$tmp/node" "$tmp/t"
(cd "$tmp/node" && npm install --no-save --silent xmllint-wasm@5.3.0 >/dev/null)

cat > "$tmp/t/mixed.yaml" <<'YAML'
version: 1
files: {"a.md": "hello <&> \"world\""}
grants:
  - {id: g, subject: agent:a, issuer: human:o, capabilities: [{resource: {namespace: files, path: [], owner: human:o}, actions: [read], scope: descendants}]}
context: {as: agent:a, owner: human:o, now: 2026-06-01T09:00:00Z}
tests:
  - name: passes <with> "markup" & ampersands
    steps: [{call: files.read, args: {path: [a.md]}, expect: {status: succeeded, output: {contains: hello}}}]
  - name: fails
    steps: [{call: files.read, args: {path: [a.md]}, expect: {status: denied, code: "no_matching_grant <x>"}}]
  - name: skipped
    skip: not today
  - name: a failed call, as expected
    steps: [{call: files.read, args: {path: [b.md]}, expect: {status: failed, exit: 4}}]
YAML
printf 'version: 1\ntests: [{name: x, steps: [{lst: {}}]}]\n' > "$tmp/t/invalid.yaml"
status=0
"$tmp/sharedos" test "$tmp/t" --junit "$tmp/report.xml" >/dev/null || status=$?
test "$status" -eq 2   # the invalid file
sed 's/<testcase /<testcase bogus="1" /' "$tmp/report.xml" > "$tmp/broken.xml"

cat > "$tmp/node/check.js" <<'JS'
const fs = require('fs');
const {validateXML} = require('xmllint-wasm');
(async () => {
  const [xsd, good, broken] = process.argv.slice(2).map((p) => fs.readFileSync(p, 'utf8'));
  const ok = await validateXML({xml: [{fileName: 'report.xml', contents: good}], schema: [xsd]});
  if (!ok.valid) { console.error('report.xml is not valid JUnit:\n' + ok.rawOutput); process.exit(1); }
  const bad = await validateXML({xml: [{fileName: 'broken.xml', contents: broken}], schema: [xsd]});
  if (bad.valid) { console.error('the validator accepted a broken report'); process.exit(1); }
  for (const want of ['<failure ', '<skipped ', '<error ', 'type="invalid_scenario"', 'line="']) {
    if (!good.includes(want)) { console.error('report.xml lacks ' + want); process.exit(1); }
  }
  console.log('junit e2e: report.xml is valid against testdata/junit/junit.xsd; a broken one is refused');
})().catch((e) => { console.error(e); process.exit(1); });
JS
node "$tmp/node/check.js" testdata/junit/junit.xsd "$tmp/report.xml" "$tmp/broken.xml"
