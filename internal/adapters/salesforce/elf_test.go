package salesforce_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/salesforce"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/sfrules"
	"github.com/sf2loki/sf2loki/internal/testenv/fakesf"
)

func elfSource(t *testing.T, org *fakesf.ELFOrg, spec salesforce.ELFSpec, now time.Time) *salesforce.ELFSource {
	t.Helper()
	return elfSourceIdle(t, org, spec, now, 0)
}

// elfSourceIdle is elfSource with the requests' idle timeout.
func elfSourceIdle(t *testing.T, org *fakesf.ELFOrg, spec salesforce.ELFSpec, now time.Time, idle time.Duration) *salesforce.ELFSource {
	t.Helper()
	srv := httptest.NewServer(org)
	t.Cleanup(srv.Close)
	a, err := salesforce.New(salesforce.Config{AuthMode: sfrules.ClientCredentials, LoginURL: srv.URL, ClientID: "ck", ClientSecret: "x", IdleTimeout: idle})
	if err != nil {
		t.Fatal(err)
	}
	if spec.Interval == "" {
		spec.Interval = "Hourly"
	}
	if spec.PollInterval == 0 {
		spec.PollInterval = 20 * time.Millisecond
	}
	s, err := salesforce.NewELFSource(a, "60.0", spec, clockAt(now), nil)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// runELF runs the source until stop reports true on what it emitted.
func runELF(t *testing.T, s *salesforce.ELFSource, resume map[string]string, stop func([]ports.Entry) bool) []ports.Entry {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var mu sync.Mutex
	var got []ports.Entry
	done := make(chan error, 1)
	go func() {
		done <- s.Run(ctx, func(k string) (string, bool) { v, ok := resume[k]; return v, ok }, func(e ports.Entry) error {
			mu.Lock()
			defer mu.Unlock()
			got = append(got, e)
			return nil
		})
	}()
	for {
		mu.Lock()
		ok := stop(got)
		mu.Unlock()
		if ok || ctx.Err() != nil {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	return slices.Clone(got)
}

func csvBody(prefix string, n int) string {
	var b strings.Builder
	b.WriteString("EVENT_TYPE,TIMESTAMP_DERIVED,REQUEST_ID,QUERY\n")
	for i := range n {
		fmt.Fprintf(&b, "API,2026-11-28T10:00:%02d.000Z,%s-%d,\"SELECT Id\nFROM Account\"\n", i%60, prefix, i)
	}
	return b.String()
}

func requestIDs(es []ports.Entry) []string {
	var out []string
	for _, e := range es {
		if e.CheckpointOnly {
			continue
		}
		var f map[string]string
		_ = json.Unmarshal([]byte(e.Line), &f)
		out = append(out, f["REQUEST_ID"])
	}
	return out
}

func TestELFStreamsFilesWithThePreFileCheckpointUntilTheLastRow(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	// Listings come one record per answer behind nextRecordsUrl.
	org := &fakesf.ELFOrg{Batch: 1}
	org.Add("0AT1", "API", now.Add(-3*time.Hour), csvBody("a", 3))
	org.Add("0AT2", "API", now.Add(-2*time.Hour), csvBody("b", 2))
	org.Add("0AT3", "Login", now.Add(-2*time.Hour), csvBody("c", 1))
	org.Add("0AT4", "API", now.Add(-1*time.Hour), "EVENT_TYPE,TIMESTAMP_DERIVED,REQUEST_ID,QUERY\n") // no rows
	s := elfSource(t, org, salesforce.ELFSpec{EventTypes: []string{"*"}}, now)
	got := runELF(t, s, nil, func(es []ports.Entry) bool { return len(es) >= 7 })
	var api []ports.Entry
	for _, e := range got {
		if e.Checkpoint.Key == "eventlogfile:API" {
			api = append(api, e)
		}
	}
	if ids := requestIDs(api); !slices.Equal(ids, []string{"a-0", "a-1", "a-2", "b-0", "b-1"}) {
		t.Fatalf("API rows %v", ids)
	}
	if len(api) != 6 || !api[5].CheckpointOnly {
		t.Fatalf("the row-less file must still move the watermark with a checkpoint-only entry: %+v", api)
	}
	if org.Follows() < 2 {
		t.Fatalf("%d nextRecordsUrl pages read: the API listing (3 files, one a page) needs three pages", org.Follows())
	}
	// Rows 0 and 1 of the first file carry the lookback checkpoint, row 2 the
	// one that includes 0AT1; the second file's first row carries that too.
	if strings.Contains(api[1].Checkpoint.Value, "0AT1") || !strings.Contains(api[2].Checkpoint.Value, "0AT1") ||
		api[3].Checkpoint.Value != api[2].Checkpoint.Value || !strings.Contains(api[4].Checkpoint.Value, "0AT2") {
		t.Fatalf("checkpoints %q", []string{api[0].Checkpoint.Value, api[1].Checkpoint.Value, api[2].Checkpoint.Value, api[3].Checkpoint.Value, api[4].Checkpoint.Value})
	}
	var row map[string]string
	if err := json.Unmarshal([]byte(api[0].Line), &row); err != nil || row["QUERY"] != "SELECT Id\r\nFROM Account" ||
		api[0].Labels["source"] != "eventlogfile" || api[0].Labels["event_type"] != "API" || api[0].Metadata["level"] != "info" || api[0].Time != time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC) {
		t.Fatalf("entry %+v", api[0])
	}

	// Resuming from the last checkpoint reads nothing again, except a Daily
	// file regenerated in place (same Id, newer CreatedDate).
	last := api[5].Checkpoint.Value
	org.Add("0AT2", "API", now.Add(-30*time.Minute), csvBody("b2", 2))
	s2 := elfSource(t, org, salesforce.ELFSpec{EventTypes: []string{"API"}}, now)
	got = runELF(t, s2, map[string]string{"eventlogfile:API": last}, func(es []ports.Entry) bool { return len(es) >= 2 })
	if ids := requestIDs(got); !slices.Equal(ids, []string{"b2-0", "b2-1"}) {
		t.Fatalf("after resume: %v, want only the regenerated file", ids)
	}
}

func TestELFFailureMidFileReplaysTheFileAndStopsTheType(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	org := &fakesf.ELFOrg{Truncate: map[string]int{"0AT1": 1}}
	org.Add("0AT1", "API", now.Add(-3*time.Hour), csvBody("a", 200))
	org.Add("0AT2", "API", now.Add(-2*time.Hour), csvBody("b", 2))
	s := elfSource(t, org, salesforce.ELFSpec{EventTypes: []string{"API"}}, now)
	got := runELF(t, s, nil, func(es []ports.Entry) bool {
		return len(es) > 0 && strings.Contains(es[len(es)-1].Checkpoint.Value, "0AT2")
	})
	// The first download broke mid-file: its rows carried the pre-file
	// checkpoint, 0AT2 waited, and the next cycle read 0AT1 whole again.
	if org.Downloads[0] != "0AT1" || org.Downloads[1] != "0AT1" || org.Downloads[2] != "0AT2" {
		t.Fatalf("downloads %v", org.Downloads)
	}
	ids := requestIDs(got)
	firstComplete := slices.Index(ids, "a-199")
	if firstComplete < 0 || ids[firstComplete+1] != "b-0" {
		t.Fatalf("rows %v", ids)
	}
	for _, e := range got[:slices.IndexFunc(got, func(e ports.Entry) bool { return strings.Contains(e.Line, "a-199") })] {
		if strings.Contains(e.Checkpoint.Value, "0AT1") {
			t.Fatalf("a row before the last of 0AT1 carries the advanced checkpoint: %s", e.Line)
		}
	}
}

func TestELFStalledOrUnavailableDownloadIsRetriedAndTheFileReplayed(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	// The listing answers 503 once; then 0AT1's body stops halfway and the
	// server sends nothing more.
	org := &fakesf.ELFOrg{Unavailable: 1, Stall: map[string]int{"0AT1": 1}}
	org.Add("0AT1", "API", now.Add(-3*time.Hour), csvBody("a", 200))
	org.Add("0AT2", "API", now.Add(-2*time.Hour), csvBody("b", 2))
	s := elfSourceIdle(t, org, salesforce.ELFSpec{EventTypes: []string{"API"}}, now, 500*time.Millisecond)
	got := runELF(t, s, nil, func(es []ports.Entry) bool {
		return len(es) > 0 && strings.Contains(es[len(es)-1].Checkpoint.Value, "0AT2")
	})
	if d := org.DownloadsSoFar(); !slices.Equal(d, []string{"0AT1", "0AT1", "0AT2"}) {
		t.Fatalf("downloads %v: want the stalled file abandoned and read again before 0AT2", d)
	}
	ids := requestIDs(got)
	if n := slices.Index(ids, "a-199"); n < 0 || len(ids)-n != 3 || n < 200 {
		t.Fatalf("%d rows, a-199 at %d: want part of 0AT1, all of 0AT1 again, then 0AT2", len(ids), n)
	}
}

func TestELFSettleWindowAndGarbageCheckpoint(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	org := &fakesf.ELFOrg{}
	org.Add("OLD", "API", now.Add(-30*time.Hour), csvBody("old", 1)) // before the 1d lookback
	org.Add("0AT1", "API", now.Add(-3*time.Hour), csvBody("a", 1))
	org.Add("0AT2", "API", now.Add(-2*time.Minute), csvBody("young", 1)) // not settled
	s := elfSource(t, org, salesforce.ELFSpec{EventTypes: []string{"API"}, SettleWindow: 5 * time.Minute}, now)
	garbage := 0
	s.GarbageCheckpoint = func() { garbage++ }
	got := runELF(t, s, map[string]string{"eventlogfile:API": "not json"}, func(es []ports.Entry) bool { return len(es) >= 1 })
	time.Sleep(50 * time.Millisecond)
	if ids := requestIDs(got); !slices.Equal(ids, []string{"a-0"}) || garbage != 1 {
		t.Fatalf("rows %v (garbage checkpoints %d): want a-0 only, the young file left for later", ids, garbage)
	}
	if _, err := salesforce.NewELFSource(nil, "60.0", salesforce.ELFSpec{Interval: "Weekly", EventTypes: []string{"API"}}, nil, nil); err == nil {
		t.Fatal("interval Weekly was accepted")
	}
}

// BenchmarkEventLogFile50MB streams one 50 MB EventLogFile (450,000 rows,
// quoted newlines in every row, served gzip-compressed) from an in-process
// org through the source and reports rows/s (in Run) and the live heap the
// source added on top of the org's copies of the body, at its peak (sampled
// after a collection every 50,000 rows; the collections slow the run a
// little).
func BenchmarkEventLogFile50MB(b *testing.B) {
	body := fakesf.APIEventLogFile(450_000)
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	var peak, baseline uint64
	rows := 0
	var elapsed time.Duration // in Run only: the org's setup (compressing the body) is not counted
	for b.Loop() {
		org := &fakesf.ELFOrg{}
		org.Add("0AT1", "API", now.Add(-time.Hour), body)
		srv := httptest.NewServer(org)
		a, _ := salesforce.New(salesforce.Config{AuthMode: sfrules.ClientCredentials, LoginURL: srv.URL, ClientID: "ck", ClientSecret: "x"})
		s, _ := salesforce.NewELFSource(a, "60.0", salesforce.ELFSpec{Interval: "Hourly", EventTypes: []string{"API"}, PollInterval: time.Hour}, clockAt(now), nil)
		ctx, cancel := context.WithCancel(context.Background())
		var ms runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&ms)
		baseline = ms.HeapAlloc // the fake org holds the body in this process
		n := 0
		start := time.Now()
		_ = s.Run(ctx, func(string) (string, bool) { return "", false }, func(ports.Entry) error {
			n++
			if n%50_000 == 0 {
				// Live memory: after a collection, so the pacer's headroom
				// (proportional to the org's copy of the body) is not counted.
				runtime.GC()
				runtime.ReadMemStats(&ms)
				peak = max(peak, ms.HeapAlloc)
			}
			if n == 450_000 {
				cancel()
			}
			return nil
		})
		elapsed += time.Since(start)
		cancel()
		srv.Close()
		rows += n
	}
	b.ReportMetric(float64(rows)/elapsed.Seconds(), "rows/s")
	b.ReportMetric(float64(peak-min(peak, baseline))/(1<<20), "source-live-heap-MiB")
	b.ReportMetric(float64(len(body))/(1<<20), "file-MiB")
}
