package integration

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/testenv"
)

// BenchmarkIdleShards measures the private memory a replica holds per shard
// it leads while the shards are idle: the built daemon leading 1 org, then
// 20 orgs (every org led by this one replica, so the balance has nothing to
// move), each org's synthetic source at IDLE_RATE events a second (default
// 1, the lowest rate the source has: 0 disables it, and a shard without a
// source runs no pipeline at all). Idle means that: every shard led, its
// pipeline and lanes built and pushing a trickle to a Loki peer that
// accepts everything at once, no backlog. After IDLE_SETTLE (default 30s)
// it reads RssAnon, RssFile and VmHWM from /proc/<pid>/status five times,
// 2s apart, and keeps the median of each; with -benchtime Nx it repeats the
// pair N times and reports the largest medians (the machine is shared: a
// figure that must hold a limit takes the worst run). IDLE_STORE=s3 puts
// the leases and the checkpoint documents on versitygw instead of files
// (each shard then has its own S3 clients). `make bench-idle` runs it.
func BenchmarkIdleShards(b *testing.B) {
	rate := benchEnvInt(b, "IDLE_RATE", 1)
	settle := 30 * time.Second
	if v := os.Getenv("IDLE_SETTLE"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			b.Fatalf("IDLE_SETTLE: %v", err)
		}
		settle = d
	}
	store := os.Getenv("IDLE_STORE")
	if store == "" {
		store = "file"
	}
	var s3srv *testenv.S3Server
	if store == "s3" {
		s3srv = testenv.StartS3(b)
	} else if store != "file" {
		b.Fatalf("IDLE_STORE=%q: want file or s3", store)
	}
	var pushes atomic.Int64
	peer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		pushes.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer peer.Close()

	counts := []int{1, 20}
	worst := make([]idleMemory, len(counts))
	for b.Loop() {
		for i, n := range counts {
			var be backend
			if s3srv != nil {
				be = s3Backend(b, s3srv, 10*time.Second, 2*time.Second)
			} else {
				be = fileBackend(b, 10*time.Second, 2*time.Second)
			}
			var orgs strings.Builder
			for o := range n {
				fmt.Fprintf(&orgs, "  - name: org-%02d\n    sources: {synthetic: {rate: %d}}\n", o+1, rate)
			}
			cfg := be.config("idle", be.url) + fmt.Sprintf("sink:\n  loki: {url: %s/loki/api/v1/push, labels: {job: idlebench}}\norgs:\n%s", peer.URL, orgs.String())
			// AWS_CA_BUNDLE, when the machine sets it, has every S3 store
			// parse the bundle into a pool of its own: left unset, as a
			// deployment on AWS leaves it.
			env := append(slices.Clone(be.env(be.url)), "AWS_CA_BUNDLE=")
			d := start(b, fmt.Sprintf("idle-%d", n), cfg, env...)
			led := waitLeading(b, d, n, 60*time.Second)
			time.Sleep(settle)
			m := sampleIdle(b, d)
			if d.exited() {
				b.Fatalf("the daemon leading %d orgs exited", n)
			}
			d.signal(b, syscall.SIGTERM)
			d.waitExit(b, 30*time.Second)
			b.Logf("%d org(s), %s: every shard led after %s; after %s: RssAnon %.1f MiB, RssFile %.1f MiB, VmHWM %.1f MiB, heap in use %.1f MiB, %d goroutines",
				n, be.name, led.Round(time.Millisecond), settle, m.anon, m.file, m.hwm, m.heap, m.goroutines)
			worst[i] = worst[i].max(m)
		}
	}
	one, many := worst[0], worst[1]
	perShard := (many.anon - one.anon) / float64(counts[1]-counts[0])
	b.ReportMetric(one.anon, "RssAnon-1-MiB")
	b.ReportMetric(many.anon, "RssAnon-20-MiB")
	b.ReportMetric(perShard, "RssAnon-per-extra-shard-MiB")
	b.ReportMetric(one.file, "RssFile-1-MiB")
	b.ReportMetric(many.file, "RssFile-20-MiB")
	var w strings.Builder
	fmt.Fprintf(&w, "\n### Idle shards (%s lease and state, synthetic source at %d event/s per org, %s settle, %d CPUs, %s)\n\n",
		store, rate, settle, runtime.NumCPU(), time.Now().UTC().Format("2006-01-02"))
	fmt.Fprintf(&w, "| Shards led | RssAnon | RssFile | VmHWM | Go heap in use | Goroutines |\n|---|---|---|---|---|---|\n")
	for i, n := range counts {
		m := worst[i]
		fmt.Fprintf(&w, "| %d | %.1f MiB | %.1f MiB | %.1f MiB | %.1f MiB | %d |\n", n, m.anon, m.file, m.hwm, m.heap, m.goroutines)
	}
	fmt.Fprintf(&w, "| per extra shard | %.2f MiB | | | %.2f MiB | %.1f |\n\n", perShard,
		(many.heap-one.heap)/float64(counts[1]-counts[0]), float64(many.goroutines-one.goroutines)/float64(counts[1]-counts[0]))
	fmt.Print(w.String())
}

// idleMemory is one idle replica's memory, in MiB.
type idleMemory struct {
	anon, file, hwm, heap float64
	goroutines            int
}

func (m idleMemory) max(o idleMemory) idleMemory {
	return idleMemory{anon: max(m.anon, o.anon), file: max(m.file, o.file), hwm: max(m.hwm, o.hwm), heap: max(m.heap, o.heap),
		goroutines: max(m.goroutines, o.goroutines)}
}

// waitLeading waits until d leads n shards with valid fences and has pushed
// since, and returns how long that took from its start.
func waitLeading(b *testing.B, d *daemon, n int, limit time.Duration) time.Duration {
	b.Helper()
	for {
		shards, err := shardsOf(quick, d)
		led := 0
		for _, s := range shards {
			if s.Role == "leader" && s.FenceDeadline != nil && s.FenceDeadline.After(time.Now()) {
				led++
			}
		}
		if err == nil && led == n {
			return time.Since(d.started)
		}
		if d.exited() || time.Since(d.started) > limit {
			b.Fatalf("%s leads %d of %d shards after %s (exited %v, error %v)", d.name, led, n, time.Since(d.started), d.exited(), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// sampleIdle reads the process's memory five times, 2s apart, and returns
// the median of each measure.
func sampleIdle(b *testing.B, d *daemon) idleMemory {
	b.Helper()
	var anon, file, hwm, heap, gor []float64
	for i := range 5 {
		if i > 0 {
			time.Sleep(2 * time.Second)
		}
		st := procStatusMiB(b, d.cmd.Process.Pid, "RssAnon", "RssFile", "VmHWM")
		anon, file, hwm = append(anon, st[0]), append(file, st[1]), append(hwm, st[2])
		m, err := d.metrics(quick)
		if err != nil {
			b.Fatalf("%s: /metrics: %v", d.name, err)
		}
		heap, gor = append(heap, m["go_memstats_heap_inuse_bytes"]/(1<<20)), append(gor, m["go_goroutines"])
	}
	median := func(v []float64) float64 {
		slices.Sort(v)
		return v[len(v)/2]
	}
	return idleMemory{anon: median(anon), file: median(file), hwm: median(hwm), heap: median(heap), goroutines: int(median(gor))}
}

// procStatusMiB reads fields (kB lines such as RssAnon) of
// /proc/<pid>/status, in MiB, in the order asked.
func procStatusMiB(b *testing.B, pid int, fields ...string) []float64 {
	b.Helper()
	out := make([]float64, len(fields))
	for i, f := range fields {
		out[i] = float64(procStatusKiB(b, pid, f)) / 1024
	}
	return out
}
