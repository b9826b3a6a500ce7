// Command corpus2scenario writes the kernel's decision corpus as `sharedos test` scenario
// files (one per case) into a folder, and lists on stderr the cases the scenario format
// cannot express, with the reason:
//
//	go run ./tools/corpus2scenario testdata/conformance/cases.json OUTDIR
//	sharedos test OUTDIR
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"

	"github.com/sharedos/sharedos/internal/corpus"
)

func main() {
	if len(os.Args) != 3 {
		fmt.Fprintln(os.Stderr, "usage: corpus2scenario CASES.json OUTDIR")
		os.Exit(2)
	}
	data, err := os.ReadFile(os.Args[1])
	if err != nil {
		fmt.Fprintln(os.Stderr, "corpus2scenario:", err)
		os.Exit(1)
	}
	files, skipped, err := corpus.Convert(data)
	if err != nil {
		fmt.Fprintln(os.Stderr, "corpus2scenario:", err)
		os.Exit(1)
	}
	if err := os.MkdirAll(os.Args[2], 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "corpus2scenario:", err)
		os.Exit(1)
	}
	names := make([]string, 0, len(files))
	for n := range files {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if err := os.WriteFile(filepath.Join(os.Args[2], n), files[n], 0o644); err != nil {
			fmt.Fprintln(os.Stderr, "corpus2scenario:", err)
			os.Exit(1)
		}
	}
	for _, s := range skipped {
		fmt.Fprintf(os.Stderr, "not expressible: %s: %s\n", s.ID, s.Reason)
	}
	fmt.Fprintf(os.Stderr, "%d cases converted, %d not expressible\n", len(files), len(skipped))
}
