package scenario

import (
	"bytes"
	"context"
	"encoding/xml"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// head is a scenario with two files, a read grant on docs/, a single-use create grant on
// drafts/, an escalation grant, and a pinned context.
const head = `version: 1
files: {"docs/a.md": "hello world", "docs/b.md": "bee", "secret/s.md": "no"}
grants:
  - id: g-read-docs
    subject: agent:a
    issuer: human:o
    capabilities:
      - resource: {namespace: files, path: [docs], owner: human:o}
        actions: [read, list]
        scope: descendants
  - id: g-draft-once
    subject: agent:a
    issuer: human:o
    capabilities:
      - resource: {namespace: files, path: [drafts], owner: human:o}
        actions: [create]
        scope: descendants
    constraints: {maxUses: 1}
  - id: g-escalate
    subject: agent:a
    issuer: human:o
    capabilities:
      - resource: {namespace: sharedos, path: [escalation], owner: human:o}
        actions: [request]
        scope: exact
context: {as: agent:a, owner: human:o, purpose: test, now: 2026-06-01T09:00:00Z}
namespaces: [files, sharedos]
`

// headWith is head with extra grant entries (YAML list items) appended to its grants.
func headWith(extra string) string {
	return strings.Replace(head, "context: {", extra+"context: {", 1)
}

func runSrc(t *testing.T, src string, opts Options) *Report {
	t.Helper()
	dir := t.TempDir()
	p := filepath.Join(dir, "s.yaml")
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	opts.TempDir = t.TempDir()
	return RunFiles(context.Background(), []string{p}, opts)
}

func oneStep(step string) string {
	return head + "tests:\n  - name: t\n    steps:\n" + step
}

// failedKeys are the mismatch keys of every failed step of the report.
func failedKeys(rep *Report) []string {
	var out []string
	for _, fr := range rep.Files {
		if fr.Err != nil {
			out = append(out, "invalid: "+fr.Err.Error())
		}
		for _, tr := range fr.Tests {
			if tr.Outcome == Errored {
				out = append(out, "error: "+tr.Reason)
			}
			for _, sr := range tr.Steps {
				for _, m := range sr.Mismatches {
					out = append(out, m.Key)
				}
			}
		}
	}
	return out
}

// TestEveryExpectation: each expect key passes with the observed value and fails, naming
// the key, with another one — so no assertion is vacuous.
func TestEveryExpectation(t *testing.T) {
	t.Parallel()
	read := "      - call: files.read\n        args: {path: [docs, a.md]}\n"
	deny := "      - call: files.read\n        args: {path: [secret, s.md]}\n"
	create := "      - call: files.create\n        args: {path: [notes, n.md], content: x}\n"
	cases := []struct {
		name, step, good, bad, key string
	}{
		{"status", read, "{status: succeeded}", "{status: denied}", "status"},
		{"code", deny, "{code: no_matching_grant}", "{code: grant_exhausted}", "code"},
		{"gate", deny, "{gate: grant}", "{gate: ceiling}", "gate"},
		{"cause", "      - call: repo.status\n        args: {path: [docs]}\n", "{cause: namespace_disabled}", "{cause: not_registered}", "cause"},
		{"grant", read, "{grant: g-read-docs}", "{grant: g-draft-once}", "grant"},
		{"rejected", deny, "{rejected: {g-read-docs: capability}}", "{rejected: {g-read-docs: window}}", "rejected"},
		{"rejected none", read, "{rejected: {}}", "{rejected: {}}", ""},
		{"rejected empty", deny, "{rejected: {g-read-docs: capability}}", "{rejected: {}}", "rejected"},
		{"output contains", read, "{output: {contains: hello}}", "{output: {contains: goodbye}}", "output.contains"},
		{"output equals", "      - call: files.list\n        args: {path: [docs]}\n", "", "{output: {equals: {entries: []}}}", "output.equals"},
		{"output jsonpath", read, "{output: {jsonpath: {\"$.content\": hello world}}}", "{output: {jsonpath: {\"$.content\": hello}}}", "output.jsonpath $.content"},
		{"output excludes", read, "{output: {excludes: [secret]}}", "{output: {excludes: [world]}}", "output.excludes"},
		{"output excludes a message", deny, "{output: {excludes: [hunter2]}}", "{output: {excludes: [secret/s.md]}}", "output.excludes"},
		{"output contains a list", read, "{output: {contains: [hello, world]}}", "{output: {contains: [hello, moon]}}", "output.contains"},
		{"output of a denial", deny, "{status: denied}", "{output: {contains: no}}", "output"},
		{"audit", deny, "{audit: [{type: authorization.checked, outcome: denied, code: no_matching_grant}, {type: tool.invoked, outcome: denied}]}", "{audit: [{type: tool.invoked, outcome: succeeded}]}", "audit"},
		{"exit denied", deny, "{exit: 3}", "{exit: 0}", "exit"},
		{"exit ok", read, "{exit: 0}", "{exit: 3}", "exit"},
		{"exit failed", "      - call: files.read\n        args: {path: [docs, nope.md]}\n", "{status: failed, exit: 4}", "{exit: 3}", "exit"},
		{"explain allowed", "      - explain: files.read\n        args: {path: [docs, a.md]}\n", "{allowed: true, grant: g-read-docs, exit: 0, fixes: []}", "{allowed: false}", "allowed"},
		{"explain fixes", strings.Replace(create, "call", "explain", 1), "{allowed: false, fixes: [add_grant], code: no_matching_grant, exit: 3}", "{fixes: [enable_namespace]}", "fixes"},
		{"explain no fixes", "      - explain: files.read\n        args: {path: [docs, a.md]}\n", "{fixes: []}", "{fixes: [add_grant]}", "fixes"},
		{"list includes", "      - list: {}\n", "{includes: [files.read, files.list, files.create, sharedos.escalate]}", "{includes: [files.delete]}", "includes"},
		{"list excludes", "      - list: {}\n", "{excludes: [files.delete, repo.status]}", "{excludes: [files.read]}", "excludes"},
		{"namespaces enabled", "      - namespaces: {enable: [repo], disable: [sharedos]}\n", "{enabled: [repo, files]}", "{enabled: [files]}", "enabled"},
		{"audit contains", read + "      - audit: {}\n", "{contains: [{type: tool.invoked, tool: files.read, outcome: succeeded}]}", "{contains: [{type: tool.invoked, outcome: denied}]}", "contains"},
		{"audit excludes", read + "      - audit: {}\n", "{excludes: [{outcome: denied}]}", "{excludes: [{type: tool.invoked}]}", "excludes"},
		{"escalate", "      - escalate: may I?\n", "{status: escalated, exit: 5, grant: g-escalate}", "{status: denied}", "status"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if c.good != "" {
				if keys := failedKeys(runSrc(t, oneStep(c.step+"        expect: "+c.good+"\n"), Options{})); len(keys) != 0 {
					t.Fatalf("good expectation %s failed: %v", c.good, keys)
				}
			}
			keys := failedKeys(runSrc(t, oneStep(c.step+"        expect: "+c.bad+"\n"), Options{}))
			if c.key == "" {
				if len(keys) != 0 {
					t.Fatalf("failed: %v", keys)
				}
				return
			}
			if len(keys) != 1 || keys[0] != c.key {
				t.Fatalf("bad expectation %s: mismatches %v, want [%s]", c.bad, keys, c.key)
			}
		})
	}
}

// TestStatePerTest: steps of a test share the state database (a single-use grant is
// spent once), tests do not (the next test may spend it again), and every test gets a
// fresh copy of the root (a test that deletes a file does not hide it from the next).
func TestStatePerTest(t *testing.T) {
	t.Parallel()
	src := headWith(`  - id: g-delete
    subject: agent:a
    issuer: human:o
    capabilities:
      - resource: {namespace: files, path: [docs], owner: human:o}
        actions: [delete]
        scope: descendants
`) + `tests:
  - name: spend
    steps:
      - call: files.create
        args: {path: [drafts, x.md], content: one}
        expect: {status: succeeded, grant: g-draft-once}
      - call: files.create
        args: {path: [drafts, y.md], content: two}
        expect: {status: denied, cause: grant_exhausted, rejected: {g-draft-once: exhausted}}
      - call: files.delete
        args: {path: [docs, a.md]}
        expect: {status: succeeded}
      - call: files.read
        args: {path: [docs, a.md]}
        expect: {status: failed}
  - name: fresh
    steps:
      - call: files.create
        args: {path: [drafts, x.md], content: again}
        expect: {status: succeeded}
      - call: files.read
        args: {path: [docs, a.md]}
        expect: {status: succeeded, output: {contains: hello}}
      - audit: {}
        expect: {excludes: [{tool: files.delete}]}
`
	if keys := failedKeys(runSrc(t, src, Options{})); len(keys) != 0 {
		t.Fatalf("failed: %v", keys)
	}
}

// TestContextOverrides: a test and a step may change the actor, the purpose and the
// instant; the step's instant is the kernel's wall clock too (an expired grant stays
// expired at any date, a future one stays inactive).
func TestContextOverrides(t *testing.T) {
	t.Parallel()
	src := head + `tests:
  - name: another actor
    as: agent:b
    steps:
      - call: files.read
        args: {path: [docs, a.md]}
        expect: {status: denied, code: tool_unavailable}
      - call: files.read
        as: agent:a
        args: {path: [docs, a.md]}
        expect: {status: succeeded}
  - name: expiry
    steps:
      - call: files.read
        args: {path: [docs, a.md]}
        now: 2030-01-01T00:00:00Z
        expect: {status: succeeded}
      - explain: files.read
        args: {path: [docs, a.md]}
        now: 2000-01-01T00:00:00Z
        expect: {allowed: false, rejected: {g-read-docs: window}}
`
	src = strings.Replace(src, "        scope: descendants\n  - id: g-draft-once", "        scope: descendants\n    constraints: {expiresAt: 2031-01-01T00:00:00Z}\n  - id: g-draft-once", 1)
	src = strings.Replace(src, "  - id: g-read-docs\n    subject: agent:a\n    issuer: human:o\n", "  - id: g-read-docs\n    subject: agent:a\n    issuer: human:o\n    issuedAt: 2026-01-01T00:00:00Z\n", 1)
	if keys := failedKeys(runSrc(t, src, Options{})); len(keys) != 0 {
		t.Fatalf("failed: %v", keys)
	}
	expired := strings.Replace(src, "now: 2030-01-01T00:00:00Z", "now: 2032-01-01T00:00:00Z", 1)
	if keys := failedKeys(runSrc(t, expired, Options{})); len(keys) != 1 || keys[0] != "status" {
		t.Fatalf("after expiry: %v", keys)
	}
}

// TestSkipTodoRunAndErrors: skip and todo are reported skipped (their steps never run),
// --run selects by file/test, and a test whose context names no actor is an error.
func TestSkipTodoRunAndErrors(t *testing.T) {
	t.Parallel()
	src := head + `tests:
  - name: skipped one
    skip: not yet
    steps: [{call: files.read, expect: {status: succeeded}}]
  - name: todo one
    todo: write it
  - name: runs
    steps: [{list: {}}]
  - name: no actor
    as: agent:a
    steps: [{list: {}}]
`
	rep := runSrc(t, src, Options{})
	if rep.Passed != 2 || rep.Skipped != 2 || rep.Failed != 0 || rep.Summary() != "2 passed, 0 failed, 2 skipped" {
		t.Fatalf("summary %q", rep.Summary())
	}
	rep = runSrc(t, src, Options{Run: regexp.MustCompile(`s\.yaml/runs$`)})
	if rep.Passed != 1 || len(rep.Files[0].Tests) != 1 || rep.Summary() != "1 passed, 0 failed" {
		t.Fatalf("--run: %q", rep.Summary())
	}
	noActor := strings.Replace(head, "as: agent:a, ", "", 1) + "tests:\n  - name: t\n    steps: [{list: {}}]\n"
	rep = runSrc(t, noActor, Options{})
	if rep.Failed != 1 || rep.Files[0].Tests[0].Outcome != Errored || !strings.Contains(rep.Files[0].Tests[0].Reason, "no actor: set context.as") {
		t.Fatalf("no actor: %+v", rep.Files[0].Tests[0])
	}
}

// TestFixtureRootUntouched: a test that deletes and writes in its root leaves the
// fixture directory as it was.
func TestFixtureRootUntouched(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	root := filepath.Join(dir, "fixture")
	if err := os.MkdirAll(filepath.Join(root, "docs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "docs", "a.md"), []byte("keep"), 0o644); err != nil {
		t.Fatal(err)
	}
	src := strings.Replace(headWith(`  - id: g-write
    subject: agent:a
    issuer: human:o
    capabilities:
      - resource: {namespace: files, path: [docs], owner: human:o}
        actions: [delete, replace]
        scope: descendants
`), "files: {", "root: fixture\nfiles: {", 1) + `tests:
  - name: t
    steps:
      - call: files.replace
        args: {path: [docs, a.md], content: changed}
        expect: {status: succeeded}
      - call: files.delete
        args: {path: [docs, a.md]}
        expect: {status: succeeded}
`
	p := filepath.Join(dir, "s.yaml")
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	rep := RunFiles(context.Background(), []string{p}, Options{TempDir: t.TempDir()})
	if keys := failedKeys(rep); len(keys) != 0 {
		t.Fatalf("failed: %v", keys)
	}
	if b, err := os.ReadFile(filepath.Join(root, "docs", "a.md")); err != nil || string(b) != "keep" {
		t.Fatalf("fixture changed: %q %v", b, err)
	}
}

// TestDeterministic: two runs print the same bytes (-o json, text), and the JUnit reports
// differ only in their times.
func TestDeterministic(t *testing.T) {
	t.Parallel()
	var outs [2][3]string
	for i := range outs {
		rep := RunFiles(context.Background(), []string{"testdata/triage.yaml"}, Options{TempDir: t.TempDir(), Explain: true})
		var j, x, u bytes.Buffer
		if err := rep.WriteJSON(&j); err != nil {
			t.Fatal(err)
		}
		rep.WriteText(&x, true)
		if err := rep.WriteJUnit(&u); err != nil {
			t.Fatal(err)
		}
		outs[i] = [3]string{j.String(), x.String(), regexp.MustCompile(`time="[0-9.]+"`).ReplaceAllString(u.String(), `time=""`)}
	}
	for k, what := range []string{"json", "text", "junit"} {
		if outs[0][k] != outs[1][k] {
			t.Errorf("%s output differs between runs:\n%s\n---\n%s", what, outs[0][k], outs[1][k])
		}
	}
	if !strings.Contains(outs[0][0], `"callId":"`) || strings.Count(outs[0][0], "\n") != 10 {
		t.Errorf("json: want 10 lines with call ids:\n%s", outs[0][0])
	}
}

// TestJUnit: the report parses back with a suite per file, a case per test (classname
// and file = the file, line = the test's), a failure, an error for an invalid file and a
// skipped case.
func TestJUnit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "good.yaml")
	bad := filepath.Join(dir, "bad.yaml")
	src := head + "tests:\n  - name: passes\n    steps: [{list: {}}]\n  - name: fails\n    steps: [{list: {}, expect: {includes: [files.delete]}}]\n  - name: later\n    todo: soon\n"
	_ = os.WriteFile(good, []byte(src), 0o644)
	_ = os.WriteFile(bad, []byte("version: 1\ntests: [{name: x, steps: [{lst: {}}]}]\n"), 0o644)
	rep := RunFiles(context.Background(), []string{good, bad}, Options{TempDir: t.TempDir()})
	var b bytes.Buffer
	if err := rep.WriteJUnit(&b); err != nil {
		t.Fatal(err)
	}
	var back junitSuites
	if err := xml.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatalf("%v\n%s", err, b.String())
	}
	if back.Tests != 4 || back.Failures != 1 || back.Errors != 1 || back.Skipped != 1 || len(back.Suites) != 2 {
		t.Fatalf("totals %+v", back)
	}
	s := back.Suites[0]
	if s.Name != good || len(s.Cases) != 3 || s.Cases[0].Classname != good || s.Cases[0].File != good || s.Cases[0].Line != 29 {
		t.Fatalf("suite %+v", s)
	}
	if f := s.Cases[1].Failure; f == nil || !strings.Contains(f.Message, "includes: expected") || s.Cases[2].Skipped == nil || s.Cases[2].Skipped.Message != "todo: soon" {
		t.Fatalf("cases %+v", s.Cases)
	}
	if e := back.Suites[1].Cases[0].Error; e == nil || !strings.Contains(e.Message, `unknown key "lst"`) || back.Suites[1].Cases[0].Line != 2 {
		t.Fatalf("invalid file case %+v", back.Suites[1].Cases[0])
	}
}

// TestUpdate: --update rewrites the expect blocks of failing steps with the observed
// values (the file then passes), never touches a passing step, and keeps comments and
// the rest of the file byte for byte.
func TestUpdate(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "s.yaml")
	src := head + `tests:
  - name: t
    steps:
      # a comment that stays
      - call: files.read
        args: {path: [secret, s.md]}
        expect:
          status: denied
          code: grant_exhausted   # wrong
          exit: 3
      - call: files.read
        args: {path: [docs, a.md]}
        expect: {status: succeeded, output: {contains: hello}}
      - list: {}
        expect: {includes: [files.create], excludes: [files.read, repo.diff]}
`
	_ = os.WriteFile(p, []byte(src), 0o644)
	rep := RunFiles(context.Background(), []string{p}, Options{TempDir: t.TempDir()})
	if rep.Failed != 1 {
		t.Fatalf("want a failure: %s", rep.Summary())
	}
	changed, err := Update(rep)
	if err != nil || len(changed) != 1 {
		t.Fatalf("update: %v %v", changed, err)
	}
	b, _ := os.ReadFile(p)
	got := string(b)
	for _, want := range []string{
		"      # a comment that stays\n",
		"        expect: {status: denied, code: no_matching_grant, exit: 3}\n      - call: files.read\n",
		"        expect: {status: succeeded, output: {contains: hello}}\n",
		"        expect: {includes: [files.create], excludes: [repo.diff]}\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("updated file lacks %q:\n%s", want, got)
		}
	}
	rep = RunFiles(context.Background(), []string{p}, Options{TempDir: t.TempDir()})
	if !rep.OK() {
		t.Fatalf("after update: %s %v", rep.Summary(), failedKeys(rep))
	}
	if changed, err := Update(rep); err != nil || len(changed) != 0 {
		t.Fatalf("a passing run changed %v %v", changed, err)
	}
	if b2, _ := os.ReadFile(p); string(b2) != got {
		t.Fatal("a passing run rewrote the file")
	}
}

// TestCoverage: the grants no step matched and the tools no step listed or called.
func TestCoverage(t *testing.T) {
	t.Parallel()
	rep := runSrc(t, oneStep("      - call: files.read\n        args: {path: [docs, a.md]}\n"), Options{})
	c := rep.Files[0].Coverage
	if strings.Join(c.UnusedGrants, ",") != "g-draft-once,g-escalate" {
		t.Fatalf("unused grants %v", c.UnusedGrants)
	}
	if len(c.UnusedTools) == 0 || strings.Contains(strings.Join(c.UnusedTools, ","), "files.read,") {
		t.Fatalf("unused tools %v", c.UnusedTools)
	}
	var b bytes.Buffer
	if !rep.WriteCoverage(&b) || !strings.Contains(b.String(), "grants never matched: g-draft-once, g-escalate") {
		t.Fatalf("coverage text %q", b.String())
	}
}

// TestGitHub: one annotation per failed step with file and line, escaped; a summary table.
func TestGitHub(t *testing.T) {
	t.Parallel()
	rep := runSrc(t, oneStep("      - call: files.read\n        args: {path: [docs, a.md]}\n        expect: {status: denied, code: \"a,b: c\"}\n"), Options{})
	var a, s bytes.Buffer
	rep.WriteGitHubAnnotations(&a)
	rep.WriteGitHubSummary(&s)
	if !regexp.MustCompile(`^::error file=[^,]*s\.yaml,line=31,title=t / step 1::status: expected denied, observed succeeded%0Acode: expected a,b: c, observed \n$`).MatchString(a.String()) {
		t.Fatalf("annotation %q", a.String())
	}
	if !strings.Contains(s.String(), "| 0 | 1 | 0 |") || !strings.Contains(s.String(), "0 passed, 1 failed") {
		t.Fatalf("summary %q", s.String())
	}
}

// TestGoAPI: the triage scenarios pass from go test.
func TestGoAPI(t *testing.T) {
	rep := TestFiles(t, "testdata/triage.yaml")
	if rep.Passed != 2 {
		t.Fatalf("%s", rep.Summary())
	}
}

// TestRootBounds: a fixture root beyond its bound of entries (MaxRootEntries; 10 here) is refused (the test errors,
// naming the bound) instead of being copied.
func TestRootBounds(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	big := filepath.Join(dir, "big")
	if err := os.MkdirAll(big, 0o755); err != nil {
		t.Fatal(err)
	}
	for i := range 11 {
		if err := os.WriteFile(filepath.Join(big, strconv.Itoa(i)), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	p := filepath.Join(dir, "s.yaml")
	src := strings.Replace(head, "files: {", "root: big\nfiles: {", 1) + "tests:\n  - name: t\n    steps: [{list: {}}]\n"
	if err := os.WriteFile(p, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	rep := RunFiles(context.Background(), []string{p}, Options{TempDir: t.TempDir(), rootEntries: 10})
	tr := rep.Files[0].Tests[0]
	if tr.Outcome != Errored || !strings.Contains(tr.Reason, "more than 10 entries") {
		t.Fatalf("%s %q", tr.Outcome, tr.Reason)
	}
}

// TestExampleScenarios runs the shipped examples/tests from `go test` through the public
// API, as a project would run its own: every test of the example grants passes.
func TestExampleScenarios(t *testing.T) {
	rep := TestFiles(t, filepath.Join("..", "..", "examples", "tests"))
	if rep.Failed != 0 || rep.Passed < 8 {
		t.Fatalf("examples/tests: %s", rep.Summary())
	}
}
