package gcs_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/sf2loki/sf2loki/internal/adapters/gcs"
	"github.com/sf2loki/sf2loki/internal/buildinfo"
	"github.com/sf2loki/sf2loki/internal/ports"
)

// Requests to Cloud Storage carry sf2loki/<version> in User-Agent, so that
// audit logs name the client.
func TestRequestsCarryTheUserAgent(t *testing.T) {
	var mu sync.Mutex
	var agents []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		agents = append(agents, r.UserAgent())
		mu.Unlock()
		// The JSON API's answer for a missing object.
		w.Header().Set("Content-Type", "application/json; charset=UTF-8")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"error":{"code":404,"message":"No such object: b/k","errors":[{"message":"No such object: b/k","domain":"global","reason":"notFound"}]}}`))
	}))
	defer srv.Close()
	s, err := gcs.New(t.Context(), gcs.Config{Bucket: "b", ObjectName: "k", Endpoint: srv.URL + "/storage/v1/"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(t.Context()); !errors.Is(err, ports.ErrNotFound) {
		t.Fatalf("Get: %v, want ErrNotFound", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(agents) == 0 || !strings.Contains(agents[0], buildinfo.UserAgent()) {
		t.Errorf("User-Agents %q, want one holding %q", agents, buildinfo.UserAgent())
	}
}
