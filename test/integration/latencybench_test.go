package integration

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/internal/testenv/faultproxy"
)

// The daemon benchmarks' realistic-network mode (`make bench-latency`).
//
// By default BenchmarkEventLogFileDaemon and BenchmarkPubSubDaemon keep
// their checkpoints in a file and push to a peer on loopback: they measure
// the daemon's CPU. With any of these set, the checkpoint state lives in a
// real object store reached through a fault proxy delaying every request,
// and the Loki push goes through another delaying every push, so the run is
// bound by round trips as it is in production:
//
//	LATENCY=1            turn the mode on with the defaults below
//	STORE=s3|gcs         versitygw (default) or fake-gcs-server
//	STORE_LATENCY=30ms   added to every object-store request
//	PUSH_LATENCY=150ms   added to every Loki push
//	GCS_RATE_WINDOW=1s   gcs: a second write to one object within this is
//	                     answered 429 rateLimitExceeded (0 turns it off)
//	ELF_ROWS=N           the EventLogFile rows (default: only the 450,000-row
//	                     file; the 1,350,000-row one takes minutes here)
//	PUBSUB_EVENTS=N      the Pub/Sub events (default 200,000)
//
// Lease coordination stays noop (one instance), as in the loopback mode.
// Each run reports, besides entries/s: checkpoint writes (PUT on S3, upload
// POST on GCS, to the checkpoint object, every attempt counted at the proxy
// until the writes settle after the last entry's push) per minute of the
// ingest and per million entries, pushes per second, and on GCS the writes
// answered 429.
//
// In every mode DAEMON_EXTRA_YAML (a YAML document) is merged into the
// daemon's configuration, and BENCH_COMMIT_INTERVAL / BENCH_MAX_IN_FLIGHT
// set state.commit_interval / sink.loki.max_in_flight, so one benchmark
// compares settings.

// benchNet is the realistic-network mode; nil when it is off.
type benchNet struct {
	store             string // "s3" or "gcs"
	storeLat, pushLat time.Duration
	rateWindow        time.Duration // gcs only
	s3                *testenv.S3Server
	gcs               *testenv.GCSServer
}

// latencyMode reads the environment and starts the object store; nil when
// the mode is off.
func latencyMode(b *testing.B) *benchNet {
	b.Helper()
	on := func(k string) bool { v := os.Getenv(k); return v != "" && v != "0" }
	if !on("LATENCY") && os.Getenv("STORE_LATENCY") == "" && os.Getenv("PUSH_LATENCY") == "" && os.Getenv("STORE") == "" {
		return nil
	}
	n := &benchNet{store: "s3", storeLat: 30 * time.Millisecond, pushLat: 150 * time.Millisecond, rateWindow: time.Second}
	if s := os.Getenv("STORE"); s != "" {
		n.store = s
	}
	for k, d := range map[string]*time.Duration{"STORE_LATENCY": &n.storeLat, "PUSH_LATENCY": &n.pushLat, "GCS_RATE_WINDOW": &n.rateWindow} {
		if v := os.Getenv(k); v != "" {
			var err error
			if *d, err = time.ParseDuration(v); err != nil {
				b.Fatalf("%s=%q: %v", k, v, err)
			}
		}
	}
	switch n.store {
	case "s3":
		n.s3 = testenv.StartS3(b)
	case "gcs":
		n.gcs = testenv.StartGCS(b)
	default:
		b.Fatalf("STORE=%q: want s3 or gcs", n.store)
	}
	return n
}

// String describes the mode for the summary line.
func (n *benchNet) String() string {
	s := fmt.Sprintf("state on %s +%s/request, push +%s", n.store, n.storeLat, n.pushLat)
	if n.store == "gcs" && n.rateWindow > 0 {
		s += fmt.Sprintf(", 429 on a 2nd write to an object within %s", n.rateWindow)
	}
	return s
}

// netRun is one daemon run's store, proxies and counts.
type netRun struct {
	n *benchNet
	// state is the configuration's state section, env what reaches the
	// store, push the Loki push URL through the push proxy.
	state, push string
	env         []string
	object      string
	// store is the proxy the daemon talks to (it counts every request);
	// limiter, on GCS, answers the 429s behind it.
	store, limiter, pushes *faultproxy.Proxy
}

// newRun makes a fresh bucket and proxies for one daemon run pushing to
// pushURL.
func (n *benchNet) newRun(b *testing.B, pushURL string) *netRun {
	b.Helper()
	r := &netRun{n: n, object: "ha/state.json"}
	delay := func(p *faultproxy.Proxy, d time.Duration) {
		if d > 0 {
			p.Add(faultproxy.Rule{Name: "latency", Action: faultproxy.Delay, Delay: d})
		}
	}
	switch n.store {
	case "s3":
		bucket := n.s3.NewBucket(b)
		r.store = faultproxy.New(b, n.s3.Endpoint)
		// The store's default commit interval (not the HA tests' short one).
		r.state = fmt.Sprintf("state:\n  store: s3\n  s3: {bucket: %s, key: %s, endpoint_url: %s}\n", bucket, r.object, r.store.URL)
		r.env = s3Env
	case "gcs":
		bucket := n.gcs.NewBucket(b)
		// The delay sits in front of the limiter, so a 429 costs a round
		// trip too.
		r.limiter = faultproxy.New(b, n.gcs.URL)
		if n.rateWindow > 0 {
			r.limiter.Add(gcsRateLimit(n.rateWindow))
		}
		r.store = faultproxy.New(b, r.limiter.URL)
		r.state = fmt.Sprintf("state:\n  store: gcs\n  gcs: {bucket: %s, object_name: %s}\n", bucket, r.object)
		r.env = []string{"STORAGE_EMULATOR_HOST=" + strings.TrimPrefix(r.store.URL, "http://")}
	}
	delay(r.store, n.storeLat)
	u, err := url.Parse(pushURL)
	if err != nil {
		b.Fatal(err)
	}
	r.pushes = faultproxy.New(b, u.Scheme+"://"+u.Host)
	delay(r.pushes, n.pushLat)
	r.push = r.pushes.URL + u.RequestURI()
	return r
}

// gcsRateLimit answers a write to an object that arrives within window of
// the last write to it that was let through with GCS's 429
// rateLimitExceeded (GCS allows about one write per second per object).
func gcsRateLimit(window time.Duration) faultproxy.Rule {
	var mu sync.Mutex
	last := map[string]time.Time{}
	const msg = "The object exceeded the rate limit for object mutation operations (create, update, and delete). Please reduce your request rate. See https://cloud.google.com/storage/docs/gcs429."
	return faultproxy.Rule{Name: "rate-limit", Action: faultproxy.Respond, Status: http.StatusTooManyRequests,
		Body: fmt.Sprintf(`{"error":{"code":429,"message":%q,"errors":[{"message":%q,"domain":"usageLimits","reason":"rateLimitExceeded"}]}}`, msg, msg),
		Match: func(r *http.Request) bool {
			obj := objectWritten(faultproxy.FromHTTP(r))
			if obj == "" {
				return false
			}
			mu.Lock()
			defer mu.Unlock()
			now := time.Now()
			if at, ok := last[obj]; ok && now.Sub(at) < window {
				return true
			}
			last[obj] = now
			return false
		}}
}

// objectWritten is the object a write request names ("" for any other
// request): an S3 path-style PUT (bucket/key) or a GCS upload (name=).
func objectWritten(r faultproxy.Request) string {
	if r.Method != http.MethodPut && r.Method != http.MethodPost {
		return ""
	}
	if name := r.Query.Get("name"); name != "" {
		return name
	}
	if r.Method == http.MethodPut {
		if _, key, ok := strings.Cut(strings.TrimPrefix(r.Path, "/"), "/"); ok {
			return key
		}
	}
	return ""
}

// netCounts is what the proxies counted up to one moment.
type netCounts struct {
	writes, rejected, pushes int
}

// settledCounts is counts once no checkpoint write has reached the store
// for 2s plus the store latency (at most 30s): the commit of the last batch
// (on EventLogFile the file's only one) trails its push.
func (r *netRun) settledCounts() netCounts {
	quiet := 2*time.Second + r.n.storeLat
	c := r.counts()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
		time.Sleep(quiet)
		next := r.counts()
		if next.writes == c.writes {
			return next
		}
		c = next
	}
	return c
}

// writeTimeline writes to path the store's and the pushes' requests, one a
// line, by when they reached the proxy, timed from started (the daemon's
// exec), with when each was answered.
func (r *netRun) writeTimeline(b *testing.B, path string, started time.Time) {
	var lines []string
	for name, reqs := range map[string][]faultproxy.Request{"store": r.store.Requests(), "push": r.pushes.Requests()} {
		for _, q := range reqs {
			lines = append(lines, fmt.Sprintf("%8.3fs %-5s %s %s -> %d at %.3fs", q.Received.Sub(started).Seconds(), name, q.Method, q.Path, q.Status, q.At.Sub(started).Seconds()))
		}
	}
	slices.Sort(lines)
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		b.Error(err)
	}
}

// counts reads the proxies: checkpoint writes (every attempt), those
// answered 429, and push requests.
func (r *netRun) counts() netCounts {
	var c netCounts
	c.writes = r.store.Count(func(q faultproxy.Request) bool { return objectWritten(q) == r.object })
	if r.limiter != nil {
		c.rejected = r.limiter.Count(func(q faultproxy.Request) bool { return q.Fault == "rate-limit" })
	}
	c.pushes = r.pushes.Count(func(q faultproxy.Request) bool { return q.Method == http.MethodPost })
	return c
}

// netTotals sums the runs of one benchmark.
type netTotals struct {
	netCounts
	entries int
	secs    float64
}

func (t *netTotals) add(c netCounts, entries int, secs float64) {
	t.writes += c.writes
	t.rejected += c.rejected
	t.pushes += c.pushes
	t.entries += entries
	t.secs += secs
}

// report adds the network metrics to b and returns them for the summary
// line.
func (t *netTotals) report(b *testing.B, n *benchNet) string {
	perMin := float64(t.writes) / t.secs * 60
	perM := float64(t.writes) / float64(t.entries) * 1e6
	pushRate := float64(t.pushes) / t.secs
	b.ReportMetric(perMin, "checkpoint-PUTs/min")
	b.ReportMetric(perM, "checkpoint-PUTs/M-entries")
	b.ReportMetric(pushRate, "pushes/s")
	s := fmt.Sprintf("%s: %d checkpoint writes (%.1f/min, %.0f per million entries), %d pushes (%.2f/s, %.0f entries each)",
		n, t.writes, perMin, perM, t.pushes, pushRate, float64(t.entries)/float64(max(t.pushes, 1)))
	if n.store == "gcs" {
		b.ReportMetric(float64(t.rejected), "429s")
		s += fmt.Sprintf(", %d answered 429", t.rejected)
	}
	return s
}

// benchEnvInt reads a positive integer from the environment, def when
// unset; anything else fails the benchmark.
func benchEnvInt(b *testing.B, key string, def int) int {
	v := os.Getenv(key)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q: want a positive integer", key, v)
	}
	return n
}

// withExtraConfig merges DAEMON_EXTRA_YAML, BENCH_COMMIT_INTERVAL and
// BENCH_MAX_IN_FLIGHT into cfg and describes what it merged ("" and cfg
// unchanged when none is set).
func withExtraConfig(b *testing.B, cfg string) (merged, desc string) {
	b.Helper()
	extra := map[string]any{}
	if y := os.Getenv("DAEMON_EXTRA_YAML"); y != "" {
		if err := yaml.Unmarshal([]byte(y), &extra); err != nil {
			b.Fatalf("DAEMON_EXTRA_YAML: %v", err)
		}
	}
	if v := os.Getenv("BENCH_COMMIT_INTERVAL"); v != "" {
		mergeYAML(extra, map[string]any{"state": map[string]any{"commit_interval": v}})
	}
	if v := os.Getenv("BENCH_MAX_IN_FLIGHT"); v != "" {
		mergeYAML(extra, map[string]any{"sink": map[string]any{"loki": map[string]any{"max_in_flight": benchEnvInt(b, "BENCH_MAX_IN_FLIGHT", 1)}}})
	}
	if len(extra) == 0 {
		return cfg, ""
	}
	base := map[string]any{}
	if err := yaml.Unmarshal([]byte(cfg), &base); err != nil {
		b.Fatalf("the benchmark's configuration: %v", err)
	}
	mergeYAML(base, extra)
	out, err := yaml.Marshal(base)
	if err != nil {
		b.Fatal(err)
	}
	d, _ := json.Marshal(extra)
	return string(out), string(d)
}

// mergeYAML merges src into dst: maps key by key, anything else replaced.
func mergeYAML(dst, src map[string]any) {
	for k, v := range src {
		sm, ok1 := v.(map[string]any)
		dm, ok2 := dst[k].(map[string]any)
		if ok1 && ok2 {
			mergeYAML(dm, sm)
			continue
		}
		dst[k] = v
	}
}
