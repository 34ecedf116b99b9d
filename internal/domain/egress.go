package domain

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"math"
	"sync"
	"time"

	"github.com/sf2loki/sf2loki/internal/ports"
)

// EgressKey is the checkpoint key holding the daily byte budget's use:
// {"date":"YYYY-MM-DD","bytes":N}. It is written with the lane's
// checkpoints, fenced like them, so a restart or a new leader continues the
// day's count.
const EgressKey = "egress:budget"

// BudgetAction is what the governor does once the day's budget is spent.
type BudgetAction int

// Budget actions.
const (
	// BudgetPause holds every push (and so every commit) until 00:00 UTC.
	BudgetPause BudgetAction = iota
	// BudgetDrop discards each batch and lets its checkpoints move.
	BudgetDrop
)

// EgressConfig bounds what one pipeline ships. Zero values are no limit.
type EgressConfig struct {
	// LinesPerSecond and BytesPerSecond are token buckets holding one
	// second's worth: a batch waits until both have its lines and line
	// bytes (a batch larger than a second's worth waits for a full bucket
	// and leaves it in debt). Lossless: they only delay.
	LinesPerSecond float64
	BytesPerSecond float64
	// DailyBytes is the line bytes (before compression) admitted per UTC
	// day. A batch is admitted while the day's use is below it, so the use
	// ends at most one batch above.
	DailyBytes int64
	Action     BudgetAction
	// OnDrop is told of each batch BudgetDrop discards.
	OnDrop func(entries int, bytes int64)
	Logger *slog.Logger
}

// EgressStatus is the governor's state for health endpoints and metrics.
type EgressStatus struct {
	Day    string // YYYY-MM-DD, UTC
	Used   int64  // line bytes admitted on Day
	Budget int64  // 0: none
	// Paused is true while pushes wait for the next UTC day (BudgetPause).
	Paused bool
	// Until is when a pause ends (00:00 UTC of the next day).
	Until time.Time
}

// Egress governs a pipeline's pushes: rate limits and a daily byte budget.
// It is shared by the pipeline's lanes; every admission and every waiter
// reads the clock itself, so each lane notices the day's rollover on its
// own (a waiter never depends on another to wake it).
type Egress struct {
	clock ports.Clock
	cfg   EgressConfig
	log   *slog.Logger

	mu      sync.Mutex
	lines   tokenBucket
	bytes   tokenBucket
	day     string
	used    int64
	warned  bool // the 80% warning was logged for day
	paused  bool // the budget is spent for day (BudgetPause)
	holding int  // admissions waiting (paused or rate limited)
}

// NewEgress returns a governor, or nil (no governance) when cfg sets no
// limit.
func NewEgress(clock ports.Clock, cfg EgressConfig) (*Egress, error) {
	for name, v := range map[string]float64{"lines per second": cfg.LinesPerSecond, "bytes per second": cfg.BytesPerSecond, "daily bytes": float64(cfg.DailyBytes)} {
		if v < 0 || math.IsNaN(v) || math.IsInf(v, 0) {
			return nil, configErrorf("egress %s must be a finite number, 0 or more: %v", name, v)
		}
	}
	if cfg.Action != BudgetPause && cfg.Action != BudgetDrop {
		return nil, configErrorf("egress budget action %d is neither pause nor drop", cfg.Action)
	}
	if cfg.LinesPerSecond == 0 && cfg.BytesPerSecond == 0 && cfg.DailyBytes == 0 {
		return nil, nil
	}
	if clock == nil {
		return nil, configErrorf("egress governor needs a clock")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	now := clock.Now()
	g := &Egress{clock: clock, cfg: cfg, log: log, day: utcDay(now),
		lines: newTokenBucket(cfg.LinesPerSecond, now), bytes: newTokenBucket(cfg.BytesPerSecond, now)}
	return g, nil
}

func utcDay(t time.Time) string { return t.UTC().Format(time.DateOnly) }

// nextUTCDay is 00:00 UTC after t.
func nextUTCDay(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d+1, 0, 0, 0, 0, time.UTC)
}

// egressRecord is EgressKey's value.
type egressRecord struct {
	Date  string `json:"date"`
	Bytes int64  `json:"bytes"`
}

// Restore takes the day's use from the checkpoint document (EgressKey's
// value, when stored). A record of an earlier day is no use; one of a later
// day (another replica's clock ran ahead of this one's at midnight) is taken
// as today's, so the count is never lost to clock skew. An unreadable one
// is logged and counted from 0.
func (g *Egress) Restore(value string, ok bool) {
	if g == nil {
		return
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.day, g.used, g.warned, g.paused = utcDay(g.clock.Now()), 0, false, false
	if !ok || g.cfg.DailyBytes == 0 {
		return
	}
	var r egressRecord
	if err := json.Unmarshal([]byte(value), &r); err != nil || r.Bytes < 0 {
		g.log.Warn("egress: the daily budget's use in the checkpoint document is unreadable; counting today's use from 0",
			"key", EgressKey, "value", value, "error", err)
		return
	}
	if _, err := time.Parse(time.DateOnly, r.Date); err != nil {
		g.log.Warn("egress: the daily budget's use in the checkpoint document has no valid date; counting today's use from 0",
			"key", EgressKey, "value", value)
		return
	}
	tomorrow := utcDay(g.clock.Now().AddDate(0, 0, 1))
	switch {
	case r.Date > tomorrow:
		g.log.Warn("egress: the daily budget's use in the checkpoint document is dated later than tomorrow (a clock far ahead, or a hand edit); counting today's use from 0",
			"key", EgressKey, "value", value, "today", g.day)
	case r.Date >= g.day:
		g.day, g.used = r.Date, r.Bytes
		g.log.Info("egress: continuing the day's budget", "day", g.day, "used_bytes", g.used, "budget_bytes", g.cfg.DailyBytes)
	}
}

// CheckEgressRecord reports what is wrong with an EgressKey value written by
// hand (nil when it would be taken).
func CheckEgressRecord(value string) error {
	var r egressRecord
	if err := json.Unmarshal([]byte(value), &r); err != nil {
		return fmt.Errorf(`%s must be {"date":"YYYY-MM-DD","bytes":N}: %w`, EgressKey, err)
	}
	if _, err := time.Parse(time.DateOnly, r.Date); err != nil || r.Bytes < 0 {
		return fmt.Errorf(`%s must be {"date":"YYYY-MM-DD","bytes":N} with a valid date and N >= 0, got %s`, EgressKey, value)
	}
	return nil
}

// Value is EgressKey's value to commit: the day's use. ok is false when no
// daily budget is set (nothing to keep).
func (g *Egress) Value() (string, bool) {
	if g == nil || g.cfg.DailyBytes == 0 {
		return "", false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	b, _ := json.Marshal(egressRecord{Date: g.day, Bytes: g.used})
	return string(b), true
}

// Status reports the governor's state.
func (g *Egress) Status() EgressStatus {
	if g == nil {
		return EgressStatus{}
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.clock.Now()
	g.rollover(now)
	s := EgressStatus{Day: g.day, Used: g.used, Budget: g.cfg.DailyBytes, Paused: g.spent() && g.cfg.Action == BudgetPause}
	if s.Paused {
		s.Until = g.dayEnd(now)
	}
	return s
}

// dayEnd is when the counted day ends: 00:00 UTC after it (g.mu held). The
// counted day is never before the clock's.
func (g *Egress) dayEnd(now time.Time) time.Time {
	if d, err := time.Parse(time.DateOnly, g.day); err == nil {
		return d.AddDate(0, 0, 1)
	}
	return nextUTCDay(now)
}

// spent reports whether the counted day's budget is used up (g.mu held):
// a pause from the moment it is, even before a batch waits.
func (g *Egress) spent() bool { return g.cfg.DailyBytes > 0 && g.used >= g.cfg.DailyBytes }

// Holding reports whether an admission is waiting on the governor (a
// pause or a rate limit): lanes waiting so are not stalled.
func (g *Egress) Holding() bool {
	if g == nil {
		return false
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.holding > 0
}

// rollover starts a new day's count once the clock's UTC day is later than
// the one counted (g.mu held).
func (g *Egress) rollover(now time.Time) {
	today := utcDay(now)
	if today <= g.day {
		return
	}
	if g.paused {
		g.log.Info("egress: a new UTC day; the daily budget is renewed and pushes resume", "day", today, "spent_bytes_yesterday", g.used)
	}
	g.day, g.used, g.warned, g.paused = today, 0, false, false
}

// Admit waits until a batch of lines entries holding bytes line bytes may
// be pushed. It returns true to push, false to drop it (BudgetDrop with the
// day's budget spent; OnDrop was told), or ctx's error once ctx ends while
// it waits (the batch is then abandoned).
//
// stop, when it ends, also ends a wait for the next UTC day (not a rate
// limit's): a stopping leader need not spend its drain waiting for a
// midnight that nothing can be pushed before.
func (g *Egress) Admit(ctx, stop context.Context, lines int, bytes int64) (bool, error) {
	if g == nil || lines == 0 {
		return true, nil
	}
	for {
		g.mu.Lock()
		now := g.clock.Now()
		g.rollover(now)
		var wait time.Duration
		if g.spent() {
			if g.cfg.Action == BudgetDrop {
				g.mu.Unlock()
				if g.cfg.OnDrop != nil {
					g.cfg.OnDrop(lines, bytes)
				}
				return false, nil
			}
			until := g.dayEnd(now)
			if !g.paused {
				g.paused = true
				g.log.Warn("egress: the daily byte budget is spent; pushes and commits pause until 00:00 UTC, then resume where they stopped",
					"day", g.day, "used_bytes", g.used, "budget_bytes", g.cfg.DailyBytes, "until", until)
			}
			wait = max(until.Sub(now), time.Millisecond)
		} else {
			wait = max(g.lines.wait(now, float64(lines)), g.bytes.wait(now, float64(bytes)))
		}
		if wait <= 0 {
			g.lines.take(float64(lines))
			g.bytes.take(float64(bytes))
			g.used += bytes
			if b := g.cfg.DailyBytes; b > 0 && !g.warned && g.used*5 >= b*4 {
				g.warned = true
				g.log.Warn("egress: 80% of the daily byte budget is used", "day", g.day, "used_bytes", g.used, "budget_bytes", b,
					"then", map[BudgetAction]string{BudgetPause: "pushes pause until 00:00 UTC", BudgetDrop: "batches are dropped until 00:00 UTC"}[g.cfg.Action])
			}
			g.mu.Unlock()
			return true, nil
		}
		var stopped <-chan struct{}
		if g.spent() {
			stopped = stop.Done()
		}
		g.holding++
		g.mu.Unlock()
		var err error
		select {
		case <-g.clock.After(wait):
		case <-ctx.Done():
			err = ctx.Err()
		case <-stopped:
			err = stop.Err()
		}
		g.mu.Lock()
		g.holding--
		g.mu.Unlock()
		if err != nil {
			return false, fmt.Errorf("egress: waiting to push: %w", err)
		}
	}
}

// tokenBucket holds up to one second of rate; rate 0 is no limit.
type tokenBucket struct {
	rate, tokens float64
	last         time.Time
}

func newTokenBucket(rate float64, now time.Time) tokenBucket {
	return tokenBucket{rate: rate, tokens: rate, last: now}
}

// refill adds what accrued since the last reading, up to one second's worth.
func (b *tokenBucket) refill(now time.Time) {
	if el := now.Sub(b.last); el > 0 {
		b.tokens = min(b.rate, b.tokens+b.rate*el.Seconds())
		b.last = now
	}
}

// wait is how long until n may be taken: when the bucket holds n, or is
// full for an n above one second's worth.
func (b *tokenBucket) wait(now time.Time, n float64) time.Duration {
	if b.rate == 0 {
		return 0
	}
	b.refill(now)
	need := min(n, b.rate)
	if b.tokens >= need {
		return 0
	}
	return max(time.Duration((need-b.tokens)/b.rate*float64(time.Second)), time.Millisecond)
}

func (b *tokenBucket) take(n float64) {
	if b.rate > 0 {
		b.tokens -= n
	}
}
