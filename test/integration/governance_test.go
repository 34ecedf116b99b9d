package integration

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	be "encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/clock"
	"github.com/sf2loki/sf2loki/internal/app"
	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/internal/testenv/fakesf"
)

// shiftedClock is the system clock moved by off: the daemon lives near a
// UTC midnight while the test waits a few real seconds.
type shiftedClock struct {
	clock.Real
	off time.Duration
}

func (c shiftedClock) Now() time.Time { return time.Now().Add(c.off) }

// governedBody is an EventLogFile of n rows holding personal data: a user
// id, a client IP, and every tenth row a 5xx status.
func governedBody(typ, prefix string, n int) string {
	var b strings.Builder
	b.WriteString("EVENT_TYPE,TIMESTAMP_DERIVED,REQUEST_ID,USER_ID,CLIENT_IP,STATUS_CODE,URI\r\n")
	at := time.Now().UTC().Add(-time.Hour).Format("2006-01-02T15:04:05.000Z")
	for i := range n {
		status := 200
		if i%10 == 3 {
			status = 503
		}
		fmt.Fprintf(&b, "%s,%s,%s-%04d,005Hs00000%05d,198.51.%d.%d,%d,/services/data/v60.0/query\r\n", typ, at, prefix, i, i, i%7, 10+i%200, status)
	}
	return b.String()
}

// keptBySample is the documented sampling rule: the first 8 bytes of
// SHA-256(key), big-endian, modulo 10,000, below fraction × 10,000.
func keptBySample(key string, fraction float64) bool {
	sum := sha256.Sum256([]byte(key))
	return be.BigEndian.Uint64(sum[:8])%10000 < uint64(fraction*10000)
}

func hmac16(salt, v string) string {
	m := hmac.New(sha256.New, []byte(salt))
	m.Write([]byte(v))
	return hex.EncodeToString(m.Sum(nil))[:16]
}

// TestGovernanceEndToEnd runs one daemon over an org's EventLogFiles into
// VictoriaLogs with the compliance controls of docs/governance.md: USER_ID
// hashed, CLIENT_IP masked, 5xx rows dropped, the API type sampled at 25%,
// and a daily byte budget that pauses. The daemon's clock is set just
// before a UTC midnight: the budget is spent and /readyz says so, nothing
// more arrives while paused, and the new day ships the rest. VictoriaLogs
// holds exactly the expected rows, once each, with no clear-text user id
// or IP, and the counters agree.
func TestGovernanceEndToEnd(t *testing.T) {
	logs := testenv.StartLogs(t)
	org := &fakesf.ELFOrg{}
	now := time.Now().UTC()
	org.Add("0ATapi", "API", now.Add(-3*time.Hour), governedBody("API", "api", 400))
	org.Add("0ATlog", "Login", now.Add(-3*time.Hour), governedBody("Login", "login", 100))
	srv := httptest.NewServer(org)
	defer srv.Close()

	const salt, budget = "e2e-transform-salt", 24_000
	dir := t.TempDir()
	yaml := fmt.Sprintf(`state: {file: {path: %s/state.json}}
service: {health_addr: "127.0.0.1:0"}
salesforce: {auth_mode: client_credentials, login_url: %q, client_id: ck, client_secret: s3cret}
sources:
  transform_salt: %s
  eventlogfile:
    event_types: [API, Login]
    interval: Hourly
    poll_interval: 1m
    settle_window: 0s
    lookback: 72h
    transforms:
      - {action: hash, fields: [USER_ID]}
      - {action: mask, fields: ["CLIENT_*"]}
      - {action: drop_row, match: {STATUS_CODE: "5*"}, name: server-errors}
    sample: {API: 0.25}
sink:
  loki:
    url: %s
    labels: {job: governed}
    batch: {max_entries: 20}
    egress: {daily_byte_budget: %d, budget_action: pause}
`, dir, srv.URL, salt, logs.PushURL, budget)
	path := filepath.Join(dir, "sf2loki.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, warnings, err := config.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("check warnings: %q", warnings)

	// The expected rows, from the documented rules.
	want := map[string]bool{}
	filtered, sampledOut := 0, 0
	for _, typ := range []struct {
		prefix string
		n      int
		sample float64
	}{{"api", 400, 0.25}, {"login", 100, 1}} {
		for i := range typ.n {
			id := fmt.Sprintf("%s-%04d", typ.prefix, i)
			switch {
			case !keptBySample(id, typ.sample):
				sampledOut++
			case i%10 == 3:
				filtered++
			default:
				want[id] = true
			}
		}
	}

	midnight := now.Truncate(24 * time.Hour).Add(24 * time.Hour)
	const before = 40 * time.Second // real seconds from start to the daemon's midnight
	clk := shiftedClock{off: midnight.Add(-before).Sub(now)}
	logBuf := &testenv.Buffer{}
	d, cleanup, err := app.Build(t.Context(), cfg, app.Overrides{Clock: clk, Logger: slog.New(slog.NewTextHandler(logBuf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer cleanup()
	ctx, stop := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- d.Run(ctx) }()
	defer func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("run: %v", err)
		}
	}()
	h := d.Handler()
	get := func(p string) string {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, p, nil))
		b, _ := io.ReadAll(rec.Result().Body)
		return string(b)
	}
	stream := `{job="governed"}`
	stored := func() map[string]int {
		ids := map[string]int{}
		for _, r := range logs.Query(t, stream+" | fields _msg") {
			var rec map[string]any
			if err := json.Unmarshal([]byte(r["_msg"]), &rec); err != nil {
				t.Fatalf("line %q: %v", r["_msg"], err)
			}
			ids[fmt.Sprint(rec["REQUEST_ID"])]++
		}
		return ids
	}

	// Day one: the budget is spent before midnight and the leader says so.
	paused := fmt.Sprintf("budget paused until %s", midnight.Format(time.RFC3339))
	deadline := time.Now().Add(before - 5*time.Second)
	for !strings.Contains(get("/readyz"), paused) {
		if time.Now().After(deadline) {
			t.Fatalf("/readyz %q: the budget never paused the leader before midnight; log:\n%s", get("/readyz"), tail(logBuf.String(), 30))
		}
		time.Sleep(200 * time.Millisecond)
	}
	metrics := get("/metrics")
	for _, want := range []string{"sf2loki_egress_paused 1", "sf2loki_egress_budget_bytes 24000"} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics while paused lacks %q:\n%s", want, grepMetric(metrics, "egress"))
		}
	}
	firstDay := stored()
	if rows := logs.Query(t, stream+" | fields _msg | limit 2"); len(rows) > 0 {
		t.Logf("a stored row: %v", rows[0])
	}
	time.Sleep(2 * time.Second) // a paused leader pushes nothing more
	if again := stored(); len(again) != len(firstDay) {
		t.Fatalf("%d rows stored while paused, then %d", len(firstDay), len(again))
	}
	if len(firstDay) == 0 || len(firstDay) >= len(want) {
		t.Fatalf("%d of %d rows stored on the first day: want the budget to stop part of them", len(firstDay), len(want))
	}
	t.Logf("day one: %d of %d rows stored, then paused; /readyz %q", len(firstDay), len(want), strings.TrimSpace(get("/readyz")))

	// The new UTC day ships the rest: exactly the expected rows, once each.
	var ids map[string]int
	for end := time.Now().Add(before + 60*time.Second); ; time.Sleep(500 * time.Millisecond) {
		if ids = stored(); len(ids) >= len(want) || time.Now().After(end) {
			break
		}
	}
	if len(ids) != len(want) {
		var extra []string
		for id := range ids {
			if !want[id] {
				extra = append(extra, id)
			}
		}
		t.Fatalf("%d rows stored after midnight, want %d (unexpected: %v); log:\n%s", len(ids), len(want), extra, tail(logBuf.String(), 30))
	}
	for id, n := range ids {
		if !want[id] || n != 1 {
			t.Errorf("row %s stored %d times (expected: %v)", id, n, want[id])
		}
	}
	if r := get("/readyz"); r != "leader\n" {
		t.Errorf("/readyz on the new day: %q", r)
	}

	// No clear-text personal data: every USER_ID is the salted HMAC of the
	// original, every CLIENT_IP keeps its /24 only.
	masked := regexp.MustCompile(`^198\.51\.\d\.x$`)
	for _, r := range logs.Query(t, stream+" | fields _msg") {
		var rec map[string]any
		_ = json.Unmarshal([]byte(r["_msg"]), &rec)
		id := fmt.Sprint(rec["REQUEST_ID"])
		var i int
		_, _ = fmt.Sscanf(id[strings.IndexByte(id, '-')+1:], "%d", &i)
		if got, want := fmt.Sprint(rec["USER_ID"]), hmac16(salt, fmt.Sprintf("005Hs00000%05d", i)); got != want {
			t.Errorf("%s: USER_ID %q, want the HMAC %q", id, got, want)
		}
		if ip := fmt.Sprint(rec["CLIENT_IP"]); !masked.MatchString(ip) {
			t.Errorf("%s: CLIENT_IP %q is not masked", id, ip)
		}
		if strings.Contains(r["_msg"], "005Hs") {
			t.Errorf("%s: a clear-text user id in %s", id, r["_msg"])
		}
	}

	metrics = get("/metrics")
	for _, want := range []string{
		fmt.Sprintf(`sf2loki_rows_filtered_total{rule="server-errors",source="eventlogfile"} %d`, filtered),
		fmt.Sprintf(`sf2loki_entries_sampled_out_total{event_type="API",source="eventlogfile"} %d`, sampledOut),
		"sf2loki_egress_paused 0",
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q:\n%s", want, grepMetric(metrics, "filtered|sampled|egress"))
		}
	}
	t.Logf("stored %d rows (API sampled out %d, 5xx dropped %d); %s", len(ids), sampledOut, filtered, grepMetric(metrics, "egress_budget_used"))
}

// grepMetric keeps the metric lines matching the regular expression re.
func grepMetric(metrics, re string) string {
	m := regexp.MustCompile(re)
	var out []string
	for line := range strings.SplitSeq(metrics, "\n") {
		if !strings.HasPrefix(line, "#") && m.MatchString(line) {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}
