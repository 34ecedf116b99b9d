// Package synthetic is a ports.Source of Salesforce-shaped events
// (LoginEvent-, ApiEvent-like JSON) at a steady rate, with a sequence
// checkpoint per event type: for the demo, soak tests and benchmarks.
//
// Imports: internal/ports, internal/domain/shape and log/slog.
package synthetic

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/sf2loki/sf2loki/internal/domain/shape"
	"github.com/sf2loki/sf2loki/internal/ports"
)

// KeyPrefix starts every checkpoint key this source writes:
// synthetic:<EventType> = the last sequence number pushed.
const KeyPrefix = "synthetic:"

// Config configures the source.
type Config struct {
	// Rate is events per second across all event types.
	Rate float64
	// EventTypes to generate, round robin (default LoginEvent, ApiEvent).
	EventTypes []string
	// Now is the clock for event times (default time.Now).
	Now func() time.Time
	// Logger receives the ERROR about an unreadable stored sequence
	// (default slog.Default()).
	Logger *slog.Logger
	// GarbageCheckpoint, if set, counts an unreadable stored sequence (the
	// event type starts from 1).
	GarbageCheckpoint func()
	// Shaper transforms and samples the events, by event type (nil: every
	// event as generated). Sampling decides by the sequence number
	// (decimal). An event left out is a checkpoint-only entry.
	Shaper *shape.Shaper
}

// CheckSequence reports whether v is a sequence the source can resume
// after (the value of a synthetic:<EventType> key): a decimal integer.
func CheckSequence(v string) error {
	if _, err := strconv.ParseUint(v, 10, 64); err != nil {
		return fmt.Errorf("%q is not a sequence number: a non-negative decimal integer like 41", v)
	}
	return nil
}

// Source generates events.
type Source struct {
	cfg Config
	log *slog.Logger
}

var _ ports.Source = (*Source)(nil)

// New validates cfg.
func New(cfg Config) (*Source, error) {
	if cfg.Rate <= 0 {
		return nil, fmt.Errorf("sources.synthetic.rate must be > 0, got %v", cfg.Rate)
	}
	if len(cfg.EventTypes) == 0 {
		cfg.EventTypes = []string{"LoginEvent", "ApiEvent"}
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Source{cfg: cfg, log: log}, nil
}

// Name implements ports.Source.
func (s *Source) Name() string { return "synthetic" }

// Lane implements ports.Source: a stream, like Pub/Sub.
func (s *Source) Lane() ports.Lane { return ports.LaneRealtime }

// Run emits events until ctx ends, each event type's sequence continuing
// after its stored position. An unreadable stored position is logged
// (ERROR, with the repair commands) and the type starts from 1.
func (s *Source) Run(ctx context.Context, resume func(string) (string, bool), emit func(ports.Entry) error) error {
	seq := make([]uint64, len(s.cfg.EventTypes))
	for i, et := range s.cfg.EventTypes {
		key := KeyPrefix + et
		if v, ok := resume(key); ok {
			if err := CheckSequence(v); err != nil {
				s.log.Error("unreadable checkpoint; the event type starts from sequence 1, and the next commit replaces the value",
					"key", key, "value", v, "error", err,
					"repair", fmt.Sprintf("with the replicas stopped: sf2loki state set %s 41 (a sequence of your choice), or sf2loki state delete %s (start from 1)", key, key))
				if s.cfg.GarbageCheckpoint != nil {
					s.cfg.GarbageCheckpoint()
				}
				continue
			}
			seq[i], _ = strconv.ParseUint(v, 10, 64)
		}
	}
	plans := make([]*shape.Plan, len(seq))
	for i, et := range s.cfg.EventTypes {
		plans[i] = s.cfg.Shaper.For(et)
	}
	interval := time.Duration(float64(time.Second) / s.cfg.Rate)
	tick := time.NewTicker(max(interval, time.Microsecond))
	defer tick.Stop()
	for i := 0; ; i = (i + 1) % len(seq) {
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
		seq[i]++
		if err := emit(s.event(s.cfg.EventTypes[i], seq[i], plans[i])); err != nil {
			return nil //nolint:nilerr // emit fails only once the pipeline stops the source
		}
	}
}

// event is one generated event, through plan. Its user_id metadata is the
// UserId the plan left (none once dropped).
func (s *Source) event(eventType string, seq uint64, plan *shape.Plan) ports.Entry {
	now := s.cfg.Now().UTC()
	user := fmt.Sprintf("005xx%010d", seq%97)
	body := map[string]any{
		"EventType": eventType, "EventDate": now.Format(time.RFC3339Nano), "UserId": user,
		"Username": fmt.Sprintf("user%d@example.com", seq%97), "Sequence": seq,
	}
	switch eventType {
	case "LoginEvent":
		body["SourceIp"] = fmt.Sprintf("203.0.113.%d", seq%250)
		body["Status"] = "Success"
		body["LoginType"] = "Application"
	case "ApiEvent":
		body["Operation"] = "Query"
		body["RowsProcessed"] = seq % 2000
		body["QueriedEntities"] = "Account"
	}
	seqStr := strconv.FormatUint(seq, 10)
	cp := ports.Checkpoint{Key: KeyPrefix + eventType, Value: seqStr}
	if !plan.Noop() && (!plan.Keep(seqStr) || !plan.Values(body)) {
		return ports.Entry{CheckpointOnly: true, Checkpoint: cp}
	}
	line, _ := json.Marshal(body)
	md := map[string]string{"sequence": seqStr}
	if u, ok := body["UserId"].(string); ok {
		md["user_id"] = u
	}
	return ports.Entry{
		Time:       now,
		Labels:     map[string]string{"source": "synthetic", "event_type": eventType},
		Line:       string(line),
		Metadata:   md,
		Checkpoint: cp,
	}
}
