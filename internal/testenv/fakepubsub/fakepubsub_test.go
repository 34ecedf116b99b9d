package fakepubsub_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sf2loki/sf2loki/internal/adapters/salesforce/pubsub/eventbus"
	"github.com/sf2loki/sf2loki/internal/testenv/fakepubsub"
)

var t0 = time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)

func client(t *testing.T, s *fakepubsub.Server) eventbus.PubSubClient {
	t.Helper()
	conn, err := grpc.NewClient(s.Addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return eventbus.NewPubSubClient(conn)
}

func authed(ctx context.Context) context.Context {
	return metadata.NewOutgoingContext(ctx, metadata.Pairs("accesstoken", "t", "instanceurl", "https://example.my.salesforce.com", "tenantid", "00D000000000001"))
}

// subscribe sends one FetchRequest and returns the first response, or the
// status and error-code trailer the stream ended with.
func subscribe(t *testing.T, c eventbus.PubSubClient, req *eventbus.FetchRequest) (*eventbus.FetchResponse, codes.Code, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(authed(t.Context()), 5*time.Second)
	defer cancel()
	stream, err := c.Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(req); err != nil {
		t.Fatal(err)
	}
	resp, err := stream.Recv()
	if err != nil {
		code := ""
		if v := stream.Trailer().Get("error-code"); len(v) > 0 {
			code = v[0]
		}
		return nil, status.Code(err), code
	}
	return resp, codes.OK, ""
}

// Replay ids are opaque, as Salesforce's are: random-looking bytes, not a
// counter, different on every topic; the fake still orders them.
func TestReplayIDsAreOpaque(t *testing.T) {
	s := fakepubsub.Start(t)
	s.AddTopic(fakepubsub.LoginTopic, fakepubsub.LoginEventStreamSchema)
	s.AddTopic("/event/ApiEventStream", fakepubsub.LoginEventStreamSchema)
	last := s.Append(fakepubsub.LoginTopic, fakepubsub.LoginEvent(0, t0), fakepubsub.LoginEvent(1, t0), fakepubsub.LoginEvent(2, t0))
	if !bytes.Equal(last, s.ReplayID(fakepubsub.LoginTopic, 3)) {
		t.Fatalf("Append returned %x, want the third event's replay id %x", last, s.ReplayID(fakepubsub.LoginTopic, 3))
	}
	seen := map[string]bool{}
	for n := range 4 {
		id := s.ReplayID(fakepubsub.LoginTopic, n)
		if len(id) != 9 || seen[string(id)] {
			t.Fatalf("replay id %d = %x: want 9 bytes, never repeated", n, id)
		}
		seen[string(id)] = true
		if p, ok := s.Position(fakepubsub.LoginTopic, id); !ok || p != n {
			t.Fatalf("Position(%x) = %d %v, want %d", id, p, ok, n)
		}
		if bytes.Equal(id, s.ReplayID("/event/ApiEventStream", n)) {
			t.Fatalf("two topics share replay id %x", id)
		}
	}
	a, b := s.ReplayID(fakepubsub.LoginTopic, 1), s.ReplayID(fakepubsub.LoginTopic, 2)
	if binary.BigEndian.Uint64(b[1:])-binary.BigEndian.Uint64(a[1:]) == 1 {
		t.Fatalf("replay ids %x and %x count up", a, b)
	}
}

// Requests add up against 100 outstanding events, as Salesforce counts
// them: asking for 150 and then 80 more delivers 100, and 80 more only
// once those 100 arrived.
func TestOutstandingEventsAreCappedAt100(t *testing.T) {
	s := fakepubsub.Start(t)
	s.AddTopic(fakepubsub.LoginTopic, fakepubsub.LoginEventStreamSchema)
	for i := range 300 {
		s.Append(fakepubsub.LoginTopic, fakepubsub.LoginEvent(i, t0))
	}
	ctx, cancel := context.WithTimeout(authed(t.Context()), 5*time.Second)
	defer cancel()
	stream, err := client(t, s).Subscribe(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := stream.Send(&eventbus.FetchRequest{TopicName: fakepubsub.LoginTopic, ReplayPreset: eventbus.ReplayPreset_EARLIEST, NumRequested: 150}); err != nil {
		t.Fatal(err)
	}
	got := 0
	for got < 100 {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		got += len(resp.GetEvents())
	}
	if got != 100 {
		t.Fatalf("%d events for 150 requested, want 100", got)
	}
	if err := stream.Send(&eventbus.FetchRequest{TopicName: fakepubsub.LoginTopic, NumRequested: 80}); err != nil {
		t.Fatal(err)
	}
	for got < 180 {
		resp, err := stream.Recv()
		if err != nil {
			t.Fatal(err)
		}
		got += len(resp.GetEvents())
	}
	if got != 180 || s.Sent() != 180 {
		t.Fatalf("%d received, %d sent after 80 more, want 180", got, s.Sent())
	}
	if m := s.MaxOutstanding(); m != 150 {
		t.Fatalf("MaxOutstanding %d, want the 150 asked", m)
	}
}

// A CUSTOM subscription is refused as Salesforce refuses it: without a
// replay id (replayid.validation.failed), with one the topic never issued
// or whose event expired (replayid.corrupted); a good one resumes after
// its event.
func TestCustomReplayIDsAreChecked(t *testing.T) {
	s := fakepubsub.Start(t)
	s.AddTopic(fakepubsub.LoginTopic, fakepubsub.LoginEventStreamSchema)
	s.Append(fakepubsub.LoginTopic, fakepubsub.LoginEvent(0, t0), fakepubsub.LoginEvent(1, t0), fakepubsub.LoginEvent(2, t0))
	c := client(t, s)
	custom := func(id []byte) *eventbus.FetchRequest {
		return &eventbus.FetchRequest{TopicName: fakepubsub.LoginTopic, ReplayPreset: eventbus.ReplayPreset_CUSTOM, ReplayId: id, NumRequested: 10}
	}
	counter := binary.BigEndian.AppendUint64(nil, 2)
	other := fakepubsub.Start(t)
	other.AddTopic(fakepubsub.LoginTopic, fakepubsub.LoginEventStreamSchema)
	for _, tc := range []struct {
		name string
		id   []byte
		code string
	}{
		{"no replay id", nil, fakepubsub.CodeReplayValidation},
		{"a counter", counter, fakepubsub.CodeReplayCorrupted},
		{"another org's", other.ReplayID(fakepubsub.LoginTopic, 2), fakepubsub.CodeReplayCorrupted},
	} {
		if _, st, code := subscribe(t, c, custom(tc.id)); st != codes.InvalidArgument || code != tc.code {
			t.Errorf("%s: %s %q, want INVALID_ARGUMENT %q", tc.name, st, code, tc.code)
		}
	}
	resp, st, _ := subscribe(t, c, custom(s.ReplayID(fakepubsub.LoginTopic, 2)))
	if st != codes.OK || len(resp.GetEvents()) != 1 || !bytes.Equal(resp.GetEvents()[0].GetReplayId(), s.ReplayID(fakepubsub.LoginTopic, 3)) {
		t.Fatalf("resuming after event 2: %v %v", resp, st)
	}
	s.RetainFrom[fakepubsub.LoginTopic] = 3 // events 1 and 2 expired
	if _, st, code := subscribe(t, c, custom(s.ReplayID(fakepubsub.LoginTopic, 2))); st != codes.InvalidArgument || code != fakepubsub.CodeReplayCorrupted {
		t.Fatalf("an expired replay id: %s %q", st, code)
	}
}

// A datetime is given as epoch milliseconds and encoded as the schema spells
// it: a plain long, or a long with the timestamp-millis logical type, in a
// nullable union or not. Both encodings carry the same bytes.
func TestDatetimesEncodeWhateverTheSchemaSpelling(t *testing.T) {
	s := fakepubsub.Start(t)
	s.AddTopic(fakepubsub.AccountTopic, fakepubsub.AccountChangeEventSchema)
	s.AddTopic("/data/AccountLogicalChangeEvent", fakepubsub.AccountChangeEventLogicalSchema)
	commit := t0.Add(123 * time.Millisecond)
	ev := fakepubsub.AccountUndelete(1, commit, commit.AddDate(0, 0, -97))
	s.Append(fakepubsub.AccountTopic, ev)
	s.Append("/data/AccountLogicalChangeEvent", ev)
	c := client(t, s)
	var payloads [][]byte
	for _, topic := range []string{fakepubsub.AccountTopic, "/data/AccountLogicalChangeEvent"} {
		resp, st, code := subscribe(t, c, &eventbus.FetchRequest{TopicName: topic, ReplayPreset: eventbus.ReplayPreset_EARLIEST, NumRequested: 1})
		if st != codes.OK || len(resp.GetEvents()) != 1 {
			t.Fatalf("%s: %s %s", topic, st, code)
		}
		payloads = append(payloads, resp.GetEvents()[0].GetEvent().GetPayload())
	}
	if !bytes.Equal(payloads[0], payloads[1]) {
		t.Fatalf("the two spellings encode differently:\n%x\n%x", payloads[0], payloads[1])
	}
	var rec map[string]any
	if err := avro.Unmarshal(avro.MustParse(fakepubsub.AccountChangeEventLogicalSchema), payloads[1], &rec); err != nil {
		t.Fatal(err)
	}
	h := rec["ChangeEventHeader"].(map[string]any)
	if got, ok := h["commitTimestamp"].(time.Time); !ok || !got.Equal(commit) || rec["CreatedDate"] == nil {
		t.Fatalf("decoded %v", rec)
	}
}
