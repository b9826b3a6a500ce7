package cmd

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"github.com/pelletier/go-toml/v2"
)

// mcpClientFile is the file `mcp config --write` edits for a client: the project's (in
// the working directory) for Claude Code, Cursor and VS Code, Codex's own under
// $CODEX_HOME (default ~/.codex); "" for generic, which needs --file.
func mcpClientFile(getwd func() (string, error), env func(string) string, client string) (string, error) {
	wd, err := getwd()
	if err != nil {
		return "", err
	}
	switch client {
	case "claude-code":
		return filepath.Join(wd, ".mcp.json"), nil
	case "cursor":
		return filepath.Join(wd, ".cursor", "mcp.json"), nil
	case "vscode":
		return filepath.Join(wd, ".vscode", "mcp.json"), nil
	case "codex":
		if h := env("CODEX_HOME"); h != "" {
			return filepath.Join(h, "config.toml"), nil
		}
		home := env("HOME")
		if home == "" {
			return "", errors.New("HOME is not set")
		}
		return filepath.Join(home, ".codex", "config.toml"), nil
	}
	return "", nil
}

// emitSnippet prints the snippet, or with --write (or --file) puts the server's entry
// into the client's file: inserted, or replacing the entry of the same name, everything
// else kept (TOML byte for byte; JSON's members in their order, re-indented). The file is
// replaced atomically (a temporary file beside it, renamed over it), keeping its mode;
// a file that does not parse is refused and left as it is.
func (opts *MCPConfigOptions) emitSnippet(snippet []byte) error {
	if !opts.Write && opts.File == "" {
		_, err := opts.IO.Out.Write(snippet)
		return err
	}
	path := opts.File
	if path == "" {
		p, err := mcpClientFile(opts.Getwd, opts.Env, opts.Client)
		if err != nil {
			return usageError("pass --file FILE", "--write: %v", err)
		}
		if p == "" {
			return usageError("pass --file FILE naming the client's configuration file", "--write needs --file with --client generic")
		}
		path = p
	} else if abs, err := absPath(path, opts.Getwd); err == nil {
		path = abs
	}
	old, err := os.ReadFile(path)
	exists := err == nil
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return usageError("check the file's permissions", "--write %s: %v", path, unwrapPathErr(err))
	}
	var merged []byte
	replaced := false
	err = nil
	switch {
	case !exists || len(bytes.TrimSpace(old)) == 0:
		merged = snippet
	case opts.Client == "codex":
		merged, replaced, err = mergeTOML(old, snippet, opts.Name)
	default:
		merged, replaced, err = mergeJSON(old, snippet, opts.Name)
	}
	if err != nil {
		return usageError("fix the file, or pass --file FILE for another one; it was not changed", "--write %s: %v", path, err)
	}
	mode := fs.FileMode(0o600)
	if st, err := os.Stat(path); err == nil {
		mode = st.Mode().Perm()
	}
	if err := writeConfigAtomic(path, merged, mode); err != nil {
		return &ExitError{ExitCode: ExitCommandFailed, ErrorCode: CodeInternalError, Message: fmt.Sprintf("--write %s: %v", path, err), Err: err}
	}
	verb := "added"
	if replaced {
		verb = "replaced"
	}
	fmt.Fprintf(opts.IO.ErrOut, "# %s the %s entry of %s\n", verb, opts.Name, path)
	return nil
}

// writeConfigAtomic writes data to a temporary file in path's folder (made if missing) and
// renames it over path: a reader sees the old file or the new one, never a part.
func writeConfigAtomic(path string, data []byte, mode fs.FileMode) error {
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// member is one member of a JSON object, in document order.
type member struct {
	key string
	val json.RawMessage
}

// orderedObject decodes a JSON object into its members in order.
func orderedObject(data []byte) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	if d, ok := tok.(json.Delim); !ok || d != '{' {
		return nil, errors.New("not a JSON object")
	}
	var out []member
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var val json.RawMessage
		if err := dec.Decode(&val); err != nil {
			return nil, err
		}
		out = append(out, member{key: tok.(string), val: val})
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err == nil {
		return nil, errors.New("more than one JSON value")
	}
	return out, nil
}

func encodeObject(ms []member) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, m := range ms {
		if i > 0 {
			b.WriteByte(',')
		}
		k, _ := json.Marshal(m.key)
		b.Write(k)
		b.WriteByte(':')
		b.Write(m.val)
	}
	b.WriteByte('}')
	return b.Bytes()
}

// mergeJSON puts the snippet's one server (under its one top-level key, mcpServers or
// servers) into old: replacing the member of that name, else appended.
func mergeJSON(old, snippet []byte, name string) ([]byte, bool, error) {
	top, err := orderedObject(old)
	if err != nil {
		return nil, false, fmt.Errorf("not a JSON object: %v", err)
	}
	snip, err := orderedObject(snippet)
	if err != nil || len(snip) != 1 {
		return nil, false, fmt.Errorf("internal: snippet %s", snippet)
	}
	key := snip[0].key
	entry, err := orderedObject(snip[0].val)
	if err != nil || len(entry) != 1 {
		return nil, false, fmt.Errorf("internal: snippet %s", snippet)
	}
	replaced, found := false, false
	for i := range top {
		if top[i].key != key {
			continue
		}
		found = true
		servers, err := orderedObject(top[i].val)
		if err != nil {
			return nil, false, fmt.Errorf("%s is not a JSON object", key)
		}
		for j := range servers {
			if servers[j].key == name {
				servers[j].val, replaced = entry[0].val, true
			}
		}
		if !replaced {
			servers = append(servers, entry[0])
		}
		top[i].val = encodeObject(servers)
	}
	if !found {
		top = append(top, snip[0])
	}
	var compact, out bytes.Buffer
	if err := json.Compact(&compact, encodeObject(top)); err != nil {
		return nil, false, err
	}
	if err := json.Indent(&out, compact.Bytes(), "", "  "); err != nil {
		return nil, false, err
	}
	out.WriteByte('\n')
	return out.Bytes(), replaced, nil
}

// tomlHeader matches a table header line.
var tomlHeader = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`^\s*\[\[?\s*([^\]]+?)\s*\]\]?\s*(#.*)?$`) }) // compiled on first use

// mergeTOML removes the [mcp_servers.NAME] table (and its sub-tables) from old, byte for
// byte around it, and appends the snippet; the result must parse.
func mergeTOML(old, snippet []byte, name string) ([]byte, bool, error) {
	var probe map[string]any
	if err := toml.Unmarshal(old, &probe); err != nil {
		return nil, false, fmt.Errorf("not valid TOML: %v", err)
	}
	want := map[string]bool{"mcp_servers." + tomlKey(name): true, "mcp_servers." + tomlString(name): true,
		"mcp_servers." + name: true}
	ours := func(h string) bool {
		h = strings.Join(strings.Fields(h), "")
		for w := range want {
			if h == w || strings.HasPrefix(h, w+".") {
				return true
			}
		}
		return false
	}
	lines := strings.SplitAfter(string(old), "\n")
	var keep []string
	in, replaced := false, false
	for _, l := range lines {
		if m := tomlHeader().FindStringSubmatch(strings.TrimRight(l, "\r\n")); m != nil {
			in = ours(m[1])
			replaced = replaced || in
		}
		if !in {
			keep = append(keep, l)
		}
	}
	out := strings.Join(keep, "")
	if out != "" && !strings.HasSuffix(out, "\n") {
		out += "\n"
	}
	if out != "" && !strings.HasSuffix(out, "\n\n") {
		out += "\n"
	}
	out += string(snippet)
	if err := toml.Unmarshal([]byte(out), &probe); err != nil {
		return nil, false, fmt.Errorf("the file would not parse with the entry (%v); an mcp_servers.%s key outside its table?", err, name)
	}
	return []byte(out), replaced, nil
}
