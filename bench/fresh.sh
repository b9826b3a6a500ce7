#!/bin/sh
# Freshness across replicas (issue 23 item 3): two in-process serve replicas on one
# throwaway PostgreSQL cluster (internal/pgtest; needs the postgresql package). Prints
# the delay from a disable through replica A to B's refusal (p50/p99/max over TRIALS,
# default 10,000), the stale reads with the revision token (must be 0), the delay of a
# token revocation reaching each replica by NOTIFY and by the poll alone, and the load
# average (figures under load are indicative only).
set -eu
cd "$(dirname "$0")/.."
TRIALS_FLAG=""
if [ "${SHORT:-}" = 1 ]; then TRIALS_FLAG="-short"; fi
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
go test ./pkg/httpapi $TRIALS_FLAG -count=1 -v -timeout 30m \
	-run 'TestReplicasSeeADisableAtOnce|TestStoreTokensRevokedOnEveryReplica|TestStoreTokensPollCatchesUp' 2>&1 |
	grep -E 'refused by|stale reads|revocation without|--- (PASS|FAIL)' || true
go test ./pkg/pgstore -count=1 -v -run 'TestRevisionReachesOtherReplicasByNotify' 2>&1 | grep -E 'seen by|--- (PASS|FAIL)' || true
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg)"
