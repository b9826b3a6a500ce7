package fsplane

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"sort"
	"sync"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// Walks (grep, search, directory snapshots) read many files, so they work on directory
// handles rather than paths: the starting directory is resolved through os.Root like
// every other operation, and each entry below it is opened with
// openat(directory handle, single name, O_NOFOLLOW). The kernel therefore refuses to
// follow a link in any position (a link swapped in at any moment fails with ELOOP or
// ENOTDIR), no name is ever joined onto a path, and nothing outside the starting
// directory can be reached.

// sharedDir is an open directory shared by the walker and the workers reading the
// files in it; the last user closes it.
type sharedDir struct {
	fd   int
	refs atomic.Int32
}

func newSharedDir(fd int) *sharedDir {
	d := &sharedDir{fd: fd}
	d.refs.Store(1)
	return d
}

func (d *sharedDir) release() {
	if d.refs.Add(-1) == 0 {
		unix.Close(d.fd)
	}
}

// dupRootFd returns a new descriptor for the directory r (the caller closes it).
func dupRootFd(r *os.Root) (int, error) {
	f, err := r.Open(".")
	if err != nil {
		return -1, err
	}
	defer f.Close()
	sc, err := f.SyscallConn()
	if err != nil {
		return -1, err
	}
	fd := -1
	var derr error
	cerr := sc.Control(func(raw uintptr) {
		fd, derr = dupCloexec(int(raw))
	})
	if cerr != nil {
		return -1, cerr
	}
	return fd, derr
}

func dupCloexec(fd int) (int, error) {
	for {
		nfd, err := unix.FcntlInt(uintptr(fd), unix.F_DUPFD_CLOEXEC, 0)
		if err == unix.EINTR {
			continue
		}
		return nfd, err
	}
}

func openatNoFollow(dirfd int, name string, flags int) (int, error) {
	for {
		fd, err := unix.Openat(dirfd, name, flags|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if err == unix.EINTR {
			continue
		}
		return fd, err
	}
}

// walkEntry is one regular file found by a walk, numbered in path order.
type walkEntry struct {
	seq    int
	path   []string // from the plane root
	dir    *sharedDir
	name   string
	frozen frozenIDs // frozen entries, skipped whatever their name
	// unaddressable: a segment of path is not a valid path segment (only walks that
	// include such names report them, see walkOpts).
	unaddressable bool
}

// walkBatch is how many entries the walker hands the workers at once: one channel
// operation (and at most one goroutine wake-up) per batch rather than per file, which
// made the scheduler's hand-offs (futex, and the stealing P's 3 µs nanosleeps) cost
// about as much as reading the files (issue 28).
const walkBatch = 64

// walkFiles sends every regular file under path (a file or a directory) to out in
// path order (segment by segment, byte-wise; in batches of up to walkBatch), then
// closes out. Links, special files,
// .git directories, temporary files and frozen paths are skipped, and so are names that
// are not valid path segments unless opts.all. A sub-directory that cannot be read is
// skipped too, unless opts.strict: then the walk stops and fails naming it. Otherwise it
// fails only for path itself.
func (p *Provider) walkFiles(ctx context.Context, path []string, out chan<- []walkEntry, opts walkOpts) error {
	defer close(out)
	node, _ := p.frozen.at(path)
	w := walker{ctx: ctx, out: out, frozen: p.frozen, ids: frozenIDsFrom(ctx), strict: opts.strict, all: opts.all}
	if len(path) == 0 {
		fd, err := dupRootFd(p.root)
		if err != nil {
			return err
		}
		w.dir(newSharedDir(fd), path, node, false)
		w.flush()
		return w.err
	}
	parent, name, err := p.openParent(path, false)
	if err != nil {
		return err
	}
	defer parent.release()
	fi, err := parent.r.Lstat(name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return failed(CodeNotFound, "%s does not exist", show(path))
		}
		return err
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return escapeErr(path, false)
	case fi.Mode().IsRegular():
		fd, err := dupRootFd(parent.r)
		if err != nil {
			return err
		}
		d := newSharedDir(fd)
		d.refs.Add(1)
		select {
		case out <- []walkEntry{{seq: 0, path: path, dir: d, name: name, frozen: w.ids}}:
		case <-ctx.Done():
			d.release()
		}
		d.release()
		return nil
	case fi.IsDir():
		child, err := openChild(parent.r, name, path, false)
		if err != nil {
			return err
		}
		fd, err := dupRootFd(child)
		child.Close()
		if err != nil {
			return err
		}
		w.dir(newSharedDir(fd), path, node, false)
		w.flush()
		return w.err
	}
	return failed(CodeNotAFile, "%s is not a regular file or directory", show(path))
}

type walker struct {
	ctx    context.Context
	out    chan<- []walkEntry
	batch  []walkEntry // entries not yet sent (each holds a reference on its dir)
	seq    int
	dbuf   []byte
	frozen *frozenTree
	ids    frozenIDs
	strict bool  // a directory that cannot be read fails the walk
	all    bool  // include names that are not valid path segments (marked unaddressable)
	err    error // the failure of a strict walk
}

// fail records the first failure of a strict walk, on the entry at path.
func (w *walker) fail(path []string, err error) {
	if w.err == nil {
		w.err = failed(CodeProviderError, "%s cannot be read (%v), so it cannot be captured; nothing was recorded", show(path), errnoText(err))
	}
}

// dir walks d (and releases it); node is d's place in the tree of frozen paths; unaddr:
// path already holds an unaddressable segment.
func (w *walker) dir(d *sharedDir, path []string, node *frozenNode, unaddr bool) {
	defer d.release()
	if w.ctx.Err() != nil || w.err != nil {
		return
	}
	if w.dbuf == nil {
		w.dbuf = make([]byte, 32<<10)
	}
	ents, err := readDirents(d.fd, w.dbuf)
	if err != nil && (len(ents) == 0 || w.strict) {
		if w.strict {
			w.fail(path, err)
		}
		return
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].name < ents[j].name })
	for _, de := range ents {
		name := de.name
		bad := unaddr
		if isGitName(name) || isTempName(name) {
			continue
		}
		fnode := w.frozen.child(node, name)
		if fnode != nil && fnode.frozen {
			continue
		}
		if !validName(name) {
			if !w.all {
				continue
			}
			bad = true
		}
		switch de.typ {
		case typeDir:
			fd, err := openatNoFollow(d.fd, name, unix.O_RDONLY|unix.O_DIRECTORY)
			if err != nil {
				// Vanished, replaced by a link, or unreadable.
				if w.strict && !errors.Is(err, syscall.ENOENT) && !errors.Is(err, syscall.ELOOP) && !errors.Is(err, syscall.ENOTDIR) {
					w.fail(append(clonePath(path), name), err)
					return
				}
				continue
			}
			if len(w.ids) > 0 {
				var st syscall.Stat_t
				if syscall.Fstat(fd, &st) == nil && w.ids.ofStat(&st) != "" {
					syscall.Close(fd)
					continue // a frozen directory under another name
				}
			}
			cp := make([]string, len(path)+1)
			copy(cp, path)
			cp[len(path)] = name
			w.dir(newSharedDir(fd), cp, fnode, bad)
			if w.err != nil {
				return
			}
		case typeFile:
			cp := make([]string, len(path)+1)
			copy(cp, path)
			cp[len(path)] = name
			d.refs.Add(1)
			w.batch = append(w.batch, walkEntry{seq: w.seq, path: cp, dir: d, name: name, frozen: w.ids, unaddressable: bad})
			w.seq++
			if len(w.batch) == walkBatch && !w.flush() {
				return
			}
		}
		if w.ctx.Err() != nil {
			return
		}
	}
}

// flush sends the pending batch; it reports false (the batch's references released)
// when the walk was cancelled first.
func (w *walker) flush() bool {
	if len(w.batch) == 0 {
		return true
	}
	b := w.batch
	w.batch = make([]walkEntry, 0, walkBatch)
	select {
	case w.out <- b:
		return true
	case <-w.ctx.Done():
		for _, e := range b {
			e.dir.release()
		}
		return false
	}
}

// openWalked opens a walked file for reading without following a link. It returns
// ok=false, and no error, for an entry that is no longer a regular file (it vanished,
// or a link or special file took its place); any other failure is returned.
func openWalked(e walkEntry) (*os.File, bool, error) {
	fd, err := openatNoFollow(e.dir.fd, e.name, syscall.O_RDONLY|syscall.O_NONBLOCK)
	if err != nil {
		if errors.Is(err, syscall.ENOENT) || errors.Is(err, syscall.ELOOP) || errors.Is(err, syscall.ENXIO) {
			return nil, false, nil
		}
		return nil, false, err
	}
	var st syscall.Stat_t
	if err := syscall.Fstat(fd, &st); err != nil {
		syscall.Close(fd)
		return nil, false, err
	}
	if st.Mode&syscall.S_IFMT != syscall.S_IFREG || e.frozen.ofStat(&st) != "" {
		syscall.Close(fd)
		return nil, false, nil
	}
	return os.NewFile(uintptr(fd), e.name), true, nil
}

// binaryProbe is how much of a file larger than it readWalked reads first when asked to
// skip binary files: a NUL byte in it marks the file binary (grep and search skip such
// files whole), so the rest is not read. Smaller files are read in one piece, and the
// caller checks them. A file whose NUL byte lies further on is read whole and skipped
// by the caller's own check, so what is skipped is the same; only less is read.
const binaryProbe = 64 << 10

// readWalked opens a walked file without following a link, checks it is a regular file
// of at most limit bytes, and reads it into buf (reused when large enough). It returns
// ok=false for a file to skip (with buf, perhaps grown, when it was read from: callers
// may keep it). With skipBinary, a file larger than binaryProbe
// whose first binaryProbe bytes hold a NUL byte is skipped after that first read.
func readWalked(e walkEntry, buf []byte, limit int64, skipBinary bool) ([]byte, bool) {
	fd, err := openatNoFollow(e.dir.fd, e.name, unix.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		return nil, false
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size > limit || e.frozen.ofID(uint64(st.Dev), uint64(st.Ino)) != "" {
		return nil, false
	}
	size := int(st.Size)
	if cap(buf) < size+1 {
		// grow geometrically (up to 8 MiB, past which the exact size): a walk meets
		// ever larger files, and each new buffer is zeroed
		buf = make([]byte, max(size+1, min(2*cap(buf), 8<<20), 64<<10))
	}
	buf = buf[:cap(buf)]
	n := 0
	for n < size {
		want := size
		if skipBinary && n == 0 && size > binaryProbe {
			want = binaryProbe
		}
		m, err := unix.Read(fd, buf[n:want])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, false
		}
		if m == 0 {
			break // shrank meanwhile: what is there
		}
		if skipBinary && n == 0 && want < size && bytes.IndexByte(buf[:m], 0) >= 0 {
			return buf[:0], false // the buffer, for the caller to keep
		}
		n += m
	}
	return buf[:n], true
}

// walkOpts select what a walk does with what it cannot or must not address.
type walkOpts struct {
	// strict: a sub-directory that cannot be read fails the walk (snapshots).
	strict bool
	// all: files whose path holds a name that is not a valid path segment are walked
	// too, marked walkEntry.unaddressable (grep and search report them).
	all bool
}

// runWalk is runWorkers with the walk's options chosen (see walkOpts).
func (p *Provider) runWalk(ctx context.Context, path []string, opts walkOpts, work func(worker int, e walkEntry)) error {
	return p.runWalkBatches(ctx, path, opts, work, nil)
}

// runWalkBatches is runWalk that also calls batchDone (when not nil) in the worker
// after each batch of entries it was handed (at most walkBatch): a worker hands its
// results on per batch, not per file.
func (p *Provider) runWalkBatches(ctx context.Context, path []string, opts walkOpts, work func(worker int, e walkEntry), batchDone func(worker int)) error {
	jobs := make(chan []walkEntry, 512/walkBatch)
	var walkErr error
	done := make(chan struct{})
	go func() {
		walkErr = p.walkFiles(ctx, path, jobs, opts)
		close(done)
	}()
	n := p.workers
	if n < 1 {
		n = 1
	}
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for batch := range jobs {
				for _, e := range batch {
					if ctx.Err() == nil {
						work(i, e)
					}
					e.dir.release()
				}
				if batchDone != nil {
					batchDone(i)
				}
			}
		}(i)
	}
	wg.Wait()
	<-done
	return walkErr
}

// errnoText names the operating system's reason in a message ("permission denied").
func errnoText(err error) string {
	var en syscall.Errno
	if errors.As(err, &en) {
		return en.Error()
	}
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err.Error()
	}
	return err.Error()
}
