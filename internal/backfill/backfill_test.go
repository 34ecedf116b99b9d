package backfill_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/clock"
	"github.com/sf2loki/sf2loki/internal/adapters/file"
	"github.com/sf2loki/sf2loki/internal/app"
	"github.com/sf2loki/sf2loki/internal/backfill"
	"github.com/sf2loki/sf2loki/internal/cli"
	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/internal/testenv/fakesf"
)

// lokiRows records the rows of Loki JSON pushes, and can refuse them.
type lokiRows struct {
	mu     sync.Mutex
	rows   []lokiRow
	pushes int
	// refuse, if set, answers every push with this status and body.
	refuse     int
	refuseBody string
	// pushed, if set, is called after each accepted push.
	pushed func(n int)
}

type lokiRow struct {
	labels map[string]string
	time   time.Time
	fields map[string]string
}

func (l *lokiRows) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	l.mu.Lock()
	refuse, body := l.refuse, l.refuseBody
	l.mu.Unlock()
	if refuse != 0 {
		http.Error(w, body, refuse)
		return
	}
	streams, err := testenv.DecodeLokiPush(r)
	if err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	l.mu.Lock()
	n := l.pushes
	l.pushes++
	for _, s := range streams {
		for _, v := range s.Values {
			ns, _ := strconv.ParseInt(v[0].(string), 10, 64)
			var fields map[string]string
			_ = json.Unmarshal([]byte(v[1].(string)), &fields)
			l.rows = append(l.rows, lokiRow{labels: s.Stream, time: time.Unix(0, ns).UTC(), fields: fields})
		}
	}
	hook := l.pushed
	l.mu.Unlock()
	w.WriteHeader(http.StatusNoContent)
	if hook != nil {
		hook(n + 1)
	}
}

func (l *lokiRows) snapshot() []lokiRow {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.rows)
}

// byRequest counts the rows by REQUEST_ID.
func byRequest(rows []lokiRow) map[string]int {
	out := map[string]int{}
	for _, r := range rows {
		out[r.fields["REQUEST_ID"]]++
	}
	return out
}

// backfillDay is UTC midnight d days ago.
func backfillDay(d int) time.Time { return time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -d) }

// backfillBody is an EventLogFile of n rows of type typ on day, row i at
// i minutes past midnight, REQUEST_ID <prefix>-<i>.
func backfillBody(typ, prefix string, day time.Time, n int) string {
	var b strings.Builder
	b.WriteString("EVENT_TYPE,TIMESTAMP_DERIVED,REQUEST_ID,USER_ID\n")
	for i := range n {
		fmt.Fprintf(&b, "%s,%s,%s-%d,005%012d\n", typ, day.Add(time.Duration(i)*time.Minute).Format("2006-01-02T15:04:05.000Z"), prefix, i, i)
	}
	return b.String()
}

// backfillOrg has Daily API and Login files for days 5, 4 and 3 ago (rows
// per file: 30 and 5).
func backfillOrg() *fakesf.ELFOrg {
	org := &fakesf.ELFOrg{}
	for d := 5; d >= 3; d-- {
		day := backfillDay(d)
		org.AddFile(fakesf.ELFFile{ID: fmt.Sprintf("0ATa%d", d), EventType: "API", Interval: "Daily", LogDate: day,
			CreatedDate: day.Add(26 * time.Hour), Body: backfillBody("API", fmt.Sprintf("a%d", d), day, 30)})
		org.AddFile(fakesf.ELFFile{ID: fmt.Sprintf("0ATl%d", d), EventType: "Login", Interval: "Daily", LogDate: day,
			CreatedDate: day.Add(26 * time.Hour), Body: backfillBody("Login", fmt.Sprintf("l%d", d), day, 5)})
	}
	return org
}

// backfillEnv is an org, a Loki and a configuration.
type backfillEnv struct {
	org  *fakesf.ELFOrg
	loki *lokiRows
	dir  string
	cfg  string
}

// newBackfillEnv serves org; state is the state: section ("": a file in
// the env's directory).
func newBackfillEnv(t *testing.T, org *fakesf.ELFOrg, state string) *backfillEnv {
	t.Helper()
	sf := httptest.NewServer(org)
	t.Cleanup(sf.Close)
	l := &lokiRows{}
	srv := httptest.NewServer(l)
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	cfg := filepath.Join(dir, "sf2loki.yaml")
	if state == "" {
		state = fmt.Sprintf("{file: {path: %s/state.json}}", dir)
	}
	yaml := fmt.Sprintf(`state: %s
salesforce: {auth_mode: client_credentials, login_url: %q, client_id: ck, client_secret: s3cret}
sources: {eventlogfile: {event_types: [API, Login], sample: {API: 0.01}}}
sink: {loki: {url: %s/loki/api/v1/push, encoding: json, labels: {job: bf}, batch: {max_entries: 7}}}
`, state, sf.URL, srv.URL)
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return &backfillEnv{org: org, loki: l, dir: dir, cfg: cfg}
}

// backfill runs the command; it returns stdout, stderr and the exit code.
func (e *backfillEnv) backfill(ctx context.Context, args ...string) (stdout, stderr string, code int) {
	root := cli.NewRootCommand()
	var out, errOut bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&errOut)
	root.SetArgs(append([]string{"backfill", "--config", e.cfg}, args...))
	err := root.ExecuteContext(ctx)
	if err != nil {
		fmt.Fprintln(&errOut, "sf2loki:", err)
	}
	return out.String(), errOut.String(), app.ExitCode(err)
}

func (e *backfillEnv) stateDoc(t *testing.T) backfill.Doc {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(e.dir, "state.backfill.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc backfill.Doc
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return doc
}

func quickBackfill(t *testing.T) {
	t.Helper()
	t.Cleanup(backfill.SetWaits(10*time.Millisecond, 10*time.Millisecond))
}

// A backfill of three days and two types pushes every row once, at its own
// time, with the backfill label and the deployment's labels, unsampled; it
// writes its own state beside the checkpoint document and never the
// document. The same command again skips every file and pushes nothing.
func TestBackfillLoadsEveryRowOnceAndARerunSkipsThem(t *testing.T) {
	e := newBackfillEnv(t, backfillOrg(), "")
	daemonDoc := []byte(`{"eventlogfile:API":"{\\"last_created\\":\\"2026-03-01T00:00:00.000+0000\\",\\"ids\\":[]}"}`)
	if err := os.WriteFile(filepath.Join(e.dir, "state.json"), daemonDoc, 0o600); err != nil {
		t.Fatal(err)
	}
	since := backfillDay(6).Format(time.DateOnly)
	out, errOut, code := e.backfill(t.Context(), "--since", since)
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	t.Logf("first run:\n%s%s", errOut, out)
	rows := e.loki.snapshot()
	got := byRequest(rows)
	if len(rows) != 105 || len(got) != 105 {
		t.Fatalf("%d rows (%d distinct), want 3×(30+5) once each (sampling does not apply)", len(rows), len(got))
	}
	for _, r := range rows {
		want := map[string]string{"job": "bf", "source": "eventlogfile", "event_type": r.fields["EVENT_TYPE"], "backfill": "true"}
		if !mapsEqual(r.labels, want) {
			t.Fatalf("labels %v, want %v", r.labels, want)
		}
		if ts, _ := time.Parse(time.RFC3339Nano, r.fields["TIMESTAMP_DERIVED"]); !r.time.Equal(ts) {
			t.Fatalf("row %s at %s, want its TIMESTAMP_DERIVED %s", r.fields["REQUEST_ID"], r.time, ts)
		}
	}
	if doc := e.stateDoc(t); len(doc.Files) != 6 || doc.Files["0ATa4"].Rows != 30 || doc.Files["0ATl4"].EventType != "Login" {
		t.Fatalf("state %+v", doc)
	}
	if b, err := os.ReadFile(filepath.Join(e.dir, "state.json")); err != nil || !bytes.Equal(b, daemonDoc) {
		t.Fatalf("the daemon's checkpoint document changed: %s, %v", b, err)
	}
	if !strings.Contains(out, "backfill finished") || !strings.Contains(out, "6 files done, 0 skipped (done before), 0 failed, 0 left; 105 rows") {
		t.Fatalf("summary %q", out)
	}

	downloads := len(e.org.DownloadsSoFar())
	out, errOut, code = e.backfill(t.Context(), "--since", since)
	t.Logf("second run:\n%s%s", errOut, out)
	if code != 0 || len(e.loki.snapshot()) != 105 || len(e.org.DownloadsSoFar()) != downloads {
		t.Fatalf("re-run: exit %d, %d rows, %d downloads; want 0, nothing pushed or downloaded\n%s%s", code, len(e.loki.snapshot()),
			len(e.org.DownloadsSoFar())-downloads, out, errOut)
	}
	if !strings.Contains(errOut, "6 files listed: all 6 done before (skipped); nothing to do") || !strings.Contains(out, "0 files done, 6 skipped") {
		t.Fatalf("re-run output:\n%s%s", errOut, out)
	}

	// A Daily file regenerated in place (a later CreatedDate) is read again.
	day := backfillDay(4)
	e.org.AddFile(fakesf.ELFFile{ID: "0ATa4", EventType: "API", Interval: "Daily", LogDate: day, CreatedDate: day.Add(40 * time.Hour),
		Body: backfillBody("API", "a4", day, 31)})
	out, errOut, code = e.backfill(t.Context(), "--since", since, "--event-types", "API")
	if code != 0 || !strings.Contains(out, "1 files done, 2 skipped") || byRequest(e.loki.snapshot())["a4-30"] != 1 {
		t.Fatalf("regenerated file: exit %d\n%s%s", code, out, errOut)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// In the orgs form the entries carry the org's labels (the daemon's code
// adds them), the state lies beside the org's document, and --label sets
// the backfill label's value; --no-backfill-label drops it and warns.
func TestBackfillOrgLabelsAndLabelFlags(t *testing.T) {
	org := backfillOrg()
	sf := httptest.NewServer(org)
	defer sf.Close()
	l := &lokiRows{}
	srv := httptest.NewServer(l)
	defer srv.Close()
	dir := t.TempDir()
	cfg := filepath.Join(dir, "sf2loki.yaml")
	yaml := fmt.Sprintf(`state: {file: {path: %s/state.json}}
sink: {loki: {url: %s/loki/api/v1/push, encoding: json, labels: {job: bf}}}
orgs:
  - name: first
    salesforce: {auth_mode: client_credentials, login_url: %q, client_id: ck, client_secret: s, org_id: 00D000000000001AAA}
    sources: {synthetic: {rate: 1}}
  - name: acme
    salesforce: {auth_mode: client_credentials, login_url: %q, client_id: ck, client_secret: s, org_id: 00D000000000002AAA, environment: sandbox}
    sources: {eventlogfile: {event_types: [Login]}}
`, dir, srv.URL, sf.URL, sf.URL)
	if err := os.WriteFile(cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	e := &backfillEnv{org: org, loki: l, dir: dir, cfg: cfg}
	since := backfillDay(6).Format(time.DateOnly)
	if _, errOut, code := e.backfill(t.Context(), "--since", since); code != app.ExitInvalidConfig || !strings.Contains(errOut, "pass --org") {
		t.Fatalf("without --org: exit %d\n%s", code, errOut)
	}
	out, errOut, code := e.backfill(t.Context(), "--since", since, "--org", "acme", "--label", "backfill=2026-q4")
	if code != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	want := map[string]string{"job": "bf", "source": "eventlogfile", "event_type": "Login", "backfill": "2026-q4",
		"org": "acme", "environment": "sandbox", "sf_org_id": "00D000000000002AAA"}
	rows := l.snapshot()
	if len(rows) != 15 || !mapsEqual(rows[0].labels, want) {
		t.Fatalf("%d rows, labels %v; want 15 with %v", len(rows), rows[0].labels, want)
	}
	if _, err := os.Stat(filepath.Join(dir, "shards", "acme", "state.backfill.json")); err != nil {
		t.Fatalf("the org's backfill state: %v", err)
	}
	out, errOut, code = e.backfill(t.Context(), "--since", since, "--org", "acme", "--no-backfill-label",
		"--state", filepath.Join(dir, "other.json"))
	if code != 0 || !strings.Contains(errOut, "max_chunk_age/2") {
		t.Fatalf("--no-backfill-label: exit %d\n%s%s", code, out, errOut)
	}
	if rows := l.snapshot(); len(rows) != 30 || rows[29].labels[backfill.Label] != "" {
		t.Fatalf("%d rows, last labels %v: want 15 more without the backfill label", len(rows), rows[len(rows)-1].labels)
	}
}

// Flags and configuration that cannot work exit 2 before any request.
func TestBackfillUsageErrorsExit2(t *testing.T) {
	e := newBackfillEnv(t, backfillOrg(), "")
	since := backfillDay(6).Format(time.DateOnly)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "--since is required"},
		{[]string{"--since", "yesterday"}, "is not a date"},
		{[]string{"--since", since, "--until", since}, "is not before --until"},
		{[]string{"--since", since, "--interval", "Weekly"}, "is not auto, Hourly or Daily"},
		{[]string{"--since", since, "--event-types", "API;DROP"}, "is not an event type"},
		{[]string{"--since", since, "--concurrency", "17"}, "between 1 and 16"},
		{[]string{"--since", since, "--label", "team=sec"}, "backfill=VALUE"},
		{[]string{"--since", since, "--label", "backfill=x", "--no-backfill-label"}, "contradict"},
		{[]string{"--since", since, "--state", filepath.Join(e.dir, "state.json")}, "a file of the daemon"},
		{[]string{"--since", since, "--no-such-flag"}, "unknown flag"},
		{[]string{"--since", since, "extra"}, "takes no arguments"},
	} {
		_, errOut, code := e.backfill(t.Context(), tc.args...)
		if code != app.ExitInvalidConfig || !strings.Contains(errOut, tc.want) {
			t.Errorf("%q: exit %d, want 2 saying %q:\n%s", tc.args, code, tc.want, errOut)
		}
	}
	if n := len(e.org.QueriesSoFar()); n != 0 {
		t.Fatalf("%d queries made", n)
	}
}

// A file the configuration names and cannot be read (here the Loki token)
// is in the first list of problems, beside a misspelt key, before any
// request: as check and run report it.
func TestBackfillListsAMissingFileWithTheOtherProblems(t *testing.T) {
	e := newBackfillEnv(t, backfillOrg(), "")
	b, err := os.ReadFile(e.cfg)
	if err != nil {
		t.Fatal(err)
	}
	text := strings.Replace(string(b), "labels: {job: bf}", "auth_token_file: loki-token, labels: {job: bf}", 1)
	text = strings.Replace(text, "event_types: [API, Login]", "event_types: [API, Logn]", 1)
	if err := os.WriteFile(e.cfg, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errOut, code := e.backfill(t.Context(), "--since", backfillDay(6).Format(time.DateOnly))
	want := filepath.Join(e.dir, "loki-token")
	if code != app.ExitInvalidConfig || !strings.Contains(errOut, "sink.loki.auth_token_file") || !strings.Contains(errOut, want) ||
		!strings.Contains(errOut, "Logn") {
		t.Errorf("exit %d, want 2 naming sink.loki.auth_token_file, %s and the type Logn in one list:\n%s", code, want, errOut)
	}
	if n := len(e.org.QueriesSoFar()); n != 0 {
		t.Errorf("%d queries made before the missing file was reported", n)
	}
}

// A --since older than a default Loki accepts is warned about, naming the
// limits.
func TestBackfillWarnsAboutLokiLimits(t *testing.T) {
	e := newBackfillEnv(t, backfillOrg(), "")
	_, errOut, code := e.backfill(t.Context(), "--since", backfillDay(40).Format(time.DateOnly))
	if code != 0 {
		t.Fatalf("exit %d\n%s", code, errOut)
	}
	for _, want := range []string{"reject_old_samples_max_age", "older than 7 days", "retention_period",
		"the oldest file listed is of " + backfillDay(5).Format(time.DateOnly) + ": the org has no older"} {
		if !strings.Contains(errOut, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errOut)
		}
	}
}

// A Loki that keeps refusing stops the backfill with exit 1 after the
// retries: nothing is marked done, and the message says how to resume.
// Rows Loki refuses for themselves (too old) leave their file undone too.
func TestBackfillStopsWhenLokiKeepsRefusing(t *testing.T) {
	quickBackfill(t)
	e := newBackfillEnv(t, backfillOrg(), "")
	since := backfillDay(6).Format(time.DateOnly)
	e.loki.refuse, e.loki.refuseBody = http.StatusBadRequest, "invalid tenant"
	out, errOut, code := e.backfill(t.Context(), "--since", since, "--push-retries", "2", "--concurrency", "1")
	if code != 1 || !strings.Contains(errOut, "after 3 tries") || !strings.Contains(errOut, "run the same command again to resume") ||
		!strings.Contains(out, "backfill stopped") || !strings.Contains(out, "0 files done") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	if _, err := os.Stat(filepath.Join(e.dir, "state.backfill.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a state was written: %v", err)
	}

	e.loki.refuse, e.loki.refuseBody = http.StatusBadRequest, "entry for stream '{}' has timestamp too old"
	out, errOut, code = e.backfill(t.Context(), "--since", since, "--concurrency", "1")
	if code != 1 || !strings.Contains(errOut, "for themselves") || !strings.Contains(out, "refused by Loki") {
		t.Fatalf("too old: exit %d\n%s%s", code, out, errOut)
	}

	e.loki.refuse = 0
	out, errOut, code = e.backfill(t.Context(), "--since", since)
	if code != 0 || len(byRequest(e.loki.snapshot())) != 105 {
		t.Fatalf("once Loki accepts: exit %d, %d rows\n%s%s", code, len(byRequest(e.loki.snapshot())), out, errOut)
	}
}

// A download that fails is tried again; one that keeps failing fails its
// file, leaves its type's later files and exits 1; the next run does them.
func TestBackfillRetriesDownloadsAndResumesAfterAFailedFile(t *testing.T) {
	quickBackfill(t)
	e := newBackfillEnv(t, backfillOrg(), "")
	since := backfillDay(6).Format(time.DateOnly)
	e.org.Truncate = map[string]int{"0ATa5": 1, "0ATa4": 3}
	out, errOut, code := e.backfill(t.Context(), "--since", since)
	if code != 1 || !strings.Contains(out, "4 files done") || !strings.Contains(out, "1 failed, 1 left") || !strings.Contains(errOut, "0ATa4") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	out, errOut, code = e.backfill(t.Context(), "--since", since)
	if code != 0 || !strings.Contains(out, "2 files done, 4 skipped") || len(byRequest(e.loki.snapshot())) != 105 {
		t.Fatalf("resumed: exit %d\n%s%s", code, out, errOut)
	}
}

// A run stopped midway (its context ends after the second push) keeps the
// files it finished; the next run loads only the others.
func TestBackfillInterruptedRunResumes(t *testing.T) {
	e := newBackfillEnv(t, backfillOrg(), "")
	since := backfillDay(6).Format(time.DateOnly)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	e.loki.pushed = func(n int) {
		if n == 8 { // API's first file is 5 pushes of 7 rows at most, Login's 1
			cancel()
		}
	}
	out, errOut, code := e.backfill(ctx, "--since", since, "--concurrency", "1")
	if code != 1 || !strings.Contains(out, "backfill stopped") || !strings.Contains(errOut, "run the same command again to resume") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	done := e.stateDoc(t).Files
	if len(done) == 0 || len(done) == 6 {
		t.Fatalf("%d files done after the interruption, want some", len(done))
	}
	e.loki.pushed = nil
	first := slices.Clone(e.org.DownloadsSoFar())
	out, errOut, code = e.backfill(t.Context(), "--since", since)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("%d files done, %d skipped", 6-len(done), len(done))) {
		t.Fatalf("resumed: exit %d\n%s%s", code, out, errOut)
	}
	for _, id := range e.org.DownloadsSoFar()[len(first):] {
		if _, ok := done[id]; ok {
			t.Fatalf("%s was done before and downloaded again", id)
		}
	}
	if got := byRequest(e.loki.snapshot()); len(got) != 105 {
		t.Fatalf("%d distinct rows, want 105", len(got))
	}
}

// A second backfill on the same state is refused at once (exit 1), naming
// the lock; the daemon's instance lock does not stop a backfill.
func TestBackfillRefusesASecondRunOnTheSameState(t *testing.T) {
	e := newBackfillEnv(t, backfillOrg(), "")
	held, err := file.LockInstance(filepath.Join(e.dir, "state.backfill.json"), 0)
	if err != nil {
		t.Fatal(err)
	}
	out, errOut, code := e.backfill(t.Context(), "--since", backfillDay(6).Format(time.DateOnly))
	if code != 1 || !strings.Contains(errOut, "another sf2loki backfill is running") || len(e.loki.snapshot()) != 0 {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	_ = held.Release()
	daemon, err := file.LockInstance(filepath.Join(e.dir, "state.json"), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = daemon.Release() }()
	if out, errOut, code := e.backfill(t.Context(), "--since", backfillDay(6).Format(time.DateOnly)); code != 0 {
		t.Fatalf("beside a running daemon: exit %d\n%s%s", code, out, errOut)
	}
}

// On an object store the state is a sibling object of the checkpoint
// document, and its lock a create-only object the run renews: a second
// run is refused while it is renewed. The checkpoint document is never
// created.
func TestBackfillStateInAnObjectStore(t *testing.T) {
	srv := testenv.StartS3(t)
	testenv.S3Env(t)
	bucket := srv.NewBucket(t)
	e := newBackfillEnv(t, backfillOrg(), fmt.Sprintf("{store: s3, s3: {bucket: %s, key: sf2loki/state.json, endpoint_url: %s}}", bucket, srv.Endpoint))
	since := backfillDay(6).Format(time.DateOnly)
	out, errOut, code := e.backfill(t.Context(), "--since", since)
	if code != 0 || !strings.Contains(errOut, "sf2loki/state.backfill.json") {
		t.Fatalf("exit %d\n%s%s", code, out, errOut)
	}
	object := func(key string) (ports.ObjectCAS, error) {
		return app.NewS3(t.Context(), config.S3Object{Bucket: bucket, Key: key, EndpointURL: srv.Endpoint}, 0)
	}
	for key, want := range map[string]error{"sf2loki/state.backfill.json": nil, "sf2loki/state.backfill.json.lock": ports.ErrNotFound,
		"sf2loki/state.json": ports.ErrNotFound} {
		store, err := object(key)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := store.Get(t.Context()); !errors.Is(err, want) && (want != nil || err != nil) {
			t.Fatalf("%s: %v, want %v", key, err, want)
		}
	}
	lockStore, err := object("sf2loki/state.backfill.json.lock")
	if err != nil {
		t.Fatal(err)
	}
	held, err := domain.AcquireRunLock(t.Context(), lockStore, clock.New(), domain.RunLockConfig{Holder: "other-host-1", TTL: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	out, errOut, code = e.backfill(t.Context(), "--since", since)
	if code != 1 || !strings.Contains(errOut, "another sf2loki backfill is running") || !strings.Contains(errOut, "other-host-1") {
		t.Fatalf("beside a running backfill: exit %d\n%s%s", code, out, errOut)
	}
	if err := held.Release(t.Context()); err != nil {
		t.Fatal(err)
	}
	out, errOut, code = e.backfill(t.Context(), "--since", since)
	if code != 0 || !strings.Contains(out, "0 files done, 6 skipped") || len(e.loki.snapshot()) != 105 {
		t.Fatalf("re-run: exit %d\n%s%s", code, out, errOut)
	}
}
