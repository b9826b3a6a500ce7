package kernel

import (
	"fmt"
	"strings"
	"testing"
)

// slowDuplicateKeys is checkDuplicateKeys by the decoder alone.
func slowDuplicateKeys(data []byte, deep bool) error {
	saved := scanDisabled
	scanDisabled = true
	defer func() { scanDisabled = saved }()
	return checkDuplicateKeys(data, deep)
}

var duplicateKeyCases = []string{
	`{"a":1,"b":2}`,
	`{"a":1,"a":2}`,
	`{"a":{"b":1,"b":2}}`,
	`{"a":{"b":1},"b":{"b":1}}`,
	`{"a":[{"x":1},{"x":1}],"x":2}`,
	`{"a":[{"x":1,"x":1}]}`,
	`[{"a":1},{"a":1,"a":1}]`,
	`{"a":"b","b":"a","a":"c"}`,
	`{"a\u0062":1,"ab":2}`,
	`{"é":1,"é":2}`,
	"{\"\xff\":1,\"\xfe\":2}",
	`{"a":true,"b":false,"c":null,"d":-1.5e3,"a":0}`,
	` { "a" : 1 , "b" : { "a" : 1 } , "c" : [ 1 , 2 , { "c" : 1 , "d" : 2 } ] } `,
	`{"resource":{"namespace":"files","path":["notes","todo.md"]},"action":"read"}`,
	`{"resource":{"namespace":"files","path":["notes","todo.md"]},"action":"read","resource":{}}`,
	`{"a":1}{"a":1,"a":1}`,
	`{}`, `[]`, `1`, `"a"`, `{"a":`, `{"a":1,`, `{"a" 1}`, `{1:2}`, `[1,2`, `}`, ``,
}

// TestScanDuplicateKeys: the scanner decides exactly as the decoder wherever it decides
// (deep and top-level only), and decides the common bodies itself.
func TestScanDuplicateKeys(t *testing.T) {
	many := make([]string, 70)
	for i := range many {
		many[i] = fmt.Sprintf(`"k%d":%d`, i, i)
	}
	cases := append(duplicateKeyCases, "{"+strings.Join(many, ",")+"}", "{"+strings.Join(many, ",")+`,"k3":1}`)
	for _, c := range cases {
		for _, deep := range []bool{true, false} {
			want := slowDuplicateKeys([]byte(c), deep)
			got, ok := scanDuplicateKeys([]byte(c), deep)
			if ok && fmt.Sprint(got) != fmt.Sprint(want) {
				t.Errorf("%q deep %v: scanner %v, decoder %v", c, deep, got, want)
			}
			if g := checkDuplicateKeys([]byte(c), deep); fmt.Sprint(g) != fmt.Sprint(want) {
				t.Errorf("%q deep %v: %v, decoder %v", c, deep, g, want)
			}
		}
	}
	for _, c := range []string{`{"a":1,"a":2}`, `{"a":{"b":1,"b":2}}`, `{"resource":{"namespace":"files","path":["x"]},"action":"read"}`} {
		if _, ok := scanDuplicateKeys([]byte(c), true); !ok {
			t.Errorf("%q: the scanner left it to the decoder", c)
		}
	}
}

// FuzzScanDuplicateKeys: wherever the scanner decides, it decides as the decoder.
func FuzzScanDuplicateKeys(f *testing.F) {
	for _, c := range duplicateKeyCases {
		f.Add([]byte(c), true)
	}
	f.Fuzz(func(t *testing.T, data []byte, deep bool) {
		got, ok := scanDuplicateKeys(data, deep)
		if !ok {
			return
		}
		if want := slowDuplicateKeys(data, deep); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("%q deep %v: scanner %v, decoder %v", data, deep, got, want)
		}
	})
}
