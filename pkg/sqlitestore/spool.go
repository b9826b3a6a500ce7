package sqlitestore

import (
	"bytes"
	"cmp"
	"context"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// The audit spool: a long-lived session (an MCP server answering thousands of calls) does
// not commit a SQLite transaction per call for its write-ahead records. They are appended
// to a spool file of the process — one write(2) per batch, before AppendWriteAhead or
// AppendWriteAheadBatch returns — and copied into audit_events by a background goroutine,
// many calls to one transaction. (A commit per call was ~120 µs of a 260 µs MCP
// tools/call round trip; the append is a few µs.)
//
// Durability is the same as a write-ahead commit's: both are in the operating system's
// page cache when the call returns, so both survive the crash of the process and neither
// is forced to the disk (see Store). A spool is ingested by whoever comes first:
//
//   - the owner's goroutine, 10 ms after an append (spoolDelay), and Close;
//   - the owner before any durable write (so that a write tool's durable tool.invoked
//     record never precedes its write-ahead decision in the trail's order);
//   - every reader of the trail (ListAudit, LastAuditSeq), in any process, before it
//     reads: the records of a live spool are copied in (another process's spool is read,
//     never modified) and a dead process's spool is copied in and removed. So a record is
//     visible to every reader of the store once the append returned, as
//     kernel.WriteAheadAuditSink requires. (A program reading the database file with
//     another SQLite client sees it once the owner ingested it: milliseconds.)
//
// Ingesting is idempotent (ON CONFLICT (id) DO NOTHING), which is what lets readers,
// crashed owners and retries race safely: a record ingested twice is one row. The price:
// a spooled event whose id was recorded before with other content is dropped silently at
// ingest instead of being refused (ErrDuplicate) at append; the kernel mints every id
// (time-ordered, 80 random bits), so this is a contract on callers that choose their own.
//
// The files: a directory STATE-spool beside the database (mode 0700), two files per process
// NAME.0.spool and NAME.1.spool (mode 0600), each held with an exclusive flock(2) while the
// process lives: a reader that can take the lock knows the owner is gone. Appends go to
// one file while the goroutine ingests the other's records, then truncates it, so that a
// file is only ever truncated once every line in it is committed. A line is
// "CRC32C(json) json\n"; a line that is torn (the process died mid-write), mixed by a
// concurrent truncation or otherwise not a whole checked record is ignored.

// spoolDelay is how long the owner's goroutine lets appends accumulate before ingesting
// them in one transaction (a variable for the tests). Measured with sequential raw-client
// calls on 2 cores: 2 ms gave a p50 of 173–184 µs, 10 ms 147–150 µs, 50 ms 149–151 µs (an
// ingest this frequent competes with the next call for the CPU). Readers do not wait for
// it: they copy the spools in themselves.
var spoolDelay = 10 * time.Millisecond

// spoolChunk bounds the rows of one ingest INSERT statement.
const spoolChunk = 16

// crcTable is the CRC-32C table of the spool lines' checksums, built on first use:
// building it costs ~1.2M instructions (hash/crc32's SSE4.2 tables), which every process
// linking this package paid at start-up when it was a package-level table (issue 28).
var crcTable = sync.OnceValue(func() *crc32.Table { return crc32.MakeTable(crc32.Castagnoli) })

type spool struct {
	dir   string
	names [2]string

	mu      sync.Mutex // guards the fields below
	files   [2]*os.File
	sizes   [2]int64
	cur     int     // the file appends go to
	pending [][]any // rows appended and not yet ingested, in order
	failed  error   // the last ingest's error, nil once one succeeded
	closed  bool
	seq     uint64 // the number of the next line
	// writing is the batch being written (outside mu), nil when none; next is the batch
	// appends join meanwhile.
	writing, next *spoolBatch

	ingestMu sync.Mutex // one ingest at a time
	wake     chan struct{}
	done     chan struct{}
	stopped  chan struct{}
}

// SpoolDir is the directory of the audit spools of the database at path (see EnableSpool).
func SpoolDir(path string) string { return path + "-spool" }

// EnableSpool makes this store write its write-ahead audit records through a spool file
// (see the comment above) instead of one SQLite commit each: for a long-lived session.
// Durable writes are unchanged. Close ingests what is left and removes the files. Where
// flock(2) is not available EnableSpool does nothing (records are committed one by one).
// Calling it again does nothing.
func (s *Store) EnableSpool() error {
	if !spoolSupported {
		return nil
	}
	s.spoolMu.Lock()
	defer s.spoolMu.Unlock()
	if s.sp != nil {
		return nil
	}
	dir, _, err := spoolDir(s.path, true)
	if err != nil {
		return err
	}
	sp := &spool{dir: dir, wake: make(chan struct{}, 1), done: make(chan struct{}), stopped: make(chan struct{})}
	base := fmt.Sprintf("%d-%s", os.Getpid(), kernel.NewEventID())
	for i := range sp.files {
		f, name, err := createLocked(dir, fmt.Sprintf("%s.%d.spool", base, i))
		if err != nil {
			sp.closeFiles(true)
			return fmt.Errorf("audit spool of %s: %w", s.path, err)
		}
		sp.files[i], sp.names[i] = f, name
	}
	s.sp = sp
	go s.spoolLoop(sp)
	return nil
}

// spoolDir returns the spool directory of the database at path, made when create, and
// whether it exists. It is never used through a link (one could lead where an agent
// writes, and forge records there) and never when it is not a directory.
func spoolDir(path string, create bool) (string, bool, error) {
	dir := SpoolDir(path)
	if create {
		if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return dir, false, fmt.Errorf("audit spool of %s: %w", path, err)
		}
	}
	fi, err := os.Lstat(dir)
	if errors.Is(err, os.ErrNotExist) && !create {
		return dir, false, nil
	}
	if err == nil && !fi.IsDir() {
		err = errors.New("not a directory (a symbolic link or a file)")
	}
	if err != nil {
		return dir, false, fmt.Errorf("audit spool %s: %w", dir, err)
	}
	return dir, true, nil
}

// createLocked creates dir/name, locked, in a way a reader never sees unlocked: it is
// created and locked under a name readers ignore, then renamed.
func createLocked(dir, name string) (*os.File, string, error) {
	tmp := filepath.Join(dir, "."+name+".tmp")
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		return nil, "", err
	}
	if err := lockFile(f); err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, "", err
	}
	final := filepath.Join(dir, name)
	if err := os.Rename(tmp, final); err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, "", err
	}
	return f, final, nil
}

// spoolBatch is the lines of one write(2) of a spool file: the appends that came while
// the previous one was written. done is closed once it was, err set.
type spoolBatch struct {
	buf  []byte
	rows [][]any
	done chan struct{}
	err  error
}

// spoolAppend writes the rows' lines to the current spool file and queues them for
// ingest. On any error nothing of them is left in the file.
//
// Appends are combined: while one write(2) is under way, the appends that come join the
// next batch, which the first of them writes once that write is done. So the lines of
// concurrent appends go out in one system call, no lock is held across one (a server's
// requests convoyed behind a mutex held across a write per record), and an append that
// meets no other writes at once. Lines are numbered, and batches written, in the order
// the appends took sp.mu.
func (s *Store) spoolAppend(ctx context.Context, sp *spool, rows [][]any) error {
	sp.mu.Lock()
	if sp.failed != nil {
		// The last ingest failed (a full disk, a read-only database): try again now rather
		// than let records pile up where no reader can rely on them.
		sp.mu.Unlock()
		if err := s.ingestOwn(ctx); err != nil {
			return err
		}
		sp.mu.Lock()
	}
	if sp.closed {
		sp.mu.Unlock()
		return errors.New("the store is closed")
	}
	if b := sp.next; b != nil { // join the batch waiting for the write under way
		b.buf = appendSpoolBatch(b.buf, sp.seq, rows)
		sp.seq += uint64(len(rows))
		b.rows = append(b.rows, rows...)
		sp.mu.Unlock()
		<-b.done
		return b.err
	}
	b := &spoolBatch{buf: appendSpoolBatch((*spoolBufs.Get().(*[]byte))[:0], sp.seq, rows), rows: rows, done: make(chan struct{})}
	sp.seq += uint64(len(rows))
	if w := sp.writing; w != nil {
		// wait for that write, then write this batch with whatever joined it: no other
		// write starts meanwhile (appends join sp.next)
		sp.next = b
		sp.mu.Unlock()
		<-w.done
		sp.mu.Lock()
		sp.next = nil
	}
	sp.write(b)
	sp.mu.Unlock()
	return b.err
}

// write writes b to the current file, with sp.mu held (released during the write(2)).
func (sp *spool) write(b *spoolBatch) {
	defer close(b.done)
	if sp.closed {
		b.err = errors.New("the store is closed")
		return
	}
	cur := sp.cur
	f := sp.files[cur]
	sp.writing = b
	sp.mu.Unlock()
	n, err := f.Write(b.buf)
	sp.mu.Lock()
	sp.writing = nil
	if err == nil && n < len(b.buf) {
		err = io.ErrShortWrite
	}
	// No append joins b once its write began (they join sp.next): its buffer is free.
	if cap(b.buf) <= maxPooledEncoding {
		buf := b.buf[:0]
		spoolBufs.Put(&buf)
	}
	b.buf = nil
	if err != nil {
		// The file ends where it did (should that fail, the torn line is ended by the next
		// batch's leading line end, and readers ignore it).
		if n > 0 && f.Truncate(sp.sizes[cur]) != nil {
			sp.sizes[cur] += int64(n)
		}
		b.err = fmt.Errorf("audit spool %s: %w", sp.names[cur], err)
		return
	}
	sp.sizes[cur] += int64(n)
	sp.pending = append(sp.pending, b.rows...)
	select {
	case sp.wake <- struct{}{}:
	default:
	}
}

// spoolBufs are the buffers of spool batches, reused once their write(2) is done.
var spoolBufs = sync.Pool{New: func() any { b := make([]byte, 0, 2048); return &b }}

// appendSpoolBatch appends the lines of rows, numbered from seq, as one write of either
// spool: each line is led by a line end and the batch ends with one, so that a line torn
// by a write that did not complete (the process died, the disk filled) is ended by the
// next batch and ignored, and the lines after it stay whole.
func appendSpoolBatch(b []byte, seq uint64, rows [][]any) []byte {
	for _, r := range rows {
		b = append(b, '\n')
		b = appendSpoolLine(b, seq, []byte(r[auditColumns-1].(string)))
		b = b[:len(b)-1] // ended by the next line's lead, or the batch's end
		seq++
	}
	return append(b, '\n')
}

// appendSpoolLine appends one spool line: "CCCCCCCC SSSSSSSSSSSSSSSS {json}\n", the CRC32C
// of everything after the first space, the line's number in its process (both in hex)
// and the record.
func appendSpoolLine(b []byte, seq uint64, text []byte) []byte {
	start := len(b)
	b = append(b, "00000000 "...)
	var n [8]byte
	binary.BigEndian.PutUint64(n[:], seq)
	b = hex.AppendEncode(b, n[:])
	b = append(b, ' ')
	b = append(b, text...)
	var sum [4]byte
	binary.BigEndian.PutUint32(sum[:], crc32.Checksum(b[start+9:], crcTable()))
	hex.Encode(b[start:start+8], sum[:])
	return append(b, '\n')
}

// spoolLoop is the owner's goroutine: after an append, wait spoolDelay, then ingest.
func (s *Store) spoolLoop(sp *spool) {
	defer close(sp.stopped)
	t := time.NewTimer(time.Hour)
	t.Stop()
	for {
		select {
		case <-sp.done:
			return
		case <-sp.wake:
		}
		t.Reset(spoolDelay)
		select {
		case <-sp.done:
			t.Stop()
			return
		case <-t.C:
		}
		s.ingestOwn(context.Background()) // an error is kept in sp.failed for the next append
	}
}

// ingestOwn copies this process's pending spooled records into audit_events (one
// transaction) and truncates the file that held them.
func (s *Store) ingestOwn(ctx context.Context) error {
	sp := s.spool()
	if sp == nil {
		return nil
	}
	sp.ingestMu.Lock()
	defer sp.ingestMu.Unlock()
	sp.mu.Lock()
	for sp.writing != nil {
		// a write under way goes to the current file: let it end before switching, so that
		// the file truncated below holds only lines of the rows taken here
		w := sp.writing
		sp.mu.Unlock()
		<-w.done
		sp.mu.Lock()
	}
	batch := sp.pending
	sp.pending = nil
	old := sp.cur
	if len(batch) > 0 {
		sp.cur = 1 - sp.cur
	}
	sp.mu.Unlock()
	if len(batch) == 0 {
		return nil
	}
	err := s.ingestRows(ctx, batch)
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if err != nil {
		// Put them back, first: the next ingest takes them with what came since. The file
		// that holds them is not truncated until a commit covers every line in it.
		sp.pending = append(batch, sp.pending...)
		sp.failed = err
		return err
	}
	sp.failed = nil
	if terr := sp.files[old].Truncate(0); terr == nil {
		sp.sizes[old] = 0
	}
	return nil
}

// spool returns the store's spool, or nil.
func (s *Store) spool() *spool {
	s.spoolMu.Lock()
	defer s.spoolMu.Unlock()
	return s.sp
}

// ingestRows inserts rows (eventArgs values) into audit_events in one transaction on the
// write-ahead pool, in order; an id recorded already is skipped.
func (s *Store) ingestRows(ctx context.Context, rows [][]any) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("ingest the audit spool into %s: begin: %w", s.path, err)
	}
	defer tx.Rollback()
	flat := make([]any, 0, spoolChunk*auditColumns)
	for len(rows) > 0 {
		n := min(len(rows), spoolChunk)
		st, err := s.prepared(ctx, spoolInsertSQL(n))
		if err != nil {
			return fmt.Errorf("ingest the audit spool into %s: %w", s.path, err)
		}
		flat = flat[:0]
		for _, r := range rows[:n] {
			flat = append(flat, r...)
		}
		if _, err := tx.StmtContext(ctx, st).ExecContext(ctx, flat...); err != nil {
			return fmt.Errorf("ingest the audit spool into %s: %w", s.path, err)
		}
		rows = rows[n:]
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("ingest the audit spool into %s: commit: %w", s.path, err)
	}
	return nil
}

// spoolInsertSQL inserts n audit events, skipping ids recorded already.
func spoolInsertSQL(n int) string {
	return multiInsertSQL(n) + " ON CONFLICT (id) DO NOTHING"
}

// syncSpools makes every spooled record readable before a read of the trail: this
// process's pending records, every other live process's spooled records (read, the file
// left alone) and a dead process's (read, then the files removed). Nothing is done when
// the spool directory does not exist (no session ever spooled into this database).
func (s *Store) syncSpools(ctx context.Context) error {
	if err := s.ingestOwn(ctx); err != nil {
		return err
	}
	if !spoolSupported {
		return nil
	}
	if err := s.ingestShared(ctx); err != nil {
		return err
	}
	dir := SpoolDir(s.path)
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read the audit spools %s: %w", dir, err)
	}
	own := ""
	if sp := s.spool(); sp != nil {
		own = spoolOwner(filepath.Base(sp.names[0]))
	}
	// A process's records are in its two files: read both, then put them in order.
	groups := map[string][]string{}
	var owners []string
	for _, e := range entries {
		name := e.Name()
		o := spoolOwner(name)
		if o == "" || o == own {
			continue
		}
		if groups[o] == nil {
			owners = append(owners, o)
		}
		groups[o] = append(groups[o], filepath.Join(dir, name))
	}
	for _, o := range owners {
		if err := s.ingestForeign(ctx, groups[o]); err != nil {
			return err
		}
	}
	return nil
}

// spoolOwner is the process part of a spool file's name ("" for anything else).
func spoolOwner(name string) string {
	if strings.HasPrefix(name, ".") || !strings.HasSuffix(name, ".spool") {
		return ""
	}
	base := strings.TrimSuffix(name, ".spool")
	i := strings.LastIndexByte(base, '.')
	if i <= 0 {
		return ""
	}
	return base[:i]
}

// ingestForeign copies the whole, checked records of another process's spool files into
// audit_events, in that process's order, and removes the files when their owner is gone
// (their locks can be taken).
//
// A live owner appends to one file while it ingests the other, so a reader that read its
// files one after the other could see a record without an earlier one still pending in
// the file it read first, and record them out of order. So the files are read once each,
// then all but the last again, and only the lines up to the highest number of the first
// pass are recorded: every earlier line is then in one of the reads (it was appended
// before that line was, so before a later read of its file) or was ingested already (its
// file is truncated only after its lines are committed). A line appended meanwhile and
// left out is copied by the owner, or by the next reader.
func (s *Store) ingestForeign(ctx context.Context, paths []string) error {
	files := make([]*os.File, 0, len(paths))
	defer func() {
		for _, f := range files {
			f.Close()
		}
	}()
	var open []string
	dead := true
	for _, p := range paths {
		f, err := os.Open(p)
		if errors.Is(err, os.ErrNotExist) {
			continue // ingested and removed meanwhile
		}
		if err != nil {
			return fmt.Errorf("read the audit spool %s: %w", p, err)
		}
		files = append(files, f)
		open = append(open, p)
		if lockFile(f) != nil {
			dead = false
		}
	}
	order := make([]int, 0, 2*len(files))
	for i := range files {
		order = append(order, i)
	}
	first := len(order)
	if !dead {
		for i := range len(files) - 1 {
			order = append(order, i)
		}
	}
	bySeq := map[uint64]spoolLine{}
	var last uint64
	for n, i := range order {
		if spoolReadHook != nil {
			spoolReadHook(n, open[i])
		}
		data, err := readAt0(files[i])
		if err != nil {
			return fmt.Errorf("read the audit spool %s: %w", open[i], err)
		}
		for _, l := range spoolLines(data) {
			bySeq[l.seq] = l
			if n < first {
				last = max(last, l.seq)
			}
		}
	}
	lines := make([]spoolLine, 0, len(bySeq))
	for seq, l := range bySeq {
		if dead || seq <= last {
			lines = append(lines, l)
		}
	}
	slices.SortFunc(lines, func(a, b spoolLine) int { return cmp.Compare(a.seq, b.seq) })
	if err := s.ingestLines(ctx, lines); err != nil {
		return err
	}
	if dead {
		for _, p := range open {
			if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("remove the audit spool %s: %w", p, err)
			}
		}
	}
	return nil
}

// ingestLines inserts the records of lines, in their order, in one transaction.
func (s *Store) ingestLines(ctx context.Context, lines []spoolLine) error {
	if len(lines) == 0 {
		return nil
	}
	rows := make([][]any, len(lines))
	for i, l := range lines {
		rows[i] = l.row
	}
	return s.ingestRows(ctx, rows)
}

// spoolReadHook, when set (by a test), is called before the n-th read of ingestForeign.
var spoolReadHook func(n int, path string)

// readAt0 reads a file whole from its start (it may be read more than once).
func readAt0(f *os.File) ([]byte, error) {
	var out []byte
	buf := make([]byte, 64<<10)
	for off := int64(0); ; {
		n, err := f.ReadAt(buf, off)
		out = append(out, buf[:n]...)
		off += int64(n)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

type spoolLine struct {
	seq uint64
	row []any
}

// spoolLines returns the whole, checked records of a spool file's content.
func spoolLines(data []byte) []spoolLine {
	var out []spoolLine
	for len(data) > 0 {
		line, rest, ok := bytes.Cut(data, []byte{'\n'})
		if !ok {
			break // torn: the writer died mid-line, or a truncation raced the read
		}
		data = rest
		if l, ok := parseSpoolLine(line); ok {
			out = append(out, l)
		}
	}
	return out
}

// parseSpoolLine parses one spool line: its checksum must match and its record must be
// an event the trail can hold.
func parseSpoolLine(line []byte) (spoolLine, bool) {
	if len(line) < 28 || line[8] != ' ' || line[25] != ' ' {
		return spoolLine{}, false
	}
	var sum [4]byte
	var n [8]byte
	if _, err := hex.Decode(sum[:], line[:8]); err != nil {
		return spoolLine{}, false
	}
	if crc32.Checksum(line[9:], crcTable()) != binary.BigEndian.Uint32(sum[:]) {
		return spoolLine{}, false
	}
	if _, err := hex.Decode(n[:], line[9:25]); err != nil {
		return spoolLine{}, false
	}
	text := line[26:]
	var ev kernel.AuditEvent
	if err := json.Unmarshal(text, &ev); err != nil || ev.ID == "" || kernel.CheckAuditEventDecodes(&ev) != nil {
		return spoolLine{}, false
	}
	return spoolLine{seq: binary.BigEndian.Uint64(n[:]), row: rowOf(&ev, string(text))}, true
}

// closeSpool stops the goroutine, ingests what is pending and removes the files; when
// that ingest fails the files stay for a later reader to ingest.
func (s *Store) closeSpool() error {
	sp := s.spool()
	if sp == nil {
		return nil
	}
	close(sp.done)
	<-sp.stopped
	sp.mu.Lock()
	sp.closed = true // no append after the last ingest
	sp.mu.Unlock()
	err := s.ingestOwn(context.Background())
	sp.closeFiles(err == nil)
	s.spoolMu.Lock()
	s.sp = nil
	s.spoolMu.Unlock()
	return err
}

// closeFiles closes (unlocking) the spool's files, removing them first when remove.
func (sp *spool) closeFiles(remove bool) {
	for i, f := range sp.files {
		if f == nil {
			continue
		}
		if remove {
			os.Remove(sp.names[i])
		}
		f.Close()
	}
}

// rowOf is the audit_events row of ev encoded as text (insertAuditSQL's column order).
func rowOf(ev *kernel.AuditEvent, text string) []any {
	var atMS sql.NullInt64
	if ms, err := kernel.ParseTimestamp(ev.At); err == nil {
		atMS = sql.NullInt64{Int64: ms, Valid: true}
	}
	return []any{ev.ID, string(ev.Type), string(ev.Outcome), ev.At, atMS, ev.Tool, ev.OperationID,
		ev.TraceID, ev.NamespaceID, text}
}
