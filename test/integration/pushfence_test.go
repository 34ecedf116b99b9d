package integration

import (
	"cmp"
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/internal/testenv/faultproxy"
)

// TestAFrozenLeaderPushesNothingAfterItsFence freezes (SIGSTOP) a leader
// for longer than its lease, lets the other replica take over, then
// resumes it (SIGCONT), three times; with two orgs (the frozen replica
// leads both) and with one. A proxy in front of the sink records every
// push: the resumed replica must push nothing the sink accepts from its
// resumption until it acquires a lease again (its fence closed while it was
// frozen). Every stream is stored without a gap: the abandoned batches are
// re-ingested by the new leader.
func TestAFrozenLeaderPushesNothingAfterItsFence(t *testing.T) {
	testenv.Long(t, "the frozen leader test")
	logs := testenv.StartLogs(t)
	for _, mode := range []struct {
		name string
		orgs []string // none: the single-org form
	}{{"two orgs", []string{"org-a", "org-b"}}, {"single org", nil}} {
		t.Run(mode.name, func(t *testing.T) {
			b := fileBackend(t, ttl, renew)
			job := "pushfence-" + fmt.Sprint(time.Now().UnixNano())
			names := []string{"a", "b"}
			proxies := map[string]*faultproxy.Proxy{}
			for _, n := range names {
				proxies[n] = faultproxy.New(t, logs.URL)
			}
			pushPath := strings.TrimPrefix(logs.PushURL, logs.URL)
			c := newCluster(t, b, func(name string) string {
				sink := fmt.Sprintf("sink:\n  loki: {url: %s%s, labels: {job: %s}, batch: {max_wait: 100ms}}\n", proxies[name].URL, pushPath, job)
				if mode.orgs == nil {
					return sink + "sources:\n  synthetic: {rate: 100}\n"
				}
				sink += "orgs:\n"
				for _, o := range mode.orgs {
					sink += fmt.Sprintf("  - {name: %s, sources: {synthetic: {rate: 100}}}\n", o)
				}
				return sink
			})
			// leadsAll waits until one replica leads everything.
			leadsAll := func(limit time.Duration) time.Duration {
				if mode.orgs != nil {
					return untilBalanced(t, c, limit, len(mode.orgs))
				}
				start := time.Now()
				for time.Since(start) < limit {
					for _, d := range c.live() {
						if st, err := d.statusz(client); err == nil && st.Role == "leader" {
							return time.Since(start)
						}
					}
					time.Sleep(100 * time.Millisecond)
				}
				t.Fatalf("no leader after %s", limit)
				return 0
			}
			current := map[string]*daemon{"a": c.start("a")}
			leadsAll(10 * ttl)
			const leader, standby = "a", "b"
			var late []string
			for round := range 3 {
				stale, accepted := 0, 0
				time.Sleep(4 * renew) // pushes in the air
				b.freeze(t, current[leader])
				if current[standby] == nil || current[standby].exited() {
					current[standby] = c.start(standby)
				}
				took := leadsAll(15 * ttl) // the standby leads (a bound: a busy machine slows it); the frozen one does not answer
				time.Sleep(renew)
				resumed := time.Now()
				current[leader].signal(t, syscall.SIGCONT)
				time.Sleep(3 * renew)
				// Until the resumed replica acquires a lease again, nothing it
				// pushes may be accepted.
				until, ok := current[leader].logTime(resumed, "acquired the lease")
				if !ok {
					until = time.Now()
				}
				for _, r := range proxies[leader].Requests() {
					if r.Method != http.MethodPost || r.Received.Before(resumed) || !r.Received.Before(until) {
						continue
					}
					stale++
					if r.Upstream/100 == 2 {
						accepted++
						late = append(late, fmt.Sprintf("round %d: %s pushed at %s, %s after SIGCONT (the sink answered %d)",
							round, leader, r.Received.Format("15:04:05.000"), r.Received.Sub(resumed).Round(time.Millisecond), r.Upstream))
					}
				}
				m, err := current[leader].metrics(client)
				if err != nil {
					t.Fatal(err)
				}
				t.Logf("round %d: %s frozen, %s led after %s; %s resumed: %d requests before it led again, %d accepted; sf2loki_pushes_fenced_total %v",
					round, leader, standby, took.Round(time.Millisecond), leader, stale, accepted, m["sf2loki_pushes_fenced_total"])
				// The resumed one becomes the only replica, leading again.
				current[standby].signal(t, syscall.SIGTERM)
				current[standby].waitExit(t, 30*time.Second)
				leadsAll(15 * ttl)
				for _, n := range names {
					proxies[n].Reset()
				}
			}
			for _, n := range names {
				if d := current[n]; d != nil && !d.exited() {
					d.signal(t, syscall.SIGTERM)
					d.waitExit(t, 30*time.Second)
				}
			}
			c.unexpectedExits(t)
			for _, o := range append(mode.orgs, "")[:max(1, len(mode.orgs))] {
				total, dups := requireNoGapsIn(t, logs, job, o)
				t.Logf("%s: %d entries, %d duplicates, 0 gaps", cmp.Or(o, "the org"), total, dups)
			}
			for _, l := range late {
				t.Error(l)
			}
		})
	}
}
