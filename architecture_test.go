package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/sharedos/sharedos/pkg/api"
	"github.com/sharedos/sharedos/pkg/host"
	"github.com/sharedos/sharedos/pkg/kernel"
)

// The import rules of docs/architecture.md, checked on the source (non-test files).

const module = "github.com/sharedos/sharedos"

// surfaces translate between a protocol and pkg/api: they reach no store by name and
// never assemble or tune a kernel (that is pkg/host's).
var surfaces = []string{"cmd", "pkg/mcpserver", "pkg/mcphttp", "pkg/scenario", "pkg/httpapi"}

// hostTuning are pkg/kernel's host-tuning entry points: building a kernel, preparing
// its tools and authority, registering tools and providers. Package-level names are
// matched as kernel.Name, methods by their name on any receiver.
var (
	hostTuningFuncs   = []string{"New", "Config", "PrepareTool", "PreparedTool", "PrepareAuthority", "PreparedAuthority"}
	hostTuningMethods = []string{"RegisterTool", "RegisterPrepared", "RegisterToolProvider", "AdoptAuthorityLater"}
)

// knownExceptions are today's violations (file → what it reaches), each with why. The
// test fails on any other violation, and on an exception that no longer holds (remove it
// from this list then): the list only shrinks.
var knownExceptions = map[string][]string{}

func TestSurfacesReachNothingBelowTheService(t *testing.T) {
	t.Parallel()
	found := map[string][]string{}
	for _, dir := range surfaces {
		for _, file := range goFiles(t, dir) {
			f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			kernelName := ""
			for _, imp := range f.Imports {
				path, _ := strconv.Unquote(imp.Path.Value)
				if path == module+"/pkg/sqlitestore" {
					found[file] = append(found[file], "import pkg/sqlitestore")
				}
				if path == module+"/pkg/kernel" {
					kernelName = "kernel"
					if imp.Name != nil {
						kernelName = imp.Name.Name
					}
				}
			}
			ast.Inspect(f, func(n ast.Node) bool {
				sel, ok := n.(*ast.SelectorExpr)
				if !ok {
					return true
				}
				x, isIdent := sel.X.(*ast.Ident)
				switch {
				case isIdent && kernelName != "" && x.Name == kernelName && slices.Contains(hostTuningFuncs, sel.Sel.Name):
					found[file] = append(found[file], "kernel."+sel.Sel.Name)
				case slices.Contains(hostTuningMethods, sel.Sel.Name):
					found[file] = append(found[file], "."+sel.Sel.Name)
				}
				return true
			})
		}
	}
	checkExceptions(t, found, knownExceptions, "reaches below api.Service: %s (a surface calls pkg/api; see docs/architecture.md)",
		"no longer reaches %s: remove it from knownExceptions")
}

// Below the service: the methods of a host's session, a host, a kernel and a turn are
// what api.Service is built on. A surface constructs its embedded backend with some of
// them (constructors) and reads a turn's context; an operation goes through api.Service.
var (
	// belowService are the types whose exported methods are operations below the
	// service, by name (read by reflection, so a method added to them is covered).
	belowService = []reflect.Type{reflect.TypeFor[*host.Session](), reflect.TypeFor[*host.Host](),
		reflect.TypeFor[*kernel.Turn](), reflect.TypeFor[*kernel.Kernel]()}
	// belowNames are host.Escalations' operations whose names are not generic (its Get,
	// List and Resolve would match any package's): reached through Host.Escalations,
	// which belowService holds already.
	belowNames = []string{"EscalateIfOffered", "ByCall"}
	// backendConstructors build or close the embedded backend, or read what it was set
	// up with (no kernel operation, nothing audited): what a surface may call.
	backendConstructors = []string{"Open", "Service", "RequestService", "TurnService", "BeginTurnAt", "NewSession", "Close", "Context", "Host",
		"Definitions", "Definition", "Gateway", "GatewayNamespaces", "AccessContext"}
	// belowFields are a host's fields that reach below the service: a surface calling a
	// method through one (h.Store.ListAudit, h.Turn.ListTools, h.Kernel.BeginTurnWith)
	// operates below the service, whatever the method's name.
	belowFields = []string{"Store", "Turn", "Kernel"}
)

// knownBelowService are today's operations below the service in surface files (file →
// what it calls), each with why; the list only shrinks.
var knownBelowService = map[string][]string{}

// TestSurfacesOperateThroughTheService: no surface file calls an operation below
// api.Service — a method of host.Session, host.Host, kernel.Turn or kernel.Kernel (or
// one of belowNames) that
// is not one of api.Service's names nor a backend constructor, or any method through a
// host's Store, Turn or Kernel field (but the turn's Context). Matching is by name:
// belowService's methods are read by reflection; a name api.Service shares (ListTools,
// Invoke, …) is only caught through a field.
func TestSurfacesOperateThroughTheService(t *testing.T) {
	t.Parallel()
	below := map[string]bool{}
	for _, name := range belowNames {
		below[name] = true
	}
	for _, typ := range belowService {
		for i := range typ.NumMethod() {
			below[typ.Method(i).Name] = true
		}
	}
	for _, iface := range []reflect.Type{reflect.TypeFor[api.Service](), reflect.TypeFor[api.Envelope](),
		reflect.TypeFor[api.Checks](), reflect.TypeFor[api.Admin](), reflect.TypeFor[api.Messaging]()} {
		for i := range iface.NumMethod() {
			delete(below, iface.Method(i).Name)
		}
	}
	for _, name := range backendConstructors {
		delete(below, name)
	}
	if !below["InvokeTool"] || !below["EscalateIfOffered"] || !below["BeginTurnWith"] {
		t.Fatalf("the operations below the service lack InvokeTool, EscalateIfOffered or BeginTurnWith: %v", below)
	}
	found := map[string][]string{}
	eachSurfaceFile(t, func(file string, f *ast.File) {
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			if inner, ok := sel.X.(*ast.SelectorExpr); ok && slices.Contains(belowFields, inner.Sel.Name) &&
				!(inner.Sel.Name == "Turn" && sel.Sel.Name == "Context") {
				found[file] = append(found[file], "."+inner.Sel.Name+"."+sel.Sel.Name)
			} else if below[sel.Sel.Name] {
				if x, ok := sel.X.(*ast.Ident); !ok || !isPackage(f, x.Name) {
					found[file] = append(found[file], "."+sel.Sel.Name)
				}
			}
			return true
		})
	})
	checkExceptions(t, found, knownBelowService, "operates below api.Service: %s (a surface's operations go through api.Service; see docs/architecture.md)",
		"no longer calls %s: remove it from knownBelowService")
}

// checkExceptions fails on each violation found (file → what) that known does not list
// (violation: its message, naming what), and on each known exception no longer found
// (gone: its message): a list of exceptions only shrinks.
func checkExceptions(t *testing.T, found, known map[string][]string, violation, gone string) {
	t.Helper()
	for file, what := range found {
		for _, w := range dedupe(what) {
			if !slices.Contains(known[file], w) {
				t.Errorf("%s "+violation, file, w)
			}
		}
	}
	for file, what := range known {
		for _, w := range what {
			if !slices.Contains(found[file], w) {
				t.Errorf("%s "+gone, file, w)
			}
		}
	}
}

// eachSurfaceFile calls fn with each non-test Go file of the surfaces, parsed.
func eachSurfaceFile(t *testing.T, fn func(file string, f *ast.File)) {
	t.Helper()
	for _, dir := range surfaces {
		for _, file := range goFiles(t, dir) {
			f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			fn(file, f)
		}
	}
}

// isPackage reports whether name is the name f gives an import (a package-level call,
// pkg.Func, not a method).
func isPackage(f *ast.File, name string) bool {
	for _, imp := range f.Imports {
		path, _ := strconv.Unquote(imp.Path.Value)
		if imp.Name != nil && imp.Name.Name == name || imp.Name == nil && filepath.Base(path) == name {
			return true
		}
	}
	return false
}

// TestAPIImportsNoStoreOrPlane: pkg/api and pkg/client (the remote client), and
// everything they import from this module, are pkg/api, pkg/client, pkg/kernel and
// internal packages only — no store, plane, host or surface — so a program that only
// talks to a server links none of them.
func TestAPIImportsNoStoreOrPlane(t *testing.T) {
	t.Parallel()
	for _, root := range []string{"pkg/api", "pkg/client"} {
		seen := map[string]bool{}
		var walk func(pkg string, via []string)
		walk = func(pkg string, via []string) {
			if seen[pkg] {
				return
			}
			seen[pkg] = true
			rel := strings.TrimPrefix(strings.TrimPrefix(pkg, module), "/")
			if rel != "pkg/api" && rel != "pkg/client" && rel != "pkg/kernel" && !strings.HasPrefix(rel, "internal/") {
				t.Errorf("%s imports %s (via %s): it may import only pkg/api, pkg/kernel and internal packages", root, rel, strings.Join(via, " → "))
				return
			}
			for _, file := range goFiles(t, rel) {
				f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.ImportsOnly)
				if err != nil {
					t.Fatal(err)
				}
				for _, imp := range f.Imports {
					path, _ := strconv.Unquote(imp.Path.Value)
					if strings.HasPrefix(path, module+"/") {
						walk(path, append(slices.Clone(via), rel))
					}
				}
			}
		}
		walk(module+"/"+root, nil)
		if !seen[module+"/pkg/kernel"] {
			t.Fatalf("%s does not import pkg/kernel: the walk found nothing (is the module path right?)", root)
		}
	}
}

// goFiles are the non-test Go files of dir.
func goFiles(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		if n := e.Name(); strings.HasSuffix(n, ".go") && !strings.HasSuffix(n, "_test.go") {
			out = append(out, filepath.ToSlash(filepath.Join(dir, n)))
		}
	}
	if len(out) == 0 {
		t.Fatalf("no Go files in %s", dir)
	}
	return out
}

func dedupe(s []string) []string {
	slices.Sort(s)
	return slices.Compact(s)
}

// envReaders are the files that may read the process's environment (os.Getenv,
// os.LookupEnv, os.Environ — a call or the function as a value): cmd's Main, the
// library default of a caller that names no environment (internal/procenv), and
// programs and fixtures of their own (the test servers and the bench driver).
// Everything else reads it through an Env func it is given (the factory's Env,
// host.Settings.Env and ProcessEnv, gateway.Options.Getenv, scenario.Options.Getenv).
var envReaders = []string{
	"cmd/root.go",
	"cmd/remote_harness.go", // the testscripts' remote-mode Main (MainRemoteHarness), a Main of its own
	"internal/procenv/procenv.go",
	"internal/pgtest/pgtest.go",   // the tests' PostgreSQL cluster (its DSN and switch)
	"internal/fakemcp/fakemcp.go", // a fake upstream MCP server, a program of its own
	"bench/mcpfloor/main.go",      // a benchmark program of its own
	"main_benchtrace.go",          // bench/serve-trace.sh's build only (-tags benchtrace)
}

// TestEnvironmentReadOnlyThroughEnv: no non-test file outside envReaders reads the
// process's environment by name.
func TestEnvironmentReadOnlyThroughEnv(t *testing.T) {
	t.Parallel()
	var found []string
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != "." && (strings.HasPrefix(n, ".") || n == "testdata" || n == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") || slices.Contains(envReaders, filepath.ToSlash(path)) {
			return nil
		}
		for _, r := range envReads(t, path) {
			found = append(found, filepath.ToSlash(path)+": "+r)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range found {
		t.Errorf("%s reads the process's environment: take an Env func instead (or add the file to envReaders, with why)", f)
	}
}

// envReads are the os.Getenv, os.LookupEnv and os.Environ of file (by the name it gives
// package os).
func envReads(t *testing.T, file string) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, parser.SkipObjectResolution)
	if err != nil {
		t.Fatal(err)
	}
	osName := ""
	for _, imp := range f.Imports {
		if path, _ := strconv.Unquote(imp.Path.Value); path == "os" {
			osName = "os"
			if imp.Name != nil {
				osName = imp.Name.Name
			}
		}
	}
	if osName == "" {
		return nil
	}
	var out []string
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if id, ok := sel.X.(*ast.Ident); ok && id.Name == osName {
			switch sel.Sel.Name {
			case "Getenv", "LookupEnv", "Environ":
				out = append(out, "os."+sel.Sel.Name)
			}
		}
		return true
	})
	return out
}
