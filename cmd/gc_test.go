package cmd

import (
	"math"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// TestTuneGC: until the first collection the heap may grow to firstGCHeap with no
// collection by pace; the first collection switches to GOGC=400 without a limit.
func TestTuneGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))
	switched := make(chan struct{})
	tuneGC(func() { close(switched) })
	if p := debug.SetGCPercent(-1); p != -1 {
		t.Fatalf("GOGC before the first collection: %d, want off", p)
	}
	if l := debug.SetMemoryLimit(-1); l != firstGCHeap {
		t.Fatalf("memory limit before the first collection: %d, want %d", l, firstGCHeap)
	}
	for done := false; !done; {
		runtime.GC()
		select {
		case <-switched:
			done = true
		default:
			runtime.Gosched()
		}
	}
	if p := debug.SetGCPercent(400); p != 400 {
		t.Fatalf("GOGC after the first collection: %d, want 400", p)
	}
	if l := debug.SetMemoryLimit(-1); l != math.MaxInt64 {
		t.Fatalf("memory limit after the first collection: %d, want none", l)
	}
}

// TestGCPolicyServer: only the mcp and serve commands themselves (wherever the global
// flags sit) are servers that keep the usual pacing; mcp's subcommands and every other
// command are tuned.
func TestGCPolicyServer(t *testing.T) {
	ios, _, _, _ := Test()
	root := NewRootCmd(&Factory{IOStreams: ios, Env: func(string) string { return "" }})
	for args, want := range map[string]bool{
		"mcp": true, "--state /tmp/s.db mcp": true, "mcp --listen 127.0.0.1:0": true, "--root . -o json mcp": true,
		"serve": true, "serve --listen 127.0.0.1:0 --tokens t.yaml": true, "--state /tmp/s.db serve --mcp": true,
		"mcp config --client generic": false, "tools list": false, "version": false, "--root mcp tools list": false,
	} {
		c, _, err := root.Find(strings.Fields(args))
		if got := err == nil && isServer(c); got != want {
			t.Errorf("%q: server = %v, want %v", args, got, want)
		}
	}
}
