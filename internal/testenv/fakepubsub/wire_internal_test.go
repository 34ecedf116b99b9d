package fakepubsub

import (
	"bytes"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/sf2loki/sf2loki/internal/adapters/salesforce/pubsub/eventbus"
)

// A response the fake assembles from marshalled events is the bytes
// proto.Marshal makes of the same FetchResponse: the client under test
// reads what a protobuf server would send.
func TestFetchResponseIsWhatProtoMarshals(t *testing.T) {
	tp := &topic{position: map[string]int{}}
	for i := range 3 {
		tp.events = append(tp.events, &eventbus.ProducerEvent{Id: "e" + string(rune('0'+i)), SchemaId: "s1", Payload: bytes.Repeat([]byte{byte(i)}, 40*i)})
	}
	for _, tc := range []struct {
		events  int
		pending int32
	}{{0, 0}, {1, 0}, {3, 97}, {2, 100}} {
		want := &eventbus.FetchResponse{RpcId: "fake", PendingNumRequested: tc.pending, LatestReplayId: tp.replayID(tc.events)}
		var wire [][]byte
		for i := range tc.events {
			want.Events = append(want.Events, &eventbus.ConsumerEvent{Event: tp.events[i], ReplayId: tp.replayID(i + 1)})
			wire = append(wire, tp.consumerEvent(i))
		}
		ref, err := proto.MarshalOptions{Deterministic: true}.Marshal(want)
		if err != nil {
			t.Fatal(err)
		}
		if got := fetchResponse(wire, tp.replayID(tc.events), tc.pending); !bytes.Equal(got, ref) {
			t.Fatalf("%d events, %d pending: %x, want %x", tc.events, tc.pending, []byte(got), ref)
		}
	}
}
