package loki_test

import (
	"net/http/httptest"
	"testing"

	"github.com/sf2loki/sf2loki/internal/adapters/loki"
	"github.com/sf2loki/sf2loki/internal/buildinfo"
)

// Every push names sf2loki and its version in User-Agent, as Promtail and
// Alloy name themselves, so that a Loki operator can tell its clients
// apart; a User-Agent in sink.loki.headers replaces it.
func TestPushSendsTheUserAgent(t *testing.T) {
	for name, tc := range map[string]struct {
		headers map[string]string
		want    string
	}{
		"ours":       {nil, buildinfo.UserAgent()},
		"configured": {map[string]string{"user-agent": "edge-relay/2"}, "edge-relay/2"},
	} {
		t.Run(name, func(t *testing.T) {
			rc := &receiver{}
			srv := httptest.NewServer(rc)
			defer srv.Close()
			s := newSink(t, srv.URL, func(c *loki.Config) { c.Headers = tc.headers })
			if err := s.Push(t.Context(), batch(2)); err != nil {
				t.Fatal(err)
			}
			if len(rc.headers) != 1 {
				t.Fatalf("%d requests", len(rc.headers))
			}
			if got := rc.headers[0].Get("User-Agent"); got != tc.want {
				t.Errorf("User-Agent %q, want %q", got, tc.want)
			}
		})
	}
}
