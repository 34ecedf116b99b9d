package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/salesforce"
	"github.com/sf2loki/sf2loki/internal/adapters/salesforce/pubsub"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/sfrules"
	"github.com/sf2loki/sf2loki/internal/telemetry"
)

// A Real-Time Event Monitoring stream whose streaming is off in Setup >
// Event Manager subscribes without an error and delivers nothing. Two
// signals tell: Event Manager's switches (RealTimeEventSettings, read with
// the Metadata API when the user may), and, at run time, the stream's
// storage object (LoginEventStream ↔ LoginEvent) holding rows the stream
// never delivered.
const (
	// streamCheckEvery is how often the storage objects are asked (one
	// SOQL query per stream).
	streamCheckEvery = 5 * time.Minute
	// streamMargin is how long a stored event may wait for its stream: a
	// row newer than this is not judged yet.
	streamMargin = 10 * time.Minute
	// subscribeGrace is how long after the start the subscriptions may
	// take to open: an event stored before then may precede them.
	subscribeGrace = time.Minute
	// silentWarnEvery is how often a stream found silent again is warned
	// about again (the counter counts every finding).
	silentWarnEvery = time.Hour
)

// streamSilent reports whether a stream missed an event that its storage
// object holds: stored, the newest stored event time, is after watermark
// (the newest event time the stream delivered, or when watching began)
// and at least margin before now, so the stream had margin to deliver it.
func streamSilent(watermark, stored, now time.Time, margin time.Duration) bool {
	return !stored.IsZero() && stored.After(watermark) && !stored.After(now.Add(-margin))
}

// StreamingOffText is the fix for a stream whose streaming is off; named
// says whether sources.pubsub.topics names it (else a "*" found it, and
// only an exclude leaves it out).
func StreamingOffText(s sfrules.RTEMStream, named bool) string {
	leave := "remove the topic /event/" + s.Stream
	if !named {
		leave = fmt.Sprintf("add /event/%s to sources.pubsub.exclude (\"*\" subscribes to every stream)", s.Stream)
	}
	return fmt.Sprintf("turn on Enable Streaming for %s (%s) in Setup > Event Manager, or %s", s.Label, s.Stream, leave)
}

// NotListedText says what a stream Event Manager does not list means.
func NotListedText(s sfrules.RTEMStream, named bool) string {
	return fmt.Sprintf("Event Manager does not list %s: its streaming was probably never turned on, or the org lacks Real-Time Event Monitoring "+
		"(Shield or Event Monitoring); %s", s.Stream, StreamingOffText(s, named))
}

// NamedTopics is the set of topics sources.pubsub.topics names: none
// beside "*", which finds every stream again, named or not (only an
// exclude leaves one out).
func NamedTopics(topics []string) map[string]bool {
	out := map[string]bool{}
	if slices.Contains(topics, "*") {
		return out
	}
	for _, t := range topics {
		out[t] = true
	}
	return out
}

// streamCheck cross-checks the subscribed Real-Time Event Monitoring
// streams with their storage objects while the Pub/Sub source runs.
type streamCheck struct {
	clock ports.Clock
	log   *slog.Logger
	// topics lists the subscribed topics; switches reads Event Manager;
	// stored returns the newest EventDate an object holds in [from, to).
	topics   func(context.Context) ([]string, error)
	switches func(context.Context) (map[string]bool, error)
	stored   func(ctx context.Context, object string, from, to time.Time) (time.Time, bool, error)
	// counted counts a finding per topic: streaming_off (Event Manager
	// says so) or streaming_silent (a check found the stream behind its
	// storage object); nil skips it.
	counted func(topic, what string)
	// named are the topics the configuration names (the others came
	// from "*").
	named map[string]bool

	mu     sync.Mutex
	since  time.Time            // the newest event time each stream may have missed from
	seen   map[string]time.Time // the newest event time delivered, by topic
	warned map[string]time.Time // when a silent stream was last warned about
}

// Event is the Pub/Sub source's hook: topic delivered an event of time t
// (zero: a time it does not carry; the arrival counts).
func (c *streamCheck) Event(topic string, t time.Time) {
	if t.IsZero() {
		t = c.clock.Now()
	}
	c.mu.Lock()
	if t.After(c.seen[topic]) {
		c.seen[topic] = t
	}
	c.mu.Unlock()
}

// watermark is the newest event time topic delivered (delivered true), or
// the time watching began.
func (c *streamCheck) watermark(topic string) (t time.Time, delivered bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t := c.seen[topic]; t.After(c.since) {
		return t, true
	}
	return c.since, false
}

// run reads Event Manager once, then checks every streamCheckEvery until
// ctx ends.
func (c *streamCheck) run(ctx context.Context) {
	c.mu.Lock()
	c.since = c.clock.Now().Add(subscribeGrace)
	c.mu.Unlock()
	var pairs map[string]sfrules.RTEMStream
	for {
		if pairs == nil {
			if pairs = c.pairs(ctx); pairs != nil {
				c.readSwitches(ctx, pairs) // drops the streams it could judge
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-c.clock.After(streamCheckEvery):
		}
		for _, topic := range slices.Sorted(maps.Keys(pairs)) {
			if !c.check(ctx, topic, pairs[topic]) {
				delete(pairs, topic)
			}
		}
	}
}

// pairs are the subscribed topics with a storage object (nil while the
// topics cannot be listed).
func (c *streamCheck) pairs(ctx context.Context) map[string]sfrules.RTEMStream {
	topics, err := c.topics(ctx)
	if err != nil && len(topics) == 0 {
		c.log.Debug("pubsub: cannot list the topics to cross-check with their storage objects yet", "error", err)
		return nil
	}
	out := map[string]sfrules.RTEMStream{}
	for _, t := range topics {
		if s, ok := sfrules.RTEMStreamOf(t); ok {
			out[t] = s
		}
	}
	return out
}

// readSwitches logs, once, what Event Manager says of the streams, and
// removes from pairs every stream it judged: one that is on needs no
// cross-check (and costs no query), one that is off or unlisted has been
// warned about. Without the switches every stream stays for the
// cross-check.
func (c *streamCheck) readSwitches(ctx context.Context, pairs map[string]sfrules.RTEMStream) {
	if len(pairs) == 0 || c.switches == nil {
		return
	}
	on, err := c.switches(ctx)
	if err != nil {
		c.log.Info("pubsub: cannot read Event Manager's switches; sf2loki cross-checks the streams with their storage objects instead",
			"error", err, "fix", "check Setup > Event Manager by hand: Enable Streaming on for every subscribed stream")
		return
	}
	for _, topic := range slices.Sorted(maps.Keys(pairs)) {
		s := pairs[topic]
		enabled, listed := on[s.Stream]
		switch {
		case !listed:
			c.log.Warn("pubsub: Event Manager does not list the stream: this topic probably delivers nothing", "topic", topic, "fix", NotListedText(s, c.named[topic]))
		case !enabled:
			c.log.Warn("pubsub: streaming is off in Event Manager: this topic delivers nothing", "topic", topic, "fix", StreamingOffText(s, c.named[topic]))
		}
		if !enabled && c.counted != nil {
			c.counted(topic, "streaming_off")
		}
		delete(pairs, topic)
	}
}

// check compares one stream with its storage object; false when the
// object cannot be asked (the check stops for the topic).
func (c *streamCheck) check(ctx context.Context, topic string, s sfrules.RTEMStream) bool {
	now := c.clock.Now()
	wm, delivered := c.watermark(topic)
	if !now.Add(-streamMargin).After(wm) {
		return true
	}
	stored, ok, err := c.stored(ctx, s.Storage, wm, now.Add(-streamMargin))
	switch {
	case err != nil && (ports.IsTransient(err) || errors.Is(err, salesforce.ErrThrottled) || ctx.Err() != nil):
		c.log.Debug("pubsub: cross-checking a stream with its storage object failed; trying again at the next check", "topic", topic, "object", s.Storage, "error", err)
		return true
	case err != nil:
		c.log.Warn("pubsub: cannot tell whether this stream delivers: Event Manager's switches cannot be read and the stream's storage object cannot be queried; the check stops for this topic",
			"topic", topic, "object", s.Storage, "error", err,
			"fix", "check by hand that Enable Streaming is on for "+s.Stream+" in Setup > Event Manager; turn on Enable Storing for it, or grant read access to "+s.Storage+", to have sf2loki check it")
		return false
	case !ok || !streamSilent(wm, stored, now, streamMargin):
		return true
	}
	if c.counted != nil {
		c.counted(topic, "streaming_silent")
	}
	c.mu.Lock()
	last := c.warned[topic]
	again := last.IsZero() || !now.Before(last.Add(silentWarnEvery))
	if again {
		if c.warned == nil {
			c.warned = map[string]time.Time{}
		}
		c.warned[topic] = now
	}
	c.mu.Unlock()
	if !again {
		return true
	}
	since := "stream_newest_event"
	if !delivered {
		since = "stream_silent_since"
	}
	c.log.Warn("pubsub: the storage object holds an event the stream never delivered: streaming is probably off in Event Manager",
		"topic", topic, "object", s.Storage, "stored_event", stored.UTC().Format(time.RFC3339), since, wm.UTC().Format(time.RFC3339),
		"fix", StreamingOffText(s, c.named[topic])+"; if Loki was refusing pushes, the stream was held back instead (see sf2loki_pubsub_reconnects_total and the lanes)")
	return true
}

// watchedPubSub runs the Pub/Sub source with its streamCheck: the check
// runs while the source does (on the leader only).
type watchedPubSub struct {
	*pubsub.Source
	check *streamCheck
}

// Run implements ports.Source.
func (w *watchedPubSub) Run(ctx context.Context, resume func(string) (string, bool), emit func(ports.Entry) error) error {
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { w.check.run(ctx) })
	defer wg.Wait()
	defer cancel()
	return w.Source.Run(ctx, resume, emit)
}

// watchStreams wraps s with the cross-check of its Real-Time Event
// Monitoring streams.
func watchStreams(s *pubsub.Source, org string, topics []string, auth *salesforce.Auth, apiVersion string, clk ports.Clock, log *slog.Logger, t *telemetry.Recorder) *watchedPubSub {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &streamCheck{clock: clk, log: log, topics: s.Topics, seen: map[string]time.Time{}, named: NamedTopics(topics),
		switches: func(ctx context.Context) (map[string]bool, error) {
			return salesforce.RealTimeEventSwitches(ctx, auth, apiVersion)
		},
		stored: func(ctx context.Context, object string, from, to time.Time) (time.Time, bool, error) {
			return salesforce.NewestStored(ctx, auth, apiVersion, object, from, to)
		}}
	if t != nil {
		c.counted = func(topic, what string) { t.PubSubEvent(org, topic, what) }
	}
	prev := s.Hooks.Event
	s.Hooks.Event = func(topic string, at time.Time) {
		if prev != nil {
			prev(topic, at)
		}
		c.Event(topic, at)
	}
	return &watchedPubSub{Source: s, check: c}
}
