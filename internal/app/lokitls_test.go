package app

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/ports/porttest"
	"github.com/sf2loki/sf2loki/internal/testenv"
)

// TestLokiOverMutualTLSThroughTheWiring: sink.loki.tls and sink.loki.headers
// reach the sink the daemon pushes through (a Loki that requires a client
// certificate gets the entries, the header with them), and doctor's push
// goes over the same TLS: it passes, and fails saying what to set without
// the client certificate. insecure_skip_verify warns at start. The header
// values are redacted from the logs.
func TestLokiOverMutualTLSThroughTheWiring(t *testing.T) {
	ca := testenv.NewCA(t, "test-ca")
	client := ca.Client(t, "sf2loki-client")
	var mu sync.Mutex
	var pushes, clients, keys []string
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		pushes = append(pushes, r.URL.Path)
		clients = append(clients, r.TLS.PeerCertificates[0].Subject.CommonName)
		keys = append(keys, r.Header.Get("X-Api-Key"))
		mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{ca.Server(t, "loki", "127.0.0.1").TLS}, ClientAuth: tls.RequireAndVerifyClientCert,
		ClientCAs: ca.Pool(), MinVersion: tls.VersionTLS12}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	defer srv.Close()

	const key = "gw-key-8c1f2a9e77d0"
	cfg := testConfig(config.CoordinateNoop)
	cfg.Sources.Synthetic.Rate = 100
	cfg.Sink.Loki.URL = srv.URL + "/loki/api/v1/push"
	cfg.Sink.Loki.TLS = config.LokiTLS{CAFile: ca.File, CertFile: client.CertFile, KeyFile: client.KeyFile}
	cfg.Sink.Loki.Headers = map[string]string{"x-api-key": key}
	cfg.Sink.Loki.Batch.MaxWait = 20 * time.Millisecond
	var logs syncBuffer
	logger := redactLogger(slog.New(slog.NewTextHandler(&logs, nil)), cfg)
	d, cleanup, err := Build(t.Context(), cfg, Overrides{StateStore: porttest.NewMemoryCAS("state"), Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		n := len(pushes)
		mu.Unlock()
		if n >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no push arrived over mutual TLS; logs:\n%s", logs.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	logger.Info("the gateway key is " + key)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if slices.ContainsFunc(clients, func(c string) bool { return c != "sf2loki-client" }) || slices.ContainsFunc(keys, func(k string) bool { return k != key }) {
		t.Fatalf("client certificates %q, keys %q", clients, keys)
	}
	mu.Unlock()
	if strings.Contains(logs.String(), key) || strings.Contains(logs.String(), "level=WARN") {
		t.Fatalf("a header value leaked into the logs, or a warning:\n%s", logs.String())
	}

	if c := checkLoki(t.Context(), cfg); c.Status != Pass {
		t.Fatalf("doctor over mutual TLS: %+v", c)
	}
	noCert := *cfg
	noCert.Sink.Loki.TLS = config.LokiTLS{CAFile: ca.File}
	if c := checkLoki(t.Context(), &noCert); c.Status != Fail || !strings.Contains(c.Detail, "set sink.loki.tls.cert_file and key_file") {
		t.Fatalf("doctor without the client certificate: %+v", c)
	}

	insecure := *cfg
	insecure.Sink.Loki.TLS = config.LokiTLS{CertFile: client.CertFile, KeyFile: client.KeyFile, InsecureSkipVerify: true}
	var warned bytes.Buffer
	_, cleanup2, err := Build(t.Context(), &insecure, Overrides{StateStore: porttest.NewMemoryCAS("state"), Logger: slog.New(slog.NewTextHandler(&warned, nil))})
	if err != nil {
		t.Fatal(err)
	}
	cleanup2()
	if !strings.Contains(warned.String(), "level=WARN") || !strings.Contains(warned.String(), "anyone on the network path can read and forge") {
		t.Fatalf("insecure_skip_verify did not warn at start:\n%s", warned.String())
	}
}

// TestCheckRefusesLokiTLSAndHeaderMistakes: check exits 2 naming the key
// for a TLS file it cannot use, half a client certificate, tls settings on
// an http url and a header sf2loki owns; it warns about
// insecure_skip_verify.
func TestCheckRefusesLokiTLSAndHeaderMistakes(t *testing.T) {
	onlyEnv(t, nil)
	ca := testenv.NewCA(t, "ca")
	client := ca.Client(t, "client")
	missing := filepath.Join(t.TempDir(), "missing.pem")
	sink := func(url, more string) string {
		return "state: {file: {path: " + filepath.Join(t.TempDir(), "state.json") + "}}\nsources: {synthetic: {rate: 10}}\n" +
			"sink: {loki: {url: '" + url + "', " + more + "}}\n"
	}
	const https = "https://loki.example/loki/api/v1/push"
	for name, tc := range map[string]struct{ yaml, want string }{
		"ca_file unreadable": {sink(https, "tls: {ca_file: "+missing+"}"), "sink.loki.tls.ca_file: " + missing + " does not exist"},
		"ca_file a key":      {sink(https, "tls: {ca_file: "+client.KeyFile+"}"), "sink.loki.tls.ca_file " + client.KeyFile + " holds no PEM certificate"},
		"key of another certificate": {sink(https, "tls: {cert_file: "+client.CertFile+", key_file: "+ca.Server(t, "s", "x").KeyFile+"}"),
			"are not a certificate and its private key"},
		"cert_file alone":     {sink(https, "tls: {cert_file: "+client.CertFile+"}"), "sink.loki.tls.key_file: required with sink.loki.tls.cert_file"},
		"tls on http":         {sink("http://loki:3100/loki/api/v1/push", "tls: {ca_file: "+ca.File+"}"), "sink.loki.tls: set, but sink.loki.url http://loki:3100/loki/api/v1/push is http://"},
		"content-type header": {sink(https, "headers: {Content-Type: text/plain}"), "sink.loki.headers.content-type: set by sf2loki from sink.loki.encoding"},
		"tenant header":       {sink(https, "tenant_id: acme, headers: {X-Scope-OrgID: other}"), "sink.loki.headers.x-scope-orgid: the tenant is sink.loki.tenant_id"},
	} {
		t.Run(name, func(t *testing.T) {
			out, err := runCommand(t, "check", "--config", writeConfig(t, tc.yaml))
			var exit *ExitError
			if !errors.As(err, &exit) || exit.Code != ExitInvalidConfig || !strings.Contains(out, tc.want) {
				t.Fatalf("check: %v, want exit 2 and %q:\n%s", err, tc.want, out)
			}
		})
	}
	out, err := runCommand(t, "check", "--config", writeConfig(t, sink(https, "tls: {insecure_skip_verify: true}, headers: {X-Api-Key: k}")))
	if err != nil || !strings.Contains(out, "warning: sink.loki.tls.insecure_skip_verify is true") || !strings.Contains(out, "configuration is valid") {
		t.Fatalf("check with insecure_skip_verify: %v\n%s", err, out)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
