package pubsub

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/hamba/avro/v2"
)

// Change events over the Pub/Sub API name the fields a change touched in
// bitmaps, not names: the ChangeEventHeader's changedFields, nulledFields
// and diffFields are lists of strings whose first element may be a
// hexadecimal bitmap over the positions of the event schema's top-level
// fields ("0x650004E0": bit i set, counting from the least significant,
// names the field at position i), and whose further elements are
// "<position>-<bitmap>" over the nested fields of the compound field at
// that position ("4-0x10": BillingAddress's field at position 4). See
// Salesforce's Pub/Sub API documentation, "Event Deserialization
// Considerations" and "Differences Between Change Events Received with
// Streaming API vs. Pub/Sub API". The source writes the names instead,
// compound fields as Parent.Child, so that a line reads as it does over
// the Streaming API.

// bitmapFields are the ChangeEventHeader fields that hold bitmaps.
var bitmapFields = [...]string{"changedFields", "nulledFields", "diffFields"}

// errBitmap is a bitmap list the schema does not decode: it is shipped
// as it came, and counted.
var errBitmap = errors.New("salesforce pubsub: a ChangeEventHeader field bitmap does not decode")

// fieldNames are an event schema's top-level field names by position, and
// the nested field names of each compound (record) field.
type fieldNames struct {
	top    []string
	nested [][]string // by top-level position; nil where the field is not a record
	// lists are the header's bitmap fields whose schema is an array of
	// strings, the only ones decoded (the fast path writes no other as
	// names either).
	lists map[string]bool
}

// newFieldNames reads the names from a change event schema; nil when the
// schema is not a record with a ChangeEventHeader.
func newFieldNames(schema avro.Schema) *fieldNames {
	rec, ok := schema.(*avro.RecordSchema)
	if !ok {
		return nil
	}
	f := &fieldNames{lists: map[string]bool{}}
	header := false
	for _, fd := range rec.Fields() {
		f.top = append(f.top, fd.Name())
		if fd.Name() == "ChangeEventHeader" {
			header = true
			if h := recordOf(fd.Type()); h != nil {
				for _, hf := range h.Fields() {
					if a, ok := hf.Type().(*avro.ArraySchema); ok && a.Items().Type() == avro.String {
						f.lists[hf.Name()] = true
					}
				}
			}
		}
		var names []string
		if r := recordOf(fd.Type()); r != nil {
			for _, nf := range r.Fields() {
				names = append(names, nf.Name())
			}
		}
		f.nested = append(f.nested, names)
	}
	if !header {
		return nil
	}
	return f
}

// recordOf is the record a field holds: itself, through a reference, or
// the one record branch of a union (["null", record]; a person name is
// ["null", "string", Switchable_PersonName], its nested bitmap over the
// record's fields).
func recordOf(s avro.Schema) *avro.RecordSchema {
	switch x := s.(type) {
	case *avro.RecordSchema:
		return x
	case *avro.RefSchema:
		return recordOf(x.Schema())
	case *avro.UnionSchema:
		var out *avro.RecordSchema
		for _, b := range x.Types() {
			if r := recordOf(b); r != nil {
				if out != nil {
					return nil // two records: which one is meant is unknown
				}
				out = r
			}
		}
		return out
	}
	return nil
}

// decode turns one header field's list into field names: the top-level
// bitmap's fields in schema order, then each nested bitmap's as
// Parent.Child. An empty list decodes to an empty one.
func (f *fieldNames) decode(items []string) ([]string, error) {
	out := make([]string, 0, len(items))
	for i, it := range items {
		if i == 0 && strings.HasPrefix(it, "0x") {
			names, err := bitNames(it, f.top)
			if err != nil {
				return nil, err
			}
			out = append(out, names...)
			continue
		}
		pos, bitmap, ok := strings.Cut(it, "-")
		p, err := strconv.Atoi(pos)
		switch {
		case !ok || err != nil || !strings.HasPrefix(bitmap, "0x"):
			return nil, fmt.Errorf("%w: %q is neither a top-level bitmap first (0x…) nor <position>-0x…", errBitmap, it)
		case p < 0 || p >= len(f.top):
			return nil, fmt.Errorf("%w: %q names position %d; the schema has %d top-level fields", errBitmap, it, p, len(f.top))
		case f.nested[p] == nil:
			return nil, fmt.Errorf("%w: %q names %s, which is not a compound field", errBitmap, it, f.top[p])
		}
		names, err := bitNames(bitmap, f.nested[p])
		if err != nil {
			return nil, err
		}
		for _, n := range names {
			out = append(out, f.top[p]+"."+n)
		}
	}
	return out, nil
}

// bitNames names the set bits of a "0x…" bitmap, by position in names.
func bitNames(bitmap string, names []string) ([]string, error) {
	digits := bitmap[2:] // "0x" alone names no field, as Salesforce's own decoder reads it
	var out []string
	for k := range len(digits) { // the last digit holds bits 0-3
		d := digits[len(digits)-1-k]
		v, ok := hexDigit(d)
		if !ok {
			return nil, fmt.Errorf("%w: %q is not hexadecimal", errBitmap, bitmap)
		}
		for b := range 4 {
			if v&(1<<b) == 0 {
				continue
			}
			pos := 4*k + b
			if pos >= len(names) {
				return nil, fmt.Errorf("%w: %q sets bit %d; the record has %d fields", errBitmap, bitmap, pos, len(names))
			}
			out = append(out, names[pos])
		}
	}
	// Bits were read from the lowest: positions ascend within a digit and
	// from one digit to the next, so out is in schema order.
	return out, nil
}

func hexDigit(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// apply decodes the bitmap fields of a generic record's ChangeEventHeader
// in place. A list that does not decode is left as it came; the first
// such error is returned.
func (f *fieldNames) apply(rec map[string]any) error {
	if f == nil {
		return nil
	}
	h, ok := rec["ChangeEventHeader"].(map[string]any)
	if !ok {
		return nil
	}
	var first error
	for _, name := range bitmapFields {
		list, ok := h[name].([]any)
		if !ok || !f.lists[name] {
			continue
		}
		items := make([]string, len(list))
		for i, v := range list {
			if items[i], ok = v.(string); !ok {
				break
			}
		}
		if !ok {
			continue
		}
		names, err := f.decode(items)
		if err != nil {
			if first == nil {
				first = fmt.Errorf("%s: %w", name, err)
			}
			continue
		}
		out := make([]any, len(names))
		for i, n := range names {
			out[i] = n
		}
		h[name] = out
	}
	return first
}
