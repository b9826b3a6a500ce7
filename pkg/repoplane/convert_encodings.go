package repoplane

import (
	"errors"
	"strings"

	"golang.org/x/text/encoding"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/encoding/japanese"
	"golang.org/x/text/encoding/korean"
	"golang.org/x/text/encoding/simplifiedchinese"
	"golang.org/x/text/encoding/traditionalchinese"
	"golang.org/x/text/encoding/unicode"
	"golang.org/x/text/transform"
)

// encodingByName is the working-tree-encoding names sharedos converts (issue 28): every
// name, matched without regard to case or surrounding space, that x/text's IANA index and
// then its WHATWG (HTML) index resolved to an encoding sharedos could decode — the
// lookup decodeWorkingTree made before. The indexes themselves are no longer linked:
// their init built two maps of about 1,000 names in every sharedos process (a package
// init runs whether or not a command converts anything), where this switch costs
// nothing until it is called.
//
// The accepted encodings: US-ASCII, UTF-8, UTF-16 (BE with a byte order mark honoured,
// BE, LE), the ISO 8859 family (1-10, 13-16, and the 6/8 E and I forms), KOI8-R, KOI8-U,
// Macintosh, Macintosh Cyrillic, Windows 874 and 1250-1258, IBM code pages 037, 437,
// 850, 852, 855, 858, 860, 862, 863, 865, 866, 1047 and 1140, EUC-JP, ISO-2022-JP,
// Shift JIS, EUC-KR, GBK, GB18030, HZ-GB2312, Big5, x-user-defined and WHATWG's
// "replacement" (which no non-empty file survives: it is a refusal by another name).
// Any other name, including the ~640 IANA names x/text knows but cannot convert, is nil
// (decodeWorkingTree refuses it, encoding_unsupported). The table was generated once
// from x/text v0.44.0's two indexes; TestEncodingNamesResolveAsTheIndexesDid checks
// every name against testdata/encoding-names.txt (generated from the indexes at the
// same time) and against the indexes themselves, which only that test links.
func encodingByName(name string) encoding.Encoding {
	switch strings.ToLower(strings.TrimSpace(name)) {
	case "cp037", "csibm037", "ebcdic-cp-ca", "ebcdic-cp-nl", "ebcdic-cp-us", "ebcdic-cp-wt",
		"ibm037":
		return charmap.CodePage037
	case "csibm1047", "ibm-1047", "ibm1047":
		return charmap.CodePage1047
	case "ccsid01140", "cp01140", "csibm01140", "ebcdic-us-37+euro", "ibm01140":
		return charmap.CodePage1140
	case "437", "cp437", "cspc8codepage437", "ibm437":
		return charmap.CodePage437
	case "850", "cp850", "cspc850multilingual", "ibm850":
		return charmap.CodePage850
	case "852", "cp852", "cspcp852", "ibm852":
		return charmap.CodePage852
	case "855", "cp855", "csibm855", "ibm855":
		return charmap.CodePage855
	case "ccsid00858", "cp00858", "csibm00858", "ibm00858", "pc-multilingual-850+euro":
		return charmap.CodePage858
	case "860", "cp860", "csibm860", "ibm860":
		return charmap.CodePage860
	case "862", "cp862", "cspc862latinhebrew", "ibm862":
		return charmap.CodePage862
	case "863", "cp863", "csibm863", "ibm863":
		return charmap.CodePage863
	case "865", "cp865", "csibm865", "ibm865":
		return charmap.CodePage865
	case "866", "cp866", "csibm866", "ibm866":
		return charmap.CodePage866
	case "cp819", "csisolatin1", "ibm819", "iso-8859-1", "iso-ir-100", "iso_8859-1",
		"iso_8859-1:1987", "l1", "latin1":
		return charmap.ISO8859_1
	case "csisolatin6", "iso-8859-10", "iso-ir-157", "iso8859-10", "iso885910",
		"iso_8859-10:1992", "l6", "latin6":
		return charmap.ISO8859_10
	case "csiso885913", "iso-8859-13", "iso8859-13", "iso885913":
		return charmap.ISO8859_13
	case "csiso885914", "iso-8859-14", "iso-celtic", "iso-ir-199", "iso8859-14", "iso885914",
		"iso_8859-14", "iso_8859-14:1998", "l8", "latin8":
		return charmap.ISO8859_14
	case "csiso885915", "csisolatin9", "iso-8859-15", "iso8859-15", "iso885915", "iso_8859-15",
		"l9", "latin-9":
		return charmap.ISO8859_15
	case "csiso885916", "iso-8859-16", "iso-ir-226", "iso_8859-16", "iso_8859-16:2001", "l10",
		"latin10":
		return charmap.ISO8859_16
	case "csisolatin2", "iso-8859-2", "iso-ir-101", "iso8859-2", "iso88592", "iso_8859-2",
		"iso_8859-2:1987", "l2", "latin2":
		return charmap.ISO8859_2
	case "csisolatin3", "iso-8859-3", "iso-ir-109", "iso8859-3", "iso88593", "iso_8859-3",
		"iso_8859-3:1988", "l3", "latin3":
		return charmap.ISO8859_3
	case "csisolatin4", "iso-8859-4", "iso-ir-110", "iso8859-4", "iso88594", "iso_8859-4",
		"iso_8859-4:1988", "l4", "latin4":
		return charmap.ISO8859_4
	case "csisolatincyrillic", "cyrillic", "iso-8859-5", "iso-ir-144", "iso8859-5", "iso88595",
		"iso_8859-5", "iso_8859-5:1988":
		return charmap.ISO8859_5
	case "arabic", "asmo-708", "csisolatinarabic", "ecma-114", "iso-8859-6", "iso-ir-127",
		"iso8859-6", "iso88596", "iso_8859-6", "iso_8859-6:1987":
		return charmap.ISO8859_6
	case "csiso88596e", "iso-8859-6-e", "iso_8859-6-e":
		return charmap.ISO8859_6E
	case "csiso88596i", "iso-8859-6-i", "iso_8859-6-i":
		return charmap.ISO8859_6I
	case "csisolatingreek", "ecma-118", "elot_928", "greek", "greek8", "iso-8859-7",
		"iso-ir-126", "iso8859-7", "iso88597", "iso_8859-7", "iso_8859-7:1987",
		"sun_eu_greek":
		return charmap.ISO8859_7
	case "csisolatinhebrew", "hebrew", "iso-8859-8", "iso-ir-138", "iso8859-8", "iso88598",
		"iso_8859-8", "iso_8859-8:1988", "visual":
		return charmap.ISO8859_8
	case "csiso88598e", "iso-8859-8-e", "iso_8859-8-e":
		return charmap.ISO8859_8E
	case "csiso88598i", "iso-8859-8-i", "iso_8859-8-i", "logical":
		return charmap.ISO8859_8I
	case "csisolatin5", "iso-8859-9", "iso-ir-148", "iso_8859-9", "iso_8859-9:1989", "l5",
		"latin5":
		return charmap.ISO8859_9
	case "cskoi8r", "koi", "koi8", "koi8-r", "koi8_r":
		return charmap.KOI8R
	case "cskoi8u", "koi8-ru", "koi8-u":
		return charmap.KOI8U
	case "csmacintosh", "mac", "macintosh", "x-mac-roman":
		return charmap.Macintosh
	case "x-mac-cyrillic", "x-mac-ukrainian":
		return charmap.MacintoshCyrillic
	case "cp1250", "cswindows1250", "windows-1250", "x-cp1250":
		return charmap.Windows1250
	case "cp1251", "cswindows1251", "windows-1251", "x-cp1251":
		return charmap.Windows1251
	case "ascii", "cp1252", "cswindows1252", "iso8859-1", "iso88591", "windows-1252",
		"x-cp1252":
		return charmap.Windows1252
	case "cp1253", "cswindows1253", "windows-1253", "x-cp1253":
		return charmap.Windows1253
	case "cp1254", "cswindows1254", "iso8859-9", "iso88599", "windows-1254", "x-cp1254":
		return charmap.Windows1254
	case "cp1255", "cswindows1255", "windows-1255", "x-cp1255":
		return charmap.Windows1255
	case "cp1256", "cswindows1256", "windows-1256", "x-cp1256":
		return charmap.Windows1256
	case "cp1257", "cswindows1257", "windows-1257", "x-cp1257":
		return charmap.Windows1257
	case "cp1258", "cswindows1258", "windows-1258", "x-cp1258":
		return charmap.Windows1258
	case "cswindows874", "dos-874", "iso-8859-11", "iso8859-11", "iso885911", "tis-620",
		"windows-874":
		return charmap.Windows874
	case "x-user-defined":
		return charmap.XUserDefined
	case "csiso2022kr", "iso-2022-cn", "iso-2022-cn-ext", "iso-2022-kr", "replacement":
		return encoding.Replacement
	case "cseucpkdfmtjapanese", "euc-jp", "extended_unix_code_packed_format_for_japanese",
		"x-euc-jp":
		return japanese.EUCJP
	case "csiso2022jp", "iso-2022-jp":
		return japanese.ISO2022JP
	case "csshiftjis", "ms932", "ms_kanji", "shift-jis", "shift_jis", "sjis", "windows-31j",
		"x-sjis":
		return japanese.ShiftJIS
	case "cseuckr", "csksc56011987", "euc-kr", "iso-ir-149", "korean", "ks_c_5601-1987",
		"ks_c_5601-1989", "ksc5601", "ksc_5601", "windows-949":
		return korean.EUCKR
	case "csgb18030", "gb18030":
		return simplifiedchinese.GB18030
	case "chinese", "cp936", "csgb2312", "csgbk", "csiso58gb231280", "gb2312", "gb_2312",
		"gb_2312-80", "gbk", "iso-ir-58", "ms936", "windows-936", "x-gbk":
		return simplifiedchinese.GBK
	case "hz-gb-2312":
		return simplifiedchinese.HZGB2312
	case "big5", "big5-hkscs", "cn-big5", "csbig5", "x-x-big5":
		return traditionalchinese.Big5
	case "csutf16be", "unicodefffe", "utf-16be":
		return unicode.UTF16(unicode.BigEndian, unicode.IgnoreBOM)
	case "csutf16", "utf-16":
		return unicode.UTF16(unicode.BigEndian, unicode.UseBOM)
	case "csunicode", "csutf16le", "iso-10646-ucs-2", "ucs-2", "unicode", "unicodefeff",
		"utf-16le":
		return unicode.UTF16(unicode.LittleEndian, unicode.IgnoreBOM)
	case "csutf8", "unicode-1-1-utf-8", "unicode11utf8", "unicode20utf8", "utf-8", "utf8",
		"x-unicode20utf8":
		return unicode.UTF8
	case "ansi_x3.4-1968", "ansi_x3.4-1986", "cp367", "csascii", "ibm367", "iso-ir-6",
		"iso646-us", "iso_646.irv:1991", "us", "us-ascii":
		return usASCII
	}
	return nil
}

// usASCII is US-ASCII as x/text's IANA index had it (an encoding of its own package):
// bytes 0-127 as they are; any other byte is not ASCII, and converting it fails.
var usASCII encoding.Encoding = asciiEncoding{}

type asciiEncoding struct{}

func (asciiEncoding) NewDecoder() *encoding.Decoder {
	return &encoding.Decoder{Transformer: asciiTransformer{}}
}

func (asciiEncoding) NewEncoder() *encoding.Encoder {
	return &encoding.Encoder{Transformer: asciiTransformer{}}
}

func (asciiEncoding) String() string { return "US-ASCII" }

// errNotASCII is a byte above 127 in US-ASCII text (the message is never shown:
// decodeWorkingTree says the file is not valid in the encoding).
var errNotASCII = errors.New("a byte outside US-ASCII")

type asciiTransformer struct{ transform.NopResetter }

// Transform copies ASCII bytes and stops at the first byte that is not ASCII. x/text's
// decoder wrote U+FFFD for it, which its encoder then refused: either way the file is
// refused, as iconv refuses it.
func (asciiTransformer) Transform(dst, src []byte, atEOF bool) (nDst, nSrc int, err error) {
	for nSrc < len(src) {
		c := src[nSrc]
		if c > 0x7f {
			return nDst, nSrc, errNotASCII
		}
		if nDst >= len(dst) {
			return nDst, nSrc, transform.ErrShortDst
		}
		dst[nDst] = c
		nDst++
		nSrc++
	}
	return nDst, nSrc, nil
}
