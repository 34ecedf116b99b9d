package loki

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/klauspost/compress/snappy"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/sf2loki/sf2loki/internal/ports"
)

// referenceGroup and referenceProtobuf are the plain forms of group and
// encodeProtobuf: a nested message per entry, labels rendered per entry.
func referenceGroup(batch []ports.Entry) []*stream {
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

func referenceProtobuf(streams []*stream) []byte {
	var req []byte
	for _, s := range streams {
		var sb []byte
		sb = protowire.AppendTag(sb, 1, protowire.BytesType)
		sb = protowire.AppendString(sb, s.labels)
		for _, e := range s.entries {
			var eb, ts []byte
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
	return req
}

// randomBatch mixes label sets (nil, empty, shared and per-entry maps,
// values needing escapes), times (zero seconds or nanoseconds, before
// 1970), metadata (none, empty, one key, several; shared and per-entry
// maps) and line lengths around the varint boundaries.
func randomBatch(r *rand.Rand, n int) []ports.Entry {
	shared := map[string]string{"source": "pubsub", "event_type": "LoginEvent"}
	// A source's metadata maps, one per level, shared by its entries.
	sharedMeta := []map[string]string{{"level": "info"}, {"level": "warn"}, {"level": "error", "user_id": "005", "a": ""}}
	batch := make([]ports.Entry, n)
	for i := range batch {
		e := ports.Entry{Line: string(bytes.Repeat([]byte{'x'}, r.IntN(300)))}
		switch r.IntN(6) {
		case 0:
		case 1:
			e.Labels = map[string]string{}
		case 2:
			e.Labels = shared
		case 3:
			e.Labels = maps.Clone(shared)
		case 4:
			e.Labels = map[string]string{"source": "eventlogfile", "event_type": fmt.Sprintf("T%d", r.IntN(12))}
		default:
			e.Labels = map[string]string{"job": "a\"b\\c\nd", "org": fmt.Sprint(r.IntN(3))}
		}
		switch r.IntN(5) {
		case 0:
		case 1:
			e.Time = time.Unix(r.Int64N(2e9), 0)
		case 2:
			e.Time = time.Unix(0, r.Int64N(1e9))
		case 3:
			e.Time = time.Unix(-r.Int64N(1e9), r.Int64N(1e9))
		default:
			e.Time = time.Unix(r.Int64N(2e9), r.Int64N(1e9))
		}
		switch r.IntN(5) {
		case 0:
		case 1:
			e.Metadata = map[string]string{"level": "info"}
		case 2:
			e.Metadata = sharedMeta[r.IntN(len(sharedMeta))]
		case 3:
			e.Metadata = map[string]string{}
		default:
			e.Metadata = map[string]string{"level": "error", "user_id": "005", "b": string(bytes.Repeat([]byte{'v'}, r.IntN(200))), "a": ""}
		}
		batch[i] = e
	}
	return batch
}

// group and encodeProtobuf are the reference forms made fast: the same
// streams in the same order, and the same bytes, for batches of mixed
// label sets and batches whose entries share one labels map.
func TestGroupAndProtobufMatchTheirReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 200 {
		batch := randomBatch(r, 1+r.IntN(400))
		if round%4 == 0 {
			// A source's batch: every entry holds the first one's labels
			// map (nil, empty, shared or its own).
			for i := range batch {
				batch[i].Labels = batch[0].Labels
			}
		}
		got, want := group(batch), referenceGroup(batch)
		if len(got) != len(want) {
			t.Fatalf("round %d: %d streams, want %d", round, len(got), len(want))
		}
		for i := range got {
			if got[i].labels != want[i].labels || len(got[i].entries) != len(want[i].entries) || !maps.Equal(got[i].labelKV, want[i].labelKV) {
				t.Fatalf("round %d stream %d: %s with %d entries, want %s with %d", round, i, got[i].labels, len(got[i].entries), want[i].labels, len(want[i].entries))
			}
		}
		body, err := snappy.Decode(nil, encodeProtobuf(got))
		if err != nil {
			t.Fatal(err)
		}
		if ref := referenceProtobuf(want); !bytes.Equal(body, ref) {
			t.Fatalf("round %d: the request differs from the reference (%d bytes, want %d)", round, len(body), len(ref))
		}
	}
}

// The merged labels of a push: equal label sets share one map, each the
// entry's labels with the static ones over them; the entries' own maps are
// left as they were.
func TestLabelMergerMergesEqualSetsOnce(t *testing.T) {
	m := labelMerger{static: map[string]string{"job": "sf2loki", "org": "prod"}}
	a := map[string]string{"source": "eventlogfile", "event_type": "API"}
	b := map[string]string{"source": "eventlogfile", "event_type": "API"}
	c := map[string]string{"source": "pubsub", "org": "mine"}
	ma, mb, mc := m.merged(a), m.merged(b), m.merged(c)
	want := map[string]string{"source": "eventlogfile", "event_type": "API", "job": "sf2loki", "org": "prod"}
	if !maps.Equal(ma, want) || !maps.Equal(mb, want) {
		t.Fatalf("merged %v and %v, want %v", ma, mb, want)
	}
	ma["probe"] = "x"
	if mb["probe"] != "x" {
		t.Fatal("equal label sets got maps of their own")
	}
	if want := map[string]string{"source": "pubsub", "org": "prod", "job": "sf2loki"}; !maps.Equal(mc, want) {
		t.Fatalf("merged %v, want %v (the static label wins)", mc, want)
	}
	if len(a) != 2 || len(c) != 2 || c["org"] != "mine" {
		t.Fatalf("an entry's own labels changed: %v %v", a, c)
	}
	for i := range 2 * mergedSets {
		l := map[string]string{"event_type": fmt.Sprint(i)}
		if got := m.merged(l); got["event_type"] != fmt.Sprint(i) || got["job"] != "sf2loki" || len(got) != 3 {
			t.Fatalf("set %d merged to %v", i, got)
		}
	}
}

// TestSameMapIsIdentity: the same map, however reached, and only it.
func TestSameMapIsIdentity(t *testing.T) {
	a, b := map[string]string{"k": "v"}, map[string]string{"k": "v"}
	alias := a
	var none, other map[string]string
	empty := map[string]string{}
	for _, c := range []struct {
		x, y map[string]string
		want bool
	}{
		{a, a, true}, {a, alias, true}, {none, other, true}, {empty, empty, true},
		{a, b, false}, {a, none, false}, {none, empty, false}, {empty, map[string]string{}, false},
	} {
		if got := sameMap(c.x, c.y); got != c.want {
			t.Errorf("sameMap(%p, %p) = %v, want %v", c.x, c.y, got, c.want)
		}
	}
	for i := range 1000 { // still the same map once it has grown
		alias[fmt.Sprint(i)] = "v"
	}
	if !sameMap(a, alias) || sameMap(a, b) {
		t.Error("a map is not the same as itself after an insert")
	}
}
