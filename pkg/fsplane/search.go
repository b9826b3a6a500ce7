package fsplane

import (
	"bytes"
	"context"
	"math"
	"sort"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Search limits and ranking parameters.
const (
	// MaxSearchFileBytes: larger files are skipped by search.
	MaxSearchFileBytes = 4 << 20
	// searchExcerptChars is the length of an excerpt, searchExcerptLead the part of it
	// before the passage it shows.
	searchExcerptChars = 240
	searchExcerptLead  = 80

	// BM25 parameters (the usual ones).
	bm25K1 = 1.2
	bm25B  = 0.75
	// A term in the file's name adds nameWeight × its idf (a term saturated in the
	// content adds (k1+1) × idf); in a directory name below the searched path, dirWeight.
	nameWeight = 1.2
	dirWeight  = 0.6
	// A term of at least minPartLen bytes inside a word of the file's name (file names
	// are often compounds: gunzip, mgcsweep) adds partWeight × its idf, but only to a
	// file that holds the term at token boundaries somewhere (shorter terms in
	// compounds are mostly accidents: "man" in command.go).
	partWeight = 0.6
	minPartLen = 4
	// phraseWeight: the query's consecutive terms found next to each other (separated by
	// at most phraseGap bytes of punctuation or space, or at a camel-case boundary).
	phraseWeight = 1.0
	phraseGap    = 3
	// proximityWeight: distinct query terms within proximityWindow bytes.
	proximityWeight = 0.4
	proximityWindow = 200
	// maxTermPositions bounds the positions remembered per term and file (for phrases,
	// proximity and the excerpt); counting goes on past it.
	maxTermPositions = 1024
)

// SearchHit is one file found by search. Score ranks the hit against the others of the
// same search: the best hit scores 1, the others the ratio of their relevance to its
// (see the package documentation); Version is the file's version.
//
// Addressable is false (and present) when the path holds a name that is not a valid
// path segment (see ListEntry).
type SearchHit struct {
	Path        []string `json:"path"`
	Score       float64  `json:"score"`
	Excerpt     string   `json:"excerpt"`
	Version     string   `json:"version"`
	Addressable *bool    `json:"addressable,omitempty"`
}

// SearchOutput is the output of search.
type SearchOutput struct {
	Path      []string    `json:"path"`
	Hits      []SearchHit `json:"hits"`
	Truncated bool        `json:"truncated,omitempty"` // hits were left out to keep the output within its byte budget
}

// searchTerms lower-cases the query, splits it on white space and trims punctuation
// from each term's ends (a term of punctuation only is kept whole), without
// duplicates.
func searchTerms(query string) []string {
	seen := map[string]bool{}
	var terms []string
	for _, t := range strings.Fields(strings.ToLower(query)) {
		if tt := strings.TrimFunc(t, func(r rune) bool { return !isWordRune(r) }); tt != "" {
			t = tt
		}
		if !seen[t] {
			seen[t] = true
			terms = append(terms, t)
		}
	}
	return terms
}

func isWordRune(r rune) bool {
	return unicode.IsLetter(r) || unicode.IsDigit(r) || unicode.Is(unicode.Mn, r)
}

// Character classes for token boundaries.
const (
	clsOther = iota // not part of a word: punctuation, space, start or end of text
	clsLower
	clsUpper
	clsDigit
)

func classOf(r rune) int {
	switch {
	case r < utf8.RuneSelf:
		c := byte(r)
		switch {
		case 'a' <= c && c <= 'z':
			return clsLower
		case 'A' <= c && c <= 'Z':
			return clsUpper
		case '0' <= c && c <= '9':
			return clsDigit
		}
		return clsOther
	case unicode.IsUpper(r):
		return clsUpper
	case unicode.IsLetter(r) || unicode.Is(unicode.Mn, r):
		return clsLower
	case unicode.IsDigit(r):
		return clsDigit
	}
	return clsOther
}

func classBefore(b []byte, i int) int {
	if i <= 0 {
		return clsOther
	}
	if c := b[i-1]; c < utf8.RuneSelf {
		return classOf(rune(c))
	}
	r, _ := utf8.DecodeLastRune(b[:i])
	return classOf(r)
}

func classAt(b []byte, i int) int {
	if i >= len(b) {
		return clsOther
	}
	if c := b[i]; c < utf8.RuneSelf {
		return classOf(rune(c))
	}
	r, _ := utf8.DecodeRune(b[i:])
	return classOf(r)
}

// tokenStart reports whether a word may start at b[i]: nothing word-like before it,
// or a change of kind — lower to upper (fooBar), letter to digit or digit to letter
// (utf8, 8bit) — or the last capital of a run before a lower-case letter (the R of
// HTTPRequest).
func tokenStart(b []byte, i int) bool {
	prev, cur := classBefore(b, i), classAt(b, i)
	switch {
	case prev == clsOther || cur == clsOther:
		return true
	case prev == cur:
		if cur != clsUpper {
			return false
		}
		_, size := utf8.DecodeRune(b[i:])
		return classAt(b, i+size) == clsLower
	case prev == clsUpper && cur == clsLower:
		return false
	}
	return true
}

// tokenMatch reports whether the occurrence b[s:e] of a term starts and ends at token
// boundaries (so "man" does not match inside "command", but "unexpected" and "eof"
// match in "ErrUnexpectedEOF").
func tokenMatch(b []byte, s, e int) bool {
	return tokenStart(b, s) && (e >= len(b) || tokenStart(b, e))
}

// searchTerm is one query term with its finder.
type searchTerm struct {
	text  string
	lit   []byte
	ascii bool
	f     finder // ASCII terms: case-folding finder over the raw bytes
}

// termStats is what one file holds of one term.
type termStats struct {
	tf   int   // token-boundary occurrences in the content
	pos  []int // their byte offsets (at most maxTermPositions; in the lower-cased copy for non-ASCII terms when it differs in length)
	name bool  // in the file's name
	part bool  // inside a word of the file's name (a compound: "sweep" in mgcsweep.go)
	dir  bool  // in a directory name below the searched path
}

// occurrences counts the token-boundary occurrences of t in b (lower is b lower-cased,
// made on demand for non-ASCII terms) and records their positions into pos.
func (t *searchTerm) occurrences(b []byte, lower *[]byte, pos []int) (int, []int) {
	n := 0
	if t.ascii {
		for at := 0; at <= len(b)-len(t.lit); {
			j := t.f.index(b[at:])
			if j < 0 {
				break
			}
			s := at + j
			if tokenMatch(b, s, s+len(t.lit)) {
				n++
				if len(pos) < maxTermPositions {
					pos = append(pos, s)
				}
			}
			at = s + 1
		}
		return n, pos
	}
	if *lower == nil {
		*lower = bytes.ToLower(b)
	}
	l := *lower
	for at := 0; at <= len(l)-len(t.lit); {
		j := bytes.Index(l[at:], t.lit)
		if j < 0 {
			break
		}
		s := at + j
		// Lower-cased text has no capitals: boundaries are those between words only.
		if tokenMatch(l, s, s+len(t.lit)) {
			n++
			if len(pos) < maxTermPositions {
				pos = append(pos, s)
			}
		}
		at = s + 1
	}
	return n, pos
}

// inName reports whether t occurs in name at token boundaries.
func (t *searchTerm) inName(name string) bool {
	var lower []byte
	n, _ := t.occurrences([]byte(name), &lower, nil)
	return n > 0
}

// candidate is a file holding at least one term (in its content or its path).
type candidate struct {
	path          []string
	unaddressable bool
	size          int
	terms         []termStats
	version       string
	excerptPos    int
	excerpt       string
	phrase        int // consecutive query terms adjacent, summed over pairs
	near          int // most distinct terms within proximityWindow bytes
	score         float64
	pathKey       string
}

// mapOffset maps a byte offset in lower (bytes.ToLower of content, which maps rune to
// rune) to the offset of the same rune in content.
func mapOffset(content, lower []byte, off int) int {
	runeIdx := utf8.RuneCount(lower[:off])
	pos := 0
	for i := 0; i < runeIdx && pos < len(content); i++ {
		_, size := utf8.DecodeRune(content[pos:])
		pos += size
	}
	return pos
}

// excerpt returns about searchExcerptChars characters of content around byte offset
// pos.
func excerpt(content []byte, pos int) string {
	if pos < 0 {
		pos = 0
	}
	if pos > len(content) {
		pos = len(content)
	}
	start := pos
	for n := 0; n < searchExcerptLead && start > 0; n++ {
		_, size := utf8.DecodeLastRune(content[:start])
		start -= size
	}
	end := start
	for n := 0; n < searchExcerptChars && end < len(content); n++ {
		_, size := utf8.DecodeRune(content[end:])
		end += size
	}
	return strings.ToValidUTF8(string(content[start:end]), "\uFFFD")
}

// bestPassage finds, over the terms' positions, the earliest window of
// proximityWindow bytes holding the most distinct terms; it returns that count and
// the window's first position (-1 when no term is in the content).
func bestPassage(terms []termStats) (int, int) {
	type occ struct{ pos, term int }
	var all []occ
	for i, t := range terms {
		for _, p := range t.pos {
			all = append(all, occ{p, i})
		}
	}
	if len(all) == 0 {
		return 0, -1
	}
	sort.Slice(all, func(i, j int) bool { return all[i].pos < all[j].pos })
	count := make([]int, len(terms))
	distinct, best, bestPos := 0, 0, all[0].pos
	lo := 0
	for hi := range all {
		if count[all[hi].term] == 0 {
			distinct++
		}
		count[all[hi].term]++
		for all[hi].pos-all[lo].pos > proximityWindow {
			count[all[lo].term]--
			if count[all[lo].term] == 0 {
				distinct--
			}
			lo++
		}
		if distinct > best {
			best, bestPos = distinct, all[lo].pos
		}
	}
	return best, bestPos
}

// phraseCount counts positions of term a followed, within phraseGap bytes, by an
// occurrence of term b (both position lists sorted).
func phraseCount(a []int, alen int, b []int) (int, int) {
	n, first, j := 0, -1, 0
	for _, p := range a {
		end := p + alen
		for j < len(b) && b[j] < end {
			j++
		}
		if j < len(b) && b[j]-end <= phraseGap {
			if first < 0 {
				first = p
			}
			n++
		}
	}
	return n, first
}

func (p *Provider) search(ctx context.Context, path []string, in SearchInput) (any, error) {
	words := searchTerms(in.Query)
	limit := defaultLimit
	if in.Limit != nil {
		limit = *in.Limit
	}
	terms := make([]searchTerm, len(words))
	for i, w := range words {
		terms[i] = searchTerm{text: w, lit: []byte(w), ascii: isASCII(w)}
		if terms[i].ascii {
			terms[i].f = newFinder(terms[i].lit, true)
		}
	}
	type workerState struct {
		buf   []byte
		cands []*candidate
		docs  int
		bytes int64
	}
	states := make([]workerState, p.workers+1)
	walkErr := p.runWalk(ctx, path, walkOpts{all: true}, func(w int, e walkEntry) {
		st := &states[w]
		b, ok := readWalked(e, st.buf, MaxSearchFileBytes, true)
		if b != nil {
			st.buf = b[:0]
		}
		if !ok {
			return
		}
		if bytes.IndexByte(b, 0) >= 0 {
			return
		}
		raw := b
		b = bytes.TrimPrefix(b, utf8BOM)
		st.docs++
		st.bytes += int64(len(b))
		c := &candidate{terms: make([]termStats, len(terms)), size: len(b), excerptPos: -1}
		var lower []byte
		any := false
		var dirs []string // directory names below the searched path
		if below := e.path[len(path):]; len(below) > 1 {
			dirs = below[:len(below)-1]
		}
		for i := range terms {
			t := &terms[i]
			ts := &c.terms[i]
			ts.tf, ts.pos = t.occurrences(b, &lower, nil)
			ts.name = t.inName(e.name)
			ts.part = !ts.name && len(t.lit) >= minPartLen && strings.Contains(strings.ToLower(e.name), t.text)
			for _, d := range dirs {
				if t.inName(d) {
					ts.dir = true
					break
				}
			}
			if ts.tf > 0 || ts.name || ts.dir {
				any = true
			}
		}
		if !any {
			return
		}
		// Phrases and proximity (positions of non-ASCII terms are in the lower-cased
		// copy, which matches the content's offsets unless lower-casing changed its
		// length).
		for i := 0; i+1 < len(terms); i++ {
			n, first := phraseCount(c.terms[i].pos, len(terms[i].lit), c.terms[i+1].pos)
			c.phrase += n
			if first >= 0 && c.excerptPos < 0 {
				c.excerptPos = first
			}
		}
		near, at := bestPassage(c.terms)
		c.near = near
		if c.excerptPos < 0 {
			c.excerptPos = at
		}
		if c.excerptPos >= 0 && lower != nil && len(lower) != len(b) {
			c.excerptPos = mapOffset(b, lower, c.excerptPos)
		}
		c.excerpt = excerpt(b, c.excerptPos)
		for i := range c.terms {
			c.terms[i].pos = nil
		}
		c.path = displayPath(e.path)
		c.unaddressable = e.unaddressable
		c.version = Version(raw)
		c.pathKey = strings.Join(e.path, "\x00")
		st.cands = append(st.cands, c)
	})
	if walkErr != nil {
		return nil, walkErr
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var all []*candidate
	docs, total := 0, int64(0)
	for _, s := range states {
		all = append(all, s.cands...)
		docs += s.docs
		total += s.bytes
	}
	rankCandidates(all, terms, docs, total)
	if len(all) > limit {
		all = all[:limit]
	}
	out := SearchOutput{Path: path, Hits: make([]SearchHit, 0, len(all))}
	size := 64 + jsonStringsLen(path)
	top := 0.0
	if len(all) > 0 {
		top = all[0].score
	}
	for _, c := range all {
		score := 1.0
		if top > 0 {
			score = math.Round(c.score/top*1e4) / 1e4
		}
		if score <= 0 {
			score = 1e-4
		}
		h := SearchHit{Path: c.path, Score: score, Excerpt: c.excerpt, Version: c.version}
		if c.unaddressable {
			h.Addressable = notAddressable
		}
		if size += searchHitJSONLen(&h); size > p.maxOut {
			out.Truncated = true
			break
		}
		out.Hits = append(out.Hits, h)
	}
	return out, nil
}

// rankCandidates scores the candidates (BM25 over the content, plus name, phrase and
// proximity bonuses, times the share of the query's terms the file holds) and sorts
// them, best first, ties by path. docs and total are the number and total size of the
// files searched (the collection the inverse document frequencies come from).
func rankCandidates(all []*candidate, terms []searchTerm, docs int, total int64) {
	idf := make([]float64, len(terms))
	for i := range terms {
		df := 0
		for _, c := range all {
			if c.terms[i].tf > 0 || c.terms[i].name {
				df++
			}
		}
		n := float64(docs)
		if n < float64(df) {
			n = float64(df)
		}
		idf[i] = math.Log(1 + (n-float64(df)+0.5)/(float64(df)+0.5))
	}
	avg := 1.0
	if docs > 0 && total > 0 {
		avg = float64(total) / float64(docs)
	}
	meanIdf := 0.0
	for _, v := range idf {
		meanIdf += v
	}
	if len(idf) > 0 {
		meanIdf /= float64(len(idf))
	}
	for _, c := range all {
		norm := bm25K1 * (1 - bm25B + bm25B*float64(c.size)/avg)
		s, present := 0.0, 0
		for i, t := range c.terms {
			if t.tf == 0 && !t.name && !t.dir {
				continue
			}
			present++
			tf := float64(t.tf)
			s += idf[i] * tf * (bm25K1 + 1) / (tf + norm)
			switch {
			case t.name:
				s += idf[i] * nameWeight
			case t.dir:
				s += idf[i] * dirWeight
			}
			if t.part {
				s += idf[i] * partWeight
			}
		}
		if len(terms) > 1 {
			ph := float64(c.phrase)
			s += phraseWeight * meanIdf * ph / (ph + 1)
			if c.near > 1 {
				s += proximityWeight * meanIdf * float64(c.near-1) / float64(len(terms)-1)
			}
		}
		c.score = s * float64(present) / float64(len(terms))
	}
	sort.Slice(all, func(i, j int) bool {
		if all[i].score != all[j].score {
			return all[i].score > all[j].score
		}
		return all[i].pathKey < all[j].pathKey
	})
}
