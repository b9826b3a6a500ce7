package scenario

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/sharedos/sharedos/pkg/api"
	"github.com/sharedos/sharedos/pkg/kernel"
)

// Summary is the closing line of a run: "N passed, N failed" (", N skipped" when any). An
// invalid file counts as one failure.
func (r *Report) Summary() string {
	s := fmt.Sprintf("%d passed, %d failed", r.Passed, r.Failed+r.Invalid)
	if r.Skipped > 0 {
		s += fmt.Sprintf(", %d skipped", r.Skipped)
	}
	return s
}

// WriteText writes the human report: every failure (expected and observed side by side,
// and the explanation of the failed call), every invalid file, and with verbose every
// passing step and skipped test too. It does not write the closing line.
func (r *Report) WriteText(w io.Writer, verbose bool) {
	for _, fr := range r.Files {
		if fr.Err != nil {
			fmt.Fprintf(w, "ERROR %s\n", fr.Err.Error())
			continue
		}
		for _, tr := range fr.Tests {
			r.writeTest(w, fr, tr, verbose)
		}
	}
}

func (r *Report) writeTest(w io.Writer, fr *FileResult, tr *TestResult, verbose bool) {
	where := fmt.Sprintf("%s:%d", fr.Path, tr.Line)
	switch tr.Outcome {
	case Skipped:
		if verbose {
			fmt.Fprintf(w, "SKIP  %s/%s (%s): %s\n", fr.Path, tr.Name, where, tr.Reason)
		}
		return
	case Errored:
		fmt.Fprintf(w, "ERROR %s/%s (%s): %s\n", fr.Path, tr.Name, where, tr.Reason)
		return
	case Passed:
		if !verbose {
			return
		}
		fmt.Fprintf(w, "PASS  %s/%s (%s)\n", fr.Path, tr.Name, where)
	case Failed:
		fmt.Fprintf(w, "FAIL  %s/%s (%s)\n", fr.Path, tr.Name, where)
	}
	for _, sr := range tr.Steps {
		if sr.Passed && !verbose {
			continue
		}
		label := sr.Kind
		if sr.Tool != "" {
			label += " " + sr.Tool
		}
		mark := "ok  "
		if !sr.Passed {
			mark = "FAIL"
		}
		fmt.Fprintf(w, "    %s step %d (%s) at %s:%d\n", mark, sr.Index, label, fr.Path, sr.Line)
		if len(sr.Mismatches) > 0 {
			width := len("expected")
			for _, m := range sr.Mismatches {
				width = max(width, len(m.Key))
			}
			fmt.Fprintf(w, "        %-*s  %-30s  %s\n", width, "", "expected", "observed")
			for _, m := range sr.Mismatches {
				fmt.Fprintf(w, "        %-*s  %-30s  %s\n", width, m.Key, compact(m.Expected), compact(m.Observed))
			}
		}
		if sr.Explain != nil && !sr.Passed && sr.Kind != KindList {
			writeExplain(w, sr.Explain, "        ")
		}
	}
}

// compact is v as one line of JSON (a string stays bare), cut at 200 characters.
func compact(v any) string {
	var s string
	if str, ok := v.(string); ok {
		s = str
	} else {
		b, err := json.Marshal(v)
		if err != nil {
			s = fmt.Sprint(v)
		} else {
			s = string(b)
		}
	}
	s = strings.ReplaceAll(s, "\n", `\n`)
	if len(s) > 200 {
		s = s[:197] + "..."
	}
	return s
}

// writeExplain writes the explanation of a call (as `sharedos explain` reports it): the
// verdict, the requirement, the matched grant, every refusing gate, the candidates and
// the fixes.
func writeExplain(w io.Writer, ex *api.Explanation, indent string) {
	if ex.Allowed {
		fmt.Fprintf(w, "%sexplain: %s would be allowed\n", indent, ex.Tool)
	} else if ex.Refusal != nil {
		cause := ""
		if ex.Refusal.Cause != "" {
			cause = ", cause " + string(ex.Refusal.Cause)
		}
		fmt.Fprintf(w, "%sexplain: %s would be refused: %s (gate %s%s)\n", indent, ex.Tool, ex.Refusal.Code, ex.Refusal.Gate, cause)
	}
	c := ex.Context
	fmt.Fprintf(w, "%s  context: %s acting for %s under %s's grants, world %s, purpose %q, at %s, namespaces %s\n", indent,
		c.Actor, c.Owner, c.Authority, c.World, c.Purpose, c.Now, strings.Join(c.EnabledToolNamespaces, ","))
	if ex.Requirement != nil {
		fmt.Fprintf(w, "%s  requires: %s on %s:%s\n", indent, ex.Requirement.Action, ex.Requirement.Resource.Namespace, kernel.JoinPath(ex.Requirement.Resource.Path))
	}
	if ex.MatchedGrant != nil {
		fmt.Fprintf(w, "%s  matched grant: %s\n", indent, ex.MatchedGrant.ID)
	}
	for _, f := range ex.Findings {
		fmt.Fprintf(w, "%s  gate %s: %s — %s\n", indent, f.Gate, f.Code, oneLine(f.Message))
	}
	for _, cd := range ex.Candidates {
		fmt.Fprintf(w, "%s  candidate %s: %s\n", indent, cd.GrantID, cd.Rejected)
	}
	for _, fx := range ex.Fixes {
		switch fx.Kind {
		case api.FixEnableNamespace:
			fmt.Fprintf(w, "%s  fix: %s\n", indent, fx.Command)
		case api.FixArguments:
			fmt.Fprintf(w, "%s  fix: %s\n", indent, oneLine(fx.Message))
		case api.FixAddGrant:
			fmt.Fprintf(w, "%s  fix: add this grant:\n", indent)
			for _, l := range strings.Split(strings.TrimRight(fx.YAML, "\n"), "\n") {
				fmt.Fprintf(w, "%s    %s\n", indent, l)
			}
		}
	}
}

// JSONStep is one line of `-o json`: one object per step (a skipped test and an invalid
// file are one object each, with no step).
type JSONStep struct {
	File    string      `json:"file"`
	Test    string      `json:"test,omitempty"`
	Line    int         `json:"line"`
	Outcome string      `json:"outcome"`
	Reason  string      `json:"reason,omitempty"`
	Step    *StepResult `json:"step,omitempty"`
	Error   string      `json:"error,omitempty"`
	Passed  bool        `json:"passed"`
}

// WriteJSON writes one JSON object per line: every step, every skipped or errored test
// and every invalid file.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, fr := range r.Files {
		if fr.Err != nil {
			if err := enc.Encode(JSONStep{File: fr.Path, Line: fr.Err.Line, Outcome: string(Errored), Error: fr.Err.Message}); err != nil {
				return err
			}
			continue
		}
		for _, tr := range fr.Tests {
			if tr.Outcome == Skipped || tr.Outcome == Errored {
				if err := enc.Encode(JSONStep{File: fr.Path, Test: tr.Name, Line: tr.Line, Outcome: string(tr.Outcome), Reason: tr.Reason}); err != nil {
					return err
				}
				continue
			}
			for _, sr := range tr.Steps {
				o := "passed"
				if !sr.Passed {
					o = "failed"
				}
				if err := enc.Encode(JSONStep{File: fr.Path, Test: tr.Name, Line: sr.Line, Outcome: o, Step: sr, Passed: sr.Passed}); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// ---- JUnit ------------------------------------------------------------------------

type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Time     string       `xml:"time,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Errors   int         `xml:"errors,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Time     string      `xml:"time,attr"`
	File     string      `xml:"file,attr,omitempty"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	File      string        `xml:"file,attr"`
	Line      int           `xml:"line,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitProblem `xml:"failure"`
	Error     *junitProblem `xml:"error"`
	Skipped   *junitSkipped `xml:"skipped"`
}

type junitProblem struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr"`
	Text    string `xml:",chardata"`
}

type junitSkipped struct {
	Message string `xml:"message,attr"`
}

func seconds(d int64) string { return strconv.FormatFloat(float64(d)/1e9, 'f', 3, 64) }

// WriteJUnit writes the run as JUnit XML: a testsuite per file, a testcase per test
// (classname and file = the file's path, line = the test's line), <failure> with the
// expected and observed values, <error> for an invalid file or a test that could not run,
// <skipped> for skip and todo.
func (r *Report) WriteJUnit(w io.Writer) error {
	all := junitSuites{Name: "sharedos test"}
	var total int64
	for _, fr := range r.Files {
		s := junitSuite{Name: fr.Path, File: fr.Path}
		if fr.Err != nil {
			s.Tests, s.Errors = 1, 1
			s.Cases = []junitCase{{Name: "(scenario file)", Classname: fr.Path, File: fr.Path, Line: fr.Err.Line, Time: "0.000",
				Error: &junitProblem{Message: oneLine(fr.Err.Message), Type: "invalid_scenario", Text: fr.Err.Error()}}}
		}
		var suiteTime int64
		for _, tr := range fr.Tests {
			c := junitCase{Name: tr.Name, Classname: fr.Path, File: fr.Path, Line: tr.Line, Time: seconds(tr.Duration.Nanoseconds())}
			suiteTime += tr.Duration.Nanoseconds()
			s.Tests++
			switch tr.Outcome {
			case Skipped:
				s.Skipped++
				c.Skipped = &junitSkipped{Message: tr.Reason}
			case Errored:
				s.Errors++
				c.Error = &junitProblem{Message: oneLine(tr.Reason), Type: "error", Text: tr.Reason}
			case Failed:
				s.Failures++
				var b strings.Builder
				first := ""
				for _, sr := range tr.Steps {
					if sr.Passed {
						continue
					}
					fmt.Fprintf(&b, "step %d (%s) at %s:%d\n", sr.Index, strings.TrimSpace(sr.Kind+" "+sr.Tool), fr.Path, sr.Line)
					for _, m := range sr.Mismatches {
						line := fmt.Sprintf("%s: expected %s, observed %s", m.Key, compact(m.Expected), compact(m.Observed))
						if first == "" {
							first = fmt.Sprintf("step %d: %s", sr.Index, line)
						}
						fmt.Fprintf(&b, "  %s\n", line)
					}
					if sr.Explain != nil && sr.Kind != KindList {
						writeExplain(&b, sr.Explain, "  ")
					}
				}
				c.Failure = &junitProblem{Message: first, Type: "assertion", Text: b.String()}
			}
			s.Cases = append(s.Cases, c)
		}
		s.Time = seconds(suiteTime)
		total += suiteTime
		all.Tests += s.Tests
		all.Failures += s.Failures
		all.Errors += s.Errors
		all.Skipped += s.Skipped
		all.Suites = append(all.Suites, s)
	}
	all.Time = seconds(total)
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(all); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

func oneLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}

// ---- GitHub Actions ---------------------------------------------------------------

// escapeData and escapeProperty follow the workflow-command escaping of GitHub Actions.
func escapeData(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(s)
}

func escapeProperty(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", ":", "%3A", ",", "%2C").Replace(s)
}

// WriteGitHubAnnotations writes one ::error workflow command per failed step, errored
// test and invalid file.
func (r *Report) WriteGitHubAnnotations(w io.Writer) {
	for _, fr := range r.Files {
		if fr.Err != nil {
			fmt.Fprintf(w, "::error file=%s,line=%d,title=%s::%s\n", escapeProperty(fr.Path), max(fr.Err.Line, 1),
				escapeProperty("invalid scenario file"), escapeData(fr.Err.Message))
			continue
		}
		for _, tr := range fr.Tests {
			switch tr.Outcome {
			case Errored:
				fmt.Fprintf(w, "::error file=%s,line=%d,title=%s::%s\n", escapeProperty(fr.Path), tr.Line,
					escapeProperty(tr.Name), escapeData(tr.Reason))
			case Failed:
				for _, sr := range tr.Steps {
					if sr.Passed {
						continue
					}
					var parts []string
					for _, m := range sr.Mismatches {
						parts = append(parts, fmt.Sprintf("%s: expected %s, observed %s", m.Key, compact(m.Expected), compact(m.Observed)))
					}
					fmt.Fprintf(w, "::error file=%s,line=%d,title=%s::%s\n", escapeProperty(fr.Path), sr.Line,
						escapeProperty(fmt.Sprintf("%s / step %d", tr.Name, sr.Index)), escapeData(strings.Join(parts, "\n")))
				}
			}
		}
	}
}

// WriteGitHubSummary writes the Markdown summary table of $GITHUB_STEP_SUMMARY.
func (r *Report) WriteGitHubSummary(w io.Writer) {
	fmt.Fprintf(w, "### sharedos test: %s\n\n", r.Summary())
	fmt.Fprintf(w, "| file | passed | failed | skipped |\n|---|---:|---:|---:|\n")
	for _, fr := range r.Files {
		var p, f, s int
		if fr.Err != nil {
			f = 1
		}
		for _, tr := range fr.Tests {
			switch tr.Outcome {
			case Passed:
				p++
			case Skipped:
				s++
			default:
				f++
			}
		}
		fmt.Fprintf(w, "| `%s` | %d | %d | %d |\n", strings.ReplaceAll(fr.Path, "|", `\|`), p, f, s)
	}
	var failed []string
	for _, fr := range r.Files {
		for _, tr := range fr.Tests {
			if tr.Outcome == Failed || tr.Outcome == Errored {
				failed = append(failed, fmt.Sprintf("- `%s:%d` %s", fr.Path, tr.Line, strings.ReplaceAll(tr.Name, "|", `\|`)))
			}
		}
	}
	if len(failed) > 0 {
		fmt.Fprintf(w, "\n**Failed:**\n\n%s\n", strings.Join(failed, "\n"))
	}
	fmt.Fprintln(w)
}

// ---- coverage ---------------------------------------------------------------------

// WriteCoverage writes, per file, the grants no step matched and the tools no step
// listed or called. It reports whether any grant went unused.
func (r *Report) WriteCoverage(w io.Writer) (unusedGrants bool) {
	for _, fr := range r.Files {
		if fr.File == nil {
			continue
		}
		c := fr.Coverage
		g, t := "none", "none"
		if len(c.UnusedGrants) > 0 {
			g, unusedGrants = strings.Join(c.UnusedGrants, ", "), true
		}
		if len(c.UnusedTools) > 0 {
			t = strings.Join(c.UnusedTools, ", ")
		}
		fmt.Fprintf(w, "coverage %s: grants never matched: %s; tools never listed or called: %s\n", fr.Path, g, t)
	}
	return unusedGrants
}
