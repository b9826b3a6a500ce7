package repoplane

import (
	"bufio"
	"fmt"
	"os"
	"strings"
	"testing"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/htmlindex"
	"golang.org/x/text/encoding/ianaindex"
)

// encodingIdentity names an encoding for testdata/encoding-names.txt: "-" for none.
func encodingIdentity(e encoding.Encoding) string {
	switch e {
	case nil:
		return "-"
	case encoding.Replacement:
		return "replacement"
	}
	return fmt.Sprint(e)
}

// indexedEncoding is the lookup decodeWorkingTree made before encodingByName: x/text's
// IANA index, then its HTML index (linked by this test only).
func indexedEncoding(name string) encoding.Encoding {
	if e, err := ianaindex.IANA.Encoding(name); err == nil && e != nil {
		return e
	}
	if e, err := htmlindex.Get(name); err == nil && e != nil {
		return e
	}
	return nil
}

// TestEncodingNamesResolveAsTheIndexesDid: every name x/text's two indexes knew resolves
// through encodingByName to the encoding the indexes gave (or to none, refused, where
// they gave none), in any case and with surrounding space — as recorded once in
// testdata/encoding-names.txt and as the indexes answer today.
func TestEncodingNamesResolveAsTheIndexesDid(t *testing.T) {
	f, err := os.Open("testdata/encoding-names.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	names, accepted := 0, 0
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, want, ok := strings.Cut(line, "\t")
		if !ok {
			t.Fatalf("testdata line %q: want name<TAB>encoding", line)
		}
		names++
		if want != "-" {
			accepted++
		}
		for _, form := range []string{name, strings.ToUpper(name), " " + name + "\t"} {
			if got := encodingIdentity(encodingByName(form)); got != want {
				t.Errorf("encodingByName(%q) = %s, the indexes gave %s", form, got, want)
			}
			ours, theirs := encodingByName(form), indexedEncoding(form)
			if ours == usASCII {
				if encodingIdentity(theirs) != "US-ASCII" {
					t.Errorf("%q: ours is US-ASCII, the indexes give %s", form, encodingIdentity(theirs))
				}
				continue
			}
			if ours != theirs {
				t.Errorf("%q: ours is %s, the indexes today give %s", form, encodingIdentity(ours), encodingIdentity(theirs))
			}
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if names < 900 || accepted < 300 {
		t.Fatalf("testdata holds %d names (%d accepted): truncated?", names, accepted)
	}
	for _, name := range []string{"", "nosuch", "utf-9", "latin-1x", "x-mac-roman-nope"} {
		if e := encodingByName(name); e != nil || indexedEncoding(name) != nil {
			t.Errorf("%q: ours %s, the indexes %s; want both none", name, encodingIdentity(e), encodingIdentity(indexedEncoding(name)))
		}
	}
}

// TestDecodeUSASCII: US-ASCII text comes through as it is; a byte above 127 is refused,
// as x/text's US-ASCII (U+FFFD, which its encoder then refused) and iconv refuse it.
func TestDecodeUSASCII(t *testing.T) {
	for _, name := range []string{"US-ASCII", "csASCII", "ANSI_X3.4-1968"} {
		out, err := decodeWorkingTree([]byte("plain text\n"), name)
		if err != nil || string(out) != "plain text\n" {
			t.Errorf("%s: %q, %v; want the text unchanged", name, out, err)
		}
		if out, err := decodeWorkingTree([]byte("caf\xe9\n"), name); err == nil {
			t.Errorf("%s: a byte above 127 decoded to %q; want a refusal", name, out)
		}
	}
	// and a long text, past the transformer's first buffer
	long := strings.Repeat("abcdefgh", 4096)
	if out, err := decodeWorkingTree([]byte(long), "us-ascii"); err != nil || string(out) != long {
		t.Errorf("long ASCII text: %d bytes, %v", len(out), err)
	}
	if out, err := decodeWorkingTree([]byte(long+"\x80"), "us-ascii"); err == nil {
		t.Errorf("long text ending in 0x80 decoded to %d bytes; want a refusal", len(out))
	}
	if out, err := decodeWorkingTree([]byte("caf\xe9\n"), "latin1"); err != nil || string(out) != "café\n" {
		t.Errorf("latin1: %q, %v; want café", out, err)
	}
}
