package integration

import (
	"context"
	"fmt"
	"maps"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sf2loki/sf2loki/internal/adapters/clock"
	"github.com/sf2loki/sf2loki/internal/adapters/s3"
	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/internal/testenv/faultproxy"
)

// BenchmarkHA measures the HA claims on this machine and prints one table
// (`make bench-ha`): checkpoint commits through the CheckpointCommitter
// against bare conditional PutObject calls on the same versitygw, measured
// in alternating rounds; object-store requests per hour per replica at the
// default renew_interval; idle RSS and start-to-/healthz time of the
// daemon; and the failover matrix. Run it once (-benchtime 1x): every part
// sizes itself. HA_REPEATS (default 10) sets the failovers per cell,
// HA_IDLE (default 60s) the request-counting window.
func BenchmarkHA(b *testing.B) {
	var report strings.Builder
	for b.Loop() {
		report.Reset()
		fmt.Fprintf(&report, "\n## sf2loki HA benchmark (%s, %d CPUs)\n\n", time.Now().UTC().Format("2006-01-02"), runtime.NumCPU())
		benchCommits(b, &report)
		benchRequests(b, &report)
		benchDaemon(b, &report)
		benchFailover(b, &report)
		benchShards(b, &report)
	}
	fmt.Print(report.String())
}

// BenchmarkHAShards is BenchmarkHA's shard section alone.
func BenchmarkHAShards(b *testing.B) {
	var report strings.Builder
	for b.Loop() {
		report.Reset()
		benchShards(b, &report)
	}
	fmt.Print(report.String())
}

// benchShards runs three replicas over six orgs per cell and, HA_REPEATS
// times (at most 5), kills one (its shards move: to 3/3) and restarts it
// (the others hand one each back: to 2/2/2), measuring how many shards
// moved and how long the balance took.
func benchShards(b *testing.B, w *strings.Builder) {
	logs := testenv.StartLogs(b)
	n := min(envInt("HA_REPEATS", 10), 5)
	fmt.Fprintf(w, "### Shards: three replicas over six orgs, a replica killed and restarted (%d of each per cell)\n\n", n)
	fmt.Fprintf(w, "| Cell | ttl / renew | Kill: shards moved, time to 3/3 min / median / max | Join: shards moved, time to 2/2/2 min / median / max |\n|---|---|---|---|\n")
	var s3srv *testenv.S3Server
	cells := []cellSpec{
		{"file", func(t testing.TB) backend { return fileBackend(t, ttl, renew) }},
		{"s3", func(t testing.TB) backend {
			if s3srv == nil {
				s3srv = testenv.StartS3(b)
			}
			return s3Backend(t, s3srv, ttl, renew)
		}},
	}
	var orgYAML strings.Builder
	for _, o := range []string{"org-a", "org-b", "org-c", "org-d", "org-e", "org-f"} {
		fmt.Fprintf(&orgYAML, "  - name: %s\n    sources: {synthetic: {rate: 20}}\n", o)
	}
	for _, cell := range cells {
		be := cell.make(b)
		c := newCluster(b, be, func(string) string {
			return fmt.Sprintf("sink:\n  loki: {url: %s, labels: {job: bench-shards}}\norgs:\n%s", logs.PushURL, orgYAML.String())
		})
		for _, r := range []string{"r1", "r2", "r3"} {
			c.start(r)
		}
		untilBalanced(b, c, 10*ttl, 2, 2, 2)
		var kills, joins []time.Duration
		movedKill, movedJoin := 0, 0
		for i := range n {
			victim := c.live()[i%3]
			before := leads(c)
			victim.signal(b, syscall.SIGKILL)
			<-victim.done
			kills = append(kills, untilBalanced(b, c, ttl+renew+5*time.Second, 3, 3))
			movedKill += moved(before, leads(c))
			before = leads(c)
			c.start(victim.name)
			joins = append(joins, untilBalanced(b, c, 6*ttl, 2, 2, 2))
			movedJoin += moved(before, leads(c))
			time.Sleep(2 * renew)
		}
		fmt.Fprintf(w, "| %s | %s / %s | %.1f, %s | %.1f, %s |\n", be.name, be.ttl, be.renew,
			float64(movedKill)/float64(n), spread(kills, be), float64(movedJoin)/float64(n), spread(joins, be))
		for _, d := range c.live() {
			d.signal(b, syscall.SIGTERM)
			d.waitExit(b, 30*time.Second)
		}
	}
	fmt.Fprintln(w)
}

// moved counts the orgs whose leader changed between two views.
func moved(before, after map[string][]string) int {
	lead := func(l map[string][]string) map[string]string {
		out := map[string]string{}
		for r, orgs := range l {
			for _, o := range orgs {
				out[o] = r
			}
		}
		return out
	}
	a, z := lead(before), lead(after)
	n := 0
	for o, r := range z {
		if a[o] != r {
			n++
		}
	}
	return n
}

// benchCommits measures sequential compare-and-swap writes of one small
// document three ways, in alternating one-second rounds so that machine
// noise hits all three alike.
func benchCommits(b *testing.B, w *strings.Builder) {
	srv := testenv.StartS3(b)
	bucket := srv.NewBucket(b)
	ctx := context.Background()
	open := func(key string) *s3.Store {
		st, err := s3.New(ctx, s3.Config{Bucket: bucket, Key: key, EndpointURL: srv.Endpoint, Region: testenv.S3Region,
			Credentials: srv.Credentials()})
		if err != nil {
			b.Fatal(err)
		}
		return st
	}
	committer, err := domain.NewCheckpointCommitter(open("bench/committer.json"), clock.New(),
		domain.CommitterConfig{Fence: func() error { return nil }})
	if err != nil {
		b.Fatal(err)
	}
	raw := srv.Client()
	rawKey := "bench/raw.json"
	put, err := raw.PutObject(ctx, &awss3.PutObjectInput{Bucket: &bucket, Key: &rawKey, Body: strings.NewReader(`{}`), IfNoneMatch: aws.String("*")})
	if err != nil {
		b.Fatal(err)
	}
	etag := aws.ToString(put.ETag)
	n := 0
	ways := []struct {
		name string
		op   func() error
	}{
		{"CheckpointCommitter.Commit (fence, encode, CAS)", func() error {
			n++
			return committer.Commit(ctx, "synthetic:LoginEvent", strconv.Itoa(n))
		}},
		{"bare SDK PutObject with If-Match", func() error {
			n++
			body := fmt.Sprintf(`{"synthetic:LoginEvent":"%d"}`, n)
			out, err := raw.PutObject(ctx, &awss3.PutObjectInput{Bucket: &bucket, Key: &rawKey, Body: strings.NewReader(body), IfMatch: &etag})
			if err == nil {
				etag = aws.ToString(out.ETag)
			}
			return err
		}},
	}
	counts := make([]int, len(ways))
	spent := make([]time.Duration, len(ways))
	for range 5 {
		for i, way := range ways {
			start := time.Now()
			for time.Since(start) < time.Second {
				if err := way.op(); err != nil {
					b.Fatalf("%s: %v", way.name, err)
				}
				counts[i]++
			}
			spent[i] += time.Since(start)
		}
	}
	rate := func(i int) float64 { return float64(counts[i]) / spent[i].Seconds() }
	fmt.Fprintf(w, "### Checkpoint commits on versitygw (sequential, 5 alternating 1s rounds)\n\n| Path | Writes/s |\n|---|---|\n")
	for i, way := range ways {
		fmt.Fprintf(w, "| %s | %.0f |\n", way.name, rate(i))
	}
	fmt.Fprintf(w, "\nRatio committer ÷ bare SDK: **%.2f** (goal ≥ 0.9)\n\n", rate(0)/rate(1))
}

// benchRequests counts every object-store request of a leader and a
// standby at the default lease timing (ttl 30s, renew_interval 10s), idle
// (no source), through counting proxies, and scales to an hour.
func benchRequests(b *testing.B, w *strings.Builder) {
	window := 60 * time.Second
	if d, err := time.ParseDuration(os.Getenv("HA_IDLE")); err == nil && d > 0 {
		window = d
	}
	srv := testenv.StartS3(b)
	be := s3Backend(b, srv, 30*time.Second, 10*time.Second)
	proxies := map[string]*faultproxy.Proxy{"leader": faultproxy.New(b, be.url), "standby": faultproxy.New(b, be.url)}
	c := newCluster(b, be, nil)
	c.storeURL = func(name string) string { return proxies[name].URL }
	leader := c.start("leader")
	leader.waitReady(b, 200, "leader", slack)
	standby := c.start("standby")
	standby.waitReady(b, 503, "standby", slack)
	// Count whole intervals from here.
	for _, p := range proxies {
		p.Reset()
	}
	time.Sleep(window)
	fmt.Fprintf(w, "### Object-store requests at the default renew_interval (10s), idle, counted over %s\n\n", window)
	fmt.Fprintf(w, "| Replica | Requests counted | By kind | Per hour |\n|---|---|---|---|\n")
	for _, name := range []string{"leader", "standby"} {
		kinds := map[string]int{}
		reqs := proxies[name].Requests()
		for _, r := range reqs {
			kind := r.Method
			if r.Conditional() {
				kind += " (conditional)"
			}
			kinds[kind]++
		}
		var by []string
		for _, k := range slices.Sorted(maps.Keys(kinds)) {
			by = append(by, fmt.Sprintf("%d %s", kinds[k], k))
		}
		// The rate between the first and the last request, so the phase of
		// the window against the interval does not bias it.
		perHour := 0.0
		if len(reqs) > 1 {
			perHour = float64(len(reqs)-1) * float64(time.Hour) / float64(reqs[len(reqs)-1].Received.Sub(reqs[0].Received))
		}
		fmt.Fprintf(w, "| %s | %d | %s | %.0f |\n", name, len(reqs), strings.Join(by, ", "), perHour)
	}
	fmt.Fprintln(w)
	for _, d := range []*daemon{standby, leader} {
		d.signal(b, syscall.SIGTERM)
		d.waitExit(b, 30*time.Second)
	}
}

// benchDaemon starts the daemon five times (file lease, idle) and measures
// the time from exec to the first /healthz 200, and the resident set after
// 10s of idling as leader.
func benchDaemon(b *testing.B, w *strings.Builder) {
	var starts []time.Duration
	var rss []int
	for i := range 5 {
		be := fileBackend(b, ttl, renew)
		d := start(b, fmt.Sprintf("idle%d", i), be.config("idle", ""))
		for {
			if code, _ := healthz(d); code == 200 {
				break
			}
			if time.Since(d.started) > slack {
				b.Fatalf("no /healthz within %s", slack)
			}
			time.Sleep(2 * time.Millisecond)
		}
		starts = append(starts, time.Since(d.started))
		if i == 0 {
			time.Sleep(10 * time.Second)
			rss = append(rss, procStatusKiB(b, d.cmd.Process.Pid, "VmRSS"))
		}
		d.signal(b, syscall.SIGTERM)
		d.waitExit(b, 30*time.Second)
	}
	slices.Sort(starts)
	fmt.Fprintf(w, "### The daemon (idle leader, file lease)\n\n| Measure | Value |\n|---|---|\n")
	fmt.Fprintf(w, "| Start to first /healthz 200 (5 starts) | min %s, median %s, max %s |\n",
		starts[0].Round(time.Millisecond), starts[2].Round(time.Millisecond), starts[4].Round(time.Millisecond))
	fmt.Fprintf(w, "| Resident set after 10s as an idle leader | %.1f MiB |\n", float64(rss[0])/1024)
	if fi, err := os.Stat(binary(b)); err == nil {
		fmt.Fprintf(w, "| Binary size (go build, not stripped) | %.1f MiB |\n", float64(fi.Size())/(1<<20))
	}
	fmt.Fprintln(w)
}

func healthz(d *daemon) (int, error) {
	resp, err := quick.Get("http://" + d.addr + "/healthz")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	return resp.StatusCode, nil
}

// benchFailover runs the failover matrix with HA_REPEATS (default 10)
// handovers of each kind per cell.
func benchFailover(b *testing.B, w *strings.Builder) {
	logs := testenv.StartLogs(b)
	n := envInt("HA_REPEATS", 10)
	fmt.Fprintf(w, "### Failover: kill or stop to the standby's /readyz 200 (%d of each per cell)\n\n", n)
	fmt.Fprintf(w, "| Cell | ttl / renew | Unplanned (SIGKILL) min / median / max | Planned (SIGTERM) min / median / max | Entries, duplicates, gaps |\n|---|---|---|---|---|\n")
	for _, cell := range matrix(b) {
		f := runFailovers(b, cell.make(b), logs, n)
		fmt.Fprintf(w, "| %s | %s / %s | %s | %s | %d, %d, 0 |\n", f.backend.name, f.backend.ttl, f.backend.renew,
			spread(f.unplanned, f.backend), spread(f.planned, f.backend), f.entries, f.dups)
	}
	fmt.Fprintln(w)
}

// spread is min / median / max in seconds, with the median also as
// multiples of ttl and renew_interval.
func spread(ds []time.Duration, be backend) string {
	s := slices.Sorted(slices.Values(ds))
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return fmt.Sprintf("%.2f / %.2f / %.2f s (median %.2f ttl, %.2f renew)", s[0].Seconds(), med.Seconds(), s[len(s)-1].Seconds(),
		med.Seconds()/be.ttl.Seconds(), med.Seconds()/be.renew.Seconds())
}
