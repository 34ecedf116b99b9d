package salesforce_test

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/salesforce"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/ports/porttest"
	"github.com/sf2loki/sf2loki/internal/sfrules"
	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/internal/testenv/fakesf"
)

// A download that lasts logs its rows, bytes and rate every 30s on the
// source's clock, and says when it finished; a quick one says nothing.
func TestASlowEventLogFileDownloadLogsProgress(t *testing.T) {
	now := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	org := &fakesf.ELFOrg{}
	org.Add("0ATSLOW", "API", now.Add(-3*time.Hour), csvBody("s", 50))
	org.Add("0ATQUICK", "API", now.Add(-2*time.Hour), csvBody("q", 5))
	srv := httptest.NewServer(org)
	t.Cleanup(srv.Close)
	a, err := salesforce.New(salesforce.Config{AuthMode: sfrules.ClientCredentials, LoginURL: srv.URL, ClientID: "ck", ClientSecret: "x"})
	if err != nil {
		t.Fatal(err)
	}
	clk := porttest.NewFakeClock(now)
	logs := &testenv.Buffer{}
	s, err := salesforce.NewELFSource(a, "60.0", salesforce.ELFSpec{Interval: "Hourly", EventTypes: []string{"API"}, PollInterval: time.Hour},
		clk, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	// The sink is slow: the slow file's tenth row waits until the test has
	// moved the clock past two progress intervals.
	var rows atomic.Int64
	stuck, release := make(chan struct{}), make(chan struct{})
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		done <- s.Run(ctx, func(string) (string, bool) { return "", false }, func(e ports.Entry) error {
			if e.CheckpointOnly {
				return nil
			}
			if rows.Add(1) == 10 {
				close(stuck)
				<-release
			}
			return nil
		})
	}()
	select {
	case <-stuck:
	case <-ctx.Done():
		t.Fatal("the download did not start")
	}
	for i := 1; i <= 2; i++ {
		if err := clk.BlockUntil(ctx, 1); err != nil {
			t.Fatal(err)
		}
		clk.Advance(salesforce.ProgressEvery)
		waitFor(ctx, t, logs, "still downloading", i)
	}
	close(release)
	waitFor(ctx, t, logs, "download finished", 1)
	for rows.Load() < 55 && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	lines := slices.DeleteFunc(strings.Split(strings.TrimSpace(logs.String()), "\n"), func(l string) bool { return !strings.Contains(l, "download") })
	if len(lines) != 3 {
		t.Fatalf("want two progress lines and one finished line for the slow file, none for the quick one:\n%s", logs)
	}
	for _, want := range []string{"level=INFO", "event_type=API", "file=0ATSLOW", "rows=9", `bytes="`, `size="`, "elapsed=30s", `rate="`} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("the first progress line lacks %s: %s", want, lines[0])
		}
	}
	if !strings.Contains(lines[1], "elapsed=1m0s") || !strings.Contains(lines[1], `rate="0 B/s"`) {
		t.Errorf("the second progress line (nothing read meanwhile): %s", lines[1])
	}
	if !strings.Contains(lines[2], "file=0ATSLOW") || !strings.Contains(lines[2], "rows=50") {
		t.Errorf("the finished line: %s", lines[2])
	}
}

// waitFor waits until logs hold n lines with what.
func waitFor(ctx context.Context, t *testing.T, logs *testenv.Buffer, what string, n int) {
	t.Helper()
	for strings.Count(logs.String(), what) < n {
		if ctx.Err() != nil {
			t.Fatalf("no %d lines %q:\n%s", n, what, logs)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// A catch-up drain over several pages logs the records read and the
// watermark every 30s on the source's clock, then that it caught up; a
// poll of one page says nothing.
func TestACatchUpDrainLogsProgress(t *testing.T) {
	base := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	org := &fakesf.Org{}
	for i := range 450 {
		org.AddTo("LoginHistory", "LoginTime", fmt.Sprintf("0AT%05d", i), base.Add(time.Duration(i)*time.Second))
	}
	srv := httptest.NewServer(org)
	t.Cleanup(srv.Close)
	a, err := salesforce.New(salesforce.Config{AuthMode: sfrules.ClientCredentials, LoginURL: srv.URL, ClientID: "ck", ClientSecret: "x"})
	if err != nil {
		t.Fatal(err)
	}
	clk := porttest.NewFakeClock(base.Add(2 * time.Hour))
	logs := &testenv.Buffer{}
	s, err := salesforce.NewSOQLSource(a, "60.0", []salesforce.ObjectSpec{{Name: "LoginHistory", TimestampField: "LoginTime", PollInterval: time.Hour, Lookback: 3 * time.Hour}},
		clk, slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	// The sink takes 200ms a record: each page of 200 takes 40s.
	c := &collected{}
	slow := func(e ports.Entry) error {
		clk.Advance(200 * time.Millisecond)
		return c.emit(e)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx, func(string) (string, bool) { return "", false }, slow) }()
	waitFor(ctx, t, logs, "caught up", 1)
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(logs.String()), "\n")
	// The pages end at 40s, 80s and 90s: the second is 40s after the
	// first, the third is the last.
	if len(lines) != 2 || !strings.Contains(lines[0], `msg="eventlog_objects: catching up" object=LoginHistory records=400 watermark=2026-11-28T10:06:38.000+0000 behind=1h54m42s`) ||
		!strings.Contains(lines[1], `msg="eventlog_objects: caught up" object=LoginHistory records=452 watermark=2026-11-28T10:07:29.000+0000 behind=1h54m1s`) {
		t.Fatalf("want one progress line at the second page and one when caught up:\n%s", logs)
	}
}
