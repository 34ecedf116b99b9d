package backfill

import (
	"fmt"
	"io"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/salesforce"
	"github.com/sf2loki/sf2loki/internal/ports"
)

// backfillProgressEvery is how often a backfill writes a progress line
// when stderr is not a terminal; on a terminal its one status line is
// redrawn every backfillRedrawEvery.
var (
	backfillProgressEvery = 10 * time.Second
	backfillRedrawEvery   = 500 * time.Millisecond
)

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// backfillProgress counts a backfill's work and shows it on out: on a
// terminal one status line redrawn in place, else a plain line every
// backfillProgressEvery. It is also the writer of the backfill's log, so
// that a log line never lands inside the status line.
type backfillProgress struct {
	out   io.Writer
	tty   bool
	clock ports.Clock
	start time.Time
	// files and bytesTotal are the work listed (bytesTotal 0: a length
	// is unknown, and the estimate counts files).
	files, bytesTotal int64

	done, failed, rows, bytes atomic.Int64

	mu    sync.Mutex // serialises writes to out
	shown bool       // a status line is on the terminal
	stop  chan struct{}
	ended chan struct{}
}

func newBackfillProgress(out io.Writer, clk ports.Clock) *backfillProgress {
	return &backfillProgress{out: out, tty: isTerminal(out), clock: clk, start: clk.Now()}
}

// begin starts the display of files to do (bytesTotal, when every length
// is known).
func (p *backfillProgress) begin(files, bytesTotal int64) {
	p.files, p.bytesTotal = files, bytesTotal
	p.start = p.clock.Now()
	p.stop, p.ended = make(chan struct{}), make(chan struct{})
	every := backfillProgressEvery
	if p.tty {
		every = backfillRedrawEvery
	}
	go func() {
		defer close(p.ended)
		for {
			select {
			case <-p.stop:
				return
			case <-p.clock.After(every):
			}
			p.mu.Lock()
			if p.tty {
				p.draw()
			} else {
				fmt.Fprintln(p.out, p.line())
			}
			p.mu.Unlock()
		}
	}()
}

// end stops the display and clears the status line.
func (p *backfillProgress) end() {
	if p.stop == nil {
		return
	}
	close(p.stop)
	<-p.ended
	p.stop = nil
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shown {
		fmt.Fprint(p.out, "\r\033[K")
		p.shown = false
	}
}

// draw redraws the status line; p.mu is held.
func (p *backfillProgress) draw() {
	fmt.Fprint(p.out, "\r\033[K"+p.line())
	p.shown = true
}

// Write writes a log line above the status line.
func (p *backfillProgress) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.shown {
		fmt.Fprint(p.out, "\r\033[K")
	}
	n, err := p.out.Write(b)
	if p.shown {
		p.draw()
	}
	return n, err
}

// printf writes one line of the backfill's own (not its log's).
func (p *backfillProgress) printf(format string, args ...any) {
	_, _ = fmt.Fprintf(p, format+"\n", args...)
}

// line is the progress: files done of those to do, rows, bytes, rate and
// the time left.
func (p *backfillProgress) line() string {
	elapsed := p.clock.Now().Sub(p.start)
	done, rows, bytes := p.done.Load(), p.rows.Load(), p.bytes.Load()
	s := fmt.Sprintf("backfill: %d/%d files, %s rows, %s, %s rows/s, ETA %s", done, p.files, thousands(rows), salesforce.ByteSize(bytes),
		thousands(int64(perSec(rows, elapsed))), p.eta(elapsed, done, bytes))
	if f := p.failed.Load(); f > 0 {
		s += fmt.Sprintf(", %d failed", f)
	}
	return s
}

// eta is the time left at the rate so far: by bytes when every length is
// known, else by files.
func (p *backfillProgress) eta(elapsed time.Duration, done, bytes int64) string {
	var left, rate float64
	switch {
	case p.bytesTotal > 0 && bytes > 0:
		left, rate = float64(max(p.bytesTotal-bytes, 0)), perSec(bytes, elapsed)
	case done > 0:
		left, rate = float64(p.files-done), perSec(done, elapsed)
	}
	if rate <= 0 {
		return "unknown"
	}
	return time.Duration(left / rate * float64(time.Second)).Round(time.Second).String()
}

func perSec(n int64, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// thousands writes n with thousands separators: 1,234,567.
func thousands(n int64) string {
	s := strconv.FormatInt(n, 10)
	if n < 0 {
		return "-" + thousands(-n)
	}
	for i := len(s) - 3; i > 0; i -= 3 {
		s = s[:i] + "," + s[i:]
	}
	return s
}
