package salesforce_test

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/salesforce"
	"github.com/sf2loki/sf2loki/internal/ports/porttest"
	"github.com/sf2loki/sf2loki/internal/sfrules"
	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/internal/testenv/fakesf"
)

// The JWT audience is Salesforce's login host for the org's environment,
// whatever host the token request goes to: a My Domain login_url must not
// become the audience ("audience is invalid").
func TestJWTAudienceFollowsTheEnvironmentNotTheTokenHost(t *testing.T) {
	for host, want := range map[string]string{
		"https://acme.my.salesforce.com":               salesforce.ProductionLoginURL,
		"https://login.salesforce.com":                 salesforce.ProductionLoginURL,
		"https://test.salesforce.com":                  salesforce.SandboxLoginURL,
		"https://acme--uat.sandbox.my.salesforce.com/": salesforce.SandboxLoginURL,
		"https://ACME--UAT.SANDBOX.MY.SALESFORCE.COM":  salesforce.SandboxLoginURL,
	} {
		if got := salesforce.JWTAudience(host); got != want {
			t.Errorf("JWTAudience(%s) = %s, want %s", host, got, want)
		}
	}
	k, keyPEM := testKey(t)
	f := newFakeOrg(t, &k.PublicKey)
	f.site = "https://community.example.com/partners"
	for _, tc := range []struct{ audience, want string }{
		{"", "https://login.salesforce.com"}, // the fake's URL is a My Domain-like host: production
		{salesforce.SandboxLoginURL, salesforce.SandboxLoginURL},
		{f.site, f.site},
	} {
		a, err := salesforce.New(salesforce.Config{AuthMode: sfrules.JWTBearer, LoginURL: f.srv.URL, ClientID: "consumer-key",
			Username: "integration@example.com", PrivateKeyPEM: keyPEM, Audience: tc.audience, MintBackoff: time.Millisecond})
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.Token(t.Context()); err != nil {
			t.Fatalf("audience %q: %v", tc.audience, err)
		}
		if f.claims["aud"] != tc.want {
			t.Fatalf("aud %v, want %s", f.claims["aud"], tc.want)
		}
	}
	// The refusal's hint names the audience rule, not the certificate.
	a, _ := salesforce.New(salesforce.Config{AuthMode: sfrules.JWTBearer, LoginURL: f.srv.URL, ClientID: "consumer-key",
		Username: "integration@example.com", PrivateKeyPEM: keyPEM, Audience: f.srv.URL, MintBackoff: time.Millisecond})
	_, err := a.Token(t.Context())
	if err == nil || !strings.Contains(err.Error(), "audience is invalid") || !strings.Contains(err.Error(), "salesforce.environment") {
		t.Fatalf("a wrong audience: %v", err)
	}
}

// counts is a thread-safe tally of hook calls.
type counts struct {
	mu sync.Mutex
	m  map[string]int
}

func (c *counts) add(k string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[string]int{}
	}
	c.m[k]++
}

func (c *counts) get(k string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[k]
}

// A refused grant is loud once, says why through Failing, backs off instead
// of asking at every call, and clears when the credentials work again; a
// 401 mid-run is logged with the call and counted as a refresh.
func TestAuthRefusalsAndRefreshesAreReported(t *testing.T) {
	k, keyPEM := testKey(t)
	f := newFakeOrg(t, &k.PublicKey)
	clk := porttest.NewFakeClock(time.Now())
	f.now = clk.Now
	logs := &testenv.Buffer{}
	logger := slog.New(slog.NewTextHandler(logs, nil))
	refreshed, failed := &counts{}, &counts{}
	a, err := salesforce.New(salesforce.Config{AuthMode: sfrules.JWTBearer, LoginURL: f.srv.URL, ClientID: "consumer-key",
		Username: "integration@example.com", PrivateKeyPEM: keyPEM, TokenTTL: time.Hour, Clock: clk, MintBackoff: time.Millisecond,
		Logger: logger, Refreshed: refreshed.add, MintFailed: failed.add})
	if err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.refuse = "invalid assertion: the app was revoked"
	f.mu.Unlock()
	for range 5 {
		if _, err := a.Token(t.Context()); err == nil {
			t.Fatal("a refused grant minted")
		}
	}
	if f.mintCount() != 0 || failed.get("refused") != 1 {
		t.Fatalf("%d refusals counted; want one request, then the backoff", failed.get("refused"))
	}
	if got := a.Failing(); !strings.Contains(got, "revoked") {
		t.Fatalf("Failing() = %q", got)
	}
	clk.Advance(5 * time.Second)
	_, _ = a.Token(t.Context())
	if failed.get("refused") != 2 {
		t.Fatalf("no retry after the backoff: %d", failed.get("refused"))
	}
	out := logs.String()
	if n := strings.Count(out, "salesforce refuses the credentials"); n != 1 || !strings.Contains(out, "level=ERROR") {
		t.Fatalf("%d ERROR lines for one unchanged refusal, want 1:\n%s", n, out)
	}
	f.mu.Lock()
	f.refuse = ""
	f.mu.Unlock()
	clk.Advance(10 * time.Second)
	tok, err := a.Token(t.Context())
	if err != nil || a.Failing() != "" {
		t.Fatalf("after the fix: %v, Failing %q", err, a.Failing())
	}
	// A 401 mid-run: INFO with the call, a refresh counted.
	f.mu.Lock()
	f.revoked[tok.AccessToken] = true
	f.mu.Unlock()
	if _, err := a.OrgID(t.Context()); err != nil {
		t.Fatal(err)
	}
	out = logs.String()
	if !strings.Contains(out, "salesforce answered 401") || !strings.Contains(out, "call=\"GET /services/oauth2/userinfo\"") ||
		!strings.Contains(out, "accepts the credentials again") {
		t.Fatalf("log:\n%s", out)
	}
	if refreshed.get("initial") != 1 || refreshed.get("invalid_session") != 1 {
		t.Fatalf("refreshes %v", refreshed.m)
	}
}

// One REQUEST_LIMIT_EXCEEDED, on any call (a LogFile download here), closes
// the org's throttle gate: every REST call of every source then fails with
// ErrThrottled without a request until the pause ends; it is logged and
// counted once, with the call that met it.
func TestAThrottledCallPausesEveryRESTCallOfTheOrg(t *testing.T) {
	var mu sync.Mutex
	requests, limited := 0, true
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/services/oauth2/token" {
			_, _ = fmt.Fprintf(w, `{"access_token":"t1","instance_url":"http://%s"}`, r.Host)
			return
		}
		mu.Lock()
		defer mu.Unlock()
		requests++
		if limited {
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, `[{"message":"TotalRequests Limit exceeded.","errorCode":"REQUEST_LIMIT_EXCEEDED"}]`)
			return
		}
		_, _ = io.WriteString(w, `{}`)
	}))
	defer srv.Close()
	clk := porttest.NewFakeClock(time.Now())
	logs := &testenv.Buffer{}
	calls := &counts{}
	a, err := salesforce.New(salesforce.Config{AuthMode: sfrules.ClientCredentials, LoginURL: srv.URL, ClientID: "ck", ClientSecret: "x",
		Clock: clk, ThrottlePause: time.Minute, Throttled: calls.add, Logger: slog.New(slog.NewTextHandler(logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	var v map[string]any
	if err := salesforce.GetJSON(t.Context(), a, "/services/data/v60.0/sobjects/EventLogFile/0AT1/LogFile", &v); !errors.Is(err, salesforce.ErrThrottled) {
		t.Fatalf("the limited download: %v, want ErrThrottled", err)
	}
	mu.Lock()
	limited = false
	mu.Unlock()
	for _, path := range []string{"/services/data/v60.0/query?q=x", "/services/data/v60.0/limits"} {
		if err := salesforce.GetJSON(t.Context(), a, path, &v); !errors.Is(err, salesforce.ErrThrottled) {
			t.Fatalf("%s while the gate is closed: %v", path, err)
		}
	}
	if requests != 1 || calls.get("logfile") != 1 {
		t.Fatalf("%d requests, throttles %v; want the one request and one count", requests, calls.m)
	}
	clk.Advance(time.Minute)
	if err := salesforce.GetJSON(t.Context(), a, "/services/data/v60.0/limits", &v); err != nil {
		t.Fatalf("after the pause: %v", err)
	}
	if n := strings.Count(logs.String(), "salesforce API limit reached"); n != 1 {
		t.Fatalf("%d WARN lines, want 1:\n%s", n, logs.String())
	}
}

// A JWT bearer source against an org as strict as Salesforce's token
// endpoint (signature, iss, sub, aud, exp), on a My Domain-style login_url:
// the audience is login.salesforce.com, and the rows arrive.
func TestSOQLOverJWTWithAMyDomainLoginURL(t *testing.T) {
	k, keyPEM := testKey(t)
	org := &fakesf.Org{Grants: &fakesf.Grants{Key: &k.PublicKey, ClientID: "ck", Username: "integration@example.com"}}
	org.AddTo("LoginHistory", "LoginTime", "0Ya000000000001", time.Date(2026, 11, 28, 11, 30, 0, 0, time.UTC))
	spec := salesforce.ObjectSpec{Name: "LoginHistory", TimestampField: "LoginTime", PollInterval: time.Hour}
	s := soqlSourceAuth(t, org, spec, nil, func(c *salesforce.Config) {
		c.AuthMode, c.ClientSecret, c.Username, c.PrivateKeyPEM = sfrules.JWTBearer, "", "integration@example.com", keyPEM
	})
	c := &collected{}
	runFor(t, s, nil, c, 1)
	if got := c.ids(); len(got) != 1 {
		t.Fatalf("rows %v", got)
	}
}
