package fsplane

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// TestExpectedVersionIsAtomic runs compare-and-swap increments from several providers
// over the same root (each with its own os.Root and its own lock handles, as separate
// processes would have): no increment may be lost, and every conflict must change
// nothing.
func TestExpectedVersionIsAtomic(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	e.write("counter", "0")
	e.write("log", "")
	const workers, each = 4, 25
	var wg sync.WaitGroup
	conflicts := make([]int, workers)
	for w := 0; w < workers; w++ {
		p, err := NewProvider(e.root, ProviderOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer p.Close()
		wg.Add(1)
		go func(w int, p *Provider) {
			defer wg.Done()
			ctx := context.Background()
			op := func(action string, path string, in any) kernel.ResourceResult {
				rr, err := p.Invoke(ctx, kernel.ResourceOperation{OperationID: "o",
					Resource: kernel.ResourceRef{Namespace: "files", Path: []string{path}}, Action: action, Input: in})
				if err != nil {
					t.Error(err)
				}
				return rr
			}
			for done := 0; done < each; {
				r := op(ActionRead, "counter", nil)
				if r.Status != kernel.StatusSucceeded {
					// A read racing another worker's replace sees the old or the new
					// file; it is never refused (it was path_escape once).
					t.Errorf("read while others replace: %+v", r.Error)
					return
				}
				rd := r.Output.(ReadOutput)
				n, _ := strconv.Atoi(rd.Content)
				c, _ := json.Marshal(strconv.Itoa(n + 1))
				rr := op(ActionReplace, "counter", WriteInput{Content: c, ExpectedVersion: &rd.Version})
				switch {
				case rr.Status == kernel.StatusSucceeded:
					done++
					line, _ := json.Marshal(fmt.Sprintf("w%d\n", w))
					if r := op(ActionAppend, "log", WriteInput{Content: line}); r.Status != kernel.StatusSucceeded {
						t.Errorf("append: %+v", r.Error)
					}
				case rr.Error.Code == CodeVersionConflict:
					conflicts[w]++
				default:
					t.Errorf("replace: %+v", rr.Error)
					return
				}
			}
		}(w, p)
	}
	wg.Wait()
	if s, _ := e.readFile("counter"); s != strconv.Itoa(workers*each) {
		t.Fatalf("counter = %s, want %d (lost updates)", s, workers*each)
	}
	if s, _ := e.readFile("log"); strings.Count(s, "\n") != workers*each {
		t.Fatalf("log has %d lines, want %d (lost appends)", strings.Count(s, "\n"), workers*each)
	}
	t.Logf("conflicts per worker: %v", conflicts)
	assertNoTemps(t, e.root)
}

// TestConcurrentMixedOperations runs reads, writes, greps and snapshots at once (for
// -race).
func TestConcurrentMixedOperations(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	for i := 0; i < 20; i++ {
		e.write(filepath.Join("d", fmt.Sprintf("f%02d.txt", i)), strings.Repeat("line ships\n", 50))
	}
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 15; i++ {
				name := fmt.Sprintf("f%02d.txt", (g*7+i)%20)
				var in any
				var action string
				switch i % 5 {
				case 0:
					action, in = ActionReplace, content(strings.Repeat("new ships\n", 40))
				case 1:
					action, in = ActionAppend, content("more ships\n")
				case 2:
					action, in = ActionRead, nil
				case 3:
					action, in = ActionGrep, GrepInput{Pattern: "ships", Mode: ModeLiteral}
					name = ""
				case 4:
					action, in = ActionSnapshotCreate, nil
					name = ""
				}
				path := []string{"d"}
				if name != "" {
					path = append(path, name)
				}
				rr, err := e.p.Invoke(context.Background(), kernel.ResourceOperation{OperationID: "o",
					Resource: kernel.ResourceRef{Namespace: "files", Path: path}, Action: action, Input: in})
				if err != nil || rr.Status != kernel.StatusSucceeded {
					t.Errorf("%s %v: %v %+v", action, path, err, rr.Error)
				}
			}
		}(g)
	}
	wg.Wait()
}
