package pubsub

import (
	"bytes"
	"testing"

	"google.golang.org/grpc/mem"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/sf2loki/sf2loki/internal/adapters/salesforce/pubsub/eventbus"
)

// sameAsProto checks that fetchCodec reads wire as proto.Unmarshal does:
// both refuse it, or both read the same message, down to which bytes
// fields are nil (the source tells a replay id by it).
func sameAsProto(t testing.TB, wire []byte) {
	t.Helper()
	want := &eventbus.FetchResponse{}
	werr := proto.Unmarshal(wire, want)
	got := &eventbus.FetchResponse{}
	gerr := fetchCodec{}.Unmarshal(mem.BufferSlice{mem.SliceBuffer(bytes.Clone(wire))}, got)
	switch {
	case (werr == nil) != (gerr == nil):
		t.Fatalf("proto says %v, fetchCodec says %v (%x)", werr, gerr, wire)
	case werr != nil:
		if gerr.Error() != werr.Error() {
			t.Fatalf("proto says %v, fetchCodec says %v (%x)", werr, gerr, wire)
		}
		return
	}
	if !proto.Equal(got, want) {
		t.Fatalf("fetchCodec read\n%v\nproto read\n%v\n(%x)", got, want, wire)
	}
	if (got.LatestReplayId == nil) != (want.LatestReplayId == nil) {
		t.Fatalf("latest_replay_id %#v, proto %#v", got.LatestReplayId, want.LatestReplayId)
	}
	for i, ev := range got.GetEvents() {
		w := want.GetEvents()[i]
		if (ev.ReplayId == nil) != (w.ReplayId == nil) || (ev.Event == nil) != (w.Event == nil) ||
			(ev.GetEvent().GetPayload() == nil) != (w.GetEvent().GetPayload() == nil) {
			t.Fatalf("event %d: %#v, proto %#v", i, ev, w)
		}
	}
}

// fetchResponses are wire FetchResponses: as the server marshals them,
// and as proto reads them though no server marshals them so (unknown
// fields, repeated fields, fields of another wire type, invalid UTF-8,
// truncations).
func fetchResponses(t testing.TB) [][]byte {
	t.Helper()
	marshal := func(m *eventbus.FetchResponse) []byte {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	ev := func(i int) *eventbus.ConsumerEvent {
		return &eventbus.ConsumerEvent{ReplayId: []byte{0, 0, byte(i), 9, 8, 7, 6, 5, 4},
			Event: &eventbus.ProducerEvent{Id: "ev-" + string(rune('a'+i)), SchemaId: "schema-é", Payload: bytes.Repeat([]byte{byte(i), 0x02}, i+1)}}
	}
	full := &eventbus.FetchResponse{LatestReplayId: []byte{1, 2, 3}, RpcId: "rpc-1", PendingNumRequested: 42}
	for i := range 5 {
		full.Events = append(full.Events, ev(i))
	}
	full.Events[1].Event.Headers = []*eventbus.EventHeader{{Key: "k", Value: []byte("v")}, {Key: "", Value: nil}}
	full.Events[2].ReplayId = nil
	full.Events[3].Event = nil
	full.Events[4].Event.Payload = nil
	fullWire := marshal(full)

	tag := protowire.AppendTag
	field := func(b []byte, num protowire.Number, v []byte) []byte {
		return protowire.AppendBytes(tag(b, num, protowire.BytesType), v)
	}
	evWire := func(fields ...[]byte) []byte { return field(nil, 1, bytes.Join(fields, nil)) }
	producer := func(fields ...[]byte) []byte { return field(nil, 1, bytes.Join(fields, nil)) }

	out := [][]byte{
		nil,
		{},
		fullWire,
		marshal(&eventbus.FetchResponse{PendingNumRequested: -1}),
		marshal(&eventbus.FetchResponse{Events: []*eventbus.ConsumerEvent{{}}}),
		marshal(&eventbus.FetchResponse{Events: []*eventbus.ConsumerEvent{{Event: &eventbus.ProducerEvent{}}}}),
		// Explicitly empty bytes and strings, which proto reads as nil and "".
		bytes.Join([][]byte{field(nil, 2, nil), field(nil, 3, nil), evWire(field(nil, 2, nil), producer(field(nil, 3, nil), field(nil, 1, nil)))}, nil),
		// Fields given twice: the last scalar wins, a message merges.
		bytes.Join([][]byte{field(nil, 2, []byte{1}), field(nil, 2, []byte{2}), field(nil, 3, []byte("a")), field(nil, 3, []byte("b"))}, nil),
		evWire(field(nil, 2, []byte{1}), field(nil, 2, []byte{2}), producer(field(nil, 1, []byte("x"))), producer(field(nil, 2, []byte("y")))),
		evWire(producer(field(nil, 3, []byte{1}), field(nil, 3, []byte{2}), field(nil, 1, []byte("a")), field(nil, 1, []byte("b")))),
		// Unknown fields, at every level.
		protowire.AppendVarint(tag(fullWire, 9, protowire.VarintType), 7),
		evWire(protowire.AppendFixed32(tag(nil, 7, protowire.Fixed32Type), 1), field(nil, 2, []byte{1})),
		evWire(producer(field(nil, 5, []byte("extra")), field(nil, 3, []byte{1}))),
		evWire(producer(field(nil, 4, field(nil, 3, []byte("extra"))))),
		// A known field of another wire type: proto keeps it as unknown.
		protowire.AppendVarint(tag(nil, 1, protowire.VarintType), 1),
		protowire.AppendVarint(tag(nil, 2, protowire.VarintType), 1),
		field(nil, 4, []byte{1}),
		evWire(protowire.AppendVarint(tag(nil, 1, protowire.VarintType), 1)),
		evWire(producer(protowire.AppendFixed64(tag(nil, 3, protowire.Fixed64Type), 1))),
		// A group, and an unmatched end of group.
		tag(tag(nil, 8, protowire.StartGroupType), 8, protowire.EndGroupType),
		tag(nil, 8, protowire.EndGroupType),
		// Invalid UTF-8 in each string.
		field(nil, 3, []byte{0xff}),
		evWire(producer(field(nil, 1, []byte{0xc3}))),
		evWire(producer(field(nil, 2, []byte("ok\xed\xa0\x80")))),
		evWire(producer(field(nil, 4, field(nil, 1, []byte{0xfe})))),
		// Field number 0, and the largest varints.
		field(nil, 0, nil),
		protowire.AppendVarint(tag(nil, 4, protowire.VarintType), 1<<63),
		protowire.AppendVarint(tag(nil, 4, protowire.VarintType), 1<<32+5),
	}
	for n := range fullWire {
		out = append(out, fullWire[:n])
	}
	return out
}

// TestFetchCodecReadsAsProto decodes the same wire bytes with fetchCodec
// and with proto.Unmarshal, and compares.
func TestFetchCodecReadsAsProto(t *testing.T) {
	for _, wire := range fetchResponses(t) {
		sameAsProto(t, wire)
	}
}

// TestFetchCodecAliasesNothingItDoesNotOwn checks that a response read by
// fetchCodec does not change when gRPC reuses the buffers it was read
// from, and that appending to its bytes never writes into another field.
func TestFetchCodecAliasesNothingItDoesNotOwn(t *testing.T) {
	wire := fetchResponses(t)[2]
	in := bytes.Clone(wire)
	got := &eventbus.FetchResponse{}
	if err := (fetchCodec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(in)}, got); err != nil {
		t.Fatal(err)
	}
	want := &eventbus.FetchResponse{}
	if err := proto.Unmarshal(wire, want); err != nil {
		t.Fatal(err)
	}
	clear(in)
	_ = append(got.GetEvents()[0].GetReplayId(), 0xff, 0xff, 0xff)
	_ = append(got.GetEvents()[0].GetEvent().GetPayload(), 0xff, 0xff, 0xff)
	if !proto.Equal(got, want) {
		t.Fatalf("after the buffer was reused and the bytes appended to:\n%v\nwant\n%v", got, want)
	}
}

// TestFetchCodecMarshalsAsProto checks the requests: proto's bytes.
func TestFetchCodecMarshalsAsProto(t *testing.T) {
	req := &eventbus.FetchRequest{TopicName: "/event/LoginEventStream", NumRequested: 100, ReplayPreset: eventbus.ReplayPreset_CUSTOM, ReplayId: []byte{1, 2}}
	got, err := fetchCodec{}.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	want, err := proto.MarshalOptions{}.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got.Materialize(), want) {
		t.Fatalf("%x, want %x", got.Materialize(), want)
	}
	back := &eventbus.FetchRequest{}
	if err := (fetchCodec{}).Unmarshal(mem.BufferSlice{mem.SliceBuffer(want)}, back); err != nil || !proto.Equal(back, req) {
		t.Fatalf("%v %v, want %v", back, err, req)
	}
}

// FuzzFetchCodec: fetchCodec reads any bytes as proto.Unmarshal does.
func FuzzFetchCodec(f *testing.F) {
	for _, wire := range fetchResponses(f) {
		f.Add(wire)
	}
	f.Fuzz(func(t *testing.T, wire []byte) {
		sameAsProto(t, wire)
	})
}
