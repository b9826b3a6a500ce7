package repoplane

import (
	"context"
	"os"
	"testing"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// BenchmarkExternal times one tool on the repository named by REPOPLANE_BENCH_REPO
// (bench/repo.sh builds those repositories and compares against git). Each iteration
// builds a fresh Provider, as one CLI invocation would. REPOPLANE_BENCH_ACTION selects
// status (default), diff or log; REPOPLANE_BENCH_MAXCOUNT sets log's maxCount.
func BenchmarkExternal(b *testing.B) {
	dir := os.Getenv("REPOPLANE_BENCH_REPO")
	if dir == "" {
		b.Skip("REPOPLANE_BENCH_REPO is not set")
	}
	action := os.Getenv("REPOPLANE_BENCH_ACTION")
	var input any
	switch action {
	case "", ActionStatus:
		action = ActionStatus
	case ActionDiff:
		input = DiffInput{}
	case ActionLog:
		input = LogInput{MaxCount: 20}
	default:
		b.Fatalf("unknown action %q", action)
	}
	actx := kernel.AccessContext{World: "bench", Actor: kernel.Address{Kind: kernel.KindAgent, ID: "bench"},
		Authority: kernel.Address{Kind: kernel.KindHuman, ID: "bench"}, Owner: kernel.Address{Kind: kernel.KindHuman, ID: "bench"}}
	op := kernel.ResourceOperation{OperationID: "bench", Context: actx, Action: action, Input: input,
		Resource: kernel.ResourceRef{Namespace: Namespace, Path: []string{}}}
	b.ReportAllocs()
	for b.Loop() {
		p, err := NewProvider(dir, ProviderOptions{})
		if err != nil {
			b.Fatal(err)
		}
		rr, err := p.Invoke(context.Background(), op)
		if err != nil || rr.Status != kernel.StatusSucceeded {
			b.Fatalf("%s: %v %+v", action, err, rr.Error)
		}
	}
}
