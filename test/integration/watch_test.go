package integration

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/testenv"
)

// A file_lease standby on a local disk watches the lease file: /statusz
// says so, it reads nothing while the leader renews (a polling standby
// reads once per renew_interval), and it takes over when the leader stops.
func TestAFileLeaseStandbyWatchesTheLease(t *testing.T) {
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer sink.Close()
	b := fileBackend(t, 2*time.Second, 500*time.Millisecond)
	c := newCluster(t, b, func(string) string { return workload(sink.URL, "watch", 10) })
	leader := c.start()
	leader.waitReady(t, 200, "leader", b.ttl+slack)
	standby := c.start()
	standby.waitReady(t, 503, "standby", slack)
	waitWatch(t, standby, slack, `"watching"`, func(w string) bool { return w == "watching" })
	const gets = `sf2loki_objectstore_requests_total{backend="file",op="get",outcome="ok"}`
	before := standby.metric(t, gets)
	time.Sleep(10 * b.renew)
	if n := standby.metric(t, gets) - before; n > 1 {
		t.Errorf("the watching standby read the store %v times in 10 renew intervals while the leader renewed", n)
	}
	at := time.Now()
	leader.signal(t, syscall.SIGTERM)
	took := standby.waitReadySince(t, at, 200, "leader", b.renew+slack)
	t.Logf("planned handover, SIGTERM to the standby's /readyz 200: %s", took)
	leader.waitExit(t, slack)
}

// statusWatch is a daemon's /statusz lease_watch.
func statusWatch(d *daemon) string {
	resp, err := client.Get("http://" + d.addr + "/statusz")
	if err != nil {
		return err.Error()
	}
	defer resp.Body.Close()
	var st struct {
		LeaseWatch string `json:"lease_watch"`
		Role       string `json:"role"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		return err.Error()
	}
	return st.LeaseWatch
}

// waitWatch waits until the daemon's lease_watch satisfies ok.
func waitWatch(t *testing.T, d *daemon, limit time.Duration, what string, ok func(string) bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for {
		w := statusWatch(d)
		if ok(w) {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: /statusz lease_watch %q after %s, want %s", d.name, w, limit, what)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// A Kubernetes standby's watch broken mid-run (the API server restarted):
// the standby says it polls, watches again once the API server is back,
// and a crashed leader is still taken over within ttl + renew_interval.
func TestAK8sStandbyWatchSurvivesAnAPIServerRestart(t *testing.T) {
	kube := testenv.StartKube(t)
	t.Cleanup(kube.Stop)
	ns := kube.NewNamespace(t)
	kube.GrantLeases(t, ns, "get", "create", "patch", "watch")
	kubeconfig := kube.Kubeconfig(t, testenv.KubeLimitedToken)
	dir := t.TempDir()
	ttl, renew := 6*time.Second, 1500*time.Millisecond
	b := backend{name: "k8s_lease+file", ttl: ttl, renew: renew, env: noEnv, dir: dir,
		config: func(holder, _ string) string {
			return fmt.Sprintf("coordinate:\n  type: k8s_lease\n  k8s_lease: {namespace: %s, name: sf2loki-leader, identity: %s, "+
				"lease_duration: %s, renew_interval: %s, kubeconfig: %s}\nstate:\n  file: {path: %s/state.json}\n", ns, holder, ttl, renew, kubeconfig, dir)
		}}
	sink := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	}))
	defer sink.Close()
	c := newCluster(t, b, func(string) string { return workload(sink.URL, "k8swatch", 10) })
	a := c.start()
	a.waitReady(t, 200, "leader", ttl+slack)
	s := c.start()
	s.waitReady(t, 503, "standby", slack)
	waitWatch(t, s, slack, `"watching"`, func(w string) bool { return w == "watching" })

	kube.StopAPIServer(t)
	waitWatch(t, s, 2*slack, "the watch down and the standby polling", func(w string) bool { return strings.Contains(w, "polling") })
	kube.StartAPIServer(t)

	// Whoever leads now (the leader may have fenced itself while the API
	// server was away), the other replica watches again.
	var leader, standby *daemon
	deadline := time.Now().Add(ttl + 4*slack)
	for leader == nil {
		if time.Now().After(deadline) {
			t.Fatal("no leader after the API server came back")
		}
		for _, d := range []*daemon{a, s} {
			if code, _ := d.readyz(); code == 200 {
				leader = d
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	standby = a
	if leader == a {
		standby = s
	}
	waitWatch(t, standby, ttl+4*slack, `"watching" again`, func(w string) bool { return w == "watching" })

	time.Sleep(2 * renew)
	at := time.Now()
	leader.signal(t, syscall.SIGKILL)
	took := standby.waitReadySince(t, at, 200, "leader", ttl+renew+boundSlack)
	t.Logf("after the API server restart, SIGKILL of the leader to the standby's /readyz 200: %s (ttl %s + renew %s = %s)", took, ttl, renew, ttl+renew)
}
