package integration

import (
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/testenv"
)

// Lease timing of the failover runs. GCS allows about one write per second
// to an object, so its cell renews every second.
const (
	ttl      = 2 * time.Second
	renew    = 500 * time.Millisecond
	gcsTTL   = 3 * time.Second
	gcsRenew = time.Second
	// boundSlack is the allowance on the failover bounds: unplanned
	// ≤ ttl + renew_interval + 2s, planned ≤ renew_interval + 2s.
	boundSlack = 2 * time.Second
)

// failovers is one cell's measurements.
type failovers struct {
	backend            backend
	unplanned, planned []time.Duration
	entries, dups      int
	report             leaderReport
}

// envInt reads a positive integer from the environment.
func envInt(name string, def int) int {
	if n, err := strconv.Atoi(os.Getenv(name)); err == nil && n > 0 {
		return n
	}
	return def
}

// cells starts the servers lazily, one cell at a time, in matrix order.
type cellSpec struct {
	name string
	make func(t testing.TB) backend
}

// matrix lists the cells; the S3 server two cells share lives as long as
// parent.
func matrix(parent testing.TB) []cellSpec {
	var s3srv *testenv.S3Server
	s3 := func(testing.TB) *testenv.S3Server {
		if s3srv == nil {
			s3srv = testenv.StartS3(parent)
		}
		return s3srv
	}
	return []cellSpec{
		{"file", func(t testing.TB) backend { return fileBackend(t, ttl, renew) }},
		{"s3", func(t testing.TB) backend { return s3Backend(t, s3(t), ttl, renew) }},
		{"gcs", func(t testing.TB) backend { return gcsBackend(t, testenv.StartGCS(t), gcsTTL, gcsRenew) }},
		{"k8s", func(t testing.TB) backend {
			kube := testenv.StartKube(t)
			t.Cleanup(kube.Stop)
			return k8sBackend(t, kube, s3(t), ttl, renew)
		}},
	}
}

// TestFailoverMatrix runs, for every coordinator, two sf2loki processes with
// the synthetic source pushing into a real VictoriaLogs and hands leadership
// over repeatedly: SIGKILL of the leader (unplanned) and SIGTERM (planned),
// each measured until the standby's /readyz answers 200. A sampler checks
// that no two replicas ever report leadership at once, and at the end every
// sequence number is stored (no gap; duplicates are the at-least-once
// re-pushes after a kill).
func TestFailoverMatrix(t *testing.T) {
	testenv.Long(t, "the multi-process failover matrix")
	logs := testenv.StartLogs(t)
	n := envInt("HA_REPEATS", 5)
	for _, cell := range matrix(t) {
		t.Run(cell.name, func(t *testing.T) {
			f := runFailovers(t, cell.make(t), logs, n)
			t.Logf("%s: unplanned %s; planned %s; %d entries, %d duplicates, 0 gaps; %d samples, max sample period %s, %d handover straddles",
				f.backend.name, spread(f.unplanned, f.backend), spread(f.planned, f.backend), f.entries, f.dups,
				f.report.samples, f.report.maxPeriod.Round(time.Millisecond), f.report.straddles)
		})
	}
}

// runFailovers hands leadership over n times by SIGKILL and n times by
// SIGTERM and checks every bound on the way.
func runFailovers(t testing.TB, b backend, logs *testenv.LogsServer, n int) failovers {
	job := strings.NewReplacer("+", "-", "_", "-").Replace(b.name)
	c := newCluster(t, b, func(string) string { return workload(logs.PushURL, job, 100) })
	f := failovers{backend: b}
	smp := c.sample(100 * time.Millisecond)
	leader := c.start()
	leader.waitReady(t, 200, "leader", b.ttl+slack)
	standby := c.start()
	standby.waitReady(t, 503, "standby", slack)
	for range n {
		// The standby has seen the leader renew at least once; the jitter
		// spreads the kill over the phases of the renew and poll cycles.
		time.Sleep(2*b.renew + rand.N(b.renew))
		at := time.Now()
		leader.signal(t, syscall.SIGKILL)
		f.unplanned = append(f.unplanned, standby.waitReadySince(t, at, 200, "leader", b.ttl+b.renew+boundSlack))
		leader, standby = standby, c.start()
		standby.waitReady(t, 503, "standby", slack)

		time.Sleep(2*b.renew + rand.N(b.renew))
		at = time.Now()
		leader.signal(t, syscall.SIGTERM)
		took := standby.waitReadySince(t, at, 200, "leader", b.renew+boundSlack)
		f.planned = append(f.planned, took)
		leader.waitExit(t, slack)
		if took > b.renew+time.Second {
			t.Logf("slow planned handover (%s): the old leader's log:\n%s", took, tail(leader.out.String(), 25))
		}
		leader, standby = standby, c.start()
		standby.waitReady(t, 503, "standby", slack)
	}
	st, err := leader.statusz(client)
	if err != nil {
		t.Fatal(err)
	}
	// Every handover moved the epoch by exactly one: 1, then +1 per takeover.
	if want := uint64(1 + 2*n); st.Epoch != want {
		t.Errorf("final epoch %d, want %d after %d handovers", st.Epoch, want, 2*n)
	}
	time.Sleep(time.Second)
	leader.signal(t, syscall.SIGTERM)
	leader.waitExit(t, 30*time.Second)
	f.report = requireSingleLeader(t, smp.Stop())
	c.unexpectedExits(t)
	f.entries, f.dups = requireNoGaps(t, logs, job)
	return f
}

// requireNoGaps reads back the synthetic stream labelled job and fails on
// any missing sequence number; it returns the entries and duplicates stored.
func requireNoGaps(t testing.TB, logs *testenv.LogsServer, job string) (total, dups int) {
	t.Helper()
	return requireNoGapsIn(t, logs, job, "")
}

// requireNoGapsIn is requireNoGaps for one org's stream ("" for every
// stream of the job).
func requireNoGapsIn(t testing.TB, logs *testenv.LogsServer, job, org string) (total, dups int) {
	t.Helper()
	filter := fmt.Sprintf(`source="synthetic",job=%q`, job)
	if org != "" {
		filter += fmt.Sprintf(`,org=%q`, org)
		job += " " + org
	}
	rows := logs.Query(t, fmt.Sprintf(`{%s} | fields event_type, sequence, user_id`, filter))
	seen := map[string]map[int]int{}
	for _, r := range rows {
		n, err := strconv.Atoi(r["sequence"])
		if err != nil || r["user_id"] == "" {
			t.Fatalf("row %v", r)
		}
		if seen[r["event_type"]] == nil {
			seen[r["event_type"]] = map[int]int{}
		}
		seen[r["event_type"]][n]++
	}
	if len(seen) != 2 {
		t.Fatalf("%s: event types stored: %d, want 2", job, len(seen))
	}
	for et, nums := range seen {
		maxSeq := 0
		for n, c := range nums {
			maxSeq = max(maxSeq, n)
			total += c
			dups += c - 1
		}
		var gaps []int
		for n := 1; n <= maxSeq; n++ {
			if nums[n] == 0 {
				gaps = append(gaps, n)
			}
		}
		if len(gaps) > 0 {
			t.Errorf("%s %s: sequence numbers missing: %v (of 1..%d)", job, et, gaps, maxSeq)
		}
	}
	if total < 200 {
		t.Fatalf("%s: only %d entries stored; the pipeline barely ran", job, total)
	}
	return total, dups
}

// tail returns the last n lines of s, without debug lines.
func tail(s string, n int) string {
	var lines []string
	for l := range strings.Lines(s) {
		if !strings.Contains(l, "level=DEBUG") {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines[max(0, len(lines)-n):], "")
}
