package integration

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/file"
	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/testenv"
)

// cli runs an sf2loki command against the backend's objects and returns
// its exit code and output.
func cli(t testing.TB, b backend, args ...string) (int, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "cli.yaml")
	if err := os.WriteFile(path, []byte(b.config("cli", b.url)), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary(t), append(args, "--config", path)...)
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "SF2LOKI_") }), b.env(b.url)...)
	out, _ := cmd.CombinedOutput()
	return cmd.ProcessState.ExitCode(), string(out)
}

// storedCheckpoints reads the stored checkpoint document through `state show`.
func storedCheckpoints(t testing.TB, b backend) map[string]string {
	t.Helper()
	code, out := cli(t, b, "state", "show", "--json")
	doc := map[string]string{}
	if code != 0 || json.Unmarshal([]byte(out), &doc) != nil {
		t.Fatalf("state show: exit %d\n%s", code, out)
	}
	return doc
}

// syntheticPosition returns one synthetic key and its committed sequence.
func syntheticPosition(t testing.TB, b backend) (string, int) {
	t.Helper()
	doc := storedCheckpoints(t, b)
	keys := slices.Sorted(func(yield func(string) bool) {
		for k := range doc {
			if strings.HasPrefix(k, "synthetic:") && !yield(k) {
				return
			}
		}
	})
	if len(keys) == 0 {
		return "", 0
	}
	n, err := strconv.Atoi(doc[keys[0]])
	if err != nil {
		t.Fatalf("%s = %q", keys[0], doc[keys[0]])
	}
	return keys[0], n
}

// TestAConflictDoesNotWedgeTheLeader is the documented repair against a
// running leader: `state set --force` moves a checkpoint back while the
// leader ingests. The leader's next commit loses its compare-and-swap; it
// must reload the document and resume from the stored position (committing
// again, storing every entry) instead of draining its lane forever.
func TestAConflictDoesNotWedgeTheLeader(t *testing.T) {
	testenv.Long(t, "the conflict recovery of a running leader")
	logs := testenv.StartLogs(t)
	for _, cell := range matrix(t)[:2] { // file and s3
		t.Run(cell.name, func(t *testing.T) {
			b := cell.make(t)
			job := "wedge-" + cell.name
			c := newCluster(t, b, func(string) string { return workload(logs.PushURL, job, 100) })
			leader := c.start()
			leader.waitReady(t, 200, "leader", b.ttl+slack)
			var key string
			var before int
			deadline := time.Now().Add(10 * time.Second)
			for key == "" || before < 30 {
				if time.Now().After(deadline) {
					t.Fatalf("nothing committed: %v", storedCheckpoints(t, b))
				}
				time.Sleep(200 * time.Millisecond)
				key, before = syntheticPosition(t, b)
			}
			back := before - 20
			if code, out := cli(t, b, "state", "set", "--force", key, strconv.Itoa(back)); code != 0 {
				t.Fatalf("state set --force: exit %d\n%s", code, out)
			}
			at := time.Now()
			// The leader commits within its next batch (max_wait 1s), one
			// commit interval (the file default 1s; s3 here 200ms) and one
			// renew interval; without the fix it never commits again.
			limit := time.Second + config.DefaultFileCommitInterval + b.renew + slack
			for {
				if _, n := syntheticPosition(t, b); n > before {
					t.Logf("%s: %s set back from %d to %d; the leader committed %d after %s", cell.name, key, before, back, n, time.Since(at).Round(time.Millisecond))
					break
				}
				if time.Since(at) > limit {
					t.Fatalf("the leader did not commit again within %s of the conflict (wedged); its log:\n%s", limit, tail(leader.out.String(), 30))
				}
				time.Sleep(100 * time.Millisecond)
			}
			if code, body := leader.readyz(); code != 200 || body != "leader" {
				t.Fatalf("/readyz %d %q after the recovery", code, body)
			}
			if n := leader.metric(t, `sf2loki_checkpoint_commits_total{outcome="conflict"}`); n < 1 {
				t.Errorf("conflicts counted: %v", n)
			}
			time.Sleep(time.Second)
			leader.signal(t, syscall.SIGTERM)
			leader.waitExit(t, 30*time.Second)
			c.unexpectedExits(t)
			total, dups := requireNoGaps(t, logs, job)
			t.Logf("%s: %d entries stored, %d duplicates (the re-ingestion after the set-back), 0 gaps", cell.name, total, dups)
		})
	}
}

// writeUnderLock replaces the file at path with data the way every sf2loki
// writer does: under the store's lock, over the version it read. A plain
// os.WriteFile races the leader's commits, which check the version and
// rename a new document over the file under that lock; one landing between
// the check and the rename is replaced, and the test would wait for a
// corruption nobody can see.
func writeUnderLock(t testing.TB, path string, data []byte) {
	t.Helper()
	s, err := file.New(file.Config{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	for range 50 {
		cur, err := s.Get(ctx)
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Put(ctx, data, ports.IfVersion(cur.Version))
		if err == nil {
			return
		}
		if !errors.Is(err, ports.ErrPreconditionFailed) {
			t.Fatal(err)
		}
	}
	t.Fatalf("%s: every write lost the race with the leader's commits", path)
}

// TestACorruptCheckpointDocumentIsLoud corrupts the checkpoint document under
// a leader and its standby. Nobody can lead safely; every replica must say
// why (/readyz, /statusz, sf2loki_coordination_blocked, one ERROR line),
// doctor must FAIL with the repair, and the repair must bring a leader back.
func TestACorruptCheckpointDocumentIsLoud(t *testing.T) {
	testenv.Long(t, "a corrupt checkpoint document under two replicas")
	logs := testenv.StartLogs(t)
	b := fileBackend(t, ttl, renew)
	job := "corrupt"
	c := newCluster(t, b, func(string) string { return workload(logs.PushURL, job, 50) })
	leader := c.start()
	leader.waitReady(t, 200, "leader", b.ttl+slack)
	standby := c.start()
	standby.waitReady(t, 503, "standby", slack)
	time.Sleep(2 * time.Second)
	state := filepath.Join(b.dir, "state.json")
	writeUnderLock(t, state, []byte(`{"synthetic:Login": 12`))
	for _, d := range []*daemon{leader, standby} {
		d.waitReadyPrefix(t, 503, "standby: blocked (checkpoint_corrupt)", b.ttl+5*b.renew+slack)
	}
	time.Sleep(5 * b.renew) // several polls: the ERROR must not repeat
	for _, d := range []*daemon{leader, standby} {
		code, body := d.readyz()
		t.Logf("%s /readyz: %d %s", d.name, code, body)
		resp, err := client.Get("http://" + d.addr + "/statusz")
		if err != nil {
			t.Fatal(err)
		}
		var st map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&st)
		resp.Body.Close()
		if st["blocked"] != "checkpoint_corrupt" || !strings.Contains(fmt.Sprint(st["blocked_detail"]), "corrupt") {
			t.Errorf("%s /statusz: %v", d.name, st)
		}
		t.Logf("%s /statusz: role=%v blocked=%v lease_holder=%q lease_epoch=%v lease_unchanged_for=%v", d.name, st["role"], st["blocked"], st["lease_holder"], st["lease_epoch"], st["lease_unchanged_for"])
		if v := d.metric(t, `sf2loki_coordination_blocked{reason="checkpoint_corrupt"}`); v != 1 {
			t.Errorf("%s: sf2loki_coordination_blocked{reason=\"checkpoint_corrupt\"} = %v", d.name, v)
		}
		if n := strings.Count(d.out.String(), "cannot contend for the lease"); n != 1 {
			t.Errorf("%s: %d ERROR lines for the blocked state, want exactly 1:\n%s", d.name, n, tail(d.out.String(), 20))
		}
		for l := range strings.Lines(d.out.String()) {
			if strings.Contains(l, "cannot contend for the lease") {
				t.Logf("%s log: %s", d.name, strings.TrimSpace(l))
			}
		}
	}
	code, out := cli(t, b, "doctor")
	t.Logf("doctor: exit %d\n%s", code, out)
	if code == 0 || !strings.Contains(out, "FAIL") {
		t.Errorf("doctor on a corrupt checkpoint document: exit %d, want a FAIL", code)
	}
	// The repair: move the document aside (every source restarts from its
	// lookback); a replica leads again.
	if err := os.Rename(state, state+".corrupt"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(b.ttl + 5*b.renew + slack)
	for {
		c1, _ := leader.readyz()
		c2, _ := standby.readyz()
		if c1 == 200 || c2 == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no leader after the repair:\n%s\n%s", tail(leader.out.String(), 20), tail(standby.out.String(), 20))
		}
		time.Sleep(50 * time.Millisecond)
	}
	c.unexpectedExits(t)
}

// waitReadyPrefix waits for a /readyz answer with code whose body starts
// with prefix.
func (d *daemon) waitReadyPrefix(t testing.TB, code int, prefix string, limit time.Duration) {
	t.Helper()
	start := time.Now()
	for {
		c, b := d.readyz()
		if c == code && strings.HasPrefix(b, prefix) {
			return
		}
		if d.exited() {
			t.Fatalf("%s exited (%v) while waiting for /readyz %d %q", d.name, d.err, code, prefix)
		}
		if time.Since(start) > limit {
			t.Fatalf("%s: /readyz %d %q after %s, want %d %q…", d.name, c, b, limit, code, prefix)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestARejectingSinkHoldsTheData points the sink at a peer that refuses
// every push: VictoriaLogs on a wrong path, and a peer answering 400 to
// everything. Nothing may be committed past unaccepted data; /readyz, the
// metric and one ERROR line say so; once the peer accepts, every entry
// arrives with no gap.
func TestARejectingSinkHoldsTheData(t *testing.T) {
	testenv.Long(t, "a sink that rejects every entry")
	logs := testenv.StartLogs(t)
	target, _ := url.Parse(logs.URL)
	var accept atomic.Bool
	proxy := httputil.NewSingleHostReverseProxy(target)
	peer := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !accept.Load() {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = fmt.Fprint(w, "stream has structured metadata, but this feature is disallowed")
			return
		}
		proxy.ServeHTTP(w, r)
	}))
	defer peer.Close()
	for name, pushURL := range map[string]string{
		"wrong path":      logs.URL + "/loki/api/v1/push",
		"400 to anything": peer.URL + "/insert/loki/api/v1/push",
	} {
		t.Run(name, func(t *testing.T) {
			b := fileBackend(t, ttl, renew)
			job := strings.ReplaceAll(name, " ", "-")
			c := newCluster(t, b, func(string) string { return workload(pushURL, job, 100) })
			d := c.start()
			d.waitReadyPrefix(t, 503, "leader: sink rejecting all entries", b.ttl+slack)
			time.Sleep(3 * time.Second)
			code, body := d.readyz()
			t.Logf("/readyz: %d %s", code, body)
			if v := d.metric(t, "sf2loki_loki_rejecting"); v != 1 {
				t.Errorf("sf2loki_loki_rejecting = %v", v)
			}
			m, _ := d.metrics(client)
			for k, v := range m {
				if strings.HasPrefix(k, "sf2loki_loki_entries_dropped") && v > 0 {
					t.Errorf("%s = %v: entries were dropped", k, v)
				}
			}
			if key, n := syntheticPosition(t, b); key != "" {
				t.Errorf("committed %s = %d past data the sink never accepted", key, n)
			}
			if n := strings.Count(d.out.String(), "rejects every entry; holding"); n != 1 {
				t.Errorf("%d ERROR lines, want 1:\n%s", n, tail(d.out.String(), 20))
			}
			for l := range strings.Lines(d.out.String()) {
				if strings.Contains(l, "rejects every entry; holding") {
					t.Logf("log: %s", strings.TrimSpace(l))
				}
			}
			if name == "wrong path" {
				d.signal(t, syscall.SIGTERM)
				d.waitExit(t, 30*time.Second)
				return
			}
			accept.Store(true)
			d.waitReady(t, 200, "leader", 30*time.Second)
			deadline := time.Now().Add(10 * time.Second)
			for {
				if key, n := syntheticPosition(t, b); key != "" && n > 100 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("nothing committed after the peer accepted: %v", storedCheckpoints(t, b))
				}
				time.Sleep(200 * time.Millisecond)
			}
			d.signal(t, syscall.SIGTERM)
			d.waitExit(t, 30*time.Second)
			total, dups := requireNoGaps(t, logs, job)
			t.Logf("after the peer accepted: %d entries, %d duplicates, 0 gaps", total, dups)
			accept.Store(false)
		})
	}
}
