package repoplane

import (
	"encoding/binary"
	"encoding/hex"
	"io"
	"math/bits"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/go-git/go-git/v5/plumbing"
)

// Abbreviated object names in patch headers, as git's find_unique_abbrev makes them:
// at least core.abbrev characters ("auto", the default: 7, or more in repositories
// whose packs hold many objects), extended until no other object of the repository
// shares the prefix. Pack indexes are searched in place (fan-out table and binary
// search with ReadAt); loose objects by listing their one directory.

type abbrevState struct {
	once  sync.Once
	min   int
	packs []*packIndex
}

type packIndex struct {
	f      *os.File
	n      uint32
	fanout [256]uint32
}

func (r *repo) abbrevInit() *abbrevState {
	a := &r.abbrevs
	a.once.Do(func() {
		var count uint64
		if d, err := r.git.Open("objects/pack"); err == nil {
			names, _ := d.Readdirnames(-1)
			d.Close()
			sort.Strings(names)
			for _, name := range names {
				if !strings.HasSuffix(name, ".idx") {
					continue
				}
				if p := openPackIndex(r.git, "objects/pack/"+name); p != nil {
					a.packs = append(a.packs, p)
					count += uint64(p.n)
				}
			}
		}
		a.min = 7
		if r.abbrevConfig > 0 {
			a.min = r.abbrevConfig
		} else if count > 0 {
			// git's auto length: half the bits needed to count the packed objects,
			// rounded up, and never fewer than 7
			l := (bits.Len64(count) + 1) / 2
			a.min = max(l, 7)
		}
	})
	return a
}

func (r *repo) closeAbbrev() {
	for _, p := range r.abbrevs.packs {
		p.f.Close()
	}
	r.abbrevs.packs = nil
}

func openPackIndex(root *os.Root, name string) *packIndex {
	f, err := root.OpenFile(name, openReadNoFollow, 0)
	if err != nil {
		return nil
	}
	var hdr [8 + 256*4]byte
	if _, err := io.ReadFull(f, hdr[:]); err != nil || string(hdr[:4]) != "\xfftOc" || binary.BigEndian.Uint32(hdr[4:]) != 2 {
		f.Close()
		return nil // only version 2 indexes are searched
	}
	p := &packIndex{f: f}
	for i := range 256 {
		p.fanout[i] = binary.BigEndian.Uint32(hdr[8+4*i:])
	}
	p.n = p.fanout[255]
	if fi, err := f.Stat(); err != nil || uint64(fi.Size()) < 8+256*4+uint64(p.n)*20 {
		f.Close()
		return nil
	}
	return p
}

func (p *packIndex) at(i uint32) (plumbing.Hash, bool) {
	var h plumbing.Hash
	_, err := p.f.ReadAt(h[:], int64(8+256*4)+int64(i)*20)
	return h, err == nil
}

// commonHex is the number of leading hex digits a and b share.
func commonHex(a, b plumbing.Hash) int {
	for i := range a {
		if a[i] != b[i] {
			if a[i]>>4 == b[i]>>4 {
				return 2*i + 1
			}
			return 2 * i
		}
	}
	return 40
}

// abbrev returns git's unique abbreviation of h ("0000000"… for the zero id).
func (r *repo) abbrev(h plumbing.Hash) string {
	a := r.abbrevInit()
	if h.IsZero() {
		return strings.Repeat("0", a.min)
	}
	common := 0
	for _, p := range a.packs {
		lo, hi := uint32(0), p.fanout[h[0]]
		if h[0] > 0 {
			lo = p.fanout[h[0]-1]
		}
		// first entry >= h
		i, j := lo, hi
		for i < j {
			m := i + (j-i)/2
			x, ok := p.at(m)
			if !ok {
				break
			}
			if string(x[:]) < string(h[:]) {
				i = m + 1
			} else {
				j = m
			}
		}
		for _, k := range []int64{int64(i) - 1, int64(i), int64(i) + 1} {
			if k < 0 || k >= int64(p.n) {
				continue
			}
			if x, ok := p.at(uint32(k)); ok && x != h {
				common = max(common, commonHex(x, h))
			}
		}
	}
	s := h.String()
	if d, err := r.git.Open("objects/" + s[:2]); err == nil {
		names, _ := d.Readdirnames(-1)
		d.Close()
		for _, n := range names {
			if len(n) != 38 || n == s[2:] {
				continue
			}
			b, err := hex.DecodeString(s[:2] + n)
			if err != nil {
				continue
			}
			var x plumbing.Hash
			copy(x[:], b)
			common = max(common, commonHex(x, h))
		}
	} // an absent or unreadable directory holds no competing object
	return s[:min(40, max(a.min, common+1))]
}

// parseAbbrevConfig reads core.abbrev: "auto" (0 here), a number 4..40, or "no" (40).
func parseAbbrevConfig(v string) int {
	v = strings.ToLower(strings.TrimSpace(v))
	switch v {
	case "", "auto":
		return 0
	case "no", "false", "off":
		return 40
	}
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0
	}
	return min(max(n, 4), 40)
}
