package doctor

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/app"
	"github.com/sf2loki/sf2loki/internal/buildinfo"
	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/ports/porttest"
	"github.com/sf2loki/sf2loki/internal/telemetry"
	"github.com/sf2loki/sf2loki/internal/testenv"
)

// The OTLP clients name sf2loki and its version in User-Agent, not the
// OpenTelemetry exporter's: the metrics push, doctor's probe of it, and
// the traces export.
func TestOTLPClientsSendTheUserAgent(t *testing.T) {
	want := buildinfo.UserAgent()

	rcv := testenv.NewOTLPReceiver(t, "/v1/metrics", nil)
	cfg := testenv.PushConfig(t, rcv.URL(), "1s", "")
	tel, cleanup, err := telemetry.New(t.Context(), app.TelemetrySettings(cfg), quiet(), telemetry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tel.Shard("", func() bool { return true }, func() string { return "" }).SetLeader(true, 1)
	if got := rcv.WaitFor("sf2loki_leader", 10*time.Second).Header.Get("User-Agent"); got != want {
		t.Errorf("metrics push: User-Agent %q, want %q", got, want)
	}
	cleanup()

	probe := testenv.NewOTLPReceiver(t, "/v1/metrics", nil)
	if c := checkTelemetry(t.Context(), testenv.PushConfig(t, probe.URL(), "1m", "")); c.Status != Pass {
		t.Fatalf("doctor: %+v", c)
	}
	if got := probe.Requests()[0].Header.Get("User-Agent"); got != want {
		t.Errorf("doctor's telemetry probe: User-Agent %q, want %q", got, want)
	}

	var mu sync.Mutex
	var agents []string
	traces := httptest.NewServer(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		agents = append(agents, r.UserAgent())
		mu.Unlock()
	}))
	defer traces.Close()
	tcfg := testenv.Config(config.CoordinateS3Lease)
	tcfg.Telemetry.OTLPEndpoint = traces.URL
	d, cleanup, err := app.Build(t.Context(), tcfg, app.Overrides{LeaseStore: porttest.NewMemoryCAS("lease"),
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
	if len(agents) == 0 || agents[0] != want {
		t.Errorf("traces export: User-Agents %q, want %q", agents, want)
	}
}
