package app

import (
	"context"
	"log/slog"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/ports/porttest"
	"github.com/sf2loki/sf2loki/internal/telemetry"
	"github.com/sf2loki/sf2loki/internal/testenv"
)

// capture returns a debug-level text logger and what it wrote.
func capture() (*slog.Logger, *testenv.Buffer) {
	buf := &testenv.Buffer{}
	return slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug})), buf
}

func TestStandbyLogsWhoHoldsTheLeaseAtStartAndOnChange(t *testing.T) {
	lease, state := porttest.NewMemoryCAS("lease"), porttest.NewMemoryCAS("state")
	clk := porttest.NewFakeClock(time.Now())
	log, out := capture()
	d, cleanup, err := Build(t.Context(), testenv.Config(config.CoordinateFileLease), Overrides{LeaseStore: lease, StateStore: state,
		Clock: clk, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	k := d.Coordinator().(*domain.LeaseKeeper)
	lease.Store(domain.LeaseRecord{Holder: "replica-a", Instance: "a1", Epoch: 4}.Encode())
	for range 3 { // the first read says it; the polls after it do not
		k.Step(t.Context())
		clk.Advance(time.Second)
	}
	held := testenv.LogLines(out.String(), "level=INFO", `msg="standby: the lease is held by replica-a (epoch 4)"`, "lease_holder=replica-a", "holder=test-holder")
	if len(held) != 1 || len(testenv.LogLines(out.String(), "held by")) != 1 {
		t.Fatalf("want one line naming the holder after three polls:\n%s", out)
	}
	lease.Store(domain.LeaseRecord{Holder: "replica-c", Instance: "c1", Epoch: 5}.Encode())
	for range 3 {
		k.Step(t.Context())
		clk.Advance(time.Second)
	}
	changed := testenv.LogLines(out.String(), "level=INFO", `msg="standby: the lease is held by replica-c (epoch 5)"`, `reason="was held by replica-a (epoch 4)"`)
	if len(changed) != 1 || len(testenv.LogLines(out.String(), "held by replica-")) != 2 {
		t.Fatalf("want one more line when the holder changes:\n%s", out)
	}
}

func TestOneLinePerLeaseTransition(t *testing.T) {
	lease, state := porttest.NewMemoryCAS("lease"), porttest.NewMemoryCAS("state")
	log, out := capture()
	d, cleanup, err := Build(t.Context(), testenv.Config(config.CoordinateS3Lease), Overrides{LeaseStore: lease, StateStore: state,
		Workload: idle{}, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	ctx, cancel := context.WithCancelCause(t.Context())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	eventually(t, "leadership", func() bool { return d.Shards()[0].leading() })
	cancel(&Signalled{sig: syscall.SIGTERM})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	got := out.String()
	if acq := testenv.LogLines(got, "acquired"); len(acq) != 1 || !strings.Contains(acq[0], `level=INFO msg="leading: acquired the lease (epoch 1)"`) ||
		!strings.Contains(acq[0], "holder=test-holder") {
		t.Fatalf("want exactly one INFO line for the acquisition:\n%s", got)
	}
	if n := len(testenv.LogLines(got, "msg=leading ")); n != 0 {
		t.Fatalf("a second line says the replica leads:\n%s", got)
	}
	// The graceful stop: the signal, the release, the exit, at INFO; no
	// WARN "lost".
	for _, want := range []string{
		`level=INFO msg="received SIGTERM: draining (shutdown_grace 2s)"`,
		`level=INFO msg="released the lease (epoch 1): a standby can take over at once"`,
		`level=INFO msg="stopped after draining for `,
	} {
		if len(testenv.LogLines(got, want)) != 1 {
			t.Errorf("want one line %s", want)
		}
	}
	if warn := testenv.LogLines(got, "level=WARN"); len(warn) != 0 {
		t.Errorf("a graceful stop logged WARN: %q", warn)
	}
	if stopped := testenv.LogLines(got, "stopped after draining"); len(stopped) != 1 || !strings.Contains(stopped[0], "exit_code=0") {
		t.Errorf("the exit line lacks the exit code: %q", stopped)
	}
	if t.Failed() {
		t.Log(got)
	}
}

func TestTransitionLinesNameTheOrg(t *testing.T) {
	log, out := capture()
	tel, cleanup, err := telemetry.New(t.Context(), TelemetrySettings(testenv.Config(config.CoordinateS3Lease)), log, telemetry.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	tel.ForShard("alpha").Observe(domain.Event{Kind: domain.EventAcquired, Holder: "r1", Epoch: 3, Reason: "lease absent"})
	tel.ForShard("").Observe(domain.Event{Kind: domain.EventAcquired, Holder: "r1", Epoch: 4, Reason: "lease absent"})
	got := testenv.LogLines(out.String(), "acquired the lease")
	if len(got) != 2 || !strings.Contains(got[0], "org=alpha") || strings.Contains(got[1], "org=") {
		t.Fatalf("want the org on a shard's line, none in the single-org form:\n%s", out)
	}
	if c := tel.Counters()["acquired"]; c != 2 {
		t.Fatalf("the shard's observer does not count: %d", c)
	}
}

func TestStandbyStopSaysThereIsNothingToDrain(t *testing.T) {
	lease, state := porttest.NewMemoryCAS("lease"), porttest.NewMemoryCAS("state")
	lease.Store(domain.LeaseRecord{Holder: "other", Instance: "o", Epoch: 4}.Encode())
	log, out := capture()
	d, cleanup, err := Build(t.Context(), testenv.Config(config.CoordinateS3Lease), Overrides{LeaseStore: lease, StateStore: state,
		Workload: idle{}, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	ctx, cancel := context.WithCancelCause(t.Context())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	eventually(t, "the first read", func() bool { return len(testenv.LogLines(out.String(), "held by other")) == 1 })
	cancel(&Signalled{sig: syscall.SIGINT})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if len(testenv.LogLines(out.String(), `level=INFO msg="received SIGINT: a standby, nothing to drain"`)) != 1 ||
		len(testenv.LogLines(out.String(), "level=INFO", "stopped after", "exit_code=0")) != 1 {
		t.Fatalf("standby stop:\n%s", out)
	}
}

func TestExitCodes(t *testing.T) {
	for err, want := range map[error]int{nil: 0, context.Canceled: 1, &ExitError{Code: 2, Err: context.Canceled}: 2} {
		if got := ExitCode(err); got != want {
			t.Errorf("exitCode(%v) = %d, want %d", err, got, want)
		}
	}
}
