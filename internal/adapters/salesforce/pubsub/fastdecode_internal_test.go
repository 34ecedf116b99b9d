package pubsub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hamba/avro/v2"

	"github.com/sf2loki/sf2loki/internal/adapters/salesforce/pubsub/eventbus"
	"github.com/sf2loki/sf2loki/internal/testenv/fakepubsub"
)

// richSchema has what Salesforce schemas have and more: nested records,
// nullable unions of every kind, a union of several primitives, arrays,
// maps, floats, doubles, bytes, an enum, a fixed, the fields the level is
// read from and a ChangeEventHeader with a nullable commitTimestamp.
const richSchema = `{"type":"record","name":"Rich","namespace":"test","fields":[
 {"name":"ChangeEventHeader","type":{"type":"record","name":"Header","fields":[
   {"name":"entityName","type":"string"},
   {"name":"changeType","type":{"type":"enum","name":"ChangeType","symbols":["CREATE","UPDATE","DELETE"]}},
   {"name":"commitTimestamp","type":["null",{"type":"long","logicalType":"timestamp-millis"}]},
   {"name":"changedFields","type":{"type":"array","items":"string"}}]}},
 {"name":"Name","type":["null","string"],"default":null},
 {"name":"Status","type":["null","string"],"default":null},
 {"name":"LoginType","type":["null","string"],"default":null},
 {"name":"STATUS_CODE","type":["null","int"],"default":null},
 {"name":"ErrorCode","type":["null","long","string"],"default":null},
 {"name":"EventDate","type":["null","long"],"doc":"EventDate:DateTime","default":null},
 {"name":"Seen","type":"int","doc":"Seen:DateTime"},
 {"name":"Score","type":"double"},
 {"name":"Ratio","type":["null","float"]},
 {"name":"Blob","type":"bytes"},
 {"name":"MaybeBlob","type":["null","bytes"]},
 {"name":"Flag","type":["boolean","null"]},
 {"name":"Hash","type":{"type":"fixed","name":"Hash","size":3}},
 {"name":"Mixed","type":["null","string","long","double","boolean"]},
 {"name":"Address","type":["null",{"type":"record","name":"Address","fields":[
   {"name":"Street","type":["null","string"]},
   {"name":"Geo","type":["null",{"type":"record","name":"Geo","fields":[{"name":"lat","type":"double"},{"name":"lon","type":"float"}]}]},
   {"name":"Tags","type":{"type":"map","values":["null","string"]}}]}]},
 {"name":"Lines","type":{"type":"array","items":{"type":"record","name":"Line","fields":[
   {"name":"z","type":"long"},{"name":"a","type":["null",{"type":"array","items":"double"}]},
   {"name":"kind","type":["null",{"type":"enum","name":"Kind","symbols":["X","Y"]}]}]}}},
 {"name":"Counts","type":["null",{"type":"map","values":{"type":"array","items":"int"}}]},
 {"name":"Nested","type":{"type":"map","values":{"type":"map","values":"long"}}},
 {"name":"Opaque","type":["null",{"type":"fixed","name":"Two","size":2}]},
 {"name":"ALPHA","type":"boolean"},
 {"name":"_under","type":"string"}
]}`

// fastSchemas are the schemas the fast path is checked on.
var fastSchemas = []string{fakepubsub.LoginEventStreamSchema, fakepubsub.AccountChangeEventSchema,
	fakepubsub.AccountChangeEventLogicalSchema, richSchema}

func mustSchema(t testing.TB, text string) *eventSchema {
	t.Helper()
	s, err := parseSchema([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	if s.fast == nil {
		t.Fatalf("the fast path does not compile %.60s…", text)
	}
	return s
}

// streams are the positions the fast/generic agreement checks write lines
// and remember levels with, one a schema, shared by every payload checked
// as a topic's stream shares its own.
var streams = struct {
	sync.Mutex
	m map[*eventSchema]*position
}{m: map[*eventSchema]*position{}}

// asStream runs f with s's position, one check at a time.
func asStream(s *eventSchema, f func(*position)) {
	streams.Lock()
	defer streams.Unlock()
	p := streams.m[s]
	if p == nil {
		p = &position{}
		streams.m[s] = p
	}
	f(p)
}

// decodeShared decodes payload with s's writer.
func decodeShared(s *eventSchema, payload []byte) (line string, p probe, err error) {
	asStream(s, func(pos *position) { line, p, err = s.fast.decode(&pos.lines, payload) })
	return line, p, err
}

// memoLevel is the level s's memo gives p.
func memoLevel(s *eventSchema, p *probe) (level string) {
	asStream(s, func(pos *position) { level = pos.levels.level(p) })
	return level
}

// sameAsGeneric checks that the fast path writes the line the generic path
// writes for payload, with the same time and level, and never accepts what
// the generic path refuses.
func sameAsGeneric(t testing.TB, s *eventSchema, payload []byte) {
	t.Helper()
	line, probe, ferr := decodeShared(s, payload)
	if errors.Is(ferr, errHostile) {
		// A block count the payload cannot hold, or -2^63, which hamba/avro
		// takes for a negative array length and crashes on (not a panic: a
		// fault). The fast path refuses it; only the generic path may
		// accept it (as an empty map block).
		return
	}
	rec, gerr := s.decodeGeneric(payload) // bounded (genericConfig): a count a payload cannot hold is refused, not allocated
	var want []byte
	if gerr == nil {
		want, gerr = json.Marshal(rec)
		if gerr != nil { // a NaN or an infinity
			if !errors.Is(ferr, errFallback) {
				t.Fatalf("json.Marshal fails (%v), the fast path says %v, %q", gerr, ferr, line)
			}
			return
		}
	}
	switch {
	case gerr != nil && ferr == nil:
		t.Fatalf("the generic path refuses the payload (%v), the fast path writes %s", gerr, line)
	case gerr == nil && ferr != nil:
		t.Fatalf("the fast path refuses the payload (%v), the generic path writes %s", ferr, want)
	case gerr != nil || ferr != nil:
		return
	}
	if line != string(want) {
		t.Fatalf("fast line\n%s\ngeneric line\n%s", line, want)
	}
	fast, generic := decoded{line: line, probe: probe}, decoded{rec: rec}
	ft, fok := eventTime(fast.field, s.datetimes)
	gt, gok := eventTime(generic.field, s.datetimes)
	if fok != gok || !ft.Equal(gt) {
		t.Fatalf("fast time %v %v, generic %v %v (%s)", ft, fok, gt, gok, want)
	}
	if pt, pok := fast.time(); pok != gok || !pt.Equal(gt) {
		t.Fatalf("fast time without boxing %v %v, generic %v %v (%s)", pt, pok, gt, gok, want)
	}
	if fl, gl := fast.level(), generic.level(); fl != gl {
		t.Fatalf("fast level %s, generic %s (%s)", fl, gl, want)
	}
	if ml, gl := memoLevel(s, &fast.probe), generic.level(); ml != gl {
		t.Fatalf("remembered level %s, generic %s (%s)", ml, gl, want)
	}
}

// awkward are strings encoding/json escapes, replaces or leaves alone.
var awkward = []string{"", "plain", "<script>&amp;</script>", "quote \" and \\ backslash", "tab\tnew\nline\rcr\bbs\fff",
	"\x00\x01\x1f\x7f", "\u2028\u2029", "héllo wörld ✓ 🎉", "bad \xff\xfe utf8 \xc3", "\xed\xa0\x80 surrogate",
	"Success", "Invalid Password", "Failed: x", "LOGIN_NO_ERROR", " 500 ", "null", "{}", "a\u0085b\u00a0c"}

var awkwardFloats = []float64{0, math.Copysign(0, -1), 1, -1.5, 0.1, 1e-6, 9.99e-7, 1e20, 1e21, 1.5e300, -2e-300, 5e-324,
	math.MaxFloat64, 123456789.125, 3.4028234663852886e38, 1.401298464324817e-45, 1e-7}

// randomValue is a random value of schema as hamba/avro encodes it from a
// map: a union as nil or {"<type>": value}.
func randomValue(r *rand.Rand, s avro.Schema, depth int) any {
	switch x := s.(type) {
	case *avro.RefSchema:
		return randomValue(r, x.Schema(), depth)
	case *avro.RecordSchema:
		m := map[string]any{}
		for _, f := range x.Fields() {
			m[f.Name()] = randomValue(r, f.Type(), depth+1)
		}
		return m
	case *avro.UnionSchema:
		b := x.Types()[r.IntN(len(x.Types()))]
		if b.Type() == avro.Null {
			return nil
		}
		name := string(b.Type())
		if n, ok := b.(avro.NamedSchema); ok {
			name = n.FullName()
		}
		return map[string]any{name: randomValue(r, b, depth)}
	case *avro.ArraySchema:
		a := []any{}
		for range r.IntN(max(1, 4-depth)) {
			a = append(a, randomValue(r, x.Items(), depth+1))
		}
		return a
	case *avro.MapSchema:
		m := map[string]any{}
		for range r.IntN(max(1, 4-depth)) {
			m[awkward[r.IntN(len(awkward))]] = randomValue(r, x.Values(), depth+1)
		}
		return m
	case *avro.EnumSchema:
		return x.Symbols()[r.IntN(len(x.Symbols()))]
	case *avro.FixedSchema:
		a := reflect.New(reflect.ArrayOf(x.Size(), reflect.TypeFor[byte]())).Elem()
		for i := range x.Size() {
			a.Index(i).SetUint(uint64(r.IntN(256)))
		}
		return a.Interface()
	}
	switch s.Type() {
	case avro.String:
		return awkward[r.IntN(len(awkward))]
	case avro.Bytes:
		return []byte(awkward[r.IntN(len(awkward))])
	case avro.Int:
		return []int{0, 1, -1, 404, 500, 200, math.MaxInt32, math.MinInt32}[r.IntN(8)]
	case avro.Long:
		return []int64{0, 1, -1, 1700000000000, math.MaxInt64, math.MinInt64, 1 << 40}[r.IntN(7)]
	case avro.Float:
		return float32(awkwardFloats[r.IntN(len(awkwardFloats))])
	case avro.Double:
		return awkwardFloats[r.IntN(len(awkwardFloats))]
	case avro.Boolean:
		return r.IntN(2) == 1
	}
	return nil
}

// validPayloads are n random valid encodings of text (its numbers'
// logical types dropped, which leaves the bytes as they are).
func validPayloads(t testing.TB, text string, n int, seed uint64) [][]byte {
	t.Helper()
	es, err := parseSchema([]byte(text))
	if err != nil {
		t.Fatal(err)
	}
	s := es.avro
	r := rand.New(rand.NewPCG(seed, 7))
	var out [][]byte
	for range n {
		b, err := avro.Marshal(s, randomValue(r, s, 0))
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

func TestFastDecoderWritesTheGenericLine(t *testing.T) {
	for i, text := range fastSchemas {
		s := mustSchema(t, text)
		for _, p := range validPayloads(t, text, 2000, uint64(i)) {
			sameAsGeneric(t, s, p)
		}
	}
}

// TestLinesAreNeverWrittenOver decodes every event of several schemas with
// one writer, as a topic's stream does, among payloads it refuses, events
// only written to check them, and lines of every length around what a
// chunk packs: every line keeps the bytes it had when it was returned.
func TestLinesAreNeverWrittenOver(t *testing.T) {
	type kept struct{ line, want string }
	var w writer
	var lines []kept
	keep := func(line string) { lines = append(lines, kept{line, strings.Clone(line)}) }
	long := mustSchema(t, `{"type":"record","name":"L","fields":[{"name":"s","type":"string"},{"name":"n","type":"long"}]}`)
	sizes := []int{maxPacked - 20, maxPacked - 14, maxPacked + 1, 3 * lineChunk, maxKeptBuf + 1, 100}
	for i, text := range fastSchemas {
		s := mustSchema(t, text)
		for j, p := range validPayloads(t, text, 300, uint64(i)) {
			if j%7 == 3 { // only written to check it
				if _, _, err := s.fast.write(&w, p); err != nil && !errors.Is(err, errFallback) {
					t.Fatal(err)
				}
				continue
			}
			line, _, err := s.fast.decode(&w, p)
			if errors.Is(err, errFallback) {
				continue
			}
			if err != nil {
				t.Fatal(err)
			}
			keep(line)
			switch j % 7 {
			case 5: // then one refused part-way
				if cut, _, err := s.fast.decode(&w, p[:len(p)/2]); err == nil {
					keep(cut) // trailing fields may be absent from a record that decodes
				}
			case 6: // then one of a length around what a chunk packs, or far longer
				n := sizes[j/7%len(sizes)]
				b, err := avro.Marshal(long.avro, map[string]any{"s": strings.Repeat("x", n), "n": int64(j)})
				if err != nil {
					t.Fatal(err)
				}
				big, _, err := long.fast.decode(&w, b)
				if err != nil {
					t.Fatal(err)
				}
				keep(big)
			}
		}
	}
	for i, l := range lines {
		if l.line != l.want {
			t.Fatalf("line %d of %d was written over:\nnow  %.200s\nwas  %.200s", i, len(lines), l.line, l.want)
		}
	}
	// Nor does the topic's writer keep the last payload, which holds the
	// response it arrived in, or a rare event's room.
	if cap(w.buf) > maxKeptBuf || cap(w.spans) > maxKeptStack || cap(w.ents) > maxKeptStack {
		t.Fatalf("the writer keeps room for %d bytes, %d fields and %d map entries", cap(w.buf), cap(w.spans), cap(w.ents))
	}
	if w.in != nil {
		t.Fatal("the writer keeps the last payload")
	}
	for _, e := range w.ents[:cap(w.ents)] {
		if e.key != nil {
			t.Fatalf("the writer keeps a map key of a payload decoded before: %q", e.key)
		}
	}
}

func TestFastDecoderOnTheFakeServersEvents(t *testing.T) {
	at := time.Date(2026, 3, 1, 12, 0, 0, 123e6, time.UTC)
	for _, c := range []struct {
		schema string
		recs   []map[string]any
	}{
		{fakepubsub.LoginEventStreamSchema, []map[string]any{fakepubsub.LoginEvent(0, at), fakepubsub.LoginEvent(9, at), fakepubsub.LoginEvent(19, at)}},
		{fakepubsub.AccountChangeEventSchema, []map[string]any{fakepubsub.AccountChange(1, at), fakepubsub.AccountCreate(2, at), fakepubsub.AccountUndelete(3, at, at.AddDate(0, -2, 0))}},
	} {
		s := mustSchema(t, c.schema)
		orig := avro.MustParse(c.schema)
		for _, rec := range c.recs {
			b, err := avro.Marshal(orig, rec)
			if err != nil {
				t.Fatal(err)
			}
			sameAsGeneric(t, s, b)
			line, probe, err := s.fast.decode(new(writer), b)
			if err != nil {
				t.Fatal(err)
			}
			d := decoded{line: line, probe: probe}
			if got, ok := eventTime(d.field, s.datetimes); !ok || !got.Equal(at) {
				t.Fatalf("time %v %v, want %v", got, ok, at)
			}
		}
	}
}

// TestFastDecoderOnAwkwardData pins bytes the generic path writes for
// awkward values, so a fast path gone wrong in one byte fails here too.
func TestFastDecoderOnAwkwardData(t *testing.T) {
	s := mustSchema(t, `{"type":"record","name":"A","fields":[{"name":"s","type":"string"},{"name":"d","type":"double"},
		{"name":"f","type":"float"},{"name":"b","type":["null","bytes"]},{"name":"Status","type":["null","string"]},
		{"name":"LoginType","type":["null","string"]},{"name":"m","type":{"type":"map","values":"int"}}]}`)
	enc := func(str string, d float64, f float32, b any, status any, m map[string]any) []byte {
		p, err := avro.Marshal(s.avro, map[string]any{"s": str, "d": d, "f": f, "b": b, "Status": status, "LoginType": map[string]any{"string": "Application"}, "m": m})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, c := range []struct {
		payload     []byte
		line, level string
	}{
		{enc("<a href=\"x\">&</a>\u2028\t\x01\xff", 1e21, 1e-7, map[string]any{"bytes": []byte("\x00\xff")}, map[string]any{"string": "Invalid Password"}, map[string]any{"b": 2, "a": 1, "<": 0}),
			`{"LoginType":"Application","Status":"Invalid Password","b":"AP8=","d":1e+21,"f":1e-7,"m":{"\u003c":0,"a":1,"b":2},"s":"\u003ca href=\"x\"\u003e\u0026\u003c/a\u003e\u2028\t\u0001\ufffd"}`,
			"error"},
		{enc("", math.Copysign(0, -1), 0.1, nil, nil, map[string]any{}),
			`{"LoginType":"Application","Status":null,"b":null,"d":-0,"f":0.1,"m":{},"s":""}`, "info"},
	} {
		sameAsGeneric(t, s, c.payload)
		line, probe, err := s.fast.decode(new(writer), c.payload)
		d := decoded{line: line, probe: probe}
		if err != nil || line != c.line || d.level() != c.level {
			t.Fatalf("got %s (%v), level %s\nwant %s, level %s", line, err, d.level(), c.line, c.level)
		}
	}
	// A NaN or an infinity is left to the generic path, which refuses it.
	for _, d := range []float64{math.NaN(), math.Inf(1), math.Inf(-1)} {
		p := enc("x", d, 1, nil, nil, map[string]any{})
		if _, _, err := s.fast.decode(new(writer), p); !errors.Is(err, errFallback) {
			t.Fatalf("%v: %v, want the generic path", d, err)
		}
		sameAsGeneric(t, s, p)
	}
}

func TestFastDecoderRefusesWhatTheGenericPathRefuses(t *testing.T) {
	s := mustSchema(t, richSchema)
	for _, p := range validPayloads(t, richSchema, 50, 99) {
		for n := range len(p) { // every truncation
			sameAsGeneric(t, s, p[:n])
			if _, _, err := s.fast.decode(new(writer), p[:n]); err == nil && n < len(p) {
				if _, gerr := s.decodeGeneric(p[:n]); gerr != nil {
					t.Fatalf("a payload cut at %d of %d decodes", n, len(p))
				}
			}
		}
		sameAsGeneric(t, s, append(p, 0xff, 0x01)) // trailing bytes are ignored by both
	}
}

func TestSchemasTheFastPathLeavesToTheGenericPath(t *testing.T) {
	for _, text := range []string{
		`{"type":"record","name":"R","fields":[{"name":"d","type":{"type":"bytes","logicalType":"decimal","precision":4,"scale":2}}]}`,
		`{"type":"record","name":"R","fields":[{"name":"a","type":{"type":"record","name":"S","fields":[{"name":"x","type":"int"}]}},{"name":"b","type":["null","S"]}]}`,
		`{"type":"record","name":"R","fields":[{"name":"n","type":{"type":"array","items":"null"}}]}`,
		`{"type":"record","name":"R","fields":[{"name":"Status","type":{"type":"array","items":"string"}}]}`,
		`{"type":"record","name":"R","fields":[{"name":"next","type":["null","R"]}]}`,
	} {
		s, err := parseSchema([]byte(text))
		if err != nil {
			t.Fatal(err)
		}
		if s.fast != nil {
			t.Errorf("the fast path compiles %s", text)
		}
	}
}

// FuzzFastDecoder checks the fast path against the generic path on the
// same bytes: the same line, time and level, or both refusing.
func FuzzFastDecoder(f *testing.F) {
	schemas := make([]*eventSchema, len(fastSchemas))
	for i, text := range fastSchemas {
		schemas[i] = mustSchema(f, text)
		for _, p := range validPayloads(f, text, 8, uint64(100+i)) {
			f.Add(uint8(i), p)
		}
	}
	f.Fuzz(func(t *testing.T, which uint8, payload []byte) {
		sameAsGeneric(t, schemas[int(which)%len(schemas)], payload)
	})
}

// BenchmarkDecodeLine is one LoginEventStream event to its line: the
// generic path (decode to a map, json.Marshal) and the fast path (a
// topic's writer and level memo, as a stream decodes).
func BenchmarkDecodeLine(b *testing.B) {
	s := mustSchema(b, fakepubsub.LoginEventStreamSchema)
	p, err := avro.Marshal(avro.MustParse(fakepubsub.LoginEventStreamSchema), fakepubsub.LoginEvent(7, time.Now()))
	if err != nil {
		b.Fatal(err)
	}
	var perEvent [2]float64
	for i, path := range []string{"generic", "fast"} {
		b.Run(path, func(b *testing.B) {
			var pos position // a topic's writer and level memo
			for b.Loop() {
				var d decoded
				if path == "fast" {
					d.line, d.probe, err = s.fast.decode(&pos.lines, p)
				} else {
					// The line is json.Marshal's; time and level read the record.
					if d.rec, err = s.decodeGeneric(p); err == nil {
						_, err = json.Marshal(d.rec)
					}
				}
				if err != nil {
					b.Fatal(err)
				}
				_, _ = d.time()
				_ = pos.level(&d)
			}
			perEvent[i] = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
			b.ReportMetric(float64(len(p)), "payload-B")
		})
	}
	if perEvent[1] > 0 {
		b.ReportMetric(perEvent[0]/perEvent[1], "generic/fast")
		fmt.Printf("generic %.0f ns/event, fast %.0f ns/event: %.2fx\n", perEvent[0], perEvent[1], perEvent[0]/perEvent[1])
	}
}

// TestHostileBlockCountsNeverReachTheGenericDecoder feeds block counts no
// payload can hold to a topic on the generic path (transforms or sampling
// need the record): the event is undecodable, and the process neither
// allocates the count nor faults (hamba/avro crashes on a count of -2^63).
func TestHostileBlockCountsNeverReachTheGenericDecoder(t *testing.T) {
	const schema = `{"type":"record","name":"A","namespace":"test","fields":[
 {"name":"xs","type":{"type":"array","items":"long"}},
 {"name":"m","type":{"type":"map","values":"string"}}]}`
	c := newSchemas(func(context.Context, string) (string, error) { return schema, nil })
	for name, payload := range map[string][]byte{
		// zigzag(-2^63), then a block size of 0.
		"array count -2^63": append([]byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, 0x00),
		// 2^35 items of a long each: 256 GiB if allocated.
		"array count 2^35": {0x80, 0x80, 0x80, 0x80, 0x80, 0x02, 0x00, 0x00},
		"map count -2^63":  append([]byte{0x00}, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x00),
	} {
		for _, fast := range []bool{false, true} {
			_, err := c.decode(t.Context(), &eventbus.ProducerEvent{Id: "e", SchemaId: "s", Payload: payload}, fast, new(writer))
			if !errors.Is(err, ErrUndecodable) {
				t.Errorf("%s (fast path allowed: %v): %v, want ErrUndecodable", name, fast, err)
			}
		}
	}
}
