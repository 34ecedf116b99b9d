package app

import (
	"context"
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

	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/testenv"
)

// jsonLoki records the streams' labels of Loki JSON pushes.
type jsonLoki struct {
	mu      sync.Mutex
	entries map[string]int // rendered labels → entries
}

func (l *jsonLoki) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	streams, err := testenv.DecodeLokiPush(r)
	if err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, s := range streams {
		keys := make([]string, 0, len(s.Stream))
		for k, v := range s.Stream {
			if k == "org" || k == "environment" || k == "sf_org_id" {
				keys = append(keys, k+"="+v)
			}
		}
		slices.Sort(keys)
		l.entries[strings.Join(keys, ",")] += len(s.Values)
	}
	w.WriteHeader(http.StatusNoContent)
}

func (l *jsonLoki) snapshot() map[string]int {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]int{}
	for k, v := range l.entries {
		out[k] = v
	}
	return out
}

// Two replicas over four orgs on a file lease: each leads two, the orgs'
// entries carry their labels, each org has its own checkpoint document,
// /statusz lists the shards and /readyz says which it leads; when one
// replica stops, the other leads all four.
func TestTwoReplicasShareFourOrgs(t *testing.T) {
	dir := t.TempDir()
	sink := &jsonLoki{entries: map[string]int{}}
	srv := httptest.NewServer(sink)
	defer srv.Close()
	var orgs strings.Builder
	for _, o := range []string{"alpha", "beta", "gamma", "delta"} {
		fmt.Fprintf(&orgs, "  - name: %s\n    salesforce: {org_id: 00D0000000000%sAAA}\n    sources: {synthetic: {rate: 50}}\n", o, strings.ToUpper(o[:2]))
	}
	cfgFor := func(holder string) *config.Config {
		path := filepath.Join(t.TempDir(), "c.yaml")
		yaml := fmt.Sprintf(`coordinate:
  type: file_lease
  file_lease: {path: %s/leader.lease, holder_id: %s, ttl: 3s, renew_interval: 500ms}
state: {file: {path: %s/state.json}}
service: {health_addr: "127.0.0.1:0", shutdown_grace: 2s}
sink: {loki: {url: %s/loki/api/v1/push, encoding: json, batch: {max_wait: 100ms}}}
orgs:
%s`, dir, holder, dir, srv.URL, orgs.String())
		if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, _, err := config.Load(path)
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	type replica struct {
		d    *Daemon
		stop context.CancelFunc
		done chan error
	}
	start := func(holder string) *replica {
		d, cleanup, err := Build(t.Context(), cfgFor(holder), Overrides{Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		r := &replica{d: d, stop: cancel, done: make(chan error, 1)}
		finished := make(chan struct{})
		go func() { r.done <- d.Run(ctx); cleanup(); close(finished) }()
		t.Cleanup(func() { cancel(); <-finished })
		return r
	}
	led := func(r *replica) []string {
		var out []string
		for _, s := range r.d.Shards() {
			if s.leading() {
				out = append(out, s.Name())
			}
		}
		return out
	}
	a, b := start("a"), start("b")
	deadline := time.Now().Add(30 * time.Second)
	for len(led(a)) != 2 || len(led(b)) != 2 {
		if time.Now().After(deadline) {
			t.Fatalf("a leads %v, b leads %v after 30s; want two each", led(a), led(b))
		}
		time.Sleep(100 * time.Millisecond)
	}
	t.Logf("a leads %v, b leads %v", led(a), led(b))
	for _, s := range a.d.Shards() {
		for _, o := range b.d.Shards() {
			if s.Name() == o.Name() && s.leading() && o.leading() {
				t.Fatalf("%s led by both", s.Name())
			}
		}
	}
	st := a.d.Status()
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); st = a.d.Status() {
		if len(st.Shards) == 4 && st.Balance != nil && st.Balance.Leading == 2 && len(st.Members) == 2 {
			break // the next heartbeat may be needed to see the other replica
		}
		time.Sleep(100 * time.Millisecond)
	}
	if len(st.Shards) != 4 || st.Balance == nil || st.Balance.Leading != 2 || len(st.Members) != 2 {
		t.Fatalf("status %+v", st)
	}
	rec := httptest.NewRecorder()
	a.d.Handler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	metrics := rec.Body.String()
	for _, want := range []string{`sf2loki_leader{shard="alpha"}`, `sf2loki_leader{shard="delta"}`, "sf2loki_shards_led 2", `sf2loki_lease_epoch{shard="beta"}`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics has no %s", want)
		}
	}
	code, body := a.d.ready(false)
	if code != http.StatusOK || strings.Count(body, "leader") != 2 || !strings.Contains(body, "alpha: ") {
		t.Fatalf("readyz %d %q", code, body)
	}
	time.Sleep(time.Second) // entries flow
	got := sink.snapshot()
	for _, o := range []string{"alpha", "beta", "gamma", "delta"} {
		key := fmt.Sprintf("environment=production,org=%s,sf_org_id=00D0000000000%sAAA", o, strings.ToUpper(o[:2]))
		if got[key] == 0 {
			t.Errorf("no entries labelled %s: %v", key, got)
		}
	}
	for _, o := range []string{"beta", "gamma", "delta"} {
		if _, err := os.Stat(filepath.Join(dir, "shards", o, "state.json")); err != nil {
			t.Errorf("%s's checkpoint document: %v", o, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "state.json")); err != nil {
		t.Errorf("alpha (the first org) keeps the configured document: %v", err)
	}
	b.stop()
	if err := <-b.done; err != nil {
		t.Fatal(err)
	}
	deadline = time.Now().Add(15 * time.Second)
	for len(led(a)) != 4 {
		if time.Now().After(deadline) {
			t.Fatalf("after b stopped a leads %v", led(a))
		}
		time.Sleep(100 * time.Millisecond)
	}
	a.stop()
	if err := <-a.done; err != nil {
		t.Fatal(err)
	}
}
