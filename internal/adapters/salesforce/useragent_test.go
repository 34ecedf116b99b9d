package salesforce_test

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/buildinfo"
	"github.com/sf2loki/sf2loki/internal/ports/porttest"
)

// The token request and every REST call name sf2loki and its version in
// User-Agent (what an org's Login History and API event logs show as the
// client), not Go's default.
func TestRequestsSendTheUserAgent(t *testing.T) {
	k, keyPEM := testKey(t)
	var mu sync.Mutex
	seen := map[string]string{}
	f := &fakeOrg{t: t, pub: &k.PublicKey, revoked: map[string]bool{}}
	f.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.URL.Path] = r.UserAgent()
		mu.Unlock()
		f.serve(w, r)
	}))
	t.Cleanup(f.srv.Close)
	a := jwtAuth(t, f, keyPEM, porttest.NewFakeClock(time.Now()))
	if _, err := a.OrgID(t.Context()); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, path := range []string{"/services/oauth2/token", "/services/oauth2/userinfo"} {
		if got := seen[path]; got != buildinfo.UserAgent() {
			t.Errorf("%s: User-Agent %q, want %q", path, got, buildinfo.UserAgent())
		}
	}
}
