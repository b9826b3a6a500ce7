package kernel_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// genWorld is a randomly generated kernel, context and call, for the property tests.
type genWorld struct {
	k    *kernel.Kernel
	actx kernel.AccessContext
	call kernel.ToolCall
	desc string
}

var genPaths = [][]string{{}, {"docs"}, {"docs", "a"}, {"docs", "b"}, {"docsx"}, {"src", "main.go"}, {"snapshot"}}

// genGrant draws one grant: its actions, scope, path, owner, window, purposes, use bound,
// delegation and world/subject/issuer are each sometimes off.
func genGrant(r *rand.Rand, i int, parents []string) kernel.CapabilityGrant {
	actions := [][]string{{"read"}, {"write"}, {"read", "write"}, {"*"}, {"readme"}, {"snapshot:*"}}[r.IntN(6)]
	scope := []kernel.Scope{kernel.ScopeExact, kernel.ScopeDescendants}[r.IntN(2)]
	g := grant(fmt.Sprintf("g%d", i), actions, scope, genPaths[r.IntN(len(genPaths))]...)
	switch r.IntN(12) {
	case 0:
		g.Subject = carol
	case 1:
		g.Issuer = carol
	case 2:
		g.NamespaceID = "world-b"
	case 3:
		g.Capabilities[0].Resource.Owner = &carol
	case 4:
		g.Capabilities[0].Resource.Namespace = "repo"
	}
	switch r.IntN(6) {
	case 0:
		g.Constraints.ExpiresAt = "2026-08-03T08:30:00.000Z"
	case 1:
		g.Constraints.NotBefore = "2026-08-03T10:00:00.000Z"
	case 2:
		g.RevokedAt = "2026-08-03T08:45:00.000Z"
	case 3:
		g.IssuedAt = "2026-08-03T09:30:00.000Z"
	}
	if r.IntN(5) == 0 {
		g.Constraints.Purposes = [][]string{{"prepare-update"}, {"other"}}[r.IntN(2)]
	}
	if r.IntN(4) == 0 {
		g.Constraints.MaxUses = i64(int64(1 + r.IntN(2)))
	}
	if len(parents) > 0 && r.IntN(5) == 0 {
		g.ParentGrantID = parents[r.IntN(len(parents))]
	}
	if r.IntN(6) == 0 {
		g.Constraints.DelegationDepth = i64(int64(r.IntN(3)))
	}
	return g
}

// genWorldFrom builds a world from r: grants, ports that sometimes fail or refuse, the
// enabled namespaces and one call (sometimes malformed).
func genWorldFrom(r *rand.Rand) genWorld {
	n := r.IntN(6)
	var grants []kernel.CapabilityGrant
	var ids []string
	for i := range n {
		g := genGrant(r, i, ids)
		grants = append(grants, g)
		ids = append(ids, g.ID)
	}
	usage := newMemUsage()
	usage.broken = r.IntN(15) == 0
	cfg := kernel.Config{Grants: &grantStore{grants: grants, mode: []string{"filtering", "filtering", "filtering", "passthrough", "throws"}[r.IntN(5)]},
		Usage: usage, Audit: &memAudit{}}
	if r.IntN(3) > 0 {
		cfg.Resolver = &grantStore{grants: grants}
	}
	if r.IntN(4) == 0 && n > 0 {
		cfg.Ceiling = refuse(ids[r.IntN(n)])
	}
	if r.IntN(8) == 0 {
		cfg.Usage = nil
	}
	k := kernel.New(cfg)
	for _, t := range []kernel.ToolHandler{echoTool("t.read", "read"), echoTool("t.write", "write"), ownerTool("t.other")} {
		if err := k.RegisterTool(t); err != nil {
			panic(err)
		}
	}
	actx := testContext()
	if r.IntN(5) == 0 {
		actx.EnabledToolNamespaces = []string{}
	}
	if r.IntN(6) == 0 {
		actx.Purpose = "other"
	}
	tool := []string{"t.read", "t.write", "t.other", "t.missing", ""}[r.IntN(5)]
	path := genPaths[r.IntN(len(genPaths))]
	args, _ := json.Marshal(map[string]any{"path": path})
	switch r.IntN(10) {
	case 0:
		args = []byte(`[1]`)
	case 1:
		args = []byte(`{"path":[".."]}`)
	}
	c := kernel.ToolCall{ID: "call-" + strconv.Itoa(r.IntN(1000)), Tool: tool, Arguments: args, TraceID: actx.TraceID, RequestedAt: actx.Now}
	if r.IntN(10) == 0 {
		c.TraceID = "other-trace"
	}
	return genWorld{k: k, actx: actx, call: c, desc: fmt.Sprintf("grants %+v\ncall %s %s", grants, c.Tool, args)}
}

// ownerTool is a read tool whose requirement names carol as owner (another owner).
func ownerTool(name string) kernel.ToolHandler {
	h := echoTool(name, "read")
	h.ResolveRequirement = func(_ kernel.AccessContext, call kernel.ParsedToolCall) (kernel.CapabilityRequirement, error) {
		q := req("read", call.Parsed.([]string)...)
		q.Resource.Owner = &carol
		return q, nil
	}
	return h
}

// checkPlanAgrees runs explain then the call on one generated world and holds them to
// one decision: the same outcome, code, gate and cause; an allowed explanation means
// the call ran, and a call that ran was explained as allowed.
func checkPlanAgrees(t *testing.T, w genWorld) {
	t.Helper()
	ctx := context.Background()
	turn, err := w.k.BeginTurn(w.actx)
	if err != nil {
		t.Fatal(err)
	}
	ex := turn.ExplainCall(ctx, w.call)
	res := w.k.InvokeTool(ctx, w.actx, w.call)
	if err := explainAgrees(ex, res); err != nil {
		t.Fatalf("%v\n%s", err, w.desc)
	}
	if res.Status == kernel.StatusSucceeded {
		if !ex.Allowed || ex.Decision == nil || !ex.Decision.Allowed || ex.Discovery == nil || !ex.Discovery.Allowed || !ex.NamespaceOn {
			t.Fatalf("the call succeeded but explain did not allow every gate: %+v\n%s", ex, w.desc)
		}
	}
	if ex.Allowed != (len(ex.Findings) == 0) {
		t.Fatalf("allowed %v with findings %+v", ex.Allowed, ex.Findings)
	}
	// Every port failure is fail-closed: an outage code never goes with a success.
	for _, f := range ex.Findings {
		if kernel.IsInfrastructureDenial(f.Code) && ex.Allowed {
			t.Fatalf("allowed after an outage finding %+v", f)
		}
	}
}

// TestPlanAgreesWithInvoke is the property that explain (the plan settled without
// consuming) never allows what InvokeTool refuses and vice versa, over generated worlds.
func TestPlanAgreesWithInvoke(t *testing.T) {
	t.Parallel()
	seeds := 3000
	if testing.Short() {
		seeds = 300
	}
	for seed := range seeds {
		r := rand.New(rand.NewPCG(uint64(seed), 0x5eed))
		checkPlanAgrees(t, genWorldFrom(r))
	}
}

// FuzzPlan drives the same property from fuzz input: no panic, explain and InvokeTool
// agree, and nothing is allowed after an evaluation error.
func FuzzPlan(f *testing.F) {
	for _, s := range []uint64{0, 1, 7, 42, 99, 1234} {
		var b [16]byte
		binary.LittleEndian.PutUint64(b[:], s)
		f.Add(b[:])
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var b [16]byte
		copy(b[:], data)
		r := rand.New(rand.NewPCG(binary.LittleEndian.Uint64(b[:8]), binary.LittleEndian.Uint64(b[8:])))
		checkPlanAgrees(t, genWorldFrom(r))
	})
}

// TestConcurrentInvokeOnOneTurn: calls on one turn from many goroutines spend a bounded
// grant exactly to its bound and never more (run under -race in CI).
func TestConcurrentInvokeOnOneTurn(t *testing.T) {
	t.Parallel()
	g := grant("g", []string{"read"}, kernel.ScopeDescendants, "docs")
	g.Constraints.MaxUses = i64(50)
	audit := &memAudit{}
	k := newKernel(t, []kernel.CapabilityGrant{g}, audit, echoTool("t.read", "read"))
	turn := mustTurn(t, k, testContext())
	var ok, denied atomic.Int64
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 20 {
				c := call("t.read", `{"path":["docs","a"]}`)
				c.ID = fmt.Sprintf("c-%d-%d", w, i)
				switch res := turn.InvokeTool(context.Background(), c); {
				case res.Status == kernel.StatusSucceeded:
					ok.Add(1)
				case res.Error.Code == kernel.ErrorCodeOf(kernel.ReasonGrantExhausted),
					res.Error.Code == kernel.CodeToolUnavailable && res.Cause == kernel.CauseOf(kernel.ReasonGrantExhausted):
					// spent between discovery and the consuming check, or before discovery
					denied.Add(1)
				default:
					t.Errorf("unexpected result %+v", res.Error)
				}
				if _, err := turn.ListTools(context.Background()); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	if ok.Load() != 50 || denied.Load() != 110 {
		t.Fatalf("%d succeeded, %d exhausted; want exactly 50 and 110", ok.Load(), denied.Load())
	}
}

// TestKernelImportsNoIO holds the package to its doc: no other package of this module
// (its internal/ helpers excepted), nothing with I/O side effects.
func TestKernelImportsNoIO(t *testing.T) {
	t.Parallel()
	banned := map[string]bool{"os": true, "os/exec": true, "net": true, "net/http": true, "database/sql": true,
		"syscall": true, "unsafe": true, "io/ioutil": true, "os/signal": true, "plugin": true}
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	for _, name := range files {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, name, nil, parser.ImportsOnly)
		if err != nil {
			t.Fatal(err)
		}
		for _, imp := range f.Imports {
			path, _ := strconv.Unquote(imp.Path.Value)
			own := strings.HasPrefix(path, "github.com/sharedos/sharedos/")
			if banned[path] || strings.HasPrefix(path, "net/") || own && !strings.HasPrefix(path, "github.com/sharedos/sharedos/internal/") {
				t.Errorf("%s imports %s", name, path)
			}
		}
	}
}

// pureCore are the functions of the pure core whose statement coverage is held to the
// floor: the plan, its resolution, and the pure half and precedence of authorization.
var pureCore = map[string][]string{
	"plan.go":      {"planCall", "resolve", "authorizationFinding", "Result", "WithinDeclaredBound", "parseArguments", "resolveRequirement"},
	"authorize.go": {"Evaluate", "evaluateInto", "nextEligible", "pureRejection", "precedence", "mergeRejections", "Settle", "CapabilityCovers", "CapabilityIntersects", "sameTarget", "grantMatches"},
}

// pureCoreFloor is the lowest statement coverage of the pure core the suite accepts.
const pureCoreFloor = 95.0

// TestPureCoreCoverage fails when the kernel's own tests cover less than pureCoreFloor
// percent of the pure core's statements. It runs the package's tests once more with a
// cover profile (skipped in -short mode and inside that run).
func TestPureCoreCoverage(t *testing.T) {
	if testing.Short() || os.Getenv("SHAREDOS_COVERAGE_CHILD") != "" {
		t.Skip("coverage floor: not in -short mode or inside the coverage run")
	}
	goBin, err := goTool()
	if err != nil {
		t.Skip(err)
	}
	profile := filepath.Join(t.TempDir(), "cover.out")
	out, err := runGo(t, goBin, "test", "-count=1", "-short", "-coverprofile="+profile, "-run", "^Test", ".")
	if err != nil {
		t.Fatalf("coverage run failed: %v\n%s", err, out)
	}
	covered, total := pureCoreCoverage(t, profile)
	pct := 100 * float64(covered) / float64(total)
	t.Logf("pure core: %d of %d statements covered (%.1f%%)", covered, total, pct)
	if pct < pureCoreFloor {
		t.Fatalf("the pure core's statement coverage %.1f%% is below the floor of %.0f%%", pct, pureCoreFloor)
	}
}

// pureCoreCoverage counts the covered and total statements of the pureCore functions in
// a cover profile.
func pureCoreCoverage(t *testing.T, profile string) (covered, total int) {
	t.Helper()
	type span struct{ from, to int }
	funcs := map[string][]span{}
	fset := token.NewFileSet()
	for file, names := range pureCore {
		f, err := parser.ParseFile(fset, file, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]bool{}
		for _, n := range names {
			want[n] = true
		}
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || !want[fn.Name.Name] {
				continue
			}
			delete(want, fn.Name.Name)
			funcs[file] = append(funcs[file], span{fset.Position(fn.Pos()).Line, fset.Position(fn.End()).Line})
		}
		for n := range want {
			t.Fatalf("pure-core function %s not found in %s", n, file)
		}
	}
	data, err := os.ReadFile(profile)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n")[1:] {
		// name.go:12.3,14.5 2 1
		colon := strings.LastIndexByte(line, ':')
		if colon < 0 {
			continue
		}
		file := filepath.Base(line[:colon])
		spans := funcs[file]
		if spans == nil {
			continue
		}
		var sl, sc, el, ec, stmts, count int
		if _, err := fmt.Sscanf(line[colon+1:], "%d.%d,%d.%d %d %d", &sl, &sc, &el, &ec, &stmts, &count); err != nil {
			t.Fatalf("cover profile line %q: %v", line, err)
		}
		for _, s := range spans {
			if sl >= s.from && el <= s.to {
				total += stmts
				if count > 0 {
					covered += stmts
				}
			}
		}
	}
	if total == 0 {
		t.Fatal("no statement of the pure core in the cover profile")
	}
	return covered, total
}

// goTool finds the go command that runs this test: go test puts its GOROOT's bin
// first on the test's PATH.
func goTool() (string, error) { return exec.LookPath("go") }

// runGo runs the go command in this package's folder, marked as the coverage child.
func runGo(t *testing.T, goBin string, args ...string) ([]byte, error) {
	t.Helper()
	cmd := exec.Command(goBin, args...)
	cmd.Env = append(os.Environ(), "SHAREDOS_COVERAGE_CHILD=1")
	return cmd.CombinedOutput()
}

// TestTurnAuditMetadata: a surface's metadata reaches every event of its turn, and the
// kernel's own keys win over it.
func TestTurnAuditMetadata(t *testing.T) {
	t.Parallel()
	audit := &memAudit{}
	k := newKernel(t, []kernel.CapabilityGrant{grant("g", []string{"read"}, kernel.ScopeDescendants, "docs")}, audit, echoTool("t.read", "read"))
	turn, err := k.BeginTurnWith(testContext(), kernel.TurnOptions{AuditMetadata: map[string]any{"surface": "mcp", "session": "s-1", "catalogHash": "forged"}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := turn.ListTools(context.Background()); err != nil {
		t.Fatal(err)
	}
	turn.InvokeTool(context.Background(), call("t.read", `{"path":["docs","a"]}`))
	turn.InvokeTool(context.Background(), call("t.read", `{"path":["other"]}`))
	if len(audit.events) < 5 {
		t.Fatalf("%d events", len(audit.events))
	}
	for _, ev := range audit.events {
		if ev.Metadata["surface"] != "mcp" || ev.Metadata["session"] != "s-1" {
			t.Errorf("%s: metadata %v lacks the surface", ev.Type, ev.Metadata)
		}
		if (ev.Type == kernel.EventToolInvoked || ev.Type == kernel.EventToolCatalogListed) && ev.Metadata["catalogHash"] == "forged" {
			t.Errorf("%s: the surface overrode the kernel's catalogHash", ev.Type)
		}
	}
}

// TestTurnOptions: a turn returns the options it was begun with (a reply's turn begun
// with them writes the same metadata).
func TestTurnOptions(t *testing.T) {
	t.Parallel()
	k := newKernel(t, nil, &memAudit{}, echoTool("t.read", "read"))
	meta := map[string]any{"surface": "test"}
	for _, opts := range []kernel.TurnOptions{{}, {AuditMetadata: meta}, {AuditMetadata: meta, AuthorityResolvedOnce: true}, {AuthorityResolvedOnce: true, SessionKey: "s"}} {
		turn, err := k.BeginTurnWith(testContext(), opts)
		if err != nil {
			t.Fatal(err)
		}
		got := turn.Options()
		if fmt.Sprint(got.AuditMetadata) != fmt.Sprint(opts.AuditMetadata) || got.AuthorityResolvedOnce != opts.AuthorityResolvedOnce || got.SessionKey != opts.SessionKey {
			t.Errorf("Options() = %+v, begun with %+v", got, opts)
		}
	}
}
