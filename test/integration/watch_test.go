package integration

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"
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
	leaseWatch := func(d *daemon) string {
		resp, err := client.Get("http://" + d.addr + "/statusz")
		if err != nil {
			return err.Error()
		}
		defer resp.Body.Close()
		var st struct {
			LeaseWatch string `json:"lease_watch"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
			return err.Error()
		}
		return st.LeaseWatch
	}
	deadline := time.Now().Add(slack)
	for leaseWatch(standby) != "watching" {
		if time.Now().After(deadline) {
			t.Fatalf("the standby's /statusz lease_watch is %q, want \"watching\"", leaseWatch(standby))
		}
		time.Sleep(50 * time.Millisecond)
	}
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
