//go:build linux

package dirwalk

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"

	"golang.org/x/sys/unix"
)

// record builds one getdents64 record.
func record(ino uint64, typ byte, name string) []byte {
	reclen := (direntNameOff + len(name) + 1 + 7) &^ 7
	b := make([]byte, reclen)
	binary.NativeEndian.PutUint64(b[direntInoOff:], ino)
	binary.NativeEndian.PutUint16(b[direntReclenOff:], uint16(reclen))
	b[direntTypeOff] = typ
	copy(b[direntNameOff:], name)
	return b
}

// Parse keeps d_type, drops ".", "..", deleted entries and names that are not one
// component, and stops at a malformed record.
func TestParse(t *testing.T) {
	var b []byte
	for _, r := range [][]byte{
		record(1, unix.DT_DIR, "."), record(1, unix.DT_DIR, ".."),
		record(2, unix.DT_DIR, "sub"), record(3, unix.DT_REG, "f.go"),
		record(4, unix.DT_LNK, "link"), record(5, unix.DT_FIFO, "fifo"),
		record(6, unix.DT_UNKNOWN, "unknown"), record(0, unix.DT_REG, "deleted"),
		record(7, unix.DT_REG, "../escape"), record(8, unix.DT_REG, ""),
		record(9, unix.DT_SOCK, "..."),
	} {
		b = append(b, r...)
	}
	b = append(b, 1, 2, 3) // a truncated record
	got := Parse(b, nil)
	want := []Entry{{"sub", Directory}, {"f.go", Regular}, {"link", Symlink}, {"fifo", Other}, {"unknown", Unknown}, {"...", Other}}
	if !slices.Equal(got, want) {
		t.Fatalf("Parse = %v, want %v", got, want)
	}
	// a record whose length points past the end, or is shorter than a header, ends it
	bad := record(2, unix.DT_REG, "a")
	binary.NativeEndian.PutUint16(bad[direntReclenOff:], uint16(len(bad)+8))
	if got := Parse(append(record(1, unix.DT_REG, "x"), bad...), nil); !slices.Equal(got, []Entry{{"x", Regular}}) {
		t.Fatalf("Parse with an overlong record = %v", got)
	}
	short := record(2, unix.DT_REG, "a")
	binary.NativeEndian.PutUint16(short[direntReclenOff:], 4)
	if got := Parse(short, nil); len(got) != 0 {
		t.Fatalf("Parse with a short record = %v", got)
	}
}

// refParse is a plain reading of the record format, for FuzzParse.
func refParse(b []byte) []Entry {
	var out []Entry
	for len(b) >= direntNameOff {
		reclen := int(binary.NativeEndian.Uint16(b[direntReclenOff:]))
		if reclen < direntNameOff || reclen > len(b) {
			break
		}
		name := b[direntNameOff:reclen]
		for i, c := range name {
			if c == 0 {
				name = name[:i]
				break
			}
		}
		if binary.NativeEndian.Uint64(b) != 0 && ValidName(string(name)) {
			out = append(out, Entry{string(name), typeOf(b[direntTypeOff])})
		}
		b = b[reclen:]
	}
	return out
}

// Whatever bytes it is given, Parse never panics, never reads past the buffer, and
// yields only single-component names: the same as the plain reading of the format.
func FuzzParse(f *testing.F) {
	f.Add(append(record(2, unix.DT_DIR, "sub"), record(3, unix.DT_REG, "f")...))
	f.Add(record(1, unix.DT_DIR, ".."))
	f.Add(record(7, unix.DT_REG, "a/b"))
	f.Add([]byte{1, 2, 3})
	f.Add(make([]byte, 40))
	f.Fuzz(func(t *testing.T, b []byte) {
		got := Parse(b, nil)
		for _, e := range got {
			if !ValidName(e.Name) {
				t.Fatalf("Parse yielded %q", e.Name)
			}
		}
		if want := refParse(b); !slices.Equal(got, want) {
			t.Fatalf("Parse = %q, want %q", got, want)
		}
	})
}

func names(es []Entry) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.Name)
	}
	sort.Strings(out)
	return out
}

// A real listing gives every name once with the file system's types, also when the
// buffer holds only a few records per getdents call.
func TestReadAll(t *testing.T) {
	dir := t.TempDir()
	var want []string
	for i := range 300 {
		n := fmt.Sprintf("file-with-a-longish-name-%03d", i)
		must(t, os.WriteFile(filepath.Join(dir, n), nil, 0o644))
		want = append(want, n)
	}
	must(t, os.Mkdir(filepath.Join(dir, "d"), 0o755))
	must(t, os.Symlink("d", filepath.Join(dir, "l")))
	must(t, unix.Mkfifo(filepath.Join(dir, "p"), 0o644))
	want = append(want, "d", "l", "p")
	sort.Strings(want)
	d, err := Open(dir)
	must(t, err)
	defer d.Close()
	got, err := d.ReadAll(make([]byte, 512), nil)
	must(t, err)
	if !slices.Equal(names(got), want) {
		t.Fatalf("listed %d names, want %d", len(got), len(want))
	}
	for _, e := range got {
		wantType := Regular
		switch e.Name {
		case "d":
			wantType = Directory
		case "l":
			wantType = Symlink
		case "p":
			wantType = Other
		}
		if e.Type != wantType && e.Type != Unknown {
			t.Errorf("%s: type %d, want %d", e.Name, e.Type, wantType)
		}
	}
}

// OpenDir never follows a link (even to a directory inside the tree), never opens a
// file or FIFO as a directory, and refuses names that are not one component.
func TestOpenDirRefuses(t *testing.T) {
	top := t.TempDir()
	dir := filepath.Join(top, "tree")
	must(t, os.MkdirAll(filepath.Join(dir, "real"), 0o755))
	must(t, os.Symlink("real", filepath.Join(dir, "link")))
	must(t, os.WriteFile(filepath.Join(dir, "file"), nil, 0o644))
	must(t, unix.Mkfifo(filepath.Join(dir, "fifo"), 0o644))
	d, err := Open(dir)
	must(t, err)
	defer d.Close()
	sub, err := d.OpenDir("real")
	must(t, err)
	sub.Close()
	for _, n := range []string{"link", "file", "fifo"} {
		if sub, err := d.OpenDir(n); !errors.Is(err, unix.ENOTDIR) {
			if sub != nil {
				sub.Close()
			}
			t.Errorf("OpenDir(%s) = %v, want not a directory", n, err)
		}
	}
	for _, n := range []string{"..", ".", "", "real/..", "../tree", "a\x00b"} {
		if sub, err := d.OpenDir(n); !errors.Is(err, unix.EINVAL) {
			if sub != nil {
				sub.Close()
			}
			t.Errorf("OpenDir(%q) = %v, want refused", n, err)
		}
		var st unix.Stat_t
		if err := d.Lstat(n, &st); !errors.Is(err, unix.EINVAL) {
			t.Errorf("Lstat(%q) = %v, want refused", n, err)
		}
	}
	if _, err := Open(filepath.Join(dir, "link")); !errors.Is(err, unix.ENOTDIR) {
		t.Errorf("Open(link) = %v, want not a directory", err)
	}
}

// The attack a walker meets: a directory listed as a directory is replaced by a link
// to somewhere else between getdents and openat. The open refuses it (the link is not
// followed) and nothing outside is listed.
func TestDirSwappedForLinkAfterListingIsNotFollowed(t *testing.T) {
	top := t.TempDir()
	dir := filepath.Join(top, "tree")
	outside := filepath.Join(top, "outside")
	must(t, os.MkdirAll(filepath.Join(dir, "sub"), 0o755))
	must(t, os.MkdirAll(outside, 0o755))
	must(t, os.WriteFile(filepath.Join(outside, "secret"), []byte("s"), 0o644))
	d, err := Open(dir)
	must(t, err)
	defer d.Close()
	list, err := d.ReadAll(make([]byte, 4096), nil)
	must(t, err)
	if !slices.Equal(list, []Entry{{"sub", Directory}}) {
		t.Fatalf("listing %v", list)
	}
	// the swap
	must(t, os.Remove(filepath.Join(dir, "sub")))
	must(t, os.Symlink(outside, filepath.Join(dir, "sub")))
	sub, err := d.OpenDir("sub")
	if err == nil {
		got, _ := sub.ReadAll(make([]byte, 4096), nil)
		sub.Close()
		t.Fatalf("OpenDir followed the link planted after the listing; it lists %v", names(got))
	}
	if !errors.Is(err, unix.ENOTDIR) {
		t.Fatalf("OpenDir = %v, want not a directory", err)
	}
	var st unix.Stat_t
	must(t, d.Lstat("sub", &st))
	if st.Mode&unix.S_IFMT != unix.S_IFLNK {
		t.Fatalf("Lstat followed the link: mode %o", st.Mode)
	}
	if _, err := d.OpenFile("sub", 0, 0, &st); err == nil {
		t.Fatal("OpenFile opened through the link")
	}
}

// A directory renamed away while open is still the one listed and opened from (the
// descriptor is held; nothing is resolved by path again).
func TestDescriptorFollowsARenamedDirectory(t *testing.T) {
	top := t.TempDir()
	must(t, os.MkdirAll(filepath.Join(top, "a", "inner"), 0o755))
	d, err := Open(filepath.Join(top, "a"))
	must(t, err)
	defer d.Close()
	must(t, os.Rename(filepath.Join(top, "a"), filepath.Join(top, "b")))
	must(t, os.MkdirAll(filepath.Join(top, "a", "decoy"), 0o755))
	got, err := d.ReadAll(make([]byte, 4096), nil)
	must(t, err)
	if !slices.Equal(names(got), []string{"inner"}) {
		t.Fatalf("listed %v, want the renamed directory's names", names(got))
	}
}

// OpenFile opens only a regular file, never a FIFO (without blocking), a link or a
// directory, and only the file the caller inspected when it names one.
func TestOpenFileChecks(t *testing.T) {
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "f"), []byte("first"), 0o644))
	must(t, unix.Mkfifo(filepath.Join(dir, "fifo"), 0o644))
	must(t, os.Symlink("f", filepath.Join(dir, "l")))
	must(t, os.Mkdir(filepath.Join(dir, "d"), 0o755))
	d, err := Open(dir)
	must(t, err)
	defer d.Close()
	var st, ost unix.Stat_t
	must(t, d.Lstat("f", &st))
	f, err := d.OpenFile("f", uint64(st.Dev), uint64(st.Ino), &ost)
	must(t, err)
	data, err := io.ReadAll(f)
	f.Close()
	if err != nil || string(data) != "first" {
		t.Fatalf("read %q, %v", data, err)
	}
	for _, n := range []string{"fifo", "l", "d"} {
		if f, err := d.OpenFile(n, 0, 0, &ost); err == nil {
			f.Close()
			t.Errorf("OpenFile(%s) opened it", n)
		}
	}
	// another file renamed over f after the lstat
	must(t, os.WriteFile(filepath.Join(dir, "g"), []byte("other"), 0o644))
	must(t, os.Rename(filepath.Join(dir, "g"), filepath.Join(dir, "f")))
	if f, err := d.OpenFile("f", uint64(st.Dev), uint64(st.Ino), &ost); !errors.Is(err, ErrChanged) {
		if f != nil {
			f.Close()
		}
		t.Fatalf("OpenFile of a swapped file = %v, want ErrChanged", err)
	}
	if l, err := d.Readlink("l"); err != nil || l != "f" {
		t.Fatalf("Readlink = %q, %v", l, err)
	}
}

// OpenRoot holds its own descriptor of the root's directory.
func TestOpenRoot(t *testing.T) {
	dir := t.TempDir()
	must(t, os.WriteFile(filepath.Join(dir, "f"), nil, 0o644))
	root, err := os.OpenRoot(dir)
	must(t, err)
	d, err := OpenRoot(root)
	must(t, err)
	defer d.Close()
	root.Close()
	got, err := d.ReadAll(make([]byte, 4096), nil)
	must(t, err)
	if !slices.Equal(names(got), []string{"f"}) {
		t.Fatalf("listed %v", names(got))
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
