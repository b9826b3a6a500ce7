package cmd

import (
	"bytes"
	"io"
	"os"
	"strconv"

	"github.com/charmbracelet/x/term"
	"github.com/mattn/go-isatty"
)

// IOStreams are the standard streams of one command run, with what is known about the
// terminal. Commands never touch os.Stdin/os.Stdout directly, so every command runs in
// tests against buffers (Test) exactly as it runs at a terminal.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer

	// StdoutTTY says whether Out is a terminal (aligned tables, headers, default -o table).
	StdoutTTY bool
	// StderrTTY says whether ErrOut is a terminal.
	StderrTTY bool

	// width reports the terminal's width in columns (0: unknown); nil: 0.
	width func() int
}

// TerminalWidth is the width tables fit on a terminal stdout: COLUMNS when it is a
// positive number (shells set it; tests use it), else the terminal's own width, else 80.
// It is 0 when stdout is not a terminal: piped output is never cut.
func (s *IOStreams) TerminalWidth() int {
	if !s.StdoutTTY || s.width == nil {
		return 0
	}
	return s.width()
}

// System returns the process's streams. Terminal detection is one ioctl per stream; it
// never queries the terminal itself. SHAREDOS_FORCE_TTY=1 makes stdout count as a
// terminal (for tests and for tools that capture a "terminal" session).
func System(env func(string) string) *IOStreams {
	ios := &IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr}
	ios.StdoutTTY = isTerminal(os.Stdout)
	ios.StderrTTY = isTerminal(os.Stderr)
	if env("SHAREDOS_FORCE_TTY") == "1" {
		ios.StdoutTTY = true
	}
	ios.width = func() int {
		if n, err := strconv.Atoi(env("COLUMNS")); err == nil && n > 0 {
			return n
		}
		if w, _, err := term.GetSize(os.Stdout.Fd()); err == nil && w > 0 {
			return w
		}
		return 80
	}
	return ios
}

func isTerminal(f *os.File) bool {
	fd := f.Fd()
	return isatty.IsTerminal(fd) || isatty.IsCygwinTerminal(fd)
}

// Test returns streams over buffers: stdin, stdout and stderr, not terminals.
func Test() (*IOStreams, *bytes.Buffer, *bytes.Buffer, *bytes.Buffer) {
	in, out, errOut := &bytes.Buffer{}, &bytes.Buffer{}, &bytes.Buffer{}
	return &IOStreams{In: in, Out: out, ErrOut: errOut}, in, out, errOut
}

// ColorEnabled applies the colour conventions: NO_COLOR (non-empty) turns colour off;
// otherwise CLICOLOR_FORCE (non-empty, not "0") turns it on; otherwise CLICOLOR=0 turns
// it off; otherwise colour is used only when stdout is a terminal.
func (s *IOStreams) ColorEnabled(env func(string) string) bool {
	if env("NO_COLOR") != "" {
		return false
	}
	if f := env("CLICOLOR_FORCE"); f != "" && f != "0" {
		return true
	}
	if env("CLICOLOR") == "0" {
		return false
	}
	return s.StdoutTTY
}
