package cli

import (
	"bytes"
	"context"
	"crypto/rsa"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"
	"gopkg.in/yaml.v3"

	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/doctor"
	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/internal/testenv/fakepubsub"
	"github.com/sf2loki/sf2loki/internal/testenv/fakesf"
)

// quickStartHeading is the README section whose first yaml block is the
// single-org example the quick start runs.
const quickStartHeading = "## Quick start: one org"

// quickStartSecrets is where the README's example keeps its key and token.
const quickStartSecrets = "/etc/sf2loki/"

// readmeQuickStart returns the YAML of the README's quick start.
func readmeQuickStart(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\n"+quickStartHeading+"\n")
	if !ok {
		t.Fatalf("README.md has no %q section", quickStartHeading)
	}
	if next := strings.Index(section, "\n## "); next >= 0 {
		section = section[:next]
	}
	_, block, ok := strings.Cut(section, "```yaml\n")
	if !ok {
		t.Fatalf("README.md %q has no yaml block", quickStartHeading)
	}
	block, _, ok = strings.Cut(block, "```")
	if !ok {
		t.Fatalf("README.md %q: the yaml block is not closed", quickStartHeading)
	}
	return block
}

// quickStartPlaceholders writes what the example's files point at into a
// temporary directory (an RSA key, a Loki token), rewrites the example's
// /etc/sf2loki/ paths to it, and sets the environment variable the example
// names. It returns the configuration and the key.
func quickStartPlaceholders(t *testing.T, yamlText string) (cfg string, key *rsa.PrivateKey) {
	t.Helper()
	dir := t.TempDir()
	if !strings.Contains(yamlText, quickStartSecrets+"sf2loki.key") || !strings.Contains(yamlText, quickStartSecrets+"loki-token") {
		t.Fatalf("the quick start no longer reads %ssf2loki.key and %sloki-token: update this test\n%s", quickStartSecrets, quickStartSecrets, yamlText)
	}
	key, keyPEM := testenv.RSAKey(t)
	for name, body := range map[string][]byte{"sf2loki.key": keyPEM, "loki-token": []byte("glc_placeholder\n")} {
		if err := os.WriteFile(filepath.Join(dir, name), body, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("SF_CLIENT_ID", "3MVG9quickstartconsumerkey")
	return strings.ReplaceAll(yamlText, quickStartSecrets, dir+"/"), key
}

// TestReadmeQuickStartPassesCheck: the README's single-org example, with
// its key file, token file and environment variable in place, passes
// `sf2loki check` without a warning, as the quick start says.
func TestReadmeQuickStartPassesCheck(t *testing.T) {
	yamlText, _ := quickStartPlaceholders(t, readmeQuickStart(t))
	path := testenv.WriteConfig(t, yamlText)
	if _, warnings, err := config.Load(path); err != nil || len(warnings) > 0 {
		t.Fatalf("the quick start configuration loads with error %v and warnings %q\n%s", err, warnings, yamlText)
	}
	cmd := NewRootCommand()
	var out, errOut bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	cmd.SetArgs([]string{"check", "--config", path})
	if err := cmd.Execute(); err != nil {
		t.Fatalf("sf2loki check: %v\nstdout: %s\nstderr: %s", err, out.String(), errOut.String())
	}
	if want := "configuration is valid: coordinate.type s3_lease, state.store s3\n"; out.String() != want {
		t.Fatalf("sf2loki check printed %q, want %q (the README quotes it)", out.String(), want)
	}
}

// setPath sets a key of a decoded YAML document, creating the maps on the
// way.
func setPath(doc map[string]any, value any, path ...string) {
	m := doc
	for _, k := range path[:len(path)-1] {
		next, ok := m[k].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[k] = next
		}
		m = next
	}
	m[path[len(path)-1]] = value
}

// TestReadmeQuickStartDoctorAndRun follows the README's quick start past
// check: `sf2loki doctor`, then `sf2loki run`, on the README's example
// against the project's fakes: a Salesforce org that checks JWT bearer
// grants as strictly as Salesforce (signature, issuer, audience, the
// pre-authorised user), publishes EventLogFile files and answers userinfo
// and the limits resource; a Pub/Sub API with both topics; an S3 store
// enforcing conditional writes; a Loki. Only the endpoints change (the
// fakes listen on loopback). Every doctor row the guide quotes passes, and
// a login published on the stream reaches Loki with the labels the README's
// LogQL query selects.
func TestReadmeQuickStartDoctorAndRun(t *testing.T) {
	yamlText, key := quickStartPlaceholders(t, readmeQuickStart(t))
	var doc map[string]any
	if err := yaml.Unmarshal([]byte(yamlText), &doc); err != nil {
		t.Fatal(err)
	}
	username := doc["salesforce"].(map[string]any)["username"].(string)

	// Salesforce: the token endpoint and describe (Org, strict grants),
	// EventLogFile listings (ELFOrg), userinfo and limits (ApexOrg).
	org := &fakesf.Org{Grants: &fakesf.Grants{Key: &key.PublicKey, ClientID: "3MVG9quickstartconsumerkey", Username: username}}
	// Event Manager as the guide leaves it: streaming on for both streams.
	org.EventManager = fakesf.NewEventManager("LoginEventStream", "LogoutEventStream")
	org.AddRow("EventLogFile", "CreatedDate", map[string]any{"Id": "0AT000000000001AAA", "CreatedDate": "2026-11-28T02:00:00.000+0000"})
	elf := &fakesf.ELFOrg{}
	day := time.Now().UTC().Truncate(24 * time.Hour).Add(-24 * time.Hour)
	elf.AddFile(fakesf.ELFFile{ID: "0AT000000000001AAA", EventType: "API", Interval: "Daily", LogDate: day, CreatedDate: day.Add(26 * time.Hour), Body: fakesf.APIEventLogFile(3)})
	elf.AddFile(fakesf.ELFFile{ID: "0AT000000000002AAA", EventType: "Login", Interval: "Daily", LogDate: day, CreatedDate: day.Add(26 * time.Hour), Body: fakesf.LoginEventLogFile(3)})
	apex := &fakesf.ApexOrg{Limits: fakesf.DefaultLimits()}
	sf := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch p := r.URL.Path; {
		case p == "/services/oauth2/userinfo" || strings.HasPrefix(p, "/services/data/v60.0/limits"):
			apex.ServeHTTP(w, r)
		case strings.HasPrefix(p, "/services/data/v60.0/query"),
			strings.HasPrefix(p, "/services/data/v60.0/sobjects/EventLogFile/") && strings.HasSuffix(p, "/LogFile"):
			elf.ServeHTTP(w, r)
		default:
			org.ServeHTTP(w, r)
		}
	}))
	defer sf.Close()

	ps := fakepubsub.Start(t)
	for _, topic := range doc["sources"].(map[string]any)["pubsub"].(map[string]any)["topics"].([]any) {
		ps.AddTopic(topic.(string), fakepubsub.LoginEventStreamSchema)
	}

	s3srv := testenv.StartS3(t)
	testenv.S3Env(t)
	bucket := s3srv.NewBucket(t)

	var mu sync.Mutex
	var lokiAuth, lokiTenant string
	var pushed []string // the push bodies, decompressed
	loki := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err == nil {
			body, err = s2.Decode(nil, body)
		}
		mu.Lock()
		defer mu.Unlock()
		lokiAuth, lokiTenant = r.Header.Get("Authorization"), r.Header.Get("X-Scope-OrgID")
		if r.URL.Path != "/loki/api/v1/push" || err != nil {
			http.Error(w, fmt.Sprintf("not a push: %s %v", r.URL.Path, err), http.StatusBadRequest)
			return
		}
		pushed = append(pushed, string(body))
		w.WriteHeader(http.StatusNoContent)
	}))
	defer loki.Close()

	setPath(doc, sf.URL, "salesforce", "login_url")
	setPath(doc, ps.Addr, "sources", "pubsub", "endpoint")
	setPath(doc, true, "sources", "pubsub", "plaintext")
	for _, store := range [][]string{{"coordinate", "s3_lease"}, {"state", "s3"}} {
		setPath(doc, s3srv.Endpoint, append(store, "endpoint_url")...)
		setPath(doc, bucket, append(store, "bucket")...)
		setPath(doc, testenv.S3Region, append(store, "region")...)
	}
	setPath(doc, loki.URL+"/loki/api/v1/push", "sink", "loki", "url")
	setPath(doc, fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t)), "service", "health_addr")
	out, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	path := testenv.WriteConfig(t, string(out))

	r := doctor.Doctor(t.Context(), path)
	var table bytes.Buffer
	if err := r.Write(&table, false); err != nil {
		t.Fatal(err)
	}
	t.Logf("sf2loki doctor on the README quick start (endpoints on loopback fakes):\n%s", table.String())
	for _, c := range r.Checks {
		if c.Status == doctor.Fail {
			t.Errorf("%s FAIL: %s", c.Name, c.Detail)
		}
	}
	want := map[string]string{
		"config":      "coordinate.type s3_lease, state.store s3",
		"loki":        "pushed one entry with structured metadata to ",
		"state":       "conditional writes enforced on ",
		"coordinator": "conditional writes enforced on ",
		"auth":        "jwt_bearer token minted at " + sf.URL + " for " + sf.URL + ", org 00D000000000001EAA",
		"permissions": "queryable: EventLogFile",
		"entitlement": "2 event types have EventLogFile files",
		"limits":      "DailyApiRequests: 14998 of 15000 left",
	}
	for _, topic := range doc["sources"].(map[string]any)["pubsub"].(map[string]any)["topics"].([]any) {
		want["pubsub:"+topic.(string)] = "can subscribe (schema "
		want["streaming:"+topic.(string)] = "streaming is on in Event Manager"
	}
	for name, detail := range want {
		var c doctor.Check
		if i := slices.IndexFunc(r.Checks, func(c doctor.Check) bool { return c.Name == name && c.Status != doctor.Warn }); i >= 0 {
			c = r.Checks[i]
		}
		if c.Status != doctor.Pass || !strings.Contains(c.Detail, detail) {
			t.Errorf("doctor row %s: %s %q, want PASS with %q", name, c.Status, c.Detail, detail)
		}
	}
	if r.ExitCode != 0 {
		t.Errorf("doctor exit code %d, want 0", r.ExitCode)
	}
	for _, c := range r.Checks {
		if c.Status == doctor.Warn {
			t.Errorf("doctor row %s WARN on the guide's org: %s", c.Name, c.Detail)
		}
	}
	mu.Lock()
	if !strings.HasPrefix(lokiAuth, "Basic ") {
		t.Errorf("the doctor's push to Loki carried Authorization %q, want basic auth (basic_auth_user and auth_token_file)", lokiAuth)
	}
	t.Logf("the doctor's push carried Authorization %s…, X-Scope-OrgID %q", strings.SplitN(lokiAuth, " ", 2)[0], lokiTenant)
	mu.Unlock()
	if t.Failed() {
		return
	}

	// sf2loki run: the leader subscribes; a login published on the stream
	// reaches Loki as {event_type="LoginEventStream", job="sf2loki", source="pubsub"}.
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	root := NewRootCommand()
	var logs testenv.Buffer
	root.SetOut(&logs)
	root.SetErr(&logs)
	root.SetArgs([]string{"run", "--config", path})
	done := make(chan error, 1)
	go func() { done <- root.ExecuteContext(ctx) }()
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(2 * time.Minute); !ok(); time.Sleep(50 * time.Millisecond) {
			select {
			case err := <-done:
				t.Fatalf("sf2loki run ended (%v) before %s; its log:\n%s", err, what, logs.String())
			default:
			}
			if time.Now().After(deadline) {
				mu.Lock()
				t.Fatalf("no %s after 2 minutes; Loki received %q; the daemon's log:\n%s", what, pushed, logs.String())
			}
		}
	}
	waitFor("subscription to "+fakepubsub.LoginTopic, func() bool {
		for _, s := range ps.Subscriptions() {
			if s.Topic == fakepubsub.LoginTopic {
				return true
			}
		}
		return false
	})
	ps.Append(fakepubsub.LoginTopic, fakepubsub.LoginEvent(1, time.Now()))
	const stream = `{event_type="LoginEventStream",job="sf2loki",source="pubsub"}`
	waitFor("push of the login to Loki", func() bool {
		mu.Lock()
		defer mu.Unlock()
		for _, b := range pushed {
			if strings.Contains(b, stream) {
				return true
			}
		}
		return false
	})
	cancel()
	if err := <-done; err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("sf2loki run stopped with %v; its log:\n%s", err, logs.String())
	}
	t.Logf("sf2loki run pushed the login to the stream %s", stream)
}
