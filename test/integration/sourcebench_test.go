package integration

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/internal/testenv/fakepubsub"
	"github.com/sf2loki/sf2loki/internal/testenv/fakesf"
)

// BenchmarkEventLogFileDaemon runs the built daemon on one EventLogFile
// served by an in-process org and reports the rows/s from the daemon's
// start to the Loki peer accepting the last row, and the daemon's peak
// resident set (VmHWM) over the run. The 50MB file is 450,000 rows; the
// 150MB one shows the peak does not grow with the file. The peer is
// VictoriaLogs; NULL_PEER=1 pushes to a peer that discards the bodies,
// which measures the daemon alone. It also reports the daemon's CPU
// microseconds per row and the sink ceiling (ceilingbench_test.go): the
// same push bodies replayed to the same peer by a minimal pusher, and
// ours/ceiling. `make bench-elf` runs it. LATENCY=1
// (see latencybench_test.go; `make bench-latency`) keeps the checkpoints
// in an object store and delays store requests and pushes, as a network
// does; ELF_ROWS=N runs one file of N rows.
func BenchmarkEventLogFileDaemon(b *testing.B) {
	logs := testenv.StartLogs(b)
	push, peer := benchPeer(b, logs)
	net := latencyMode(b)
	sizes := []int{450_000, 1_350_000}
	if net != nil {
		// Round trips bound this mode: the larger file would only take longer.
		sizes = sizes[:1]
	}
	if os.Getenv("ELF_ROWS") != "" {
		sizes = []int{benchEnvInt(b, "ELF_ROWS", 0)}
	}
	for _, rows := range sizes {
		body := fakesf.APIEventLogFile(rows)
		b.Run(fmt.Sprintf("%.0fMiB", float64(len(body))/(1<<20)), func(b *testing.B) {
			var secs, peak, cpu, first float64
			var tot netTotals
			var extra string
			runs := 0
			for b.Loop() {
				runs++
				r := ingestELF(b, net, body, rows, push, fmt.Sprintf("elfbench%d-%d", rows, runs))
				secs += r.secs
				cpu += r.cpuSecs
				first += r.firstSecs
				peak = max(peak, r.peakMiB)
				tot.add(r.counts, rows, r.secs)
				extra = r.extra
			}
			b.StopTimer()
			ours := float64(rows*runs) / secs
			org := elfOrg(b, body)
			ceil := measureCeiling(b, net, fmt.Sprintf("elfceiling%d", rows), push, peerPid(logs), rows, func(state, push string) string {
				return elfBenchConfig(state, org, push, fmt.Sprintf("elfceiling%d", rows))
			})
			b.ReportMetric(ours, "rows/s")
			b.ReportMetric(peak, "peak-RSS-MiB")
			b.ReportMetric(float64(len(body))/(1<<20), "file-MiB")
			b.Logf("%d rows (%.1f MiB) into %s: %.0f rows/s, peak RSS %.1f MiB%s%s", rows, float64(len(body))/(1<<20), peer, ours, peak,
				reportCeiling(b, ours, ceil, cpu, first, secs, rows*runs), benchSummary(b, net, &tot, extra))
		})
	}
}

// ingestELF runs one daemon until the peer has accepted rows entries.
func ingestELF(b *testing.B, net *benchNet, body string, rows int, push, job string) benchResult {
	org := elfOrg(b, body)
	return benchRun(b, net, nil, job, push, rows, func(state, push string) string {
		return elfBenchConfig(state, org, push, job)
	})
}

// elfOrg serves body as one API EventLogFile of an in-process org until
// the benchmark ends and returns its URL.
func elfOrg(b *testing.B, body string) string {
	return elfOrgOf(b, "API", body)
}

// elfOrgOf serves body as one EventLogFile of eventType.
func elfOrgOf(b *testing.B, eventType, body string) string {
	org := &fakesf.ELFOrg{}
	org.Add("0AT1", eventType, time.Now().Add(-time.Hour), body)
	srv := httptest.NewServer(org)
	b.Cleanup(srv.Close)
	return srv.URL
}

// elfBenchConfig is the EventLogFile benchmark's daemon configuration.
func elfBenchConfig(state, org, push, job string) string {
	return elfTypeConfig(state, "API", org, push, job)
}

// elfTypeConfig reads eventType's EventLogFiles.
func elfTypeConfig(state, eventType, org, push, job string) string {
	return state + fmt.Sprintf(`salesforce: {auth_mode: client_credentials, login_url: %q, client_id: ck, client_secret: s3cret}
sources: {eventlogfile: {event_types: [%s], poll_interval: 1h, settle_window: 0s}}
sink: {loki: {url: %s, labels: {job: %s}}}
`, org, eventType, push, job)
}

// BenchmarkPubSubDaemon runs the built daemon on one Pub/Sub topic of the
// in-process Pub/Sub API holding 200,000 Avro-encoded LoginEventStream
// events (replay_preset EARLIEST, num_requested 100) and reports the
// events/s from the daemon's start to the Loki peer accepting the last
// one, the daemon's peak resident set, its CPU microseconds per event and
// the sink ceiling as for BenchmarkEventLogFileDaemon. NULL_PEER=1 pushes
// to a discarding peer. `make bench-pubsub` runs it; LATENCY=1 as for
// BenchmarkEventLogFileDaemon; PUBSUB_EVENTS=N sets the number of events.
func BenchmarkPubSubDaemon(b *testing.B) {
	n := benchEnvInt(b, "PUBSUB_EVENTS", 200_000)
	logs := testenv.StartLogs(b)
	push, peer := benchPeer(b, logs)
	net := latencyMode(b)
	config := loginTopic(b, n, 1)
	var secs, peak, cpu, first float64
	var tot netTotals
	var extra string
	runs := 0
	for b.Loop() {
		runs++
		job := fmt.Sprintf("psbench%d", runs)
		r := benchRun(b, net, nil, job, push, n, config(job))
		secs += r.secs
		cpu += r.cpuSecs
		first += r.firstSecs
		peak = max(peak, r.peakMiB)
		tot.add(r.counts, n, r.secs)
		extra = r.extra
	}
	b.StopTimer()
	ours := float64(n*runs) / secs
	ceil := measureCeiling(b, net, "psceiling", push, peerPid(logs), n, config("psceiling"))
	b.ReportMetric(ours, "events/s")
	b.ReportMetric(peak, "peak-RSS-MiB")
	b.Logf("%d events into %s: %.0f events/s, peak RSS %.1f MiB%s%s", n, peer, ours, peak,
		reportCeiling(b, ours, ceil, cpu, first, secs, n*runs), benchSummary(b, net, &tot, extra))
}

// loginTopic serves n LoginEventStream events, one a millisecond, on an
// in-process Pub/Sub API and returns the configuration of a daemon that
// reads them from the earliest (job its label).
func loginTopic(b *testing.B, n, defaultTopics int) func(job string) func(state, push string) string {
	ps := fakepubsub.Start(b)
	// PUBSUB_TOPICS (defaultTopics) spreads the events over as many topics
	// of the LoginEventStream schema: each stream has its own 100-event
	// window.
	k := benchEnvInt(b, "PUBSUB_TOPICS", defaultTopics)
	topics := make([]string, k)
	for i := range topics {
		topics[i] = fakepubsub.LoginTopic
		if i > 0 {
			topics[i] = fmt.Sprintf("/event/Login%d__e", i)
		}
		ps.AddTopic(topics[i], fakepubsub.LoginEventStreamSchema)
	}
	at := time.Now()
	for i := range n {
		ps.Append(topics[i%k], fakepubsub.LoginEvent(i, at.Add(time.Duration(i)*time.Millisecond)))
	}
	web := httptest.NewServer(&fakesf.Org{})
	b.Cleanup(web.Close)
	return func(job string) func(state, push string) string {
		return func(state, push string) string {
			return state + fmt.Sprintf(`salesforce: {auth_mode: client_credentials, login_url: %q, client_id: ck, client_secret: s3cret, org_id: 00D000000000001}
sources: {pubsub: {topics: [%s], replay_preset: EARLIEST, endpoint: %q, plaintext: true}}
sink: {loki: {url: %s, labels: {job: %s}}}
`, web.URL, strings.Join(topics, ", "), ps.Addr, push, job)
		}
	}
}

// BenchmarkPubSubOverEventLogFile compares the two sources on rows of
// similar size into a discarding peer: PUBSUB_EVENTS (600,000)
// LoginEventStream events (304-byte lines) over PUBSUB_TOPICS (4) topics,
// as an org streams several, and a Login EventLogFile of as many rows
// (317-byte lines), one daemon run of each in turn, RATIO_ROUNDS (3)
// rounds. It reports each source's entries/s and CPU-µs/entry over all
// rounds and Pub/Sub ÷ EventLogFile. One topic (PUBSUB_TOPICS=1) is bound
// by Salesforce's 100-event window times the round trip to the fake, not
// by the daemon (docs/performance.md). `make bench-ratio` runs it.
func BenchmarkPubSubOverEventLogFile(b *testing.B) {
	n := benchEnvInt(b, "PUBSUB_EVENTS", 600_000)
	rounds := benchEnvInt(b, "RATIO_ROUNDS", 3)
	peer := startCountingPeer(b)
	push := peer.URL()
	pubsub := loginTopic(b, n, 4)
	org := elfOrgOf(b, "Login", fakesf.LoginEventLogFile(n))
	var psSecs, psCPU, elfSecs, elfCPU float64
	for b.Loop() {
		for r := range rounds {
			job := fmt.Sprintf("ratio-elf%d", r)
			e := benchRun(b, nil, peer, job, push, n, func(state, push string) string { return elfTypeConfig(state, "Login", org, push, job) })
			elfSecs += e.secs
			elfCPU += e.cpuSecs
			p := benchRun(b, nil, peer, fmt.Sprintf("ratio-ps%d", r), push, n, pubsub(fmt.Sprintf("ratio-ps%d", r)))
			psSecs += p.secs
			psCPU += p.cpuSecs
			b.Logf("round %d: EventLogFile %.0f rows/s (%.1f µs/row, first push %.2fs, cores: daemon %.2f, harness %.2f), "+
				"Pub/Sub %.0f events/s (%.1f µs/event, first push %.2fs, cores: daemon %.2f, harness %.2f), ratio %.2f",
				r+1, float64(n)/e.secs, e.cpuSecs/float64(n)*1e6, e.firstSecs, e.cpuSecs/e.secs, e.harnessCPUSecs/e.secs,
				float64(n)/p.secs, p.cpuSecs/float64(n)*1e6, p.firstSecs, p.cpuSecs/p.secs, p.harnessCPUSecs/p.secs, e.secs/p.secs)
		}
	}
	b.StopTimer()
	total := float64(n * rounds * b.N)
	elf, ps := total/elfSecs, total/psSecs
	b.ReportMetric(elf, "elf-rows/s")
	b.ReportMetric(ps, "pubsub-events/s")
	b.ReportMetric(elfCPU/total*1e6, "elf-cpu-µs/row")
	b.ReportMetric(psCPU/total*1e6, "pubsub-cpu-µs/event")
	b.ReportMetric(ps/elf, "pubsub/elf")
	b.Logf("%d rounds of %d entries into a discarding peer: EventLogFile %.0f rows/s (%.1f CPU-µs/row), Pub/Sub %.0f events/s (%.1f CPU-µs/event): Pub/Sub ÷ EventLogFile %.2f",
		rounds*b.N, n, elf, elfCPU/total*1e6, ps, psCPU/total*1e6, ps/elf)
}

// benchResult is one daemon run: the seconds from exec to the peer
// accepting the last entry, the peak RSS, the daemon's CPU seconds by
// then, what the proxies counted by then (latency mode), and the extra
// configuration merged in.
type benchResult struct {
	secs, peakMiB, cpuSecs float64
	firstSecs              float64 // exec to the first entry pushed
	harnessCPUSecs         float64 // this process's CPU time over the run
	counts                 netCounts
	extra                  string
}

// benchRun runs one daemon until the peer has accepted n entries. cfg
// renders the configuration from its state section and the push URL: a
// checkpoint file and push, or in latency mode a fresh bucket and the
// proxies in front of the store and of push.
func benchRun(b *testing.B, net *benchNet, peer *countingPeer, job, push string, n int, cfg func(state, push string) string) benchResult {
	b.Helper()
	var r benchResult
	state := fmt.Sprintf("state: {file: {path: %s/state.json}}\n", b.TempDir())
	var env []string
	var run *netRun
	limit := 5 * time.Minute
	if net != nil {
		run = net.newRun(b, push)
		state, push, env = run.state, run.push, run.env
		limit = 30 * time.Minute
	}
	var full string
	full, r.extra = withExtraConfig(b, cfg(state, push))
	p := untilPushed(b, job, full, n, limit, env, peer, func() {
		if run != nil {
			r.counts = run.settledCounts()
		}
	})
	r.secs, r.peakMiB, r.cpuSecs, r.firstSecs, r.harnessCPUSecs = p.secs, p.peakMiB, p.cpuSecs, p.firstSecs, p.harnessCPUSecs
	if path := os.Getenv("BENCH_DAEMON_LOG"); path != "" && run != nil {
		run.writeTimeline(b, path+"."+job+".requests", p.started)
	}
	return r
}

// benchSummary is the end of a benchmark's summary line: the network
// counts in latency mode and the extra configuration.
func benchSummary(b *testing.B, net *benchNet, tot *netTotals, extra string) string {
	s := ""
	if net != nil {
		s += "; " + tot.report(b, net)
	}
	if extra != "" {
		s += "; with " + extra
	}
	return s
}

// benchPeer is the Loki push URL the daemon benchmarks use: VictoriaLogs,
// or with NULL_PEER=1 a peer that discards the bodies.
func benchPeer(b *testing.B, logs *testenv.LogsServer) (url, name string) {
	if os.Getenv("NULL_PEER") == "" {
		return logs.PushURL, "VictoriaLogs"
	}
	null := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	b.Cleanup(null.Close)
	return null.URL + "/loki/api/v1/push", "a discarding peer"
}

// pushedRun is what untilPushed measured: the seconds from exec to the
// peer accepting the last entry, the peak RSS in MiB, and the user+system
// CPU seconds the daemon had used by then.
type pushedRun struct {
	secs, peakMiB, cpuSecs float64
	// firstSecs is when the first push was accepted, as the counting
	// peer timed it, or else when the daemon's metrics first showed an
	// entry pushed (sampled every 20ms): the start-up, login and first
	// read before it.
	firstSecs float64
	// harnessCPUSecs is this process's CPU time over the run: the fake
	// services and the peer, which share the machine with the daemon.
	harnessCPUSecs float64
	started        time.Time // the daemon's exec
}

// untilPushed runs one daemon on cfg (with env) until the peer has accepted
// n entries, within limit, calls atEnd at once, and returns the seconds that
// took, the daemon's CPU time by then and its peak RSS. With a counting
// peer, the peer says when; without, the daemon's /metrics, every 20ms.
func untilPushed(b *testing.B, name, cfg string, n int, limit time.Duration, env []string, peer *countingPeer, atEnd func()) pushedRun {
	// The harness collects what it allocated before (the served events,
	// an earlier run's responses) now, not while this run is measured: a
	// collection of its large heap would take a core from whichever run
	// it fell in.
	runtime.GC()
	harness := procCPUSecs(b, os.Getpid())
	if peer != nil {
		peer.reset()
	}
	d := start(b, name, cfg, env...)
	profiled := cpuProfile(b, d)
	var first, secs float64
	for {
		var pushed float64
		if peer != nil {
			// The peer counts and times the pushes itself: nothing is
			// scraped from the daemon while it runs.
			got, f, l := peer.counted()
			if pushed = float64(got); got >= n {
				first, secs = f.Sub(d.started).Seconds(), l.Sub(d.started).Seconds()
				break
			}
		} else {
			m, err := d.metrics(quick)
			pushed = m["sf2loki_loki_entries_pushed_total"]
			if first == 0 && err == nil && pushed > 0 {
				first = time.Since(d.started).Seconds()
			}
			if err == nil && pushed >= float64(n) {
				secs = time.Since(d.started).Seconds()
				break
			}
		}
		if d.exited() || time.Since(d.started) > limit {
			b.Fatalf("%s: %v pushed after %s (exited %v)", d.name, pushed, time.Since(d.started), d.exited())
		}
		time.Sleep(20 * time.Millisecond)
	}
	r := pushedRun{secs: secs, cpuSecs: procCPUSecs(b, d.cmd.Process.Pid), firstSecs: first,
		harnessCPUSecs: procCPUSecs(b, os.Getpid()) - harness, started: d.started}
	if peer != nil {
		// The daemon's own count, once: a peer that miscounted would
		// end the run early.
		if m, err := d.metrics(quick); err != nil || m["sf2loki_loki_entries_pushed_total"] < float64(n) {
			b.Fatalf("%s: the peer counted %d entries, the daemon says %v pushed (%v)", d.name, n, m["sf2loki_loki_entries_pushed_total"], err)
		}
	}
	atEnd()
	profiled()
	r.peakMiB = float64(procStatusKiB(b, d.cmd.Process.Pid, "VmHWM")) / 1024
	d.signal(b, syscall.SIGTERM)
	d.waitExit(b, 30*time.Second)
	// BENCH_DAEMON_LOG=<file> keeps each daemon's log in <file>.<name>:
	// its lines are timed, so the start-up can be read step by step.
	if path := os.Getenv("BENCH_DAEMON_LOG"); path != "" {
		if err := os.WriteFile(path+"."+name, []byte(d.out.String()), 0o644); err != nil {
			b.Error(err)
		}
	}
	return r
}

// procStatusKiB reads one KiB field (VmRSS, VmHWM) of /proc/<pid>/status.
func procStatusKiB(b testing.TB, pid int, field string) int {
	b.Helper()
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "status"))
	if err != nil {
		b.Fatal(err)
	}
	for line := range strings.Lines(string(data)) {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			kb, _ := strconv.Atoi(strings.Fields(v)[0])
			return kb
		}
	}
	b.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// cpuProfile, with BENCH_CPUPROFILE=<file> (and service.pprof on through
// DAEMON_EXTRA_YAML='{service: {pprof: true}}'), records the daemon's CPU
// profile for BENCH_CPUPROFILE_SECONDS (default 5) from its start into
// <file>.<daemon name>, for `go tool pprof`; with BENCH_TRACE=<file>, its
// execution trace the same way, for `go tool trace` (its overhead then
// counts in the daemon's CPU per entry). The returned func waits for them.
func cpuProfile(b *testing.B, d *daemon) func() {
	var waits []func()
	for env, endpoint := range map[string]string{"BENCH_CPUPROFILE": "profile", "BENCH_TRACE": "trace"} {
		if path := os.Getenv(env); path != "" {
			secs := benchEnvInt(b, "BENCH_CPUPROFILE_SECONDS", 5)
			waits = append(waits, pprofFetch(b, d, env, endpoint, path, secs))
		}
	}
	return func() {
		for _, w := range waits {
			w()
		}
	}
}

// pprofFetch fetches /debug/pprof/<endpoint> from d for secs seconds into
// <path>.<daemon name>; the returned func waits for it.
func pprofFetch(b *testing.B, d *daemon, env, endpoint, path string, secs int) func() {
	done := make(chan error, 1)
	go func() {
		c := &http.Client{Timeout: time.Duration(secs+30) * time.Second}
		var resp *http.Response
		var err error
		for range 100 {
			if resp, err = c.Get(fmt.Sprintf("http://%s/debug/pprof/%s?seconds=%d", d.addr, endpoint, secs)); err == nil {
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		if err != nil {
			done <- err
			return
		}
		defer func() { _ = resp.Body.Close() }()
		if resp.StatusCode != http.StatusOK {
			done <- fmt.Errorf("%s answered %s: is service.pprof on?", resp.Request.URL, resp.Status)
			return
		}
		data, err := io.ReadAll(resp.Body)
		if err == nil {
			err = os.WriteFile(path+"."+d.name, data, 0o644)
		}
		done <- err
	}()
	return func() {
		if err := <-done; err != nil {
			b.Errorf("%s: %v", env, err)
		}
	}
}
