package fsplane

import (
	"bytes"
	"context"
	"sort"
	"strings"
	"unicode/utf8"
)

// Search limits.
const (
	// MaxSearchFileBytes: larger files are skipped by search.
	MaxSearchFileBytes = 4 << 20
	// searchExcerptChars is the length of an excerpt, searchExcerptLead the part of it
	// before the first hit.
	searchExcerptChars = 240
	searchExcerptLead  = 80
)

// SearchHit is one file found by search. Score is the fraction of the query terms the
// file holds (in its content or its name), 0..1; Version is the file's version.
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
	Path []string    `json:"path"`
	Hits []SearchHit `json:"hits"`
}

// searchTerms lower-cases the query and splits it on white space, without duplicates.
func searchTerms(query string) []string {
	seen := map[string]bool{}
	var terms []string
	for _, t := range strings.Fields(strings.ToLower(query)) {
		if !seen[t] {
			seen[t] = true
			terms = append(terms, t)
		}
	}
	return terms
}

type rankedHit struct {
	hit      SearchHit
	present  int // distinct terms in content or name
	inName   int // distinct terms in the file name
	count    int // occurrences in the content, all terms
	pathKey  string
	firstPos int
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

func (p *Provider) search(ctx context.Context, path []string, in SearchInput) (any, error) {
	terms := searchTerms(in.Query)
	limit := defaultLimit
	if in.Limit != nil {
		limit = *in.Limit
	}
	type workerState struct {
		buf   []byte
		hits  []rankedHit
		count []int
		first []int
	}
	states := make([]workerState, p.workers+1)
	// ASCII terms are counted with the case-folding finder over the raw bytes; other
	// terms over a lower-cased copy (made only for files that need it).
	finders := make([]*finder, len(terms))
	for i, t := range terms {
		if isASCII(t) {
			f := newFinder([]byte(t), true)
			finders[i] = &f
		}
	}
	walkErr := p.runWalk(ctx, path, true, func(w int, e walkEntry) {
		st := &states[w]
		b, ok := readWalked(e, st.buf, MaxSearchFileBytes)
		if !ok {
			return
		}
		st.buf = b[:0]
		if bytes.IndexByte(b, 0) >= 0 {
			return
		}
		if st.count == nil {
			st.count, st.first = make([]int, len(terms)), make([]int, len(terms))
		}
		var lower []byte
		same := true
		name := strings.ToLower(e.name)
		h := rankedHit{firstPos: -1}
		for i, t := range terms {
			c, first := 0, -1
			if f := finders[i]; f != nil {
				for pos := 0; pos <= len(b)-len(t); {
					j := f.index(b[pos:])
					if j < 0 {
						break
					}
					if first < 0 {
						first = pos + j
					}
					c++
					pos += j + len(t)
				}
			} else {
				if lower == nil {
					lower = bytes.ToLower(b)
					same = len(lower) == len(b)
				}
				c = bytes.Count(lower, []byte(t))
				if c > 0 {
					first = bytes.Index(lower, []byte(t))
					if !same {
						first = mapOffset(b, lower, first)
					}
				}
			}
			n := strings.Contains(name, t)
			if c > 0 || n {
				h.present++
			}
			if n {
				h.inName++
			}
			if c > 0 {
				h.count += c
				if h.firstPos < 0 || first < h.firstPos {
					h.firstPos = first
				}
			}
		}
		if h.present == 0 {
			return
		}
		h.hit = SearchHit{Path: displayPath(e.path), Score: float64(h.present) / float64(len(terms)),
			Excerpt: excerpt(b, h.firstPos), Version: Version(b)}
		if e.unaddressable {
			h.hit.Addressable = notAddressable
		}
		h.pathKey = strings.Join(e.path, "\x00")
		st.hits = append(st.hits, h)
	})
	if walkErr != nil {
		return nil, walkErr
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	var all []rankedHit
	for _, s := range states {
		all = append(all, s.hits...)
	}
	sort.Slice(all, func(i, j int) bool {
		a, b := &all[i], &all[j]
		if a.present != b.present {
			return a.present > b.present
		}
		if a.inName != b.inName {
			return a.inName > b.inName
		}
		if a.count != b.count {
			return a.count > b.count
		}
		return a.pathKey < b.pathKey
	})
	if len(all) > limit {
		all = all[:limit]
	}
	out := SearchOutput{Path: path, Hits: make([]SearchHit, len(all))}
	for i := range all {
		out.Hits[i] = all[i].hit
	}
	return out, nil
}
