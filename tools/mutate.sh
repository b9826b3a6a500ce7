#!/usr/bin/env bash
# Mutation check of the project's own tests: each line of MUTATIONS plants one plausible
# bug (a sed edit of one file), runs the package tests that must catch it, and restores
# the file. Prints CAUGHT or MISSED per mutation and a closing "N passed, N failed" line
# (passed = caught). Needs a clean working tree for the files it edits.
#
#   tools/mutate.sh            # every mutation
#   tools/mutate.sh kernel     # only those whose package path contains "kernel"
set -uo pipefail
cd "$(dirname "$0")/.."
filter=${1:-}

# file | sed expression | package whose tests must fail
MUTATIONS=(
  'pkg/kernel/authorize.go|s/if len(walked) >= maxLen {/if len(walked) > maxLen {/|./pkg/kernel'
  'pkg/kernel/authorize.go|s/return slices.Equal(c.Resource.Path, req.Resource.Path)/return PathWithin(c.Resource.Path, req.Resource.Path)/|./pkg/kernel'
  'pkg/kernel/authorize.go|s/case unverified != nil:/case false \&\& unverified != nil:/|./pkg/kernel'
  'pkg/kernel/authorize.go|s/ok, err = z.Usage.TryConsume(ctx, UsageKeyOf(g), \*g.Constraints.MaxUses)/ok, err = true, nil/|./pkg/kernel'
  'pkg/kernel/authorize.go|s/case g.Subject != actx.Actor:/case false:/|./pkg/kernel'
  'pkg/kernel/authority.go|s/if c.hasExpires \&\& max(admitted, opNow) >= c.expiresAt {/if c.hasExpires \&\& admitted >= c.expiresAt {/|./pkg/kernel'
  'pkg/kernel/plan.go|s/p.NamespaceEnabled = slices.Contains(st.actx.EnabledToolNamespaces, def.Namespace)/p.NamespaceEnabled = true/|./pkg/kernel'
  'pkg/kernel/plan.go|s/if !WithinDeclaredBound(req, def.RequiredCapability, st.actx.Owner) {/if false {/|./pkg/kernel'
  'pkg/kernel/kernel.go|s/consume := stage == StageAuthorization/consume := true/|./pkg/kernel'
  'pkg/kernel/explain.go|s/d, diag := t.k.authz.Settle(ctx, st.auth, t.actx, ev, false)/d, diag := t.k.authz.Settle(ctx, st.auth, t.actx, ev, true)/|./pkg/kernel'
)

caught=0 missed=0
for m in "${MUTATIONS[@]}"; do
  IFS='|' read -r file expr pkg <<<"$m"
  [[ -n "$filter" && "$pkg" != *"$filter"* ]] && continue
  cp "$file" "$file.orig"
  sed -i "$expr" "$file"
  if cmp -s "$file" "$file.orig"; then
    echo "STALE   $file: $expr (the pattern no longer matches; update the list)"
    mv "$file.orig" "$file"; missed=$((missed + 1)); continue
  fi
  if go test -count=1 -short "$pkg" >/dev/null 2>&1; then
    echo "MISSED  $file: $expr"; missed=$((missed + 1))
  else
    echo "CAUGHT  $file: $expr"; caught=$((caught + 1))
  fi
  mv "$file.orig" "$file"
done
echo "mutations: $caught passed, $missed failed"
[ "$missed" -eq 0 ]
