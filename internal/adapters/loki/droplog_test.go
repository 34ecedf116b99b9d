package loki_test

import (
	"bytes"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/sf2loki/sf2loki/internal/adapters/loki"
)

// Entries Loki refuses one by one are each dropped and counted, but logged
// once per reason and interval (lograte): a burst is one WARN line.
func TestADropBurstLogsOneWarning(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(400)
		_, _ = io.WriteString(w, "entry for stream '{job=\"sf2loki\"}' has timestamp too old: 2026-01-01T00:00:00Z")
	}))
	defer srv.Close()
	logs := &bytes.Buffer{}
	s := newSink(t, srv.URL, func(c *loki.Config) {
		c.Attempts = 1
		c.Logger = slog.New(slog.NewTextHandler(logs, nil))
	})
	for range 5 {
		if err := s.Push(t.Context(), batch(10)); err != nil {
			t.Fatal(err)
		}
	}
	if d := s.Stats.Dropped()["bad_request"]; d != 50 {
		t.Fatalf("dropped %d, want 50", d)
	}
	if n := strings.Count(logs.String(), "loki rejected an entry"); n != 1 || !strings.Contains(logs.String(), "level=WARN") {
		t.Fatalf("%d lines for 50 drops, want 1:\n%s", n, logs)
	}
}
