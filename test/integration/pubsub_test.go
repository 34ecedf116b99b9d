package integration

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/internal/testenv/fakepubsub"
	"github.com/sf2loki/sf2loki/internal/testenv/fakesf"
)

// pubsubOrg is a fake Pub/Sub API with the login and account topics and a
// token endpoint.
type pubsubOrg struct {
	ps  *fakepubsub.Server
	web *httptest.Server
}

func startPubSubOrg(t *testing.T) *pubsubOrg {
	ps := fakepubsub.Start(t)
	ps.AddTopic(fakepubsub.LoginTopic, fakepubsub.LoginEventStreamSchema)
	ps.AddTopic(fakepubsub.AccountTopic, fakepubsub.AccountChangeEventSchema)
	web := httptest.NewServer(&fakesf.Org{})
	t.Cleanup(web.Close)
	return &pubsubOrg{ps: ps, web: web}
}

// config is the salesforce, sources and sink sections for topics.
func (o *pubsubOrg) config(pushURL, job, preset string, topics ...string) string {
	list := ""
	for i, tp := range topics {
		if i > 0 {
			list += ", "
		}
		list += tp
	}
	return fmt.Sprintf(`salesforce: {auth_mode: client_credentials, login_url: %q, client_id: ck, client_secret: s3cret, org_id: 00D000000000001}
sources: {pubsub: {topics: [%s], replay_preset: %s, endpoint: %q, plaintext: true, stall_timeout: 1s}}
sink: {loki: {url: %s, labels: {job: %s}}}
`, o.web.URL, list, preset, o.ps.Addr, pushURL, job)
}

func (o *pubsubOrg) logins(from, to int) {
	for i := from; i < to; i++ {
		o.ps.Append(fakepubsub.LoginTopic, fakepubsub.LoginEvent(i, time.Now()))
	}
}

// storedPubSub waits for n distinct events labelled job and counts each
// (LoginEventStream by EventIdentifier, change events by transactionKey).
func storedPubSub(t *testing.T, logs *testenv.LogsServer, job string, n int) map[string]int {
	t.Helper()
	return waitStored(t, logs, fmt.Sprintf(`{source="pubsub",job=%q}`, job), n, func(rec map[string]any) string {
		if id, ok := rec["EventIdentifier"].(string); ok {
			return id
		}
		h, _ := rec["ChangeEventHeader"].(map[string]any)
		return fmt.Sprint(h["transactionKey"])
	})
}

// position is where a stored replay id of topic points: the number of
// events before it (the fake's replay ids are opaque bytes).
func (o *pubsubOrg) position(t *testing.T, topic, v string) int {
	t.Helper()
	b, err := base64.StdEncoding.DecodeString(v)
	if err != nil {
		t.Fatalf("checkpoint %q is not base64: %v", v, err)
	}
	p, ok := o.ps.Position(topic, b)
	if !ok {
		t.Fatalf("checkpoint %q is not a replay id of %s", v, topic)
	}
	return p
}

// storedCopies returns every stored copy of the events labelled job,
// grouped by event (as storedPubSub keys them): the stream, the
// timestamp, the line and the level, as VictoriaLogs returns them.
func storedCopies(t *testing.T, logs *testenv.LogsServer, job string) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, r := range logs.Query(t, fmt.Sprintf(`{source="pubsub",job=%q} | fields _stream, _time, _msg, level`, job)) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(r["_msg"]), &rec); err != nil {
			t.Fatalf("line %q: %v", r["_msg"], err)
		}
		id, ok := rec["EventIdentifier"].(string)
		if !ok {
			h, _ := rec["ChangeEventHeader"].(map[string]any)
			id = fmt.Sprint(h["transactionKey"])
		}
		out[id] = append(out[id], fmt.Sprintf("%s %s level=%s %s", r["_stream"], r["_time"], r["level"], r["_msg"]))
	}
	return out
}

// TestPubSubSourceEndToEnd runs the daemon on two topics of an in-process
// Pub/Sub API into VictoriaLogs. The first stream is refused as
// unauthenticated (a new token is minted) and the login stream stalls once
// (the watchdog reconnects from the last event); an undecodable event is
// skipped and counted. A restart resumes from the committed replay id; a
// restart after the stored replay id expired falls back to EARLIEST.
func TestPubSubSourceEndToEnd(t *testing.T) {
	logs := testenv.StartLogs(t)
	o := startPubSubOrg(t)
	o.ps.Unauthenticated = 1
	o.ps.StallAfter[fakepubsub.LoginTopic] = 120
	o.logins(0, 250)
	o.ps.AppendRaw(fakepubsub.LoginTopic, []byte{0xff, 0xff, 0xff})
	o.logins(250, 500)
	// tx-7 is an UNDELETE: its body carries the record's CreatedDate, 97
	// days old; the entry is timed by the commit.
	undeleted := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	for i := range 20 {
		ev := fakepubsub.AccountChange(i, time.Now())
		if i == 7 {
			ev = fakepubsub.AccountUndelete(i, undeleted, undeleted.AddDate(0, 0, -97))
		}
		o.ps.Append(fakepubsub.AccountTopic, ev)
	}
	dir := t.TempDir()
	cfg := fmt.Sprintf("state: {file: {path: %s/state.json}}\n", dir) +
		o.config(logs.PushURL, "pubsub", "EARLIEST", fakepubsub.LoginTopic, fakepubsub.AccountTopic)
	d := start(t, "pubsub", cfg)
	if ids := storedPubSub(t, logs, "pubsub", 520); len(ids) != 520 {
		t.Fatalf("%d distinct events stored, want 500 logins and 20 account changes", len(ids))
	}
	login := `topic="/event/LoginEventStream"`
	if u, s, r := d.metric(t, `sf2loki_pubsub_events_total{`+login+`,what="undecodable"}`), d.metric(t, `sf2loki_pubsub_events_total{`+login+`,what="stalled"}`),
		d.metric(t, `sf2loki_pubsub_reconnects_total{reason="unauthenticated",`+"topic=\"/event/LoginEventStream\"}")+
			d.metric(t, `sf2loki_pubsub_reconnects_total{reason="unauthenticated",`+"topic=\"/data/AccountChangeEvent\"}"); u != 1 || s < 1 || r != 1 {
		t.Fatalf("undecodable %v, stalled %v, unauthenticated reconnects %v: want 1, at least 1 (the injected stall), 1", u, s, r)
	}
	d.signal(t, syscall.SIGTERM)
	d.waitExit(t, 30*time.Second)
	for _, r := range logs.Query(t, `{source="pubsub",job="pubsub"} "tx-7" | fields _time`) {
		if at, err := time.Parse(time.RFC3339Nano, r["_time"]); err != nil || !at.Equal(undeleted) {
			t.Fatalf("the UNDELETE is stored at %s, want its commit %s", r["_time"], undeleted.UTC().Format(time.RFC3339Nano))
		}
	}
	// An UPDATE as the Pub/Sub API sends it names its fields in bitmaps;
	// the stored line names them, the compound field's as Parent.Child.
	sent := fakepubsub.AccountChange(3, time.Now())["ChangeEventHeader"].(map[string]any)
	t.Logf("account 3's header as sent: changedFields %v, nulledFields %v", sent["changedFields"], sent["nulledFields"])
	rows := logs.Query(t, `{source="pubsub",job="pubsub"} "tx-3" | fields _msg`)
	want := `"changedFields":["Name","LastModifiedDate","Rating","Industry","BillingAddress.City"]`
	if len(rows) != 1 || !strings.Contains(rows[0]["_msg"], want) || !strings.Contains(rows[0]["_msg"], `"nulledFields":["Industry"]`) {
		t.Fatalf("account 3's stored line %v, want it to carry %s and nulledFields [Industry]", rows, want)
	}
	t.Logf("account 3's line as stored: %s", rows[0]["_msg"])
	if got := o.position(t, fakepubsub.LoginTopic, checkpoints(t, dir)["pubsub:/event/LoginEventStream"]); got != 501 {
		t.Fatalf("login checkpoint at replay id %d, want 501 (500 events and the undecodable one)", got)
	}

	// Restart: the stream resumes after the committed replay id.
	o.logins(500, 600)
	before := len(o.ps.Subscriptions())
	d2 := start(t, "pubsub2", cfg)
	ids := storedPubSub(t, logs, "pubsub", 620)
	d2.signal(t, syscall.SIGTERM)
	d2.waitExit(t, 30*time.Second)
	resumed := false
	for _, s := range o.ps.Subscriptions()[before:] {
		resumed = resumed || (s.Topic == fakepubsub.LoginTopic && s.Position == 501)
	}
	dups := 0
	for _, n := range ids {
		dups += n - 1
	}
	if len(ids) != 620 || dups != 0 || !resumed {
		t.Fatalf("%d distinct events, %d duplicates, resumed from 501: %v; want 620, none, true", len(ids), dups, resumed)
	}

	// Down long enough for the stored replay id to expire: Salesforce
	// refuses it and the topic restarts from EARLIEST (the oldest retained
	// event), not LATEST.
	o.logins(600, 650)
	o.ps.RetainFrom[fakepubsub.LoginTopic] = 612 // events 602–611 (login-600…609) expired
	d3 := start(t, "pubsub3", cfg)
	ids = storedPubSub(t, logs, "pubsub", 660)
	if len(ids) != 660 || ids["login-609"] != 0 || ids["login-649"] != 1 || d3.metric(t, `sf2loki_pubsub_events_total{`+login+`,what="replay_fallback"}`) != 1 {
		t.Fatalf("%d distinct events (login-609 %d, login-649 %d), fallbacks %v: want the retained 610–649 after one fallback",
			len(ids), ids["login-609"], ids["login-649"], d3.metric(t, `sf2loki_pubsub_events_total{`+login+`,what="replay_fallback"}`))
	}
	if m := o.ps.MaxOutstanding(); m > 100 {
		t.Fatalf("%d events outstanding on one stream, Salesforce allows 100", m)
	}
	d3.signal(t, syscall.SIGTERM)
	d3.waitExit(t, 30*time.Second)
}

// TestPubSubResumesAfterALeadershipChange runs two replicas on a file lease
// with the login topic, replay_preset LATEST, while events arrive. Before
// any event, the leader commits the keepalive's replay id (no entry). The
// leader is killed mid-stream; the standby resumes from the replay id the
// old leader committed: no event is missing, none from before LATEST is
// read, and only events after that checkpoint may arrive twice.
func TestPubSubResumesAfterALeadershipChange(t *testing.T) {
	testenv.Long(t, "a leadership change with the Pub/Sub source")
	logs := testenv.StartLogs(t)
	o := startPubSubOrg(t)
	o.logins(0, 50) // before the subscription: LATEST skips them
	be := fileBackend(t, 2*time.Second, 500*time.Millisecond)
	c := newCluster(t, be, func(string) string { return o.config(logs.PushURL, "pubsubha", "LATEST", fakepubsub.LoginTopic) })
	r1 := c.start()
	r1.waitReady(t, 200, "leader", be.ttl+slack)
	r2 := c.start()
	r2.waitReady(t, 503, "standby", slack)
	deadline := time.Now().Add(30 * time.Second)
	for checkpoints(t, be.dir)["pubsub:/event/LoginEventStream"] == "" {
		if time.Now().After(deadline) {
			t.Fatal("no keepalive checkpoint within 30s")
		}
		time.Sleep(100 * time.Millisecond)
	}
	if got := o.position(t, fakepubsub.LoginTopic, checkpoints(t, be.dir)["pubsub:/event/LoginEventStream"]); got != 50 {
		t.Fatalf("keepalive checkpoint at replay id %d, want 50", got)
	}

	var mu sync.Mutex
	published := 50
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
			mu.Lock()
			o.logins(published, published+10)
			published += 10
			mu.Unlock()
		}
	}()
	storedPubSub(t, logs, "pubsubha", 300)
	r1.signal(t, syscall.SIGKILL)
	<-r1.done
	committed := o.position(t, fakepubsub.LoginTopic, checkpoints(t, be.dir)["pubsub:/event/LoginEventStream"])
	r2.waitReady(t, 200, "leader", be.ttl+slack)
	time.Sleep(time.Second)
	close(stop)
	<-done
	total := published - 50
	ids := storedPubSub(t, logs, "pubsubha", total)
	resumedAt := -1
	for _, s := range o.ps.Subscriptions() {
		if s.AccessToken != "t1" {
			resumedAt = s.Position
			break
		}
	}
	twice := 0
	for i := range published {
		id := fmt.Sprintf("login-%d", i)
		n := ids[id]
		switch {
		case i < 50 && n > 0:
			t.Errorf("%s (before the LATEST subscription) was stored", id)
		case i >= 50 && n == 0:
			t.Errorf("%s is missing", id)
		case n > 1 && i+1 <= committed:
			t.Errorf("%s (replay id %d) stored %d times: it is at or before the committed %d", id, i+1, n, committed)
		case n > 1:
			twice++
		}
	}
	if resumedAt != committed {
		t.Fatalf("the new leader subscribed from replay id %d, want the committed %d", resumedAt, committed)
	}
	// The copies must collapse in Loki: each is byte-identical to the first
	// (stream labels, timestamp to the nanosecond, line, level).
	for id, copies := range storedCopies(t, logs, "pubsubha") {
		for _, c := range copies[1:] {
			if c != copies[0] {
				t.Errorf("%s stored differently by the two leaders:\n %s\n %s", id, copies[0], c)
			}
		}
	}
	c.unexpectedExits(t)
	t.Logf("%d events; leader killed with %d committed; the new leader resumed there; %d stored twice", total, committed, twice)
}
