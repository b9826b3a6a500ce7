package repoplane

import (
	"regexp"
	"strings"
	"sync"
)

// Built-in function-name patterns of git's diff drivers (userdiff.c), selected with the
// diff=<driver> attribute: the hunk header shows the nearest line above the hunk that
// the driver's patterns match (a "!" pattern rejects the line). They are data; a
// driver configured in .git/config (textconv, command, xfuncname) is never consulted.
// The drivers whose patterns rely on POSIX bracket forms RE2 cannot express (csharp,
// ada, fortran, objc, perl, scheme, dts, bibtex, fountain) fall back to git's default.

type funcPattern struct {
	negate bool
	re     *regexp.Regexp
}

var builtinDrivers = map[string]struct {
	icase    bool
	patterns []string
}{
	"golang":   {false, []string{`^[ \t]*(func[ \t]*.*(\{[ \t]*)?)`, `^[ \t]*(type[ \t].*(struct|interface)[ \t]*(\{[ \t]*)?)`}},
	"python":   {false, []string{`^[ \t]*((class|(async[ \t]+)?def)[ \t].*)$`}},
	"ruby":     {false, []string{`^[ \t]*((class|module|def)[ \t].*)$`}},
	"markdown": {false, []string{`^ {0,3}#{1,6}[ \t].*`}},
	"java": {false, []string{
		`!^[ \t]*(catch|do|for|if|instanceof|new|return|switch|throw|while)`,
		`^[ \t]*(([a-z-]+[ \t]+)*(class|enum|interface|record)[ \t]+.*)$`,
		`^[ \t]*(([A-Za-z_<>&][\]\[?&<>.,A-Za-z_0-9]*[ \t]+)+[A-Za-z_][A-Za-z_0-9]*[ \t]*\([^;]*)$`}},
	"cpp": {false, []string{
		`!^[ \t]*[A-Za-z_][A-Za-z_0-9]*:[[:space:]]*($|/[/*])`,
		`^((::[[:space:]]*)?[A-Za-z_].*)$`}},
	"rust": {false, []string{`^[\t ]*((pub(\([^\)]+\))?[\t ]+)?((async|const|unsafe|extern([\t ]+"[^"]+"))[\t ]+)?(struct|enum|union|mod|trait|fn|impl|macro_rules!)[< \t]+[^;]*)$`}},
	"php": {false, []string{
		`^[\t ]*(((public|protected|private|static|abstract|final)[\t ]+)*function.*)$`,
		`^[\t ]*((((final|abstract)[\t ]+)?class|enum|interface|trait).*)$`}},
	"tex":    {false, []string{`^(\\((sub)*section|chapter|part)\*{0,1}\{.*)$`}},
	"html":   {false, []string{`^[ \t]*(<[Hh][1-6]([ \t].*)?>.*)$`}},
	"kotlin": {false, []string{`^[ \t]*(([a-z]+[ \t]+)*(fun|class|interface)[ \t]+.*)$`}},
	"pascal": {false, []string{
		`^(((class[ \t]+)?(procedure|function)|constructor|destructor|interface|implementation|initialization|finalization)[ \t]*.*)$`,
		`^(.*=[ \t]*(class|record).*)$`}},
	"elixir": {false, []string{`^[ \t]*((def(macro|module|impl|protocol|p)?|test)[ \t].*)$`}},
	"matlab": {false, []string{`^[[:space:]]*((classdef|function)[[:space:]].*)$|^(%%%?|##)[[:space:]].*$`}},
	"css":    {true, []string{`![:;][[:space:]]*$`, `^[:[@.#]?[_a-z0-9].*$`}},
}

var (
	driverMu       sync.Mutex
	driverPatterns = map[string][]funcPattern{}
)

// funcMatcher returns the hunk-header function of a built-in driver, or nil (git's
// default rule).
func funcMatcher(driver string) func(line string) (string, bool) {
	d, ok := builtinDrivers[driver]
	if !ok {
		return nil
	}
	driverMu.Lock()
	pats, ok := driverPatterns[driver]
	if !ok {
		for _, p := range d.patterns {
			fp := funcPattern{}
			if strings.HasPrefix(p, "!") {
				fp.negate, p = true, p[1:]
			}
			if d.icase {
				p = "(?i)" + p
			}
			fp.re = regexp.MustCompile(p)
			fp.re.Longest() // POSIX leftmost-longest, as regexec
			pats = append(pats, fp)
		}
		driverPatterns[driver] = pats
	}
	driverMu.Unlock()
	return func(line string) (string, bool) {
		line = strings.TrimSuffix(strings.TrimSuffix(line, "\n"), "\r")
		for _, p := range pats {
			m := p.re.FindStringSubmatchIndex(line)
			if m == nil {
				continue
			}
			if p.negate {
				return "", false
			}
			s := line[m[0]:m[1]]
			if len(m) >= 4 && m[2] >= 0 {
				s = line[m[2]:m[3]]
			}
			if len(s) > 80 {
				s = s[:80]
			}
			return strings.TrimRight(s, " \t\n\v\f\r"), true
		}
		return "", false
	}
}
