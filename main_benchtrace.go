//go:build benchtrace

package main

// A build for bench/serve-trace.sh only (go build -tags benchtrace): the process writes a
// runtime/trace of a window of its life to $SHAREDOS_RUNTIME_TRACE, starting
// $SHAREDOS_RUNTIME_TRACE_AFTER (default 3s) after start and lasting
// $SHAREDOS_RUNTIME_TRACE_FOR (default 2s). Ordinary builds do not contain this file.

import (
	"fmt"
	"os"
	"runtime/trace"
	"time"
)

func init() {
	path := os.Getenv("SHAREDOS_RUNTIME_TRACE")
	if path == "" {
		return
	}
	after, err1 := time.ParseDuration(envOr("SHAREDOS_RUNTIME_TRACE_AFTER", "3s"))
	span, err2 := time.ParseDuration(envOr("SHAREDOS_RUNTIME_TRACE_FOR", "2s"))
	if err1 != nil || err2 != nil {
		fmt.Fprintln(os.Stderr, "sharedos: SHAREDOS_RUNTIME_TRACE_AFTER and _FOR must be durations")
		os.Exit(2)
	}
	go func() {
		time.Sleep(after)
		f, err := os.Create(path)
		if err != nil {
			fmt.Fprintln(os.Stderr, "sharedos: runtime trace:", err)
			return
		}
		if err := trace.Start(f); err != nil {
			fmt.Fprintln(os.Stderr, "sharedos: runtime trace:", err)
			f.Close()
			return
		}
		time.Sleep(span)
		trace.Stop()
		if err := f.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "sharedos: runtime trace:", err)
		}
	}()
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
