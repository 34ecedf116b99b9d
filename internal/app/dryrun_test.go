package app

import (
	"context"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/ports/porttest"
	"github.com/sf2loki/sf2loki/internal/testenv"
)

// TestDryRunGraph: a dry run's graph ignores the coordinator and the state
// store it is given (none of their objects is read or written), its
// pipeline commits nothing even to its own in-memory document, and its
// health endpoint is never service.health_addr.
func TestDryRunGraph(t *testing.T) {
	lease, state := porttest.NewMemoryCAS("lease"), porttest.NewMemoryCAS("state")
	cfg := testenv.Config(config.CoordinateS3Lease)
	cfg.Service.HealthAddr = ":8080"
	cfg.Sources.Synthetic.Rate = 200
	cfg.Sink.Loki.Batch.MaxWait = 20 * time.Millisecond
	cfg.Sink.Stdout.Enabled = true
	var out testenv.Buffer
	d, cleanup, err := Build(t.Context(), cfg, Overrides{LeaseStore: lease, StateStore: state, MembersStore: lease, Logger: quiet(), Stdout: &out})
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	if d.cfg.Coordinate.Type != config.CoordinateNoop || d.cfg.Service.HealthAddr != "127.0.0.1:0" || cfg.Coordinate.Type != config.CoordinateS3Lease {
		t.Fatalf("the dry run runs coordinate %s on %s (the configuration says %s)", d.cfg.Coordinate.Type, d.cfg.Service.HealthAddr, cfg.Coordinate.Type)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 1500*time.Millisecond)
	defer cancel()
	if err := d.Run(ctx); err != nil {
		t.Fatal(err)
	}
	testenv.PrintedLines(t, out.String())
	for _, s := range []*porttest.MemoryCAS{lease, state} {
		for _, op := range []porttest.Op{porttest.OpGet, porttest.OpPut, porttest.OpDelete} {
			if n := s.Calls(op); n != 0 {
				t.Errorf("%s: %d %s calls", s, n, op)
			}
		}
	}
	doc, err := d.Committer().Load(t.Context())
	if err != nil || len(doc) != 0 || d.Committer().Version() != "" {
		t.Fatalf("the dry run committed to its own document: %v %v (version %q)", doc, err, d.Committer().Version())
	}
}
