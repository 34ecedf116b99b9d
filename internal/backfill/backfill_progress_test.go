package backfill

import (
	"bytes"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/clock"
	"github.com/sf2loki/sf2loki/internal/ports"
)

// The progress line counts files, rows and bytes and estimates the time
// left; without a terminal it is printed every backfillProgressEvery.
func TestBackfillProgressLines(t *testing.T) {
	every := backfillProgressEvery
	backfillProgressEvery = 20 * time.Millisecond
	defer func() { backfillProgressEvery = every }()
	var buf lockedBuffer
	clk := &steppedClock{now: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)}
	p := newBackfillProgress(&buf, clk)
	p.begin(10, 2_000_000)
	clk.step(40 * time.Second)
	p.done.Add(4)
	p.rows.Add(123_456)
	p.bytes.Add(800_000)
	want := "backfill: 4/10 files, 123,456 rows, 800.0 kB, 3,086 rows/s, ETA 1m0s"
	if got := p.line(); got != want {
		t.Fatalf("line %q, want %q", got, want)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(buf.String(), want) && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	p.end()
	if !strings.Contains(buf.String(), want+"\n") || strings.Contains(buf.String(), "\r") {
		t.Fatalf("output %q", buf.String())
	}
}

// On a terminal the status line is redrawn in place, a log line is written
// above it, and the end clears it.
func TestBackfillProgressOnATerminal(t *testing.T) {
	redraw := backfillRedrawEvery
	backfillRedrawEvery = 5 * time.Millisecond
	defer func() { backfillRedrawEvery = redraw }()
	var buf lockedBuffer
	p := newBackfillProgress(&buf, &steppedClock{now: time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)})
	p.tty = true
	p.begin(3, 0)
	deadline := time.Now().Add(5 * time.Second)
	for strings.Count(buf.String(), "\r\033[K") < 2 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	p.printf("warning: a log line")
	p.end()
	out := buf.String()
	if !strings.Contains(out, "\r\033[Kbackfill: 0/3 files, 0 rows, 0 B, 0 rows/s, ETA unknown") ||
		!strings.Contains(out, "\r\033[Kwarning: a log line\n\r\033[Kbackfill: 0/3") || !strings.HasSuffix(out, "\r\033[K") ||
		strings.Contains(out, "ETA unknown\n") {
		t.Fatalf("terminal output %q", out)
	}
}

type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// steppedClock reads a time the test sets; its timers are real.
type steppedClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *steppedClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *steppedClock) step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *steppedClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

func (c *steppedClock) NewTimer(d time.Duration) ports.Timer { return clock.New().NewTimer(d) }
