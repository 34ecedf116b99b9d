package salesforce_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/salesforce"
	"github.com/sf2loki/sf2loki/internal/ports"
)

// soqlOrg answers the ascending FIELDS(ALL) queries SOQLSource sends, with
// SOQL's semantics for the two cursor forms, over records it holds sorted
// by (EventDate, Id). It can answer REQUEST_LIMIT_EXCEEDED, a non-JSON 200
// or a 401 once, and pages with nextRecordsUrl when asked.
type soqlOrg struct {
	mu       sync.Mutex
	rows     []map[string]any
	queries  []string
	throttle int
	garbage  int
	revoke   int
	mints    int
}

var (
	whereGE       = regexp.MustCompile(`WHERE EventDate >= (\S+) ORDER`)
	whereCompound = regexp.MustCompile(`WHERE \(EventDate > (\S+) OR \(EventDate = \S+ AND Id > '(\w+)'\)\) ORDER`)
	limitRe       = regexp.MustCompile(`LIMIT (\d+)$`)
)

func (o *soqlOrg) add(id string, ts time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.rows = append(o.rows, map[string]any{"attributes": map[string]any{"type": "LoginEvent"}, "Id": id,
		"EventDate": ts.UTC().Format("2006-01-02T15:04:05.000+0000"), "Username": "u" + id})
	slices.SortFunc(o.rows, func(a, b map[string]any) int {
		if c := strings.Compare(a["EventDate"].(string), b["EventDate"].(string)); c != 0 {
			return c
		}
		return strings.Compare(a["Id"].(string), b["Id"].(string))
	})
}

func (o *soqlOrg) serve(w http.ResponseWriter, r *http.Request) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case r.URL.Path == "/services/oauth2/token":
		o.mints++
		_, _ = fmt.Fprintf(w, `{"access_token":"t%d","instance_url":"http://%s"}`, o.mints, r.Host)
		return
	case r.Header.Get("Authorization") == "Bearer t1" && o.revoke > 0:
		o.revoke--
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = fmt.Fprint(w, `[{"errorCode":"INVALID_SESSION_ID"}]`)
		return
	case o.throttle > 0:
		o.throttle--
		w.WriteHeader(http.StatusForbidden)
		_, _ = fmt.Fprint(w, `[{"message":"TotalRequests Limit exceeded.","errorCode":"REQUEST_LIMIT_EXCEEDED"}]`)
		return
	case o.garbage > 0:
		o.garbage--
		_, _ = fmt.Fprint(w, "<html>Service Unavailable</html>")
		return
	}
	q := r.URL.Query().Get("q")
	o.queries = append(o.queries, q)
	parse := func(s string) time.Time {
		t, err := time.Parse("2006-01-02T15:04:05.000Z", s)
		if err != nil {
			http.Error(w, "MALFORMED_QUERY: "+s, http.StatusBadRequest)
		}
		return t
	}
	var keep func(ts time.Time, id string) bool
	if m := whereGE.FindStringSubmatch(q); m != nil {
		from := parse(m[1])
		keep = func(ts time.Time, _ string) bool { return !ts.Before(from) }
	} else if m := whereCompound.FindStringSubmatch(q); m != nil {
		after, id := parse(m[1]), m[2]
		keep = func(ts time.Time, rid string) bool { return ts.After(after) || (ts.Equal(after) && rid > id) }
	} else {
		http.Error(w, "MALFORMED_QUERY: "+q, http.StatusBadRequest)
		return
	}
	limit, _ := strconv.Atoi(limitRe.FindStringSubmatch(q)[1])
	var out []map[string]any
	for _, row := range o.rows {
		ts, _ := salesforce.ParseTime(row["EventDate"].(string))
		if keep(ts, row["Id"].(string)) && len(out) < limit {
			out = append(out, row)
		}
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"totalSize": len(out), "done": true, "records": out})
}

type collected struct {
	mu      sync.Mutex
	entries []ports.Entry
}

func (c *collected) emit(e ports.Entry) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.entries = append(c.entries, e)
	return nil
}

func (c *collected) ids() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []string
	for _, e := range c.entries {
		var rec map[string]any
		_ = json.Unmarshal([]byte(e.Line), &rec)
		out = append(out, rec["Id"].(string))
	}
	return out
}

func (c *collected) last() ports.Entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.entries[len(c.entries)-1]
}

func soqlSource(t *testing.T, org *soqlOrg, spec salesforce.ObjectSpec) *salesforce.SOQLSource {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(org.serve))
	t.Cleanup(srv.Close)
	a, err := salesforce.New(salesforce.Config{AuthMode: salesforce.ClientCredentials, LoginURL: srv.URL, ClientID: "ck", ClientSecret: "x"})
	if err != nil {
		t.Fatal(err)
	}
	s, err := salesforce.NewSOQLSource(a, "60.0", []salesforce.ObjectSpec{spec}, clockAt(time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)), nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// runFor runs the source until it has emitted want entries (or 10s).
func runFor(t *testing.T, s *salesforce.SOQLSource, resume map[string]string, c *collected, want int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- s.Run(ctx, func(k string) (string, bool) { v, ok := resume[k]; return v, ok }, c.emit)
	}()
	for {
		c.mu.Lock()
		n := len(c.entries)
		c.mu.Unlock()
		if n >= want {
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("emitted %d entries, want %d", n, want)
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
}

func TestSOQLDrainsInOrderAcrossPagesAndTies(t *testing.T) {
	org := &soqlOrg{}
	base := time.Date(2026, 11, 28, 11, 30, 0, 0, time.UTC)
	// 450 rows: 250 of them share one timestamp (ties across a page edge).
	for i := range 450 {
		ts := base.Add(time.Duration(i) * time.Millisecond)
		if i >= 100 && i < 350 {
			ts = base.Add(100 * time.Millisecond)
		}
		org.add(fmt.Sprintf("0AT%05d", i), ts)
	}
	c := &collected{}
	runFor(t, soqlSource(t, org, salesforce.ObjectSpec{Name: "LoginEvent", PollInterval: time.Hour}), nil, c, 450)
	ids := c.ids()
	if len(ids) != 450 || !slices.IsSorted(ids) {
		t.Fatalf("%d ids, sorted %v", len(ids), slices.IsSorted(ids))
	}
	if want := "0AT00449"; !strings.Contains(c.last().Checkpoint.Value, want) || c.last().Checkpoint.Key != "eventlog_objects:LoginEvent" {
		t.Fatalf("last checkpoint %+v", c.last().Checkpoint)
	}
	e := c.entries[0]
	if e.Labels["source"] != "eventlog_objects" || e.Labels["event_type"] != "LoginEvent" || strings.Contains(e.Line, "attributes") ||
		!e.Time.Equal(base) {
		t.Fatalf("entry shape %+v", e)
	}
	// 3 pages: a full one, a full one after the compound cursor, the rest.
	if len(org.queries) != 3 || !strings.Contains(org.queries[1], "AND Id > '0AT00199'") {
		t.Fatalf("queries %q", org.queries)
	}
}

func TestSOQLResumesAfterTheCheckpointAndSettlesLateRows(t *testing.T) {
	org := &soqlOrg{}
	base := time.Date(2026, 11, 28, 11, 30, 0, 0, time.UTC)
	for i := range 10 {
		org.add(fmt.Sprintf("A%02d", i), base.Add(time.Duration(i)*time.Second))
	}
	c := &collected{}
	spec := salesforce.ObjectSpec{Name: "LoginEvent", PollInterval: time.Hour, Settle: 5 * time.Second}
	runFor(t, soqlSource(t, org, spec), nil, c, 10)
	cp := c.last().Checkpoint.Value
	// A row becomes visible late, 3s behind the watermark, and two new rows arrive.
	org.add("LATE", base.Add(6*time.Second))
	org.add("B00", base.Add(20*time.Second))
	org.add("B01", base.Add(21*time.Second))
	c2 := &collected{}
	runFor(t, soqlSource(t, org, spec), map[string]string{"eventlog_objects:LoginEvent": cp}, c2, 3)
	if got := c2.ids(); !slices.Equal(got, []string{"LATE", "B00", "B01"}) {
		t.Fatalf("after resume: %v, want the late row and the new ones, nothing re-emitted", got)
	}
	// Without settle the late row is behind the watermark and is not read.
	org2 := &soqlOrg{}
	for i := range 10 {
		org2.add(fmt.Sprintf("A%02d", i), base.Add(time.Duration(i)*time.Second))
	}
	spec.Settle = 0
	c3 := &collected{}
	runFor(t, soqlSource(t, org2, spec), nil, c3, 10)
	org2.add("LATE", base.Add(6*time.Second))
	org2.add("B00", base.Add(20*time.Second))
	c4 := &collected{}
	runFor(t, soqlSource(t, org2, spec), map[string]string{"eventlog_objects:LoginEvent": c3.last().Checkpoint.Value}, c4, 1)
	if got := c4.ids(); !slices.Equal(got, []string{"B00"}) {
		t.Fatalf("settle 0: %v", got)
	}
}

func TestSOQLCheckpointFormsAndFailures(t *testing.T) {
	org := &soqlOrg{throttle: 1, garbage: 1, revoke: 1}
	base := time.Date(2026, 11, 28, 11, 30, 0, 0, time.UTC)
	org.add("OLD", base.Add(-2*time.Hour)) // before the lookback window
	org.add("A", base)
	org.add("B", base.Add(time.Minute))
	spec := salesforce.ObjectSpec{Name: "LoginEvent", PollInterval: 10 * time.Millisecond}
	c := &collected{}
	s := soqlSource(t, org, spec)
	throttled := 0
	s.Throttled = func() { throttled++ }
	// A garbage checkpoint falls back to the lookback window (1h before now).
	runFor(t, s, map[string]string{"eventlog_objects:LoginEvent": "{not json"}, c, 2)
	if got := c.ids(); !slices.Equal(got, []string{"A", "B"}) || throttled != 1 {
		t.Fatalf("got %v with %d throttles: want A and B after one throttle, a non-JSON 200 and a 401", got, throttled)
	}
	// A bare timestamp from an older document resumes at it: it carries no
	// Ids, so the rows at that instant are read again (at-least-once), the
	// older ones are not.
	c2 := &collected{}
	runFor(t, soqlSource(t, org, spec), map[string]string{"eventlog_objects:LoginEvent": "2026-11-28T11:30:00.000+0000"}, c2, 2)
	if got := c2.ids(); !slices.Equal(got, []string{"A", "B"}) {
		t.Fatalf("bare timestamp: %v", got)
	}
	if _, err := salesforce.NewSOQLSource(nil, "60.0", []salesforce.ObjectSpec{{Name: "Login Event; DELETE"}}, nil, nil); err == nil {
		t.Fatal("an object name outside [A-Za-z0-9_] was accepted")
	}
}

// shiftedClock is the real clock moved to another date.
type shiftedClock struct{ offset time.Duration }

func clockAt(t time.Time) ports.Clock { return shiftedClock{offset: time.Until(t)} }

func (c shiftedClock) Now() time.Time                       { return time.Now().Add(c.offset) }
func (shiftedClock) After(d time.Duration) <-chan time.Time { return time.After(d) }
func (shiftedClock) NewTimer(d time.Duration) ports.Timer   { return realTimer{time.NewTimer(d)} }

type realTimer struct{ t *time.Timer }

func (t realTimer) C() <-chan time.Time        { return t.t.C }
func (t realTimer) Stop() bool                 { return t.t.Stop() }
func (t realTimer) Reset(d time.Duration) bool { return t.t.Reset(d) }
