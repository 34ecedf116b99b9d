package app

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/clock"
	"github.com/sf2loki/sf2loki/internal/adapters/file"
	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/internal/testenv/fakepubsub"
	"github.com/sf2loki/sf2loki/internal/testenv/fakesf"
)

// The older implementation's file store writes the document with Python's
// json.dump: one flat object of strings, ", " and ": " separators,
// non-ASCII escaped, and __fence_epoch__ as a decimal string (file lease
// only; none under noop). Our file store (and S3, GCS, whose objects hold
// the same bytes) reads it as is: no envelope, no epoch needed.
func TestOlderStateFileIsReadAsIs(t *testing.T) {
	for name, tc := range map[string]struct {
		data  string
		epoch uint64
	}{
		"file_lease": {`{"pubsub:/event/LoginEventStream": "AAAAAAAHoSA=", "apexlog": "{\"ids\": [\"07L000000000001AAA\"], \"last_ts\": \"2026-11-28T09:30:00.000+0000\"}", ` +
			`"eventlog_objects:Caf\u00e9__c": "2026-11-28T10:00:00.000+0000", "__fence_epoch__": "12"}`, 12},
		"noop": {`{"pubsub:/event/LoginEventStream": "AAAAAAAHoSA=", "apexlog": "{\"ids\": [\"07L000000000001AAA\"], \"last_ts\": \"2026-11-28T09:30:00.000+0000\"}", ` +
			`"eventlog_objects:Caf\u00e9__c": "2026-11-28T10:00:00.000+0000"}`, 0},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.json")
			if err := os.WriteFile(path, []byte(tc.data), 0o600); err != nil {
				t.Fatal(err)
			}
			store, err := file.New(file.Config{Path: path})
			if err != nil {
				t.Fatal(err)
			}
			c, err := domain.NewCheckpointCommitter(store, clock.New(), domain.CommitterConfig{})
			if err != nil {
				t.Fatal(err)
			}
			if e, err := c.StoredEpoch(t.Context()); err != nil || e != tc.epoch {
				t.Fatalf("stored epoch %d, %v; want %d (the lease's floor)", e, err, tc.epoch)
			}
			if err := c.Claim(t.Context(), tc.epoch+1); err != nil {
				t.Fatal(err)
			}
			doc, err := c.Load(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if doc["pubsub:/event/LoginEventStream"] != "AAAAAAAHoSA=" || doc["eventlog_objects:Café__c"] != "2026-11-28T10:00:00.000+0000" ||
				doc["apexlog"] != `{"ids": ["07L000000000001AAA"], "last_ts": "2026-11-28T09:30:00.000+0000"}` {
				t.Fatalf("document %v", doc)
			}
		})
	}
}

// lokiLines records the lines Loki JSON pushes carry, by org label.
type lokiLines struct {
	mu    sync.Mutex
	lines map[string][]string
}

func (l *lokiLines) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	streams, err := testenv.DecodeLokiPush(r)
	if err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range streams {
		for _, v := range s.Values {
			l.lines[s.Stream["org"]] = append(l.lines[s.Stream["org"]], fmt.Sprint(v[1]))
		}
	}
	w.WriteHeader(http.StatusNoContent)
}

func (l *lokiLines) of(org string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.lines[org])
}

// olderOrg is a fake org with rows on both sides of the positions the
// older implementation stored for it: every source reads its rows "old-*"
// again only if it ignored that position (each lies inside the lookback
// window or, for Pub/Sub, after the EARLIEST preset).
type olderOrg struct {
	url, pubsubAddr string
	positions       map[string]string // key → value, as the older implementation wrote them
}

func newOlderOrg(t *testing.T, now time.Time) *olderOrg {
	t.Helper()
	sf := fmt.Sprintf
	org := &fakesf.Org{}
	elf := &fakesf.ELFOrg{}
	apex := &fakesf.ApexOrg{}
	base := now.Add(-2 * time.Hour).Truncate(time.Second)
	for i := range 4 {
		org.AddTo("LoginHistory", "LoginTime", sf("0Ya00000000000%dAAA", i), base.Add(time.Duration(i)*time.Minute))
		apex.Add(fakesf.ApexLog{ID: sf("07L00000000000%dAAA", i), UserID: "005000000000001AAA", Start: base.Add(time.Duration(i) * time.Minute),
			Body: sf("apex body %d", i)})
	}
	body := func(prefix string) string {
		return fakesf.CRLF(sf("EVENT_TYPE,TIMESTAMP_DERIVED,REQUEST_ID\nAPI,%s,%s-0\nAPI,%s,%s-1\n",
			base.Format("2006-01-02T15:04:05.000Z"), prefix, base.Format("2006-01-02T15:04:05.000Z"), prefix))
	}
	hour := base.Truncate(time.Hour)
	elf.AddFile(fakesf.ELFFile{ID: "0AT000000000001AAA", EventType: "API", Interval: "Hourly", LogDate: hour.Add(-time.Hour),
		CreatedDate: base.Add(-time.Hour), Sequence: 1, Body: body("old")})
	elf.AddFile(fakesf.ELFFile{ID: "0AT000000000002AAA", EventType: "API", Interval: "Hourly", LogDate: hour,
		CreatedDate: base.Add(30 * time.Minute), Sequence: 1, Body: body("new")})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch q := r.URL.Query().Get("q"); {
		case strings.Contains(r.URL.Path, "/sobjects/EventLogFile/") || strings.Contains(q, "FROM EventLogFile"):
			elf.ServeHTTP(w, r)
		case strings.Contains(r.URL.Path, "/tooling/"):
			apex.ServeHTTP(w, r)
		default:
			org.ServeHTTP(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	ps := fakepubsub.Start(t)
	ps.AddTopic(fakepubsub.LoginTopic, fakepubsub.LoginEventStreamSchema)
	for i := range 4 {
		ps.Append(fakepubsub.LoginTopic, fakepubsub.LoginEvent(i, base.Add(time.Duration(i)*time.Minute)))
	}
	sfTime := func(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000-0700") }
	// The older implementation has read rows 0 and 1 of each source (and
	// the first file): its values, as json.dumps(sort_keys=True) writes them.
	return &olderOrg{url: srv.URL, pubsubAddr: ps.Addr, positions: map[string]string{
		"pubsub:" + fakepubsub.LoginTopic: base64.StdEncoding.EncodeToString(ps.ReplayID(fakepubsub.LoginTopic, 2)),
		"eventlog_objects:LoginHistory": sf(`{"ids": ["0Ya000000000000AAA", "0Ya000000000001AAA"], "last_ts": %q}`,
			sfTime(base.Add(time.Minute))),
		"eventlogfile:API": sf(`{"ids": [["0AT000000000001AAA", %q]], "last_created": %q}`, sfTime(base.Add(-time.Hour)), sfTime(base.Add(-time.Hour))),
		"apexlog":          sf(`{"ids": ["07L000000000000AAA", "07L000000000001AAA"], "last_ts": %q}`, sfTime(base.Add(time.Minute))),
	}}
}

// yaml is the org's salesforce and sources configuration, indented by ind.
func (o *olderOrg) yaml(ind, orgID string) string {
	return strings.ReplaceAll(fmt.Sprintf(`salesforce: {auth_mode: client_credentials, login_url: %q, client_id: ck, client_secret: x, org_id: %s}
sources:
  allow_overlap: true
  eventlog_objects: {objects: [{name: LoginHistory, timestamp_field: LoginTime, poll_interval: 1h, lookback: 24h}]}
  eventlogfile: {event_types: [API], interval: Hourly, poll_interval: 1h, settle_window: 0s, lookback: 72h}
  apexlog: {enabled: true, poll_interval: 1h, lookback: 24h}
  pubsub: {topics: [%s], endpoint: %q, plaintext: true, replay_preset: EARLIEST}
`, o.url, orgID, fakepubsub.LoginTopic, o.pubsubAddr), "\n", "\n"+ind)
}

// wantNew checks that the org's lines are exactly its new rows (2 of each
// source, 4 ELF rows... the second file's 2): none of the rows the older
// implementation had read.
func wantNew(t *testing.T, org string, lines []string) {
	t.Helper()
	var got []string
	for _, l := range lines {
		for _, mark := range []string{"0Ya000000000002AAA", "0Ya000000000003AAA", "0Ya000000000000AAA", "0Ya000000000001AAA",
			"new-0", "new-1", "old-0", "old-1", "apex body 0", "apex body 1", "apex body 2", "apex body 3",
			`"login-0"`, `"login-1"`, `"login-2"`, `"login-3"`} {
			if strings.Contains(l, mark) {
				got = append(got, mark)
			}
		}
	}
	slices.Sort(got)
	got = slices.Compact(got)
	want := []string{`"login-2"`, `"login-3"`, "0Ya000000000002AAA", "0Ya000000000003AAA", "apex body 2", "apex body 3", "new-0", "new-1"}
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Fatalf("org %q shipped %v, want only the rows after the older positions %v", org, got, want)
	}
}

// runUntil runs the daemon built from yaml until every org shipped n lines.
func runUntil(t *testing.T, yaml string, loki *lokiLines, orgs map[string]int) *testenv.Buffer {
	t.Helper()
	path := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, _, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	logs := &testenv.Buffer{}
	d, cleanup, err := Build(t.Context(), cfg, Overrides{Logger: NewLogger(logs, "info", "text")})
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ok := true
		for org, n := range orgs {
			ok = ok && len(loki.of(org)) >= n
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			cancel()
			err := <-done
			t.Fatalf("shipped %v within 30s (run: %v), want %v; log:\n%s", loki.lines, err, orgs, logs.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Second) // anything re-read from an earlier position would arrive by now
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	return logs
}

// A single-org deployment of the older implementation, stopped, then ours
// started on the same state file: every source resumes after the position
// the older one stored, nothing is read again from the lookback window.
func TestResumesFromTheOlderStateFile(t *testing.T) {
	now := time.Now().UTC()
	o := newOlderOrg(t, now)
	loki := &lokiLines{lines: map[string][]string{}}
	srv := httptest.NewServer(loki)
	defer srv.Close()
	dir := t.TempDir()
	// This type's position is the legacy one: the file read named by Id alone.
	var elf struct {
		Last string `json:"last_created"`
	}
	if err := json.Unmarshal([]byte(o.positions["eventlogfile:API"]), &elf); err != nil {
		t.Fatal(err)
	}
	o.positions["eventlogfile:API"] = fmt.Sprintf(`{"ids": ["0AT000000000001AAA"], "last_created": %q}`, elf.Last)
	doc, _ := json.Marshal(o.positions)
	older := strings.ReplaceAll(strings.ReplaceAll(string(doc), `":"`, `": "`), `","`, `", "`) // Python's separators
	if err := os.WriteFile(filepath.Join(dir, "state.json"), []byte(older), 0o600); err != nil {
		t.Fatal(err)
	}
	yaml := fmt.Sprintf("state: {file: {path: %s/state.json}}\nservice: {health_addr: '127.0.0.1:0', shutdown_grace: 2s}\n"+
		"sink: {loki: {url: %s/loki/api/v1/push, encoding: json, batch: {max_wait: 50ms}}}\n%s", dir, srv.URL, o.yaml("", "00D000000000001AAA"))
	logs := runUntil(t, yaml, loki, map[string]int{"": 8})
	wantNew(t, "", loki.of(""))
	if !strings.Contains(logs.String(), "lists files by Id alone") {
		t.Errorf("the conversion of the legacy eventlogfile position is not logged:\n%s", logs.String())
	}
}

// A two-org deployment of the older implementation kept both orgs in one
// document (org=<name>:<key>); ours gives emea a document of its own. The
// first org resumes from its prefixed keys in the configured document,
// emea seeds its own from the configured document (read only) and says
// how many keys it adopted; neither reads anything again.
func TestResumesFromTheOlderMultiOrgDocument(t *testing.T) {
	now := time.Now().UTC()
	prod, emea := newOlderOrg(t, now), newOlderOrg(t, now)
	loki := &lokiLines{lines: map[string][]string{}}
	srv := httptest.NewServer(loki)
	defer srv.Close()
	dir := t.TempDir()
	var older strings.Builder
	older.WriteString("{")
	sep := ""
	for _, o := range []struct {
		name string
		org  *olderOrg
	}{{"prod", prod}, {"emea", emea}} {
		keys := slices.Sorted(func(yield func(string) bool) {
			for k := range o.org.positions {
				if !yield(k) {
					return
				}
			}
		})
		for _, k := range keys {
			kb, _ := json.Marshal("org=" + o.name + ":" + k)
			vb, _ := json.Marshal(o.org.positions[k])
			fmt.Fprintf(&older, "%s%s: %s", sep, kb, vb)
			sep = ", "
		}
	}
	older.WriteString(`, "__fence_epoch__": "4"}`)
	configured := filepath.Join(dir, "state.json")
	if err := os.WriteFile(configured, []byte(older.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	yaml := fmt.Sprintf("state: {file: {path: %s}}\nservice: {health_addr: '127.0.0.1:0', shutdown_grace: 2s}\n"+
		"sink: {loki: {url: %s/loki/api/v1/push, encoding: json, batch: {max_wait: 50ms}}}\norgs:\n"+
		"  - name: prod\n    %s\n  - name: emea\n    %s\n", configured, srv.URL,
		prod.yaml("    ", "00D000000000001AAA"), emea.yaml("    ", "00D000000000002AAA"))
	logs := runUntil(t, yaml, loki, map[string]int{"prod": 8, "emea": 8})
	wantNew(t, "prod", loki.of("prod"))
	wantNew(t, "emea", loki.of("emea"))
	out := logs.String()
	for _, org := range []string{"prod", "emea"} {
		var lines []string
		for l := range strings.Lines(out) {
			if strings.Contains(l, "adopted from the older implementation") && strings.Contains(l, "org="+org) {
				lines = append(lines, l)
			}
		}
		if len(lines) != 1 || !strings.Contains(lines[0], "level=INFO") || !strings.Contains(lines[0], "adopted=4") {
			t.Errorf("org %s: want one INFO line saying 4 keys were adopted, got %q", org, lines)
		}
	}
	// The configured document keeps emea's older keys (prod never deletes
	// them); emea's own document holds its positions from now on.
	var doc map[string]string
	data, err := os.ReadFile(configured)
	if err != nil || json.Unmarshal(data, &doc) != nil {
		t.Fatalf("configured document: %v %s", err, data)
	}
	if doc["org=emea:apexlog"] == "" || doc[domain.OrgKey] != "prod" {
		t.Fatalf("configured document after the run: %v", doc)
	}
	data, err = os.ReadFile(filepath.Join(dir, "shards", "emea", "state.json"))
	if err == nil {
		err = json.Unmarshal(data, &doc)
	}
	if err != nil || doc[domain.OrgKey] != "emea" || doc["apexlog"] == "" {
		t.Fatalf("emea's document: %v %s", err, data)
	}
}
