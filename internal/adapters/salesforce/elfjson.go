package salesforce

import (
	"maps"
	"slices"
	"unicode/utf8"
)

// appendFieldsJSON appends fields as the JSON object json.Marshal makes
// of a map[string]string: keys sorted, strings escaped as encoding/json
// escapes them (HTML characters included). keys holds the previous row's
// keys, sorted; the rows of a file share its header, so they are sorted
// again only when this row's keys differ.
func appendFieldsJSON(dst []byte, fields map[string]string, keys *[]string) []byte {
	if fields == nil {
		return append(dst, "null"...)
	}
	start := len(dst)
	if len(*keys) != len(fields) {
		*keys = slices.Sorted(maps.Keys(fields))
	}
	dst = append(dst, '{')
	for i, k := range *keys {
		v, ok := fields[k]
		if !ok { // another set of columns (a transform renamed one)
			*keys = slices.Sorted(maps.Keys(fields))
			return appendFieldsJSON(dst[:start], fields, keys)
		}
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, k)
		dst = append(dst, ':')
		dst = appendJSONString(dst, v)
	}
	return append(dst, '}')
}

// appendJSONString appends s as a JSON string the way encoding/json does
// with HTML escaping (its default): \\, \", \b, \f, \n, \r and \t escaped
// short, other control characters and <, > and & as \u00XX, invalid UTF-8
// as \ufffd, and U+2028 and U+2029 as \u2028 and \u2029.
func appendJSONString(dst []byte, s string) []byte {
	const hex = "0123456789abcdef"
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		if b := s[i]; b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' && b != '<' && b != '>' && b != '&' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '\\', '"':
				dst = append(dst, '\\', b)
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hex[b>>4], hex[b&0xF])
			}
			i++
			start = i
			continue
		}
		c, size := utf8.DecodeRuneInString(s[i:])
		if c == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if c == '\u2028' || c == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hex[c&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
