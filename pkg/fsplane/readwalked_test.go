package fsplane

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// TestReadWalkedRefusesWhatIsNoLongerAFile is the swap after the listing: the walker
// saw regular files, and by the time a worker opens them (first read and the rest, see
// binaryProbe) each name holds something else. A FIFO with a writer holding data, a
// link to a file outside, a directory and a file over the limit are all skipped without
// reading a byte; a regular file is read whole, a binary one is skipped after its first
// binaryProbe bytes.
func TestReadWalkedRefusesWhatIsNoLongerAFile(t *testing.T) {
	t.Parallel()
	base := t.TempDir()
	dir := filepath.Join(base, "root")
	outside := filepath.Join(base, "outside.txt")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Mkdir(dir, 0o755))
	must(os.WriteFile(outside, []byte("secret\n"), 0o644))
	must(os.Symlink(outside, filepath.Join(dir, "link")))
	must(os.Mkdir(filepath.Join(dir, "sub"), 0o755))
	big := strings.Repeat("text\n", 2*binaryProbe/5) + "end\n"
	must(os.WriteFile(filepath.Join(dir, "big.txt"), []byte(big), 0o644))
	must(os.WriteFile(filepath.Join(dir, "bin.dat"), []byte("\x00"+big), 0o644))
	if err := syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	// a writer holding data in the FIFO: opening and reading it would return "ships"
	w, err := os.OpenFile(filepath.Join(dir, "fifo"), os.O_RDWR, 0)
	must(err)
	defer w.Close()
	_, err = w.Write([]byte("ships\n"))
	must(err)

	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	must(err)
	d := newSharedDir(fd)
	defer d.release()
	read := func(name string, limit int64, skipBinary bool) (string, bool) {
		b, ok := readWalked(walkEntry{dir: d, name: name}, nil, limit, skipBinary)
		return string(b), ok
	}
	for _, name := range []string{"fifo", "link", "sub", "missing"} {
		for _, skip := range []bool{false, true} {
			if b, ok := read(name, MaxGrepFileBytes, skip); ok || b != "" {
				t.Errorf("%s (skipBinary %v) read: ok=%v %q", name, skip, ok, b)
			}
		}
	}
	if b, ok := read("big.txt", int64(len(big)-1), true); ok || b != "" {
		t.Errorf("file over the limit read: ok=%v, %d bytes", ok, len(b))
	}
	for _, skip := range []bool{false, true} {
		if b, ok := read("big.txt", MaxGrepFileBytes, skip); !ok || b != big {
			t.Errorf("big.txt (skipBinary %v): ok=%v, %d bytes of %d", skip, ok, len(b), len(big))
		}
	}
	if b, ok := read("bin.dat", MaxGrepFileBytes, true); ok || b != "" {
		t.Errorf("binary file read with skipBinary: ok=%v, %d bytes", ok, len(b))
	}
	if b, ok := read("bin.dat", MaxGrepFileBytes, false); !ok || len(b) != len(big)+1 {
		t.Errorf("binary file without skipBinary: ok=%v, %d bytes", ok, len(b))
	}
}
