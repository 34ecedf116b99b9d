package loki

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/klauspost/compress/snappy"
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
// order.
func group(batch []ports.Entry) []*stream {
	var out []*stream
	index := map[string]*stream{}
	for _, e := range batch {
		key := renderLabels(e.Labels)
		s, ok := index[key]
		if !ok {
			s = &stream{labels: key, labelKV: e.Labels}
			index[key] = s
			out = append(out, s)
		}
		s.entries = append(s.entries, e)
	}
	return out
}

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
// compressed as one snappy block.
func encodeProtobuf(streams []*stream) []byte {
	var req []byte
	for _, s := range streams {
		var sb []byte
		sb = protowire.AppendTag(sb, 1, protowire.BytesType)
		sb = protowire.AppendString(sb, s.labels)
		for _, e := range s.entries {
			var eb []byte
			var ts []byte
			if sec := e.Time.Unix(); sec != 0 {
				ts = protowire.AppendTag(ts, 1, protowire.VarintType)
				ts = protowire.AppendVarint(ts, uint64(sec))
			}
			if ns := e.Time.Nanosecond(); ns != 0 {
				ts = protowire.AppendTag(ts, 2, protowire.VarintType)
				ts = protowire.AppendVarint(ts, uint64(ns))
			}
			eb = protowire.AppendTag(eb, 1, protowire.BytesType)
			eb = protowire.AppendBytes(eb, ts)
			eb = protowire.AppendTag(eb, 2, protowire.BytesType)
			eb = protowire.AppendString(eb, e.Line)
			for _, k := range slices.Sorted(maps.Keys(e.Metadata)) {
				var lp []byte
				lp = protowire.AppendTag(lp, 1, protowire.BytesType)
				lp = protowire.AppendString(lp, k)
				lp = protowire.AppendTag(lp, 2, protowire.BytesType)
				lp = protowire.AppendString(lp, e.Metadata[k])
				eb = protowire.AppendTag(eb, 3, protowire.BytesType)
				eb = protowire.AppendBytes(eb, lp)
			}
			sb = protowire.AppendTag(sb, 2, protowire.BytesType)
			sb = protowire.AppendBytes(sb, eb)
		}
		req = protowire.AppendTag(req, 1, protowire.BytesType)
		req = protowire.AppendBytes(req, sb)
	}
	return snappy.Encode(nil, req)
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
