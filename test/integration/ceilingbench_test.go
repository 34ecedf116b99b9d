package integration

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/internal/testenv/faultproxy"
)

// The sink ceiling of the daemon benchmarks (BenchmarkEventLogFileDaemon,
// BenchmarkPubSubDaemon): how fast the same entries reach the same peer
// when nothing but pushing them is done.
//
// After the timed daemon runs, one more daemon runs on the same
// configuration (its own job label and checkpoint file, no added latency)
// and pushes the same entries to a recorder that keeps every body and
// answers 204 at once. Those bodies are exactly what the daemon's sink
// sends: its batches (sink.loki.batch defaults, 1,000 entries or 1 MiB),
// labels, lines and timestamps, encoded once by the sink's own protobuf +
// snappy encoder; nothing is re-encoded or copied from the sink's code. A
// minimal pusher then replays those bytes to the same peer (VictoriaLogs,
// or the discarding peer under NULL_PEER=1; in latency mode through a
// proxy adding the same push latency) with as many pushes in the air as
// the daemon may have (sink.loki.max_in_flight, 16 unless the benchmark's
// configuration sets it), keeping its connections alive, timed from the
// first push to the last one accepted. The ratio ours/ceiling is the
// daemon's entries/s over the pusher's. The daemon's time counts from its
// exec (start-up, login and the source's first read included), the
// ceiling's only the pushes: the ratio charges the daemon for everything
// it does besides pushing. Into VictoriaLogs the replayed entries carry the
// recording run's job label, which nothing ingested before: the peer does
// the same work as for the daemon's entries.
//
// The replay also reads VictoriaLogs' CPU time: the peer's CPU per entry
// plus the daemon's is what an entry costs the machine, and with both on
// the same cores the daemon cannot beat cores ÷ that sum, however fast the
// peer alone takes the bodies. "cpu bound" reports that rate.

// ceiling is one ceiling run: the recorded bodies replayed.
type ceiling struct {
	bodies  int
	bytes   int64
	secs    float64
	entries int
	// peerCPUSecs is the peer's CPU time over the replay (0 for the
	// discarding peer, which runs in this process).
	peerCPUSecs float64
}

func (c ceiling) rate() float64 { return float64(c.entries) / c.secs }

// bodyRecorder is a Loki peer that keeps every push body and answers 204.
type bodyRecorder struct {
	mu     sync.Mutex
	bodies [][]byte
	header http.Header
}

func (r *bodyRecorder) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	body, err := io.ReadAll(req.Body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	r.mu.Lock()
	r.bodies = append(r.bodies, body)
	if r.header == nil {
		r.header = http.Header{}
		for _, k := range []string{"Content-Type", "Content-Encoding"} {
			r.header.Set(k, req.Header.Get(k))
		}
	}
	r.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
}

// measureCeiling records the daemon's push bodies for n entries (cfg
// renders the configuration as in benchRun, job naming the recording run)
// and replays them to push, through a proxy adding the push latency in
// latency mode; peer is the peer's process id (0: none to read).
func measureCeiling(b *testing.B, net *benchNet, job, push string, peer, n int, cfg func(state, push string) string) ceiling {
	b.Helper()
	rec := &bodyRecorder{}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	state := fmt.Sprintf("state: {file: {path: %s/state.json}}\n", b.TempDir())
	full, _ := withExtraConfig(b, cfg(state, srv.URL+"/loki/api/v1/push"))
	_ = untilPushed(b, job, full, n, 5*time.Minute, nil, nil, func() {})
	rec.mu.Lock()
	bodies, header := rec.bodies, rec.header
	rec.mu.Unlock()
	if net != nil && net.pushLat > 0 {
		u, err := url.Parse(push)
		if err != nil {
			b.Fatal(err)
		}
		p := faultproxy.New(b, u.Scheme+"://"+u.Host)
		p.Add(faultproxy.Rule{Name: "latency", Action: faultproxy.Delay, Delay: net.pushLat})
		push = p.URL + u.RequestURI()
	}
	c := ceiling{bodies: len(bodies), entries: n}
	for _, body := range bodies {
		c.bytes += int64(len(body))
	}
	// As before each daemon run (untilPushed): the harness's garbage is
	// collected now, not during the replay it would slow.
	runtime.GC()
	var before float64
	if peer != 0 {
		before = procCPUSecs(b, peer)
	}
	c.secs = replay(b, push, header, bodies, maxInFlight(b, full))
	if peer != 0 {
		c.peerCPUSecs = procCPUSecs(b, peer) - before
	}
	return c
}

// replay posts every body to push with inFlight requests in the air and
// returns the seconds from the first push to the last accepted. Any answer
// but a 2xx fails the benchmark.
func replay(b *testing.B, push string, header http.Header, bodies [][]byte, inFlight int) float64 {
	b.Helper()
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = inFlight
	client := &http.Client{Transport: tr, Timeout: time.Minute}
	defer tr.CloseIdleConnections()
	var next atomic.Int64
	var failed atomic.Value
	var wg sync.WaitGroup
	began := time.Now()
	for range inFlight {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(bodies) || failed.Load() != nil {
					return
				}
				req, err := http.NewRequest(http.MethodPost, push, bytes.NewReader(bodies[i]))
				if err != nil {
					failed.Store(err.Error())
					return
				}
				req.Header = header.Clone()
				resp, err := client.Do(req)
				if err != nil {
					failed.Store(err.Error())
					return
				}
				answer, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
				_ = resp.Body.Close()
				if resp.StatusCode/100 != 2 {
					failed.Store(fmt.Sprintf("answered %d %s", resp.StatusCode, answer))
					return
				}
			}
		})
	}
	wg.Wait()
	secs := time.Since(began).Seconds()
	if f := failed.Load(); f != nil {
		b.Fatalf("ceiling replay to %s: %v", push, f)
	}
	return secs
}

// maxInFlight is sink.loki.max_in_flight of a daemon configuration (YAML),
// 16 (the default) when it does not set it.
func maxInFlight(b *testing.B, cfg string) int {
	var c struct {
		Sink struct {
			Loki struct {
				MaxInFlight int `yaml:"max_in_flight"`
			} `yaml:"loki"`
		} `yaml:"sink"`
	}
	if err := yaml.Unmarshal([]byte(cfg), &c); err != nil {
		b.Fatalf("the benchmark's configuration: %v", err)
	}
	if c.Sink.Loki.MaxInFlight > 0 {
		return c.Sink.Loki.MaxInFlight
	}
	return 16
}

// reportCeiling adds the ceiling's metrics to b (ours is the daemon's
// entries/s over secs seconds, of which firstSecs before its first push;
// cpuSecs its CPU time over entries entries) and returns them for the
// summary line. The rate from the first push on (pushing/ceiling) leaves
// the start-up out.
func reportCeiling(b *testing.B, ours float64, c ceiling, cpuSecs, firstSecs, secs float64, entries int) string {
	b.ReportMetric(c.rate(), "ceiling-entries/s")
	b.ReportMetric(ours/c.rate(), "ours/ceiling")
	perEntry := cpuSecs / float64(entries) * 1e6
	b.ReportMetric(perEntry, "cpu-µs/entry")
	pushing := float64(entries) / (secs - firstSecs)
	b.ReportMetric(pushing/c.rate(), "pushing/ceiling")
	s := fmt.Sprintf("; ceiling (%d recorded bodies, %.1f MiB, replayed %s): %.0f entries/s, ours/ceiling %.2f; first push after %.2fs, %.0f entries/s from it (%.2f of the ceiling); daemon CPU %.2fs, %.1f µs/entry",
		c.bodies, float64(c.bytes)/(1<<20), time.Duration(c.secs*float64(time.Second)).Round(time.Millisecond), c.rate(), ours/c.rate(),
		firstSecs, pushing, pushing/c.rate(), cpuSecs, perEntry)
	if c.peerCPUSecs > 0 {
		peer := c.peerCPUSecs / float64(c.entries) * 1e6
		bound := float64(runtime.NumCPU()) / (perEntry + peer) * 1e6
		b.ReportMetric(peer, "peer-cpu-µs/entry")
		b.ReportMetric(ours/bound, "ours/cpu-bound")
		s += fmt.Sprintf("; the peer's CPU %.1f µs/entry, so %d cores bound the daemon to %.0f entries/s (ours %.2f of it)", peer, runtime.NumCPU(), bound, ours/bound)
	}
	return s
}

// peerPid is VictoriaLogs' process id, 0 under NULL_PEER=1.
func peerPid(logs *testenv.LogsServer) int {
	if os.Getenv("NULL_PEER") != "" {
		return 0
	}
	return logs.Pid
}

// userHZ is the unit of utime and stime in /proc/<pid>/stat: USER_HZ,
// which the kernel fixes at 100 on every architecture Go supports on
// Linux (it is what `getconf CLK_TCK` prints; CONFIG_HZ, the tick rate,
// does not change it).
const userHZ = 100

// procCPUSecs is the user+system CPU time pid has used so far, in seconds
// (10ms resolution).
func procCPUSecs(b testing.TB, pid int) float64 {
	b.Helper()
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		b.Fatal(err)
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// the fields after it start at field 3, state.
	s := string(data)
	rest := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(rest) < 13 {
		b.Fatalf("/proc/%d/stat: %q", pid, s)
	}
	utime, err1 := strconv.ParseFloat(rest[11], 64) // field 14
	stime, err2 := strconv.ParseFloat(rest[12], 64) // field 15
	if err1 != nil || err2 != nil {
		b.Fatalf("/proc/%d/stat: %q", pid, s)
	}
	return (utime + stime) / userHZ
}
