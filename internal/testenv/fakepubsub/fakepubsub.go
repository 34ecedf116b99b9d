// Package fakepubsub is an in-process Salesforce Pub/Sub API for tests: a
// real gRPC server implementing eventbus.v1.PubSub's Subscribe, GetSchema
// and GetTopic over topics holding Avro-encoded events, with Salesforce's
// flow control (events only against requests, at most 100 outstanding),
// keepalives, replay ids, retention and its error trailers, and faults to
// inject.
//
// Test support only: production code must not import it.
package fakepubsub

import (
	"context"
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
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sf2loki/sf2loki/internal/adapters/salesforce/pubsub/eventbus"
)

// Error codes Salesforce puts in the error-code trailer.
const (
	CodeReplayCorrupted = "sfdc.platform.eventbus.grpc.subscription.fetch.replayid.corrupted"
	CodeAuth            = "sfdc.platform.eventbus.grpc.service.auth.error"
	CodeTopicNotFound   = "sfdc.platform.eventbus.grpc.topic.not.found"
)

// Subscription records one Subscribe call's first request.
type Subscription struct {
	Topic       string
	Preset      eventbus.ReplayPreset
	ReplayID    uint64 // the CUSTOM replay id, decoded; 0 otherwise
	AccessToken string
	TenantID    string
}

type topic struct {
	schemaID string
	events   []*eventbus.ProducerEvent // event i has replay id i+1
	denied   bool
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
	// and these error-code trailers, in order.
	InvalidArgument []string
	// SchemaFailures fails the next GetSchema calls with UNAVAILABLE.
	SchemaFailures int
	// StallAfter makes the next stream on a topic go silent (no events, no
	// keepalives) after sending this many events.
	StallAfter map[string]int
	// RetainFrom expires a topic's events before this replay id: asking to
	// resume from an older one is INVALID_ARGUMENT replayid.corrupted.
	RetainFrom map[string]uint64
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
		schemas: map[string]avro.Schema{}, json: map[string]string{}, StallAfter: map[string]int{}, RetainFrom: map[string]uint64{}}
	g := grpc.NewServer()
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
	s.topics[name] = &topic{schemaID: id}
}

// Deny makes GetTopic report can_subscribe false for a topic.
func (s *Server) Deny(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.topics[name].denied = true
}

// Append appends events, Avro-encoded with the topic's schema (a union of
// null and a record takes {"<full name>": {...}}), and returns the last
// replay id.
func (s *Server) Append(name string, records ...map[string]any) uint64 {
	s.mu.Lock()
	sch := s.schemas[s.topics[name].schemaID]
	s.mu.Unlock()
	payloads := make([][]byte, len(records))
	for i, r := range records {
		b, err := avro.Marshal(sch, r)
		if err != nil {
			panic(fmt.Sprintf("fakepubsub: encoding %v: %v", r, err))
		}
		payloads[i] = b
	}
	return s.AppendRaw(name, payloads...)
}

// AppendRaw appends events with these payloads as they are (for
// undecodable ones) and returns the last replay id.
func (s *Server) AppendRaw(name string, payloads ...[]byte) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.topics[name]
	for _, p := range payloads {
		t.events = append(t.events, &eventbus.ProducerEvent{Id: fmt.Sprintf("ev-%d", len(t.events)+1), SchemaId: t.schemaID, Payload: p})
	}
	close(s.changed)
	s.changed = make(chan struct{})
	return uint64(len(t.events))
}

// ReplayID is the wire form of a replay id.
func ReplayID(n uint64) []byte { return binary.BigEndian.AppendUint64(nil, n) }

// Subscriptions returns the Subscribe calls so far.
func (s *Server) Subscriptions() []Subscription {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.subs)
}

// MaxOutstanding is the most events any stream had requested and not yet
// received (Salesforce allows 100).
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
	stream.SetTrailer(metadata.Pairs("error-code", code))
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
	sub := Subscription{Topic: first.GetTopicName(), Preset: first.GetReplayPreset(), AccessToken: get("accesstoken"), TenantID: get("tenantid")}
	if first.GetReplayPreset() == eventbus.ReplayPreset_CUSTOM && len(first.GetReplayId()) == 8 {
		sub.ReplayID = binary.BigEndian.Uint64(first.GetReplayId())
	}
	s.mu.Lock()
	s.subs = append(s.subs, sub)
	t, ok := s.topics[sub.Topic]
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
	var next uint64 // index of the next event to send
	if refuse == nil {
		retain := s.RetainFrom[sub.Topic]
		switch first.GetReplayPreset() {
		case eventbus.ReplayPreset_LATEST:
			next = uint64(len(t.events))
		case eventbus.ReplayPreset_EARLIEST:
			next = max(retain, 1) - 1
		case eventbus.ReplayPreset_CUSTOM:
			if len(first.GetReplayId()) != 8 || sub.ReplayID < retain || sub.ReplayID > uint64(len(t.events)) {
				refuse = fail(codes.InvalidArgument, CodeReplayCorrupted, "replay id corrupted or expired", stream)
			}
			next = sub.ReplayID
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
	outstanding := int(first.GetNumRequested())
	s.noteOutstanding(outstanding)
	sentHere := 0
	stalled := func() bool { return stalls && sentHere >= stallAfter }
	for {
		s.mu.Lock()
		changed := s.changed
		var batch []*eventbus.ConsumerEvent
		for outstanding > 0 && next < uint64(len(t.events)) && !stalled() {
			batch = append(batch, &eventbus.ConsumerEvent{Event: t.events[next], ReplayId: ReplayID(next + 1)})
			next++
			outstanding--
			sentHere++
		}
		s.sent += len(batch)
		latest := ReplayID(uint64(len(t.events)))
		s.mu.Unlock()
		if len(batch) > 0 {
			if err := stream.Send(&eventbus.FetchResponse{Events: batch, LatestReplayId: batch[len(batch)-1].GetReplayId(),
				PendingNumRequested: int32(outstanding), RpcId: "fake"}); err != nil { //nolint:gosec // ≤ 100
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
			outstanding += int(n)
			s.noteOutstanding(outstanding)
		case <-changed:
		case <-tick:
			if err := stream.Send(&eventbus.FetchResponse{LatestReplayId: latest, PendingNumRequested: int32(outstanding), RpcId: "fake"}); err != nil { //nolint:gosec // ≤ 100
				return err
			}
		}
	}
}

func (s *Server) noteOutstanding(n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.maxOutstanding = max(s.maxOutstanding, n)
}
