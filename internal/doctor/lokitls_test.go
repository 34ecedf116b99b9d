package doctor

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/app"
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
	cfg := testenv.Config(config.CoordinateNoop)
	cfg.Sources.Synthetic.Rate = 100
	cfg.Sink.Loki.URL = srv.URL + "/loki/api/v1/push"
	cfg.Sink.Loki.TLS = config.LokiTLS{CAFile: ca.File, CertFile: client.CertFile, KeyFile: client.KeyFile}
	cfg.Sink.Loki.Headers = map[string]string{"x-api-key": key}
	cfg.Sink.Loki.Batch.MaxWait = 20 * time.Millisecond
	var logs testenv.Buffer
	logger := app.RedactLogger(slog.New(slog.NewTextHandler(&logs, nil)), cfg)
	d, cleanup, err := app.Build(t.Context(), cfg, app.Overrides{StateStore: porttest.NewMemoryCAS("state"), Logger: logger})
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
	_, cleanup2, err := app.Build(t.Context(), &insecure, app.Overrides{StateStore: porttest.NewMemoryCAS("state"), Logger: slog.New(slog.NewTextHandler(&warned, nil))})
	if err != nil {
		t.Fatal(err)
	}
	cleanup2()
	if !strings.Contains(warned.String(), "level=WARN") || !strings.Contains(warned.String(), "anyone on the network path can read and forge") {
		t.Fatalf("insecure_skip_verify did not warn at start:\n%s", warned.String())
	}
}
