package sqlitestore

import (
	"context"
	"path/filepath"
	"testing"
	"time"
)

// The gateway's catalogue cache: a miss, a hit with its instant, a replacement.
func TestGatewayCatalog(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "s.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, _, ok, err := s.GetGatewayCatalog(ctx, "k"); ok || err != nil {
		t.Fatalf("miss: %v %v", ok, err)
	}
	at := time.UnixMilli(1_700_000_000_000)
	for i, data := range []string{`[{"name":"a"}]`, `[{"name":"b"}]`} {
		if err := s.PutGatewayCatalog(ctx, "k", []byte(data), at.Add(time.Duration(i)*time.Second)); err != nil {
			t.Fatal(err)
		}
		got, when, ok, err := s.GetGatewayCatalog(ctx, "k")
		if !ok || err != nil || string(got) != data || !when.Equal(at.Add(time.Duration(i)*time.Second)) {
			t.Fatalf("hit %d: %s %v %v %v", i, got, when, ok, err)
		}
	}
	if _, _, ok, _ := s.GetGatewayCatalog(ctx, "other"); ok {
		t.Error("another key hit")
	}
}
