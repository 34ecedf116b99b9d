package pubsub

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"
	"unsafe"

	"github.com/hamba/avro/v2"

	"github.com/sf2loki/sf2loki/internal/adapters/jsonstr"
)

// The fast path: an event schema compiled once into a decoder that reads
// the Avro binary encoding and writes the event's JSON line straight from
// it, byte for byte the line the generic path (decodePayload, plain,
// json.Marshal) writes: keys sorted, strings escaped as encoding/json
// escapes them, unions as their value, bytes in base64, fixed as an array
// of numbers, floats formatted as encoding/json formats them. What time
// and level are read from (the fields eventTime and
// salesforce.RecordLevel look at) is kept as the generic path would
// decode it, in a small record of its own.

// levelFields are the fields salesforce.Level reads.
var levelFields = []string{
	"EXCEPTION_TYPE", "EXCEPTION_MESSAGE", "ERROR_CODE", "ExceptionType", "ErrorCode",
	"STATUS_CODE", "REQUEST_STATUS", "LOGIN_STATUS", "OPERATION_STATUS", "Status",
	"LoginType", "LoginKey", "LoginHistoryId",
}

// maxByteSlice is the longest string or bytes value the generic decoder
// reads (hamba/avro's default Config.MaxByteSliceSize).
const maxByteSlice = 1 << 20

var (
	// errUnsupported is a schema the fast path does not compile.
	errUnsupported = errors.New("not supported by the fast decoder")
	// errFallback is an event the fast path does not write (a NaN or an
	// infinity, which json.Marshal refuses): the generic path decodes it.
	errFallback = errors.New("event left to the generic decoder")
	// errTruncated is a payload that ends inside a value.
	errTruncated = errors.New("avro: payload ends early")
	// errHostile is a block count no payload of this length can hold.
	errHostile = errors.New("avro: block count larger than the payload")
)

type kind uint8

const (
	kNull kind = iota
	kBool
	kInt
	kLong
	kFloat
	kDouble
	kString
	kBytes
	kEnum
	kFixed
	kRecord
	kArray
	kMap
	kUnion
	// kFieldList is a ChangeEventHeader's changedFields, nulledFields or
	// diffFields (an array of strings): written as the field names its
	// bitmaps stand for (bitmap.go).
	kFieldList
)

// node is a compiled schema.
type node struct {
	kind    kind
	symbols []string    // enum
	quoted  [][]byte    // enum: each symbol as a JSON string
	size    int         // fixed
	fields  []field     // record, in schema (wire) order
	order   []int       // record: field indexes in key order
	items   *node       // array items, map values
	union   []*node     // union branches
	minSize int         // the fewest bytes a value takes on the wire
	names   *fieldNames // kFieldList: the schema's field names
}

type field struct {
	key     []byte // `"name":`
	typ     *node
	capture int // slot of a captured field, -1 when not captured
}

// fastDecoder is a compiled event schema.
type fastDecoder struct {
	root *node
	// captured are the top-level fields time and level read, by slot; the
	// slot header (if >= 0) is ChangeEventHeader's commitTimestamp.
	captured []capture
	header   int // -1: the schema has no ChangeEventHeader record
	// changeType is the slot of ChangeEventHeader's changeType, -1 when
	// none.
	changeType int
	slots      int
}

// changeTypeCapture names the captured changeType: no top-level field
// has a dot in its name.
const changeTypeCapture = "ChangeEventHeader.changeType"

type capture struct {
	name string
	typ  *node
}

// compileFast compiles an event schema (numbers' logical types already
// dropped); errUnsupported when the schema has what the fast path does
// not write the generic path's way.
func compileFast(schema avro.Schema, datetimes []string) (*fastDecoder, error) {
	rec, ok := schema.(*avro.RecordSchema)
	if !ok {
		return nil, fmt.Errorf("%w: the event schema is a %s, not a record", errUnsupported, schema.Type())
	}
	c := compiler{inProgress: map[string]bool{}}
	root, err := c.compile(rec)
	if err != nil {
		return nil, err
	}
	d := &fastDecoder{root: root, header: -1, changeType: -1}
	names := newFieldNames(schema)
	wanted := map[string]bool{"EventDate": true, "CreatedDate": true}
	for _, f := range append(slices.Clone(levelFields), datetimes...) {
		wanted[f] = true
	}
	for i, f := range rec.Fields() {
		fd := &root.fields[i]
		switch {
		case f.Name() == "ChangeEventHeader":
			if fd.typ.kind != kRecord {
				return nil, fmt.Errorf("%w: ChangeEventHeader is not a record", errUnsupported)
			}
			hdr, _ := f.Type().(*avro.RecordSchema)
			if hdr == nil { // a reference to a record defined before
				ref, _ := f.Type().(*avro.RefSchema)
				hdr, _ = ref.Schema().(*avro.RecordSchema)
			}
			d.header = -2 // a header without commitTimestamp
			// The header's record node may be shared with another field by
			// reference: give the header its own copy.
			h := *fd.typ
			h.fields = slices.Clone(h.fields)
			fd.typ = &h
			for j, hf := range hdr.Fields() {
				switch {
				case hf.Name() == "commitTimestamp":
					if !scalar(h.fields[j].typ) {
						return nil, fmt.Errorf("%w: commitTimestamp is not a scalar", errUnsupported)
					}
					h.fields[j].capture = d.slots
					d.header = d.slots
					d.captured = append(d.captured, capture{name: "commitTimestamp", typ: h.fields[j].typ})
					d.slots++
				case hf.Name() == "changeType" && scalar(h.fields[j].typ):
					h.fields[j].capture = d.slots
					d.changeType = d.slots
					d.captured = append(d.captured, capture{name: changeTypeCapture, typ: h.fields[j].typ})
					d.slots++
				case slices.Contains(bitmapFields[:], hf.Name()) && names != nil:
					if t := h.fields[j].typ; t.kind == kArray && t.items.kind == kString {
						h.fields[j].typ = &node{kind: kFieldList, items: t.items, minSize: t.minSize, names: names}
					}
				}
			}
		case wanted[f.Name()]:
			if !scalar(fd.typ) {
				return nil, fmt.Errorf("%w: field %s is read for the time or level and is not a scalar", errUnsupported, f.Name())
			}
			fd.capture = d.slots
			d.captured = append(d.captured, capture{name: f.Name(), typ: fd.typ})
			d.slots++
		}
	}
	if d.slots > maxCaptured {
		return nil, fmt.Errorf("%w: more than %d fields read for the time or level", errUnsupported, maxCaptured)
	}
	return d, nil
}

// scalar reports whether n decodes to a single Go value the time and
// level read as the generic path decodes it: a primitive, an enum, or a
// union of those.
func scalar(n *node) bool {
	switch n.kind {
	case kRecord, kArray, kMap, kFixed:
		return false
	case kUnion:
		for _, b := range n.union {
			if !scalar(b) {
				return false
			}
		}
	}
	return true
}

type compiler struct {
	inProgress map[string]bool // records being compiled (recursion)
}

func (c *compiler) compile(s avro.Schema) (*node, error) {
	switch x := s.(type) {
	case *avro.NullSchema:
		return &node{kind: kNull}, nil
	case *avro.PrimitiveSchema:
		if x.Logical() != nil {
			return nil, fmt.Errorf("%w: logical type %s", errUnsupported, x.Logical().Type())
		}
		k, size := map[avro.Type]kind{avro.Boolean: kBool, avro.Int: kInt, avro.Long: kLong, avro.Float: kFloat,
			avro.Double: kDouble, avro.String: kString, avro.Bytes: kBytes}, map[avro.Type]int{avro.Float: 4, avro.Double: 8}
		kd, ok := k[x.Type()]
		if !ok {
			return nil, fmt.Errorf("%w: type %s", errUnsupported, x.Type())
		}
		return &node{kind: kd, minSize: max(1, size[x.Type()])}, nil
	case *avro.EnumSchema:
		n := &node{kind: kEnum, symbols: x.Symbols(), minSize: 1}
		for _, sym := range x.Symbols() {
			n.quoted = append(n.quoted, jsonstr.Append(nil, sym))
		}
		return n, nil
	case *avro.FixedSchema:
		if x.Logical() != nil {
			return nil, fmt.Errorf("%w: fixed with logical type %s", errUnsupported, x.Logical().Type())
		}
		return &node{kind: kFixed, size: x.Size(), minSize: x.Size()}, nil
	case *avro.RecordSchema:
		return c.record(x)
	case *avro.RefSchema:
		return c.compile(x.Schema())
	case *avro.ArraySchema:
		items, err := c.compile(x.Items())
		if err != nil {
			return nil, err
		}
		if items.minSize == 0 {
			return nil, fmt.Errorf("%w: an array of items that take no bytes", errUnsupported)
		}
		return &node{kind: kArray, items: items, minSize: 1}, nil
	case *avro.MapSchema:
		values, err := c.compile(x.Values())
		if err != nil {
			return nil, err
		}
		return &node{kind: kMap, items: values, minSize: 1}, nil
	case *avro.UnionSchema:
		n := &node{kind: kUnion, minSize: 1}
		for _, b := range x.Types() {
			if _, ok := b.(*avro.RefSchema); ok {
				// The generic path leaves such a branch wrapped in
				// {"<name>": …}; only it writes that line.
				return nil, fmt.Errorf("%w: a union branch naming a type defined before", errUnsupported)
			}
			bn, err := c.compile(b)
			if err != nil {
				return nil, err
			}
			n.union = append(n.union, bn)
		}
		return n, nil
	default:
		return nil, fmt.Errorf("%w: type %s", errUnsupported, s.Type())
	}
}

func (c *compiler) record(x *avro.RecordSchema) (*node, error) {
	if c.inProgress[x.FullName()] {
		return nil, fmt.Errorf("%w: recursive record %s", errUnsupported, x.FullName())
	}
	c.inProgress[x.FullName()] = true
	defer delete(c.inProgress, x.FullName())
	n := &node{kind: kRecord}
	names := make([]string, len(x.Fields()))
	for i, f := range x.Fields() {
		t, err := c.compile(f.Type())
		if err != nil {
			return nil, err
		}
		names[i] = f.Name()
		n.fields = append(n.fields, field{key: append(jsonstr.Append(nil, f.Name()), ':'), typ: t, capture: -1})
		n.order = append(n.order, i)
		n.minSize += t.minSize
	}
	slices.SortFunc(n.order, func(a, b int) int { return cmpString(names[a], names[b]) })
	return n, nil
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// reader reads the Avro binary encoding as the generic decoder does.
type reader struct {
	in  []byte
	pos int
}

// readLong reads a zigzag varint of at most 10 bytes.
func (r *reader) readLong() (int64, error) {
	var v uint64
	var s uint
	for range 10 {
		if r.pos >= len(r.in) {
			return 0, errTruncated
		}
		b := r.in[r.pos]
		r.pos++
		v |= uint64(b&0x7f) << s
		if b&0x80 == 0 {
			return int64(v>>1) ^ -int64(v&1), nil //nolint:gosec // zigzag
		}
		s += 7
	}
	return 0, errors.New("avro: long overflow")
}

// readInt reads a zigzag varint of at most 5 bytes into 32 bits.
func (r *reader) readInt() (int32, error) {
	var v uint32
	var s uint
	for range 5 {
		if r.pos >= len(r.in) {
			return 0, errTruncated
		}
		b := r.in[r.pos]
		r.pos++
		v |= uint32(b&0x7f) << s
		if b&0x80 == 0 {
			return int32(v>>1) ^ -int32(v&1), nil //nolint:gosec // zigzag
		}
		s += 7
	}
	return 0, errors.New("avro: int overflow")
}

// readBytes reads a length-prefixed string or bytes value, in place.
func (r *reader) readBytes() ([]byte, error) {
	n, err := r.readLong()
	switch {
	case err != nil:
		return nil, err
	case n < 0:
		return nil, errors.New("avro: negative length")
	case n > maxByteSlice:
		return nil, errors.New("avro: string or bytes longer than 1 MiB")
	case n > int64(len(r.in)-r.pos):
		return nil, errTruncated
	}
	b := r.in[r.pos : r.pos+int(n)]
	r.pos += int(n)
	return b, nil
}

func (r *reader) fixed(n int) ([]byte, error) {
	if n > len(r.in)-r.pos {
		return nil, errTruncated
	}
	b := r.in[r.pos : r.pos+n]
	r.pos += n
	return b, nil
}

// blockCount reads an array or map block's item count (a negative count
// is followed by the block's size in bytes, which is not needed), and
// refuses one the rest of the payload cannot hold at minSize bytes an
// item.
func (r *reader) blockCount(minSize int) (int64, error) {
	n, err := r.readLong()
	if err != nil {
		return 0, err
	}
	if n < 0 {
		if n = -n; n < 0 {
			return 0, errHostile
		}
		if _, err := r.readLong(); err != nil {
			return 0, err
		}
	}
	if n > int64(len(r.in)-r.pos)/int64(minSize) {
		return 0, errHostile
	}
	return n, nil
}

// scalar reads a value of a scalar node as the generic decoder returns it.
func (r *reader) scalar(n *node) (any, error) {
	switch n.kind {
	case kNull:
		return nil, nil
	case kBool:
		b, err := r.fixed(1)
		if err != nil {
			return nil, err
		}
		return b[0] == 1, nil
	case kInt:
		v, err := r.readInt()
		return int(v), err
	case kLong:
		return r.readLong()
	case kFloat:
		b, err := r.fixed(4)
		if err != nil {
			return nil, err
		}
		return math.Float32frombits(binary.LittleEndian.Uint32(b)), nil
	case kDouble:
		b, err := r.fixed(8)
		if err != nil {
			return nil, err
		}
		return math.Float64frombits(binary.LittleEndian.Uint64(b)), nil
	case kString:
		b, err := r.readBytes()
		return string(b), err
	case kBytes:
		b, err := r.readBytes()
		return append([]byte{}, b...), err
	case kEnum:
		i, err := r.readInt()
		if err != nil {
			return nil, err
		}
		return n.symbols[i], nil // in range: the line was written
	case kUnion:
		i, err := r.readInt()
		if err != nil {
			return nil, err
		}
		return r.scalar(n.union[i])
	}
	return nil, fmt.Errorf("%w: not a scalar", errUnsupported)
}

// writer decodes one topic's payloads into their lines. A line is written
// in a buffer the writer keeps, with the values it is reordered from, then
// kept: a line of up to maxPacked bytes is copied after the lines before it
// into a chunk of lineChunk bytes and returned as a string over the chunk,
// so that lines cost neither an allocation each nor the collector a
// pointer each; a longer one gets an allocation of its own. Nothing writes
// over a line once returned, and a chunk lives as long as any of its
// lines. One goroutine uses a writer.
type writer struct {
	reader
	buf   []byte           // the line being written, then the values it is written from
	chunk []byte           // the lines returned so far
	spans []span           // record fields' values in buf, a stack
	ents  []mapEntry       // map entries, a stack
	caps  [maxCaptured]int // captured fields' offsets in the payload
	items []string         // a field list's items
	// bitmapErr is the first field list of the line that did not decode
	// (written as it came).
	bitmapErr error
}

type span struct{ start, end int }

type mapEntry struct {
	key []byte
	val span
}

const (
	// lineChunk is the size of a writer's chunk: a hundred lines of a
	// few hundred bytes, about a FetchResponse.
	lineChunk = 32 << 10
	// maxPacked is the longest line put in a chunk: what a chunk leaves
	// unused at its end, shorter than the line that did not fit, stays
	// under a sixteenth of it.
	maxPacked = lineChunk / 16
	// maxKeptBuf is the largest buffer a writer keeps between lines: an
	// event of a megabyte does not hold its buffer for the topic's life.
	maxKeptBuf = 64 << 10
	// maxKeptStack is the most record fields or map entries a writer
	// keeps room for between lines, for the same reason.
	maxKeptStack = 1 << 10
)

// write writes the line of payload into w's buffer, valid until the next
// write, and returns it with where the captured fields are (trailing
// bytes are ignored, as the generic path ignores them).
func (d *fastDecoder) write(w *writer, payload []byte) (line []byte, p probe, err error) {
	w.in, w.pos, w.spans, w.ents, w.bitmapErr = payload, 0, w.spans[:0], w.ents[:0], nil
	line, err = w.value(w.buf[:0], d.root)
	// The writer outlives the payload: it keeps no reference to it (nor,
	// through it, to the response it arrived in), nor room for a rare
	// event's size.
	w.in = nil
	if w.buf = line[:0]; cap(w.buf) > maxKeptBuf {
		w.buf = nil
	}
	if cap(w.spans) > maxKeptStack {
		w.spans = nil
	}
	if cap(w.ents) > maxKeptStack {
		w.ents = nil
	}
	if err != nil {
		clear(w.ents[:cap(w.ents)]) // a map left part-way keeps its keys
		return nil, probe{}, err
	}
	p.d, p.payload, p.offs, p.bitmapErr = d, payload, w.caps, w.bitmapErr
	return line, p, nil
}

// decode writes the line of payload and keeps it (write, keep).
func (d *fastDecoder) decode(w *writer, payload []byte) (string, probe, error) {
	line, p, err := d.write(w, payload)
	if err != nil {
		return "", probe{}, err
	}
	return w.keep(line), p, nil
}

// keep returns line as a string no one writes over.
func (w *writer) keep(line []byte) string {
	if len(line) > maxPacked {
		return string(line)
	}
	if cap(w.chunk)-len(w.chunk) < len(line) {
		w.chunk = make([]byte, 0, lineChunk)
	}
	start := len(w.chunk)
	w.chunk = append(w.chunk, line...)
	return unsafe.String(unsafe.SliceData(w.chunk[start:]), len(line))
}

// maxCaptured is the most fields a compiled schema captures.
const maxCaptured = 16

// probe reads the captured fields of a payload the fast path wrote.
type probe struct {
	d       *fastDecoder
	payload []byte
	offs    [maxCaptured]int // the captured fields' offsets in payload, by slot
	// bitmapErr is why a ChangeEventHeader field list was written as it
	// came, nil when every one decoded.
	bitmapErr error
}

// changeType is the ChangeEventHeader's changeType, "" when none.
func (p *probe) changeType() string {
	if p.d == nil || p.d.changeType < 0 {
		return ""
	}
	r := reader{in: p.payload, pos: p.offs[p.d.changeType]}
	return r.text(p.d.captured[p.d.changeType].typ)
}

// field is a top-level field time or level reads as the generic path
// decodes it: nil when the schema has no such captured field.
func (p *probe) field(name string) any {
	if name == "ChangeEventHeader" && p.d.header != -1 {
		h := map[string]any{}
		if p.d.header >= 0 {
			h["commitTimestamp"] = p.value(p.d.header)
		}
		return h
	}
	for slot, c := range p.d.captured {
		if c.name == name && slot != p.d.header {
			return p.value(slot)
		}
	}
	return nil
}

// text is fmt.Sprint of a top-level field's value as the generic path
// decodes it, "" when absent or null (what salesforce.RecordLevel hands
// salesforce.Level), without boxing the value.
func (p *probe) text(name string) string {
	if name == "ChangeEventHeader" && p.d.header != -1 {
		return fmt.Sprint(p.field(name))
	}
	for slot, c := range p.d.captured {
		if c.name == name && slot != p.d.header {
			r := reader{in: p.payload, pos: p.offs[slot]}
			return r.text(c.typ)
		}
	}
	return ""
}

// text reads a value of a scalar node as fmt.Sprint writes the value
// scalar returns ("" for null).
func (r *reader) text(n *node) string {
	switch n.kind {
	case kNull:
		return ""
	case kBool:
		b, _ := r.fixed(1) // it was read once already to write the line
		return strconv.FormatBool(b[0] == 1)
	case kInt:
		v, _ := r.readInt()
		return strconv.Itoa(int(v))
	case kLong:
		v, _ := r.readLong()
		return strconv.FormatInt(v, 10)
	case kString:
		b, _ := r.readBytes()
		return string(b)
	case kEnum:
		i, _ := r.readInt()
		return n.symbols[i]
	case kUnion:
		i, _ := r.readInt()
		return r.text(n.union[i])
	}
	v, _ := r.scalar(n) // floats and bytes, as fmt.Sprint writes them
	return fmt.Sprint(v)
}

// eventTime is eventTime(p.field, datetimes) without boxing the values
// read: the captured fields are typed by the schema.
func (p *probe) eventTime(datetimes []string) (time.Time, bool) {
	if p.d.header != -1 { // a ChangeEventHeader: its commitTimestamp, or none
		if p.d.header < 0 {
			return time.Time{}, false
		}
		return p.time(p.d.header)
	}
	for _, f := range [...]string{"EventDate", "CreatedDate"} {
		if t, ok := p.fieldTime(f); ok {
			return t, true
		}
	}
	for _, f := range datetimes {
		if t, ok := p.fieldTime(f); ok {
			return t, true
		}
	}
	return time.Time{}, false
}

// fieldTime is timeOf(p.field(name)).
func (p *probe) fieldTime(name string) (time.Time, bool) {
	if name == "ChangeEventHeader" && p.d.header != -1 {
		return time.Time{}, false // a record, not a time
	}
	for slot, c := range p.d.captured {
		if c.name == name && slot != p.d.header {
			return p.time(slot)
		}
	}
	return time.Time{}, false
}

// time is timeOf(p.value(slot)).
func (p *probe) time(slot int) (time.Time, bool) {
	r := reader{in: p.payload, pos: p.offs[slot]}
	return r.time(p.d.captured[slot].typ)
}

// time reads a value of a scalar node as timeOf reads the value scalar
// returns: a long as epoch milliseconds, a string as RFC 3339.
func (r *reader) time(n *node) (time.Time, bool) {
	switch n.kind {
	case kLong:
		x, _ := r.readLong() // it was read once already to write the line
		return time.UnixMilli(x).UTC(), x > 0
	case kString:
		b, _ := r.readBytes()
		t, err := time.Parse(time.RFC3339Nano, string(b))
		return t.UTC(), err == nil
	case kUnion:
		i, _ := r.readInt()
		return r.time(n.union[i])
	}
	return time.Time{}, false
}

func (p *probe) value(slot int) any {
	r := reader{in: p.payload, pos: p.offs[slot]}
	v, _ := r.scalar(p.d.captured[slot].typ) // it was read once already to write the line
	return v
}

// value appends the JSON of a value of n to out. The line being written
// is passed along and returned, not kept in the writer, so that appending
// to it stores nothing to the heap.
func (w *writer) value(out []byte, n *node) ([]byte, error) {
	switch n.kind {
	case kNull:
		out = append(out, "null"...)
	case kBool:
		b, err := w.fixed(1)
		if err != nil {
			return out, err
		}
		switch b[0] {
		case 0:
			out = append(out, "false"...)
		case 1:
			out = append(out, "true"...)
		default:
			return out, errors.New("avro: invalid boolean")
		}
	case kInt:
		v, err := w.readInt()
		if err != nil {
			return out, err
		}
		out = strconv.AppendInt(out, int64(v), 10)
	case kLong:
		v, err := w.readLong()
		if err != nil {
			return out, err
		}
		out = strconv.AppendInt(out, v, 10)
	case kFloat:
		b, err := w.fixed(4)
		if err != nil {
			return out, err
		}
		return appendFloat(out, float64(math.Float32frombits(binary.LittleEndian.Uint32(b))), 32)
	case kDouble:
		b, err := w.fixed(8)
		if err != nil {
			return out, err
		}
		return appendFloat(out, math.Float64frombits(binary.LittleEndian.Uint64(b)), 64)
	case kString:
		b, err := w.readBytes()
		if err != nil {
			return out, err
		}
		out = jsonstr.Append(out, b)
	case kBytes:
		b, err := w.readBytes()
		if err != nil {
			return out, err
		}
		out = append(base64.StdEncoding.AppendEncode(append(out, '"'), b), '"')
	case kEnum:
		i, err := w.readInt()
		if err != nil {
			return out, err
		}
		if i < 0 || int(i) >= len(n.quoted) {
			return out, errors.New("avro: unknown enum symbol")
		}
		out = append(out, n.quoted[i]...)
	case kFixed:
		b, err := w.fixed(n.size)
		if err != nil {
			return out, err
		}
		out = append(out, '[')
		for i, c := range b {
			if i > 0 {
				out = append(out, ',')
			}
			out = strconv.AppendUint(out, uint64(c), 10)
		}
		out = append(out, ']')
	case kUnion:
		i, err := w.readInt()
		if err != nil {
			return out, err
		}
		if i < 0 || int(i) >= len(n.union) {
			return out, errors.New("avro: unknown union branch")
		}
		return w.value(out, n.union[i])
	case kRecord:
		return w.record(out, n)
	case kArray:
		return w.array(out, n)
	case kFieldList:
		return w.fieldList(out, n)
	case kMap:
		return w.mapValue(out, n)
	}
	return out, nil
}

// appendFloat appends f as encoding/json writes it; a NaN or an infinity,
// which json.Marshal refuses, is left to the generic path.
func appendFloat(out []byte, f float64, bits int) ([]byte, error) {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return out, errFallback
	}
	format := byte('f')
	if abs := math.Abs(f); abs != 0 {
		if bits == 64 && (abs < 1e-6 || abs >= 1e21) || bits == 32 && (float32(abs) < 1e-6 || float32(abs) >= 1e21) {
			format = 'e'
		}
	}
	out = strconv.AppendFloat(out, f, format, -1, bits)
	if format == 'e' { // e-09 becomes e-9
		n := len(out)
		if n >= 4 && out[n-4] == 'e' && out[n-3] == '-' && out[n-2] == '0' {
			out[n-2] = out[n-1]
			out = out[:n-1]
		}
	}
	return out, nil
}

// record decodes the fields in wire order, then writes them again in key
// order where they began.
func (w *writer) record(out []byte, n *node) ([]byte, error) {
	base, start := len(w.spans), len(out)
	var err error
	for i := range n.fields {
		f := &n.fields[i]
		if f.capture >= 0 {
			w.caps[f.capture] = w.pos
		}
		s := len(out)
		if out, err = w.value(out, f.typ); err != nil {
			return out, err
		}
		w.spans = append(w.spans, span{s, len(out)})
	}
	mid := len(out)
	out = append(out, '{')
	for j, i := range n.order {
		if j > 0 {
			out = append(out, ',')
		}
		sp := w.spans[base+i]
		out = append(append(out, n.fields[i].key...), out[sp.start:sp.end]...)
	}
	out = append(out, '}')
	out = out[:start+copy(out[start:], out[mid:])]
	w.spans = w.spans[:base]
	return out, nil
}

func (w *writer) array(out []byte, n *node) ([]byte, error) {
	out = append(out, '[')
	first := true
	for {
		count, err := w.blockCount(n.items.minSize)
		if err != nil {
			return out, err
		}
		if count == 0 {
			break
		}
		for range count {
			if !first {
				out = append(out, ',')
			}
			first = false
			if out, err = w.value(out, n.items); err != nil {
				return out, err
			}
		}
	}
	return append(out, ']'), nil
}

// fieldList reads a ChangeEventHeader field list and writes the names its
// bitmaps stand for, or, when they do not decode, the strings as they came
// (as the generic path does: fieldNames.apply).
func (w *writer) fieldList(out []byte, n *node) ([]byte, error) {
	w.items = w.items[:0]
	for {
		count, err := w.blockCount(n.items.minSize)
		if err != nil {
			return out, err
		}
		if count == 0 {
			break
		}
		for range count {
			b, err := w.readBytes()
			if err != nil {
				return out, err
			}
			w.items = append(w.items, string(b))
		}
	}
	names, err := n.names.decode(w.items)
	if err != nil {
		if w.bitmapErr == nil {
			w.bitmapErr = err
		}
		names = w.items
	}
	out = append(out, '[')
	for i, name := range names {
		if i > 0 {
			out = append(out, ',')
		}
		out = jsonstr.Append(out, name)
	}
	clear(w.items)
	return append(out, ']'), nil
}

// mapValue decodes the entries, then writes them sorted by key, the last
// of equal keys winning, where they began.
func (w *writer) mapValue(out []byte, n *node) ([]byte, error) {
	base, start := len(w.ents), len(out)
	for {
		count, err := w.blockCount(1 + n.items.minSize)
		if err != nil {
			return out, err
		}
		if count == 0 {
			break
		}
		for range count {
			key, err := w.readBytes()
			if err != nil {
				return out, err
			}
			s := len(out)
			if out, err = w.value(out, n.items); err != nil {
				return out, err
			}
			w.ents = append(w.ents, mapEntry{key: key, val: span{s, len(out)}})
		}
	}
	ents := w.ents[base:]
	slices.SortStableFunc(ents, func(a, b mapEntry) int { return bytes.Compare(a.key, b.key) })
	mid := len(out)
	out = append(out, '{')
	first := true
	for i, e := range ents {
		if i+1 < len(ents) && bytes.Equal(ents[i+1].key, e.key) {
			continue // a later entry of the same key wins
		}
		if !first {
			out = append(out, ',')
		}
		first = false
		out = append(append(jsonstr.Append(out, e.key), ':'), out[e.val.start:e.val.end]...)
	}
	out = append(out, '}')
	out = out[:start+copy(out[start:], out[mid:])]
	clear(ents) // the keys point into the payload
	w.ents = w.ents[:base]
	return out, nil
}
