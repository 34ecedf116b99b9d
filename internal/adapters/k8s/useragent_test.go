package k8s_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"k8s.io/client-go/rest"

	"github.com/sf2loki/sf2loki/internal/adapters/k8s"
	"github.com/sf2loki/sf2loki/internal/buildinfo"
	"github.com/sf2loki/sf2loki/internal/ports"
)

// Requests to the API server carry User-Agent sf2loki/<version>, which the
// audit log records as the client (userAgent).
func TestRequestsCarryTheUserAgent(t *testing.T) {
	var mu sync.Mutex
	var agents []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		agents = append(agents, r.UserAgent())
		mu.Unlock()
		// The API server's Status for a missing Lease.
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure",` +
			`"message":"leases.coordination.k8s.io \"l\" not found","reason":"NotFound",` +
			`"details":{"name":"l","group":"coordination.k8s.io","kind":"leases"},"code":404}`))
	}))
	defer srv.Close()
	s, err := k8s.New(k8s.Config{Namespace: "ns", Name: "l", REST: &rest.Config{Host: srv.URL}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(t.Context()); !errors.Is(err, ports.ErrNotFound) {
		t.Fatalf("Get: %v, want ErrNotFound", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(agents) == 0 || agents[0] != buildinfo.UserAgent() {
		t.Errorf("User-Agents %q, want %q", agents, buildinfo.UserAgent())
	}
}
