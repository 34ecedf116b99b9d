package loki_test

import (
	"bytes"
	"compress/gzip"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/klauspost/compress/snappy"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/sf2loki/sf2loki/internal/adapters/loki"
	"github.com/sf2loki/sf2loki/internal/ports"
)

// received is one decoded entry.
type received struct {
	Labels string
	TS     time.Time
	Line   string
	Meta   map[string]string
}

// receiver is a Loki push endpoint that decodes exactly what it gets.
type receiver struct {
	mu       sync.Mutex
	entries  []received
	requests int
	headers  []http.Header
	answer   func(n int, entries int) (int, http.Header)
}

func (rc *receiver) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var got []received
	var err error
	switch r.Header.Get("Content-Type") {
	case "application/x-protobuf":
		got, err = decodeProtobuf(body)
	case "application/json":
		got, err = decodeJSON(body, r.Header.Get("Content-Encoding"))
	}
	rc.mu.Lock()
	defer rc.mu.Unlock()
	rc.requests++
	rc.headers = append(rc.headers, r.Header.Clone())
	if err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	if rc.answer != nil {
		if code, h := rc.answer(rc.requests, len(got)); code != 204 {
			for k, v := range h {
				w.Header()[k] = v
			}
			w.WriteHeader(code)
			return
		}
	}
	rc.entries = append(rc.entries, got...)
	w.WriteHeader(204)
}

func decodeProtobuf(body []byte) ([]received, error) {
	raw, err := snappy.Decode(nil, body)
	if err != nil {
		return nil, err
	}
	var out []received
	err = fields(raw, func(_ protowire.Number, v []byte) error {
		var labels string
		return fields(v, func(num protowire.Number, v []byte) error {
			switch num {
			case 1:
				labels = string(v)
			case 2:
				e := received{Labels: labels, Meta: map[string]string{}}
				var sec, ns uint64
				err := fields(v, func(num protowire.Number, v []byte) error {
					switch num {
					case 1:
						return varints(v, func(n protowire.Number, x uint64) {
							if n == 1 {
								sec = x
							} else {
								ns = x
							}
						})
					case 2:
						e.Line = string(v)
					case 3:
						var k, val string
						_ = fields(v, func(n protowire.Number, b []byte) error {
							if n == 1 {
								k = string(b)
							} else {
								val = string(b)
							}
							return nil
						})
						e.Meta[k] = val
					}
					return nil
				})
				e.TS = time.Unix(int64(sec), int64(ns)).UTC()
				out = append(out, e)
				return err
			}
			return nil
		})
	})
	return out, err
}

// fields walks length-delimited fields of a message.
func fields(b []byte, f func(protowire.Number, []byte) error) error {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || typ != protowire.BytesType {
			return fmt.Errorf("bad tag (type %d)", typ)
		}
		b = b[n:]
		v, m := protowire.ConsumeBytes(b)
		if m < 0 {
			return fmt.Errorf("bad bytes")
		}
		if err := f(num, v); err != nil {
			return err
		}
		b = b[m:]
	}
	return nil
}

func varints(b []byte, f func(protowire.Number, uint64)) error {
	for len(b) > 0 {
		num, _, n := protowire.ConsumeTag(b)
		b = b[n:]
		x, m := protowire.ConsumeVarint(b)
		if n < 0 || m < 0 {
			return fmt.Errorf("bad varint")
		}
		f(num, x)
		b = b[m:]
	}
	return nil
}

// decodeJSON reads a JSON push body, gunzipped when Content-Encoding says
// gzip (Loki reads any other body as it is).
func decodeJSON(body []byte, encoding string) ([]received, error) {
	raw := body
	if encoding == "gzip" {
		zr, err := gzip.NewReader(strings.NewReader(string(body)))
		if err != nil {
			return nil, err
		}
		if raw, err = io.ReadAll(zr); err != nil {
			return nil, err
		}
	}
	var req struct {
		Streams []struct {
			Stream map[string]string   `json:"stream"`
			Values [][]json.RawMessage `json:"values"`
		} `json:"streams"`
	}
	if err := json.Unmarshal(raw, &req); err != nil {
		return nil, err
	}
	var out []received
	for _, s := range req.Streams {
		var keys []string
		for k, v := range s.Stream {
			keys = append(keys, fmt.Sprintf("%s=%q", k, v))
		}
		for _, v := range s.Values {
			var ts, line string
			_ = json.Unmarshal(v[0], &ts)
			_ = json.Unmarshal(v[1], &line)
			e := received{Labels: strings.Join(keys, ","), Line: line, Meta: map[string]string{}}
			if len(v) > 2 {
				_ = json.Unmarshal(v[2], &e.Meta)
			}
			var ns int64
			if _, err := fmt.Sscan(ts, &ns); err != nil {
				return nil, err
			}
			e.TS = time.Unix(0, ns).UTC()
			out = append(out, e)
		}
	}
	return out, nil
}

func newSink(t *testing.T, url string, mutate ...func(*loki.Config)) *loki.Sink {
	t.Helper()
	cfg := loki.Config{URL: url, Backoff: time.Millisecond, Labels: map[string]string{"job": "sf2loki"}}
	for _, m := range mutate {
		m(&cfg)
	}
	s, err := loki.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

var ts0 = time.Date(2026, 3, 1, 12, 0, 0, 123456789, time.UTC)

func batch(n int) []ports.Entry {
	out := make([]ports.Entry, n)
	for i := range out {
		src := "pubsub"
		if i%2 == 1 {
			src = "eventlogfile"
		}
		out[i] = ports.Entry{Time: ts0.Add(time.Duration(i) * time.Nanosecond), Line: fmt.Sprintf(`{"n":%d}`, i),
			Labels:   map[string]string{"source": src, "event_type": "Login\"Event"},
			Metadata: map[string]string{"user_id": fmt.Sprintf("005%03d", i), "trace_id": "abc"}}
	}
	return out
}

func TestPushDecodesExactly(t *testing.T) {
	for _, enc := range []string{"protobuf", "json", "json-uncompressed"} {
		t.Run(enc, func(t *testing.T) {
			rc := &receiver{}
			srv := httptest.NewServer(rc)
			defer srv.Close()
			s := newSink(t, srv.URL, func(c *loki.Config) {
				c.Encoding, c.Uncompressed = strings.TrimSuffix(enc, "-uncompressed"), strings.HasSuffix(enc, "-uncompressed")
				c.TenantID = "acme"
			})
			b := batch(6)
			if err := s.Push(t.Context(), b); err != nil {
				t.Fatal(err)
			}
			if len(rc.entries) != 6 || rc.requests != 1 {
				t.Fatalf("%d entries in %d requests", len(rc.entries), rc.requests)
			}
			for _, got := range rc.entries {
				var n int
				if _, err := fmt.Sscanf(got.Line, `{"n":%d}`, &n); err != nil {
					t.Fatal(err)
				}
				want := b[n]
				if !got.TS.Equal(want.Time) || got.Meta["user_id"] != want.Metadata["user_id"] || got.Meta["trace_id"] != "abc" {
					t.Fatalf("entry %d: %+v", n, got)
				}
				if enc == "protobuf" && got.Labels != fmt.Sprintf(`{event_type="Login\"Event",job="sf2loki",source=%q}`, want.Labels["source"]) {
					t.Fatalf("labels %s", got.Labels)
				}
			}
			if rc.headers[0].Get("X-Scope-OrgID") != "acme" {
				t.Fatalf("tenant header %v", rc.headers[0])
			}
			if want := map[string]string{"protobuf": "snappy", "json": "gzip"}[enc]; rc.headers[0].Get("Content-Encoding") != want {
				t.Fatalf("Content-Encoding %q, want %q", rc.headers[0].Get("Content-Encoding"), want)
			}
			if s.Stats.EntriesPushed.Load() != 6 || s.Stats.BytesPushed.Load() == 0 {
				t.Fatal("stats not counted")
			}
		})
	}
}

// Pushes in the air together each send exactly their own entries: the
// prepared entries a push reuses between pushes are never shared by two.
func TestConcurrentPushesSendTheirOwnEntries(t *testing.T) {
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	s := newSink(t, srv.URL)
	const pushers, pushes, size = 8, 20, 50
	var wg sync.WaitGroup
	for p := range pushers {
		wg.Go(func() {
			for k := range pushes {
				b := make([]ports.Entry, size+k%7)
				shared := map[string]string{"source": fmt.Sprint("p", p)}
				for i := range b {
					// Odd pushers' entries share one labels map (one
					// stream over the batch), even ones' have their own.
					labels := shared
					if p%2 == 0 {
						labels = maps.Clone(shared)
					}
					b[i] = ports.Entry{Time: time.Unix(1_700_000_000, 0), Labels: labels,
						Line: fmt.Sprintf(`{"p":%d,"k":%d,"i":%d}`, p, k, i)}
				}
				if err := s.Push(t.Context(), b); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	rc.mu.Lock()
	defer rc.mu.Unlock()
	seen := map[string]bool{}
	want := 0
	for k := range pushes {
		want += pushers * (size + k%7)
	}
	for _, e := range rc.entries {
		var p, k, i int
		if _, err := fmt.Sscanf(e.Line, `{"p":%d,"k":%d,"i":%d}`, &p, &k, &i); err != nil {
			t.Fatal(err)
		}
		if e.Labels != fmt.Sprintf(`{job="sf2loki",source="p%d"}`, p) || seen[e.Line] {
			t.Fatalf("%s under %s (seen before %v)", e.Line, e.Labels, seen[e.Line])
		}
		seen[e.Line] = true
	}
	if len(seen) != want || rc.requests != pushers*pushes {
		t.Fatalf("%d distinct entries in %d requests, want %d in %d", len(seen), rc.requests, want, pushers*pushes)
	}
}

func TestRetriesHonourRetryAfterThenTransient(t *testing.T) {
	rc := &receiver{answer: func(n, _ int) (int, http.Header) {
		switch n {
		case 1:
			return 429, http.Header{"Retry-After": {"1"}}
		case 2:
			return 500, nil
		}
		return 204, nil
	}}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	s := newSink(t, srv.URL)
	start := time.Now()
	if err := s.Push(t.Context(), batch(2)); err != nil {
		t.Fatal(err)
	}
	if rc.requests != 3 || len(rc.entries) != 2 || time.Since(start) < time.Second {
		t.Fatalf("%d requests, %d entries after %s; want a retry after the 1s Retry-After, then after the 500", rc.requests, len(rc.entries), time.Since(start))
	}
	if s.Stats.FailingSince.Load() != 0 {
		t.Fatal("an accepted push left the sink marked failing")
	}
	rc.answer = func(int, int) (int, http.Header) { return 503, nil }
	before := time.Now().UnixNano()
	err := s.Push(t.Context(), batch(1))
	if !ports.IsTransient(err) {
		t.Fatalf("after the attempts: %v, want transient for the pipeline to retry", err)
	}
	since := s.Stats.FailingSince.Load()
	if since < before {
		t.Fatalf("failing since %d, want the first failed attempt (after %d)", since, before)
	}
	if err := s.Push(t.Context(), batch(1)); !ports.IsTransient(err) || s.Stats.FailingSince.Load() != since {
		t.Fatalf("a second failed push moved the start of the failure: %v", err)
	}
	rc.answer = nil
	if err := s.Push(t.Context(), batch(1)); err != nil || s.Stats.FailingSince.Load() != 0 {
		t.Fatalf("an accepted push did not clear the failure: %v", err)
	}
}

func TestSplitOn413And400DropsOnlyTheLoneRejectedEntry(t *testing.T) {
	rc := &receiver{}
	rc.answer = func(_ int, entries int) (int, http.Header) {
		if entries > 2 {
			return 413, nil
		}
		return 204, nil
	}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	s := newSink(t, srv.URL)
	if err := s.Push(t.Context(), batch(8)); err != nil {
		t.Fatal(err)
	}
	if len(rc.entries) != 8 {
		t.Fatalf("after splitting: %d of 8 entries", len(rc.entries))
	}
	// One poisoned entry is dropped; the rest go through.
	rc.entries = nil
	rc.answer = func(_ int, _ int) (int, http.Header) { return 204, nil }
	bad := batch(5)
	bad[3].Line = "REJECT"
	rc.answer = nil
	srv.Config.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got, _ := decodeProtobuf(body)
		for _, e := range got {
			if e.Line == "REJECT" {
				w.WriteHeader(400)
				return
			}
		}
		rc.mu.Lock()
		rc.entries = append(rc.entries, got...)
		rc.mu.Unlock()
		w.WriteHeader(204)
	})
	if err := s.Push(t.Context(), bad); err != nil {
		t.Fatal(err)
	}
	if len(rc.entries) != 4 || s.Stats.Dropped()["bad_request"] != 1 {
		t.Fatalf("%d entries pushed, dropped %v; want 4 and one bad_request", len(rc.entries), s.Stats.Dropped())
	}
}

func TestLineCapAndLabelAllowlist(t *testing.T) {
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	s := newSink(t, srv.URL, func(c *loki.Config) { c.MaxLineBytes = 100 })
	long := strings.Repeat("é", 200) // 400 bytes
	if err := s.Push(t.Context(), []ports.Entry{{Time: ts0, Line: long}}); err != nil {
		t.Fatal(err)
	}
	got := rc.entries[0].Line
	if len(got) > 100 || !utf8.ValidString(got) || !strings.Contains(got, "truncated, 400 bytes") || s.Stats.LinesTruncated.Load() != 1 {
		t.Fatalf("truncated line %q (%d bytes)", got, len(got))
	}
	for _, bad := range []map[string]string{{"user_id": "x"}, {"source": "x"}} {
		if _, err := loki.New(loki.Config{URL: "http://x", Labels: bad}); err == nil {
			t.Errorf("labels %v accepted", bad)
		}
	}
	if _, err := loki.New(loki.Config{URL: "http://x", Encoding: "xml"}); err == nil {
		t.Error("encoding xml accepted")
	}
}

// TestAuthHeaders: the tenant is X-Scope-OrgID whenever it is set, as in
// Promtail's and Alloy's clients (a token never drops it); a token is basic
// auth with basic_auth_user, else with the tenant (Grafana Cloud's
// shorthand), else a bearer token.
func TestAuthHeaders(t *testing.T) {
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	basic := func(user, pass string) string {
		return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+pass))
	}
	for _, tc := range []struct {
		name                 string
		tenant, token, user  string
		wantAuth, wantTenant string
	}{
		{"nothing", "", "", "", "", ""},
		{"tenant only", "acme", "", "", "", "acme"},
		{"token only: bearer", "", "tok", "", "Bearer tok", ""},
		{"token and user", "", "tok", "alice", basic("alice", "tok"), ""},
		{"tenant and token: the tenant is the user and still the tenant", "123456", "tok", "", basic("123456", "tok"), "123456"},
		{"tenant, user and token: both sent", "team-a", "tok", "gateway", basic("gateway", "tok"), "team-a"},
		{"user without a token: nothing to authenticate with", "acme", "", "alice", "", "acme"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rc.headers = nil
			s := newSink(t, srv.URL, func(c *loki.Config) { c.TenantID, c.AuthToken, c.BasicAuthUser = tc.tenant, tc.token, tc.user })
			if err := s.Push(t.Context(), batch(1)); err != nil {
				t.Fatal(err)
			}
			h := rc.headers[0]
			if got := h.Get("Authorization"); got != tc.wantAuth {
				t.Errorf("Authorization %q, want %q", got, tc.wantAuth)
			}
			if got := h.Values("X-Scope-OrgID"); tc.wantTenant == "" && len(got) != 0 || tc.wantTenant != "" && (len(got) != 1 || got[0] != tc.wantTenant) {
				t.Errorf("X-Scope-OrgID %q, want %q", got, tc.wantTenant)
			}
		})
	}
}

func TestStructuredMetadataFieldsArePromoted(t *testing.T) {
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	s := newSink(t, srv.URL, func(c *loki.Config) {
		c.StructuredMetadataFields = []string{"UserId", "SourceIp", "RowsProcessed", "Nested"}
	})
	e := ports.Entry{Time: ts0, Line: `{"UserId":"005A","SourceIp":"203.0.113.7","RowsProcessed":42,"Nested":{"x":1},"Other":"no"}`,
		Metadata: map[string]string{"sequence": "9"}}
	if err := s.Push(t.Context(), []ports.Entry{e}); err != nil {
		t.Fatal(err)
	}
	got := rc.entries[0].Meta
	if got["UserId"] != "005A" || got["SourceIp"] != "203.0.113.7" || got["RowsProcessed"] != "42" || got["sequence"] != "9" {
		t.Fatalf("metadata %v", got)
	}
	if _, ok := got["Nested"]; ok {
		t.Fatalf("an object was promoted: %v", got)
	}
	if _, ok := got["Other"]; ok {
		t.Fatalf("an unlisted field was promoted: %v", got)
	}
}

// A Loki that refuses everything (a wrong path, no structured metadata) is a
// configuration error: nothing is dropped, the push fails transiently so
// the pipeline holds the entries uncommitted, the state and Loki's answer
// are reported once, and it clears when pushes are accepted again.
func TestAPeerRejectingEverythingDropsNothing(t *testing.T) {
	for _, status := range []int{400, 404} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			var mu sync.Mutex
			requests, refuse := 0, true
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				mu.Lock()
				defer mu.Unlock()
				requests++
				if refuse {
					w.WriteHeader(status)
					_, _ = io.WriteString(w, "stream has structured metadata, but this feature is disallowed")
					return
				}
				w.WriteHeader(204)
			}))
			defer srv.Close()
			logs := &bytes.Buffer{}
			s := newSink(t, srv.URL, func(c *loki.Config) {
				c.Attempts = 1
				c.Logger = slog.New(slog.NewTextHandler(logs, nil))
			})
			for i := range 3 {
				for _, n := range []int{1000, 1} {
					mu.Lock()
					requests = 0
					mu.Unlock()
					err := s.Push(t.Context(), batch(n))
					if !ports.IsTransient(err) || !errors.Is(err, loki.ErrRejectingAll) {
						t.Fatalf("push of %d: %v, want a transient ErrRejectingAll", n, err)
					}
					// The first refusal is split in full to be sure no entry
					// is accepted; later ones probe the first and last entry.
					if i > 0 && requests > 3 {
						t.Fatalf("push of %d cost %d requests, want at most 3 while rejecting", n, requests)
					}
				}
			}
			if d := s.Stats.Dropped(); len(d) != 0 {
				t.Fatalf("dropped %v, want nothing", d)
			}
			if r := s.Stats.Rejecting(); !strings.Contains(r, fmt.Sprint(status)) || !strings.Contains(r, "disallowed") {
				t.Fatalf("rejecting state %q", r)
			}
			if n := strings.Count(logs.String(), "rejects every entry"); n != 1 || !strings.Contains(logs.String(), "level=ERROR") {
				t.Fatalf("%d ERROR lines, want 1:\n%s", n, logs.String())
			}
			mu.Lock()
			refuse = false
			mu.Unlock()
			if err := s.Push(t.Context(), batch(3)); err != nil {
				t.Fatal(err)
			}
			if r := s.Stats.Rejecting(); r != "" {
				t.Fatalf("still rejecting after an accepted push: %q", r)
			}
		})
	}
}

func TestNewRefusesAURLItCannotPost(t *testing.T) {
	for _, u := range []string{"ht!tp://::::/push", "127.0.0.1:3100/loki/api/v1/push", "ftp://loki/push", "http:///push"} {
		if _, err := loki.New(loki.Config{URL: u}); err == nil || !strings.Contains(err.Error(), "sink.loki.url") {
			t.Errorf("%q: %v, want refused", u, err)
		}
	}
}

// While Loki refuses everything, a held batch whose first entry is bad on
// its own must not stay held once Loki accepts again: the probe tries the
// last entry too, and one accepted entry sends the rest through as usual.
func TestProbingDoesNotHoldABatchForItsFirstEntry(t *testing.T) {
	var mu sync.Mutex
	refuseAll := true
	var stored []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		got, _ := decodeProtobuf(body)
		mu.Lock()
		defer mu.Unlock()
		for _, e := range got {
			if refuseAll || e.Line == "TOO OLD" {
				w.WriteHeader(400)
				return
			}
		}
		for _, e := range got {
			stored = append(stored, e.Line)
		}
		w.WriteHeader(204)
	}))
	defer srv.Close()
	s := newSink(t, srv.URL, func(c *loki.Config) { c.Attempts = 1 })
	b := batch(6)
	b[0].Line = "TOO OLD"
	if err := s.Push(t.Context(), b); !errors.Is(err, loki.ErrRejectingAll) {
		t.Fatalf("push while Loki refuses all: %v", err)
	}
	mu.Lock()
	refuseAll = false
	mu.Unlock()
	if err := s.Push(t.Context(), b); err != nil {
		t.Fatalf("push once Loki accepts again: %v", err)
	}
	if len(stored) != 5 || s.Stats.Dropped()["bad_request"] != 1 || s.Stats.Rejecting() != "" {
		t.Fatalf("stored %v, dropped %v, rejecting %q; want the 5 good entries stored and the bad one dropped", stored, s.Stats.Dropped(), s.Stats.Rejecting())
	}
}

// Loki refusing every entry for the entries' own sake (older than
// reject_old_samples_max_age, after a long outage or a long lookback) is
// not a configuration error: holding them would stop the lane for good.
// They are dropped and counted as before, and the sink is not "rejecting".
func TestEntriesTooOldForLokiAreDroppedNotHeld(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(400)
		_, _ = io.WriteString(w, "entry for stream '{job=\"sf2loki\"}' has timestamp too old: 2026-01-01T00:00:00Z, oldest acceptable timestamp is: 2026-11-24T00:00:00Z")
	}))
	defer srv.Close()
	s := newSink(t, srv.URL, func(c *loki.Config) { c.Attempts = 1 })
	for _, n := range []int{8, 1} {
		if err := s.Push(t.Context(), batch(n)); err != nil {
			t.Fatalf("push of %d too-old entries: %v, want them dropped", n, err)
		}
	}
	if d := s.Stats.Dropped()["bad_request"]; d != 9 || s.Stats.Rejecting() != "" {
		t.Fatalf("dropped %d, rejecting %q; want 9 dropped and not rejecting", d, s.Stats.Rejecting())
	}
}

// An org's view of the sink adds its labels (org, environment, and the org
// id once known) over the static ones; the sink itself and other views are
// unchanged, and the counters are shared.
func TestLabelledViews(t *testing.T) {
	rc := &receiver{}
	srv := httptest.NewServer(rc)
	defer srv.Close()
	s := newSink(t, srv.URL, func(c *loki.Config) { c.Labels = map[string]string{"job": "sf2loki"} })
	prod, err := s.WithLabels(map[string]string{"org": "prod", "environment": "production"})
	if err != nil {
		t.Fatal(err)
	}
	sandbox, _ := s.WithLabels(map[string]string{"org": "sandbox"})
	e := []ports.Entry{{Time: ts0, Line: "x", Labels: map[string]string{"source": "t"}}}
	for _, sink := range []ports.Sink{prod, sandbox, s} {
		if err := sink.Push(t.Context(), e); err != nil {
			t.Fatal(err)
		}
	}
	prod.Set("sf_org_id", "00D000000000001EAA")
	if err := prod.Push(t.Context(), e); err != nil {
		t.Fatal(err)
	}
	want := []string{`{environment="production",job="sf2loki",org="prod",source="t"}`, `{job="sf2loki",org="sandbox",source="t"}`,
		`{job="sf2loki",source="t"}`, `{environment="production",job="sf2loki",org="prod",sf_org_id="00D000000000001EAA",source="t"}`}
	for i, w := range want {
		if rc.entries[i].Labels != w {
			t.Errorf("push %d: labels %s, want %s", i, rc.entries[i].Labels, w)
		}
	}
	if s.Stats.EntriesPushed.Load() != 4 {
		t.Fatalf("%d entries counted, want the views' too", s.Stats.EntriesPushed.Load())
	}
	if _, err := s.WithLabels(map[string]string{"user": "x"}); err == nil {
		t.Fatal("a label outside the allowlist was accepted")
	}
}
