package app

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/loki"
	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/ports/porttest"
	"github.com/sf2loki/sf2loki/internal/testenv"
)

// A standby that cannot contend because the checkpoint document is corrupt
// says so on every surface: /readyz (both forms), /statusz and the metric.
func TestBlockedStandbySaysWhy(t *testing.T) {
	lease, state := porttest.NewMemoryCAS("lease"), porttest.NewMemoryCAS("state")
	state.Store([]byte(`{"synthetic:Login": 12`))
	d, cleanup, err := Build(t.Context(), testenv.Config(config.CoordinateFileLease), Overrides{LeaseStore: lease, StateStore: state,
		Clock: porttest.NewFakeClock(time.Now()), Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	h := d.Handler()
	d.Coordinator().(*domain.LeaseKeeper).Step(t.Context())
	for _, path := range []string{"/readyz", "/readyz?standby=ok"} {
		if code, body := get(t, h, path); code != 503 || !strings.HasPrefix(body, "standby: blocked (checkpoint_corrupt): ") || !strings.Contains(body, "not valid JSON") {
			t.Errorf("%s: %d %q", path, code, body)
		}
	}
	_, metrics := get(t, h, "/metrics")
	for _, want := range []string{`sf2loki_coordination_blocked{reason="checkpoint_corrupt"} 1`, `sf2loki_coordination_blocked{reason="epoch_exhausted"} 0`,
		"sf2loki_pipeline_stalled 0"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	_, body := get(t, h, "/statusz")
	var st StatusReport
	if err := json.Unmarshal([]byte(body), &st); err != nil || st.Blocked != domain.BlockedCheckpointCorrupt || st.BlockedDetail == "" {
		t.Fatalf("/statusz %s", body)
	}
}

// stallingWorkload reports a stall at once, as the pipeline's guard does.
type stallingWorkload struct{ runs chan struct{} }

func (w stallingWorkload) Run(context.Context, Lead) error {
	w.runs <- struct{}{}
	return &domain.StalledError{For: 5 * time.Minute, Pending: 10}
}

// A stalled pipeline resigns: the lease is released for another replica,
// this one holds off and says why.
func TestAStalledLeaderResigns(t *testing.T) {
	lease, state := porttest.NewMemoryCAS("lease"), porttest.NewMemoryCAS("state")
	work := stallingWorkload{runs: make(chan struct{}, 4)}
	d, cleanup, err := Build(t.Context(), testenv.Config(config.CoordinateS3Lease), Overrides{LeaseStore: lease, StateStore: state,
		Workload: work, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	go func() { _ = d.Run(ctx) }()
	<-work.runs
	eventually(t, "the resignation", func() bool {
		o, ok := lease.Peek()
		rec, _ := domain.DecodeLeaseRecord(o.Data)
		return ok && rec.Holder == "" && d.Coordinator().Status().Blocked == domain.BlockedResigned
	})
	h := d.Handler()
	if code, body := get(t, h, "/readyz"); code != 503 || !strings.Contains(body, "blocked (resigned)") || !strings.Contains(body, "pipeline stalled") {
		t.Fatalf("/readyz %d %q", code, body)
	}
	if _, metrics := get(t, h, "/metrics"); !strings.Contains(metrics, "sf2loki_pipeline_stalled 1") ||
		!strings.Contains(metrics, `sf2loki_coordination_blocked{reason="resigned"} 1`) {
		t.Fatalf("/metrics:\n%s", metrics)
	}
	select {
	case <-work.runs:
		t.Fatal("the resigned replica led again before its hold-off")
	case <-time.After(time.Second):
	}
}

// A leader whose Salesforce credentials are refused is not ready, in both
// forms of /readyz, and exports the state.
func TestALeaderWithRefusedSalesforceCredentialsIsNotReady(t *testing.T) {
	lease, state := porttest.NewMemoryCAS("lease"), porttest.NewMemoryCAS("state")
	clk := porttest.NewFakeClock(time.Now())
	d, cleanup, err := Build(t.Context(), testenv.Config(config.CoordinateFileLease), Overrides{LeaseStore: lease, StateStore: state,
		Clock: clk, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	h := d.Handler()
	k := d.Coordinator().(*domain.LeaseKeeper)
	res := k.Step(t.Context())
	d.shards[0].onAcquire(t.Context(), domain.Leadership{Epoch: res.Epoch})
	if code, body := get(t, h, "/readyz"); code != 200 {
		t.Fatalf("/readyz %d %q", code, body)
	}
	d.Telemetry().AddSalesforceAuthProbe("", func() string { return "invalid_grant: the app was revoked" })
	for _, path := range []string{"/readyz", "/readyz?standby=ok"} {
		if code, body := get(t, h, path); code != 503 || !strings.Contains(body, "leader: salesforce auth failing (invalid_grant: the app was revoked)") {
			t.Errorf("%s: %d %q", path, code, body)
		}
	}
	if _, metrics := get(t, h, "/metrics"); !strings.Contains(metrics, "sf2loki_salesforce_auth_failing 1") {
		t.Fatalf("/metrics lacks sf2loki_salesforce_auth_failing 1")
	}
}

// A leader whose every push to Loki has failed for
// service.unready_after_sink_failing is not ready and says for how long;
// before that, and with 0, it stays ready.
func TestALeaderWhosePushesFailTooLongIsNotReady(t *testing.T) {
	for _, limit := range []time.Duration{15 * time.Minute, 0} {
		cfg := testenv.Config(config.CoordinateFileLease)
		cfg.Service.UnreadyAfterSinkFailing = limit
		lease, state := porttest.NewMemoryCAS("lease"), porttest.NewMemoryCAS("state")
		d, cleanup, err := Build(t.Context(), cfg, Overrides{LeaseStore: lease, StateStore: state,
			Clock: porttest.NewFakeClock(time.Now()), Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		h := d.Handler()
		k := d.Coordinator().(*domain.LeaseKeeper)
		stats := &loki.Stats{}
		d.Telemetry().RegisterSink(stats)
		// A failure from an earlier term says nothing about Loki now.
		stats.FailingSince.Store(time.Now().Add(-3 * time.Hour).UnixNano())
		res := k.Step(t.Context())
		d.shards[0].onAcquire(t.Context(), domain.Leadership{Epoch: res.Epoch})
		if stats.FailingSince.Load() != 0 {
			t.Errorf("a new term kept the failure of an earlier one")
		}
		stats.FailingSince.Store(time.Now().Add(-10 * time.Minute).UnixNano())
		if code, body := get(t, h, "/readyz"); code != 200 {
			t.Errorf("limit %s, failing for 10m: /readyz %d %q", limit, code, body)
		}
		stats.FailingSince.Store(time.Now().Add(-16 * time.Minute).UnixNano())
		code, body := get(t, h, "/readyz?standby=ok")
		switch {
		case limit == 0 && code != 200:
			t.Errorf("limit 0, failing for 16m: /readyz %d %q; 0 keeps the leader ready", code, body)
		case limit > 0 && (code != 503 || !strings.Contains(body, "every push to Loki has failed for 16m0s (service.unready_after_sink_failing 15m0s)")):
			t.Errorf("limit %s, failing for 16m: /readyz %d %q", limit, code, body)
		}
		stats.FailingSince.Store(0)
		if code, body := get(t, h, "/readyz"); code != 200 {
			t.Errorf("an accepted push: /readyz %d %q", code, body)
		}
		cleanup()
	}
}

// The runtime profiles are served only when service.pprof asks for them.
func TestPprofOnlyWhenAskedFor(t *testing.T) {
	for _, on := range []bool{false, true} {
		cfg := testenv.Config(config.CoordinateFileLease)
		cfg.Service.Pprof = on
		d, cleanup, err := Build(t.Context(), cfg, Overrides{LeaseStore: porttest.NewMemoryCAS("lease"), StateStore: porttest.NewMemoryCAS("state"),
			Clock: porttest.NewFakeClock(time.Now()), Logger: quiet()})
		if err != nil {
			t.Fatal(err)
		}
		h := d.Handler()
		for _, path := range []string{"/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/symbol"} {
			code, body := get(t, h, path)
			if served := code == 200; served != on {
				t.Errorf("service.pprof %v: %s answered %d %.80q", on, path, code, body)
			}
		}
		cleanup()
	}
}
