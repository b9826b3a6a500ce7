package fsplane

import (
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"testing"

	"golang.org/x/sys/unix"
)

// Layout of struct linux_dirent64, for building records by hand:
// u64 d_ino; s64 d_off; u16 d_reclen; u8 d_type; char d_name[] (NUL-terminated).
const (
	direntInoOff    = 0
	direntReclenOff = 16
	direntTypeOff   = 18
	direntNameOff   = 19
)

// direntRecord encodes one linux_dirent64 record (padded to 8 bytes, as the kernel).
func direntRecord(ino uint64, typ byte, name string) []byte {
	n := direntNameOff + len(name) + 1
	n = (n + 7) &^ 7
	b := make([]byte, n)
	binary.NativeEndian.PutUint64(b[direntInoOff:], ino)
	binary.NativeEndian.PutUint16(b[direntReclenOff:], uint16(n))
	b[direntTypeOff] = typ
	copy(b[direntNameOff:], name)
	return b
}

func TestParseDirents(t *testing.T) {
	t.Parallel()
	var buf []byte
	for _, r := range []struct {
		ino  uint64
		typ  byte
		name string
	}{{1, unix.DT_DIR, "."}, {1, unix.DT_DIR, ".."}, {7, unix.DT_REG, "a.txt"}, {0, unix.DT_REG, "deleted"},
		{8, unix.DT_DIR, "sub"}, {9, unix.DT_LNK, "lnk"}, {10, unix.DT_UNKNOWN, "mystery"}, {11, unix.DT_FIFO, "fifo"}} {
		buf = append(buf, direntRecord(r.ino, r.typ, r.name)...)
	}
	got := parseDirents(buf, nil, func(name string) int {
		if name != "mystery" {
			t.Fatalf("classified %q", name)
		}
		return typeFile
	})
	if fmt.Sprint(got) != "[{a.txt 2} {sub 1} {lnk 0} {mystery 2} {fifo 0}]" {
		t.Fatalf("parsed %v", got)
	}
	// A truncated record ends the parse.
	if got := parseDirents(buf[:len(buf)-3], nil, func(string) int { return typeOther }); len(got) != 4 {
		t.Fatalf("truncated buffer: %v", got)
	}
}

// TestReadDirentsMatchesOS lists a real directory through getdents64 and compares with
// os.ReadDir.
func TestReadDirentsMatchesOS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	var want []string
	for i := 0; i < 300; i++ { // more than one 4 KiB getdents buffer
		n := fmt.Sprintf("file-%03d-%s", i, "padding-padding-padding")
		os.WriteFile(filepath.Join(dir, n), nil, 0o644)
		want = append(want, n+":2")
	}
	os.Mkdir(filepath.Join(dir, "d"), 0o755)
	os.Symlink("x", filepath.Join(dir, "l"))
	want = append(want, "d:1", "l:0")
	sort.Strings(want)
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	ents, err := readDirents(fd, make([]byte, 4096))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, fmt.Sprintf("%s:%d", e.name, e.typ))
	}
	sort.Strings(got)
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("readDirents = %v", got)
	}
}

// FuzzParseDirents: any bytes parse without a panic into names that are never empty,
// ".", ".." or hold a NUL; records built from names round-trip.
func FuzzParseDirents(f *testing.F) {
	f.Add([]byte{}, "a")
	f.Add(direntRecord(5, unix.DT_REG, "x"), "b\x00c")
	f.Add(append(direntRecord(5, unix.DT_DIR, "dir"), 1, 2, 3), "")
	f.Fuzz(func(t *testing.T, raw []byte, name string) {
		for _, d := range parseDirents(raw, nil, func(string) int { return typeOther }) {
			if d.name == "" || d.name == "." || d.name == ".." {
				t.Fatalf("parsed name %q", d.name)
			}
			for i := 0; i < len(d.name); i++ {
				if d.name[i] == 0 {
					t.Fatalf("name with NUL %q", d.name)
				}
			}
		}
		if name == "" || name == "." || name == ".." || len(name) > 255 {
			return
		}
		for i := 0; i < len(name); i++ {
			if name[i] == 0 || name[i] == '/' {
				return
			}
		}
		got := parseDirents(direntRecord(3, unix.DT_REG, name), nil, nil)
		if len(got) != 1 || got[0].name != name || got[0].typ != typeFile {
			t.Fatalf("round trip of %q: %v", name, got)
		}
	})
}
