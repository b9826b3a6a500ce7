package repoplane

import (
	"bytes"
	"fmt"
	"strings"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/unicode"
	"golang.org/x/text/encoding/unicode/utf32"
)

// This file is git's convert_to_git for the conversions git builds in, applied as
// data in git's order: working-tree-encoding (encode_to_git), end-of-line (eol.go,
// crlf_to_git), then ident (ident_to_git). A clean filter, which git runs first, is
// never run: a path whose attributes name one is not hashed into the index at all
// (see filterOf).

// errConversion is a working-tree file git could not convert either: staging it is
// refused (code encoding_unsupported), never stored raw.
type errConversion struct{ path, msg string }

func (e errConversion) Error() string { return e.path + ": " + e.msg }

// convertToGit turns working-tree content into what git stores for path.
func (r *repo) convertToGit(path string, data []byte) ([]byte, error) {
	action, at := r.conversion(path)
	if enc := wtEncoding(at.wtEncoding); enc != "" && len(data) > 0 {
		var err error
		if data, err = decodeWorkingTree(data, enc); err != nil {
			return nil, errConversion{path, err.Error()}
		}
	}
	data = toGit(data, action, r.indexHasCRLF(path))
	if at.ident.isTrue() {
		data = identToGit(data)
	}
	return data, nil
}

// needsFullRead reports whether the content of path must be converted as a whole
// (anything beyond hashing the bytes as they are).
func needsFullRead(action crlfAction, at fileAttrs) bool {
	return action != crlfBinary || at.ident.isTrue() || wtEncoding(at.wtEncoding) != ""
}

// wtEncoding is git's git_path_check_encoding: the working-tree-encoding value, ""
// when unspecified, set without a value, unset, or UTF-8 itself. (git dies on
// "working-tree-encoding" set without a value; here it is taken as unspecified.)
func wtEncoding(s attrState) string {
	if !s.set || s.unset || s.value == "" || isUTF8Name(s.value) {
		return ""
	}
	return s.value
}

func isUTF8Name(s string) bool {
	return strings.EqualFold(s, "UTF-8") || strings.EqualFold(s, "UTF8")
}

// decodeWorkingTree converts data from enc to UTF-8 as git's encode_to_git does with
// iconv: UTF-16/UTF-32 need a byte order mark, their LE/BE forms must not have one;
// an unknown encoding or bytes that are not valid in it are an error (never replaced).
func decodeWorkingTree(data []byte, enc string) ([]byte, error) {
	name := strings.ToUpper(strings.ReplaceAll(enc, "_", "-"))
	var e encoding.Encoding
	bom := func(le, be []byte) bool { return bytes.HasPrefix(data, le) || bytes.HasPrefix(data, be) }
	bom16 := bom([]byte{0xff, 0xfe}, []byte{0xfe, 0xff})
	bom32 := bom([]byte{0xff, 0xfe, 0, 0}, []byte{0, 0, 0xfe, 0xff})
	switch name {
	case "UTF-16", "UTF16":
		if !bom16 {
			return nil, fmt.Errorf("the working-tree-encoding %s needs a byte order mark, and the file has none", enc)
		}
		// iconv takes the byte order from the mark and drops it
		e = unicode.UTF16(unicode.BigEndian, unicode.IgnoreBOM)
		if data[0] == 0xff {
			e = unicode.UTF16(unicode.LittleEndian, unicode.IgnoreBOM)
		}
		data = data[2:]
	case "UTF-16LE", "UTF-16BE", "UTF16LE", "UTF16BE":
		if bom16 {
			return nil, fmt.Errorf("the working-tree-encoding %s prohibits a byte order mark, and the file has one", enc)
		}
		e = unicode.UTF16(unicode.LittleEndian, unicode.IgnoreBOM)
		if strings.HasSuffix(name, "BE") {
			e = unicode.UTF16(unicode.BigEndian, unicode.IgnoreBOM)
		}
	case "UTF-32", "UTF32":
		if !bom32 {
			return nil, fmt.Errorf("the working-tree-encoding %s needs a byte order mark, and the file has none", enc)
		}
		e = utf32.UTF32(utf32.BigEndian, utf32.IgnoreBOM)
		if data[0] == 0xff {
			e = utf32.UTF32(utf32.LittleEndian, utf32.IgnoreBOM)
		}
		data = data[4:]
	case "UTF-32LE", "UTF-32BE", "UTF32LE", "UTF32BE":
		if bom32 {
			return nil, fmt.Errorf("the working-tree-encoding %s prohibits a byte order mark, and the file has one", enc)
		}
		e = utf32.UTF32(utf32.LittleEndian, utf32.IgnoreBOM)
		if strings.HasSuffix(name, "BE") {
			e = utf32.UTF32(utf32.BigEndian, utf32.IgnoreBOM)
		}
	default:
		if e = encodingByName(enc); e == nil {
			return nil, fmt.Errorf("the working-tree-encoding %s is not one sharedos can convert", enc)
		}
	}
	out, err := e.NewDecoder().Bytes(data)
	if err != nil {
		return nil, fmt.Errorf("the file is not valid %s", enc)
	}
	// the decoders replace invalid input with U+FFFD; iconv fails instead, and so
	// does this: the text must come back to the very same bytes
	back, err := e.NewEncoder().Bytes(out)
	if err != nil || !bytes.Equal(back, data) {
		return nil, fmt.Errorf("the file is not valid %s", enc)
	}
	return out, nil
}

// identToGit is git's ident_to_git: every "$Id: …$" (no line break inside) becomes
// "$Id$"; nothing is expanded.
func identToGit(src []byte) []byte {
	if !bytes.Contains(src, []byte("$Id")) {
		return src
	}
	var dst []byte
	for {
		dollar := bytes.IndexByte(src, '$')
		if dollar < 0 {
			break
		}
		dst = append(dst, src[:dollar+1]...)
		src = src[dollar+1:]
		if len(src) > 3 && bytes.HasPrefix(src, []byte("Id:")) {
			end := bytes.IndexByte(src[3:], '$')
			if end < 0 {
				break
			}
			if bytes.IndexByte(src[3:3+end], '\n') >= 0 {
				continue // a line break before the next dollar
			}
			dst = append(dst, "Id$"...)
			src = src[3+end+1:]
		}
	}
	return append(dst, src...)
}

// filterOf is the filter driver named by path's attributes ("" when none). git would run
// the driver's clean command to hash the file; sharedos never runs a program, so such a
// path is reported (filter in status and diff), left alone by directory staging
// (skipped) and refused when named (filter_required), and its stat-only changes are
// judged as the walk's comment in checkEntry says.
func (r *repo) filterOf(path string) string {
	at := r.attributes().lookup(path)
	if !at.filter.set || at.filter.unset {
		return ""
	}
	return at.filter.value
}
