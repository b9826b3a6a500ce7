#!/usr/bin/env bash
# Speed of `sharedos test` (spec 70 §2): 100 scenario files × 10 steps (reads allowed and
# denied, a write, a spent single-use grant, a listing, an explain, a namespace patch, an
# audit assertion; every test on a fresh root copy and state database), one process,
# against `opa test` on an equivalent small Rego policy with 100 test files × 10 tests
# (the same allow/deny questions), in the same run. Prints the median wall time of each
# and the ratio. opa is taken from PATH, else OPA=/path/to/opa, else installed with
# `go install github.com/open-policy-agent/opa@v1.4.2` into bench/out; without it the
# comparison is skipped, saying so.
#
#   bench/scenario.sh          # 10 runs each
#   RUNS=20 bench/scenario.sh
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-10}
out=bench/out/scenario
rm -rf "$out"
mkdir -p "$out/tests" "$out/rego" "$out/home"
go build -o "$out/sharedos" .

for ((i = 0; i < 100; i++)); do
  cat > "$out/tests/s$(printf %03d $i).yaml" <<YAML
version: 1
files: {"docs/a.md": "hello world", "docs/b.md": "bee", "secret/s.md": "no"}
grants:
  - {id: g-read-docs, subject: agent:a, issuer: human:o, capabilities: [{resource: {namespace: files, path: [docs], owner: human:o}, actions: [read, list], scope: descendants}]}
  - {id: g-draft-once, subject: agent:a, issuer: human:o, capabilities: [{resource: {namespace: files, path: [drafts], owner: human:o}, actions: [create], scope: descendants}], constraints: {maxUses: 1}}
  - {id: g-escalate, subject: agent:a, issuer: human:o, capabilities: [{resource: {namespace: sharedos, path: [escalation], owner: human:o}, actions: [request], scope: exact}]}
context: {as: agent:a, owner: human:o, purpose: test, now: 2026-06-01T09:00:00Z}
namespaces: [files, sharedos]
tests:
  - name: t$i
    steps:
      - {call: files.read, args: {path: [docs, a.md]}, expect: {status: succeeded, grant: g-read-docs}}
      - {call: files.read, args: {path: [docs, b.md]}, expect: {status: succeeded, output: {contains: bee}}}
      - {call: files.read, args: {path: [secret, s.md]}, expect: {status: denied, code: no_matching_grant}}
      - {call: files.list, args: {path: [docs]}, expect: {status: succeeded}}
      - {call: files.create, args: {path: [drafts, x.md], content: x}, expect: {status: succeeded, grant: g-draft-once}}
      - {call: files.create, args: {path: [drafts, y.md], content: y}, expect: {status: denied, cause: grant_exhausted}}
      - {list: {}, expect: {includes: [files.read], excludes: [files.delete]}}
      - {explain: files.delete, args: {path: [docs, a.md]}, expect: {allowed: false, fixes: [add_grant]}}
      - {namespaces: {disable: [files]}, expect: {enabled: [sharedos]}}
      - {audit: {}, expect: {contains: [{type: tool.invoked, outcome: denied, cause: grant_exhausted}]}}
YAML
done

cat > "$out/rego/policy.rego" <<'REGO'
package sharedos.authz

import rego.v1

grants := [
	{"id": "g-read-docs", "path": ["docs"], "actions": {"read", "list"}},
	{"id": "g-draft-once", "path": ["drafts"], "actions": {"create"}},
]

covers(g, path) if array.slice(path, 0, count(g.path)) == g.path

allow if {
	some g in grants
	input.action in g.actions
	covers(g, input.path)
	not exhausted(g)
}

exhausted(g) if {
	g.id == "g-draft-once"
	input.uses[g.id] >= 1
}
REGO
for ((i = 0; i < 100; i++)); do
  cat > "$out/rego/t$(printf %03d $i)_test.rego" <<REGO
package sharedos.authz_t$i

import rego.v1
import data.sharedos.authz

test_read_a if authz.allow with input as {"action": "read", "path": ["docs", "a.md"]}
test_read_b if authz.allow with input as {"action": "read", "path": ["docs", "b.md"]}
test_secret if not authz.allow with input as {"action": "read", "path": ["secret", "s.md"]}
test_list if authz.allow with input as {"action": "list", "path": ["docs"]}
test_create if authz.allow with input as {"action": "create", "path": ["drafts", "x.md"], "uses": {}}
test_spent if not authz.allow with input as {"action": "create", "path": ["drafts", "y.md"], "uses": {"g-draft-once": 1}}
test_no_delete if not authz.allow with input as {"action": "delete", "path": ["docs", "a.md"]}
test_no_root if not authz.allow with input as {"action": "read", "path": ["a.md"]}
test_no_write if not authz.allow with input as {"action": "replace", "path": ["docs", "a.md"]}
test_list_drafts if not authz.allow with input as {"action": "list", "path": ["drafts"]}
REGO
done

opa=${OPA:-$(command -v opa || true)}
if [ -z "$opa" ] && [ -x bench/out/opa-bin/opa ]; then opa=bench/out/opa-bin/opa; fi
if [ -z "$opa" ]; then
  echo "installing opa (go install, a few minutes)" >&2
  GOBIN=$PWD/bench/out/opa-bin go install github.com/open-policy-agent/opa@v1.4.2 >&2 || true
  [ -x bench/out/opa-bin/opa ] && opa=bench/out/opa-bin/opa
fi

# median wall seconds of running "$@" $runs times
median() {
  local ts=()
  for ((r = 0; r < runs; r++)); do
    local s e
    s=$(date +%s.%N)
    "$@" >/dev/null 2>&1 || { echo "failed: $*" >&2; exit 1; }
    e=$(date +%s.%N)
    ts+=("$(echo "$e - $s" | bc)")
  done
  printf '%s\n' "${ts[@]}" | sort -n | awk '{a[NR]=$1} END {if (NR%2) print a[(NR+1)/2]; else print (a[NR/2]+a[NR/2+1])/2}'
}

export HOME=$PWD/$out/home
s=$(median "$out/sharedos" test "$out/tests")
"$out/sharedos" test "$out/tests" | tail -1
printf 'sharedos test: 100 files x 10 steps: median %.3f s wall over %d runs\n' "$s" "$runs"
if [ -n "$opa" ]; then
  o=$(median "$opa" test "$out/rego")
  "$opa" test "$out/rego" | tail -1
  printf 'opa test:      100 files x 10 tests: median %.3f s wall over %d runs (%s)\n' "$o" "$runs" "$("$opa" version | head -1)"
  printf 'ratio sharedos/opa: %.1fx\n' "$(echo "$s / $o" | bc -l)"
else
  echo "opa test: SKIPPED — opa is not installed and could not be built"
fi
