package integration

import (
	"fmt"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/internal/testenv/faultproxy"
)

// isConditionalWrite reports whether r is a write carrying a precondition
// to object: an S3 path-style PUT or a GCS upload (name parameter).
func isConditionalWrite(r faultproxy.Request, object string) bool {
	return (r.Method == http.MethodPut || r.Method == http.MethodPost) && r.Conditional() &&
		(strings.HasSuffix(r.Path, "/"+object) || r.Query.Get("name") == object)
}

// conditionalWrite is isConditionalWrite as a fault rule's match.
func conditionalWrite(object string) func(*http.Request) bool {
	return func(r *http.Request) bool { return isConditionalWrite(faultproxy.FromHTTP(r), object) }
}

// storeError is the backend's own error body for status.
func storeError(b backend, status int) string {
	if strings.HasPrefix(b.name, "gcs") {
		reason := map[int]string{429: "rateLimitExceeded", 500: "backendError", 503: "backendError"}[status]
		return fmt.Sprintf(`{"error":{"code":%d,"message":"injected","errors":[{"reason":%q,"message":"injected"}]}}`, status, reason)
	}
	code := map[int]string{429: "SlowDown", 500: "InternalError", 503: "SlowDown"}[status]
	return fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>injected</Message></Error>`, code)
}

// TestStoreFaults puts a fault proxy between each daemon and the object
// store (and another in front of the Loki peer) and injects, in turn: lost
// acknowledgements, 503 bursts, 429 with Retry-After, 2s latency spikes and a
// 30s partition of the leader alone. No process may exit, a lost
// acknowledgement must never read as a conflict, at most one replica may
// report leadership at any sample, and the partitioned leader's fence must
// close before the standby's takeover write reaches the store.
func TestStoreFaults(t *testing.T) {
	testenv.Long(t, "multi-process fault injection")
	logs := testenv.StartLogs(t)
	for _, tc := range []struct {
		name string
		make func(t testing.TB) backend
	}{
		{"s3", func(t testing.TB) backend { return s3Backend(t, testenv.StartS3(t), ttl, renew) }},
		{"gcs", func(t testing.TB) backend { return gcsBackend(t, testenv.StartGCS(t), gcsTTL, gcsRenew) }},
	} {
		t.Run(tc.name, func(t *testing.T) { storeFaults(t, tc.make(t), logs) })
	}
}

func storeFaults(t *testing.T, b backend, logs *testenv.LogsServer) {
	job := "faults-" + strings.SplitN(b.name, "_", 2)[0]
	stores := map[string]*faultproxy.Proxy{}
	pushes := map[string]*faultproxy.Proxy{}
	for _, name := range []string{"a", "b"} {
		stores[name] = faultproxy.New(t, b.url)
		pushes[name] = faultproxy.New(t, logs.URL)
	}
	c := newCluster(t, b, func(name string) string {
		return workload(strings.Replace(logs.PushURL, logs.URL, pushes[name].URL, 1), job, 100)
	})
	c.storeURL = func(name string) string { return stores[name].URL }
	smp := c.sample(100 * time.Millisecond)
	a := c.start("a")
	a.waitReady(t, 200, "leader", b.ttl+slack)
	bb := c.start("b")
	bb.waitReady(t, 503, "standby", slack)
	time.Sleep(2 * time.Second)

	fired := func(p *faultproxy.Proxy, fault string) int {
		return p.Count(func(r faultproxy.Request) bool { return r.Fault == fault })
	}
	waitFired := func(t *testing.T, p *faultproxy.Proxy, fault string, n int) {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for fired(p, fault) < n {
			if time.Now().After(deadline) {
				t.Fatalf("fault %q fired %d times in 30s, want %d", fault, fired(p, fault), n)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	// oneLeader waits until the faults have passed: exactly one of the two
	// answers /readyz 200, both still running.
	oneLeader := func(t *testing.T) {
		t.Helper()
		deadline := time.Now().Add(b.ttl + 2*b.renew + slack)
		for {
			ca, _ := a.readyz()
			cb, _ := bb.readyz()
			if (ca == 200) != (cb == 200) && ca != 0 && cb != 0 {
				return
			}
			if time.Now().After(deadline) || a.exited() || bb.exited() {
				t.Fatalf("after the faults: /readyz %d and %d, want one leader and one standby", ca, cb)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}

	t.Run("lost acknowledgements", func(t *testing.T) {
		// The server applies the write; the daemon gets a 500, or the
		// connection closes before any answer.
		// Every 3rd matching write, so a fault never hits the retry of the
		// write it just disturbed (that retry answers 412 and re-reads).
		stores["a"].Add(faultproxy.Rule{Name: "lost-ack-lease", Match: conditionalWrite(b.lease), Every: 3, Times: 2,
			Action: faultproxy.ApplyThenRespond, Status: 500, Body: storeError(b, 500)})
		stores["a"].Add(faultproxy.Rule{Name: "lost-ack-500", Match: conditionalWrite(b.state), Every: 3, Times: 2,
			Action: faultproxy.ApplyThenRespond, Status: 500, Body: storeError(b, 500)})
		waitFired(t, stores["a"], "lost-ack-500", 2)
		stores["a"].Add(faultproxy.Rule{Name: "lost-ack-reset", Match: conditionalWrite(b.state), Every: 3, Times: 2,
			Action: faultproxy.ApplyThenReset})
		waitFired(t, stores["a"], "lost-ack-reset", 2)
		waitFired(t, stores["a"], "lost-ack-lease", 2)
		for _, r := range stores["a"].Requests() {
			if strings.HasPrefix(r.Fault, "lost-ack") && r.Upstream != http.StatusOK {
				t.Fatalf("%s: the server answered %d, want 200 (the write must land)", r.Fault, r.Upstream)
			}
		}
		time.Sleep(2 * b.renew)
		recovered := a.metric(t, `sf2loki_checkpoint_commits_total{outcome="recovered"}`)
		conflicts := a.metric(t, `sf2loki_checkpoint_commits_total{outcome="conflict"}`)
		leaseRecovered := a.metric(t, `sf2loki_lease_transitions_total{transition="recovered_lost_ack"}`)
		t.Logf("4 checkpoint and 2 lease acknowledgements lost: %v checkpoint and %v lease writes recovered, %v conflicts",
			recovered, leaseRecovered, conflicts)
		if recovered != 4 || conflicts != 0 || leaseRecovered != 2 {
			t.Errorf("recovered %v checkpoint and %v lease writes with %v conflicts, want 4, 2 and 0", recovered, leaseRecovered, conflicts)
		}
		if code, body := a.readyz(); code != 200 {
			t.Errorf("the leader lost leadership over lost acknowledgements: /readyz %d %q", code, body)
		}
	})

	t.Run("503 bursts", func(t *testing.T) {
		for _, name := range []string{"a", "b"} {
			stores[name].Add(faultproxy.Rule{Name: "503", Times: 4, Action: faultproxy.Respond, Status: 503, Body: storeError(b, 503)})
		}
		waitFired(t, stores["a"], "503", 4)
		waitFired(t, stores["b"], "503", 4)
		oneLeader(t)
	})

	t.Run("429 with Retry-After", func(t *testing.T) {
		stores["a"].Add(faultproxy.Rule{Name: "429", Match: conditionalWrite(b.state), Times: 2, Action: faultproxy.Respond,
			Status: 429, Body: storeError(b, 429), Header: http.Header{"Retry-After": {"1"}}})
		waitFired(t, stores["a"], "429", 2)
		time.Sleep(2 * time.Second)
		// The next checkpoint write after each 429 waited the hinted second.
		reqs := stores["a"].Requests()
		checked := 0
		for i, r := range reqs {
			if r.Fault != "429" {
				continue
			}
			for _, next := range reqs[i+1:] {
				if next.Method == r.Method && next.Path == r.Path && next.Query.Get("name") == r.Query.Get("name") {
					gap := next.Received.Sub(r.At)
					if gap < time.Second {
						t.Errorf("a checkpoint write was retried %s after a 429 with Retry-After: 1", gap)
					}
					t.Logf("retried %s after the 429", gap.Round(time.Millisecond))
					checked++
					break
				}
			}
		}
		if checked != 2 {
			t.Errorf("found the retry of %d of the 2 writes answered 429", checked)
		}
	})

	t.Run("2s latency spikes", func(t *testing.T) {
		for _, p := range []*faultproxy.Proxy{stores["a"], stores["b"], pushes["a"]} {
			p.Add(faultproxy.Rule{Name: "latency", Times: 3, Action: faultproxy.Delay, Delay: 2 * time.Second})
		}
		waitFired(t, stores["a"], "latency", 3)
		waitFired(t, stores["b"], "latency", 3)
		oneLeader(t)
	})

	t.Run("30s partition of the leader", func(t *testing.T) {
		// The latency spikes may have moved leadership: partition whoever
		// leads now.
		var leader, standby *daemon
		deadline := time.Now().Add(b.ttl + slack)
		for leader == nil {
			if code, _ := a.readyz(); code == 200 {
				leader, standby = a, bb
			} else if code, _ := bb.readyz(); code == 200 {
				leader, standby = bb, a
			} else if time.Now().After(deadline) {
				t.Fatal("no leader before the partition")
			}
			time.Sleep(20 * time.Millisecond)
		}
		standby.waitReady(t, 503, "standby", slack)
		cut := []*faultproxy.Proxy{stores[leader.name], pushes[leader.name]}
		for _, p := range cut {
			p.Clear()
			p.Add(faultproxy.Rule{Name: "partition", Action: faultproxy.Delay, Delay: time.Hour})
		}
		began := time.Now()
		took := standby.waitReadySince(t, began, 200, "leader", b.ttl+2*b.renew+slack)
		time.Sleep(30*time.Second - time.Since(began))
		for _, p := range cut {
			p.Clear()
		}
		leader.waitReady(t, 503, "standby", 2*b.renew+slack)

		// The standby's takeover write: its first conditional lease write
		// since the partition began, as it reached the store.
		var takeover time.Time
		for _, r := range stores[standby.name].Requests() {
			if r.Received.After(began) && r.Upstream == http.StatusOK && isConditionalWrite(r, b.lease) {
				takeover = r.Received
				break
			}
		}
		acquired, ok := standby.logTime(began, "event=acquired")
		if takeover.IsZero() || !ok {
			t.Fatalf("no takeover write (%v) or acquisition log line (%v) from the standby", takeover, ok)
		}
		// The partitioned leader's fence deadline as its /statusz last
		// reported it while leading.
		var fence time.Time
		for _, s := range smp.snapshot() {
			for _, v := range s.views {
				if v.d == leader && v.st.Role == "leader" && v.st.FenceDeadline != nil && v.st.FenceDeadline.After(fence) {
					fence = *v.st.FenceDeadline
				}
			}
		}
		fenced, ok := leader.logTime(began, "event=fenced")
		if !ok {
			t.Errorf("the partitioned leader never logged that its fence closed")
		}
		t.Logf("partition of %s at %s: its fence deadline +%s (logged fenced at +%s); %s's takeover write reached the store at +%s, %s after the fence closed; logged acquired at +%s; ready at +%s",
			leader.name, began.Format("15:04:05.000"), fence.Sub(began).Round(time.Millisecond), fenced.Sub(began).Round(time.Millisecond),
			standby.name, takeover.Sub(began).Round(time.Millisecond), takeover.Sub(fence).Round(time.Millisecond),
			acquired.Sub(began).Round(time.Millisecond), took.Round(time.Millisecond))
		if fence.IsZero() || !fence.Before(takeover) || !fence.Before(acquired) {
			t.Errorf("the fence deadline %s does not precede the takeover write %s and the acquisition %s",
				fence.Format(time.RFC3339Nano), takeover.Format(time.RFC3339Nano), acquired.Format(time.RFC3339Nano))
		}
		// Hand back: stop the new leader gracefully; the old one takes over.
		standby.signal(t, syscall.SIGTERM)
		standby.waitExit(t, 30*time.Second)
		leader.waitReady(t, 200, "leader", b.renew+slack)
		time.Sleep(time.Second)
		leader.signal(t, syscall.SIGTERM)
		leader.waitExit(t, 30*time.Second)
	})

	r := requireSingleLeader(t, smp.Stop())
	c.unexpectedExits(t)
	total, dups := requireNoGaps(t, logs, job)
	t.Logf("%d samples (max period %s), no two leaders; %d entries stored, %d duplicates, 0 gaps", r.samples,
		r.maxPeriod.Round(time.Millisecond), total, dups)
}
