package fsplane

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"sort"
	"sync"
	"sync/atomic"

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
	seq  int
	path []string // from the plane root
	dir  *sharedDir
	name string
	// unaddressable: a segment of path is not a valid path segment (only walks that
	// include such names report them, see runWalk).
	unaddressable bool
}

// walkFiles sends every regular file under path (a file or a directory) to out in
// path order (segment by segment, byte-wise), then closes out. Links, special files,
// .git directories and temporary files are skipped, as are sub-directories that cannot
// be opened. It fails only for path itself.
func (p *Provider) walkFiles(ctx context.Context, path []string, all bool, out chan<- walkEntry) error {
	defer close(out)
	if len(path) == 0 {
		fd, err := dupRootFd(p.root)
		if err != nil {
			return err
		}
		w := walker{ctx: ctx, out: out, all: all}
		w.dir(newSharedDir(fd), path, false)
		return nil
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
		case out <- walkEntry{seq: 0, path: path, dir: d, name: name}:
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
		w := walker{ctx: ctx, out: out, all: all}
		w.dir(newSharedDir(fd), path, false)
		return nil
	}
	return failed(CodeNotAFile, "%s is not a regular file or directory", show(path))
}

type walker struct {
	ctx  context.Context
	out  chan<- walkEntry
	all  bool // include names that are not valid path segments (marked unaddressable)
	seq  int
	dbuf []byte
}

// dir walks d (and releases it); unaddr: path already holds an unaddressable segment.
func (w *walker) dir(d *sharedDir, path []string, unaddr bool) {
	defer d.release()
	if w.ctx.Err() != nil {
		return
	}
	if w.dbuf == nil {
		w.dbuf = make([]byte, 32<<10)
	}
	ents, err := readDirents(d.fd, w.dbuf)
	if err != nil && len(ents) == 0 {
		return
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].name < ents[j].name })
	for _, de := range ents {
		name := de.name
		bad := unaddr
		if isGitName(name) || isTempName(name) {
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
				continue // vanished, replaced by a link, or unreadable
			}
			cp := make([]string, len(path)+1)
			copy(cp, path)
			cp[len(path)] = name
			w.dir(newSharedDir(fd), cp, bad)
		case typeFile:
			cp := make([]string, len(path)+1)
			copy(cp, path)
			cp[len(path)] = name
			d.refs.Add(1)
			select {
			case w.out <- walkEntry{seq: w.seq, path: cp, dir: d, name: name, unaddressable: bad}:
				w.seq++
			case <-w.ctx.Done():
				d.release()
				return
			}
		}
		if w.ctx.Err() != nil {
			return
		}
	}
}

// readWalked opens a walked file without following a link, checks it is a regular file
// of at most max bytes, and reads it into buf (reused when large enough). It returns
// (nil, false) for a file to skip.
func readWalked(e walkEntry, buf []byte, max int64) ([]byte, bool) {
	fd, err := openatNoFollow(e.dir.fd, e.name, unix.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		return nil, false
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFREG || st.Size > max {
		return nil, false
	}
	size := int(st.Size)
	if cap(buf) < size+1 {
		buf = make([]byte, size+1, size+size/4+512)
	}
	buf = buf[:cap(buf)]
	n := 0
	for n < size {
		m, err := unix.Read(fd, buf[n:size])
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return nil, false
		}
		if m == 0 {
			break // shrank meanwhile: what is there
		}
		n += m
	}
	return buf[:n], true
}

// runWorkers starts the workers over the walk of path and calls work for each file in
// a worker's goroutine (worker numbers 0..p.workers-1). It returns the error of the
// walk of path itself. Names that are not valid path segments are skipped.
func (p *Provider) runWorkers(ctx context.Context, path []string, work func(worker int, e walkEntry)) error {
	return p.runWalk(ctx, path, false, work)
}

// runWalk is runWorkers; with all, files whose path holds a name that is not a valid
// path segment are walked too (walkEntry.unaddressable).
func (p *Provider) runWalk(ctx context.Context, path []string, all bool, work func(worker int, e walkEntry)) error {
	jobs := make(chan walkEntry, 512)
	var walkErr error
	done := make(chan struct{})
	go func() {
		walkErr = p.walkFiles(ctx, path, all, jobs)
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
			for e := range jobs {
				if ctx.Err() == nil {
					work(i, e)
				}
				e.dir.release()
			}
		}(i)
	}
	wg.Wait()
	<-done
	return walkErr
}
