// Package pubsub is the Salesforce Pub/Sub API source: one gRPC Subscribe
// stream per topic (Real-Time Event Monitoring streams, platform events,
// Change Data Capture), Avro payloads decoded with schemas fetched by id,
// replay ids as checkpoints, and flow control that stops asking for events
// while the pipeline is full.
//
// Imports: its generated eventbus client, the salesforce adapter (auth and
// REST), ports, domain, sfrules, buildinfo, jsonstr and lograte; never config,
// telemetry or anything above them.
package pubsub

import (
	"cmp"
	"context"
	"crypto/tls"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/keepalive"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sf2loki/sf2loki/internal/adapters/lograte"
	"github.com/sf2loki/sf2loki/internal/adapters/salesforce"
	"github.com/sf2loki/sf2loki/internal/adapters/salesforce/pubsub/eventbus"
	"github.com/sf2loki/sf2loki/internal/buildinfo"
	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/domain/shape"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/sfrules"
)

// DefaultEndpoint is Salesforce's Pub/Sub API.
const DefaultEndpoint = "api.pubsub.salesforce.com:7443"

// KeyPrefix prefixes the checkpoint keys: pubsub:<topic>.
const KeyPrefix = "pubsub:"

// MaxRequested is the most events one Subscribe stream may have requested
// and not yet received.
const MaxRequested = 100

// The HTTP/2 flow-control windows of the connection to the Pub/Sub API
// (see New).
const (
	streamWindow = 4 << 20
	connWindow   = 16 << 20
)

// Replay presets: where a topic without a stored replay id starts.
const (
	Latest   = "LATEST"
	Earliest = "EARLIEST"
	Custom   = "CUSTOM" // the stored replay id, else LATEST
)

// Spec configures the source.
type Spec struct {
	// Endpoint is host:port (default DefaultEndpoint).
	Endpoint string
	// Plaintext dials without TLS (tests and local proxies; the config
	// allows it only to loopback addresses).
	Plaintext bool
	// Topics are topic names (/event/LoginEventStream, /data/AccountChangeEvent)
	// or "*" for every *EventStream topic describeGlobal lists.
	Topics []string
	// Include and Exclude are globs over topic names (* matches any run of
	// characters, / included); a topic must match an Include (default "*")
	// and no Exclude.
	Include, Exclude []string
	// ReplayPreset is where a topic without a stored replay id starts:
	// Latest (default), Earliest, or Custom (the same as Latest). A stored
	// replay id always wins.
	ReplayPreset string
	// NumRequested is how many events a stream asks for at once (1–100,
	// default 100); it asks for the next window once half have arrived.
	NumRequested int
	// RediscoveryInterval re-lists the "*" topics this often and subscribes
	// to new ones; 0 lists them at start only.
	RediscoveryInterval time.Duration
	// StallTimeout reconnects a stream that delivered nothing (not even a
	// keepalive) for this long; default 300s (Salesforce sends a keepalive
	// within 270s).
	StallTimeout time.Duration
	// APIVersion is the REST version for describeGlobal (default 60.0).
	APIVersion string
	// MaxBackoff caps the reconnect backoff (default 30s, from 1s).
	MaxBackoff time.Duration
	// Owners, if set, is the org's overlap registry: a "*" topic whose
	// category another source ingests is skipped (named topics never are).
	Owners *domain.Owners
	// Shaper transforms and samples the events, by topic (nil: every event
	// as decoded). Sampling decides by the replay id (lower-case hex). An
	// event left out is committed with a checkpoint-only entry; an entry's
	// time comes from the event as decoded.
	Shaper *shape.Shaper
}

// Hooks count what the source survives; nil hooks are skipped.
type Hooks struct {
	// Undecodable counts a skipped event.
	Undecodable func(topic string)
	// ReplayFallback counts a stored replay id Salesforce refused as
	// corrupt or expired: the topic restarts from EARLIEST.
	ReplayFallback func(topic string)
	// Stalled counts a stream the watchdog closed.
	Stalled func(topic string)
	// Reconnect counts a stream that ended and is opened again, by reason
	// (stalled, unauthenticated, replay_fallback, invalid_argument, schema,
	// unavailable, error).
	Reconnect func(topic, reason string)
	// GarbageCheckpoint counts a stored replay id that is not base64: the
	// topic starts from the preset.
	GarbageCheckpoint func(topic string)
	// Event sees every event a stream delivers (before transforms and
	// sampling; keepalives are not events), with its time (zero for one
	// that does not decode).
	Event func(topic string, t time.Time)
	// BitmapUndecodable counts a change event shipped with a
	// ChangeEventHeader field list as it came (its bitmaps do not decode
	// against the event's schema).
	BitmapUndecodable func(topic string)
	// Gap counts a gap change event (changeType GAP_*): Salesforce could
	// not send the change's detail, only which records it touched.
	Gap func(topic string)
}

// Source subscribes to Pub/Sub topics.
type Source struct {
	auth    *salesforce.Auth
	spec    Spec
	conn    *grpc.ClientConn
	client  eventbus.PubSubClient
	schemas *schemas
	clock   ports.Clock
	log     *slog.Logger
	include []shape.Glob
	exclude []shape.Glob
	untimed sync.Map // topics whose untimed event was logged
	// undecodable rate-limits the warning of an event skipped, per topic.
	undecodable lograte.Limiter
	// bitmaps and gaps rate-limit the warnings of change events shipped
	// with raw bitmaps and of gap events, per topic.
	bitmaps, gaps lograte.Limiter
	// Hooks are set before Run.
	Hooks Hooks
}

// New validates spec and prepares the connection (made on first use).
func New(auth *salesforce.Auth, spec Spec, clk ports.Clock, log *slog.Logger) (*Source, error) {
	if len(spec.Topics) == 0 {
		return nil, errors.New("salesforce pubsub: topics is empty; name topics like /event/LoginEventStream, or \"*\"")
	}
	for _, t := range spec.Topics {
		if t != "*" && !sfrules.ValidTopic(t) {
			return nil, fmt.Errorf("salesforce pubsub: topic %q is not /event/<Name> or /data/<Name>", t)
		}
	}
	if spec.Endpoint == "" {
		spec.Endpoint = DefaultEndpoint
	}
	switch spec.ReplayPreset {
	case "":
		spec.ReplayPreset = Latest
	case Latest, Earliest, Custom:
	default:
		return nil, fmt.Errorf("salesforce pubsub: replay_preset %q is not LATEST, EARLIEST or CUSTOM", spec.ReplayPreset)
	}
	if spec.NumRequested == 0 {
		spec.NumRequested = MaxRequested
	}
	if spec.NumRequested < 1 || spec.NumRequested > MaxRequested {
		return nil, fmt.Errorf("salesforce pubsub: num_requested %d is outside 1–%d", spec.NumRequested, MaxRequested)
	}
	if spec.StallTimeout <= 0 {
		spec.StallTimeout = 300 * time.Second
	}
	if spec.MaxBackoff <= 0 {
		spec.MaxBackoff = 30 * time.Second
	}
	if spec.APIVersion == "" {
		spec.APIVersion = "60.0"
	}
	if len(spec.Include) == 0 {
		spec.Include = []string{"*"}
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	creds := credentials.NewTLS(&tls.Config{MinVersion: tls.VersionTLS12})
	if spec.Plaintext {
		creds = insecure.NewCredentials()
	}
	conn, err := grpc.NewClient(spec.Endpoint, grpc.WithTransportCredentials(creds), grpc.WithUserAgent(buildinfo.UserAgent()),
		grpc.WithKeepaliveParams(keepalive.ClientParameters{Time: 30 * time.Second, Timeout: 10 * time.Second, PermitWithoutStream: true}),
		// Static HTTP/2 windows: a stream acknowledges every 1 MiB it
		// reads (every 16 KiB with the default 64 KiB), with no BDP pings.
		// What the connection buffers unread stays bounded by its window,
		// 16 MiB (the most the default's BDP estimation grows it to), and a
		// stream's by 4 MiB (100 events of 40 KiB in flight) or one message
		// (MaxCallRecvMsgSize).
		grpc.WithInitialWindowSize(streamWindow), grpc.WithInitialConnWindowSize(connWindow),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(128<<20)))
	if err != nil {
		return nil, fmt.Errorf("salesforce pubsub: endpoint %q: %w", spec.Endpoint, err)
	}
	s := &Source{auth: auth, spec: spec, conn: conn, client: eventbus.NewPubSubClient(conn), clock: clk, log: log,
		include: globs(spec.Include), exclude: globs(spec.Exclude)}
	s.schemas = newSchemas(s.fetchSchema)
	return s, nil
}

// globs compiles topic globs: * matches any run of characters, ? one
// (shape.Glob, the transforms' globs).
func globs(patterns []string) []shape.Glob {
	out := make([]shape.Glob, 0, len(patterns))
	for _, p := range patterns {
		out = append(out, shape.CompileGlob(p))
	}
	return out
}

func matchAny(gs []shape.Glob, s string) bool {
	return slices.ContainsFunc(gs, func(g shape.Glob) bool { return g.Match(s) })
}

// Name implements ports.Source.
func (s *Source) Name() string { return "pubsub" }

// Close closes the gRPC connection (the daemon's source lives as long as
// the process; the doctor closes its own).
func (s *Source) Close() error { return s.conn.Close() }

// Lane implements ports.Source: streams are realtime.
func (s *Source) Lane() ports.Lane { return ports.LaneRealtime }

// metadata is the per-call authentication Salesforce reads.
func (s *Source) metadata(ctx context.Context) (context.Context, *salesforce.Token, error) {
	tok, err := s.auth.Token(ctx)
	if err != nil {
		return nil, nil, err
	}
	org, err := s.auth.OrgID(ctx)
	if err != nil {
		return nil, nil, err
	}
	return metadata.NewOutgoingContext(ctx, metadata.Pairs("accesstoken", tok.AccessToken, "instanceurl", tok.InstanceURL, "tenantid", org)), tok, nil
}

func (s *Source) fetchSchema(ctx context.Context, id string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	mctx, tok, err := s.metadata(ctx)
	if err != nil {
		return "", err
	}
	info, err := s.client.GetSchema(mctx, &eventbus.SchemaRequest{SchemaId: id})
	if status.Code(err) == codes.Unauthenticated {
		s.auth.Invalidate(tok)
	}
	if err != nil {
		return "", err
	}
	return info.GetSchemaJson(), nil
}

// TopicInfo asks GetTopic about topic (for the doctor).
func (s *Source) TopicInfo(ctx context.Context, topic string) (*eventbus.TopicInfo, error) {
	mctx, tok, err := s.metadata(ctx)
	if err != nil {
		return nil, err
	}
	info, err := s.client.GetTopic(mctx, &eventbus.TopicRequest{TopicName: topic})
	if status.Code(err) == codes.Unauthenticated {
		s.auth.Invalidate(tok)
	}
	return info, err
}

// Topics returns the configured topics, "*" expanded with describeGlobal
// and every topic filtered by include and exclude.
func (s *Source) Topics(ctx context.Context) ([]string, error) {
	var out []string
	var err error
	for _, t := range s.spec.Topics {
		if t != "*" {
			out = append(out, t)
			continue
		}
		var found []string
		found, err = s.discover(ctx)
		out = append(out, found...)
	}
	slices.Sort(out)
	out = slices.Compact(out)
	out = slices.DeleteFunc(out, func(t string) bool { return !matchAny(s.include, t) || matchAny(s.exclude, t) })
	return out, err
}

// discover lists the *EventStream objects (the Real-Time Event Monitoring
// streams) as /event/<Name> topics.
func (s *Source) discover(ctx context.Context) ([]string, error) {
	var d struct {
		SObjects []struct {
			Name string `json:"name"`
		} `json:"sobjects"`
	}
	if err := salesforce.GetJSON(ctx, s.auth, fmt.Sprintf("/services/data/v%s/sobjects/", s.spec.APIVersion), &d); err != nil {
		return nil, fmt.Errorf("salesforce pubsub: describeGlobal: %w", err)
	}
	var out []string
	for _, o := range d.SObjects {
		if strings.HasSuffix(o.Name, "EventStream") && sfrules.ValidName(o.Name) {
			out = append(out, "/event/"+o.Name)
		}
	}
	return out, nil
}

// Run implements ports.Source: one subscription per topic; with "*" the
// topics are listed again every RediscoveryInterval and new ones joined.
func (s *Source) Run(ctx context.Context, resume func(string) (string, bool), emit func(ports.Entry) error) error {
	var wg sync.WaitGroup
	defer wg.Wait()
	running := map[string]bool{}
	listed := false // a "*" listing succeeded
	join := func() {
		topics, err := s.Topics(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			s.log.Warn("pubsub: cannot list the \"*\" topics; subscribing to the named ones and trying again later", "error", err)
		}
		topics, listed = s.owned(topics, err), listed || err == nil
		for _, t := range topics {
			if !running[t] {
				running[t] = true
				s.log.Info("pubsub: subscribing", "topic", t)
				wg.Go(func() { s.follow(ctx, t, resume, emit) })
			}
		}
		if len(running) == 0 {
			s.log.Warn("pubsub: no topic to subscribe to", "topics", s.spec.Topics, "include", s.spec.Include, "exclude", s.spec.Exclude)
		}
	}
	join()
	discovering := slices.Contains(s.spec.Topics, "*")
	for {
		var again <-chan time.Time
		switch {
		case discovering && !listed:
			// Until a listing succeeds, every minute (the EventLogFile
			// "*" may be waiting for it).
			again = s.clock.After(min(time.Minute, cmp.Or(s.spec.RediscoveryInterval, time.Minute)))
		case discovering && (s.spec.RediscoveryInterval > 0 || len(running) == 0):
			again = s.clock.After(cmp.Or(s.spec.RediscoveryInterval, time.Minute))
		}
		select {
		case <-ctx.Done():
			return nil
		case <-again:
			join()
		}
	}
}

// position is where a topic's next stream starts.
type position struct {
	replayID []byte // nil: the preset
	preset   eventbus.ReplayPreset
	// lastTime is the time of the last event handed to the pipeline from
	// this position on (zero: none yet), for an event that carries no time.
	lastTime time.Time
	// labels and metadata are the topic's entry maps, one labels map and
	// one metadata map per level, shared by its entries (read-only once
	// made, as every entry's maps are).
	labels   map[string]string
	metadata map[string]map[string]string
	// levels remembers the fast path's levels.
	levels levelMemo
	// lines writes the fast path's lines. A position is never copied:
	// two copies of a writer would write their lines over each other's.
	lines writer
}

// level is d's level (decoded.level), remembered on the fast path.
func (p *position) level(d *decoded) string {
	if d.line == "" {
		return d.level()
	}
	return p.levels.level(&d.probe)
}

// entryMaps returns the topic's shared labels and the metadata of level.
func (p *position) entryMaps(topic, level string) (labels, metadata map[string]string) {
	if p.labels == nil {
		p.labels = map[string]string{"source": "pubsub", "event_type": topic[strings.LastIndexByte(topic, '/')+1:]}
		p.metadata = map[string]map[string]string{}
	}
	md, ok := p.metadata[level]
	if !ok {
		md = map[string]string{"level": level}
		p.metadata[level] = md
	}
	return p.labels, md
}

// start reads the stored replay id; an unreadable one starts from the
// preset, with an ERROR naming the repair.
func (s *Source) start(topic string, resume func(string) (string, bool)) position {
	preset := eventbus.ReplayPreset_LATEST
	if s.spec.ReplayPreset == Earliest {
		preset = eventbus.ReplayPreset_EARLIEST
	}
	key := KeyPrefix + topic
	if v, ok := resume(key); ok && v != "" {
		id, err := replayID(v)
		if err == nil {
			return position{replayID: id}
		}
		s.log.Error("pubsub: unreadable checkpoint; the topic starts from replay_preset, and the next commit replaces the value",
			"key", key, "value", v, "error", err, "preset", s.spec.ReplayPreset, "repair", salesforce.RepairHint(key, "AAAAAAAAAAE="))
		if s.Hooks.GarbageCheckpoint != nil {
			s.Hooks.GarbageCheckpoint(topic)
		}
	}
	return position{preset: preset}
}

// replayID decodes a stored replay id.
func replayID(v string) ([]byte, error) {
	id, err := base64.StdEncoding.DecodeString(v)
	if err != nil || len(id) == 0 {
		return nil, fmt.Errorf("%q is not a replay id: standard base64 of the id's bytes, like AAAAAAAAAAE=", v)
	}
	return id, nil
}

// CheckReplayID reports whether v is a replay id the source can resume
// from (the value of a pubsub:<topic> key).
func CheckReplayID(v string) error {
	_, err := replayID(v)
	return err
}

// follow keeps one topic subscribed until ctx ends: each stream resumes
// after the last replay id handed to the pipeline, after a backoff of 1s
// doubling to MaxBackoff (with jitter), reset once a stream delivers.
func (s *Source) follow(ctx context.Context, topic string, resume func(string) (string, bool), emit func(ports.Entry) error) {
	pos := s.start(topic, resume)
	first := min(time.Second, s.spec.MaxBackoff)
	backoff := first
	for {
		delivered, err := s.stream(ctx, topic, &pos, emit)
		if ctx.Err() != nil {
			return
		}
		reason := s.classify(topic, err, &pos)
		if s.Hooks.Reconnect != nil {
			s.Hooks.Reconnect(topic, reason)
		}
		if delivered {
			backoff = first
		}
		wait := backoff + rand.N(backoff/2+1) //nolint:gosec // jitter, not a secret
		s.log.Warn("pubsub: stream ended; reconnecting", "topic", topic, "reason", reason, "in", wait.Round(time.Millisecond), "error", err)
		select {
		case <-ctx.Done():
			return
		case <-s.clock.After(wait):
		}
		backoff = min(2*backoff, s.spec.MaxBackoff)
	}
}

// ErrStalled is a stream that delivered nothing for StallTimeout.
var ErrStalled = errors.New("salesforce pubsub: no FetchResponse within the stall timeout")

// classify names why a stream ended and reacts: a refused token is
// dropped (the next stream mints one); a replay id Salesforce's error code
// calls corrupt or expired restarts the topic from EARLIEST (never LATEST,
// which would skip events); any other INVALID_ARGUMENT keeps the position.
func (s *Source) classify(topic string, err error, pos *position) string {
	st, _ := status.FromError(err)
	switch {
	case errors.Is(err, ErrStalled):
		if s.Hooks.Stalled != nil {
			s.Hooks.Stalled(topic)
		}
		return "stalled"
	case errors.Is(err, ErrSchema):
		return "schema"
	case st.Code() == codes.Unauthenticated:
		return "unauthenticated" // stream() invalidated the token
	case st.Code() == codes.InvalidArgument && pos.replayID != nil && replayCorrupt(err):
		s.log.Error("pubsub: Salesforce refused the stored replay id (corrupt, or older than the 72h retention); restarting the topic from EARLIEST",
			"topic", topic, "replay_id", base64.StdEncoding.EncodeToString(pos.replayID), "error", err)
		*pos = position{preset: eventbus.ReplayPreset_EARLIEST}
		if s.Hooks.ReplayFallback != nil {
			s.Hooks.ReplayFallback(topic)
		}
		return "replay_fallback"
	case st.Code() == codes.InvalidArgument && pos.replayID != nil && errorCode(err) == "":
		key := KeyPrefix + topic
		s.log.Error("pubsub: Salesforce refused the subscription without an error-code trailer; keeping the position and retrying. "+
			"Only Salesforce's replay id error codes restart the topic from EARLIEST (which can replay up to 72h); "+
			"if a proxy drops the trailers and the stored replay id has expired, move the position by hand",
			"topic", topic, "replay_id", base64.StdEncoding.EncodeToString(pos.replayID), "error", err,
			"repair", salesforce.RepairHint(key, base64.StdEncoding.EncodeToString(pos.replayID)))
		return "invalid_argument"
	case st.Code() == codes.InvalidArgument:
		s.log.Error("pubsub: Salesforce refused the subscription; keeping the position and retrying", "topic", topic, "error", err)
		return "invalid_argument"
	case st.Code() == codes.Unavailable:
		return "unavailable"
	default:
		return "error"
	}
}

// errorCodeKey is the trailer holding Salesforce's error code.
const errorCodeKey = "error-code"

// The error codes with which Salesforce refuses a stored replay id: one
// that is corrupt or past the 72h retention, and a CUSTOM request whose
// replay id does not validate.
const (
	codeReplayCorrupted  = "sfdc.platform.eventbus.grpc.subscription.fetch.replayid.corrupted"
	codeReplayValidation = "sfdc.platform.eventbus.grpc.subscription.fetch.replayid.validation.failed"
)

// replayCorrupt reports whether an INVALID_ARGUMENT is about the replay id:
// the error-code trailer (carried in the error by stream()) says so. An
// error without the trailer is not: restarting from EARLIEST on a guess
// could replay 72 hours of events.
func replayCorrupt(err error) bool {
	switch errorCode(err) {
	case codeReplayCorrupted, codeReplayValidation:
		return true
	}
	return false
}

// errorCode is the error-code trailer stream() carried in err, "" when
// there was none.
func errorCode(err error) string {
	var te *trailerError
	if errors.As(err, &te) {
		return te.code
	}
	return ""
}

// trailerError carries a stream's error-code trailer with its status.
type trailerError struct {
	err  error
	code string
}

func (e *trailerError) Error() string {
	if e.code == "" {
		return e.err.Error()
	}
	return fmt.Sprintf("%v (%s %s)", e.err, errorCodeKey, e.code)
}

func (e *trailerError) Unwrap() error { return e.err }

// GRPCStatus lets status.FromError see through the wrapper.
func (e *trailerError) GRPCStatus() *status.Status { s, _ := status.FromError(e.err); return s }

// stream runs one Subscribe call from pos and moves pos past every event
// it hands to emit. It reports whether anything arrived.
func (s *Source) stream(ctx context.Context, topic string, pos *position, emit func(ports.Entry) error) (delivered bool, err error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	mctx, tok, err := s.metadata(ctx)
	if err != nil {
		return false, err
	}
	stream, err := s.client.Subscribe(mctx, grpc.ForceCodecV2(fetchCodec{}))
	if err != nil {
		return false, err
	}
	n := int32(s.spec.NumRequested) //nolint:gosec // 1–100, checked in New
	first := &eventbus.FetchRequest{TopicName: topic, NumRequested: n, ReplayPreset: pos.preset}
	if pos.replayID != nil {
		first.ReplayPreset, first.ReplayId = eventbus.ReplayPreset_CUSTOM, pos.replayID
	}
	if err := stream.Send(first); err != nil {
		return false, s.streamErr(ctx, stream, tok, err)
	}
	pending := n
	key := KeyPrefix + topic
	var values []string // the checkpoint values of a response's events
	watchdog := s.clock.NewTimer(s.spec.StallTimeout)
	defer watchdog.Stop()
	go func() {
		select {
		case <-watchdog.C():
			cancel(fmt.Errorf("%w (%s) on %s", ErrStalled, s.spec.StallTimeout, topic))
		case <-ctx.Done():
		}
	}()
	for {
		watchdog.Reset(s.spec.StallTimeout)
		resp, err := stream.Recv()
		watchdog.Stop() // time spent in emit below is the pipeline's, not a stall
		if err != nil {
			return delivered, s.streamErr(ctx, stream, tok, err)
		}
		delivered = true
		pending -= int32(len(resp.GetEvents())) //nolint:gosec // at most 100
		// Ask for the next window before handing this one over, so the
		// server sends it while these decode: one topic gets at most 100
		// events a round trip, and a round trip spent decoding is lost.
		// A full pipeline blocks emit below, so at most this window and
		// the one asked ahead are held. A failed Send ends the stream
		// once this window is handed over, so what arrived is not fetched
		// again.
		var sendErr error
		if pending <= n/2 {
			sendErr = stream.Send(&eventbus.FetchRequest{TopicName: topic, NumRequested: n - pending})
			pending = n
		}
		values = checkpointValues(values[:0], resp.GetEvents())
		for i, ev := range resp.GetEvents() {
			cp := ports.Checkpoint{Key: key, Value: values[i]}
			if err := s.handle(ctx, topic, ev, cp, pos, emit); err != nil {
				return delivered, err
			}
			pos.replayID = ev.GetReplayId()
		}
		if latest := resp.GetLatestReplayId(); len(resp.GetEvents()) == 0 && len(latest) > 0 && !slices.Equal(latest, pos.replayID) {
			// A keepalive: the topic's position moved past events this
			// subscription does not need (or none exist); store it so a
			// quiet topic's replay id never ages out of the retention.
			if err := emit(ports.Entry{CheckpointOnly: true, Checkpoint: checkpoint(topic, latest)}); err != nil {
				return delivered, err
			}
			pos.replayID = latest
		}
		if sendErr != nil {
			return delivered, s.streamErr(ctx, stream, tok, sendErr)
		}
	}
}

// streamErr returns the stream's terminal error with its error-code
// trailer, and drops a token the server refused.
func (s *Source) streamErr(ctx context.Context, stream grpc.BidiStreamingClient[eventbus.FetchRequest, eventbus.FetchResponse], tok *salesforce.Token, err error) error {
	if errors.Is(err, io.EOF) {
		_, err = stream.Recv() // Send reports EOF; Recv has the status
		if err == nil || errors.Is(err, io.EOF) {
			return errors.New("salesforce pubsub: the server closed the stream")
		}
	}
	if cause := context.Cause(ctx); errors.Is(cause, ErrStalled) {
		return cause
	}
	if status.Code(err) == codes.Unauthenticated {
		s.auth.Invalidate(tok)
	}
	code := ""
	if v := stream.Trailer().Get(errorCodeKey); len(v) > 0 {
		code = v[0]
	}
	return &trailerError{err: err, code: code}
}

// handle decodes one event and emits it; an undecodable one is skipped
// and counted, its replay id committed with a checkpoint-only entry, and
// so is one the transforms drop or sampling leaves out. A schema that
// cannot be fetched ends the stream (the event replays).
//
// Every copy of an event must be the same entry, so that the duplicates a
// failover replays collapse in Loki: labels, line and level come from the
// event, and so does the time (eventTime). An event with no time at all
// takes the time of the last event handed over on the topic; only one that
// no timed event preceded since the topic was followed (or fell back to
// EARLIEST) takes the time it arrived, logged once per topic.
//
// cp is the event's checkpoint: its replay id (checkpoint).
func (s *Source) handle(ctx context.Context, topic string, ev *eventbus.ConsumerEvent, cp ports.Checkpoint, pos *position, emit func(ports.Entry) error) error {
	// Without transforms or sampling, the fast path writes the line
	// straight from the payload.
	plan := s.spec.Shaper.For(topic)
	dec, err := s.schemas.decode(ctx, ev.GetEvent(), plan.Noop(), &pos.lines)
	switch {
	case errors.Is(err, ErrUndecodable):
		if s.Hooks.Event != nil {
			s.Hooks.Event(topic, time.Time{})
		}
		s.undecodable.Log(s.log, slog.LevelWarn, s.clock.Now(), topic, "pubsub: skipping an event that does not decode", "topic", topic, "error", err)
		if s.Hooks.Undecodable != nil {
			s.Hooks.Undecodable(topic)
		}
		return emit(ports.Entry{CheckpointOnly: true, Checkpoint: cp})
	case err != nil:
		return err
	}
	t, ok := dec.time()
	if s.Hooks.Event != nil {
		s.Hooks.Event(topic, t)
	}
	if dec.bitmapErr != nil {
		s.bitmaps.Log(s.log, slog.LevelWarn, s.clock.Now(), topic, "pubsub: a change event's field bitmaps do not decode against its schema; "+
			"the line keeps them as Salesforce sent them", "topic", topic, "event", ev.GetEvent().GetId(), "error", dec.bitmapErr)
		if s.Hooks.BitmapUndecodable != nil {
			s.Hooks.BitmapUndecodable(topic)
		}
	}
	gap := isGap(dec.changeType())
	if gap {
		s.gaps.Log(s.log, slog.LevelWarn, s.clock.Now(), topic, "pubsub: a gap change event: Salesforce could not send the change itself, "+
			"only the records it touched; read them from the org to reconcile (docs/operations.md, Gap change events)",
			"topic", topic, "change_type", dec.changeType(), "event", ev.GetEvent().GetId())
		if s.Hooks.Gap != nil {
			s.Hooks.Gap(topic)
		}
	}
	switch {
	case ok:
		pos.lastTime = t
	case !pos.lastTime.IsZero():
		t = pos.lastTime
	default:
		t = s.clock.Now().UTC()
		if _, warned := s.untimed.LoadOrStore(topic, true); !warned {
			s.log.Warn("pubsub: an event carries no time (no ChangeEventHeader.commitTimestamp, EventDate, CreatedDate or other datetime field) and follows none that does; "+
				"it is stamped with the time it arrived, so a copy replayed after a failover may be stored twice",
				"topic", topic, "event", ev.GetEvent().GetId())
		}
	}
	if !plan.Noop() {
		key := ""
		if plan.Sampling() {
			key = hex.EncodeToString(ev.GetReplayId())
		}
		if !plan.Keep(key) || !plan.Values(dec.rec) {
			// Dropped or sampled out: its replay id still moves the
			// checkpoint.
			return emit(ports.Entry{CheckpointOnly: true, Checkpoint: cp})
		}
	}
	line := dec.line
	if line == "" {
		b, err := json.Marshal(dec.rec) // maps marshal with sorted keys
		if err != nil {
			return fmt.Errorf("salesforce pubsub: %s event %s: %w", topic, ev.GetEvent().GetId(), err)
		}
		line = string(b)
	}
	level := pos.level(&dec)
	if gap {
		level = "warn"
	}
	labels, metadata := pos.entryMaps(topic, level)
	return emit(ports.Entry{Time: t, Line: line, Metadata: metadata, Labels: labels, Checkpoint: cp})
}

// isGap reports whether a change event's changeType is a gap (GAP_CREATE,
// GAP_UPDATE, GAP_DELETE, GAP_UNDELETE, GAP_OVERFLOW).
func isGap(changeType string) bool { return strings.HasPrefix(changeType, "GAP_") }

func checkpoint(topic string, replayID []byte) ports.Checkpoint {
	return ports.Checkpoint{Key: KeyPrefix + topic, Value: base64.StdEncoding.EncodeToString(replayID)}
}

// checkpointValues appends to dst the checkpoint value of each event
// (checkpoint's: the standard base64 of its replay id), all substrings of
// one string encoded at once: a response's values cost one allocation, not
// one per event. The string lives as long as any of its values (the
// pipeline keeps the latest per key): at most a response's replay ids.
func checkpointValues(dst []string, events []*eventbus.ConsumerEvent) []string {
	n := 0
	for _, ev := range events {
		n += base64.StdEncoding.EncodedLen(len(ev.GetReplayId()))
	}
	buf := make([]byte, 0, n)
	for _, ev := range events {
		buf = base64.StdEncoding.AppendEncode(buf, ev.GetReplayId())
	}
	all := string(buf)
	at := 0
	for _, ev := range events {
		next := at + base64.StdEncoding.EncodedLen(len(ev.GetReplayId()))
		dst = append(dst, all[at:next])
		at = next
	}
	return dst
}
