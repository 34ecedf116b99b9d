package salesforce

import (
	"fmt"
	"io"
	"sync/atomic"
	"time"

	"github.com/sf2loki/sf2loki/internal/ports"
)

// ProgressEvery is how often long work (an EventLogFile download, a
// catch-up drain of an object) logs how far it got.
const ProgressEvery = 30 * time.Second

// downloadProgress counts what an EventLogFile download read and handed
// on, and logs it every ProgressEvery on the source's clock while the
// download lasts.
type downloadProgress struct {
	s      *ELFSource
	t      string
	f      elfFile
	start  time.Time
	bytes  atomic.Int64
	rows   atomic.Int64
	eof    atomic.Bool
	logged atomic.Bool
	stop   chan struct{}
	done   chan struct{}
}

// progress watches the download of f: body and emit count what passes
// through them; finish stops the watch (and, after a download that logged
// progress and read to the end, says it finished).
func (s *ELFSource) progress(t string, f elfFile, body io.Reader, emit func(ports.Entry) error) (io.Reader, func(ports.Entry) error, func()) {
	p := &downloadProgress{s: s, t: t, f: f, start: s.clock.Now(), stop: make(chan struct{}), done: make(chan struct{})}
	go p.watch()
	counted := func(e ports.Entry) error {
		err := emit(e)
		if err == nil && !e.CheckpointOnly {
			p.rows.Add(1)
		}
		return err
	}
	return countingReader{r: body, p: p}, counted, p.finish
}

func (p *downloadProgress) watch() {
	defer close(p.done)
	var last int64
	for {
		tm := p.s.clock.NewTimer(ProgressEvery)
		select {
		case <-p.stop:
			tm.Stop()
			return
		case <-tm.C():
		}
		n := p.bytes.Load()
		p.logged.Store(true)
		p.s.log.Info("eventlogfile: still downloading", p.attrs(n, "rate", perSecond(n-last, ProgressEvery))...)
		last = n
	}
}

func (p *downloadProgress) finish() {
	close(p.stop)
	<-p.done
	if p.logged.Load() && p.eof.Load() {
		p.s.log.Info("eventlogfile: download finished", p.attrs(p.bytes.Load())...)
	}
}

// attrs are the download's identity and counts, then more.
func (p *downloadProgress) attrs(n int64, more ...any) []any {
	size := "unknown"
	if p.f.length > 0 {
		size = ByteSize(p.f.length)
	}
	return append([]any{"event_type", p.t, "file", p.f.id, "log_date", p.f.logDate.Format(time.RFC3339),
		"rows", p.rows.Load(), "bytes", ByteSize(n), "size", size, "elapsed", p.s.clock.Now().Sub(p.start).Round(time.Second)}, more...)
}

type countingReader struct {
	r io.Reader
	p *downloadProgress
}

func (c countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.p.bytes.Add(int64(n))
	if err == io.EOF {
		c.p.eof.Store(true)
	}
	return n, err
}

// ByteSize writes n bytes for a person: 512 B, 1.5 MB.
func ByteSize(n int64) string {
	const unit = 1000
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %cB", float64(n)/float64(div), "kMGTPE"[exp])
}

// perSecond is a rate of n bytes over d.
func perSecond(n int64, d time.Duration) string {
	return ByteSize(int64(float64(n)/d.Seconds())) + "/s"
}

// drain is an object's catch-up drain: a drain that spans more than one
// page (or, bounded by max_catchup_records, more than one poll) logs the
// records read, the watermark and how far it is behind the clock every
// ProgressEvery from its first page, and once it has, a last line when it
// catches up.
type drain struct {
	start, logged time.Time
	records       int
}

// drainProgress records a page of n records read by o's drain; more says
// whether the drain goes on past it (a full page).
func (s *SOQLSource) drainProgress(o ObjectSpec, cur *cursor, n int, more bool) {
	now := s.clock.Now()
	s.mu.Lock()
	if s.drains == nil {
		s.drains = map[string]*drain{}
	}
	d := s.drains[o.Name]
	if d == nil && !more { // one page: no drain to speak of
		s.mu.Unlock()
		return
	}
	if d == nil {
		d = &drain{start: now, logged: now}
		s.drains[o.Name] = d
	}
	d.records += n
	log, records := "", d.records
	switch {
	case !more:
		if d.logged.After(d.start) {
			log = "eventlog_objects: caught up"
		}
		delete(s.drains, o.Name)
	case now.Sub(d.logged) >= ProgressEvery:
		d.logged = now
		log = "eventlog_objects: catching up"
	}
	s.mu.Unlock()
	if log != "" {
		s.log.Info(log, "object", o.Name, "records", records, "watermark", cur.LastTS, "behind", now.Sub(cur.last).Round(time.Second))
	}
}
