package fsplane

import (
	"bytes"
	"context"
	"regexp"
	"regexp/syntax"
	"strings"
	"sync"
	"unicode/utf8"
)

// Grep limits.
const (
	// MaxGrepMatches caps the matches of one grep (truncated:true when cut).
	MaxGrepMatches = 1000
	// MaxGrepLineChars is the length (in characters) past which a line is cut.
	MaxGrepLineChars = 1000
	// MaxGrepFileBytes: larger files are skipped by grep.
	MaxGrepFileBytes = 64 << 20
)

// GrepMatch is one matching line. Context holds the lines from Line-contextBefore to
// Line+contextAfter (the matching line included). Truncated is set when the line or a
// context line was cut at MaxGrepLineChars characters. InvalidUTF8 is set when the line
// or a context line held bytes that are not valid UTF-8: each such byte is shown as
// U+FFFD, so the text is not the file's exact bytes (files.read returns those, as
// base64). Addressable is false (and present) when the file's path holds a name that is
// not a valid path segment (see ListEntry).
type GrepMatch struct {
	Path        []string `json:"path"`
	Line        int      `json:"line"`
	Text        string   `json:"text"`
	Context     []string `json:"context"`
	Truncated   bool     `json:"truncated,omitempty"`
	InvalidUTF8 bool     `json:"invalidUtf8,omitempty"`
	Addressable *bool    `json:"addressable,omitempty"`
	at          int      // index of the matching line in Context
}

// GrepOutput is the output of grep.
type GrepOutput struct {
	Path      []string    `json:"path"`
	Matches   []GrepMatch `json:"matches"`
	Truncated bool        `json:"truncated"`
}

// grepMatcher finds the matching lines of a buffer. Lines are the pieces between "\n"
// bytes (a final "\n" does not start another line); a line matches when the pattern
// matches inside it.
type grepMatcher struct {
	finder                // prefilter every matching line contains (lit nil if none)
	never  bool           // no line can match (a literal holding "\n")
	exact  bool           // a line holding lit matches (no verification)
	hazard bool           // fold lit has k or s, which U+212A and U+017F also match
	line   *regexp.Regexp // per-line matcher, the authority
	scan   *regexp.Regexp // buffer scanner whose matches cover every matching line
}

func newGrepMatcher(in GrepInput) (*grepMatcher, error) {
	m := &grepMatcher{}
	if !utf8.ValidString(in.Pattern) {
		return nil, failed(CodeInvalidInput, "pattern is not valid UTF-8 text")
	}
	if in.Mode == ModeLiteral {
		if strings.ContainsRune(in.Pattern, '\n') {
			m.never = true
			return m, nil
		}
		if in.CaseSensitive {
			m.lit, m.exact = []byte(in.Pattern), true
			m.rare = rarestByte(m.lit, false)
			return m, nil
		}
		line, err := regexp.Compile("(?i)" + regexp.QuoteMeta(in.Pattern))
		if err != nil {
			return nil, failed(CodeInvalidInput, "pattern cannot be searched case-insensitively: %v", err)
		}
		m.line = line
		m.scan = m.line
		if isASCII(in.Pattern) {
			m.lit, m.fold, m.exact = lowerASCII([]byte(in.Pattern)), true, true
		} else {
			m.setFoldPrefilter(longestASCIIRun(in.Pattern))
		}
		m.rare = rarestByte(m.lit, m.fold)
		m.hazard = m.fold && bytes.ContainsAny(m.lit, "ks")
		return m, nil
	}
	flags := syntax.Perl
	prefix := ""
	if !in.CaseSensitive {
		flags |= syntax.FoldCase
		prefix = "(?i)"
	}
	tree, err := syntax.Parse(in.Pattern, flags)
	if err != nil {
		return nil, failed(CodeInvalidInput, "pattern is not a valid Go RE2 regular expression: %v", err)
	}
	if matchesNewline(tree) {
		// as rg does: lines are matched one at a time, so such a pattern could only
		// ever match nothing
		return nil, failed(CodeInvalidInput, "pattern contains a literal newline (\\n), which a regex matched line by line can never match; search for each line separately")
	}
	line, err := regexp.Compile(prefix + in.Pattern)
	if err != nil {
		return nil, failed(CodeInvalidInput, "pattern is not a valid Go RE2 regular expression: %v", err)
	}
	m.line = line
	// The scanner runs over the whole buffer, so text anchors become line anchors.
	anchorsToLines(tree)
	if m.scan, err = regexp.Compile(tree.String()); err != nil {
		m.scan = nil
	}
	if lit, fold := requiredLiteral(tree); len(lit) > 0 {
		if fold {
			m.setFoldPrefilter(longestASCIIRun(string(lit)))
		} else {
			m.lit = []byte(string(lit))
		}
		m.rare = rarestByte(m.lit, m.fold)
		m.hazard = m.fold && bytes.ContainsAny(m.lit, "ks")
	}
	if m.scan == nil && m.lit == nil {
		// Cannot happen for a pattern that parsed, but stay correct: scan per line.
		m.scan = nil
	}
	return m, nil
}

func (m *grepMatcher) setFoldPrefilter(run string) {
	if run == "" {
		return
	}
	m.lit, m.fold = lowerASCII([]byte(run)), true
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

func lowerASCII(b []byte) []byte {
	out := make([]byte, len(b))
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		out[i] = c
	}
	return out
}

func longestASCIIRun(s string) string {
	best, start := "", -1
	for i := 0; i <= len(s); i++ {
		if i < len(s) && s[i] < utf8.RuneSelf {
			if start < 0 {
				start = i
			}
			continue
		}
		if start >= 0 && i-start > len(best) {
			best = s[start:i]
		}
		start = -1
	}
	return best
}

// anchorsToLines rewrites \A and \z into ^ and $ in multi-line mode.
func anchorsToLines(re *syntax.Regexp) {
	switch re.Op {
	case syntax.OpBeginText:
		re.Op = syntax.OpBeginLine
	case syntax.OpEndText:
		re.Op = syntax.OpEndLine
	}
	for _, s := range re.Sub {
		anchorsToLines(s)
	}
}

// requiredLiteral returns a literal every match of re contains, and whether it is
// case-folded: of the candidates, the one whose rarest byte is rarest (then the
// longest), since that one yields the fewest candidate lines.
func requiredLiteral(re *syntax.Regexp) ([]rune, bool) {
	switch re.Op {
	case syntax.OpLiteral:
		return re.Rune, re.Flags&syntax.FoldCase != 0
	case syntax.OpCapture, syntax.OpPlus:
		return requiredLiteral(re.Sub[0])
	case syntax.OpRepeat:
		if re.Min >= 1 {
			return requiredLiteral(re.Sub[0])
		}
	case syntax.OpConcat:
		var best []rune
		bestFold := false
		consider := func(l []rune, f bool) {
			if literalBetter(l, f, best, bestFold) {
				best, bestFold = l, f
			}
		}
		var run []rune
		runFold := false
		for _, s := range re.Sub {
			if s.Op == syntax.OpLiteral {
				f := s.Flags&syntax.FoldCase != 0
				if len(run) > 0 && f != runFold {
					consider(run, runFold)
					run = nil
				}
				run = append(append([]rune(nil), run...), s.Rune...)
				runFold = f
				continue
			}
			if len(run) > 0 {
				consider(run, runFold)
				run = nil
			}
			consider(requiredLiteral(s))
		}
		if len(run) > 0 {
			consider(run, runFold)
		}
		return best, bestFold
	}
	return nil, false
}

// literalBetter reports whether literal a (folded or not) is a better prefilter than b.
func literalBetter(a []rune, af bool, b []rune, bf bool) bool {
	if len(a) == 0 {
		return false
	}
	if len(b) == 0 {
		return true
	}
	ra, rb := literalRarity(a, af), literalRarity(b, bf)
	if ra != rb {
		return ra < rb
	}
	return len(a) > len(b)
}

// literalRarity is the rank of the rarest byte the prefilter would search for (lower
// is rarer).
func literalRarity(l []rune, fold bool) int {
	b := []byte(string(l))
	if fold {
		run := longestASCIIRun(string(l))
		if run == "" {
			return 1 << 20
		}
		b = lowerASCII([]byte(run))
	}
	r := rarestByte(b, fold)
	rank := byteRank(b[r])
	if fold && 'a' <= b[r] && b[r] <= 'z' {
		rank += byteRank(b[r] - ('a' - 'A'))
	}
	return rank
}

// byteOrder lists printable bytes from the most to the least common in a blend of
// source code and prose (measured once over a Go tree and a system's text files).
const byteOrder = " etsaniro\nlc0\td/puhf,m.x1bg\"2:()=_><yAETS34v6RI-8COw5{}L9DPk7NF\\M*B[]'VXU;j#GH`$WYz|K!q+&%QJZ@~?^"

// byteRank estimates how common a byte is (higher = more common); the prefilter
// searches for the rarest byte of the literal.
func byteRank(c byte) int {
	if i := strings.IndexByte(byteOrder, c); i >= 0 {
		return 2 * (len(byteOrder) - i)
	}
	return 1
}

func rarestByte(lit []byte, fold bool) int {
	best, bestRank := 0, 1<<30
	for i, c := range lit {
		r := byteRank(c)
		if fold && 'a' <= c && c <= 'z' {
			r += byteRank(c - ('a' - 'A'))
		}
		if r < bestRank {
			best, bestRank = i, r
		}
	}
	return best
}

// finder finds a literal fast: it scans for the literal's rarest byte (both cases when
// folding) with the vectorised bytes.IndexByte and compares around each hit.
type finder struct {
	lit  []byte // lower-case ASCII when fold
	fold bool   // compare ASCII-case-insensitively
	rare int    // index in lit of its rarest byte
}

func newFinder(lit []byte, fold bool) finder {
	if fold {
		lit = lowerASCII(lit)
	}
	return finder{lit: lit, fold: fold, rare: rarestByte(lit, fold)}
}

// index returns the first position of the literal in s, or -1.
func (m *finder) index(s []byte) int {
	lit := m.lit
	n := len(lit)
	if n == 0 {
		return 0
	}
	if !m.fold {
		if n == 1 {
			return bytes.IndexByte(s, lit[0])
		}
		r, c := m.rare, lit[m.rare]
		for pos := r; pos < len(s); {
			i := bytes.IndexByte(s[pos:], c)
			if i < 0 {
				return -1
			}
			start := pos + i - r
			if start+n > len(s) {
				return -1
			}
			if bytes.Equal(s[start:start+n], lit) {
				return start
			}
			pos += i + 1
		}
		return -1
	}
	r, lo := m.rare, lit[m.rare]
	up := lo
	if 'a' <= lo && lo <= 'z' {
		up = lo - ('a' - 'A')
	}
	nextLo, nextUp := -2, -2 // -2: not searched yet; -1: none left
	for pos := r; pos < len(s); {
		if nextLo != -1 && nextLo < pos {
			if i := bytes.IndexByte(s[pos:], lo); i >= 0 {
				nextLo = pos + i
			} else {
				nextLo = -1
			}
		}
		if up != lo && nextUp != -1 && nextUp < pos {
			if i := bytes.IndexByte(s[pos:], up); i >= 0 {
				nextUp = pos + i
			} else {
				nextUp = -1
			}
		}
		cand := nextLo
		if up != lo && nextUp >= 0 && (cand < 0 || nextUp < cand) {
			cand = nextUp
		}
		if cand < 0 {
			return -1
		}
		start := cand - r
		if start+n > len(s) {
			return -1
		}
		if equalFoldASCII(s[start:start+n], lit) {
			return start
		}
		pos = cand + 1
	}
	return -1
}

// equalFoldASCII compares s with the lower-case ASCII lit, ignoring ASCII case.
func equalFoldASCII(s, lit []byte) bool {
	for i, c := range s {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lit[i] {
			return false
		}
	}
	return true
}

// foldHazard reports whether buf holds U+212A KELVIN SIGN or U+017F LATIN SMALL LETTER
// LONG S, the only non-ASCII letters that fold to ASCII ones (k and s).
func foldHazard(buf []byte) bool {
	return bytes.Contains(buf, []byte("\u212a")) || bytes.Contains(buf, []byte("\u017f"))
}

// lines calls fn(start, end) for each matching line buf[start:end] in order until fn
// returns false.
func (m *grepMatcher) lines(buf []byte, fn func(ls, le int) bool) {
	if m.never {
		return
	}
	useLit := m.lit != nil
	if useLit && m.hazard && foldHazard(buf) {
		useLit = false
	}
	exact := useLit && m.exact
	if !useLit && m.scan == nil {
		m.linesSlow(buf, fn)
		return
	}
	for pos := 0; pos < len(buf); {
		var cand int
		if useLit {
			i := m.index(buf[pos:])
			if i < 0 {
				return
			}
			cand = pos + i
		} else {
			loc := m.scan.FindIndex(buf[pos:])
			if loc == nil {
				return
			}
			cand = pos + loc[0]
		}
		ls := pos + bytes.LastIndexByte(buf[pos:cand], '\n') + 1
		le := len(buf)
		if i := bytes.IndexByte(buf[cand:], '\n'); i >= 0 {
			le = cand + i
		}
		if ls == len(buf) {
			return // an empty match after the final newline: no line there
		}
		if exact || m.line.Match(buf[ls:le]) {
			if !fn(ls, le) {
				return
			}
		}
		pos = le + 1
	}
}

// linesSlow runs the line matcher on every line.
func (m *grepMatcher) linesSlow(buf []byte, fn func(ls, le int) bool) {
	for pos := 0; pos < len(buf); {
		le := len(buf)
		if i := bytes.IndexByte(buf[pos:], '\n'); i >= 0 {
			le = pos + i
		}
		if m.line.Match(buf[pos:le]) && !fn(pos, le) {
			return
		}
		pos = le + 1
	}
}

// utf8BOM starts a file's text in some editors' UTF-8; grep (like rg) does not treat
// it as text.
var utf8BOM = []byte("\xef\xbb\xbf")

// cutLine returns the line as a string, cut at MaxGrepLineChars characters, and
// whether it was cut and whether it held bytes that are not UTF-8 (each shown as
// U+FFFD).
func cutLine(b []byte) (s string, cut, invalid bool) {
	if len(b) > MaxGrepLineChars {
		n, i := 0, 0
		for i < len(b) && n < MaxGrepLineChars {
			_, size := utf8.DecodeRune(b[i:])
			i += size
			n++
		}
		if i < len(b) {
			b, cut = b[:i], true
		}
	}
	if !utf8.Valid(b) {
		return strings.ToValidUTF8(string(b), "\uFFFD"), cut, true
	}
	return string(b), cut, false
}

// fileMatches collects the matches of one file (at most limit, and no more once their
// encoded size passes budget: the output could not hold them).
func (m *grepMatcher) fileMatches(path []string, buf []byte, before, after, limit, budget int) (out []GrepMatch) {
	buf = bytes.TrimPrefix(buf, utf8BOM)
	size := 0
	lineNo, counted := 1, 0
	m.lines(buf, func(ls, le int) bool {
		lineNo += bytes.Count(buf[counted:ls], []byte{'\n'})
		counted = ls
		text, cut, bad := cutLine(buf[ls:le])
		gm := GrepMatch{Path: path, Line: lineNo, Text: text, Truncated: cut, InvalidUTF8: bad}
		// Lines before.
		starts := []int{}
		s := ls
		for k := 0; k < before && s > 0; k++ {
			prev := bytes.LastIndexByte(buf[:s-1], '\n') + 1
			starts = append(starts, prev)
			s = prev
		}
		ctx := make([]string, 0, len(starts)+1+after)
		for k := len(starts) - 1; k >= 0; k-- {
			st := starts[k]
			en := st + bytes.IndexByte(buf[st:], '\n')
			t, c, bad := cutLine(buf[st:en])
			gm.Truncated = gm.Truncated || c
			gm.InvalidUTF8 = gm.InvalidUTF8 || bad
			ctx = append(ctx, t)
		}
		ctx = append(ctx, text)
		e := le
		for k := 0; k < after && e < len(buf) && e+1 < len(buf); k++ {
			st := e + 1
			en := len(buf)
			if i := bytes.IndexByte(buf[st:], '\n'); i >= 0 {
				en = st + i
			}
			t, c, bad := cutLine(buf[st:en])
			gm.Truncated = gm.Truncated || c
			gm.InvalidUTF8 = gm.InvalidUTF8 || bad
			ctx = append(ctx, t)
			e = en
		}
		gm.Context = ctx
		gm.at = len(starts)
		out = append(out, gm)
		size += grepMatchJSONLen(&gm)
		return len(out) < limit && size <= budget
	})
	return out
}

func (p *Provider) grep(ctx context.Context, path []string, in GrepInput) (any, error) {
	m, err := newGrepMatcher(in)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	type fileResult struct {
		seq     int
		matches []GrepMatch
	}
	// each worker hands on the results of a batch of files at once (one wake-up of
	// the collector per batch, not per file)
	results := make(chan []fileResult, 16)
	out := GrepOutput{Path: path, Matches: []GrepMatch{}}
	var collect sync.WaitGroup
	collect.Add(1)
	go func() {
		defer collect.Done()
		pending := map[int][]GrepMatch{}
		next := 0
		size := 64 + jsonStringsLen(path) // the output's own fields
		for rs := range results {
			for _, r := range rs {
				pending[r.seq] = r.matches
			}
			for {
				ms, ok := pending[next]
				if !ok {
					break
				}
				delete(pending, next)
				next++
				if out.Truncated {
					continue
				}
				for _, gm := range ms {
					if len(out.Matches) == MaxGrepMatches || !fitGrepMatch(&gm, p.maxOut-size) {
						out.Truncated = true
						cancel()
						break
					}
					size += grepMatchJSONLen(&gm)
					out.Matches = append(out.Matches, gm)
					if gm.at < 0 {
						// Its context was trimmed to fit: the budget is spent.
						out.Truncated = true
						cancel()
						break
					}
				}
			}
		}
	}()
	bufs := make([][]byte, p.workers+1)
	batches := make([][]fileResult, p.workers+1)
	walkErr := p.runWalkBatches(ctx, path, walkOpts{all: true}, func(w int, e walkEntry) {
		b, ok := readWalked(e, bufs[w], MaxGrepFileBytes, true)
		if b != nil && cap(b) <= 8<<20 {
			bufs[w] = b[:0]
		}
		var ms []GrepMatch
		if ok {
			// A file holding a NUL byte is binary and skipped whole. Most files have
			// no match, so the matcher runs first and only a file with matches is
			// scanned for a NUL byte (readWalked already refused a large file whose
			// first bytes hold one): the same files are skipped, with one pass over
			// the others fewer.
			ms = m.fileMatches(displayPath(e.path), b, in.ContextBefore, in.ContextAfter, MaxGrepMatches+1, p.maxOut)
			if len(ms) > 0 && bytes.IndexByte(b, 0) >= 0 {
				ms = nil
			}
			if e.unaddressable {
				for i := range ms {
					ms[i].Addressable = notAddressable
				}
			}
		}
		batches[w] = append(batches[w], fileResult{seq: e.seq, matches: ms})
	}, func(w int) {
		if len(batches[w]) == 0 {
			return
		}
		select {
		case results <- batches[w]:
		case <-ctx.Done():
		}
		batches[w] = nil
	})
	close(results)
	collect.Wait()
	if walkErr != nil {
		return nil, walkErr
	}
	if !out.Truncated {
		// Not cut by the collector: a cancelled parent context must not pass for a
		// complete answer.
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// matchesNewline reports whether re requires a literal newline somewhere (a newline
// literal, or a class holding only a newline), the patterns rg refuses ("the literal
// '\n' is not allowed in a regex").
func matchesNewline(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpLiteral:
		for _, r := range re.Rune {
			if r == '\n' {
				return true
			}
		}
	case syntax.OpCharClass:
		if len(re.Rune) == 2 && re.Rune[0] == '\n' && re.Rune[1] == '\n' {
			return true
		}
	}
	for _, s := range re.Sub {
		if matchesNewline(s) {
			return true
		}
	}
	return false
}
