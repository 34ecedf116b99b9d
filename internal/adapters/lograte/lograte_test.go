package lograte_test

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/lograte"
)

var t0 = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestManyDropsLogOneLineThenTheCount(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	var l lograte.Limiter
	for i := range 100 { // 100 drops within 9.9s
		l.Log(log, slog.LevelWarn, t0.Add(time.Duration(i)*99*time.Millisecond), "too_old", "dropped", "reason", "too_old")
	}
	if got := strings.Count(buf.String(), "\n"); got != 1 || strings.Contains(buf.String(), "more=") {
		t.Fatalf("100 drops in one interval logged %d lines, want 1 without a count:\n%s", got, &buf)
	}
	// Another reason has its own interval.
	l.Log(log, slog.LevelWarn, t0.Add(time.Second), "too_long", "dropped", "reason", "too_long")
	// Once the interval has passed, the next line says how many were held.
	l.Log(log, slog.LevelWarn, t0.Add(10*time.Second), "too_old", "dropped", "reason", "too_old")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 || !strings.Contains(lines[1], "reason=too_long") ||
		!strings.Contains(lines[2], "reason=too_old more=99 since=2026-03-01T12:00:00Z") {
		t.Fatalf("lines:\n%s", &buf)
	}
}

func TestAllowCountsPerKey(t *testing.T) {
	l := lograte.Limiter{Every: time.Minute}
	if ok, more, _ := l.Allow("a", t0); !ok || more != 0 {
		t.Fatal("the first line is held back")
	}
	for range 3 {
		if ok, _, _ := l.Allow("a", t0.Add(59*time.Second)); ok {
			t.Fatal("a line let through within the interval")
		}
	}
	if ok, more, since := l.Allow("a", t0.Add(time.Minute)); !ok || more != 3 || !since.Equal(t0) {
		t.Fatalf("after the interval: %v %d %v", ok, more, since)
	}
}
