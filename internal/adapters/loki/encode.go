package loki

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"github.com/klauspost/compress/s2"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/sf2loki/sf2loki/internal/ports"
)

// stream is the entries of one label set.
type stream struct {
	labels  string // rendered {k="v",...}, sorted and escaped
	labelKV map[string]string
	entries []ports.Entry
}

// group splits a batch into streams by identical label sets, in first-seen
// order. An entry whose labels equal those of a stream seen among the last
// few is added to it without rendering its labels again: the entries of a
// batch mostly share one or two label sets. Each stream's entries are
// allocated once, at their count.
func group(batch []ports.Entry) []*stream {
	if oneLabelsMap(batch) {
		// A source's entries share their labels map: one stream, whose
		// entries are the batch itself (read, never written).
		return []*stream{{labels: renderLabels(batch[0].Labels), labelKV: batch[0].Labels, entries: batch}}
	}
	var out []*stream
	var counts []int
	var index map[string]int
	which := make([]int32, len(batch)) // the stream of each entry
	for i, e := range batch {
		s := recent(out, e.Labels)
		if s < 0 {
			key := renderLabels(e.Labels)
			if index == nil {
				index = map[string]int{}
			}
			var ok bool
			if s, ok = index[key]; !ok {
				s = len(out)
				index[key] = s
				out = append(out, &stream{labels: key, labelKV: e.Labels})
				counts = append(counts, 0)
			}
		}
		which[i] = int32(s) //nolint:gosec // at most len(batch) streams
		counts[s]++
	}
	for i, s := range out {
		s.entries = make([]ports.Entry, 0, counts[i])
	}
	for i, e := range batch {
		s := out[which[i]]
		s.entries = append(s.entries, e)
	}
	return out
}

// recent returns the index of the stream among the last recentStreams of
// out whose labels are labels, or -1. A source's entries share their
// labels map, so the same map is looked for first, without comparing
// pairs; then an equal one.
func recent(out []*stream, labels map[string]string) int {
	from := max(0, len(out)-recentStreams)
	for i := len(out) - 1; i >= from; i-- {
		if sameMap(out[i].labelKV, labels) {
			return i
		}
	}
	for i := len(out) - 1; i >= from; i-- {
		if maps.Equal(out[i].labelKV, labels) {
			return i
		}
	}
	return -1
}

// oneLabelsMap says whether batch is not empty and all its entries hold
// the same labels map.
func oneLabelsMap(batch []ports.Entry) bool {
	if len(batch) == 0 {
		return false
	}
	for i := 1; i < len(batch); i++ {
		if !sameMap(batch[0].Labels, batch[i].Labels) {
			return false
		}
	}
	return true
}

// sameMap says whether a and b are the same map (not merely equal ones).
// A map value is a pointer to the map: the two pointers are compared, as
// reflect.Value.UnsafePointer would return them, without the reflection
// (it runs for every entry pushed, several times).
func sameMap(a, b map[string]string) bool {
	return *(*unsafe.Pointer)(unsafe.Pointer(&a)) == *(*unsafe.Pointer)(unsafe.Pointer(&b))
}

// recentStreams is how many of the latest streams group compares an
// entry's labels with before it renders them.
const recentStreams = 4

// renderLabels renders {k="v",...} sorted by name, with \, " and newline
// escaped.
func renderLabels(m map[string]string) string {
	keys := slices.Sorted(maps.Keys(m))
	var b strings.Builder
	b.WriteByte('{')
	for i, k := range keys {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k)
		b.WriteString(`="`)
		b.WriteString(escaper.Replace(m[k]))
		b.WriteByte('"')
	}
	b.WriteByte('}')
	return b.String()
}

var escaper = strings.NewReplacer(`\`, `\\`, `"`, `\"`, "\n", `\n`)

// encodeProtobuf renders Loki's logproto.PushRequest:
//
//	PushRequest   { repeated Stream streams = 1; }
//	Stream        { string labels = 1; repeated Entry entries = 2; }
//	Entry         { Timestamp timestamp = 1; string line = 2; repeated LabelPair structuredMetadata = 3; }
//	LabelPair     { string name = 1; string value = 2; }
//	Timestamp     { int64 seconds = 1; int32 nanos = 2; }
//
// compressed as one snappy block (the Snappy block format, which s2's
// EncodeSnappy writes). The message is written into one buffer
// sized beforehand (each nested message's length is computed before it is
// written), so encoding allocates per batch, not per entry.
func encodeProtobuf(streams []*stream) []byte {
	var meta metaCache
	sizes := make([]int, len(streams))
	size := 0
	for i, s := range streams {
		sizes[i] = streamSize(s, &meta)
		size += sizeField(sizes[i])
	}
	buf := reqBuffers.Get().(*[]byte)
	req := slices.Grow((*buf)[:0], size)
	for i, s := range streams {
		req = protowire.AppendTag(req, 1, protowire.BytesType)
		req = protowire.AppendVarint(req, uint64(sizes[i]))
		req = protowire.AppendTag(req, 1, protowire.BytesType)
		req = protowire.AppendString(req, s.labels)
		for _, e := range s.entries {
			sec, ns := e.Time.Unix(), e.Time.Nanosecond()
			md := meta.encoded(e.Metadata)
			req = protowire.AppendTag(req, 2, protowire.BytesType)
			req = protowire.AppendVarint(req, uint64(entrySize(e, sec, ns, md)))
			req = protowire.AppendTag(req, 1, protowire.BytesType)
			req = protowire.AppendVarint(req, uint64(timestampSize(sec, ns)))
			if sec != 0 {
				req = protowire.AppendTag(req, 1, protowire.VarintType)
				req = protowire.AppendVarint(req, uint64(sec))
			}
			if ns != 0 {
				req = protowire.AppendTag(req, 2, protowire.VarintType)
				req = protowire.AppendVarint(req, uint64(ns))
			}
			req = protowire.AppendTag(req, 2, protowire.BytesType)
			req = protowire.AppendString(req, e.Line)
			req = append(req, md...)
		}
	}
	// Snappy's standard level, as Promtail and Alloy push: the "better"
	// level (klauspost's snappy.Encode) takes about 40% more CPU for a
	// body about 4% smaller.
	out := s2.EncodeSnappy(nil, req)
	if cap(req) <= maxPooledRequest {
		*buf = req
		reqBuffers.Put(buf)
	}
	return out
}

// reqBuffers holds the uncompressed requests' buffers between pushes (up
// to maxPooledRequest bytes each).
var reqBuffers = sync.Pool{New: func() any { return new([]byte) }}

const maxPooledRequest = 8 << 20

// sizeField is the size of a length-delimited field (tag numbers below 16)
// holding n bytes.
func sizeField(n int) int { return 1 + protowire.SizeBytes(n) }

// streamSize is the size of s's Stream message.
func streamSize(s *stream, meta *metaCache) int {
	n := sizeField(len(s.labels))
	for _, e := range s.entries {
		n += sizeField(entrySize(e, e.Time.Unix(), e.Time.Nanosecond(), meta.encoded(e.Metadata)))
	}
	return n
}

// entrySize is the size of e's Entry message, md its encoded metadata.
func entrySize(e ports.Entry, sec int64, ns int, md []byte) int {
	return sizeField(timestampSize(sec, ns)) + sizeField(len(e.Line)) + len(md)
}

// timestampSize is the size of a Timestamp message (zero fields omitted).
func timestampSize(sec int64, ns int) int {
	n := 0
	if sec != 0 {
		n += 1 + protowire.SizeVarint(uint64(sec))
	}
	if ns != 0 {
		n += 1 + protowire.SizeVarint(uint64(ns))
	}
	return n
}

// metaCache encodes entries' metadata as an Entry's structuredMetadata
// fields, sorted by name. A source's entries share one metadata map per
// level, so the last few maps' encodings are kept for the push: most
// entries' metadata is then a pointer compare, not a sort and a lookup per
// pair, twice (sizes, then bytes).
type metaCache struct {
	maps    []map[string]string
	enc     [][]byte
	keys    []string // a map's keys, sorted
	scratch []byte   // a map's encoding once the cache is full
}

// metaCached bounds the metadata maps a metaCache keeps.
const metaCached = 8

// encoded returns m's structuredMetadata fields; the bytes hold until the
// next call when the cache is full.
func (c *metaCache) encoded(m map[string]string) []byte {
	for i, cm := range c.maps {
		if sameMap(cm, m) {
			return c.enc[i]
		}
	}
	c.keys = c.keys[:0]
	for k := range m {
		c.keys = append(c.keys, k)
	}
	slices.Sort(c.keys)
	var b []byte
	if len(c.maps) == metaCached {
		b = c.scratch[:0]
	}
	for _, k := range c.keys {
		v := m[k]
		b = protowire.AppendTag(b, 3, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(sizeField(len(k))+sizeField(len(v))))
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendString(b, k)
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendString(b, v)
	}
	if len(c.maps) == metaCached {
		c.scratch = b
	} else {
		c.maps = append(c.maps, m)
		c.enc = append(c.enc, b)
	}
	return b
}

// encodeJSON renders the JSON push body, gzipped when gz.
func encodeJSON(streams []*stream, gz bool) ([]byte, error) {
	type jsonStream struct {
		Stream map[string]string `json:"stream"`
		Values [][]any           `json:"values"`
	}
	body := struct {
		Streams []jsonStream `json:"streams"`
	}{}
	for _, s := range streams {
		js := jsonStream{Stream: s.labelKV}
		if js.Stream == nil {
			js.Stream = map[string]string{}
		}
		for _, e := range s.entries {
			v := []any{strconv.FormatInt(e.Time.UnixNano(), 10), e.Line}
			if len(e.Metadata) > 0 {
				v = append(v, e.Metadata)
			}
			js.Values = append(js.Values, v)
		}
		body.Streams = append(body.Streams, js)
	}
	raw, err := json.Marshal(body)
	if err != nil || !gz {
		return raw, err
	}
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	if _, err := w.Write(raw); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
