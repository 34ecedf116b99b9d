package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/ports/porttest"
	"github.com/sf2loki/sf2loki/internal/telemetry"
	"github.com/sf2loki/sf2loki/internal/testenv"
)

var allTypes = []string{config.CoordinateNoop, config.CoordinateFileLease, config.CoordinateK8sLease,
	config.CoordinateS3Lease, config.CoordinateGCSLease}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// TestGraphWiresTheKeepersFenceIntoTheCommitter builds every coordinator's
// graph over in-memory stores: the committer refuses to write until the
// keeper leads (noop: no fence at all).
func TestGraphWiresTheKeepersFenceIntoTheCommitter(t *testing.T) {
	for _, ct := range allTypes {
		t.Run(ct, func(t *testing.T) {
			lease, state := porttest.NewMemoryCAS("lease"), porttest.NewMemoryCAS("state")
			d, cleanup, err := Build(t.Context(), testenv.Config(ct), Overrides{LeaseStore: lease, StateStore: state,
				Clock: porttest.NewFakeClock(time.Now()), Logger: quiet()})
			if err != nil {
				t.Fatal(err)
			}
			defer cleanup()
			err = d.Committer().Commit(t.Context(), "k", "v")
			if ct == config.CoordinateNoop {
				if err != nil {
					t.Fatalf("noop has no fence, but the commit failed: %v", err)
				}
				if _, ok := d.Coordinator().(*domain.SoleLeader); !ok {
					t.Fatalf("noop coordinator is %T", d.Coordinator())
				}
				return
			}
			if !errors.Is(err, domain.ErrFenced) || state.Calls(porttest.OpPut) != 0 {
				t.Fatalf("commit before leading: %v (%d writes); want ErrFenced and no write", err, state.Calls(porttest.OpPut))
			}
			k, ok := d.Coordinator().(*domain.LeaseKeeper)
			if !ok {
				t.Fatalf("%s coordinator is %T", ct, d.Coordinator())
			}
			if res := k.Step(t.Context()); res.Transition != domain.TransitionAcquired {
				t.Fatalf("acquire: %+v", res)
			}
			if err := d.Committer().Commit(t.Context(), "k", "v"); err != nil {
				t.Fatalf("commit while leading: %v", err)
			}
			if lease.Calls(porttest.OpPut) != 1 {
				t.Fatalf("the keeper did not use the lease store (%d puts)", lease.Calls(porttest.OpPut))
			}
		})
	}
}

// counter is a test workload: it commits increasing positions of one key,
// and on stop makes one final commit with the drain context.
type counter struct {
	every time.Duration
	mu    sync.Mutex
	errs  []error
	final []error
	runs  int
}

func (c *counter) Run(ctx context.Context, lead Lead) error {
	c.mu.Lock()
	c.runs++
	c.mu.Unlock()
	doc, err := lead.Committer.Load(ctx)
	if err != nil {
		return err
	}
	pos, _ := strconv.Atoi(doc["pos"])
	for {
		select {
		case <-ctx.Done():
			err := lead.Committer.Commit(lead.Drain, "final", fmt.Sprint(pos))
			c.mu.Lock()
			c.final = append(c.final, err)
			c.mu.Unlock()
			return nil
		case <-time.After(c.every):
		}
		pos++
		if err := lead.Committer.Commit(ctx, "pos", fmt.Sprintf("%06d", pos)); err != nil {
			c.mu.Lock()
			c.errs = append(c.errs, err)
			c.mu.Unlock()
			if errors.Is(err, domain.ErrConflict) || errors.Is(err, domain.ErrFenced) {
				return err
			}
		}
	}
}

func (c *counter) snapshot() (runs int, errs, final []error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.runs, append([]error(nil), c.errs...), append([]error(nil), c.final...)
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func storedDoc(t *testing.T, m *porttest.MemoryCAS) map[string]string {
	t.Helper()
	obj, ok := m.Peek()
	if !ok {
		return nil
	}
	var doc map[string]string
	if err := json.Unmarshal(obj.Data, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

// TestLifecycle: acquire → claim → work → a conflict demotes in place and
// the work resumes → graceful stop drains with a valid fence, commits, then
// releases the lease.
func TestLifecycle(t *testing.T) {
	lease, state := porttest.NewMemoryCAS("lease"), porttest.NewMemoryCAS("state")
	work := &counter{every: 20 * time.Millisecond}
	spans := tracetest.NewInMemoryExporter()
	d, cleanup, err := Build(t.Context(), testenv.Config(config.CoordinateS3Lease), Overrides{LeaseStore: lease, StateStore: state,
		Workload: work, Logger: quiet(), Telemetry: telemetry.Options{SpanExporter: spans}})
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()

	eventually(t, "the claim and some commits", func() bool {
		doc := storedDoc(t, state)
		return doc[domain.FenceEpochKey] == "1" && doc["pos"] >= "000003"
	})
	// Another writer changes the document: the next commit conflicts, the
	// work is demoted in place, reloads and resumes.
	doc := storedDoc(t, state)
	doc["pos"] = "000100"
	b, _ := json.Marshal(doc)
	state.Store(b)
	eventually(t, "the work to resume after the conflict", func() bool {
		runs, _, _ := work.snapshot()
		return runs >= 2 && storedDoc(t, state)["pos"] > "000100"
	})
	if _, errs, _ := work.snapshot(); len(errs) == 0 || !errors.Is(errs[0], domain.ErrConflict) {
		t.Fatalf("commit errors %v, want a conflict", errs)
	}

	stop()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("Run after a graceful stop: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("Run did not return after the stop")
	}
	if _, _, final := work.snapshot(); len(final) != 1 || final[0] != nil {
		t.Fatalf("final commit during the drain: %v, want it to succeed under a valid fence", final)
	}
	if storedDoc(t, state)["final"] == "" {
		t.Fatal("the final commit is not in the document")
	}
	rec, err := domain.DecodeLeaseRecord(func() []byte { o, _ := lease.Peek(); return o.Data }())
	if err != nil || rec.Holder != "" || rec.Epoch != 1 {
		t.Fatalf("lease after stop: %+v %v; want released at epoch 1", rec, err)
	}
	var names []string
	for _, s := range spans.GetSpans() {
		names = append(names, s.Name)
		attrs := map[string]string{}
		for _, a := range s.Attributes {
			attrs[string(a.Key)] = a.Value.String()
		}
		if attrs["holder"] != "test-holder" || attrs["epoch"] != "1" || attrs["backend"] != "mem://lease" || attrs["reason"] == "" {
			t.Errorf("span %s attributes %v", s.Name, attrs)
		}
	}
	if got := strings.Join(names, ","); got != "lease.acquired,lease.lost,lease.released" {
		t.Fatalf("spans %s, want lease.acquired,lease.lost,lease.released", got)
	}
}

func get(t *testing.T, h http.Handler, path string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	b, _ := io.ReadAll(rec.Result().Body)
	return rec.Code, string(b)
}

func TestHealthEndpoints(t *testing.T) {
	lease, state := porttest.NewMemoryCAS("lease"), porttest.NewMemoryCAS("state")
	clk := porttest.NewFakeClock(time.Now())
	d, cleanup, err := Build(t.Context(), testenv.Config(config.CoordinateFileLease), Overrides{LeaseStore: lease, StateStore: state,
		Clock: clk, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	h := d.Handler()
	if code, body := get(t, h, "/healthz"); code != 200 || body != "ok\n" {
		t.Fatalf("/healthz %d %q", code, body)
	}
	if code, body := get(t, h, "/readyz"); code != 503 || body != "starting\n" {
		t.Fatalf("/readyz before the first decision: %d %q", code, body)
	}
	k := d.Coordinator().(*domain.LeaseKeeper)
	// Someone else holds the lease: standby.
	lease.Store(domain.LeaseRecord{Holder: "other", Instance: "o", Epoch: 4}.Encode())
	k.Step(t.Context())
	if code, body := get(t, h, "/readyz"); code != 503 || body != "standby\n" {
		t.Fatalf("/readyz on a standby: %d %q", code, body)
	}
	if _, body := get(t, h, "/metrics"); !strings.Contains(body, "sf2loki_leader 0") {
		t.Fatalf("/metrics on a standby lacks sf2loki_leader 0:\n%s", body)
	}
	// The replica-readiness form: 200 on a standby that can take over, 503
	// once it has not read the lease for a ttl.
	if code, body := get(t, h, "/readyz?standby=ok"); code != 200 || body != "standby\n" {
		t.Fatalf("/readyz?standby=ok on a standby that just read the lease: %d %q", code, body)
	}
	clk.Advance(k.Status().TTL)
	if code, body := get(t, h, "/readyz?standby=ok"); code != 503 || !strings.Contains(body, "not been read successfully within ttl") {
		t.Fatalf("/readyz?standby=ok on a standby that has not read the lease for a ttl: %d %q", code, body)
	}
	lease.Remove()
	res := k.Step(t.Context())
	d.shards[0].onAcquire(t.Context(), domain.Leadership{Epoch: res.Epoch})
	if code, body := get(t, h, "/readyz"); code != 200 || body != "leader\n" {
		t.Fatalf("/readyz on the leader: %d %q", code, body)
	}
	_, metrics := get(t, h, "/metrics")
	for _, want := range []string{"sf2loki_leader 1", "sf2loki_lease_epoch 5", `sf2loki_lease_transitions_total{transition="acquired"} 1`,
		`sf2loki_objectstore_requests_total{backend="test",op="get",outcome="ok"}`} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	code, body := get(t, h, "/statusz")
	var st StatusReport
	if err := json.Unmarshal([]byte(body), &st); code != 200 || err != nil {
		t.Fatalf("/statusz %d %v", code, err)
	}
	if st.Role != "leader" || st.Epoch != 5 || st.Holder != "test-holder" || st.Lease != "mem://lease" || st.State != "mem://state" ||
		st.LastRenewal == nil || st.FenceDeadline == nil || st.Counters["acquired"] != 1 {
		t.Fatalf("/statusz %+v", st)
	}
	// Past the self-fencing deadline, before the keeper has noticed and
	// before the work has stopped: the gauges and /readyz already say standby,
	// so two replicas never both report sf2loki_leader 1.
	clk.Advance(st.FenceDeadline.Sub(clk.Now()) + time.Millisecond)
	_, metrics = get(t, h, "/metrics")
	if !strings.Contains(metrics, "sf2loki_leader 0") || !strings.Contains(metrics, "sf2loki_lease_epoch 0") {
		t.Fatalf("/metrics past the fence deadline still reports a leader:\n%s", metrics)
	}
	if code, body := get(t, h, "/readyz"); code != 503 {
		t.Fatalf("/readyz past the fence deadline: %d %q", code, body)
	}
}

func TestHolderIDDefaults(t *testing.T) {
	host, _ := os.Hostname()
	pidHolder := fmt.Sprintf("%s-%d", host, os.Getpid())
	c := testenv.Config(config.CoordinateS3Lease)
	c.Coordinate.S3Lease.HolderID = ""
	if got := LeaseConfig(c).Holder; got != pidHolder {
		t.Fatalf("blank s3_lease.holder_id: %q, want hostname-pid %q", got, pidHolder)
	}
	c = testenv.Config(config.CoordinateK8sLease)
	c.Coordinate.K8sLease.Identity = ""
	t.Setenv("HOSTNAME", "sf2loki-7d9f-abcde")
	if got := LeaseConfig(c).Holder; got != "sf2loki-7d9f-abcde" {
		t.Fatalf("blank k8s_lease.identity: %q, want $HOSTNAME", got)
	}
	t.Setenv("HOSTNAME", "")
	if got := LeaseConfig(c).Holder; got != pidHolder {
		t.Fatalf("blank identity without $HOSTNAME: %q, want %q", got, pidHolder)
	}
	c.Coordinate.K8sLease.Identity = "explicit"
	if got := LeaseConfig(c).Holder; got != "explicit" {
		t.Fatalf("explicit identity: %q", got)
	}
}

// TestTracesExportOverOTLPHTTP: with telemetry.otlp_endpoint set, lease
// spans reach an OTLP/HTTP receiver, with the configured headers.
func TestTracesExportOverOTLPHTTP(t *testing.T) {
	var mu sync.Mutex
	var paths, auth []string
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		paths = append(paths, r.URL.Path)
		auth = append(auth, r.Header.Get("Authorization"))
		mu.Unlock()
		w.WriteHeader(http.StatusOK)
	}))
	defer recv.Close()
	cfg := testenv.Config(config.CoordinateS3Lease)
	cfg.Telemetry.OTLPEndpoint = recv.URL
	cfg.Telemetry.Headers = map[string]string{"Authorization": "Bearer secret-token"}
	d, cleanup, err := Build(t.Context(), cfg, Overrides{LeaseStore: porttest.NewMemoryCAS("lease"),
		StateStore: porttest.NewMemoryCAS("state"), Clock: porttest.NewFakeClock(time.Now()), Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	if res := d.Coordinator().(*domain.LeaseKeeper).Step(t.Context()); res.Transition != domain.TransitionAcquired {
		t.Fatal(res)
	}
	cleanup() // flushes the batch exporter
	mu.Lock()
	defer mu.Unlock()
	if len(paths) == 0 || paths[0] != "/v1/traces" || auth[0] != "Bearer secret-token" {
		t.Fatalf("OTLP receiver got %v with auth %v", paths, auth)
	}
}

func TestBridgeMaxBytesBoundsTheRealtimeLane(t *testing.T) {
	base := "salesforce: {auth_mode: client_credentials, login_url: 'https://x.my.salesforce.com', client_id: ck, client_secret: s}\nsink: {loki: {url: http://l/push}}\n"
	load := func(yaml string) *config.Config {
		cfg, _, err := config.Load(testenv.WriteConfig(t, base+yaml))
		if err != nil {
			t.Fatal(err)
		}
		return cfg
	}
	rt, bulk := laneConfigs(load("sources: {pubsub: {topics: ['*'], bridge_max_bytes: 1048576}}\n"))
	if rt.QueueBytes != 1<<20 || bulk.QueueBytes != 64<<20 || rt.QueueEntries != bulk.QueueEntries {
		t.Fatalf("realtime %+v, bulk %+v: want bridge_max_bytes on the realtime lane only", rt, bulk)
	}
	if rt, _ := laneConfigs(load("sources: {pubsub: {topics: ['*']}}\n")); rt.QueueBytes != 64<<20 {
		t.Fatalf("bridge_max_bytes 0: realtime %+v, want sink.loki.batch.queue_bytes", rt)
	}
}

// coordinate.file_lease.watch and k8s_lease.watch (default true) let a
// standby watch its lease; false makes it poll.
func TestLeaseWatchSetting(t *testing.T) {
	for _, ct := range []string{config.CoordinateFileLease, config.CoordinateK8sLease} {
		c := testenv.Config(ct)
		if LeaseConfig(c).Poll {
			t.Fatalf("%s: the default polls; want it to watch", ct)
		}
		c.Coordinate.FileLease.Watch, c.Coordinate.K8sLease.Watch = false, false
		if !LeaseConfig(c).Poll {
			t.Fatalf("%s: watch: false still watches", ct)
		}
	}
}
