package sqlitestore

import (
	"context"
	"testing"
	"time"
)

// TestClosedForgetsSelections: a closed store fails Selection even where its cache could
// have answered (the stamp old enough for a hit).
func TestClosedForgetsSelections(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openTest(t, Options{DefaultNamespaces: []string{"files"}})
	base := time.Now().Add(racyStamp + time.Second)
	s.now = func() time.Time { return base }
	stampSelection(s.path) // a stamp, so the read is cacheable
	// The second read is a cache hit.
	for range 2 {
		if _, _, err := s.Selection(ctx, "w", alice); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if sel, _, err := s.Selection(ctx, "w", alice); err == nil {
		t.Errorf("Selection after Close = %q, nil; want an error", sel)
	}
}
