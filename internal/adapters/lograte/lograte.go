// Package lograte rate-limits repeated log lines: a warning that can fire
// once per entry (an entry Loki refuses, an event that does not decode)
// logs at most once per key and interval, and the next line of the key
// says how many it held back since the last one.
//
// Imports: the standard library only; any adapter may use it.
package lograte

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// DefaultEvery is the interval of a Limiter whose Every is 0.
const DefaultEvery = 10 * time.Second

// Limiter lets one line per key through each Every and counts the lines
// it holds back. The zero value is ready to use; it is safe for concurrent
// use. Keys should be few (a reason, a topic): each is remembered.
type Limiter struct {
	// Every is the least time between two lines of one key (0:
	// DefaultEvery).
	Every time.Duration

	mu   sync.Mutex
	keys map[string]*held
}

type held struct {
	last time.Time // when the last line of the key was let through
	n    int       // lines held back since
}

// Allow reports whether a line of key may be logged at now and, when it
// may, how many lines of key were held back since the last one let through
// (at since).
func (l *Limiter) Allow(key string, now time.Time) (ok bool, more int, since time.Time) {
	every := l.Every
	if every <= 0 {
		every = DefaultEvery
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.keys == nil {
		l.keys = map[string]*held{}
	}
	h := l.keys[key]
	if h == nil {
		h = &held{}
		l.keys[key] = h
	}
	if !h.last.IsZero() && now.Sub(h.last) < every {
		h.n++
		return false, 0, time.Time{}
	}
	more, since = h.n, h.last
	h.last, h.n = now, 0
	return true, more, since
}

// Log logs msg with args at level when Allow lets a line of key through at
// now, adding "more" (the lines held back) and "since" (when the last line
// was logged) when some were.
func (l *Limiter) Log(log *slog.Logger, level slog.Level, now time.Time, key, msg string, args ...any) {
	ok, more, since := l.Allow(key, now)
	if !ok {
		return
	}
	if more > 0 {
		args = append(args, "more", more, "since", since.UTC().Format(time.RFC3339))
	}
	log.Log(context.Background(), level, msg, args...)
}
