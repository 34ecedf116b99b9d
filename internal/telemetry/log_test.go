package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"

	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/testenv"
)

func capture() (*slog.Logger, *strings.Builder) {
	var buf strings.Builder
	return slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), &buf
}

func TestPlannedAndUnplannedLossesLogAtTheirLevels(t *testing.T) {
	log, out := capture()
	logEvent(log, domain.Event{Kind: domain.EventLost, Epoch: 2, Reason: "resigned: rebalancing", Graceful: true})
	logEvent(log, domain.Event{Kind: domain.EventLost, Epoch: 3, Reason: "lease taken over by another process"})
	if got := testenv.LogLines(out.String(), "lost the lease"); len(got) != 2 || !strings.Contains(got[0], "level=DEBUG") || !strings.Contains(got[1], "level=WARN") {
		t.Fatalf("want a planned loss at DEBUG (the release line says it) and a takeover at WARN:\n%s", out)
	}
}

// A checkpoint write the stop cancels is planned: INFO, not WARN. (A
// SIGTERM that arrived while the claim was written logged WARN
// commit_failed on a graceful stop.)
func TestACommitCancelledByTheStopIsNotAWarning(t *testing.T) {
	var out strings.Builder
	log := slog.New(slog.NewTextHandler(&out, &slog.HandlerOptions{Level: slog.LevelDebug}))
	logEvent(log, domain.Event{Kind: domain.EventCommitFailed, Epoch: 1, Reason: "claim", Err: fmt.Errorf("put mem://state: %w", context.Canceled)})
	logEvent(log, domain.Event{Kind: domain.EventCommitFailed, Epoch: 1, Reason: "commit", Err: errors.New("put mem://state: 503")})
	got := out.String()
	if !strings.Contains(got, `level=INFO msg="a checkpoint write was cancelled by the stop`) || strings.Count(got, "level=WARN") != 1 {
		t.Fatalf("want the cancelled write at INFO and the failed one at WARN:\n%s", got)
	}
}
