package loki_test

import (
	"bytes"
	"cmp"
	"crypto/tls"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/sf2loki/sf2loki/internal/adapters/loki"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/testenv"
)

// tlsLoki is a Loki push endpoint over TLS that requires a client
// certificate its CA signed, and records the client certificates'
// names.
type tlsLoki struct {
	*httptest.Server
	rc      *receiver
	mu      sync.Mutex
	clients []string
}

func newTLSLoki(t *testing.T, ca *testenv.CA, mutate ...func(*tls.Config)) *tlsLoki {
	t.Helper()
	l := &tlsLoki{rc: &receiver{}}
	l.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l.mu.Lock()
		for _, c := range r.TLS.PeerCertificates[:1] {
			l.clients = append(l.clients, c.Subject.CommonName)
		}
		l.mu.Unlock()
		l.rc.ServeHTTP(w, r)
	}))
	l.TLS = &tls.Config{
		Certificates: []tls.Certificate{ca.Server(t, "loki", "127.0.0.1").TLS},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    ca.Pool(),
		MinVersion:   tls.VersionTLS12,
	}
	for _, m := range mutate {
		m(l.TLS)
	}
	l.Config.ErrorLog = log.New(io.Discard, "", 0) // the refused handshakes
	l.StartTLS()
	t.Cleanup(l.Close)
	return l
}

// TestPushOverMutualTLS: with the CA that signed the server's certificate
// and a client certificate, the push lands and the extra headers arrive;
// without the client certificate, with another CA or with a server name
// the certificate does not hold it fails, saying what to check; with
// insecure_skip_verify it lands and the sink warns; a server below TLS 1.2
// is refused.
func TestPushOverMutualTLS(t *testing.T) {
	ca, other := testenv.NewCA(t, "test-ca"), testenv.NewCA(t, "other-ca")
	client, stranger := ca.Client(t, "sf2loki-client"), other.Client(t, "stranger")
	srv := newTLSLoki(t, ca)
	good := loki.TLS{CAFile: ca.File, CertFile: client.CertFile, KeyFile: client.KeyFile}
	for _, tc := range []struct {
		name string
		tls  loki.TLS
		want string // "" for a push that lands; else in the error
	}{
		{"ca and client certificate", good, ""},
		{"server_name the certificate holds", loki.TLS{CAFile: ca.File, CertFile: client.CertFile, KeyFile: client.KeyFile, ServerName: "127.0.0.1"}, ""},
		{"no client certificate", loki.TLS{CAFile: ca.File}, "set sink.loki.tls.cert_file and key_file"},
		{"client certificate of another CA", loki.TLS{CAFile: ca.File, CertFile: stranger.CertFile, KeyFile: stranger.KeyFile},
			"the Loki server refused the TLS handshake"},
		{"wrong ca", loki.TLS{CAFile: other.File, CertFile: client.CertFile, KeyFile: client.KeyFile},
			"not signed by a CA of sink.loki.tls.ca_file " + other.File},
		{"system roots", loki.TLS{CertFile: client.CertFile, KeyFile: client.KeyFile}, "set sink.loki.tls.ca_file"},
		{"wrong server_name", loki.TLS{CAFile: ca.File, CertFile: client.CertFile, KeyFile: client.KeyFile, ServerName: "loki.example"},
			"does not hold sink.loki.tls.server_name loki.example"},
		{"insecure_skip_verify", loki.TLS{CertFile: client.CertFile, KeyFile: client.KeyFile, InsecureSkipVerify: true}, ""},
	} {
		for _, gated := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s gated=%v", tc.name, gated), func(t *testing.T) {
				logs := &bytes.Buffer{}
				before := len(srv.rc.entries)
				s := newSink(t, srv.URL, func(c *loki.Config) {
					c.TLS, c.Attempts = tc.tls, 1
					c.Headers = map[string]string{"X-Api-Key": "k3y-0f-the-gateway", "X-Team": "secops"}
					c.Logger = slog.New(slog.NewTextHandler(logs, nil))
				})
				ctx := t.Context()
				if gated { // a leader's push, under its lease fence (open)
					ctx = ports.WithSendGate(ctx, func() error { return nil })
				}
				err := s.Push(ctx, batch(3))
				warned := strings.Contains(logs.String(), "level=WARN") && strings.Contains(logs.String(), "anyone on the network path can read and forge")
				if warned != tc.tls.InsecureSkipVerify {
					t.Errorf("insecure_skip_verify %v, warned %v:\n%s", tc.tls.InsecureSkipVerify, warned, logs)
				}
				if tc.want != "" {
					if err == nil || !strings.Contains(err.Error(), tc.want) {
						t.Fatalf("push: %v; want an error saying %q", err, tc.want)
					}
					if len(srv.rc.entries) != before {
						t.Fatal("a refused connection delivered entries")
					}
					t.Log(err)
					return
				}
				if err != nil {
					t.Fatal(err)
				}
				srv.rc.mu.Lock()
				defer srv.rc.mu.Unlock()
				h := srv.rc.headers[len(srv.rc.headers)-1]
				if len(srv.rc.entries) != before+3 || h.Get("X-Api-Key") != "k3y-0f-the-gateway" || h.Get("X-Team") != "secops" ||
					h.Get("Content-Type") != "application/x-protobuf" {
					t.Fatalf("%d entries (want %d), headers %v", len(srv.rc.entries), before+3, h)
				}
				srv.mu.Lock()
				defer srv.mu.Unlock()
				if last := srv.clients[len(srv.clients)-1]; last != "sf2loki-client" {
					t.Fatalf("the server saw the client certificate %q", last)
				}
			})
		}
	}
	t.Run("below TLS 1.2", func(t *testing.T) {
		old := newTLSLoki(t, ca, func(c *tls.Config) { c.MinVersion, c.MaxVersion = tls.VersionTLS10, tls.VersionTLS11 })
		s := newSink(t, old.URL, func(c *loki.Config) { c.TLS, c.Attempts = good, 1 })
		if err := s.Push(t.Context(), batch(1)); err == nil || !strings.Contains(err.Error(), "TLS 1.2 or later") {
			t.Fatalf("push to a TLS 1.1 server: %v", err)
		}
	})
}

// TestTLSFilesAreReadAtStart: New reads the files and refuses, naming the
// key and what is wrong, a file it cannot read, one without PEM, a
// certificate without its key (or the reverse) and a key that is not the
// certificate's.
func TestTLSFilesAreReadAtStart(t *testing.T) {
	ca, other := testenv.NewCA(t, "ca"), testenv.NewCA(t, "other")
	client, stranger := ca.Client(t, "client"), other.Client(t, "stranger")
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.pem")
	if err := os.WriteFile(garbage, []byte("not PEM at all\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	broken := filepath.Join(dir, "broken.pem")
	if err := os.WriteFile(broken, []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	missing := filepath.Join(dir, "missing.pem")
	for name, tc := range map[string]struct {
		tls  loki.TLS
		want string
	}{
		"ca_file missing":        {loki.TLS{CAFile: missing}, "sink.loki.tls.ca_file: cannot read " + missing + ": no such file or directory"},
		"ca_file not PEM":        {loki.TLS{CAFile: garbage}, "sink.loki.tls.ca_file " + garbage + " holds no PEM certificate"},
		"ca_file a key":          {loki.TLS{CAFile: client.KeyFile}, "sink.loki.tls.ca_file " + client.KeyFile + " holds no PEM certificate"},
		"ca_file broken":         {loki.TLS{CAFile: broken}, "sink.loki.tls.ca_file " + broken + ": certificate 1 is not valid"},
		"cert_file without key":  {loki.TLS{CertFile: client.CertFile}, "sink.loki.tls.key_file is required with cert_file"},
		"key_file without cert":  {loki.TLS{KeyFile: client.KeyFile}, "sink.loki.tls.cert_file is required with key_file"},
		"cert_file missing":      {loki.TLS{CertFile: missing, KeyFile: client.KeyFile}, "sink.loki.tls.cert_file: cannot read " + missing},
		"key_file missing":       {loki.TLS{CertFile: client.CertFile, KeyFile: missing}, "sink.loki.tls.key_file: cannot read " + missing},
		"cert_file not PEM":      {loki.TLS{CertFile: garbage, KeyFile: client.KeyFile}, "sink.loki.tls.cert_file " + garbage + " holds no PEM certificate"},
		"key_file a certificate": {loki.TLS{CertFile: client.CertFile, KeyFile: client.CertFile}, "sink.loki.tls.key_file " + client.CertFile + " holds no PEM private key"},
		"key of another cert": {loki.TLS{CertFile: client.CertFile, KeyFile: stranger.KeyFile},
			"sink.loki.tls.cert_file " + client.CertFile + " and key_file " + stranger.KeyFile + " are not a certificate and its private key"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := loki.New(loki.Config{URL: "https://loki.example/loki/api/v1/push", TLS: tc.tls})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v; want %q", err, tc.want)
			}
		})
	}
}

// TestPushHonoursTheProxyVariables: the transport sends the push through
// HTTP_PROXY (Go reads the proxy variables once per process, so the push
// runs in a child process with them set).
func TestPushHonoursTheProxyVariables(t *testing.T) {
	if os.Getenv("SF2LOKI_TEST_PROXY_CHILD") == "1" {
		s := newSink(t, "http://loki.invalid:3100/loki/api/v1/push", func(c *loki.Config) { c.Attempts = 1 })
		if err := s.Push(t.Context(), batch(1)); err != nil {
			t.Fatal(err)
		}
		return
	}
	var mu sync.Mutex
	var seen []string
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.String())
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	defer proxy.Close()
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestPushHonoursTheProxyVariables$", "-test.count=1")
	cmd.Env = append(os.Environ(), "SF2LOKI_TEST_PROXY_CHILD=1", "HTTP_PROXY="+proxy.URL, "http_proxy="+proxy.URL, "NO_PROXY=", "no_proxy=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("the push through the proxy failed: %v\n%s", err, out)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 || seen[0] != "POST http://loki.invalid:3100/loki/api/v1/push" {
		t.Fatalf("the proxy saw %q", seen)
	}
}

// TestExtraHeaders: the headers sf2loki owns are refused (Authorization
// only with a token or a URL user, X-Scope-OrgID only with a tenant), as
// are malformed names and values; a proxy that quotes a header's value back
// in a refusal gets it redacted from the error and the logs.
func TestExtraHeaders(t *testing.T) {
	const url = "http://127.0.0.1:1/loki/api/v1/push"
	for _, tc := range []struct {
		name   string
		cfg    loki.Config
		header string
		want   string // "" when accepted
	}{
		{"content type", loki.Config{}, "content-type", "set by sf2loki from sink.loki.encoding"},
		{"content encoding", loki.Config{}, "Content-Encoding", "set by sf2loki from sink.loki.encoding"},
		{"host", loki.Config{}, "Host", "set by the HTTP client"},
		{"authorization without a token", loki.Config{}, "Authorization", ""},
		{"authorization with a token", loki.Config{AuthToken: "t0ken-abc"}, "authorization", "set by sf2loki from sink.loki.auth_token"},
		{"authorization with a url user", loki.Config{URL: "http://u:p@127.0.0.1:1/push"}, "Authorization", "set by sf2loki from sink.loki.auth_token"},
		{"tenant header without a tenant", loki.Config{}, "X-Scope-OrgID", ""},
		{"tenant header with a tenant", loki.Config{TenantID: "acme"}, "x-scope-orgid", "the tenant is sink.loki.tenant_id"},
		{"tenant header with a tenant and a token", loki.Config{TenantID: "acme", AuthToken: "t0ken-abc"}, "X-Scope-OrgID", "the tenant is sink.loki.tenant_id"},
		{"a name with a space", loki.Config{}, "X Api", "is not a header name"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.cfg.URL = cmp.Or(tc.cfg.URL, url)
			tc.cfg.Headers = map[string]string{tc.header: "v4lue-of-the-header"}
			_, err := loki.New(tc.cfg)
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), "sink.loki.headers."+tc.header+": ") || !strings.Contains(err.Error(), tc.want)):
				t.Fatalf("New: %v; want %q", err, tc.want)
			case err != nil && strings.Contains(err.Error(), "v4lue"):
				t.Fatalf("the error quotes the value: %v", err)
			}
		})
	}
	if _, err := loki.New(loki.Config{URL: url, Headers: map[string]string{"X-Key": "line\r\nX-Injected: 1"}}); err == nil ||
		!strings.Contains(err.Error(), "control character") || strings.Contains(err.Error(), "Injected") {
		t.Fatalf("a value with a line break: %v", err)
	}

	const key = "gw-key-5f1d2c9a8b7e"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusForbidden)
		_, _ = w.Write([]byte("bad key " + r.Header.Get("X-Api-Key") + " and " + r.Header.Get("Authorization")))
	}))
	defer srv.Close()
	logs := &bytes.Buffer{}
	s := newSink(t, srv.URL, func(c *loki.Config) {
		c.Attempts, c.Logger = 1, slog.New(slog.NewTextHandler(logs, nil))
		c.Headers = map[string]string{"X-Api-Key": key, "Authorization": "Bearer " + key + "-2"}
	})
	err := s.Push(t.Context(), batch(2))
	if err == nil {
		t.Fatal("a refused push succeeded")
	}
	for _, text := range []string{err.Error(), logs.String(), s.Stats.Rejecting()} {
		if strings.Contains(text, key) {
			t.Fatalf("a header value leaked into:\n%s", text)
		}
	}
}
