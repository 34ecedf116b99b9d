package pubsub_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/clock"
	"github.com/sf2loki/sf2loki/internal/adapters/salesforce"
	"github.com/sf2loki/sf2loki/internal/adapters/salesforce/pubsub"
	"github.com/sf2loki/sf2loki/internal/adapters/salesforce/pubsub/eventbus"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/sfrules"
	"github.com/sf2loki/sf2loki/internal/testenv/fakepubsub"
	"github.com/sf2loki/sf2loki/internal/testenv/fakesf"
)

var t0 = time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)

type env struct {
	srv *fakepubsub.Server
	org *fakesf.Org
	src *pubsub.Source
	// counts by hook
	mu     sync.Mutex
	counts map[string]int
}

func (e *env) count(k string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.counts[k]
}

// newEnv starts a fake Pub/Sub API with the login and account topics, a
// token endpoint, and a source on spec (topics default to the login one).
func newEnv(t *testing.T, spec pubsub.Spec, setup func(*fakepubsub.Server)) *env {
	t.Helper()
	return newEnvLog(t, spec, setup, nil)
}

// newEnvLog is newEnv with the source logging to log.
func newEnvLog(t *testing.T, spec pubsub.Spec, setup func(*fakepubsub.Server), log *slog.Logger) *env {
	t.Helper()
	e := &env{srv: fakepubsub.Start(t), org: &fakesf.Org{}, counts: map[string]int{}}
	e.srv.AddTopic(fakepubsub.LoginTopic, fakepubsub.LoginEventStreamSchema)
	e.srv.AddTopic(fakepubsub.AccountTopic, fakepubsub.AccountChangeEventSchema)
	if setup != nil {
		setup(e.srv)
	}
	web := httptest.NewServer(e.org)
	t.Cleanup(web.Close)
	a, err := salesforce.New(salesforce.Config{AuthMode: sfrules.ClientCredentials, LoginURL: web.URL, ClientID: "ck", ClientSecret: "x", OrgID: "00D000000000001"})
	if err != nil {
		t.Fatal(err)
	}
	spec.Endpoint, spec.Plaintext = e.srv.Addr, true
	if spec.Topics == nil {
		spec.Topics = []string{fakepubsub.LoginTopic}
	}
	if spec.MaxBackoff == 0 {
		spec.MaxBackoff = 20 * time.Millisecond
	}
	e.src, err = pubsub.New(a, spec, clock.New(), log)
	if err != nil {
		t.Fatal(err)
	}
	hook := func(k string) func(string) {
		return func(string) {
			e.mu.Lock()
			defer e.mu.Unlock()
			e.counts[k]++
		}
	}
	e.src.Hooks = pubsub.Hooks{Undecodable: hook("undecodable"), ReplayFallback: hook("fallback"), Stalled: hook("stalled"),
		Reconnect: func(_, reason string) { hook("reconnect:" + reason)("") }, BitmapUndecodable: hook("bitmap"), Gap: hook("gap")}
	return e
}

// sink collects entries; block holds emit until released.
type sink struct {
	mu      sync.Mutex
	entries []ports.Entry
	gate    chan struct{} // nil: never blocks
}

func (s *sink) emit(e ports.Entry) error {
	if s.gate != nil {
		<-s.gate
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.entries = append(s.entries, e)
	return nil
}

func (s *sink) snapshot() []ports.Entry {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.entries)
}

// run runs the source until stop holds on what it emitted (or 10s).
func (e *env) run(t *testing.T, resume map[string]string, s *sink, stop func([]ports.Entry) bool) []ports.Entry {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- e.src.Run(ctx, func(k string) (string, bool) { v, ok := resume[k]; return v, ok }, s.emit)
	}()
	for !stop(s.snapshot()) {
		if ctx.Err() != nil {
			t.Fatalf("stopped with %d entries emitted", len(s.snapshot()))
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return s.snapshot()
}

// events returns the non-checkpoint-only entries' decoded lines.
func events(es []ports.Entry) []map[string]any {
	var out []map[string]any
	for _, e := range es {
		if !e.CheckpointOnly {
			var m map[string]any
			_ = json.Unmarshal([]byte(e.Line), &m)
			out = append(out, m)
		}
	}
	return out
}

func identifiers(es []ports.Entry) []string {
	var out []string
	for _, m := range events(es) {
		out = append(out, m["EventIdentifier"].(string))
	}
	return out
}

func hasN(n int) func([]ports.Entry) bool {
	return func(es []ports.Entry) bool { return len(events(es)) >= n }
}

// b64 is the stored form of the replay id of a topic's n-th event (0: the
// position before the first).
func (e *env) b64(topic string, n int) string {
	return base64.StdEncoding.EncodeToString(e.srv.ReplayID(topic, n))
}

func loginEvents(from, to int) []map[string]any {
	var out []map[string]any
	for i := from; i < to; i++ {
		out = append(out, fakepubsub.LoginEvent(i, t0.Add(time.Duration(i)*time.Second)))
	}
	return out
}

func TestDecodesLoginAndChangeEventsWithReplayCheckpoints(t *testing.T) {
	e := newEnv(t, pubsub.Spec{Topics: []string{fakepubsub.LoginTopic, fakepubsub.AccountTopic}, ReplayPreset: pubsub.Earliest}, nil)
	e.srv.Append(fakepubsub.LoginTopic, loginEvents(0, 250)...)
	e.srv.Append(fakepubsub.AccountTopic, fakepubsub.AccountChange(7, t0.Add(time.Hour)))
	got := e.run(t, nil, &sink{}, hasN(251))
	var login, account []ports.Entry
	for _, en := range got {
		switch en.Labels["event_type"] {
		case "LoginEventStream":
			login = append(login, en)
		case "AccountChangeEvent":
			account = append(account, en)
		}
	}
	if ids := identifiers(login); len(ids) != 250 || ids[0] != "login-0" || ids[249] != "login-249" {
		t.Fatalf("login events %d: %v…", len(ids), ids[:min(3, len(ids))])
	}
	l := login[9]
	if l.Labels["source"] != "pubsub" || !l.Time.Equal(t0.Add(9*time.Second)) || l.Metadata["level"] != "error" ||
		l.Checkpoint != (ports.Checkpoint{Key: "pubsub:/event/LoginEventStream", Value: e.b64(fakepubsub.LoginTopic, 10)}) {
		t.Fatalf("login event 9: %+v (want time from EventDate, level error for a failed login, checkpoint replay id 10)", l)
	}
	if !strings.HasPrefix(l.Line, `{"AdditionalInfo":"{}","Browser":"Chrome","CreatedById":`) {
		t.Fatalf("line is not sorted-key JSON of the record: %s", l.Line)
	}
	if len(account) != 1 {
		t.Fatalf("%d account entries", len(account))
	}
	var rec map[string]any
	_ = json.Unmarshal([]byte(account[0].Line), &rec)
	addr, _ := rec["BillingAddress"].(map[string]any)
	hdr, _ := rec["ChangeEventHeader"].(map[string]any)
	if addr["City"] != "Paris" || rec["Name"] != "Account 7" || hdr["changeType"] != "UPDATE" || !account[0].Time.Equal(t0.Add(time.Hour)) {
		t.Fatalf("CDC event %s at %s: want unions as plain values and the time from commitTimestamp", account[0].Line, account[0].Time)
	}
	// 250 events at 100 requested: the stream topped up, never past 100.
	if m := e.srv.MaxOutstanding(); m > pubsub.MaxRequested || m < 51 {
		t.Fatalf("at most %d events outstanding, want 51–100", m)
	}
	if e.srv.SchemaCalls() != 2 {
		t.Fatalf("%d GetSchema calls for two schemas, want one each", e.srv.SchemaCalls())
	}
}

func TestAFullPipelineStopsTheRequests(t *testing.T) {
	e := newEnv(t, pubsub.Spec{ReplayPreset: pubsub.Earliest, NumRequested: 40}, nil)
	e.srv.Append(fakepubsub.LoginTopic, loginEvents(0, 500)...)
	s := &sink{gate: make(chan struct{})}
	var released atomic.Bool
	go func() {
		// The pipeline takes nothing for a while. The stream asks for
		// the next window as soon as one arrives, before handing it over,
		// so the server works while the daemon decodes: it may receive
		// the window being handed over and the one asked ahead (80), and
		// no more.
		deadline := time.Now().Add(5 * time.Second)
		for e.srv.Sent() < 80 && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		time.Sleep(300 * time.Millisecond)
		if sent := e.srv.Sent(); sent != 80 {
			t.Errorf("%d events sent while the pipeline took none, want the 40 handed over and the 40 asked ahead", sent)
		}
		released.Store(true)
		close(s.gate)
	}()
	got := e.run(t, nil, s, hasN(500))
	if ids := identifiers(got); len(ids) != 500 || !released.Load() {
		t.Fatalf("%d events after the pipeline freed up", len(ids))
	}
	if m := e.srv.MaxOutstanding(); m > 40 {
		t.Fatalf("%d events outstanding, want at most num_requested 40", m)
	}
}

func TestKeepalivesCommitTheLatestReplayIDOnce(t *testing.T) {
	e := newEnv(t, pubsub.Spec{}, func(s *fakepubsub.Server) { s.KeepaliveEvery = 20 * time.Millisecond })
	e.srv.Append(fakepubsub.LoginTopic, loginEvents(0, 3)...) // before the subscription: LATEST skips them
	s := &sink{}
	got := e.run(t, nil, s, func(es []ports.Entry) bool {
		time.Sleep(150 * time.Millisecond) // several keepalives
		return len(es) > 0
	})
	if len(got) != 1 || !got[0].CheckpointOnly || got[0].Checkpoint.Value != e.b64(fakepubsub.LoginTopic, 3) {
		t.Fatalf("entries %+v: want one checkpoint-only entry at replay id 3 however many keepalives came", got)
	}
}

func TestResumesAfterTheStoredReplayID(t *testing.T) {
	e := newEnv(t, pubsub.Spec{}, nil)
	e.srv.Append(fakepubsub.LoginTopic, loginEvents(0, 20)...)
	got := e.run(t, map[string]string{"pubsub:/event/LoginEventStream": e.b64(fakepubsub.LoginTopic, 15)}, &sink{}, hasN(5))
	if ids := identifiers(got); !slices.Equal(ids, []string{"login-15", "login-16", "login-17", "login-18", "login-19"}) {
		t.Fatalf("after replay id 15: %v", ids)
	}
	if sub := e.srv.Subscriptions()[0]; sub.Preset != eventbus.ReplayPreset_CUSTOM || sub.Position != 15 || sub.TenantID != "00D000000000001" {
		t.Fatalf("subscription %+v", sub)
	}
}

func TestAStalledStreamReconnectsFromTheLastEventSeen(t *testing.T) {
	// Keepalives every 20ms keep a healthy stream far from the 1s timeout.
	e := newEnv(t, pubsub.Spec{ReplayPreset: pubsub.Earliest, StallTimeout: time.Second}, func(s *fakepubsub.Server) {
		s.StallAfter[fakepubsub.LoginTopic] = 30
		s.KeepaliveEvery = 20 * time.Millisecond
	})
	e.srv.Append(fakepubsub.LoginTopic, loginEvents(0, 100)...)
	got := e.run(t, nil, &sink{}, hasN(100))
	if ids := identifiers(got); len(ids) != 100 || ids[99] != "login-99" || e.count("stalled") < 1 {
		t.Fatalf("%d events, %d stalls", len(ids), e.count("stalled"))
	}
	subs := e.srv.Subscriptions()
	if !slices.ContainsFunc(subs[1:], func(s fakepubsub.Subscription) bool { return s.Position == 30 }) {
		t.Fatalf("subscriptions %+v: want one resuming after replay id 30, the last event before the stall", subs)
	}
}

func TestUnauthenticatedMintsANewToken(t *testing.T) {
	e := newEnv(t, pubsub.Spec{ReplayPreset: pubsub.Earliest}, func(s *fakepubsub.Server) { s.Unauthenticated = 1 })
	e.srv.Append(fakepubsub.LoginTopic, loginEvents(0, 5)...)
	e.run(t, nil, &sink{}, hasN(5))
	subs := e.srv.Subscriptions()
	if len(subs) != 2 || subs[0].AccessToken != "t1" || subs[1].AccessToken != "t2" || e.count("reconnect:unauthenticated") != 1 {
		t.Fatalf("subscriptions %+v: want the refused token t1 replaced by a new one", subs)
	}
}

func TestACorruptReplayIDRestartsFromEarliest(t *testing.T) {
	e := newEnv(t, pubsub.Spec{}, func(s *fakepubsub.Server) {
		s.RetainFrom[fakepubsub.LoginTopic] = 5 // events 1–4 expired
		s.InvalidArgument = []string{"sfdc.platform.eventbus.grpc.service.protection.triggered"}
	})
	e.srv.Append(fakepubsub.LoginTopic, loginEvents(0, 10)...)
	got := e.run(t, map[string]string{"pubsub:/event/LoginEventStream": e.b64(fakepubsub.LoginTopic, 2)}, &sink{}, hasN(6))
	// Another INVALID_ARGUMENT keeps the position; the expired replay id
	// falls back to EARLIEST (never LATEST, which would skip 5–10).
	subs := e.srv.Subscriptions()
	if len(subs) != 3 || subs[0].Position != 2 || subs[1].Position != 2 || subs[2].Preset != eventbus.ReplayPreset_EARLIEST {
		t.Fatalf("subscriptions %+v", subs)
	}
	if ids := identifiers(got); len(ids) != 6 || ids[0] != "login-4" || e.count("fallback") != 1 || e.count("reconnect:invalid_argument") != 1 {
		t.Fatalf("events %v, %d fallbacks: want events 5–10 (login-4…9) after one fallback", ids, e.count("fallback"))
	}
}

func TestAnUndecodableEventIsSkippedAndCounted(t *testing.T) {
	e := newEnv(t, pubsub.Spec{ReplayPreset: pubsub.Earliest}, nil)
	e.srv.Append(fakepubsub.LoginTopic, loginEvents(0, 2)...)
	e.srv.AppendRaw(fakepubsub.LoginTopic, []byte{0xff, 0xff, 0xff, 0xff, 0xff})
	e.srv.Append(fakepubsub.LoginTopic, loginEvents(2, 4)...)
	got := e.run(t, nil, &sink{}, hasN(4))
	if ids := identifiers(got); !slices.Equal(ids, []string{"login-0", "login-1", "login-2", "login-3"}) || e.count("undecodable") != 1 {
		t.Fatalf("events %v, %d undecodable", ids, e.count("undecodable"))
	}
	if !got[2].CheckpointOnly || got[2].Checkpoint.Value != e.b64(fakepubsub.LoginTopic, 3) {
		t.Fatalf("the skipped event's replay id must still be committed: %+v", got[2])
	}
}

func TestASchemaFailureReplaysTheEventsInsteadOfSkippingThem(t *testing.T) {
	e := newEnv(t, pubsub.Spec{ReplayPreset: pubsub.Earliest}, func(s *fakepubsub.Server) { s.SchemaFailures = 1 })
	e.srv.Append(fakepubsub.LoginTopic, loginEvents(0, 10)...)
	got := e.run(t, nil, &sink{}, hasN(10))
	if ids := identifiers(got); len(ids) != 10 || e.count("reconnect:schema") != 1 || e.count("undecodable") != 0 {
		t.Fatalf("events %v, schema reconnects %d", ids, e.count("reconnect:schema"))
	}
}

func TestTopicsDiscoveredAndFiltered(t *testing.T) {
	e := newEnv(t, pubsub.Spec{Topics: []string{"*", "/data/AccountChangeEvent"}, Exclude: []string{"*Api*"}}, nil)
	e.org.SObjects = []string{"Account", "LoginEventStream", "ApiEventStream", "LoginEvent", "LightningUriEventStream"}
	got, err := e.src.Topics(t.Context())
	if want := []string{"/data/AccountChangeEvent", "/event/LightningUriEventStream", "/event/LoginEventStream"}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("topics %v (%v), want %v", got, err, want)
	}
	info, err := e.src.TopicInfo(t.Context(), fakepubsub.LoginTopic)
	if err != nil || !info.GetCanSubscribe() {
		t.Fatalf("GetTopic: %v %v", info, err)
	}
	if _, err := pubsub.New(nil, pubsub.Spec{Topics: []string{"LoginEventStream"}}, nil, nil); err == nil {
		t.Fatal("a topic without /event/ or /data/ was accepted")
	}
}

func TestRediscoveryJoinsNewTopicsAndSchemasAreFetchedOnce(t *testing.T) {
	e := newEnv(t, pubsub.Spec{Topics: []string{"*"}, ReplayPreset: pubsub.Earliest, RediscoveryInterval: 50 * time.Millisecond}, func(s *fakepubsub.Server) {
		s.AddTopic("/event/ApiEventStream", fakepubsub.LoginEventStreamSchema) // the same schema id as the login stream
	})
	e.org.SetSObjects("LoginEventStream")
	e.srv.Append(fakepubsub.LoginTopic, loginEvents(0, 3)...)
	e.srv.Append("/event/ApiEventStream", loginEvents(100, 103)...)
	s := &sink{}
	got := e.run(t, nil, s, func(es []ports.Entry) bool {
		if len(events(es)) == 3 {
			e.org.SetSObjects("LoginEventStream", "ApiEventStream") // appears later
		}
		return len(events(es)) >= 6
	})
	types := map[string]int{}
	for _, en := range got {
		types[en.Labels["event_type"]]++
	}
	if types["LoginEventStream"] != 3 || types["ApiEventStream"] != 3 || e.srv.SchemaCalls() != 1 {
		t.Fatalf("entries by type %v, %d GetSchema calls: want both topics, one schema fetch", types, e.srv.SchemaCalls())
	}
}
