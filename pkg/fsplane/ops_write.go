package fsplane

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"syscall"

	"github.com/sharedos/sharedos/pkg/kernel"
)

// WriteOutput is the output of create, replace and append. Bytes is the file's total
// size after the write.
type WriteOutput struct {
	Path    []string `json:"path"`
	Version string   `json:"version"`
	Bytes   int64    `json:"bytes"`
}

// DeleteOutput is the output of delete.
type DeleteOutput struct {
	Path    []string `json:"path"`
	Deleted bool     `json:"deleted"`
}

// ContentBytes returns the bytes a write stores for content: the text of a JSON
// string, or the compact JSON text of any other value.
func ContentBytes(content json.RawMessage) []byte {
	if len(content) > 0 && content[0] == '"' {
		var s string
		if json.Unmarshal(content, &s) == nil {
			return []byte(s)
		}
	}
	return []byte(content)
}

func versionConflict(path []string, current string) error {
	if current == "" {
		return failed(CodeVersionConflict, "%s does not exist, but expectedVersion was given; nothing was changed", show(path))
	}
	return failed(CodeVersionConflict, "%s has changed: its current version is %s, not the expectedVersion given; read it again and retry; nothing was changed", show(path), current)
}

// lockedParent opens the directory that holds path (creating missing directories when
// mkdir), takes its write lock and removes temporary files a crashed writer left. With
// versioned (an expectedVersion was given), a missing parent is a version conflict: the
// write must change nothing. release unlocks and closes, in that order.
func (p *Provider) lockedParent(ctx context.Context, path []string, mkdir, versioned bool) (dirRef, string, *os.File, func(), error) {
	parent, name, err := p.openParent(path, mkdir)
	if err != nil {
		if oe := (*opError)(nil); errors.As(err, &oe) && oe.code == CodeNotFound && versioned {
			return dirRef{}, "", nil, nil, versionConflict(path, "")
		}
		return dirRef{}, "", nil, nil, err
	}
	dirf, unlock, err := lockDir(ctx, parent.r)
	if err != nil {
		parent.release()
		return dirRef{}, "", nil, nil, err
	}
	cleanTemps(parent.r, dirf)
	return parent, name, dirf, func() { unlock(); parent.release() }, nil
}

func (p *Provider) write(ctx context.Context, action string, path []string, in WriteInput) (any, error) {
	if len(path) == 0 {
		return nil, failed(CodeNotAFile, "the root is a directory; name a file inside it")
	}
	data := ContentBytes(in.Content)
	// Missing directories are created for create and append, but never when a version
	// is expected (the write will fail, and must change nothing).
	parent, name, dirf, release, err := p.lockedParent(ctx, path, action != ActionReplace && in.ExpectedVersion == nil, in.ExpectedVersion != nil)
	if err != nil {
		return nil, err
	}
	defer release()

	fi, err := parent.r.Lstat(name)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	var mode fs.FileMode
	if exists {
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			return nil, escapeErr(path, false)
		case action == ActionCreate:
			return nil, failed(CodeAlreadyExists, "%s already exists; use files.replace or files.append to change it", show(path))
		case fi.IsDir():
			return nil, failed(CodeNotAFile, "%s is a directory, not a file", show(path))
		case !fi.Mode().IsRegular():
			return nil, failed(CodeNotAFile, "%s is not a regular file", show(path))
		}
		mode = fi.Mode().Perm()
	} else {
		if in.ExpectedVersion != nil {
			return nil, versionConflict(path, "")
		}
		if action == ActionReplace {
			return nil, failed(CodeNotFound, "%s does not exist; use files.create to create it", show(path))
		}
	}
	// The new content is streamed into the temporary file and hashed on the way: an
	// append copies the old content first (its hash checked against expectedVersion
	// before anything moves), so no file is ever held in memory whole.
	buf := make([]byte, copyBuf)
	var old *os.File
	if exists && (action == ActionAppend || in.ExpectedVersion != nil) {
		var st os.FileInfo
		if old, st, err = openFileIn(parent.r, name, path); err != nil {
			return nil, err
		}
		defer old.Close()
		mode = st.Mode().Perm()
		if action != ActionAppend {
			sum, err := hashFile(old, buf)
			if err != nil {
				return nil, err
			}
			if cur := versionOfDigest(sum); cur != *in.ExpectedVersion {
				return nil, versionConflict(path, cur)
			}
			old = nil
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	whole := sha256.New()
	var size int64
	fill := func(w io.Writer) error {
		if old != nil {
			prev := sha256.New()
			n, err := copyHashing(w, old, buf, -1, prev, whole)
			if err != nil {
				return err
			}
			if in.ExpectedVersion != nil {
				if cur := versionOfDigest(prev.Sum(nil)); cur != *in.ExpectedVersion {
					return versionConflict(path, cur)
				}
			}
			size = n
		}
		whole.Write(data)
		size += int64(len(data))
		_, err := w.Write(data)
		return err
	}
	if err := atomicWriteFrom(parent.r, dirf, name, fill, mode, exists, !exists); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return nil, failed(CodeAlreadyExists, "%s was created by someone else meanwhile; nothing was changed", show(path))
		}
		var re *readError
		if errors.As(err, &re) {
			return nil, re.err
		}
		return nil, err
	}
	return WriteOutput{Path: path, Version: versionOfDigest(whole.Sum(nil)), Bytes: size}, nil
}

func tempName() string {
	var b [12]byte
	rand.Read(b[:])
	return TempPrefix + hex.EncodeToString(b[:])
}

// atomicWriteFrom writes the content fill writes to a new temporary file in dir,
// fsyncs it and moves it to name: by rename (replacing whatever is there) or, with
// noClobber, by link (failing with fs.ErrExist if name appeared). dirf (the open,
// locked directory) is fsynced after. The caller holds the directory lock. When fill
// fails, nothing moves and its error is returned.
func atomicWriteFrom(dir *os.Root, dirf *os.File, name string, fill func(io.Writer) error, mode fs.FileMode, keepMode, noClobber bool) (err error) {
	tmp := tempName()
	perm := fs.FileMode(0o644)
	if keepMode {
		perm = 0o600
	}
	f, err := dir.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	moved := false
	defer func() {
		if !moved {
			dir.Remove(tmp)
		}
	}()
	if err = fill(f); err == nil && keepMode {
		err = f.Chmod(mode)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if noClobber {
		if err := dir.Link(tmp, name); err != nil {
			if errors.Is(err, fs.ErrExist) {
				return err
			}
			if !errors.Is(err, syscall.EPERM) && !errors.Is(err, syscall.ENOTSUP) && !errors.Is(err, syscall.EOPNOTSUPP) {
				return err
			}
			// No hard links on this file system: rename under the lock instead.
			if err := dir.Rename(tmp, name); err != nil {
				return err
			}
		} else {
			dir.Remove(tmp)
		}
	} else if err := dir.Rename(tmp, name); err != nil {
		return err
	}
	moved = true
	return dirf.Sync()
}

// cleanTemps removes temporary files left in dir by a writer that crashed. The caller
// holds the directory lock, under which every writer creates and moves its temporary
// file, so any temporary file present now is stale.
func cleanTemps(dir *os.Root, dirf *os.File) {
	names, err := dirf.Readdirnames(-1)
	if err != nil {
		return
	}
	for _, n := range names {
		if len(n) > len(TempPrefix) && n[:len(TempPrefix)] == TempPrefix {
			if dir.Remove(n) != nil {
				removeAllIn(dir, n) // a directory a crashed restore was staging
			}
		}
	}
}

func (p *Provider) delete(ctx context.Context, path []string, in DeleteInput) (any, error) {
	if len(path) == 0 {
		return nil, denied(CodeNotPermitted, "the root itself cannot be deleted; delete the entries inside it")
	}
	parent, name, err := p.openParent(path, false)
	if err != nil {
		return nil, err
	}
	defer parent.release()
	dirf, unlock, err := lockDir(ctx, parent.r)
	if err != nil {
		return nil, err
	}
	defer unlock()
	fi, err := parent.r.Lstat(name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			if in.ExpectedVersion != nil {
				return nil, versionConflict(path, "")
			}
			return nil, failed(CodeNotFound, "%s does not exist", show(path))
		}
		return nil, err
	}
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		return nil, escapeErr(path, false)
	case fi.IsDir():
		if in.ExpectedVersion != nil {
			return nil, failed(CodeInvalidInput, "%s is a directory; expectedVersion applies to files only, so omit it", show(path))
		}
		if spec := p.frozen.below(path); spec != "" {
			return nil, denied(kernel.ErrorCodeOf(kernel.ReasonHostPolicyDenied), "%s holds the frozen path %s, which the host ceiling puts out of reach; nothing was deleted", show(path), spec)
		}
		sub, err := openChild(parent.r, name, path, false)
		if err != nil {
			return nil, err
		}
		empty, err := checkDeletable(ctx, sub, path)
		if err == nil && !empty && !in.Recursive {
			err = failed(CodeNotEmpty, "%s is a directory that is not empty; pass recursive:true to delete it and everything in it", show(path))
		}
		if err == nil {
			err = removeContents(ctx, sub, path)
		}
		sub.Close()
		if err != nil {
			return nil, err
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := parent.r.Remove(name); err != nil {
			if errors.Is(err, syscall.ENOTEMPTY) || errors.Is(err, syscall.EEXIST) {
				return nil, failed(CodeNotEmpty, "%s gained new entries while it was being deleted; try again", show(path))
			}
			return nil, err
		}
	default:
		if in.ExpectedVersion != nil {
			if !fi.Mode().IsRegular() {
				return nil, failed(CodeNotAFile, "%s is not a regular file; it has no version", show(path))
			}
			sum, _, err := hashFileIn(parent.r, name, path, make([]byte, copyBuf))
			if err != nil {
				return nil, err
			}
			if cur := versionOfDigest(sum); cur != *in.ExpectedVersion {
				return nil, versionConflict(path, cur)
			}
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if err := parent.r.Remove(name); err != nil {
			return nil, err
		}
	}
	dirf.Sync()
	return DeleteOutput{Path: path, Deleted: true}, nil
}

// checkDeletable walks the directory dir and reports whether it is empty (temporary
// files do not count); it refuses a tree that holds a .git entry anywhere.
func checkDeletable(ctx context.Context, dir *os.Root, path []string) (empty bool, err error) {
	names, err := readNames(dir)
	if err != nil {
		return false, err
	}
	empty = true
	for _, n := range names {
		if err := ctx.Err(); err != nil {
			return false, err
		}
		if isGitName(n) {
			return false, denied(CodeNotPermitted, "%s holds a .git repository, which the files plane never deletes", show(append(clonePath(path), n)))
		}
		if isTempName(n) {
			continue
		}
		empty = false
		fi, err := dir.Lstat(n)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return false, err
		}
		if spec := frozenIDsFrom(ctx).of(fi); spec != "" {
			return false, denied(kernel.ErrorCodeOf(kernel.ReasonHostPolicyDenied), "%s is the frozen path %s under another name, which the host ceiling puts out of reach; nothing was deleted", show(append(clonePath(path), n)), spec)
		}
		if fi.IsDir() && fi.Mode()&fs.ModeSymlink == 0 {
			sub, err := openChild(dir, n, append(clonePath(path), n), false)
			if err != nil {
				return false, err
			}
			_, err = checkDeletable(ctx, sub, append(clonePath(path), n))
			sub.Close()
			if err != nil {
				return false, err
			}
		}
	}
	return empty, nil
}

// removeContents deletes everything inside dir, depth first, never following a link
// (a link is removed itself) and refusing a .git entry.
func removeContents(ctx context.Context, dir *os.Root, path []string) error {
	names, err := readNames(dir)
	if err != nil {
		return err
	}
	for _, n := range names {
		if err := ctx.Err(); err != nil {
			return err
		}
		if isGitName(n) {
			return denied(CodeNotPermitted, "%s holds a .git repository, which the files plane never deletes", show(append(clonePath(path), n)))
		}
		fi, err := dir.Lstat(n)
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return err
		}
		if fi.IsDir() && fi.Mode()&fs.ModeSymlink == 0 {
			sub, err := openChild(dir, n, append(clonePath(path), n), false)
			if err != nil {
				return err
			}
			err = removeContents(ctx, sub, append(clonePath(path), n))
			sub.Close()
			if err != nil {
				return err
			}
		}
		if err := dir.Remove(n); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

func readNames(dir *os.Root) ([]string, error) {
	f, err := dir.Open(".")
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return f.Readdirnames(-1)
}
