// Package fakepubsub is an in-process Salesforce Pub/Sub API for tests: a
// real gRPC server implementing eventbus.v1.PubSub's Subscribe, GetSchema
// and GetTopic over topics holding Avro-encoded events, with Salesforce's
// flow control (events only against requests, at most 100 outstanding),
// keepalives, opaque replay ids, retention and its error trailers, and
// faults to inject.
//
// Replay ids are opaque, as Salesforce documents them: 9 random-looking
// bytes per position, neither a counter nor contiguous, so a client that
// computes with them fails. The fake orders them through a table; tests
// name positions with ReplayID and read them back with Position.
//
// Test support only: production code must not import it.
// Imports: the generated eventbus API and nothing else of sf2loki.
package fakepubsub

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"net"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hamba/avro/v2"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/sf2loki/sf2loki/internal/adapters/salesforce/pubsub/eventbus"
)

// Error codes Salesforce puts in the error-code trailer.
const (
	// CodeReplayCorrupted: the CUSTOM replay id is not one of the topic's,
	// or its event is past the retention.
	CodeReplayCorrupted = "sfdc.platform.eventbus.grpc.subscription.fetch.replayid.corrupted"
	// CodeReplayValidation: CUSTOM without a replay id.
	CodeReplayValidation = "sfdc.platform.eventbus.grpc.subscription.fetch.replayid.validation.failed"
	CodeAuth             = "sfdc.platform.eventbus.grpc.service.auth.error"
	CodeTopicNotFound    = "sfdc.platform.eventbus.grpc.topic.not.found"
)

// Subscription records one Subscribe call's first request.
type Subscription struct {
	Topic    string
	Preset   eventbus.ReplayPreset
	ReplayID []byte // the CUSTOM replay id as sent; nil otherwise
	// Position is where a CUSTOM replay id points (the number of events
	// before it, see ReplayID), -1 when there is none or the topic does not
	// know it.
	Position    int
	AccessToken string
	TenantID    string
	// UserAgent is the stream's user-agent metadata (gRPC puts the
	// client's own after the application's).
	UserAgent string
}

type topic struct {
	schemaID string
	events   []*eventbus.ProducerEvent // event i has the replay id of position i+1
	denied   bool
	salt     [16]byte
	ids      [][]byte       // ids[p]: the replay id of position p (after p events)
	position map[string]int // a replay id's position
	wire     [][]byte       // wire[i]: event i's ConsumerEvent, marshalled once
}

// consumerEvent returns event i's ConsumerEvent as protobuf marshals it,
// marshalling the events up to it the first time. Callers hold the
// server's lock.
func (t *topic) consumerEvent(i int) []byte {
	for len(t.wire) <= i {
		j := len(t.wire)
		b, err := proto.Marshal(&eventbus.ConsumerEvent{Event: t.events[j], ReplayId: t.replayID(j + 1)})
		if err != nil {
			panic("fakepubsub: " + err.Error())
		}
		t.wire = append(t.wire, b)
	}
	return t.wire[i]
}

// rawResponse is a FetchResponse already marshalled: the server's codec
// sends its bytes as they are, so a response of 100 events costs the fake
// a copy, not a marshal (the daemon under test shares the machine).
type rawResponse []byte

// fetchResponse marshals a FetchResponse of the given marshalled events as
// proto.Marshal does: fields in number order, zero values omitted.
func fetchResponse(events [][]byte, latest []byte, pending int32) rawResponse {
	n := 0
	for _, e := range events {
		n += 1 + protowire.SizeBytes(len(e))
	}
	b := make([]byte, 0, n+2*len(latest)+32)
	for _, e := range events {
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendBytes(b, e)
	}
	if len(latest) > 0 {
		b = protowire.AppendTag(b, 2, protowire.BytesType)
		b = protowire.AppendBytes(b, latest)
	}
	b = protowire.AppendTag(b, 3, protowire.BytesType)
	b = protowire.AppendString(b, "fake")
	if pending != 0 {
		b = protowire.AppendTag(b, 4, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(pending)) //nolint:gosec // 0–100
	}
	return b
}

// serverCodec is gRPC's protobuf codec, but for a rawResponse, sent as is.
type serverCodec struct{ encoding.CodecV2 }

func (c serverCodec) Marshal(v any) (mem.BufferSlice, error) {
	if r, ok := v.(rawResponse); ok {
		return mem.BufferSlice{mem.SliceBuffer(r)}, nil
	}
	return c.CodecV2.Marshal(v)
}

// replayID returns position p's replay id, minting ids up to p. Callers
// hold the server's lock.
func (t *topic) replayID(p int) []byte {
	for len(t.ids) <= p {
		var n [8]byte
		binary.BigEndian.PutUint64(n[:], uint64(len(t.ids))) //nolint:gosec // a position, never negative
		sum := sha256.Sum256(append(t.salt[:], n[:]...))
		id := sum[:9]
		if _, dup := t.position[string(id)]; dup {
			panic("fakepubsub: replay id collision")
		}
		t.position[string(id)] = len(t.ids)
		t.ids = append(t.ids, id)
	}
	return slices.Clone(t.ids[p])
}

// Server is the fake Pub/Sub API.
type Server struct {
	eventbus.UnimplementedPubSubServer
	// Addr is host:port of the plaintext listener.
	Addr string

	mu      sync.Mutex
	changed chan struct{} // closed and replaced whenever events are appended
	topics  map[string]*topic
	schemas map[string]avro.Schema
	json    map[string]string

	// Unauthenticated fails the next Subscribe calls with UNAUTHENTICATED.
	Unauthenticated int
	// InvalidArgument fails the next Subscribe calls with INVALID_ARGUMENT
	// and these error-code trailers, in order ("" sends no trailer, as when
	// a proxy drops it).
	InvalidArgument []string
	// SchemaFailures fails the next GetSchema calls with UNAVAILABLE.
	SchemaFailures int
	// StallAfter makes the next stream on a topic go silent (no events, no
	// keepalives) after sending this many events.
	StallAfter map[string]int
	// RetainFrom expires a topic's events before this position (the n-th
	// event appended, from 1): asking to resume from an older replay id is
	// INVALID_ARGUMENT replayid.corrupted.
	RetainFrom map[string]int
	// KeepaliveEvery is how long a stream with requests pending waits for
	// events before it sends an empty response carrying the latest replay
	// id (Salesforce: within 270s). Default 100ms.
	KeepaliveEvery time.Duration

	subs           []Subscription
	maxOutstanding int
	sent           int
	schemaCalls    int
}

// Start serves a fake on a loopback port until the test ends.
func Start(t testing.TB) *Server {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{Addr: lis.Addr().String(), changed: make(chan struct{}), topics: map[string]*topic{},
		schemas: map[string]avro.Schema{}, json: map[string]string{}, StallAfter: map[string]int{}, RetainFrom: map[string]int{}}
	g := grpc.NewServer(grpc.ForceServerCodecV2(serverCodec{encoding.GetCodecV2("proto")}))
	eventbus.RegisterPubSubServer(g, s)
	go func() { _ = g.Serve(lis) }()
	t.Cleanup(g.Stop)
	return s
}

// AddTopic creates a topic whose events use the Avro schema schemaJSON.
func (s *Server) AddTopic(name, schemaJSON string) {
	sch := avro.MustParse(schemaJSON)
	sum := sha256.Sum256([]byte(schemaJSON))
	id := hex.EncodeToString(sum[:8])
	s.mu.Lock()
	defer s.mu.Unlock()
	s.schemas[id], s.json[id] = sch, schemaJSON
	t := &topic{schemaID: id, position: map[string]int{}}
	_, _ = rand.Read(t.salt[:])
	s.topics[name] = t
}

// ReplayID is the opaque replay id of a topic's position n: the n-th event
// appended (from 1), or 0 for the position before the first event.
func (s *Server) ReplayID(name string, n int) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.topics[name].replayID(n)
}

// Position is the position a replay id of the topic points to (see
// ReplayID); false when the topic never issued it.
func (s *Server) Position(name string, id []byte) (int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	p, ok := s.topics[name].position[string(id)]
	return p, ok
}

// Deny makes GetTopic report can_subscribe false for a topic.
func (s *Server) Deny(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.topics[name].denied = true
}

// Append appends events, Avro-encoded with the topic's schema (a union of
// null and a record takes {"<full name>": {...}}; a datetime is epoch
// milliseconds, whether the schema spells it as a plain long or with the
// timestamp-millis logical type), and returns the last one's replay id.
func (s *Server) Append(name string, records ...map[string]any) []byte {
	s.mu.Lock()
	sch := s.schemas[s.topics[name].schemaID]
	s.mu.Unlock()
	payloads := make([][]byte, len(records))
	for i, r := range records {
		b, err := avro.Marshal(sch, logicalTimes(sch, r))
		if err != nil {
			panic(fmt.Sprintf("fakepubsub: encoding %v: %v", r, err))
		}
		payloads[i] = b
	}
	return s.AppendRaw(name, payloads...)
}

// AppendRaw appends events with these payloads as they are (for
// undecodable ones) and returns the last one's replay id.
func (s *Server) AppendRaw(name string, payloads ...[]byte) []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.topics[name]
	for _, p := range payloads {
		t.events = append(t.events, &eventbus.ProducerEvent{Id: fmt.Sprintf("ev-%d", len(t.events)+1), SchemaId: t.schemaID, Payload: p})
	}
	if len(t.events) > 0 {
		t.consumerEvent(len(t.events) - 1) // stored as it is sent, as a broker stores it
	}
	close(s.changed)
	s.changed = make(chan struct{})
	return t.replayID(len(t.events))
}

// logicalTimes returns v with every epoch-millisecond int64 the schema
// declares as a timestamp-millis long turned into the time.Time the
// encoder takes for it.
func logicalTimes(schema avro.Schema, v any) any {
	switch sc := schema.(type) {
	case *avro.RefSchema:
		return logicalTimes(sc.Schema(), v)
	case *avro.RecordSchema:
		m, ok := v.(map[string]any)
		if !ok {
			return v
		}
		out := make(map[string]any, len(m))
		for k, fv := range m {
			out[k] = fv
		}
		for _, f := range sc.Fields() {
			if fv, ok := m[f.Name()]; ok {
				out[f.Name()] = logicalTimes(f.Type(), fv)
			}
		}
		return out
	case *avro.UnionSchema:
		if v == nil {
			return nil
		}
		if m, ok := v.(map[string]any); ok && len(m) == 1 {
			for _, t := range sc.Types() {
				name := string(t.Type())
				if n, ok := t.(avro.NamedSchema); ok {
					name = n.FullName()
				}
				if inner, ok := m[name]; ok {
					return map[string]any{name: logicalTimes(t, inner)}
				}
			}
			return v
		}
		for _, t := range sc.Types() {
			if t.Type() != avro.Null {
				if _, isRec := t.(*avro.RecordSchema); !isRec {
					return logicalTimes(t, v)
				}
			}
		}
		return v
	case *avro.PrimitiveSchema:
		if ms, ok := v.(int64); ok && sc.Logical() != nil && sc.Logical().Type() == avro.TimestampMillis {
			return time.UnixMilli(ms).UTC()
		}
		return v
	default:
		return v
	}
}

// Subscriptions returns the Subscribe calls so far.
func (s *Server) Subscriptions() []Subscription {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.subs)
}

// MaxOutstandingEvents is how many events a subscription may have
// requested and not yet received: Salesforce treats more as this many.
const MaxOutstandingEvents = 100

// MaxOutstanding is the most events any stream had requested and not yet
// received, as asked (more than MaxOutstandingEvents is served as that
// many, as Salesforce serves it).
func (s *Server) MaxOutstanding() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.maxOutstanding
}

// Sent is how many events all streams have sent.
func (s *Server) Sent() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.sent
}

// SchemaCalls is how many GetSchema calls were answered.
func (s *Server) SchemaCalls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.schemaCalls
}

func fail(c codes.Code, code, msg string, stream grpc.ServerStream) error {
	if code != "" {
		stream.SetTrailer(metadata.Pairs("error-code", code))
	}
	return status.Error(c, msg+" rpcId: fake")
}

// GetSchema answers the schema JSON by id.
func (s *Server) GetSchema(_ context.Context, r *eventbus.SchemaRequest) (*eventbus.SchemaInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.schemaCalls++
	if s.SchemaFailures > 0 {
		s.SchemaFailures--
		return nil, status.Error(codes.Unavailable, "schema.api.unavailable")
	}
	j, ok := s.json[r.GetSchemaId()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "no schema %s", r.GetSchemaId())
	}
	return &eventbus.SchemaInfo{SchemaJson: j, SchemaId: r.GetSchemaId()}, nil
}

// GetTopic answers a topic's permissions.
func (s *Server) GetTopic(_ context.Context, r *eventbus.TopicRequest) (*eventbus.TopicInfo, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t, ok := s.topics[r.GetTopicName()]
	if !ok {
		return nil, status.Errorf(codes.NotFound, "topic %s not found", r.GetTopicName())
	}
	return &eventbus.TopicInfo{TopicName: r.GetTopicName(), CanSubscribe: !t.denied, SchemaId: t.schemaID}, nil
}

// Subscribe streams a topic's events against the client's requests.
func (s *Server) Subscribe(stream grpc.BidiStreamingServer[eventbus.FetchRequest, eventbus.FetchResponse]) error {
	md, _ := metadata.FromIncomingContext(stream.Context())
	get := func(k string) string {
		if v := md.Get(k); len(v) > 0 {
			return v[0]
		}
		return ""
	}
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	sub := Subscription{Topic: first.GetTopicName(), Preset: first.GetReplayPreset(), Position: -1, AccessToken: get("accesstoken"), TenantID: get("tenantid"),
		UserAgent: get("user-agent")}
	s.mu.Lock()
	t, ok := s.topics[sub.Topic]
	if first.GetReplayPreset() == eventbus.ReplayPreset_CUSTOM {
		sub.ReplayID = slices.Clone(first.GetReplayId())
		if p, known := t.knows(sub.ReplayID); ok && known {
			sub.Position = p
		}
	}
	s.subs = append(s.subs, sub)
	var refuse error
	switch {
	case sub.AccessToken == "" || get("instanceurl") == "" || sub.TenantID == "":
		refuse = fail(codes.Unauthenticated, "sfdc.platform.eventbus.grpc.service.auth.headers.invalid", "missing accesstoken, instanceurl or tenantid", stream)
	case s.Unauthenticated > 0:
		s.Unauthenticated--
		refuse = fail(codes.Unauthenticated, CodeAuth, "session expired", stream)
	case len(s.InvalidArgument) > 0:
		refuse = fail(codes.InvalidArgument, s.InvalidArgument[0], "refused", stream)
		s.InvalidArgument = s.InvalidArgument[1:]
	case !ok:
		refuse = fail(codes.NotFound, CodeTopicNotFound, "no topic "+sub.Topic, stream)
	case first.GetNumRequested() <= 0:
		refuse = fail(codes.InvalidArgument, "sfdc.platform.eventbus.grpc.subscription.fetch.requested.events.invalid", "num_requested must be > 0", stream)
	}
	next := 0 // index of the next event to send
	if refuse == nil {
		retain := s.RetainFrom[sub.Topic]
		switch first.GetReplayPreset() {
		case eventbus.ReplayPreset_LATEST:
			next = len(t.events)
		case eventbus.ReplayPreset_EARLIEST:
			next = max(retain, 1) - 1
		case eventbus.ReplayPreset_CUSTOM:
			switch {
			case len(sub.ReplayID) == 0:
				refuse = fail(codes.InvalidArgument, CodeReplayValidation, "The Replay ID validation failed.", stream)
			case sub.Position < 0 || sub.Position < retain || sub.Position > len(t.events):
				refuse = fail(codes.InvalidArgument, CodeReplayCorrupted, "The Replay ID validation failed.", stream)
			}
			next = sub.Position
		}
	}
	if refuse != nil {
		s.mu.Unlock()
		return refuse
	}
	stallAfter, stalls := s.StallAfter[sub.Topic] // for an accepted stream only
	delete(s.StallAfter, sub.Topic)
	keepalive := s.KeepaliveEvery
	s.mu.Unlock()
	if keepalive <= 0 {
		keepalive = 100 * time.Millisecond
	}

	requests := make(chan int32, 16)
	go func() {
		for {
			r, err := stream.Recv()
			if err != nil {
				close(requests)
				return
			}
			requests <- r.GetNumRequested()
		}
	}()
	// Salesforce counts what the requests add up to against 100: asking
	// for more is treated as 100. MaxOutstanding reports what was asked.
	s.noteOutstanding(int(first.GetNumRequested()))
	outstanding := min(int(first.GetNumRequested()), MaxOutstandingEvents)
	sentHere := 0
	stalled := func() bool { return stalls && sentHere >= stallAfter }
	var batch [][]byte // the marshalled events of a response
	for {
		s.mu.Lock()
		changed := s.changed
		batch = batch[:0]
		for outstanding > 0 && next < len(t.events) && !stalled() {
			batch = append(batch, t.consumerEvent(next))
			next++
			outstanding--
			sentHere++
		}
		s.sent += len(batch)
		latest := t.replayID(len(t.events))
		last := t.replayID(next)
		s.mu.Unlock()
		if len(batch) > 0 {
			// The latest replay id of a response of events is its last
			// event's.
			if err := stream.SendMsg(fetchResponse(batch, last, int32(outstanding))); err != nil { //nolint:gosec // ≤ 100
				return err
			}
			continue
		}
		var tick <-chan time.Time
		if outstanding > 0 && !stalled() {
			tick = time.After(keepalive)
		}
		select {
		case <-stream.Context().Done():
			return nil
		case n, ok := <-requests:
			if !ok {
				return nil
			}
			s.noteOutstanding(outstanding + int(n))
			outstanding = min(outstanding+int(n), MaxOutstandingEvents)
		case <-changed:
		case <-tick:
			if err := stream.Send(&eventbus.FetchResponse{LatestReplayId: latest, PendingNumRequested: int32(outstanding), RpcId: "fake"}); err != nil { //nolint:gosec // ≤ 100
				return err
			}
		}
	}
}

// knows returns the position of a replay id the topic issued; t may be nil.
func (t *topic) knows(id []byte) (int, bool) {
	if t == nil {
		return -1, false
	}
	p, ok := t.position[string(id)]
	return p, ok
}

func (s *Server) noteOutstanding(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.maxOutstanding = max(s.maxOutstanding, n)
}
