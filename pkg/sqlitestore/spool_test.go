//go:build unix

package sqlitestore

import (
	"bufio"
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sharedos/sharedos/pkg/kernel"
)

const childSpoolN = "SQLITESTORE_CHILD_SPOOL_N" // how many events a spool child appends

// runSpoolChild: "spool-live" appends its events through a spool, prints "ready" and
// waits for its stdin to close, then closes the store; "spool-crash" appends and then
// kills itself (SIGKILL: nothing is ingested, nothing cleaned up).
func runSpoolChild(role string) int {
	// The owner's goroutine never ingests: what the parent sees, it read from the files.
	spoolDelay = time.Hour
	ctx := context.Background()
	s, err := Open(ctx, os.Getenv(childDB), Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	if role == "spool-shared" {
		s.EnableSharedSpool()
	} else if err := s.EnableSpool(); err != nil {
		fmt.Fprintln(os.Stderr, "child:", err)
		return 1
	}
	n, _ := strconv.Atoi(os.Getenv(childSpoolN))
	if role == "spool-shared" {
		role = fmt.Sprintf("%s-%d", role, os.Getpid())
	}
	for i := 0; i < n; i += 2 {
		// as the kernel writes a read's two records
		batch := []kernel.AuditEvent{spoolEvent(fmt.Sprintf("%s-%d", role, i)), spoolEvent(fmt.Sprintf("%s-%d", role, i+1))}
		if err := s.AppendWriteAheadBatch(ctx, batch); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 1
		}
	}
	switch {
	case strings.HasPrefix(role, "spool-shared-"):
		if err := s.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 1
		}
		fmt.Println(role)
		return 0
	case role == "spool-crash":
		syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	case role == "spool-live":
		fmt.Println("ready")
		io.Copy(io.Discard, os.Stdin)
		if err := s.Close(); err != nil {
			fmt.Fprintln(os.Stderr, "child:", err)
			return 1
		}
		return 0
	}
	fmt.Fprintln(os.Stderr, "child: unknown role", role)
	return 1
}

func spoolEvent(id string) kernel.AuditEvent {
	ev := event(id, kernel.EventToolInvoked, kernel.OutcomeSucceeded, "2026-03-01T10:00:00.000Z")
	ev.Tool, ev.OperationID = "files.read", "op-"+id
	ev.Resource = &kernel.ResourceRef{Namespace: "files", Path: []string{"notes", id}}
	return ev
}

// spoolChild starts a spool child on the database at path.
func spoolChild(t *testing.T, role, path string, n int) (*exec.Cmd, io.WriteCloser, *bufio.Reader) {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+role, childDB+"="+path, childSpoolN+"="+strconv.Itoa(n))
	cmd.Stderr = os.Stderr
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, stdin, bufio.NewReader(stdout)
}

// ids returns the ids of every recorded event with prefix, oldest first, and fails on a
// duplicate.
func spooledIDs(t *testing.T, s *Store, prefix string) []string {
	t.Helper()
	evs, err := s.ListAudit(context.Background(), AuditFilter{Oldest: true})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ev := range evs {
		if strings.HasPrefix(ev.ID, prefix) {
			if slices.Contains(out, ev.ID) {
				t.Fatalf("event %s recorded twice", ev.ID)
			}
			out = append(out, ev.ID)
		}
	}
	return out
}

func wantIDs(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

func spoolFiles(t *testing.T, path string) []string {
	t.Helper()
	entries, err := os.ReadDir(SpoolDir(path))
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// A live process's spooled records are visible to a reader in another process as soon as
// its append returned (the reader copies them in and leaves the file alone), and the
// owner's own ingest at Close records nothing twice.
func TestSpoolVisibleToOtherProcesses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s := mustOpen(t, path)
	defer s.Close()
	cmd, stdin, out := spoolChild(t, "spool-live", path, 40)
	if line, err := out.ReadString('\n'); line != "ready\n" {
		t.Fatalf("child: %q, %v", line, err)
	}
	if got := spooledIDs(t, s, "spool-live"); !slices.Equal(got, wantIDs("spool-live", 40)) {
		t.Fatalf("a reader sees %d of 40 spooled records: %q", len(got), got)
	}
	if files := spoolFiles(t, path); len(files) != 2 {
		t.Fatalf("the live spool's files were touched by the reader: %q", files)
	}
	stdin.Close()
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if got := spooledIDs(t, s, "spool-live"); len(got) != 40 {
		t.Fatalf("after the owner closed: %d records, want 40", len(got))
	}
	if files := spoolFiles(t, path); len(files) != 0 {
		t.Fatalf("Close left spool files: %q", files)
	}
}

// A process killed with records in its spool loses none of them: the next reader copies
// them in and removes the dead spool.
func TestSpoolOfAKilledProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	cmd, _, _ := spoolChild(t, "spool-crash", path, 30)
	if err := cmd.Wait(); err == nil || !strings.Contains(err.Error(), "killed") {
		t.Fatalf("child: %v, want killed", err)
	}
	if files := spoolFiles(t, path); len(files) != 2 {
		t.Fatalf("the killed process's spool: %q, want its two files", files)
	}
	s := mustOpen(t, path)
	defer s.Close()
	if got := spooledIDs(t, s, "spool-crash"); !slices.Equal(got, wantIDs("spool-crash", 30)) {
		t.Fatalf("recovered %d of 30 records: %q", len(got), got)
	}
	if files := spoolFiles(t, path); len(files) != 0 {
		t.Fatalf("the dead spool was not removed: %q", files)
	}
}

// A spool file's torn last line, a line whose checksum does not match and a checked line
// that is not an event the trail can hold are ignored; the whole lines are recorded.
func TestSpoolDamagedLines(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s := mustOpen(t, path)
	defer s.Close()
	var seq uint64
	good := func(id string) []byte {
		ev := spoolEvent(id)
		row, err := eventArgs(&ev)
		if err != nil {
			t.Fatal(err)
		}
		seq++
		return appendSpoolLine(nil, seq, []byte(row[auditColumns-1].(string)))
	}
	var content []byte
	content = append(content, good("dmg-0")...)
	bad := good("dmg-bad-sum")
	bad[0] ^= 1 // a checksum digit changed
	content = append(content, bad...)
	tampered := good("dmg-tampered")
	tampered[40] ^= 0x20 // the record changed, its checksum not
	content = append(content, tampered...)
	content = append(content, appendSpoolLine(nil, 99, []byte(`{"version":"2","id":"dmg-v2"}`))...)
	content = append(content, "not a line at all\n"...)
	content = append(content, good("dmg-1")...)
	torn := good("dmg-torn")
	content = append(content, torn[:len(torn)/2]...)
	if err := os.MkdirAll(SpoolDir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(SpoolDir(path), "1-x.0.spool"), content, 0o600); err != nil {
		t.Fatal(err)
	}
	// a file still being created (its temporary name) is not a spool yet
	if err := os.WriteFile(filepath.Join(SpoolDir(path), ".1-y.0.spool.tmp"), good("dmg-tmp"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := spooledIDs(t, s, "dmg"); !slices.Equal(got, []string{"dmg-0", "dmg-1"}) {
		t.Fatalf("recorded %q, want the two whole lines", got)
	}
	if files := spoolFiles(t, path); !slices.Equal(files, []string{".1-y.0.spool.tmp"}) {
		t.Fatalf("spool directory after recovery: %q", files)
	}
}

// A line whose checksum is well formed but wrong is never ingested, although its record
// is a valid event and everything else about the line is whole: the reader refuses it
// (and accepts the same line with its right checksum), the lines around it are
// recorded, and the dead spool is removed.
func TestSpoolWrongChecksum(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s := mustOpen(t, path)
	defer s.Close()
	line := func(seq uint64, id string) []byte {
		ev := spoolEvent(id)
		row, err := eventArgs(&ev)
		if err != nil {
			t.Fatal(err)
		}
		return appendSpoolLine(nil, seq, []byte(row[auditColumns-1].(string)))
	}
	wrong := line(2, "sum-wrong")
	if l, ok := parseSpoolLine(wrong[:len(wrong)-1]); !ok || l.seq != 2 || l.row[0] != "sum-wrong" {
		t.Fatalf("the line with its right checksum is refused: %v %v", ok, l.row)
	}
	var sum [4]byte
	if _, err := hex.Decode(sum[:], wrong[:8]); err != nil {
		t.Fatal(err)
	}
	binary.BigEndian.PutUint32(sum[:], binary.BigEndian.Uint32(sum[:])+1)
	hex.Encode(wrong[:8], sum[:]) // still eight hex digits, no longer the record's CRC32C
	if _, ok := parseSpoolLine(wrong[:len(wrong)-1]); ok {
		t.Errorf("the reader accepts a line whose checksum does not match: %q", wrong)
	}
	content := slices.Concat(line(1, "sum-0"), wrong, line(3, "sum-1"))
	if got := spoolLines(content); len(got) != 2 || got[0].seq != 1 || got[1].seq != 3 {
		t.Errorf("the reader returns %d lines, want the two whose checksum matches", len(got))
	}
	if err := os.MkdirAll(SpoolDir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(SpoolDir(path), "1-x.0.spool"), content, 0o600); err != nil {
		t.Fatal(err)
	}
	if got := spooledIDs(t, s, "sum-"); !slices.Equal(got, []string{"sum-0", "sum-1"}) {
		t.Fatalf("recorded %q, want sum-0 and sum-1 only", got)
	}
	if files := spoolFiles(t, path); len(files) != 0 {
		t.Fatalf("spool directory after recovery: %q", files)
	}
}

// A durable record comes after the write-ahead records spooled before it (a write tool's
// tool.invoked after its decision), and ListAudit sees everything appended, in order.
func TestSpoolOrder(t *testing.T) {
	s := openTest(t, Options{})
	if err := s.EnableSpool(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var want []string
	for i := range 5 {
		id := fmt.Sprintf("ord-%d-checked", i)
		if err := s.AppendWriteAhead(ctx, spoolEvent(id)); err != nil {
			t.Fatal(err)
		}
		want = append(want, id)
		id = fmt.Sprintf("ord-%d-invoked", i)
		if err := s.Append(ctx, spoolEvent(id)); err != nil {
			t.Fatal(err)
		}
		want = append(want, id)
	}
	if got := spooledIDs(t, s, "ord"); !slices.Equal(got, want) {
		t.Fatalf("order %q, want %q", got, want)
	}
}

// When ingesting fails, the records stay in the spool and the next append tries again
// and fails with the error (the caller refuses the operation: audit_unavailable) instead
// of piling up records no reader can see; once the database accepts writes again nothing
// is lost. Close ingests what is pending and removes the files.
func TestSpoolIngestFailure(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s := mustOpen(t, path)
	if err := s.EnableSpool(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if _, err := s.db.ExecContext(ctx, `CREATE TRIGGER boom BEFORE INSERT ON audit_events
		WHEN NEW.tool = 'boom' BEGIN SELECT RAISE(ABORT, 'boom refused'); END`); err != nil {
		t.Fatal(err)
	}
	ev := spoolEvent("fail-0")
	ev.Tool = "boom"
	if err := s.AppendWriteAhead(ctx, ev); err != nil {
		t.Fatalf("the append itself must succeed: %v", err)
	}
	if err := s.ingestOwn(ctx); err == nil || !strings.Contains(err.Error(), "boom refused") {
		t.Fatalf("ingest: %v, want the trigger's refusal", err)
	}
	if err := s.AppendWriteAhead(ctx, spoolEvent("fail-1")); err == nil || !strings.Contains(err.Error(), "boom refused") {
		t.Fatalf("append after a failed ingest: %v, want the ingest's error", err)
	}
	if _, err := s.ListAudit(ctx, AuditFilter{}); err == nil {
		t.Fatal("ListAudit read a trail it could not bring up to date")
	}
	if _, err := s.db.ExecContext(ctx, `DROP TRIGGER boom`); err != nil {
		t.Fatal(err)
	}
	if err := s.AppendWriteAhead(ctx, spoolEvent("fail-2")); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if files := spoolFiles(t, path); len(files) != 0 {
		t.Fatalf("Close left spool files: %q", files)
	}
	s = mustOpen(t, path)
	defer s.Close()
	if got := spooledIDs(t, s, "fail"); !slices.Equal(got, []string{"fail-0", "fail-2"}) {
		t.Fatalf("recorded %q, want fail-0 (spooled before the failure) and fail-2 (fail-1 was refused)", got)
	}
}

// A spooled record whose id is recorded already is one row, whoever ingests it.
func TestSpoolIdempotent(t *testing.T) {
	s := openTest(t, Options{})
	ctx := context.Background()
	if err := s.Append(ctx, spoolEvent("idem-0")); err != nil {
		t.Fatal(err)
	}
	if err := s.EnableSpool(); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := s.AppendWriteAhead(ctx, spoolEvent("idem-0")); err != nil {
			t.Fatal(err)
		}
	}
	if got := spooledIDs(t, s, "idem"); !slices.Equal(got, []string{"idem-0"}) {
		t.Fatalf("recorded %q", got)
	}
}

// Appends from many goroutines while another store (another process's reader) lists the
// trail over and over: every record is recorded exactly once, each goroutine's in its
// order, and the reader never sees a goroutine's later record without its earlier ones.
func TestSpoolConcurrent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	w, r := mustOpen(t, path), mustOpen(t, path)
	defer r.Close()
	if err := w.EnableSpool(); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	const writers, each = 8, 60
	done := make(chan struct{})
	readerErr := make(chan error, 1)
	go func() {
		defer close(readerErr)
		for {
			select {
			case <-done:
				return
			default:
			}
			evs, err := r.ListAudit(ctx, AuditFilter{Oldest: true})
			if err != nil {
				readerErr <- err
				return
			}
			next := map[string]int{}
			for _, ev := range evs {
				var g, i int
				if _, err := fmt.Sscanf(ev.ID, "cc-%d-%d", &g, &i); err != nil {
					continue
				}
				key := strconv.Itoa(g)
				if i != next[key] {
					readerErr <- fmt.Errorf("the reader saw %s after %d of its writer's records", ev.ID, next[key])
					return
				}
				next[key]++
			}
		}
	}()
	var wg sync.WaitGroup
	for g := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; i += 2 {
				batch := []kernel.AuditEvent{spoolEvent(fmt.Sprintf("cc-%d-%d", g, i)), spoolEvent(fmt.Sprintf("cc-%d-%d", g, i+1))}
				if err := w.AppendWriteAheadBatch(ctx, batch); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(done)
	if err := <-readerErr; err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got := spooledIDs(t, r, "cc-"); len(got) != writers*each {
		t.Fatalf("%d records, want %d", len(got), writers*each)
	}
}

// A reader of a live spool never records a record before an earlier one that was still
// pending: here the owner appends its record 0 to the file the reader has just read and
// its record 1 to the other one, between the reader's two reads.
func TestSpoolLiveReadOrder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s := mustOpen(t, path)
	defer s.Close()
	if err := os.MkdirAll(SpoolDir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	// a live owner: its two files, locked by this process through other descriptors
	var files [2]*os.File
	for i := range files {
		f, _, err := createLocked(SpoolDir(path), fmt.Sprintf("1-live.%d.spool", i))
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		files[i] = f
	}
	line := func(seq uint64, id string) []byte {
		ev := spoolEvent(id)
		row, err := eventArgs(&ev)
		if err != nil {
			t.Fatal(err)
		}
		return appendSpoolLine(nil, seq, []byte(row[auditColumns-1].(string)))
	}
	spoolReadHook = func(n int, p string) {
		if n == 1 { // the first file read, the second not yet
			files[0].Write(line(0, "live-0"))
			files[1].Write(line(1, "live-1"))
		}
	}
	defer func() { spoolReadHook = nil }()
	if got := spooledIDs(t, s, "live"); !slices.Equal(got, []string{"live-0", "live-1"}) {
		t.Fatalf("recorded %q, want live-0 then live-1", got)
	}
}

// mustOpen opens the store at path (the caller closes it).
func mustOpen(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(context.Background(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// The spool directory is never used through a symbolic link, nor when it is a file.
func TestSpoolDirRefused(t *testing.T) {
	dir := t.TempDir()
	elsewhere := filepath.Join(dir, "elsewhere")
	if err := os.Mkdir(elsewhere, 0o700); err != nil {
		t.Fatal(err)
	}
	for name, prepare := range map[string]func(path string) error{
		"link": func(path string) error { return os.Symlink(elsewhere, SpoolDir(path)) },
		"file": func(path string) error { return os.WriteFile(SpoolDir(path), nil, 0o600) },
	} {
		path := filepath.Join(dir, name+".db")
		if err := prepare(path); err != nil {
			t.Fatal(err)
		}
		s := mustOpen(t, path)
		if err := s.EnableSpool(); err == nil || !strings.Contains(err.Error(), "not a directory") {
			t.Errorf("%s: EnableSpool = %v", name, err)
		}
		s.Close()
	}
	if entries, _ := os.ReadDir(elsewhere); len(entries) != 0 {
		t.Fatalf("files were created through the link: %v", entries)
	}
}

// After a write left part of a line that could not be cut off, the next lines start on a
// line of their own: readers see them whole.
func TestSpoolAfterTornWrite(t *testing.T) {
	defer func(d time.Duration) { spoolDelay = d }(spoolDelay)
	spoolDelay = time.Hour // only the reader ingests
	path := filepath.Join(t.TempDir(), "state.db")
	w, r := mustOpen(t, path), mustOpen(t, path)
	defer r.Close()
	defer w.Close()
	if err := w.EnableSpool(); err != nil {
		t.Fatal(err)
	}
	sp := w.spool()
	sp.mu.Lock()
	if _, err := sp.files[sp.cur].Write([]byte("0badc0de 00000000000000ff {\"version\":\"1\",\"id\":\"torn")); err != nil {
		t.Fatal(err)
	}
	sp.mu.Unlock()
	if err := w.AppendWriteAhead(context.Background(), spoolEvent("after-torn")); err != nil {
		t.Fatal(err)
	}
	if got := spooledIDs(t, r, "after-torn"); !slices.Equal(got, []string{"after-torn"}) {
		t.Fatalf("another reader sees %q, want the record written after the torn line", got)
	}
}

// rawCount counts audit_events rows with id prefix, reading the database directly (no
// spool is copied in).
func rawCount(t *testing.T, s *Store, prefix string) int {
	t.Helper()
	var n int
	if err := s.db.QueryRow(`SELECT count(*) FROM audit_events WHERE id LIKE ? || '%'`, prefix).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// The shared spool of short-lived processes: their write-ahead records write nothing to
// the database; the next reader (another process) sees them, in order, and copies them
// in; a durable write of the appender comes after its own spooled records.
func TestSharedSpool(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	a, b, r := mustOpen(t, path), mustOpen(t, path), mustOpen(t, path)
	defer r.Close()
	a.EnableSharedSpool()
	b.EnableSharedSpool()
	ctx := context.Background()
	for i := range 3 {
		if err := a.AppendWriteAheadBatch(ctx, []kernel.AuditEvent{spoolEvent(fmt.Sprintf("sh-%d-a", i)), spoolEvent(fmt.Sprintf("sh-%d-b", i))}); err != nil {
			t.Fatal(err)
		}
		if err := b.AppendWriteAhead(ctx, spoolEvent(fmt.Sprintf("sh-%d-c", i))); err != nil {
			t.Fatal(err)
		}
	}
	if n := rawCount(t, r, "sh-"); n != 0 {
		t.Fatalf("%d records were written to the database", n)
	}
	want := []string{"sh-0-a", "sh-0-b", "sh-0-c", "sh-1-a", "sh-1-b", "sh-1-c", "sh-2-a", "sh-2-b", "sh-2-c"}
	if got := spooledIDs(t, r, "sh-"); !slices.Equal(got, want) {
		t.Fatalf("a reader sees %q, want %q", got, want)
	}
	if fi, err := os.Stat(SharedSpoolPath(path)); err != nil || fi.Size() != 0 {
		t.Fatalf("the shared spool after a reader copied it in: %v, %v", fi, err)
	}
	// a durable record after spooled ones
	if err := a.AppendWriteAhead(ctx, spoolEvent("sh-3-checked")); err != nil {
		t.Fatal(err)
	}
	if err := a.Append(ctx, spoolEvent("sh-3-invoked")); err != nil {
		t.Fatal(err)
	}
	if got := spooledIDs(t, r, "sh-3"); !slices.Equal(got, []string{"sh-3-checked", "sh-3-invoked"}) {
		t.Fatalf("order %q", got)
	}
	// a process that closed (exited) leaves its records for the next reader
	if err := b.AppendWriteAhead(ctx, spoolEvent("sh-4")); err != nil {
		t.Fatal(err)
	}
	a.Close()
	b.Close()
	if got := spooledIDs(t, r, "sh-4"); !slices.Equal(got, []string{"sh-4"}) {
		t.Fatalf("after the appenders closed: %q", got)
	}
}

// Past sharedSpoolMax the appender copies the shared spool in itself; a line torn by a
// process that died mid-write costs only that line.
func TestSharedSpoolBoundAndTorn(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	w, r := mustOpen(t, path), mustOpen(t, path)
	defer w.Close()
	defer r.Close()
	w.EnableSharedSpool()
	ctx := context.Background()
	if err := w.AppendWriteAhead(ctx, spoolEvent("bt-first")); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(SharedSpoolPath(path), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte("\n0badc0de 0000000000000000 {\"version\":\"1\",\"id\":\"bt-torn")) // died mid-write
	f.Close()
	n, prev := 0, int64(0)
	for ; n < 3000; n++ {
		if err := w.AppendWriteAhead(ctx, spoolEvent(fmt.Sprintf("bt-%04d", n))); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Stat(SharedSpoolPath(path))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() < prev {
			n++
			break // the appender copied it in and emptied it
		}
		prev = fi.Size()
	}
	if n == 3000 || prev <= sharedSpoolMax-4096 {
		t.Fatal("the shared spool grew past its bound")
	}
	if c := rawCount(t, r, "bt-"); c < n {
		t.Fatalf("%d records in the database after the appender copied %d in", c, n)
	}
	got := spooledIDs(t, r, "bt-")
	if len(got) != n+1 || got[0] != "bt-first" || got[1] != "bt-0000" || got[n] != fmt.Sprintf("bt-%04d", n-1) {
		t.Fatalf("recorded %d: %q..., want bt-first, bt-0000 ... bt-%04d", len(got), got[:min(3, len(got))], n-1)
	}
}

// Short-lived processes appending to the shared spool at once: every record is recorded
// exactly once, each process's in its order.
func TestSharedSpoolProcesses(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s := mustOpen(t, path) // the schema first
	defer s.Close()
	const procs, each = 6, 40
	var wg sync.WaitGroup
	roles := make([]string, procs)
	for i := range procs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), childEnv+"=spool-shared", childDB+"="+path, childSpoolN+"="+strconv.Itoa(each))
			cmd.Stderr = os.Stderr
			out, err := cmd.Output()
			if err != nil {
				t.Error(err)
			}
			roles[i] = strings.TrimSpace(string(out))
		}()
	}
	wg.Wait()
	evs, err := s.ListAudit(context.Background(), AuditFilter{Oldest: true})
	if err != nil {
		t.Fatal(err)
	}
	next := map[string]int{}
	for _, ev := range evs {
		i := strings.LastIndexByte(ev.ID, '-')
		role, n := ev.ID[:i], ev.ID[i+1:]
		if want := strconv.Itoa(next[role]); n != want {
			t.Fatalf("%s recorded where %s-%s was due", ev.ID, role, want)
		}
		next[role]++
	}
	for _, role := range roles {
		if next[role] != each {
			t.Errorf("%s: %d records, want %d", role, next[role], each)
		}
	}
}
