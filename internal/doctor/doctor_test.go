package doctor

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sf2loki/sf2loki/internal/adapters/k8s"
	"github.com/sf2loki/sf2loki/internal/app"
	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/internal/testenv/fakepubsub"
	"github.com/sf2loki/sf2loki/internal/testenv/fakesf"
	"github.com/sf2loki/sf2loki/internal/testenv/faultproxy"
)

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

func check(r Report, name string) Check {
	for _, c := range r.Checks {
		if c.Name == name && c.Status != Warn {
			return c
		}
	}
	return Check{}
}

func s3Config(bucket, endpoint string) string {
	return fmt.Sprintf(`coordinate:
  type: s3_lease
  s3_lease: {bucket: %s, key: ha/leader.lease, endpoint_url: %s}
state:
  store: s3
  s3: {bucket: %s, key: ha/state.json, endpoint_url: %s}
`, bucket, endpoint, bucket, endpoint)
}

// liveUntouched returns a check that the live objects are byte-for-byte and
// version-for-version what they were.
func liveUntouched(t *testing.T, stores ...ports.ObjectCAS) func() {
	t.Helper()
	before := make([]ports.Object, len(stores))
	for i, s := range stores {
		obj, err := s.Get(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		before[i] = obj
	}
	return func() {
		t.Helper()
		for i, s := range stores {
			obj, err := s.Get(t.Context())
			if err != nil || !bytes.Equal(obj.Data, before[i].Data) || obj.Version != before[i].Version {
				t.Fatalf("the doctor changed the live object %s: %v", s, err)
			}
		}
	}
}

func TestDoctorS3(t *testing.T) {
	srv := testenv.StartS3(t)
	bucket := srv.NewBucket(t)
	testenv.S3Env(t)
	ctx := t.Context()
	cfg, _, err := loadFile(t, s3Config(bucket, srv.Endpoint))
	if err != nil {
		t.Fatal(err)
	}
	lease, _ := app.NewS3(ctx, cfg.Coordinate.S3Lease.S3Object, app.LeaseMaxSize)
	state, _ := app.NewS3(ctx, cfg.State.S3, 0)
	if _, err := lease.Put(ctx, []byte(`{"holder":"x"}`), ports.CreateOnly()); err != nil {
		t.Fatal(err)
	}
	if _, err := state.Put(ctx, []byte(`{"k":"v"}`), ports.CreateOnly()); err != nil {
		t.Fatal(err)
	}
	untouched := liveUntouched(t, lease, state)

	t.Run("writable bucket passes", func(t *testing.T) {
		r := Doctor(ctx, testenv.WriteConfig(t, s3Config(bucket, srv.Endpoint)))
		if r.ExitCode != 0 || check(r, "state").Status != Pass || check(r, "coordinator").Status != Pass {
			t.Fatalf("%+v", r)
		}
		untouched()
	})
	t.Run("read-only credential fails naming the permission", func(t *testing.T) {
		p := faultproxy.New(t, srv.Endpoint)
		p.Add(faultproxy.Rule{Action: faultproxy.Respond, Status: 403,
			Body:  `<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>`,
			Match: func(r *http.Request) bool { return r.Method == http.MethodPut || r.Method == http.MethodDelete }})
		r := Doctor(ctx, testenv.WriteConfig(t, s3Config(bucket, p.URL)))
		if r.ExitCode != 1 || check(r, "state").Status != Fail || !strings.Contains(check(r, "state").Detail, "s3:PutObject") {
			t.Fatalf("%+v", r)
		}
		untouched()
	})
	t.Run("an endpoint that ignores conditional writes fails", func(t *testing.T) {
		// What a store that ignores If-None-Match/If-Match looks like to a
		// client: the write it had to refuse "succeeds".
		p := faultproxy.New(t, srv.Endpoint)
		p.Add(faultproxy.Rule{Action: faultproxy.Respond, Status: 200, Header: http.Header{"ETag": {`"ignored"`}},
			Match: func(r *http.Request) bool {
				return r.Method == http.MethodPut && r.Header.Get("If-None-Match") != "" && strings.Contains(r.URL.Path, ProbeSuffix) &&
					probeCreated(srv, bucket, r.URL.Path)
			}})
		r := Doctor(ctx, testenv.WriteConfig(t, s3Config(bucket, p.URL)))
		if r.ExitCode != 1 || !strings.Contains(check(r, "state").Detail, "ignores conditional writes") {
			t.Fatalf("%+v", r)
		}
		untouched()
	})
	t.Run("501 fails the same way", func(t *testing.T) {
		p := faultproxy.New(t, srv.Endpoint)
		p.Add(faultproxy.Rule{Action: faultproxy.Respond, Status: 501, Body: `<Error><Code>NotImplemented</Code></Error>`,
			Match: func(r *http.Request) bool { return r.Header.Get("If-None-Match") != "" }})
		r := Doctor(ctx, testenv.WriteConfig(t, s3Config(bucket, p.URL)))
		if r.ExitCode != 1 || !strings.Contains(check(r, "coordinator").Detail, "ignores conditional writes") {
			t.Fatalf("%+v", r)
		}
	})
	t.Run("missing bucket fails saying so", func(t *testing.T) {
		r := Doctor(ctx, testenv.WriteConfig(t, s3Config("no-such-bucket", srv.Endpoint)))
		if r.ExitCode != 1 || !strings.Contains(check(r, "state").Detail, "does not exist") {
			t.Fatalf("%+v", r)
		}
	})
}

// probeCreated reports whether the probe object at path already exists
// (so a create-only write must be refused).
func probeCreated(srv *testenv.S3Server, bucket, path string) bool {
	key := strings.TrimPrefix(path, "/"+bucket+"/")
	_, err := srv.Client().HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: &bucket, Key: &key})
	return err == nil
}

func TestDoctorGCSIgnoringEndpoint(t *testing.T) {
	srv := testenv.StartGCS(t)
	bucket := srv.NewBucket(t)
	cfg := fmt.Sprintf("coordinate: {type: gcs_lease, gcs_lease: {bucket: %s, object_name: ha/leader.lease}}\nstate: {store: gcs, gcs: {bucket: %s, object_name: ha/state.json}}\n", bucket, bucket)
	t.Setenv("STORAGE_EMULATOR_HOST", strings.TrimPrefix(srv.URL, "http://"))
	if r := Doctor(t.Context(), testenv.WriteConfig(t, cfg)); r.ExitCode != 0 {
		t.Fatalf("writable bucket: %+v", r)
	}
	// A proxy that strips the generation preconditions: a store that
	// ignores them.
	stripper := httptestStripper(t, srv.URL)
	t.Setenv("STORAGE_EMULATOR_HOST", strings.TrimPrefix(stripper, "http://"))
	r := Doctor(t.Context(), testenv.WriteConfig(t, cfg))
	if r.ExitCode != 1 || !strings.Contains(check(r, "coordinator").Detail, "ignores conditional writes") {
		t.Fatalf("%+v", r)
	}
}

func TestDoctorEachCoordinatorReachesItsOwnProbe(t *testing.T) {
	s3srv, gcssrv := testenv.StartS3(t), testenv.StartGCS(t)
	testenv.S3Env(t)
	t.Setenv("STORAGE_EMULATOR_HOST", strings.TrimPrefix(gcssrv.URL, "http://"))
	kube := testenv.StartKube(t)
	t.Cleanup(kube.Stop)
	dir := t.TempDir()
	b3, bg := s3srv.NewBucket(t), gcssrv.NewBucket(t)
	ns := kube.NewNamespace(t)
	state := fmt.Sprintf("state: {file: {path: %s/state.json}}\n", dir)
	for ct, tc := range map[string]struct{ yaml, status, want string }{
		"noop":       {state, Skip, "noop"},
		"file_lease": {fmt.Sprintf("coordinate: {type: file_lease, file_lease: {path: %s/leader.lease}}\n", dir) + state, Pass, "file://" + dir + "/leader.lease"},
		"s3_lease":   {fmt.Sprintf("coordinate: {type: s3_lease, s3_lease: {bucket: %s, endpoint_url: %s}}\n", b3, s3srv.Endpoint) + state, Pass, "s3://" + b3},
		"gcs_lease":  {fmt.Sprintf("coordinate: {type: gcs_lease, gcs_lease: {bucket: %s}}\n", bg) + state, Pass, "gs://" + bg},
		"k8s_lease": {fmt.Sprintf("coordinate: {type: k8s_lease, k8s_lease: {namespace: %s, kubeconfig: %s}}\n", ns,
			kube.Kubeconfig(t, testenv.KubeAdminToken)) + state, Pass, "k8s://" + ns + "/sf2loki-leader"},
	} {
		t.Run(ct, func(t *testing.T) {
			r := Doctor(t.Context(), testenv.WriteConfig(t, tc.yaml))
			c := check(r, "coordinator")
			if c.Status != tc.status || !strings.Contains(c.Detail, tc.want) {
				t.Fatalf("coordinator check %+v, want %s mentioning %s", c, tc.status, tc.want)
			}
			if check(r, "state").Status != Pass {
				t.Fatalf("state check %+v", check(r, "state"))
			}
			warned := false
			for _, c := range r.Checks {
				warned = warned || (c.Status == Warn && strings.Contains(c.Detail, "state.store file"))
			}
			if risky := ct == "k8s_lease" || ct == "s3_lease" || ct == "gcs_lease"; warned != risky {
				t.Fatalf("pairing warning shown = %v, want %v: %+v", warned, risky, r.Checks)
			}
		})
	}
	t.Run("k8s role without patch fails naming the verb", func(t *testing.T) {
		ns := kube.NewNamespace(t)
		kube.GrantLeases(t, ns, "get", "create")
		admin := testenv.WriteConfig(t, fmt.Sprintf("coordinate: {type: k8s_lease, k8s_lease: {namespace: %s, kubeconfig: %s}}\n", ns, kube.Kubeconfig(t, testenv.KubeAdminToken))+state)
		if r := Doctor(t.Context(), admin); r.ExitCode != 0 {
			t.Fatalf("admin: %+v", r)
		}
		// Make the Lease exist, so the limited user must be able to patch it.
		lease, _ := k8sStore(t, kube, ns)
		if _, err := lease.Put(t.Context(), []byte(`{"holder":""}`), ports.CreateOnly()); err != nil {
			t.Fatal(err)
		}
		limited := testenv.WriteConfig(t, fmt.Sprintf("coordinate: {type: k8s_lease, k8s_lease: {namespace: %s, kubeconfig: %s}}\n", ns, kube.Kubeconfig(t, testenv.KubeLimitedToken))+state)
		r := Doctor(t.Context(), limited)
		c := check(r, "coordinator")
		if r.ExitCode != 1 || c.Status != Fail || !strings.Contains(c.Detail, "patch of lease") || !strings.Contains(c.Detail, "leases in "+ns) {
			t.Fatalf("%+v", r)
		}
	})
}

// TestDoctorK8sWithoutWatchWarns: without the watch verb the lease still
// works (standbys poll): doctor passes with a warning naming the verb.
func TestDoctorK8sWithoutWatchWarns(t *testing.T) {
	kube := testenv.StartKube(t)
	t.Cleanup(kube.Stop)
	state := fmt.Sprintf("state: {file: {path: %s/state.json}}\n", t.TempDir())
	ns := kube.NewNamespace(t)
	kube.GrantLeases(t, ns, "get", "create", "patch")
	limited := testenv.WriteConfig(t, fmt.Sprintf("coordinate: {type: k8s_lease, k8s_lease: {namespace: %s, kubeconfig: %s}}\n", ns, kube.Kubeconfig(t, testenv.KubeLimitedToken))+state)
	r := Doctor(t.Context(), limited)
	if c := check(r, "coordinator"); r.ExitCode != 0 || c.Status != Pass || strings.Contains(c.Detail, "watch allowed") {
		t.Fatalf("without watch: %+v, want exit 0 and the coordinator passing", r)
	}
	warned := false
	for _, c := range r.Checks {
		warned = warned || c.Name == "coordinator" && c.Status == Warn && strings.Contains(c.Detail, "grant the watch verb on leases") && strings.Contains(c.Detail, "poll")
	}
	if !warned {
		t.Fatalf("without watch: %+v, want a coordinator warning saying to grant watch", r.Checks)
	}
}

func TestDoctorInvalidConfigAndJSON(t *testing.T) {
	r := Doctor(t.Context(), testenv.WriteConfig(t, "coordinate: {type: s3_lease}\n"))
	if r.ExitCode != 2 || r.Checks[0].Status != Fail || r.Checks[1].Status != Skip || r.Checks[2].Status != Skip || r.Checks[3].Status != Skip {
		t.Fatalf("%+v", r)
	}
	var buf bytes.Buffer
	if err := r.Write(&buf, true); err != nil {
		t.Fatal(err)
	}
	var back Report
	if err := json.Unmarshal(buf.Bytes(), &back); err != nil || back.ExitCode != 2 || len(back.Checks) != 7 {
		t.Fatalf("JSON %s: %v", buf.String(), err)
	}
	buf.Reset()
	_ = r.Write(&buf, false)
	if !strings.Contains(buf.String(), "0 passed, 0 warned, 1 failed, 6 skipped") {
		t.Fatalf("table:\n%s", buf.String())
	}
}

func loadFile(t *testing.T, yaml string) (*config.Config, []string, error) {
	t.Helper()
	return config.Load(testenv.WriteConfig(t, yaml))
}

// httptestStripper is a proxy that removes GCS generation preconditions.
func httptestStripper(t *testing.T, target string) string {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	rp := &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(u)
		q := r.Out.URL.Query()
		q.Del("ifGenerationMatch")
		r.Out.URL.RawQuery = q.Encode()
	}}
	srv := httptest.NewServer(rp)
	t.Cleanup(srv.Close)
	return srv.URL
}

func k8sStore(t *testing.T, kube *testenv.KubeServer, ns string) (*k8s.Store, error) {
	t.Helper()
	return k8s.New(k8s.Config{Namespace: ns, Name: "sf2loki-leader", REST: kube.REST(testenv.KubeAdminToken)})
}

func TestDoctorLokiPushesWithStructuredMetadata(t *testing.T) {
	logs := testenv.StartLogs(t)
	dir := t.TempDir()
	cfg := func(url string) string {
		return fmt.Sprintf("state: {file: {path: %s/state.json}}\nsink: {loki: {url: %s}}\n", dir, url)
	}
	r := Doctor(t.Context(), testenv.WriteConfig(t, cfg(logs.PushURL)))
	if c := check(r, "loki"); c.Status != Pass || r.ExitCode != 0 {
		t.Fatalf("loki check against VictoriaLogs: %+v", r.Checks)
	}
	if rows := logs.Query(t, `{source="sf2loki-doctor"} | fields doctor_check`); len(rows) != 1 || rows[0]["doctor_check"] != "structured_metadata" {
		t.Fatalf("the doctor's entry read back: %v", rows)
	}
	// A backend without structured metadata answers 400.
	noMeta := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "structured metadata is not enabled", http.StatusBadRequest)
	}))
	defer noMeta.Close()
	r = Doctor(t.Context(), testenv.WriteConfig(t, cfg(noMeta.URL)))
	if c := check(r, "loki"); c.Status != Fail || !strings.Contains(c.Detail, `answered 400 "structured metadata is not enabled"`) || r.ExitCode != 1 {
		t.Fatalf("loki check against a backend rejecting metadata: %+v", r.Checks)
	}
	// A wrong path: the actual answer, not a guess at the schema.
	r = Doctor(t.Context(), testenv.WriteConfig(t, cfg(logs.URL+"/loki/api/v1/push")))
	if c := check(r, "loki"); c.Status != Fail || !strings.Contains(c.Detail, "answered 400") || !strings.Contains(c.Detail, "unsupported path") {
		t.Fatalf("loki check against a wrong path: %+v", r.Checks)
	}
	if c := check(Doctor(t.Context(), testenv.WriteConfig(t, fmt.Sprintf("state: {file: {path: %s/s2.json}}\n", dir))), "loki"); c.Status != Skip {
		t.Fatalf("no sink configured: %+v", c)
	}
}

func TestDoctorAuth(t *testing.T) {
	var mints int
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/services/oauth2/token":
			_ = r.ParseForm()
			if r.PostForm.Get("client_secret") != "s3cret" {
				w.WriteHeader(http.StatusBadRequest)
				_, _ = io.WriteString(w, `{"error":"invalid_client","error_description":"invalid client credentials"}`)
				return
			}
			mints++
			_, _ = fmt.Fprintf(w, `{"access_token":"tok","instance_url":"http://%s"}`, r.Host)
		case "/services/oauth2/userinfo":
			_, _ = io.WriteString(w, `{"organization_id":"00DORG"}`)
		}
	}))
	defer srv.Close()
	dir := t.TempDir()
	secret := filepath.Join(dir, "secret")
	cfg := func(secretValue string) string {
		if err := os.WriteFile(secret, []byte(secretValue+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		return testenv.WriteConfig(t, fmt.Sprintf("state: {file: {path: %s/s.json}}\nsalesforce: {auth_mode: client_credentials, login_url: %q, client_id: ck, client_secret_file: %s}\n",
			dir, srv.URL, secret))
	}
	if c := check(Doctor(t.Context(), cfg("s3cret")), "auth"); c.Status != Pass || !strings.Contains(c.Detail, "org 00DORG") || mints != 1 {
		t.Fatalf("auth with a good secret: %+v (%d mints)", c, mints)
	}
	r := Doctor(t.Context(), cfg("wrong"))
	if c := check(r, "auth"); c.Status != Fail || !strings.Contains(c.Detail, "invalid client credentials") || r.ExitCode != 1 {
		t.Fatalf("auth with a bad secret: %+v", c)
	}
	if c := check(Doctor(t.Context(), cfg(" ")), "auth"); c.Status != Fail || !strings.Contains(c.Detail, "blank secret is a missing secret") {
		t.Fatalf("auth with a blank secret file: %+v", c)
	}
	if c := check(Doctor(t.Context(), testenv.WriteConfig(t, fmt.Sprintf("state: {file: {path: %s/s.json}}\n", dir))), "auth"); c.Status != Skip {
		t.Fatalf("auth without salesforce: %+v", c)
	}
}

func TestDoctorPermissionsAndEntitlement(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query().Get("q")
		switch {
		case r.URL.Path == "/services/oauth2/token":
			_, _ = fmt.Fprintf(w, `{"access_token":"tok","instance_url":"http://%s"}`, r.Host)
		case r.URL.Path == "/services/oauth2/userinfo":
			_, _ = io.WriteString(w, `{"organization_id":"00DORG"}`)
		case strings.HasSuffix(r.URL.Path, "/sobjects/EventLogFile/describe"):
			_, _ = io.WriteString(w, `{"name":"EventLogFile","queryable":true}`)
		case strings.Contains(q, "FROM Forbidden"):
			w.WriteHeader(http.StatusBadRequest)
			_, _ = io.WriteString(w, `[{"errorCode":"INVALID_TYPE","message":"sObject type 'Forbidden' is not supported."}]`)
		case strings.Contains(q, "GROUP BY EventType"):
			_, _ = io.WriteString(w, `{"done":true,"records":[{"EventType":"API"},{"EventType":"Login"}]}`)
		case strings.HasPrefix(q, "SELECT Id FROM"):
			_, _ = io.WriteString(w, `{"done":true,"records":[]}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	dir := t.TempDir()
	cfg := func(object string) string {
		return testenv.WriteConfig(t, fmt.Sprintf(`state: {file: {path: %s/s.json}}
salesforce: {auth_mode: client_credentials, login_url: %q, client_id: ck, client_secret: x}
sources:
  eventlog_objects: {objects: [{name: %s}]}
  eventlogfile: {event_types: [API, ReportExport]}
sink: {loki: {url: %s/push}}
`, dir, srv.URL, object, srv.URL))
	}
	r := Doctor(t.Context(), cfg("LoginEvent"))
	if c := check(r, "permissions"); c.Status != Pass || c.Detail != "queryable: LoginEvent, EventLogFile" {
		t.Fatalf("permissions: %+v", c)
	}
	var ent Check
	for _, c := range r.Checks {
		if c.Name == "entitlement" {
			ent = c
		}
	}
	if ent.Status != Warn || !strings.Contains(ent.Detail, "ReportExport") || strings.Contains(ent.Detail, "API") {
		t.Fatalf("entitlement: %+v", ent)
	}
	r = Doctor(t.Context(), cfg("Forbidden"))
	if c := check(r, "permissions"); c.Status != Fail || !strings.Contains(c.Detail, "query Forbidden") || r.ExitCode != 1 {
		t.Fatalf("permissions on a forbidden object: %+v", c)
	}
	if c := check(r, "entitlement"); c.Status != Skip {
		t.Fatalf("entitlement after a failed permissions check: %+v", c)
	}
}

func TestDoctorPubSubTopics(t *testing.T) {
	ps := fakepubsub.Start(t)
	ps.AddTopic(fakepubsub.LoginTopic, fakepubsub.LoginEventStreamSchema)
	ps.AddTopic("/event/ApiEventStream", fakepubsub.LoginEventStreamSchema)
	ps.Deny("/event/ApiEventStream")
	org := &fakesf.Org{SObjects: []string{"LoginEventStream", "ApiEventStream", "Account"}}
	web := httptest.NewServer(org)
	defer web.Close()
	dir := t.TempDir()
	cfg := func(topics string) string {
		return testenv.WriteConfig(t, fmt.Sprintf(`state: {file: {path: %s/s.json}}
salesforce: {auth_mode: client_credentials, login_url: %q, client_id: ck, client_secret: x, org_id: 00D000000000001}
sources: {pubsub: {topics: %s, endpoint: %q, plaintext: true}}
sink: {loki: {url: %s/push}}
`, dir, web.URL, topics, ps.Addr, web.URL))
	}
	r := Doctor(t.Context(), cfg(`['*', /data/NoSuchChangeEvent]`))
	login, api, missing := check(r, "pubsub:/event/LoginEventStream"), check(r, "pubsub:/event/ApiEventStream"), check(r, "pubsub:/data/NoSuchChangeEvent")
	if login.Status != Pass || api.Status != Fail || !strings.Contains(api.Detail, "cannot subscribe") ||
		missing.Status != Fail || !strings.Contains(missing.Detail, "NotFound") || r.ExitCode != 1 {
		t.Fatalf("pubsub rows: %+v / %+v / %+v", login, api, missing)
	}
	r = Doctor(t.Context(), testenv.WriteConfig(t, fmt.Sprintf(`state: {file: {path: %s/s.json}}
salesforce: {auth_mode: client_credentials, login_url: %q, client_id: ck, client_secret: x}
sources: {pubsub: {topics: ['*'], endpoint: %q, plaintext: true}}
sink: {loki: {url: %s/push}}
`, dir, "http://127.0.0.1:1", ps.Addr, web.URL)))
	if c := check(r, "pubsub"); c.Status != Skip {
		t.Fatalf("pubsub without a token: %+v", c)
	}
}

// rows returns every row named name.
func rows(r Report, name string) []Check {
	var out []Check
	for _, c := range r.Checks {
		if c.Name == name {
			out = append(out, c)
		}
	}
	return out
}

// The doctor decodes the live lease and checkpoint document with the
// daemon's decoders, instead of calling readable bytes good.
func TestDoctorDecodesTheLiveDocuments(t *testing.T) {
	write := func(t *testing.T, lease, state []byte) (string, string, string) {
		t.Helper()
		dir := t.TempDir()
		lp, sp := filepath.Join(dir, "leader.lease"), filepath.Join(dir, "state.json")
		for p, b := range map[string][]byte{lp: lease, sp: state} {
			if b != nil {
				if err := os.WriteFile(p, b, 0o600); err != nil {
					t.Fatal(err)
				}
			}
		}
		cfg := testenv.WriteConfig(t, fmt.Sprintf("coordinate: {type: file_lease, file_lease: {path: %s, ttl: 30s, renew_interval: 10s}}\nstate: {file: {path: %s}}\n", lp, sp))
		return cfg, lp, sp
	}
	garbage := bytes.Repeat([]byte("\x00garbage"), 300/8)
	held := func(ttl string) []byte {
		return domain.LeaseRecord{Holder: "old-host-1", Epoch: 7, TTL: ttl}.Encode()
	}
	t.Run("a corrupt checkpoint document fails with the repair", func(t *testing.T) {
		cfg, _, sp := write(t, held("30s"), garbage)
		r := Doctor(t.Context(), cfg)
		c := check(r, "state")
		if c.Status != Fail || r.ExitCode != 1 || !strings.Contains(c.Detail, "is corrupt") ||
			!strings.Contains(c.Detail, "mv "+sp+" "+sp+".corrupt") || !strings.Contains(c.Detail, "sf2loki state import --if-empty") {
			t.Fatalf("state row %+v", c)
		}
		if c := check(r, "coordinator"); c.Status != Pass || !strings.Contains(c.Detail, `held by "old-host-1" (epoch 7)`) {
			t.Fatalf("coordinator row %+v", c)
		}
	})
	t.Run("a corrupt lease fails with the repair", func(t *testing.T) {
		cfg, lp, _ := write(t, []byte(`{"holder":7}`), []byte(`{}`))
		r := Doctor(t.Context(), cfg)
		if c := check(r, "coordinator"); c.Status != Fail || !strings.Contains(c.Detail, "is corrupt") || !strings.Contains(c.Detail, "rm "+lp) {
			t.Fatalf("coordinator row %+v", c)
		}
	})
	t.Run("an oversized lease fails as corrupt without being read whole", func(t *testing.T) {
		cfg, _, _ := write(t, bytes.Repeat([]byte("x"), MaxLeaseDocumentBytes+1), nil)
		r := Doctor(t.Context(), cfg)
		if c := check(r, "coordinator"); c.Status != Fail || !strings.Contains(c.Detail, "is corrupt") || !strings.Contains(c.Detail, "the cap is") {
			t.Fatalf("coordinator row %+v", c)
		}
	})
	t.Run("an absurd ttl warns naming the holder", func(t *testing.T) {
		cfg, lp, _ := write(t, held("1000h0m0s"), []byte(`{"eventlog_objects:LoginEvent":"abc","pubsub:/event/LoginEventStream":"AAAAAAAAAAE="}`))
		r := Doctor(t.Context(), cfg)
		var warned, stateWarned bool
		for _, c := range rows(r, "coordinator") {
			warned = warned || c.Status == Warn && strings.Contains(c.Detail, `"old-host-1"`) && strings.Contains(c.Detail, "1000h") && strings.Contains(c.Detail, "rm "+lp)
		}
		for _, c := range rows(r, "state") {
			stateWarned = stateWarned || c.Status == Warn && strings.Contains(c.Detail, "eventlog_objects:LoginEvent") && strings.Contains(c.Detail, "sf2loki state set")
		}
		if !warned || !stateWarned || r.ExitCode != 0 {
			t.Fatalf("want a coordinator WARN naming old-host-1 and a state WARN for the unreadable position: %+v", r.Checks)
		}
		if c := check(r, "state"); c.Status != Pass || !strings.Contains(c.Detail, "holds 2 checkpoints") {
			t.Fatalf("state row %+v", c)
		}
		// Ten times the ttl is not absurd.
		cfg, _, _ = write(t, held("5m0s"), nil)
		for _, c := range Doctor(t.Context(), cfg).Checks {
			if c.Status == Warn && c.Name == "coordinator" {
				t.Fatalf("warned at 10x the ttl: %+v", c)
			}
		}
	})
}

func TestDoctorCoordinatorFailsOnAPermissionError(t *testing.T) {
	s3srv, gcssrv := testenv.StartS3(t), testenv.StartGCS(t)
	testenv.S3Env(t)
	dir := t.TempDir()
	state := fmt.Sprintf("state: {file: {path: %s/state.json}}\n", dir)
	deny := func(status int, body string) faultproxy.Rule {
		return faultproxy.Rule{Action: faultproxy.Respond, Status: status, Body: body,
			Match: func(r *http.Request) bool { return r.Method == http.MethodPut || r.Method == http.MethodPost }}
	}
	t.Run("s3_lease", func(t *testing.T) {
		p := faultproxy.New(t, s3srv.Endpoint)
		p.Add(deny(403, `<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>`))
		r := Doctor(t.Context(), testenv.WriteConfig(t, fmt.Sprintf("coordinate: {type: s3_lease, s3_lease: {bucket: %s, endpoint_url: %s}}\n", s3srv.NewBucket(t), p.URL)+state))
		if c := check(r, "coordinator"); c.Status != Fail || r.ExitCode != 1 || !strings.Contains(c.Detail, "grant s3:PutObject") {
			t.Fatalf("coordinator row %+v", c)
		}
	})
	t.Run("gcs_lease", func(t *testing.T) {
		p := faultproxy.New(t, gcssrv.URL)
		p.Add(deny(403, `{"error":{"code":403,"message":"denied","errors":[{"reason":"forbidden","message":"denied"}]}}`))
		t.Setenv("STORAGE_EMULATOR_HOST", strings.TrimPrefix(p.URL, "http://"))
		r := Doctor(t.Context(), testenv.WriteConfig(t, fmt.Sprintf("coordinate: {type: gcs_lease, gcs_lease: {bucket: %s}}\n", gcssrv.NewBucket(t))+state))
		if c := check(r, "coordinator"); c.Status != Fail || r.ExitCode != 1 || !strings.Contains(c.Detail, "grant storage.objects.create") {
			t.Fatalf("coordinator row %+v", c)
		}
	})
}

// S3 answers 403 for an absent object when s3:ListBucket is missing: the
// hint names it, not only s3:GetObject.
func TestDoctorForbiddenReadNamesListBucket(t *testing.T) {
	srv := testenv.StartS3(t)
	testenv.S3Env(t)
	p := faultproxy.New(t, srv.Endpoint)
	p.Add(faultproxy.Rule{Action: faultproxy.Respond, Status: 403, Body: `<Error><Code>AccessDenied</Code><Message>Access Denied</Message></Error>`,
		Match: func(r *http.Request) bool {
			return r.Method == http.MethodGet && !strings.Contains(r.URL.Path, ProbeSuffix)
		}})
	r := Doctor(t.Context(), testenv.WriteConfig(t, s3Config(srv.NewBucket(t), p.URL)))
	if c := check(r, "state"); c.Status != Fail || !strings.Contains(c.Detail, "grant s3:ListBucket") || !strings.Contains(c.Detail, "ha/state.json") {
		t.Fatalf("state row %+v", c)
	}
}

// counting wraps a client and counts its Close calls.
type counting struct {
	io.Closer
	closed *atomic.Int64
}

func (c counting) Close() error { c.closed.Add(1); return c.Closer.Close() }

func TestDoctorClosesWhatItOpens(t *testing.T) {
	srv := testenv.StartGCS(t)
	bucket := srv.NewBucket(t)
	t.Setenv("STORAGE_EMULATOR_HOST", strings.TrimPrefix(srv.URL, "http://"))
	sf := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = fmt.Fprintf(w, `{"access_token":"tok","instance_url":"http://%s","organization_id":"00DORG"}`, r.Host)
	}))
	defer sf.Close()
	var opened, closed atomic.Int64
	doctorOpened = func(c io.Closer) io.Closer { opened.Add(1); return counting{c, &closed} }
	defer func() { doctorOpened = nil }()
	r := Doctor(t.Context(), testenv.WriteConfig(t, fmt.Sprintf(`coordinate: {type: gcs_lease, gcs_lease: {bucket: %s}}
state: {store: gcs, gcs: {bucket: %s}}
salesforce: {auth_mode: client_credentials, login_url: %q, client_id: ck, client_secret: secret-value}
`, bucket, bucket, sf.URL)))
	if r.ExitCode != 0 {
		t.Fatalf("%+v", r.Checks)
	}
	// Two GCS stores per probe (live and probe object), the token source.
	if opened.Load() < 5 || closed.Load() != opened.Load() {
		t.Fatalf("opened %d clients, closed %d", opened.Load(), closed.Load())
	}
}

// A token endpoint that echoes the request, and a Loki URL with a
// password, must not put either secret into the doctor's report or the
// daemon's log.
func TestSecretsNeverReachTheReportOrTheLog(t *testing.T) {
	const secret = "Sup3r+Secret/Value=="
	const lokiPassword = "loki-pa55word"
	echo := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		w.WriteHeader(http.StatusBadRequest)
		form, _ := url.ParseQuery(string(body))
		_, _ = fmt.Fprintf(w, `{"error":"invalid_client","error_description":"got %s (%s)"}`, body, form.Get("client_secret"))
	}))
	defer echo.Close()
	down := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusBadGateway) }))
	defer down.Close()
	dir := t.TempDir()
	secretFile := filepath.Join(dir, "secret")
	if err := os.WriteFile(secretFile, []byte(secret+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	lokiURL := strings.Replace(down.URL, "http://", "http://user:"+lokiPassword+"@", 1)
	path := testenv.WriteConfig(t, fmt.Sprintf(`state: {file: {path: %s/state.json}}
salesforce: {auth_mode: client_credentials, login_url: %q, client_id: ck, client_secret_file: %s}
sink: {loki: {url: %q, timeout: 2s}}
`, dir, echo.URL, secretFile, lokiURL))
	leaks := func(where, text string) {
		t.Helper()
		for _, s := range []string{secret, url.QueryEscape(secret), lokiPassword} {
			if strings.Contains(text, s) {
				t.Fatalf("%s shows the secret %q:\n%s", where, s, text)
			}
		}
	}
	r := Doctor(t.Context(), path)
	if c := check(r, "auth"); c.Status != Fail || !strings.Contains(c.Detail, "[REDACTED]") {
		t.Fatalf("auth row %+v", c)
	}
	if c := check(r, "loki"); c.Status != Fail {
		t.Fatalf("loki row %+v", c)
	}
	var report bytes.Buffer
	if err := r.Write(&report, false); err != nil {
		t.Fatal(err)
	}
	leaks("the report", report.String())

	// The log: the daemon's logger wrapped with the configuration's secrets.
	cfg, _, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	log := app.RedactLogger(app.NewLogger(&logs, "info", "json"), cfg)
	raw := fmt.Errorf("token endpoint answered: client_secret=%s", url.QueryEscape(secret))
	log.Error("mint failed "+secret, "error", raw, "url", lokiURL, "detail", []string{secret})
	log.With("secret", secret).WithGroup("g").Info("x", "k", secret)
	leaks("the log", logs.String())
	if strings.Count(logs.String(), "[REDACTED]") < 6 {
		t.Fatalf("the log does not show where the secrets were removed:\n%s", logs.String())
	}
	// An error a command prints outside the logger.
	wrapped := fmt.Errorf("run: %w", raw)
	if err := app.RedactErr(cfg, wrapped); !errors.Is(err, raw) || !strings.Contains(err.Error(), "[REDACTED]") {
		t.Fatalf("redactErr: %v", err)
	} else {
		leaks("a returned error", err.Error())
	}
}

// With orgs, every org's checkpoint document (and lease, and credentials)
// is checked, each check named after its org.
func TestDoctorChecksEveryOrg(t *testing.T) {
	dir := t.TempDir()
	r := Doctor(t.Context(), testenv.WriteConfig(t, fmt.Sprintf(`coordinate: {type: file_lease, file_lease: {path: %s/leader.lease}}
state: {file: {path: %s/state.json}}
orgs:
  - name: prod
  - name: sandbox
`, dir, dir)))
	named := map[string]bool{}
	for _, c := range r.Checks {
		if c.Status == Fail {
			t.Errorf("%s failed: %s", c.Name, c.Detail)
		}
		named[c.Name] = true
	}
	for _, want := range []string{"state [org prod]", "state [org sandbox]", "coordinator [org sandbox]", "auth [org sandbox]"} {
		if !named[want] {
			t.Errorf("no check %q among %v", want, named)
		}
	}
}

// A Loki nobody listens for is named as unreachable, with the cause, not
// as a failed push.
func TestDoctorLokiUnreachableNamesTheCause(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	cfg, _, err := loadFile(t, fmt.Sprintf("state: {file: {path: %s/s.json}}\nsink: {loki: {url: http://%s/loki/api/v1/push}}\n", t.TempDir(), addr))
	if err != nil {
		t.Fatal(err)
	}
	c := checkLoki(t.Context(), cfg)
	if c.Status != Fail || !strings.HasPrefix(c.Detail, "cannot reach Loki at http://"+addr+"/loki/api/v1/push: the connection to "+addr+" was refused") ||
		!strings.Contains(c.Detail, "check sink.loki.url") {
		t.Errorf("loki row: %+v", c)
	}
}

// TestDoctorLokiRowsNameTheRightFix: a password in the URL, however short,
// is not printed; a Loki whose certificate this host does not trust was
// reached, and its row names the TLS fix, not the network.
func TestDoctorLokiRowsNameTheRightFix(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", testenv.FreePort(t))
	cfg, _, err := loadFile(t, fmt.Sprintf("state: {file: {path: %s/s.json}}\nsink: {loki: {url: 'http://u:admin@%s/loki/api/v1/push'}}\n", t.TempDir(), addr))
	if err != nil {
		t.Fatal(err)
	}
	if c := checkLoki(t.Context(), cfg); c.Status != Fail || strings.Contains(c.Detail, "admin") {
		t.Errorf("loki row shows the password: %+v", c)
	}
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusNoContent) }))
	defer srv.Close()
	cfg, _, err = loadFile(t, fmt.Sprintf("state: {file: {path: %s/s.json}}\nsink: {loki: {url: %s/loki/api/v1/push}}\n", t.TempDir(), srv.URL))
	if err != nil {
		t.Fatal(err)
	}
	if c := checkLoki(t.Context(), cfg); c.Status != Fail || strings.HasPrefix(c.Detail, "cannot reach") || !strings.Contains(c.Detail, "ca_file") {
		t.Errorf("loki row for an untrusted certificate: %+v", c)
	}
}
