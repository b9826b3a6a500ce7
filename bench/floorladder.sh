#!/usr/bin/env bash
# The process floor by what a binary links (issue 28, item 1): a ladder of prototype
# binaries whose main only blank-imports a set of this module's packages and returns at
# once (every package init runs; no command runs), beside a Go hello-world, the whole
# sharedos binary with a main that returns at once (bench/startfloor), `sharedos version`
# and `git --version`. Each rung is a binary a split could ship for some commands: the
# rows say what that split would buy before any command's own work. Nothing here is
# shipped: the mains are written under bench/out-ladder/ (git-ignored).
#
# Prints, per rung: page faults by kind (bench/pagefaults.py: file pages ~2 us, anonymous
# and copy-on-write pages ~16 us on the lead's Firecracker VM), packages initialised, and
# the p50 wall and CPU of interleaved runs with the ratio to `git --version`
# (bench/interleave.py).
#
#   bench/floorladder.sh              # 20 rounds
#   RUNS=100 bench/floorladder.sh
#   CGO_ENABLED=0 bench/floorladder.sh  # every rung built static
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${RUNS:-20}
out=bench/out-ladder
rm -rf "$out"
mkdir -p "$out"
m=github.com/sharedos/sharedos/pkg
# name|packages (blank-imported)
rungs=(
  "kernel+grantfile+store|$m/kernel $m/grantfile $m/store"
  "modernc sqlite alone|modernc.org/sqlite"
  "+ sqlitestore|$m/kernel $m/grantfile $m/store $m/sqlitestore"
  "+ fsplane + repoplane (a tools-list binary without gateway/pgstore)|$m/kernel $m/grantfile $m/store $m/sqlitestore $m/fsplane $m/repoplane"
  "+ host (links gateway, pgstore, mailbox)|$m/kernel $m/grantfile $m/store $m/sqlitestore $m/fsplane $m/repoplane $m/host"
  "pkg/gateway alone|$m/gateway"
  "pkg/mcpserver alone|$m/mcpserver"
  "pkg/pgstore alone|$m/pgstore"
  "pkg/httpapi alone|$m/httpapi"
)
mkdir -p "$out/hello"
printf 'package main\n\nimport "os"\n\nfunc main() { os.Stdout.WriteString("hello\\n") }\n' > "$out/hello/main.go"
(cd "$out/hello" && GO111MODULE=off go build -o hello main.go)
go build -o "$out/startfloor" ./bench/startfloor
go build -o "$out/sharedos" .
i=0
bins=()
for r in "${rungs[@]}"; do
  name=${r%%|*} pkgs=${r#*|}
  d="$out/_rung$i" # '_': outside ./... (go vet ./..., go build ./... skip it)
  mkdir -p "$d"
  {
    echo "// Command rung$i: $name (bench/floorladder.sh; not shipped)."
    echo "package main"
    echo
    echo "import ("
    for p in $pkgs; do echo "	_ \"$p\""; done
    echo ")"
    echo
    echo "func main() {}"
  } > "$d/main.go"
  gofmt -w "$d/main.go"
  go build -o "$d/bin" "./$d"
  bins+=("$name|$d/bin")
  i=$((i + 1))
done

inits() { GODEBUG=inittrace=1 "$@" 2>&1 >/dev/null | grep -c '^init ' || true; }
echo "== page faults per start (counts: steady under load)"
pf=(-- "Go hello-world" "$out/hello/hello")
for b in "${bins[@]}"; do pf+=("${b%%|*}" "${b#*|}"); done
pf+=("whole binary, main returns (startfloor)" "$out/startfloor" "sharedos version -o json" "$out/sharedos version -o json" "git --version" "git --version")
python3 bench/pagefaults.py --runs "${PF_RUNS:-7}" "${pf[@]}"
echo
echo "== packages initialised"
printf '%6s  %s\n' "$(inits "$out/hello/hello")" "Go hello-world"
for b in "${bins[@]}"; do printf '%6s  %s\n' "$(inits "${b#*|}")" "${b%%|*}"; done
printf '%6s  %s\n' "$(inits "$out/startfloor")" "whole binary (startfloor)"
echo
echo "== wall and CPU, interleaved, ÷ git --version"
args=(--runs "$runs" --warmup 3 --peer "git --version" "$(command -v git) --version" --cmd "Go hello-world" "$out/hello/hello")
for b in "${bins[@]}"; do args+=(--cmd "${b%%|*}" "${b#*|}"); done
args+=(--cmd "whole binary, main returns (startfloor)" "$out/startfloor" --cmd "sharedos version" "$out/sharedos version -o json")
python3 bench/interleave.py "${args[@]}"
