package integration

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/internal/testenv/fakesf"
)

// TestSOQLSourceEndToEnd runs the daemon with sources.eventlog_objects
// against an in-process Salesforce org and a real VictoriaLogs: every row
// arrives once; after a restart the source resumes from the committed
// checkpoint and only the new rows arrive.
func TestSOQLSourceEndToEnd(t *testing.T) {
	logs := testenv.StartLogs(t)
	org := &fakesf.Org{}
	base := time.Now().Add(-30 * time.Minute).UTC().Truncate(time.Second)
	for i := range 300 {
		org.Add(fmt.Sprintf("0LE%05d", i), base.Add(time.Duration(i)*time.Second))
	}
	srv := httptest.NewServer(org)
	defer srv.Close()
	dir := t.TempDir()
	cfg := fmt.Sprintf(`state: {file: {path: %s/state.json}}
salesforce: {auth_mode: client_credentials, login_url: %q, client_id: ck, client_secret: s3cret}
sources: {eventlog_objects: {objects: [{name: LoginEvent, poll_interval: 10s}]}}
sink: {loki: {url: %s, labels: {job: soql}}}
`, dir, srv.URL, logs.PushURL)
	waitFor := func(n int) map[string]int {
		return waitStored(t, logs, `{source="eventlog_objects",event_type="LoginEvent",job="soql"}`, n, func(rec map[string]any) string {
			return fmt.Sprint(rec["Id"])
		})
	}
	d := start(t, "soql", cfg)
	if ids := waitFor(300); len(ids) != 300 {
		t.Fatalf("%d distinct rows stored, want 300", len(ids))
	}
	d.signal(t, syscall.SIGTERM)
	d.waitExit(t, 30*time.Second)

	org.Add("0LE90000", base.Add(400*time.Second))
	org.Add("0LE90001", base.Add(401*time.Second))
	d2 := start(t, "soql2", cfg)
	ids := waitFor(302)
	d2.signal(t, syscall.SIGTERM)
	d2.waitExit(t, 30*time.Second)
	dups := 0
	for id, n := range ids {
		if n != 1 {
			dups++
			t.Errorf("%s stored %d times", id, n)
		}
	}
	if len(ids) != 302 {
		t.Fatalf("%d distinct rows after the restart, want 302", len(ids))
	}
	t.Logf("302 rows stored once each across a restart (queries: %d)", len(org.Snapshot()))
}

// TestEventLogFileSourceEndToEnd runs the daemon with sources.eventlogfile
// against an in-process org and a real VictoriaLogs: every CSV row of every
// file arrives once (quoted newlines intact); after a restart only a new
// file is read.
func TestEventLogFileSourceEndToEnd(t *testing.T) {
	logs := testenv.StartLogs(t)
	org := &fakesf.ELFOrg{}
	body := elfBody
	now := time.Now().UTC()
	org.Add("0AT1", "API", now.Add(-3*time.Hour), body("a", 500))
	org.Add("0AT2", "API", now.Add(-2*time.Hour), body("b", 3))
	srv := httptest.NewServer(org)
	defer srv.Close()
	cfg, _ := elfConfig(t, srv.URL, logs.PushURL, "elf")
	stored := func(n int) map[string]int { return storedELF(t, logs, "elf", n) }
	d := start(t, "elf", cfg)
	if ids := stored(503); len(ids) != 503 {
		t.Fatalf("%d distinct rows stored, want 503", len(ids))
	}
	if iv := elfIntervals(t, d); len(iv) != 1 || iv["API"] != "Hourly" {
		t.Fatalf("/statusz eventlogfile_intervals %v, want API read Hourly (interval auto, an org publishing Hourly files)", iv)
	}
	d.signal(t, syscall.SIGTERM)
	d.waitExit(t, 30*time.Second)
	org.Add("0AT3", "API", now.Add(-time.Hour), body("c", 2))
	d2 := start(t, "elf2", cfg)
	ids := stored(505)
	d2.signal(t, syscall.SIGTERM)
	d2.waitExit(t, 30*time.Second)
	for id, n := range ids {
		if n != 1 {
			t.Errorf("%s stored %d times", id, n)
		}
	}
	if len(ids) != 505 || !slices.Equal(org.DownloadsSoFar(), []string{"0AT1", "0AT2", "0AT3"}) {
		t.Fatalf("%d rows, downloads %v: want 505 rows and each file downloaded once", len(ids), org.DownloadsSoFar())
	}
}

// TestEventLogFileDailyOnlyOrgEndToEnd runs the daemon with the default
// interval (auto) against an org without Event Monitoring, which publishes
// Daily files only: they are ingested, the choice is logged once and
// /statusz shows it.
func TestEventLogFileDailyOnlyOrgEndToEnd(t *testing.T) {
	logs := testenv.StartLogs(t)
	org := &fakesf.ELFOrg{}
	today := time.Now().UTC().Truncate(24 * time.Hour)
	org.AddFile(fakesf.ELFFile{ID: "0ATd1", EventType: "API", Interval: "Daily", LogDate: today.Add(-24 * time.Hour),
		CreatedDate: time.Now().Add(-2 * time.Hour), Body: elfBody("d", 300)})
	srv := httptest.NewServer(org)
	defer srv.Close()
	cfg, _ := elfConfig(t, srv.URL, logs.PushURL, "elfdaily")
	d := start(t, "elfdaily", cfg)
	ids := storedELF(t, logs, "elfdaily", 300)
	if iv := elfIntervals(t, d); len(iv) != 1 || iv["API"] != "Daily" {
		t.Fatalf("/statusz eventlogfile_intervals %v, want API read Daily", iv)
	}
	d.signal(t, syscall.SIGTERM)
	d.waitExit(t, 30*time.Second)
	if len(ids) != 300 {
		t.Fatalf("%d of 300 rows of the Daily file stored", len(ids))
	}
	if n := strings.Count(d.out.String(), `msg="eventlogfile interval"`); n != 1 || !strings.Contains(d.out.String(), "interval=Daily") {
		t.Fatalf("%d interval log lines, want one saying Daily:\n%s", n, d.out.String())
	}
}

// elfIntervals reads eventlogfile_intervals from the daemon's /statusz.
func elfIntervals(t *testing.T, d *daemon) map[string]string {
	t.Helper()
	resp, err := http.Get("http://" + d.addr + "/statusz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var st struct {
		Intervals map[string]string `json:"eventlogfile_intervals"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&st); err != nil {
		t.Fatal(err)
	}
	return st.Intervals
}

func elfBody(prefix string, n int) string {
	var b strings.Builder
	b.WriteString("EVENT_TYPE,TIMESTAMP_DERIVED,REQUEST_ID,QUERY\n")
	for i := range n {
		fmt.Fprintf(&b, "API,%s,%s-%d,\"SELECT Id\nFROM Account\"\n", time.Now().UTC().Format("2006-01-02T15:04:05.000Z"), prefix, i)
	}
	return b.String()
}

// elfConfig is a daemon reading the API EventLogFiles of the org at
// loginURL, pushing with label job; it returns the config and the state
// file's directory.
func elfConfig(t *testing.T, loginURL, pushURL, job string) (cfg, dir string) {
	dir = t.TempDir()
	return fmt.Sprintf(`state: {file: {path: %s/state.json}}
salesforce: {auth_mode: client_credentials, login_url: %q, client_id: ck, client_secret: s3cret}
sources: {eventlogfile: {event_types: [API], poll_interval: 1m, settle_window: 0s}}
sink: {loki: {url: %s, labels: {job: %s}}}
`, dir, loginURL, pushURL, job), dir
}

// storedELF waits for n distinct API rows labelled job and counts each
// REQUEST_ID, checking the quoted newline survived.
func storedELF(t *testing.T, logs *testenv.LogsServer, job string, n int) map[string]int {
	t.Helper()
	return waitStored(t, logs, fmt.Sprintf(`{source="eventlogfile",event_type="API",job=%q}`, job), n, func(row map[string]any) string {
		if row["QUERY"] != "SELECT Id\r\nFROM Account" { // the org serves CRLF, inside quotes too
			t.Fatalf("row %v: the quoted newline was not kept", row)
		}
		return fmt.Sprint(row["REQUEST_ID"])
	})
}

// checkpoints runs `sf2loki state show --json` on the file state in dir.
func checkpoints(t *testing.T, dir string) map[string]string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "state.yaml")
	if err := os.WriteFile(path, fmt.Appendf(nil, "state: {file: {path: %s/state.json}}\n", dir), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(binary(t), "state", "show", "--json", "--config", path)
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "SF2LOKI_") })
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("state show: %v: %s", err, out)
	}
	var doc map[string]string
	if err := json.Unmarshal(out, &doc); err != nil {
		t.Fatalf("state show: %v: %s", err, out)
	}
	return doc
}

// TestEventLogFileCrashMidFileReplaysTheFile kills the daemon (SIGKILL)
// while it streams a file whose download stalled halfway: its rows carried
// the checkpoint from before the file, so the restarted daemon reads the
// whole file again. Every row arrives; the first half arrives twice.
func TestEventLogFileCrashMidFileReplaysTheFile(t *testing.T) {
	logs := testenv.StartLogs(t)
	org := &fakesf.ELFOrg{Stall: map[string]int{"0AT1": 1}}
	org.Add("0AT1", "API", time.Now().Add(-2*time.Hour), elfBody("m", 4000))
	srv := httptest.NewServer(org)
	defer srv.Close()
	cfg, dir := elfConfig(t, srv.URL, logs.PushURL, "elfmid")
	d := start(t, "elfmid", cfg)
	before := storedELF(t, logs, "elfmid", 1)
	if len(before) == 0 || len(before) >= 4000 {
		t.Fatalf("%d rows stored before the crash, want part of the file", len(before))
	}
	d.signal(t, syscall.SIGKILL)
	<-d.done
	if cp, ok := checkpoints(t, dir)["eventlogfile:API"]; ok && strings.Contains(cp, "0AT1") {
		t.Fatalf("a checkpoint past the half-read file was committed: %s", cp)
	}

	d2 := start(t, "elfmid2", cfg)
	ids := storedELF(t, logs, "elfmid", 4000)
	twice := 0
	for id, n := range ids {
		if n > 1 {
			twice++
		}
		if n > 2 {
			t.Errorf("%s stored %d times", id, n)
		}
	}
	if len(ids) != 4000 || twice == 0 || !slices.Equal(org.DownloadsSoFar(), []string{"0AT1", "0AT1"}) {
		t.Fatalf("%d of 4000 rows, %d stored twice, downloads %v: want every row, the replayed part twice, and two downloads",
			len(ids), twice, org.DownloadsSoFar())
	}
	if again := duplicatesIdentical(t, logs, `{source="eventlogfile",event_type="API",job="elfmid"}`, func(rec map[string]any) string {
		return fmt.Sprint(rec["REQUEST_ID"])
	}); again != twice {
		t.Fatalf("%d repeated copies compared, want the %d rows stored twice", again, twice)
	}
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(checkpoints(t, dir)["eventlogfile:API"], "0AT1") {
		if time.Now().After(deadline) {
			t.Fatal("the checkpoint never moved past the replayed file")
		}
		time.Sleep(200 * time.Millisecond)
	}
	d2.signal(t, syscall.SIGTERM)
	d2.waitExit(t, 30*time.Second)
	t.Logf("%d rows stored before the crash; after the restart all 4000, %d of them twice", len(before), twice)
}

// TestSOQLSourceResumesAfterALeadershipChange runs two replicas on a file
// lease with the SOQL source. The leader is killed mid-drain; the standby
// takes over, starts from the checkpoint the old leader committed (not the
// lookback window) and every row arrives. Only rows at or after that
// checkpoint may arrive twice.
func TestSOQLSourceResumesAfterALeadershipChange(t *testing.T) {
	testenv.Long(t, "a leadership change with the SOQL source")
	logs := testenv.StartLogs(t)
	// Each query answer takes 300ms: 3000 rows drain over 15 queries.
	org := &fakesf.Org{Delay: 300 * time.Millisecond}
	base := time.Now().Add(-40 * time.Minute).UTC().Truncate(time.Second)
	for i := range 3000 {
		org.AddTo("LoginHistory", "LoginTime", fmt.Sprintf("0Ya%05d", i), base.Add(time.Duration(i)*500*time.Millisecond))
	}
	srv := httptest.NewServer(org)
	defer srv.Close()
	be := fileBackend(t, 2*time.Second, 500*time.Millisecond)
	c := newCluster(t, be, func(string) string {
		return fmt.Sprintf(`salesforce: {auth_mode: client_credentials, login_url: %q, client_id: ck, client_secret: s3cret}
sources: {eventlog_objects: {objects: [{name: LoginHistory, timestamp_field: LoginTime, poll_interval: 10s}]}}
sink: {loki: {url: %s, labels: {job: soqlha}}}
`, srv.URL, logs.PushURL)
	})
	times := map[string]string{}
	stored := func(n int) map[string]int {
		return waitStored(t, logs, `{source="eventlog_objects",event_type="LoginHistory",job="soqlha"}`, n, func(rec map[string]any) string {
			id := fmt.Sprint(rec["Id"])
			times[id] = fmt.Sprint(rec["LoginTime"])
			return id
		})
	}
	r1 := c.start()
	r1.waitReady(t, 200, "leader", be.ttl+slack)
	r2 := c.start()
	r2.waitReady(t, 503, "standby", slack)

	// Mid-drain: rows are stored and a checkpoint is committed.
	var cp string
	var before int
	deadline := time.Now().Add(30 * time.Second)
	for before = len(stored(400)); cp == "" || before < 400; before = len(stored(400)) {
		if time.Now().After(deadline) {
			t.Fatal("no checkpoint and 400 rows within 30s")
		}
		cp = checkpoints(t, be.dir)["eventlog_objects:LoginHistory"]
	}
	r1.signal(t, syscall.SIGKILL)
	<-r1.done
	killedAt := len(org.Snapshot())
	cp = checkpoints(t, be.dir)["eventlog_objects:LoginHistory"]
	var committed struct {
		LastTS string `json:"last_ts"`
	}
	if err := json.Unmarshal([]byte(cp), &committed); err != nil {
		t.Fatalf("checkpoint %q: %v", cp, err)
	}
	last, err := time.Parse("2006-01-02T15:04:05.000-0700", committed.LastTS)
	if err != nil || !last.Before(base.Add(2999*500*time.Millisecond)) {
		t.Fatalf("checkpoint %s (%v): the leader had already drained every row; the test needs it killed mid-drain", cp, err)
	}

	r2.waitReady(t, 200, "leader", be.ttl+slack)
	ids := stored(3000)
	if len(ids) != 3000 {
		t.Fatalf("%d of 3000 rows stored after the leadership change", len(ids))
	}
	twice := 0
	for id, n := range ids {
		ts, _ := time.Parse("2006-01-02T15:04:05.000-0700", times[id])
		switch {
		case n > 2:
			t.Errorf("%s stored %d times", id, n)
		case n == 2 && ts.Before(last):
			t.Errorf("%s (%s) stored twice: it is before the committed checkpoint %s", id, times[id], committed.LastTS)
		case n == 2:
			twice++
		}
	}
	if again := duplicatesIdentical(t, logs, `{source="eventlog_objects",event_type="LoginHistory",job="soqlha"}`, func(rec map[string]any) string {
		return fmt.Sprint(rec["Id"])
	}); again != twice {
		t.Fatalf("%d repeated copies compared, want the %d rows stored twice", again, twice)
	}
	// The new leader reads from the committed checkpoint (from the start of
	// its second: SOQL literals have whole seconds), never from the lookback
	// window: its first query starts there (a query of the old leader may
	// still have been answered after it died), none before.
	bound := regexp.MustCompile(`WHERE LoginTime >= (\S+) ORDER`)
	want := last.UTC().Truncate(time.Second).Format("2006-01-02T15:04:05Z")
	var after []string
	for _, q := range org.Snapshot()[killedAt:] {
		if m := bound.FindStringSubmatch(q); m != nil {
			after = append(after, m[1])
		}
	}
	if len(after) < 2 || !slices.Contains(after[:2], want) || slices.ContainsFunc(after, func(b string) bool { return b < want }) {
		t.Fatalf("queries after the leadership change from %v, want the first from %s and none before", after, want)
	}
	c.unexpectedExits(t)
	t.Logf("leader killed with %d rows stored and %s committed; the new leader read from it: 3000 rows, %d after the checkpoint stored twice",
		before, committed.LastTS, twice)
}

// waitStored reads the JSON lines of stream back from VictoriaLogs until n
// distinct keys are stored (or 30s pass) and counts each key.
func waitStored(t *testing.T, logs *testenv.LogsServer, stream string, n int, key func(map[string]any) string) map[string]int {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		ids := map[string]int{}
		for _, r := range logs.Query(t, stream+" | fields _msg") {
			var rec map[string]any
			if err := json.Unmarshal([]byte(r["_msg"]), &rec); err != nil {
				t.Fatalf("line %q: %v", r["_msg"], err)
			}
			ids[key(rec)]++
		}
		if len(ids) >= n || time.Now().After(deadline) {
			return ids
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// duplicatesIdentical reads every entry of stream back from VictoriaLogs
// and checks that each copy of a row (rows told apart by key) is the first
// copy byte for byte: _time to the nanosecond, _msg, the stream's labels
// and every structured-metadata field. At-least-once delivery is harmless
// only then, because Loki collapses such copies into one entry. It returns
// how many copies repeated an earlier one.
func duplicatesIdentical(t *testing.T, logs *testenv.LogsServer, stream string, key func(map[string]any) string) int {
	t.Helper()
	first := map[string]map[string]string{}
	repeated, differing := 0, 0
	for _, r := range logs.Query(t, stream) {
		var rec map[string]any
		if err := json.Unmarshal([]byte(r["_msg"]), &rec); err != nil {
			t.Fatalf("line %q: %v", r["_msg"], err)
		}
		k := key(rec)
		f, seen := first[k]
		if !seen {
			first[k] = r
			continue
		}
		repeated++
		if !maps.Equal(f, r) {
			if differing++; differing <= 3 {
				t.Errorf("row %s was stored again with differences (Loki would keep both copies):\nfirst %v\nagain %v", k, f, r)
			}
		}
	}
	if differing > 0 {
		t.Errorf("%d of %d repeated copies differ from the first copy", differing, repeated)
	}
	return repeated
}
