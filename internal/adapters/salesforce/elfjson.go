package salesforce

import (
	"maps"
	"slices"

	"github.com/sf2loki/sf2loki/internal/adapters/jsonstr"
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
		dst = jsonstr.Append(dst, k)
		dst = append(dst, ':')
		dst = jsonstr.Append(dst, v)
	}
	return append(dst, '}')
}
