package cli

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/sf2loki/sf2loki/internal/app"
	"github.com/sf2loki/sf2loki/internal/testenv"
)

// runCommand runs the command tree with args and returns stdout+stderr.
func runCommand(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := NewRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.Execute()
	if err != nil {
		out.WriteString(err.Error())
	}
	return out.String(), err
}

// manifest decodes the documents of a file under deploy/kubernetes.
func manifest(t *testing.T, name string) []map[string]any {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "deploy", "kubernetes", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var docs []map[string]any
	dec := yaml.NewDecoder(f)
	for {
		var d map[string]any
		if err := dec.Decode(&d); err != nil {
			break
		}
		docs = append(docs, d)
	}
	return docs
}

// serviceLinkEnv is what kubelet puts into a pod's environment for svc (a
// Service object) with cluster IP ip, as pkg/kubelet/envvars does.
func serviceLinkEnv(t *testing.T, svc map[string]any, ip string) map[string]string {
	t.Helper()
	meta, _ := svc["metadata"].(map[string]any)
	spec, _ := svc["spec"].(map[string]any)
	ports, _ := spec["ports"].([]any)
	name, _ := meta["name"].(string)
	if name == "" || len(ports) == 0 {
		t.Fatalf("not a Service with ports: %v", svc)
	}
	prefix := strings.ToUpper(strings.ReplaceAll(name, "-", "_"))
	env := map[string]string{prefix + "_SERVICE_HOST": ip}
	for i, p := range ports {
		pm, _ := p.(map[string]any)
		port := fmt.Sprint(pm["port"])
		proto := "TCP"
		if s, _ := pm["protocol"].(string); s != "" {
			proto = s
		}
		url := strings.ToLower(proto) + "://" + net.JoinHostPort(ip, port)
		if i == 0 {
			env[prefix+"_SERVICE_PORT"] = port
			env[prefix+"_PORT"] = url
		}
		if pn, _ := pm["name"].(string); pn != "" {
			env[prefix+"_SERVICE_PORT_"+strings.ToUpper(strings.ReplaceAll(pn, "-", "_"))] = port
		}
		pp := prefix + "_PORT_" + port + "_" + proto
		env[pp], env[pp+"_PROTO"], env[pp+"_PORT"], env[pp+"_ADDR"] = url, strings.ToLower(proto), port, ip
	}
	return env
}

// TestCheckWithKubernetesServiceLinks runs check with the configuration of
// deploy/kubernetes and exactly the variables kubelet gives a pod for the
// Service sf2loki there (SF2LOKI_SERVICE_HOST, SF2LOKI_PORT_8080_TCP, …):
// they are not configuration, and check (like run) exits 0.
func TestCheckWithKubernetesServiceLinks(t *testing.T) {
	var cfg string
	env := map[string]string{}
	for _, d := range append(manifest(t, "configmap.yaml"), manifest(t, "service.yaml")...) {
		switch d["kind"] {
		case "ConfigMap":
			cfg, _ = d["data"].(map[string]any)["config.yaml"].(string)
		case "Service":
			for k, v := range serviceLinkEnv(t, d, "10.96.0.10") {
				env[k] = v
			}
		}
	}
	if cfg == "" || env["SF2LOKI_SERVICE_HOST"] != "10.96.0.10" || env["SF2LOKI_SERVICE_PORT_HTTP"] != "8080" ||
		env["SF2LOKI_PORT_8080_TCP_ADDR"] != "10.96.0.10" || len(env) != 8 {
		t.Fatalf("deploy/kubernetes: config %q, service links %v", cfg, env)
	}
	// The Deployment's own variable (from the downward API).
	env["SF2LOKI_COORDINATE__K8S_LEASE__IDENTITY"] = "sf2loki-5d8c7b9f4-x2x7q"
	testenv.OnlyEnv(t, env)
	t.Setenv("HOME", t.TempDir())
	out, err := runCommand(t, "check", "--config", testenv.WriteConfig(t, cfg))
	if err != nil || !strings.Contains(out, "configuration is valid: coordinate.type k8s_lease") {
		t.Fatalf("check with the service links of the Service sf2loki: %v\n%s", err, out)
	}
}

// TestCheckExitsTwoOnWhatRunCannotSurvive: every configuration here passed
// check and then broke run. check exits 2 naming the key.
func TestCheckExitsTwoOnWhatRunCannotSurvive(t *testing.T) {
	testenv.OnlyEnv(t, nil)
	t.Setenv("HOME", t.TempDir())
	dir := t.TempDir()
	t.Chdir(dir)
	// sink enables the synthetic source into a Loki at url, with more
	// sink.loki keys.
	sink := func(url, more string) string {
		return fmt.Sprintf("sources: {synthetic: {rate: 10}}\nsink: {loki: {url: %q%s}}\n", url, more)
	}
	for name, tc := range map[string]struct{ yaml, want string }{
		"lease and state through endpoint spelling": {
			"coordinate: {type: s3_lease, s3_lease: {bucket: b, key: k, region: r, endpoint_url: 'http://minio:9000'}}\n" +
				"state: {store: s3, s3: {bucket: b, key: k, region: r, endpoint_url: 'http://minio:9000/'}}\n",
			"coordinate.s3_lease.key: the lease and the checkpoint document are the same object"},
		"lease and state through a relative path": {
			// Both relative to the configuration file's directory.
			"coordinate: {type: file_lease, file_lease: {path: ./sub/../state.json}}\nstate: {file: {path: state.json}}\n",
			"coordinate.file_lease.path: the lease and the checkpoint document are the same object"},
		"nanosecond ttl": {"coordinate: {type: file_lease, file_lease: {path: l, ttl: 30, renew_interval: 10}}\nstate: {file: {path: s}}\n",
			"coordinate.file_lease.ttl: 30 has no unit; write 30s"},
		"nanosecond renew_interval": {"coordinate: {type: file_lease, file_lease: {path: l, ttl: 30, renew_interval: 10}}\nstate: {file: {path: s}}\n",
			"coordinate.file_lease.renew_interval: 10 has no unit; write 10s"},
		"queue_entries max int64": {sink("http://loki:3100/loki/api/v1/push", ", batch: {queue_entries: 9223372036854775807}"),
			"sink.loki.batch.queue_entries: must be at most 1000000"},
		"queue_entries 4e9": {"sink: {loki: {batch: {queue_entries: 4000000000}}}\n",
			"sink.loki.batch.queue_entries: must be at most 1000000, got 4000000000"},
		"loki url garbage":        {sink("ht!tp://::::/push", ""), `sink.loki.url: "ht!tp://::::/push" is not a URL`},
		"loki url without scheme": {sink("127.0.0.1:3100/loki/api/v1/push", ""), `sink.loki.url: "127.0.0.1:3100/loki/api/v1/push" has no scheme`},
		"a decode error hides nothing": {"coordinate: {type: file_lease, file_lease: {ttl: 5x}}\nstate: {file: {path: ''}}\nservce: {}\n",
			`coordinate.file_lease.ttl: "5x" is not a duration`},
		"a value only a constructor refuses": {sink("http://loki:3100/loki/api/v1/push", ", auth_token_file: "+dir+"/missing"),
			"sink.loki.auth_token_file"},
	} {
		t.Run(name, func(t *testing.T) {
			out, err := runCommand(t, "check", "--config", testenv.WriteConfig(t, tc.yaml))
			var exit *app.ExitError
			if !errors.As(err, &exit) || exit.Code != app.ExitInvalidConfig || !strings.Contains(out, tc.want) {
				t.Fatalf("check: %v, want exit 2 and %q:\n%s", err, tc.want, out)
			}
		})
	}
	// Every problem at once: the malformed duration, the unknown key and
	// the missing path together.
	out, _ := runCommand(t, "check", "--config", testenv.WriteConfig(t, "coordinate: {type: file_lease, file_lease: {ttl: 5x}}\nstate: {file: {path: ''}}\nservce: {}\n"))
	for _, want := range []string{"coordinate.file_lease.ttl", "servce: unknown key", "state.file.path: required"} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
}

// TestCheckTouchesNothing: check builds the graph run builds without
// creating the lease or state files (or their directory), taking their
// locks, or listening on service.health_addr.
func TestCheckTouchesNothing(t *testing.T) {
	testenv.OnlyEnv(t, nil)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	dir := filepath.Join(t.TempDir(), "ha")
	for _, cfg := range []string{
		fmt.Sprintf("coordinate: {type: file_lease, file_lease: {path: %s/leader.lease}}\nstate: {file: {path: %s/state.json}}\n", dir, dir),
		fmt.Sprintf("state: {file: {path: %s/state.json}}\n", dir),
	} {
		cfg += "service: {health_addr: '" + busy.Addr().String() + "'}\nsources: {synthetic: {rate: 5}}\nsink: {loki: {url: 'http://127.0.0.1:1/push'}}\n"
		if out, err := runCommand(t, "check", "--config", testenv.WriteConfig(t, cfg)); err != nil || !strings.Contains(out, "configuration is valid") {
			t.Fatalf("check: %v\n%s", err, out)
		}
		if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("check created %s (%v)", dir, err)
		}
	}
}

// TestRunSaysWhatToDoWhenTheStateFileCannotBeLocked: without --config the
// defaults keep state in /var/lib/sf2loki; when that (or the configured
// directory) is missing, run names the key and says how to set it.
func TestRunSaysWhatToDoWhenTheStateFileCannotBeLocked(t *testing.T) {
	state := filepath.Join(t.TempDir(), "missing", "state.json")
	testenv.OnlyEnv(t, map[string]string{"SF2LOKI_STATE__FILE__PATH": state, "SF2LOKI_SERVICE__HEALTH_ADDR": "127.0.0.1:0"})
	out, err := runCommand(t, "run")
	if err == nil {
		t.Fatal("run started without its state directory")
	}
	for _, want := range []string{
		state + ".instance.lock",
		"state.file.path is " + state + ": its directory must exist and be writable by this user; set state.file.path (or SF2LOKI_STATE__FILE__PATH)",
		"or pass --config",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	cfg := testenv.WriteConfig(t, "state: {file: {path: "+strconv.Quote(state)+"}}\n")
	testenv.OnlyEnv(t, map[string]string{"SF2LOKI_SERVICE__HEALTH_ADDR": "127.0.0.1:0"})
	if out, _ := runCommand(t, "run", "--config", cfg); !strings.Contains(out, "set state.file.path") || strings.Contains(out, "--config") {
		t.Errorf("with --config:\n%s", out)
	}
}

// run with no source says so after its first line ("sf2loki starting"),
// where a reader of the log looks for what the daemon does.
func TestRunWarnsOfNoSourceAfterItsFirstLine(t *testing.T) {
	state := filepath.Join(t.TempDir(), "state.json")
	testenv.OnlyEnv(t, map[string]string{"SF2LOKI_STATE__FILE__PATH": state, "SF2LOKI_SERVICE__HEALTH_ADDR": "127.0.0.1:0"})
	root := NewRootCommand()
	var out testenv.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs([]string{"run"})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	const warning = "no source is enabled: the leader will hold the lease and ship nothing"
	for !strings.Contains(out.String(), warning) {
		select {
		case err := <-done:
			cancel()
			t.Fatalf("run stopped before warning: %v\n%s", err, out.String())
		case <-time.After(10 * time.Millisecond):
		}
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("run after its context ended: %v", err)
	}
	log := out.String()
	if start, warn := strings.Index(log, "sf2loki starting"), strings.Index(log, warning); start < 0 || warn < start {
		t.Errorf("the no-source warning comes before the first line (at %d, \"sf2loki starting\" at %d):\n%s", warn, start, log)
	}
}

// TestCheckRefusesLokiTLSAndHeaderMistakes: check exits 2 naming the key
// for a TLS file it cannot use, half a client certificate, tls settings on
// an http url and a header sf2loki owns; it warns about
// insecure_skip_verify.
func TestCheckRefusesLokiTLSAndHeaderMistakes(t *testing.T) {
	testenv.OnlyEnv(t, nil)
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
			out, err := runCommand(t, "check", "--config", testenv.WriteConfig(t, tc.yaml))
			var exit *app.ExitError
			if !errors.As(err, &exit) || exit.Code != app.ExitInvalidConfig || !strings.Contains(out, tc.want) {
				t.Fatalf("check: %v, want exit 2 and %q:\n%s", err, tc.want, out)
			}
		})
	}
	out, err := runCommand(t, "check", "--config", testenv.WriteConfig(t, sink(https, "tls: {insecure_skip_verify: true}, headers: {X-Api-Key: k}")))
	if err != nil || !strings.Contains(out, "warning: sink.loki.tls.insecure_skip_verify is true") || !strings.Contains(out, "configuration is valid") {
		t.Fatalf("check with insecure_skip_verify: %v\n%s", err, out)
	}
}

// check makes no request: with service.telemetry on, building and stopping
// the daemon's graph pushes nothing (it would carry the credentials).
func TestCheckDoesNotPushMetrics(t *testing.T) {
	rcv := testenv.NewOTLPReceiver(t, "/v1/metrics", nil)
	dir := t.TempDir()
	path := filepath.Join(dir, "sf2loki.yaml")
	cfg := "state: {file: {path: " + filepath.Join(dir, "state.json") + "}}\n" +
		"sources: {synthetic: {rate: 1}}\nsink: {loki: {url: http://127.0.0.1:1/loki/api/v1/push, tenant_id: t, auth_token: s3cret-loki}}\n" +
		"service: {telemetry: {enabled: true, endpoint: " + rcv.URL() + ", export_interval: 1s}}\n"
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	root := NewRootCommand()
	var out, errb bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errb)
	root.SetArgs([]string{"check", "--config", path})
	if err := root.Execute(); err != nil {
		t.Fatalf("check: %v\n%s", err, errb.String())
	}
	if n := len(rcv.Requests()); n != 0 {
		t.Fatalf("check pushed %d metrics requests", n)
	}
}
