package scenario

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sharedos/sharedos/internal/jscompat"
	"github.com/sharedos/sharedos/internal/procenv"
	"github.com/sharedos/sharedos/pkg/api"
	"github.com/sharedos/sharedos/pkg/host"
	"github.com/sharedos/sharedos/pkg/kernel"
)

// Options tune a run.
type Options struct {
	// Run selects the tests whose "file/test" name matches (nil: every test).
	Run *regexp.Regexp
	// TempDir is where each test's root and state database are made. "": $TMPDIR when
	// it is set, else /dev/shm when it is a writable folder (a memory file system on
	// Linux: the sandboxes are thrown away after each test, and creating folders, files
	// and databases there costs a fraction of a disk's), else os.TempDir.
	TempDir string
	// Clock is read for a test whose context pins no instant (nil: time.Now).
	Clock func() time.Time
	// Parallel is how many tests run at once (0: GOMAXPROCS). Results keep file order.
	Parallel int
	// Getenv reads the environment (TMPDIR, for TempDir's default; nil: the
	// process's, internal/procenv). The command line passes its factory's Env.
	Getenv func(string) string
	// Explain keeps the explanation of every call and explain step, not only of the
	// failed ones, and every step's audit records (for -v and -o json).
	Explain bool

	emptyDB     string // a migrated empty state database to copy (set by the run)
	rootEntries int    // bound of a fixture root (0: MaxRootEntries; tests lower it)
}

// Outcome of a test.
type Outcome string

// Test outcomes.
const (
	Passed  Outcome = "passed"
	Failed  Outcome = "failed"
	Skipped Outcome = "skipped"
	// Errored: the test could not run (its root could not be built, the host refused
	// its context); it counts as failed.
	Errored Outcome = "error"
)

// Report is the result of a run.
type Report struct {
	Files                            []*FileResult
	Passed, Failed, Skipped, Invalid int
}

// FileResult is the result of one file.
type FileResult struct {
	Path string
	File *File  // nil when the file is invalid
	Err  *Error // why the file is invalid
	// Tests are the selected tests, in file order.
	Tests []*TestResult
	// Coverage of the file's grants and of the host's tools by the steps that ran.
	Coverage Coverage
}

// Coverage says which grants no step matched and which tools no step listed or called.
type Coverage struct {
	UnusedGrants []string `json:"unusedGrants"`
	UnusedTools  []string `json:"unusedTools"`
}

// TestResult is the result of one test.
type TestResult struct {
	File     string
	Name     string
	Line     int
	Outcome  Outcome
	Reason   string // skip or todo reason; the error of an errored test
	Steps    []*StepResult
	Duration time.Duration

	matched map[string]bool
	used    map[string]bool
	grants  []string
	tools   []string
}

// StepResult is the result of one step.
type StepResult struct {
	Index      int              `json:"step"`
	Line       int              `json:"line"`
	Kind       string           `json:"kind"`
	Tool       string           `json:"tool,omitempty"`
	Passed     bool             `json:"passed"`
	Mismatches []Mismatch       `json:"mismatches,omitempty"`
	Observed   Observed         `json:"observed"`
	Explain    *api.Explanation `json:"explain,omitempty"`
	CallID     string           `json:"callId,omitempty"`

	step *Step
}

// Observed is what a step saw.
type Observed struct {
	Status   string            `json:"status,omitempty"`
	Code     string            `json:"code,omitempty"`
	Gate     string            `json:"gate,omitempty"`
	Cause    string            `json:"cause,omitempty"`
	Grant    string            `json:"grant,omitempty"`
	Rejected map[string]string `json:"rejected,omitempty"`
	Output   any               `json:"output,omitempty"`
	Message  string            `json:"message,omitempty"`
	Exit     int               `json:"exit"`
	Allowed  *bool             `json:"allowed,omitempty"`
	Fixes    []string          `json:"fixes,omitempty"`
	Tools    []string          `json:"tools,omitempty"`
	Enabled  []string          `json:"enabled,omitempty"`
	Audit    []AuditRecord     `json:"audit,omitempty"`
}

// The CLI's exit codes (spec 40 §5), which `exit:` asserts.
const (
	exitOK        = 0
	exitFailed    = 1
	exitDenied    = 3
	exitToolFail  = 4
	exitEscalated = 5
)

// OK reports whether the run passed: no failed test and no invalid file.
func (r *Report) OK() bool { return r.Failed == 0 && r.Invalid == 0 }

// RunFiles parses and runs the scenario files at paths.
func RunFiles(ctx context.Context, paths []string, opts Options) *Report {
	files := make([]*File, len(paths))
	errs := make([]*Error, len(paths))
	for i, p := range paths {
		f, err := ParseFile(p)
		if err != nil {
			var se *Error
			if !errors.As(err, &se) {
				se = &Error{File: p, Message: err.Error()}
			}
			errs[i] = se
			continue
		}
		files[i] = f
	}
	return run(ctx, paths, files, errs, opts)
}

// Run runs parsed files.
func Run(ctx context.Context, files []*File, opts Options) *Report {
	paths := make([]string, len(files))
	for i, f := range files {
		paths[i] = f.Path
	}
	return run(ctx, paths, files, make([]*Error, len(files)), opts)
}

type job struct {
	file *File
	test *Test
	res  *TestResult
}

func run(ctx context.Context, paths []string, files []*File, errs []*Error, opts Options) *Report {
	if opts.Clock == nil {
		opts.Clock = time.Now
	}
	rep := &Report{}
	var jobs []job
	for i, f := range files {
		if f != nil && errs[i] == nil {
			if e := validateTools(f); e != nil {
				f, errs[i] = nil, e
			}
		}
		fr := &FileResult{Path: paths[i], File: f, Err: errs[i]}
		rep.Files = append(rep.Files, fr)
		if f == nil {
			rep.Invalid++
			continue
		}
		for ti := range f.Tests {
			t := &f.Tests[ti]
			if opts.Run != nil && !opts.Run.MatchString(f.Path+"/"+t.Name) {
				continue
			}
			tr := &TestResult{File: f.Path, Name: t.Name, Line: t.Line}
			fr.Tests = append(fr.Tests, tr)
			jobs = append(jobs, job{f, t, tr})
		}
	}
	// One folder per run: every test's root and state database below it, and the state
	// databases side by side in one folder, so that the validated grant cache (keyed by
	// the grant files' content) and the content-addressed snapshot blobs are shared by the
	// run's tests (each test's state database — usage, namespaces, audit, snapshot index
	// — is its own).
	runDir, err := os.MkdirTemp(defaultTempDir(opts.TempDir, opts.Getenv), "sharedos-test-")
	if err != nil {
		for _, j := range jobs {
			j.res.Outcome, j.res.Reason = Errored, fmt.Sprintf("temporary directory: %v", err)
		}
		jobs = nil
	} else {
		defer os.RemoveAll(runDir)
		if err := os.Mkdir(filepath.Join(runDir, "state"), 0o700); err != nil {
			for _, j := range jobs {
				j.res.Outcome, j.res.Reason = Errored, fmt.Sprintf("temporary directory: %v", err)
			}
			jobs = nil
		}
	}
	opts.TempDir = runDir
	if jobs != nil {
		// A fresh state database is a copy of one migrated empty database (migrating
		// each test's would cost more than all its steps).
		tmpl := filepath.Join(runDir, "empty.db")
		if st, err := host.OpenState(ctx, &host.Settings{State: tmpl}, host.WorkloadEach); err == nil && st.Close() == nil {
			opts.emptyDB = tmpl
		}
	}
	n := opts.Parallel
	if n <= 0 {
		n = runtime.GOMAXPROCS(0)
	}
	ch := make(chan job)
	var wg sync.WaitGroup
	for range min(n, max(len(jobs), 1)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range ch {
				start := time.Now()
				runTest(ctx, j.file, j.test, j.res, opts)
				j.res.Duration = time.Since(start)
			}
		}()
	}
	for _, j := range jobs {
		ch <- j
	}
	close(ch)
	wg.Wait()
	for _, fr := range rep.Files {
		if fr.File == nil {
			continue
		}
		matched, used := map[string]bool{}, map[string]bool{}
		var grants, tools []string
		ran := false
		for _, tr := range fr.Tests {
			switch tr.Outcome {
			case Passed:
				rep.Passed++
			case Skipped:
				rep.Skipped++
				continue
			default:
				rep.Failed++
			}
			ran = ran || tr.grants != nil
			for g := range tr.matched {
				matched[g] = true
			}
			for t := range tr.used {
				used[t] = true
			}
			grants, tools = mergeSorted(grants, tr.grants), mergeSorted(tools, tr.tools)
		}
		fr.Coverage = Coverage{UnusedGrants: []string{}, UnusedTools: []string{}}
		if ran {
			for _, g := range grants {
				if !matched[g] {
					fr.Coverage.UnusedGrants = append(fr.Coverage.UnusedGrants, g)
				}
			}
			for _, t := range tools {
				if !used[t] {
					fr.Coverage.UnusedTools = append(fr.Coverage.UnusedTools, t)
				}
			}
		}
	}
	return rep
}

func mergeSorted(a, b []string) []string {
	for _, x := range b {
		if !slices.Contains(a, x) {
			a = append(a, x)
		}
	}
	slices.Sort(a)
	return a
}

// DerivedID is a UUID-shaped id derived from parts (so that trace and call ids, and
// everything that prints them, are byte-stable from run to run).
func DerivedID(parts ...string) string {
	h := sha256.Sum256([]byte(strings.Join(parts, "\x00")))
	b := h[:16]
	b[6] = b[6]&0x0f | 0x80 // version 8: custom
	b[8] = b[8]&0x3f | 0x80
	x := hex.EncodeToString(b)
	return x[:8] + "-" + x[8:12] + "-" + x[12:16] + "-" + x[16:20] + "-" + x[20:]
}

// allNamespaces is the product default of a test that names no selection: every
// namespace of the host's tools.
func allNamespaces() []string {
	defs, err := host.DefinitionTools()
	if err != nil {
		return nil
	}
	var out []string
	for _, d := range defs {
		if !slices.Contains(out, d.Definition.Namespace) {
			out = append(out, d.Definition.Namespace)
		}
	}
	slices.Sort(out)
	return out
}

// runner is one test's host and its shared state.
type runner struct {
	f       *File
	t       *Test
	h       *host.Host
	instant time.Time
	mu      sync.Mutex
	seen    int64 // the audit sequence number of the last record attributed to a step
	want    bool  // the current step reads its audit records (see step)
	res     *TestResult
	opts    Options
}

func runTest(ctx context.Context, f *File, t *Test, res *TestResult, opts Options) {
	switch {
	case t.Skip != "":
		res.Outcome, res.Reason = Skipped, "skip: "+t.Skip
		return
	case t.Todo != "":
		res.Outcome, res.Reason = Skipped, "todo: "+t.Todo
		return
	}
	dir, err := os.MkdirTemp(opts.TempDir, "t-")
	if err != nil {
		res.Outcome, res.Reason = Errored, fmt.Sprintf("temporary directory: %v", err)
		return
	}
	defer os.RemoveAll(dir)
	r := &runner{f: f, t: t, res: res, opts: opts}
	if err := r.open(ctx, dir); err != nil {
		res.Outcome, res.Reason = Errored, err.Error()
		return
	}
	defer r.h.Close()
	res.Outcome = Passed
	res.matched, res.used = map[string]bool{}, map[string]bool{}
	res.grants = []string{}
	if r.h.Grants != nil {
		for _, gf := range r.h.Grants.Files() {
			for _, g := range gf.Grants {
				res.grants = append(res.grants, g.ID)
			}
		}
	}
	for _, d := range r.h.Definitions() {
		res.tools = append(res.tools, d.Name)
	}
	for i := range t.Steps {
		sr := r.step(ctx, i, &t.Steps[i])
		res.Steps = append(res.Steps, sr)
		if !sr.Passed {
			res.Outcome = Failed
		}
	}
	if err := r.matchedGrants(ctx); err != nil {
		res.Outcome, res.Reason = Errored, err.Error()
	}
}

// open builds the test's root and grant files under dir and opens its host.
func (r *runner) open(ctx context.Context, dir string) error {
	f, t := r.f, r.t
	root := filepath.Join(dir, "root")
	if err := os.Mkdir(root, 0o755); err != nil {
		return err
	}
	if f.Root != "" {
		if err := copyTree(f.Root, root, r.opts.rootEntries); err != nil {
			return fmt.Errorf("copy root %s: %v", f.Root, err)
		}
	}
	c := t.Context.over(f.Context)
	if c.Now != "" {
		ms, _ := kernel.ParseTimestamp(c.Now)
		r.instant = time.UnixMilli(ms).UTC()
	} else {
		r.instant = time.UnixMilli(r.opts.Clock().UnixMilli()).UTC()
	}
	if err := writeFiles(root, f.Files, r.instant); err != nil {
		return err
	}
	grants := slices.Clone(f.GrantFiles)
	if f.InlineGrants != nil {
		p := filepath.Join(dir, "grants", "inline.json")
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		if err := os.WriteFile(p, f.InlineGrantsFor(f.Context.World), 0o644); err != nil {
			return err
		}
		grants = append(grants, p)
	}
	ns := t.Namespaces
	if ns == nil {
		ns = f.Namespaces
	}
	if ns == nil {
		ns = allNamespaces()
	}
	s := &host.Settings{Root: root, State: filepath.Join(filepath.Dir(dir), "state", filepath.Base(dir)+".db"), Grants: grants,
		As: c.As, Owner: c.Owner, Authority: c.Authority, World: c.World, Purpose: c.Purpose,
		Now: kernel.FormatTimestamp(r.instant.UnixMilli()), Trace: DerivedID("trace", f.Path, t.Name),
		CallID: DerivedID("call", f.Path, t.Name, "0"), DefaultNamespaces: ns,
		ForbiddenNamespaces: f.Ceiling.Namespaces, FrozenPaths: f.Ceiling.FrozenPaths, FrozenActions: f.Ceiling.FrozenActions,
		Messaging: messagingOf(f.Agents)}
	if r.opts.emptyDB != "" {
		if err := copyFile(r.opts.emptyDB, s.State); err != nil {
			return fmt.Errorf("state database: %v", err)
		}
	}
	// The kernel's wall clock is the step's instant: a scenario is reproducible at any
	// date, and its sandbox has nothing a pinned instant could widen access to.
	p, err := host.Prepare(s, r.clock, host.Needs{Planes: true, Actor: true})
	if err != nil {
		return hostMessage(err)
	}
	h, err := p.Open(ctx)
	if err != nil {
		p.Close()
		return hostMessage(err)
	}
	r.h = h
	return nil
}

func hostMessage(err error) error {
	var he *host.Error
	if errors.As(err, &he) {
		msg := strings.ReplaceAll(he.Message, "pass --as or a grant file context", "set context.as or name a grant file with a context")
		return errors.New(msg)
	}
	return err
}

func (r *runner) clock() time.Time {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.instant
}

// turn begins the turn of one step: the test's context with the step's overrides, at the
// step's instant, under the selection stored now for its (world, owner).
func (r *runner) turn(ctx context.Context, s *Step) (*kernel.Turn, error) {
	actx := r.h.Prepared.Context
	c := s.Context
	var err error
	if c.As != "" {
		if actx.Actor, err = kernel.ParseAddress(c.As); err != nil {
			return nil, err
		}
	}
	if c.Owner != "" {
		if actx.Owner, err = kernel.ParseAddress(c.Owner); err != nil {
			return nil, err
		}
	}
	if c.Authority != "" {
		if actx.Authority, err = kernel.ParseAddress(c.Authority); err != nil {
			return nil, err
		}
	}
	if c.World != "" {
		actx.World = c.World
	}
	if c.Purpose != "" {
		actx.Purpose = c.Purpose
	}
	instant := r.h.Instant
	if c.Now != "" {
		ms, _ := kernel.ParseTimestamp(c.Now)
		instant = time.UnixMilli(ms).UTC()
	}
	r.mu.Lock()
	r.instant = instant
	r.mu.Unlock()
	actx.Now = kernel.FormatTimestamp(instant.UnixMilli())
	return r.h.BeginTurnAt(ctx, actx, map[string]any{"surface": "test"})
}

// newRecords returns the audit records written since the previous step: the service's
// cursor read after the last one seen (api.AuditQuery.AfterSeq).
// A step that asserts neither its records nor its grant (and whose observations are not
// printed) only moves the cursor; the test's matched grants are read once at its end.
func (r *runner) newRecords(ctx context.Context) ([]AuditRecord, error) {
	after := r.seen
	evs, err := r.h.Service().QueryAudit(ctx, api.AuditQuery{AfterSeq: &after})
	if err != nil {
		return nil, serviceCause(err)
	}
	if len(evs) == 0 {
		return []AuditRecord{}, nil
	}
	r.seen = evs[len(evs)-1].Seq
	if !r.want {
		return nil, nil
	}
	out := make([]AuditRecord, 0, len(evs))
	for _, ev := range evs {
		rec := recordOf(ev)
		if ev.Type == kernel.EventAuthorizationChecked && ev.Outcome == kernel.OutcomeAllowed && ev.GrantID != "" {
			r.res.matched[ev.GrantID] = true
		}
		out = append(out, rec)
	}
	return out, nil
}

func (r *runner) allRecords(ctx context.Context) ([]AuditRecord, error) {
	evs, err := r.h.Service().QueryAudit(ctx, api.AuditQuery{Oldest: true})
	if err != nil {
		return nil, err
	}
	out := make([]AuditRecord, len(evs))
	for i, ev := range evs {
		out[i] = recordOf(ev)
	}
	return out, nil
}

// matchedGrants marks the grants some allowed decision of the test used (coverage).
func (r *runner) matchedGrants(ctx context.Context) error {
	evs, err := r.h.Service().QueryAudit(ctx, api.AuditQuery{Types: []string{string(kernel.EventAuthorizationChecked)},
		Outcomes: []string{string(kernel.OutcomeAllowed)}})
	for _, ev := range evs {
		if ev.GrantID != "" {
			r.res.matched[ev.GrantID] = true
		}
	}
	return err
}

func (r *runner) step(ctx context.Context, i int, s *Step) *StepResult {
	sr := &StepResult{Index: i + 1, Line: s.Line, Kind: s.Kind, Tool: s.Tool, step: s}
	r.want = r.opts.Explain || s.Expect != nil && (s.Expect.AuditSet || s.Expect.Grant != nil)
	if s.Kind == KindEscalate {
		sr.Tool = kernel.EscalationToolName
	}
	err := r.exec(ctx, i, s, sr)
	if err != nil {
		sr.Observed.Exit = exitFailed
		sr.Mismatches = append(sr.Mismatches, Mismatch{Key: "error", Expected: nil, Observed: err.Error()})
	}
	if s.Expect != nil {
		sr.Mismatches = append(sr.Mismatches, check(s.Expect, &sr.Observed)...)
	}
	sr.Passed = len(sr.Mismatches) == 0
	if sr.Passed && !r.opts.Explain {
		sr.Explain = nil
	}
	return sr
}

func (r *runner) exec(ctx context.Context, i int, s *Step, sr *StepResult) error {
	t, err := r.turn(ctx, s)
	if err != nil {
		return err
	}
	o := &sr.Observed
	switch s.Kind {
	case KindCall, KindExplain, KindEscalate:
		args := s.Args
		if s.Kind == KindEscalate {
			args, _ = json.Marshal(map[string]string{"reason": s.Reason})
		}
		sr.CallID = DerivedID("call", r.f.Path, r.t.Name, strconv.Itoa(i))
		call := kernel.ToolCall{ID: sr.CallID, Tool: sr.Tool, Arguments: args, TraceID: t.Context().TraceID, RequestedAt: t.Context().Now}
		r.res.used[call.Tool] = true
		// the step's operations go through the service of its turn (the one every
		// surface consumes); the escalation branch and the audit reads are the host's
		svc := r.h.TurnService(t, sr.CallID)
		req := api.InvokeRequest{Tool: call.Tool, Arguments: call.Arguments}
		expl, err := svc.Explain(ctx, req)
		if err != nil {
			return err
		}
		sr.Explain = &expl
		o.Rejected = map[string]string{}
		for _, c := range expl.Candidates {
			o.Rejected[c.GrantID] = c.Reason
		}
		if s.Kind == KindExplain {
			allowed := expl.Allowed
			o.Allowed = &allowed
			o.Status = string(kernel.StatusSucceeded)
			if len(expl.Findings) > 0 {
				fd := expl.Findings[0]
				o.Status, o.Code, o.Gate, o.Cause = string(fd.Status), string(fd.Code), string(fd.Gate), string(fd.Cause)
			}
			if expl.MatchedGrant != nil {
				o.Grant = expl.MatchedGrant.ID
				r.res.matched[o.Grant] = true
			}
			o.Fixes = []string{}
			for _, fx := range expl.Fixes {
				o.Fixes = append(o.Fixes, fx.Kind)
			}
			o.Exit = exitOK
			if !allowed {
				o.Exit = exitDenied
			}
			_, err := r.newRecords(ctx) // a dry run writes none; keep the count right
			return err
		}
		if call.Tool == kernel.EscalationToolName {
			// offered ⇒ recorded, not run; not offered ⇒ invoked as any other tool
			esc, err := svc.Escalate(ctx, api.EscalateRequest{Call: call, IfOffered: true})
			if err != nil || !esc.NotOffered {
				return r.escalated(ctx, esc, err, o)
			}
		}
		out, err := svc.Invoke(ctx, req)
		if err != nil {
			return err
		}
		res := out.Result
		o.Status, o.Gate, o.Cause = string(res.Status), string(res.Gate), string(res.Cause)
		if res.Error != nil {
			o.Code, o.Message = string(res.Error.Code), res.Error.Message
		}
		if res.Status == kernel.StatusSucceeded {
			o.Output = normalize(res.Output)
		}
		o.Exit = map[kernel.ToolStatus]int{kernel.StatusSucceeded: exitOK, kernel.StatusDenied: exitDenied}[res.Status]
		if res.Status == kernel.StatusFailed {
			o.Exit = exitToolFail
		}
		if _, ok := res.Metadata[kernel.AuditUnavailableKey]; ok {
			o.Exit = exitFailed
		}
		recs, err := r.newRecords(ctx)
		if err != nil {
			return err
		}
		o.Audit = recs
		for _, rec := range recs {
			// the last allowed decision is the execution's (an allowed discovery is not
			// audited): its grant decided the call
			if rec.Type == string(kernel.EventAuthorizationChecked) && rec.Outcome == string(kernel.OutcomeAllowed) {
				o.Grant = rec.Grant
			}
		}
	case KindList:
		list, err := r.h.TurnService(t, "").ListTools(ctx)
		if err != nil {
			return serviceCause(err)
		}
		o.Tools = []string{}
		for _, d := range list.Tools {
			o.Tools = append(o.Tools, d.Name)
			r.res.used[d.Name] = true
		}
		recs, err := r.newRecords(ctx)
		o.Audit = recs
		return err
	case KindNamespaces:
		up, err := r.h.TurnService(t, "").UpdateNamespaces(ctx, s.Patch)
		if err != nil {
			return serviceCause(err)
		}
		o.Enabled = up.EffectiveSelection
		recs, err := r.newRecords(ctx)
		o.Audit = recs
		return err
	case KindSend, KindReply:
		return r.message(ctx, t, s, o)
	case KindAudit:
		recs, err := r.allRecords(ctx)
		if err != nil {
			return err
		}
		o.Audit = recs
	}
	return nil
}

// serviceCause is the cause of a service's error (the kernel's, in the words a scenario
// reports), or the error itself.
func serviceCause(err error) error {
	var ae *api.Error
	if errors.As(err, &ae) && ae.Err != nil {
		return ae.Err
	}
	return err
}

// escalated observes an offered escalation (the service's Escalate with IfOffered, as
// `tools call sharedos.escalate` does): the turn ends escalated (exit 5), or the
// escalation's own authorization refused it; err is the service's.
func (r *runner) escalated(ctx context.Context, esc api.EscalateResult, err error, o *Observed) error {
	switch {
	case err != nil:
		return serviceCause(err)
	case esc.Denied != nil:
		o.Status, o.Gate = string(esc.Denied.Status), string(esc.Denied.Gate)
		if esc.Denied.Error != nil {
			o.Code = string(esc.Denied.Error.Code)
		}
		o.Exit = exitDenied
	default:
		o.Status, o.Exit = "escalated", exitEscalated
	}
	recs, err := r.newRecords(ctx)
	o.Audit = recs
	for _, rec := range recs {
		if rec.Type == string(kernel.EventAuthorizationChecked) && rec.Outcome == string(kernel.OutcomeAllowed) {
			o.Grant = rec.Grant
		}
	}
	return err
}

// check compares what a step saw with what it expects.
func check(e *Expect, o *Observed) []Mismatch {
	var out []Mismatch
	str := func(key string, want *string, got string) {
		if want != nil && *want != got {
			out = append(out, Mismatch{Key: key, Expected: *want, Observed: got})
		}
	}
	str("status", e.Status, o.Status)
	str("code", e.Code, o.Code)
	str("gate", e.Gate, o.Gate)
	str("cause", e.Cause, o.Cause)
	str("grant", e.Grant, o.Grant)
	if e.Rejected != nil {
		bad := len(e.Rejected) == 0 && len(o.Rejected) > 0
		for id, why := range e.Rejected {
			if o.Rejected[id] != why {
				bad = true
			}
		}
		if bad {
			out = append(out, Mismatch{Key: "rejected", Expected: e.Rejected, Observed: o.Rejected})
		}
	}
	if e.Output != nil {
		out = append(out, checkOutput(e.Output, o)...)
	}
	if e.AuditSet {
		if miss := unmatched(e.Audit, o.Audit); len(miss) > 0 {
			out = append(out, Mismatch{Key: "audit", Expected: miss, Observed: o.Audit})
		}
	}
	if e.Exit != nil && *e.Exit != o.Exit {
		out = append(out, Mismatch{Key: "exit", Expected: *e.Exit, Observed: o.Exit})
	}
	if e.Allowed != nil && (o.Allowed == nil || *e.Allowed != *o.Allowed) {
		out = append(out, Mismatch{Key: "allowed", Expected: *e.Allowed, Observed: o.Allowed})
	}
	if e.FixSet {
		ok := len(missing(e.Fixes, o.Fixes)) == 0 && (len(e.Fixes) > 0 || len(o.Fixes) == 0)
		if !ok {
			out = append(out, Mismatch{Key: "fixes", Expected: e.Fixes, Observed: o.Fixes})
		}
	}
	if m := missing(e.Includes, o.Tools); len(m) > 0 {
		out = append(out, Mismatch{Key: "includes", Expected: m, Observed: o.Tools})
	}
	var present []string
	for _, x := range e.Excludes {
		if slices.Contains(o.Tools, x) {
			present = append(present, x)
		}
	}
	if len(present) > 0 {
		out = append(out, Mismatch{Key: "excludes", Expected: present, Observed: o.Tools})
	}
	if e.EnSet {
		want := slices.Clone(e.Enabled)
		jscompat.SortLocale(want)
		if !slices.Equal(want, o.Enabled) {
			out = append(out, Mismatch{Key: "enabled", Expected: e.Enabled, Observed: o.Enabled})
		}
	}
	if miss := unmatched(e.Contains, o.Audit); len(miss) > 0 {
		out = append(out, Mismatch{Key: "contains", Expected: miss, Observed: o.Audit})
	}
	var hit []AuditMatch
	for _, a := range e.Absent {
		for _, rec := range o.Audit {
			if a.matches(rec) {
				hit = append(hit, a)
				break
			}
		}
	}
	if len(hit) > 0 {
		out = append(out, Mismatch{Key: "excludes", Expected: hit, Observed: o.Audit})
	}
	return out
}

func checkOutput(e *OutputExpect, o *Observed) []Mismatch {
	var out []Mismatch
	for _, no := range e.Excludes {
		if outputContains(o.Output, no) || strings.Contains(o.Message, no) {
			out = append(out, Mismatch{Key: "output.excludes", Expected: no, Observed: map[string]any{"output": o.Output, "message": o.Message}})
		}
	}
	if e.Contains == nil && !e.EqualsSet && e.JSONPath == nil {
		return out
	}
	if o.Status != string(kernel.StatusSucceeded) {
		return append(out, Mismatch{Key: "output", Expected: "a succeeded call's output", Observed: "status " + o.Status})
	}
	for _, want := range e.Contains {
		if !outputContains(o.Output, want) {
			out = append(out, Mismatch{Key: "output.contains", Expected: want, Observed: o.Output})
		}
	}
	if e.EqualsSet && !jsonEqual(e.Equals, o.Output) {
		out = append(out, Mismatch{Key: "output.equals", Expected: normalize(e.Equals), Observed: o.Output})
	}
	for _, pe := range e.JSONPath {
		got, ok := lookupPath(o.Output, pe.Path)
		if !ok {
			out = append(out, Mismatch{Key: "output.jsonpath " + pe.Path, Expected: normalize(pe.Value), Observed: "no such value"})
			continue
		}
		if !jsonEqual(pe.Value, got) {
			out = append(out, Mismatch{Key: "output.jsonpath " + pe.Path, Expected: normalize(pe.Value), Observed: got})
		}
	}
	return out
}

// Bounds of a fixture root (copied for every test): a root beyond them is refused, naming
// the bound, rather than copied (a scenario naming root: / by mistake).
const (
	MaxRootEntries = 20_000
	MaxRootBytes   = 256 << 20
)

// copyTree copies the directories, regular files and symbolic links of src into dst.
func copyTree(src, dst string, maxEntries int) error {
	if maxEntries <= 0 {
		maxEntries = MaxRootEntries
	}
	entries, size := 0, int64(0)
	return filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if entries++; entries > maxEntries {
			return fmt.Errorf("more than %d entries (a fixture root is copied for every test; keep it small)", maxEntries)
		}
		if d.Type().IsRegular() {
			if fi, err := d.Info(); err == nil {
				if size += fi.Size(); size > MaxRootBytes {
					return fmt.Errorf("more than %d MiB (a fixture root is copied for every test; keep it small)", MaxRootBytes>>20)
				}
			}
		}
		rel, err := filepath.Rel(src, p)
		if err != nil || rel == "." {
			return err
		}
		to := filepath.Join(dst, rel)
		switch {
		case d.IsDir():
			return os.Mkdir(to, 0o755)
		case d.Type()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			return os.Symlink(target, to)
		case d.Type().IsRegular():
			return copyFile(p, to)
		}
		return nil // sockets, devices: not part of a fixture
	})
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	fi, err := in.Stat()
	if err != nil {
		return err
	}
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_EXCL, fi.Mode().Perm())
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// writeFiles writes the inline files, then makes the git repositories (each with one
// commit of everything below it, at instant, by a fixed author).
func writeFiles(root string, files []InlineFile, instant time.Time) error {
	for _, e := range files {
		p := filepath.Join(root, filepath.FromSlash(e.Path))
		if e.Dir {
			if err := os.MkdirAll(p, 0o755); err != nil {
				return fmt.Errorf("files %q: %v", e.Path+"/", err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return fmt.Errorf("files %q: %v", e.Path, err)
		}
		if err := os.WriteFile(p, []byte(e.Content), 0o644); err != nil {
			return fmt.Errorf("files %q: %v", e.Path, err)
		}
	}
	for _, e := range files {
		if !e.Git {
			continue
		}
		if err := initRepo(filepath.Join(root, filepath.FromSlash(e.Path)), instant); err != nil {
			return fmt.Errorf("files %q: git: %v", e.Path+"/", err)
		}
	}
	return nil
}

// defaultTempDir is dir, or the default of Options.TempDir (getenv: Options.Getenv).
func defaultTempDir(dir string, getenv func(string) string) string {
	if getenv == nil {
		getenv = procenv.Getenv
	}
	if dir != "" {
		return dir
	}
	if tmp := getenv("TMPDIR"); tmp != "" {
		return tmp
	}
	const shm = "/dev/shm"
	if fi, err := os.Stat(shm); err == nil && fi.IsDir() {
		if probe, err := os.MkdirTemp(shm, "sharedos-probe-"); err == nil {
			_ = os.Remove(probe)
			return shm
		}
	}
	return dir
}
