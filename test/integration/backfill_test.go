package integration

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/internal/testenv/fakesf"
)

// backfillProc is one `sf2loki backfill` process.
type backfillProc struct {
	cmd            *exec.Cmd
	stdout, stderr *testenv.Buffer
	done           chan struct{}
	code           int
}

// startBackfill runs `sf2loki backfill --config cfg args…`.
func startBackfill(t *testing.T, cfg string, args ...string) *backfillProc {
	t.Helper()
	p := &backfillProc{stdout: &testenv.Buffer{}, stderr: &testenv.Buffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(binary(t), append([]string{"backfill", "--config", cfg}, args...)...)
	p.cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "SF2LOKI_") })
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := p.cmd.Wait()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			p.code = exit.ExitCode()
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
	})
	return p
}

// wait waits for the process to exit and returns its exit code.
func (p *backfillProc) wait(t *testing.T, limit time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(limit):
		t.Fatalf("backfill did not exit within %s\n%s%s", limit, p.stderr, p.stdout)
		return -1
	}
}

func (p *backfillProc) output() string { return p.stderr.String() + p.stdout.String() }

// backfillFixture is an org with Daily API (40 rows) and Login (6 rows)
// files for the days 6 to 3 ago, a VictoriaLogs behind a proxy that counts
// (and may slow) the pushes, and a configuration whose daemon checkpoint
// document already exists.
type backfillFixture struct {
	org       *fakesf.ELFOrg
	logs      *testenv.LogsServer
	pushes    atomic.Int64
	delay     atomic.Int64 // nanoseconds each push waits
	dir, cfg  string
	lokiURL   string // the push URL in cfg
	daemonDoc []byte
	since     string
}

func newBackfillFixture(t *testing.T, job string) *backfillFixture {
	t.Helper()
	f := &backfillFixture{org: &fakesf.ELFOrg{}, logs: testenv.StartLogs(t), dir: t.TempDir()}
	today := time.Now().UTC().Truncate(24 * time.Hour)
	for d := 6; d >= 3; d-- {
		day := today.AddDate(0, 0, -d)
		for _, typ := range []struct {
			name string
			rows int
		}{{"API", 40}, {"Login", 6}} {
			var b strings.Builder
			b.WriteString("EVENT_TYPE,TIMESTAMP_DERIVED,REQUEST_ID,USER_ID\n")
			for i := range typ.rows {
				fmt.Fprintf(&b, "%s,%s,%s%d-%d,005%012d\n", typ.name, day.Add(time.Duration(i)*17*time.Minute).Format("2006-01-02T15:04:05.000Z"),
					strings.ToLower(typ.name[:1]), d, i, i)
			}
			f.org.AddFile(fakesf.ELFFile{ID: fmt.Sprintf("0AT%s%d", typ.name[:1], d), EventType: typ.name, Interval: "Daily", LogDate: day,
				CreatedDate: day.Add(27 * time.Hour), Body: b.String()})
		}
	}
	f.since = today.AddDate(0, 0, -6).Format(time.DateOnly)
	sf := httptest.NewServer(f.org)
	t.Cleanup(sf.Close)
	target, _ := url.Parse(f.logs.URL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	loki := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		time.Sleep(time.Duration(f.delay.Load()))
		proxy.ServeHTTP(w, r)
		f.pushes.Add(1)
	}))
	t.Cleanup(loki.Close)
	f.daemonDoc = []byte(`{"__fence_epoch__":"3","eventlogfile:API":"{\"last_created\":\"2026-03-01T00:00:00.000+0000\",\"ids\":[]}"}`)
	if err := os.WriteFile(filepath.Join(f.dir, "state.json"), f.daemonDoc, 0o600); err != nil {
		t.Fatal(err)
	}
	f.cfg, f.lokiURL = filepath.Join(f.dir, "sf2loki.yaml"), loki.URL+"/insert/loki/api/v1/push"
	yaml := fmt.Sprintf(`state: {file: {path: %s/state.json}}
salesforce: {auth_mode: client_credentials, login_url: %q, client_id: ck, client_secret: s3cret}
sources: {eventlogfile: {event_types: [API, Login], sample: {API: 0.1}}}
sink: {loki: {url: %s, labels: {job: %s}, batch: {max_entries: 10}}}
`, f.dir, sf.URL, f.lokiURL, job)
	if err := os.WriteFile(f.cfg, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return f
}

// stored reads the backfilled rows of job back: REQUEST_ID → copies, and
// checks each row's time and labels.
func (f *backfillFixture) stored(t *testing.T, job string) map[string]int {
	t.Helper()
	ids := map[string]int{}
	for _, r := range f.logs.Query(t, fmt.Sprintf(`{job=%q,source="eventlogfile"} | fields _msg, _time, backfill, event_type`, job)) {
		var row map[string]string
		if err := json.Unmarshal([]byte(r["_msg"]), &row); err != nil {
			t.Fatalf("line %q: %v", r["_msg"], err)
		}
		at, _ := time.Parse(time.RFC3339Nano, r["_time"])
		want, _ := time.Parse(time.RFC3339Nano, row["TIMESTAMP_DERIVED"])
		if !at.Equal(want) || r["backfill"] != "true" || r["event_type"] != row["EVENT_TYPE"] {
			t.Fatalf("row %v stored at %s with %v; want its own time %s, backfill=true and its event_type", row, at, r, want)
		}
		ids[row["REQUEST_ID"]]++
	}
	return ids
}

func (f *backfillFixture) stateFiles(t *testing.T) map[string]any {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(f.dir, "state.backfill.json"))
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Files map[string]any `json:"files"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	return doc.Files
}

func (f *backfillFixture) daemonDocUntouched(t *testing.T) {
	t.Helper()
	if b, err := os.ReadFile(filepath.Join(f.dir, "state.json")); err != nil || !bytes.Equal(b, f.daemonDoc) {
		t.Fatalf("the daemon's checkpoint document changed: %s (%v)", b, err)
	}
}

// TestBackfillEndToEnd runs the built binary: a backfill of four days and
// two types lands every row once in VictoriaLogs at its own time, labelled
// backfill="true" beside the deployment's job, unsampled; the same command
// again skips every file and pushes nothing; the daemon's checkpoint
// document is never touched.
func TestBackfillEndToEnd(t *testing.T) {
	f := newBackfillFixture(t, "bfe2e")
	p := startBackfill(t, f.cfg, "--since", f.since)
	if code := p.wait(t, time.Minute); code != 0 {
		t.Fatalf("exit %d\n%s", code, p.output())
	}
	t.Logf("first run:\n%s", p.output())
	ids := f.stored(t, "bfe2e")
	if len(ids) != 184 {
		t.Fatalf("%d distinct rows stored, want 4×(40+6)", len(ids))
	}
	for id, n := range ids {
		if n != 1 {
			t.Fatalf("%s stored %d times", id, n)
		}
	}
	pushes, downloads := f.pushes.Load(), len(f.org.DownloadsSoFar())
	again := startBackfill(t, f.cfg, "--since", f.since)
	if code := again.wait(t, time.Minute); code != 0 || f.pushes.Load() != pushes || len(f.org.DownloadsSoFar()) != downloads {
		t.Fatalf("re-run: exit %d, %d pushes, %d downloads; want 0 and none\n%s", code, f.pushes.Load()-pushes,
			len(f.org.DownloadsSoFar())-downloads, again.output())
	}
	t.Logf("re-run:\n%s", again.output())
	if !strings.Contains(again.output(), "8 files listed: all 8 done before (skipped); nothing to do") {
		t.Fatalf("re-run output:\n%s", again.output())
	}
	f.daemonDocUntouched(t)
}

// TestBackfillKilledMidwayResumes kills a backfill (SIGKILL) after some
// pushes; the next run skips the files the first recorded, loads the rest,
// and every row is stored. A second backfill started while one runs is
// refused with exit 1.
func TestBackfillKilledMidwayResumes(t *testing.T) {
	f := newBackfillFixture(t, "bfkill")
	f.delay.Store(int64(400 * time.Millisecond))
	p := startBackfill(t, f.cfg, "--since", f.since, "--concurrency", "1")
	deadline := time.Now().Add(30 * time.Second)
	for f.pushes.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d pushes after 30s\n%s", f.pushes.Load(), p.output())
		}
		time.Sleep(10 * time.Millisecond)
	}
	second := startBackfill(t, f.cfg, "--since", f.since)
	if code := second.wait(t, 30*time.Second); code != 1 || !strings.Contains(second.output(), "another sf2loki backfill is running") {
		t.Fatalf("a second backfill beside the first: exit %d\n%s", code, second.output())
	}
	t.Logf("a second backfill beside the first:\n%s", second.output())
	for {
		if b, _ := os.ReadFile(filepath.Join(f.dir, "state.backfill.json")); bytes.Count(b, []byte(`"created"`)) >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no two files recorded after 30s\n%s", p.output())
		}
		time.Sleep(10 * time.Millisecond)
	}
	_ = p.cmd.Process.Signal(syscall.SIGKILL)
	<-p.done
	done := f.stateFiles(t)
	if len(done) == 0 || len(done) == 8 {
		t.Fatalf("%d files recorded when killed, want some\n%s", len(done), p.output())
	}
	f.delay.Store(0)
	before := len(f.org.DownloadsSoFar())
	resumed := startBackfill(t, f.cfg, "--since", f.since)
	if code := resumed.wait(t, time.Minute); code != 0 {
		t.Fatalf("resumed: exit %d\n%s", code, resumed.output())
	}
	t.Logf("resumed after a kill with %d files recorded:\n%s", len(done), resumed.output())
	if !strings.Contains(resumed.output(), fmt.Sprintf("%d files done, %d skipped (done before)", 8-len(done), len(done))) {
		t.Fatalf("resumed output:\n%s", resumed.output())
	}
	for _, id := range f.org.DownloadsSoFar()[before:] {
		if _, ok := done[id]; ok {
			t.Fatalf("%s was recorded done and downloaded again", id)
		}
	}
	if ids := f.stored(t, "bfkill"); len(ids) != 184 {
		t.Fatalf("%d distinct rows stored, want 184", len(ids))
	}
	if len(f.stateFiles(t)) != 8 {
		t.Fatalf("state %v", slices.Sorted(maps.Keys(f.stateFiles(t))))
	}
	f.daemonDocUntouched(t)
}

// TestBackfillExitsOneOnALokiThatKeepsRefusing: after the sink's retries
// and --push-retries, the backfill stops with exit 1, records nothing and
// says how to resume.
func TestBackfillExitsOneOnALokiThatKeepsRefusing(t *testing.T) {
	f := newBackfillFixture(t, "bfrefuse")
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "ingester unavailable", http.StatusServiceUnavailable)
	}))
	defer refusing.Close()
	cfg, err := os.ReadFile(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg = bytes.Replace(cfg, []byte(f.lokiURL), []byte(refusing.URL+"/loki/api/v1/push"), 1)
	if err := os.WriteFile(f.cfg, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	p := startBackfill(t, f.cfg, "--since", f.since, "--push-retries", "0")
	code := p.wait(t, time.Minute)
	t.Logf("refusing Loki:\n%s", p.output())
	if code != 1 || !strings.Contains(p.output(), "loki did not accept a push after 1 try") ||
		!strings.Contains(p.output(), "run the same command again to resume") || !strings.Contains(p.stdout.String(), "backfill stopped") {
		t.Fatalf("exit %d\n%s", code, p.output())
	}
	if _, err := os.Stat(filepath.Join(f.dir, "state.backfill.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("files recorded done: %v", err)
	}
	f.daemonDocUntouched(t)
}
