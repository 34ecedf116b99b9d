package salesforce_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/salesforce"
	"github.com/sf2loki/sf2loki/internal/domain/shape"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/sfrules"
	"github.com/sf2loki/sf2loki/internal/testenv/fakesf"
)

func shaper(t testing.TB, cfg shape.Config) *shape.Shaper {
	t.Helper()
	s, err := shape.New("test", cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// line decodes an entry's line.
func line(t *testing.T, e ports.Entry) map[string]string {
	t.Helper()
	var m map[string]string
	if err := json.Unmarshal([]byte(e.Line), &m); err != nil {
		t.Fatalf("line %q: %v", e.Line, err)
	}
	return m
}

// ipBody is an API file of n rows; row i has STATUS_CODE status(i).
func ipBody(n int, status func(int) string) string {
	var b strings.Builder
	b.WriteString("EVENT_TYPE,TIMESTAMP_DERIVED,REQUEST_ID,USER_ID,CLIENT_IP,STATUS_CODE\n")
	for i := range n {
		fmt.Fprintf(&b, "API,2026-11-28T10:00:%02d.000Z,req-%d,005%012d,10.1.2.%d,%s\n", i%60, i, i, i%250, status(i))
	}
	return b.String()
}

func TestELFTransformsRowsAndKeepsTimesAndCheckpoints(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	org := &fakesf.ELFOrg{}
	// The last row is a 500: dropped, so the row before it carries the
	// advanced checkpoint.
	org.Add("0AT1", "API", now.Add(-3*time.Hour), ipBody(5, func(i int) string { return map[bool]string{true: "500", false: "200"}[i == 4] }))
	filtered := 0
	sh := shaper(t, shape.Config{Salt: "pepper", Filtered: func(string) { filtered++ }, Rules: []shape.Rule{
		{Action: shape.Hash, Fields: []string{"USER_ID"}},
		{Action: shape.Mask, Fields: []string{"*_IP"}},
		{Action: shape.DropField, Fields: []string{"TIMESTAMP_DERIVED"}},
		{Action: shape.DropRow, Match: map[string]string{"STATUS_CODE": "5??"}},
	}})
	s := elfSource(t, org, salesforce.ELFSpec{EventTypes: []string{"API"}, Shaper: sh}, now)
	got := runELF(t, s, nil, func(es []ports.Entry) bool {
		return len(es) > 0 && strings.Contains(es[len(es)-1].Checkpoint.Value, "0AT1")
	})
	if len(got) != 4 || filtered != 1 {
		t.Fatalf("%d entries, %d filtered: want rows 0–3, row 4 dropped", len(got), filtered)
	}
	for i, e := range got {
		row := line(t, e)
		if _, ok := row["TIMESTAMP_DERIVED"]; ok || len(row["USER_ID"]) != shape.HashLen || row["CLIENT_IP"] != "10.1.2.x" || row["REQUEST_ID"] != fmt.Sprint("req-", i) {
			t.Fatalf("row %d: %v", i, row)
		}
		// The time is the row's as read, though the field is dropped.
		if want := time.Date(2026, 11, 28, 10, 0, i, 0, time.UTC); !e.Time.Equal(want) {
			t.Fatalf("row %d at %v, want %v", i, e.Time, want)
		}
		if advanced := strings.Contains(e.Checkpoint.Value, "0AT1"); advanced != (i == 3) {
			t.Fatalf("row %d carries %s", i, e.Checkpoint.Value)
		}
	}
}

func TestELFFileWhoseRowsAreAllLeftOutStillMovesTheCheckpoint(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	org := &fakesf.ELFOrg{}
	org.Add("0AT1", "API", now.Add(-3*time.Hour), ipBody(3, func(int) string { return "200" }))
	org.Add("0AT2", "API", now.Add(-2*time.Hour), ipBody(3, func(int) string { return "200" }))
	sh := shaper(t, shape.Config{Sample: map[string]float64{"api": 0}})
	s := elfSource(t, org, salesforce.ELFSpec{EventTypes: []string{"API"}, Shaper: sh}, now)
	got := runELF(t, s, nil, func(es []ports.Entry) bool { return len(es) >= 2 })
	if len(got) != 2 || !got[0].CheckpointOnly || !got[1].CheckpointOnly ||
		!strings.Contains(got[0].Checkpoint.Value, "0AT1") || !strings.Contains(got[1].Checkpoint.Value, "0AT2") {
		t.Fatalf("entries %+v: want one checkpoint-only entry per file", got)
	}
}

func TestELFSamplesByRequestIDElseTheWholeRow(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	var b strings.Builder
	b.WriteString("EVENT_TYPE,TIMESTAMP_DERIVED,REQUEST_ID,N\n")
	rows := make([]map[string]string, 200)
	for i := range rows {
		id := fmt.Sprint("4-", i)
		if i%10 == 0 {
			id = "" // no REQUEST_ID: the row decides
		}
		rows[i] = map[string]string{"EVENT_TYPE": "API", "TIMESTAMP_DERIVED": "2026-11-28T10:00:00.000Z", "REQUEST_ID": id, "N": fmt.Sprint(i)}
		fmt.Fprintf(&b, "API,2026-11-28T10:00:00.000Z,%s,%d\n", id, i)
	}
	org := &fakesf.ELFOrg{}
	org.Add("0AT1", "API", now.Add(-3*time.Hour), b.String())
	sampled := 0
	cfg := shape.Config{Sample: map[string]float64{"API": 0.3}, SampledOut: func(et string) {
		if et == "API" {
			sampled++
		}
	}}
	s := elfSource(t, org, salesforce.ELFSpec{EventTypes: []string{"API"}, Shaper: shaper(t, cfg)}, now)
	got := runELF(t, s, nil, func(es []ports.Entry) bool {
		return len(es) > 0 && strings.Contains(es[len(es)-1].Checkpoint.Value, "0AT1")
	})
	ref := shaper(t, shape.Config{Sample: cfg.Sample}).For("API")
	var want []string
	for _, r := range rows {
		key := r["REQUEST_ID"]
		if key == "" {
			j, _ := json.Marshal(r)
			key = string(j)
		}
		if ref.Keep(key) {
			want = append(want, r["N"])
		}
	}
	var ns []string
	for _, e := range got {
		ns = append(ns, line(t, e)["N"])
	}
	if !slices.Equal(ns, want) || sampled != 200-len(want) || len(want) < 40 || len(want) > 80 {
		t.Fatalf("kept %v (%d sampled out), want %v", ns, sampled, want)
	}
}

// loginHistory is an org with LoginHistory rows 0…n-1, one a second; rows
// whose number noisy reports true have Status "noise".
func loginHistory(n int, noisy func(int) bool) *fakesf.Org {
	org := &fakesf.Org{}
	base := time.Date(2026, 11, 28, 11, 30, 0, 0, time.UTC)
	for i := range n {
		st := "Success"
		if noisy(i) {
			st = "noise"
		}
		org.AddRow("LoginHistory", "LoginTime", map[string]any{"Id": fmt.Sprintf("0Ya%05d", i),
			"LoginTime": base.Add(time.Duration(i) * time.Second).Format("2006-01-02T15:04:05.000-0700"), "UserId": "005000000000001", "Status": st})
	}
	return org
}

func TestSOQLLeftOutRowsMoveTheCursor(t *testing.T) {
	// Rows 3, 8 and 9 are dropped: row 4's entry carries the cursor past
	// row 3; nothing follows 9, so a checkpoint-only entry carries it.
	org := loginHistory(10, func(i int) bool { return i == 3 || i >= 8 })
	filtered := 0
	s := soqlSource(t, org, salesforce.ObjectSpec{Name: "LoginHistory", TimestampField: "LoginTime", PollInterval: time.Hour})
	s.Shaper = shaper(t, shape.Config{Salt: "pepper", Filtered: func(string) { filtered++ }, Rules: []shape.Rule{
		{Action: shape.Hash, Fields: []string{"UserId"}},
		{Action: shape.DropRow, Match: map[string]string{"Status": "noise"}},
	}})
	c := &collected{}
	runFor(t, s, nil, c, 8)
	es := c.entries
	if len(es) != 8 || !es[7].CheckpointOnly || filtered != 3 {
		t.Fatalf("%d entries (last %+v), %d filtered: want 7 rows and one checkpoint-only entry", len(es), es[len(es)-1], filtered)
	}
	var ids []string
	for _, e := range es[:7] {
		if e.CheckpointOnly || field(t, e, "UserId") == "005000000000001" || len(field(t, e, "UserId")) != shape.HashLen {
			t.Fatalf("entry %+v", e)
		}
		ids = append(ids, field(t, e, "Id"))
	}
	if !slices.Equal(ids, []string{"0Ya00000", "0Ya00001", "0Ya00002", "0Ya00004", "0Ya00005", "0Ya00006", "0Ya00007"}) {
		t.Fatalf("rows %v", ids)
	}
	if !strings.Contains(es[3].Checkpoint.Value, "0Ya00003") || !strings.Contains(es[7].Checkpoint.Value, "0Ya00009") ||
		lastTS(t, es[7].Checkpoint.Value) != "2026-11-28T11:30:09.000+0000" {
		t.Fatalf("checkpoints %q / %q", es[3].Checkpoint.Value, es[7].Checkpoint.Value)
	}
}

func TestSOQLSamplesByRecordID(t *testing.T) {
	org := loginHistory(100, func(int) bool { return false })
	s := soqlSource(t, org, salesforce.ObjectSpec{Name: "LoginHistory", TimestampField: "LoginTime", PollInterval: time.Hour})
	cfg := shape.Config{Sample: map[string]float64{"Login*": 0.4}}
	s.Shaper = shaper(t, cfg)
	ref := shaper(t, cfg).For("LoginHistory")
	var want []string
	for i := range 100 {
		if id := fmt.Sprintf("0Ya%05d", i); ref.Keep(id) {
			want = append(want, id)
		}
	}
	c := &collected{}
	// The last row (99) is sampled out or kept: either way the cursor ends
	// past it.
	n := len(want)
	if !slices.Contains(want, "0Ya00099") {
		n++
	}
	runFor(t, s, nil, c, n)
	var ids []string
	for _, e := range c.entries {
		if !e.CheckpointOnly {
			ids = append(ids, field(t, e, "Id"))
		}
	}
	if !slices.Equal(ids, want) || !strings.Contains(c.last().Checkpoint.Value, "0Ya00099") {
		t.Fatalf("kept %v, want %v; last checkpoint %s", ids, want, c.last().Checkpoint.Value)
	}
}

func TestSOQLBigObjectWindowEndingInALeftOutRowStillAdvances(t *testing.T) {
	org := &fakesf.Org{}
	base := time.Date(2026, 11, 28, 11, 30, 0, 0, time.UTC)
	for i := range 10 {
		org.Add(fmt.Sprintf("0Lg%05d", i), base.Add(time.Duration(i)*time.Second))
	}
	s := soqlSource(t, org, salesforce.ObjectSpec{Name: "LoginEvent", PollInterval: time.Hour})
	// Rows 8 and 9 are dropped: the window's last entry is a checkpoint.
	s.Shaper = shaper(t, shape.Config{Rules: []shape.Rule{
		{Action: shape.DropRow, Match: map[string]string{"Username": "u0Lg0000?", "Id": "*8"}},
		{Action: shape.DropRow, Match: map[string]string{"Id": "*9"}}}})
	c := &collected{}
	runFor(t, s, nil, c, 9)
	es := c.entries
	if len(es) != 9 || !es[8].CheckpointOnly || field(t, es[7], "Id") != "0Lg00007" {
		t.Fatalf("%d entries: want rows 0–7 and a checkpoint-only entry", len(es))
	}
	if lastTS(t, es[8].Checkpoint.Value) != "2026-11-28T11:30:09.000+0000" || es[7].Checkpoint.Value != es[0].Checkpoint.Value {
		t.Fatalf("checkpoints: row 7 %s, end %s", es[7].Checkpoint.Value, es[8].Checkpoint.Value)
	}
}

// apiFile is an API EventLogFile of n rows with the type's 27 columns.
func apiFile(n int) string {
	var b strings.Builder
	b.WriteString("EVENT_TYPE,TIMESTAMP,REQUEST_ID,ORGANIZATION_ID,USER_ID,RUN_TIME,CPU_TIME,URI,SESSION_KEY,LOGIN_KEY,USER_TYPE," +
		"REQUEST_STATUS,DB_TOTAL_TIME,API_TYPE,API_VERSION,CLIENT_NAME,METHOD_NAME,ENTITY_NAME,ROWS_PROCESSED,REQUEST_SIZE," +
		"RESPONSE_SIZE,DB_BLOCKS,DB_CPU_TIME,CLIENT_IP,URI_ID_DERIVED,USER_ID_DERIVED,TIMESTAMP_DERIVED\r\n")
	for i := range n {
		ms := int64(i) * 3_600_000 / int64(max(n, 1))
		ts := fmt.Sprintf("2026-11-28T10:%02d:%02d.%03dZ", ms/60_000, ms/1000%60, ms%1000)
		fmt.Fprintf(&b, "API,202611281%03d.%03d,4-%010d,00D000000000001,005%012d,%d,%d,/services/data/v60.0/sobjects/Account/001%012dAAA,"+
			"Jk2pQ%010dxV,Wq%012d,S,S,%d,R,60.0,DataLoader,query,Account,%d,%d,%d,%d,%d,10.%d.%d.%d,001%012dAAA,005%012dAAA,%s\r\n",
			ms/1000%1000, ms%1000, i, i%500, 20+i%300, 5+i%90, i, i, i, 1_000_000+i%700, i%2000, 300+i%50, 4000+i%9000, i%120, i%40,
			i%256, (i/256)%256, i%250, i, i%500, ts)
	}
	return b.String()
}

// elfRows runs an EventLogFile source with sh over body until it has
// emitted rows entries, and returns the time that took.
func elfRows(b *testing.B, body string, rows int, sh *shape.Shaper) time.Duration {
	b.Helper()
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	org := &fakesf.ELFOrg{}
	org.Add("0AT1", "API", now.Add(-time.Hour), body)
	srv := httptest.NewServer(org)
	defer srv.Close()
	a, _ := salesforce.New(salesforce.Config{AuthMode: sfrules.ClientCredentials, LoginURL: srv.URL, ClientID: "ck", ClientSecret: "x"})
	s, _ := salesforce.NewELFSource(a, "60.0", salesforce.ELFSpec{Interval: "Hourly", EventTypes: []string{"API"}, PollInterval: time.Hour, Shaper: sh}, clockAt(now), nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	n := 0
	start := time.Now()
	_ = s.Run(ctx, func(string) (string, bool) { return "", false }, func(ports.Entry) error {
		if n++; n == rows {
			cancel()
		}
		return nil
	})
	if n != rows {
		b.Fatalf("%d rows emitted, want %d", n, rows)
	}
	return time.Since(start)
}

// BenchmarkEventLogFileTransforms streams one API EventLogFile (100,000
// rows of the type's 27 columns, served gzip-compressed) through the
// source, untransformed and with three transforms (hash USER_ID, mask
// CLIENT_IP, regex_replace on URI), alternately in one run, and reports
// both rows/s and their ratio (transformed ÷ untransformed).
func BenchmarkEventLogFileTransforms(b *testing.B) {
	const rows = 100_000
	body := apiFile(rows)
	three := shaper(b, shape.Config{Salt: "pepper", Rules: []shape.Rule{
		{Action: shape.Hash, Fields: []string{"USER_ID"}},
		{Action: shape.Mask, Fields: []string{"CLIENT_IP"}},
		{Action: shape.RegexReplace, Fields: []string{"URI"}, Pattern: `/[0-9A-Za-z]{15}(?:[0-9A-Za-z]{3})?$`, Replacement: "/:id"},
	}})
	var plain, shaped time.Duration
	runs := 0
	for b.Loop() {
		plain += elfRows(b, body, rows, nil)
		shaped += elfRows(b, body, rows, three)
		runs++
	}
	p, s := float64(rows*runs)/plain.Seconds(), float64(rows*runs)/shaped.Seconds()
	b.ReportMetric(p, "untransformed-rows/s")
	b.ReportMetric(s, "transformed-rows/s")
	b.ReportMetric(s/p, "ratio")
	b.Logf("%d rows × %d: untransformed %.0f rows/s, three transforms %.0f rows/s, ratio %.3f", rows, runs, p, s, s/p)
}
