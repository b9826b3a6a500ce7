package fsplane

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// fileIndex is a SnapshotIndex kept in one JSON file, so that a crashing child process
// and the test share snapshots.
type fileIndex struct {
	mu   sync.Mutex
	path string
}

func (f *fileIndex) load() []SnapshotRecord {
	var recs []SnapshotRecord
	b, err := os.ReadFile(f.path)
	if err == nil {
		json.Unmarshal(b, &recs)
	}
	return recs
}

func (f *fileIndex) PutSnapshot(ctx context.Context, rec SnapshotRecord) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	recs := append(f.load(), rec)
	b, _ := json.Marshal(recs)
	return os.WriteFile(f.path, b, 0o600)
}

func (f *fileIndex) ListSnapshots(ctx context.Context, scope SnapshotScope, limit int) ([]SnapshotRecord, error) {
	m := NewMemoryIndex()
	for _, r := range f.load() {
		m.PutSnapshot(ctx, r)
	}
	return m.ListSnapshots(ctx, scope, limit)
}

func (f *fileIndex) GetSnapshot(ctx context.Context, scope SnapshotScope, id string) (*SnapshotRecord, error) {
	for _, r := range f.load() {
		if r.ID == id && indexKey(r.SnapshotScope) == indexKey(scope) {
			return &r, nil
		}
	}
	return nil, nil
}

// crashContext is the context of every crash-test operation (the snapshots it takes
// belong to its world and owner, which the JSON index must be able to encode).
var crashContext = kernel.AccessContext{World: "world", Owner: kernel.Address{Kind: kernel.KindHuman, ID: "alice"}}

func crashProvider(t testing.TB, base string) *Provider {
	p, err := NewProvider(filepath.Join(base, "root"), ProviderOptions{SnapshotDir: filepath.Join(base, "snaps"),
		Index: &fileIndex{path: filepath.Join(base, "index.json")}})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func mustOp(t testing.TB, p *Provider, action string, path []string, in any) kernel.ResourceResult {
	rr, err := p.Invoke(context.Background(), kernel.ResourceOperation{OperationID: "o", Context: crashContext,
		Resource: kernel.ResourceRef{Namespace: "files", Path: path}, Action: action, Input: in})
	if err != nil {
		t.Fatalf("%s %v: %v", action, path, err)
	}
	if rr.Status != kernel.StatusSucceeded {
		t.Fatalf("%s %v: %s %+v", action, path, rr.Status, rr.Error)
	}
	return rr
}

func content(s string) WriteInput {
	b, _ := json.Marshal(s)
	return WriteInput{Content: b}
}

const crashChunk = 4096

var (
	crashA = strings.Repeat("A", 200<<10)
	crashB = strings.Repeat("b", 150<<10) + strings.Repeat("B", 100<<10)
)

func appendChunk(i int) string {
	head := fmt.Sprintf("<%08d>", i)
	return head + strings.Repeat(string(rune('a'+i%26)), crashChunk-len(head))
}

func restoreOriginal(k int) string {
	return fmt.Sprintf("original %d\n", k) + strings.Repeat("o", 8<<10)
}

// TestCrashChild is the child process of TestCrashAtomicity: it writes in a loop until
// it is killed.
func TestCrashChild(t *testing.T) {
	mode, base := os.Getenv("FSPLANE_CRASH_CHILD"), os.Getenv("FSPLANE_CRASH_DIR")
	if mode == "" {
		t.Skip("child process of TestCrashAtomicity")
	}
	p := crashProvider(t, base)
	id := os.Getenv("FSPLANE_CRASH_SNAPSHOT")
	start := 0
	if mode == "replace" {
		// Write the other content first, so that every write changes the file.
		if b, _ := os.ReadFile(filepath.Join(base, "root", "f.txt")); string(b) == crashA {
			start = 1
		}
	}
	fmt.Println("ready")
	os.Stdout.Sync()
	for i := start; ; i++ {
		switch mode {
		case "replace":
			c := crashA
			if i%2 == 1 {
				c = crashB
			}
			mustOp(t, p, ActionReplace, []string{"f.txt"}, content(c))
		case "append":
			mustOp(t, p, ActionAppend, []string{"log.txt"}, content(appendChunk(i)))
		case "restore":
			for k := 0; k < 4; k++ {
				mustOp(t, p, ActionReplace, []string{"d", fmt.Sprintf("f%d.txt", k)}, content(fmt.Sprintf("mutated %d %d", i, k)))
			}
			mustOp(t, p, ActionCreate, []string{"d", "sub", fmt.Sprintf("new%d.txt", i)}, content("new"))
			mustOp(t, p, ActionSnapshotRestore, []string{"d"}, SnapshotRestoreInput{SnapshotID: id})
		}
	}
}

// TestCrashAtomicity kills a writing child process with SIGKILL at random moments and
// checks that every file reads as old or new content (never a mix), that its version
// matches its content, and that re-running an interrupted directory restore converges.
func TestCrashAtomicity(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	if raceEnabled {
		t.Skip("crash atomicity is a property of the file system calls; the race detector only slows the children down")
	}
	t.Parallel()
	rng := rand.New(rand.NewSource(time.Now().UnixNano()))
	const perMode = 70
	for _, mode := range []string{"replace", "append", "restore"} {
		base := t.TempDir()
		os.MkdirAll(filepath.Join(base, "root"), 0o755)
		p := crashProvider(t, base)
		var snapID string
		switch mode {
		case "replace":
			mustOp(t, p, ActionCreate, []string{"f.txt"}, content(crashA))
		case "append":
			mustOp(t, p, ActionCreate, []string{"log.txt"}, content(""))
		case "restore":
			for k := 0; k < 4; k++ {
				mustOp(t, p, ActionCreate, []string{"d", fmt.Sprintf("f%d.txt", k)}, content(restoreOriginal(k)))
			}
			mustOp(t, p, ActionCreate, []string{"d", "sub", "keep.txt"}, content("keep"))
			rr := mustOp(t, p, ActionSnapshotCreate, []string{"d"}, nil)
			snapID = rr.Output.(SnapshotCreateOutput).SnapshotID
		}
		killed, midWrite := 0, 0
		states := map[string]bool{}
		maxSleep := 12000 // µs; grows when a loaded machine lets no write finish
		for i := 0; i < perMode || (len(states) < 2 && i < 3*perMode); i++ {
			if i >= perMode {
				maxSleep = 60000
			}
			cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$")
			cmd.Env = append(os.Environ(), "FSPLANE_CRASH_CHILD="+mode, "FSPLANE_CRASH_DIR="+base, "FSPLANE_CRASH_SNAPSHOT="+snapID)
			out, _ := cmd.StdoutPipe()
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			line, _ := bufio.NewReader(out).ReadString('\n')
			if strings.TrimSpace(line) != "ready" {
				cmd.Wait()
				t.Fatalf("child did not start: %q %s", line, stderr.String())
			}
			time.Sleep(time.Duration(rng.Intn(maxSleep)) * time.Microsecond)
			cmd.Process.Signal(syscall.SIGKILL)
			err := cmd.Wait()
			if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				killed++
			} else if err != nil {
				t.Fatalf("child failed: %v %s", err, stderr.String())
			}
			if temps, _ := filepath.Glob(filepath.Join(base, "root", "*", TempPrefix+"*")); len(temps) > 0 {
				midWrite++
			} else if temps, _ := filepath.Glob(filepath.Join(base, "root", TempPrefix+"*")); len(temps) > 0 {
				midWrite++
			}
			states[checkCrashState(t, p, mode, snapID)] = true
		}
		t.Logf("%s: %d children killed, %d of them mid-write (temporary file left), %d distinct states seen", mode, killed, midWrite, len(states))
		if len(states) < 2 {
			t.Fatalf("%s: the children never got a write done before being killed", mode)
		}
		if killed < perMode*9/10 {
			t.Fatalf("%s: only %d of %d children were killed mid-run", mode, killed, perMode)
		}
		// The next write in each directory removes the temporary files of the killed
		// writers.
		switch mode {
		case "replace":
			mustOp(t, p, ActionReplace, []string{"f.txt"}, content("final"))
		case "append":
			mustOp(t, p, ActionAppend, []string{"log.txt"}, content(""))
		case "restore":
			mustOp(t, p, ActionSnapshotRestore, []string{"d"}, SnapshotRestoreInput{SnapshotID: snapID})
		}
		assertNoTemps(t, filepath.Join(base, "root"))
		p.Close()
	}
}

// checkCrashState verifies the files after a kill and returns a summary of the state
// seen (the version of the file, or for a restore which files were still mutated).
func checkCrashState(t *testing.T, p *Provider, mode, snapID string) string {
	t.Helper()
	readV := func(path ...string) (string, string) {
		rr := mustOp(t, p, ActionRead, path, nil)
		ro := rr.Output.(ReadOutput)
		st := mustOp(t, p, ActionStat, path, nil).Output.(StatOutput)
		if ro.Version != Version([]byte(ro.Content)) || st.Version != ro.Version {
			t.Fatalf("%v: version %s / stat %s does not match the content", path, ro.Version, st.Version)
		}
		return ro.Content, ro.Version
	}
	switch mode {
	case "replace":
		c, v := readV("f.txt")
		if c != crashA && c != crashB {
			t.Fatalf("f.txt is a mix (%d bytes)", len(c))
		}
		return v
	case "append":
		p.maxRead = 64 << 20
		c, _ := readV("log.txt")
		if len(c)%crashChunk != 0 {
			t.Fatalf("log.txt has a partial append (%d bytes)", len(c))
		}
		for i := 0; i < len(c)/crashChunk; i++ {
			chunk := c[i*crashChunk : (i+1)*crashChunk]
			var n int
			if _, err := fmt.Sscanf(chunk, "<%08d>", &n); err != nil || chunk != appendChunk(n) {
				t.Fatalf("log.txt chunk %d is damaged: %.20q", i, chunk)
			}
		}
		return fmt.Sprint(len(c))
	case "restore":
		state := ""
		for k := 0; k < 4; k++ {
			c, _ := readV("d", fmt.Sprintf("f%d.txt", k))
			if c != restoreOriginal(k) && !strings.HasPrefix(c, "mutated ") {
				t.Fatalf("d/f%d.txt is a mix: %.30q", k, c)
			}
			state += fmt.Sprint(c == restoreOriginal(k))
		}
		defer func() { _ = state }()
		// Re-running the interrupted restore converges to the snapshot.
		mustOp(t, p, ActionSnapshotRestore, []string{"d"}, SnapshotRestoreInput{SnapshotID: snapID})
		for k := 0; k < 4; k++ {
			if c, _ := readV("d", fmt.Sprintf("f%d.txt", k)); c != restoreOriginal(k) {
				t.Fatalf("d/f%d.txt not restored", k)
			}
		}
		ls := mustOp(t, p, ActionList, []string{"d", "sub"}, nil).Output.(ListOutput)
		if len(ls.Entries) != 1 || ls.Entries[0].Name != "keep.txt" {
			t.Fatalf("d/sub after restore: %+v", ls.Entries)
		}
		again := mustOp(t, p, ActionSnapshotRestore, []string{"d"}, SnapshotRestoreInput{SnapshotID: snapID}).Output.(SnapshotRestoreOutput)
		if again.Restored != 0 || again.Removed != 0 {
			t.Fatalf("restore did not converge: %+v", again)
		}
		return state
	}
	return ""
}
