package uuid

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestNew(t *testing.T) {
	re := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	a, b := New(), New()
	if !re.MatchString(a) || a == b {
		t.Fatalf("New() = %q, %q", a, b)
	}
}

func TestNewV7(t *testing.T) {
	re := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	before := time.Now().UnixMilli()
	a := NewV7()
	time.Sleep(2 * time.Millisecond)
	b := NewV7()
	after := time.Now().UnixMilli()
	if !re.MatchString(a) || !re.MatchString(b) || a == b {
		t.Fatalf("NewV7() = %q, %q", a, b)
	}
	if a >= b {
		t.Errorf("%q minted before %q sorts after it", a, b)
	}
	ms, err := strconv.ParseInt(strings.ReplaceAll(a, "-", "")[:12], 16, 64)
	if err != nil || ms < before || ms > after {
		t.Errorf("%q carries the instant %d, not one in [%d, %d]", a, ms, before, after)
	}
}
