package loki_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/sf2loki/sf2loki/internal/adapters/loki"
	"github.com/sf2loki/sf2loki/internal/ports"
)

// TestAClosedSendGateStopsThePush: a push whose send gate (the leader's
// lease fence) is closed sends nothing; one whose gate closes while Loki
// answers 503 is not sent again; neither is retried by the sink.
func TestAClosedSendGateStopsThePush(t *testing.T) {
	var arrived atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		arrived.Add(1)
		w.WriteHeader(http.StatusServiceUnavailable)
	}))
	defer srv.Close()
	fence := errors.New("self-fencing deadline passed")
	for _, tc := range []struct {
		name  string
		opens int64 // how often the gate answers open before it closes
		sent  int64 // the requests Loki gets
	}{
		{"closed before the request", 0, 0},
		{"closes before the retry", 1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			arrived.Store(0)
			s := newSink(t, srv.URL+"/loki/api/v1/push", func(c *loki.Config) { c.Attempts = 5 })
			var asked atomic.Int64
			ctx := ports.WithSendGate(t.Context(), func() error {
				if asked.Add(1) > tc.opens {
					return fence
				}
				return nil
			})
			err := s.Push(ctx, batch(3))
			if !errors.Is(err, ports.ErrGateClosed) || !errors.Is(err, fence) || ports.IsTransient(err) {
				t.Fatalf("push: %v; want the closed gate, with its reason, not transient", err)
			}
			if got := arrived.Load(); got != tc.sent {
				t.Fatalf("Loki got %d requests, want %d", got, tc.sent)
			}
		})
	}
}
