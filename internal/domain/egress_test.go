package domain_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/ports/porttest"
)

// seqSource emits n entries of size-byte lines on key, resuming after the
// position stored for it, then waits for ctx.
type seqSource struct {
	lane ports.Lane
	key  string
	n    int
	size int
}

func (s *seqSource) Name() string     { return s.key }
func (s *seqSource) Lane() ports.Lane { return s.lane }
func (s *seqSource) Run(ctx context.Context, resume func(string) (string, bool), emit func(ports.Entry) error) error {
	from := 1
	if v, ok := resume(s.key); ok {
		_, _ = fmt.Sscanf(v, "%d", &from)
		from++
	}
	for i := from; i <= s.n; i++ {
		line := fmt.Sprintf("%s %06d ", s.key, i)
		line += strings.Repeat("x", s.size-len(line))
		if err := emit(ports.Entry{Time: t0, Line: line, Labels: map[string]string{"source": s.key},
			Checkpoint: ports.Checkpoint{Key: s.key, Value: fmt.Sprintf("%06d", i)}}); err != nil {
			return nil
		}
	}
	<-ctx.Done()
	return nil
}

// egressRig is a sink and a checkpoint document that record when each
// line was pushed and each commit landed.
type egressRig struct {
	clk     ports.Clock
	mu      sync.Mutex
	pushed  map[string][]time.Time // per source label
	commits []time.Time
	doc     map[string]string
}

func newEgressRig(clk ports.Clock) *egressRig {
	return &egressRig{clk: clk, pushed: map[string][]time.Time{}, doc: map[string]string{}}
}

func (r *egressRig) Push(_ context.Context, batch []ports.Entry) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, e := range batch {
		r.pushed[e.Labels["source"]] = append(r.pushed[e.Labels["source"]], r.clk.Now())
	}
	return nil
}

func (r *egressRig) CommitMany(_ context.Context, kv map[string]string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	maps.Copy(r.doc, kv)
	r.commits = append(r.commits, r.clk.Now())
	return nil
}

func (r *egressRig) resume(k string) (string, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	v, ok := r.doc[k]
	return v, ok
}

// count is how many lines of src were pushed in [from, to).
func (r *egressRig) count(src string, from, to time.Time) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, at := range r.pushed[src] {
		if !at.Before(from) && at.Before(to) {
			n++
		}
	}
	return n
}

func (r *egressRig) budgetUse(t *testing.T) (day string, bytes int64) {
	t.Helper()
	v, ok := r.resume(domain.EgressKey)
	if !ok {
		t.Fatalf("no %s in the checkpoint document %v", domain.EgressKey, r.doc)
	}
	var rec struct {
		Date  string `json:"date"`
		Bytes int64  `json:"bytes"`
	}
	if err := json.Unmarshal([]byte(v), &rec); err != nil {
		t.Fatalf("%s = %q: %v", domain.EgressKey, v, err)
	}
	return rec.Date, rec.Bytes
}

var egressLane = domain.LaneConfig{QueueEntries: 50, QueueBytes: 1 << 20, BatchEntries: 10, BatchBytes: 1 << 20, BatchWait: 100 * time.Millisecond}

func egressPipeline(t *testing.T, clk ports.Clock, sink ports.Sink, cfg domain.EgressConfig, log *logBuffer) (*domain.Pipeline, *domain.Egress) {
	t.Helper()
	if log != nil {
		cfg.Logger = log.logger()
	}
	g, err := domain.NewEgress(clk, cfg)
	if err != nil {
		t.Fatal(err)
	}
	p, err := domain.NewPipeline(sink, clk, domain.PipelineConfig{Realtime: egressLane, Bulk: egressLane, Jitter: func() float64 { return 0.5 },
		MaxInFlight: 4, StallTimeout: 5 * time.Minute, Egress: g, Logger: slogOf(log)})
	if err != nil {
		t.Fatal(err)
	}
	return p, g
}

func slogOf(l *logBuffer) *slog.Logger {
	if l == nil {
		return nil
	}
	return l.logger()
}

// runUntil runs p until the clock reaches end (then stops it), moving the
// fake clock from timer to timer. during, if set, is called at every step.
func runUntil(t *testing.T, clk *porttest.FakeClock, p *domain.Pipeline, rig *egressRig, sources []ports.Source, end time.Time, during func()) error {
	t.Helper()
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	done := make(chan error, 1)
	go func() { done <- p.Run(ctx, ctx, rig, rig.resume, sources) }()
	for {
		synctest.Wait()
		if during != nil {
			during()
		}
		if len(done) == 1 {
			return <-done
		}
		ds := clk.Deadlines()
		if len(ds) == 0 || !ds[0].Before(end) {
			break
		}
		clk.Set(ds[0])
	}
	clk.Set(end)
	stop()
	for {
		synctest.Wait()
		if len(done) == 1 {
			return <-done
		}
		ds := clk.Deadlines()
		if len(ds) == 0 {
			t.Fatal("the pipeline does not stop")
		}
		clk.Set(ds[0])
	}
}

// The daily budget pauses both lanes at once when it is spent and both
// resume at 00:00 UTC (the older implementation woke only one of two
// paused lanes); nothing is pushed while paused, the stall guard does not
// mistake the pause for a stall, the 80% warning is logged once, and the
// day's use is in the checkpoint document.
func TestEgressBudgetPausesBothLanesUntilMidnight(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Date(2026, 3, 1, 23, 0, 0, 0, time.UTC)
		midnight := start.Add(time.Hour)
		clk := porttest.NewFakeClock(start)
		rig := newEgressRig(clk)
		log := &logBuffer{}
		// 100-byte lines; 300 fit the day's budget, each lane has 400.
		p, g := egressPipeline(t, clk, rig, domain.EgressConfig{DailyBytes: 30_000, Action: domain.BudgetPause}, log)
		sources := []ports.Source{&seqSource{lane: ports.LaneRealtime, key: "rt", n: 400, size: 100}, &seqSource{lane: ports.LaneBulk, key: "bulk", n: 400, size: 100}}
		var pausedAt time.Time
		err := runUntil(t, clk, p, rig, sources, midnight.Add(30*time.Minute), func() {
			if st := g.Status(); st.Paused && pausedAt.IsZero() {
				pausedAt = clk.Now()
				if !st.Until.Equal(midnight) {
					t.Errorf("paused until %v, want %v", st.Until, midnight)
				}
			}
		})
		if err != nil {
			t.Fatalf("run: %v", err)
		}
		if pausedAt.IsZero() || !pausedAt.Before(midnight) {
			t.Fatalf("never paused before midnight (paused at %v)", pausedAt)
		}
		before := rig.count("rt", start, midnight) + rig.count("bulk", start, midnight)
		if before != 300 {
			t.Fatalf("%d lines pushed on the first day, want the 300 the budget holds", before)
		}
		if n := rig.count("rt", pausedAt.Add(time.Second), midnight) + rig.count("bulk", pausedAt.Add(time.Second), midnight); n != 0 {
			t.Fatalf("%d lines pushed while paused", n)
		}
		for _, src := range []string{"rt", "bulk"} {
			if n := rig.count(src, midnight, midnight.Add(time.Minute)); n == 0 {
				t.Errorf("lane %s pushed nothing in the first minute of the new day: it did not notice the rollover", src)
			}
		}
		if day, used := rig.budgetUse(t); day != "2026-03-02" || used != 30_000 {
			t.Errorf("stored budget use %s %d, want 2026-03-02 30000 (the second day's budget spent too)", day, used)
		}
		if n := strings.Count(log.String(), "80% of the daily byte budget"); n != 2 {
			t.Errorf("the 80%% warning was logged %d times over two days, want 2:\n%s", n, log.String())
		}
		if strings.Contains(log.String(), "stalled") {
			t.Errorf("the pause was taken for a stall:\n%s", log.String())
		}
	})
}

// A new leader (or a restarted one) continues the day's count from the
// checkpoint document: it pauses after the rest of the budget, not after a
// whole new one. A count of an earlier day is not carried over.
func TestEgressBudgetSurvivesFailoverAndRestart(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		start := time.Date(2026, 3, 1, 10, 0, 0, 0, time.UTC)
		clk := porttest.NewFakeClock(start)
		rig := newEgressRig(clk)
		cfg := domain.EgressConfig{DailyBytes: 20_000, Action: domain.BudgetPause}
		src := func() []ports.Source {
			return []ports.Source{&seqSource{lane: ports.LaneBulk, key: "elf", n: 1000, size: 100}}
		}

		// The first leader ships 12,000 bytes (a source of 120 entries).
		p, _ := egressPipeline(t, clk, rig, cfg, nil)
		if err := runUntil(t, clk, p, rig, []ports.Source{&seqSource{lane: ports.LaneBulk, key: "elf", n: 120, size: 100}}, start.Add(time.Minute), nil); err != nil {
			t.Fatal(err)
		}
		if _, used := rig.budgetUse(t); used != 12_000 {
			t.Fatalf("first leader's stored use %d, want 12000", used)
		}
		// A new leader, a new governor, the same document: 80 more lines.
		p, g := egressPipeline(t, clk, rig, cfg, nil)
		if err := runUntil(t, clk, p, rig, src(), start.Add(time.Hour), nil); err != nil {
			t.Fatal(err)
		}
		if n := len(rig.pushed["elf"]); n != 200 {
			t.Fatalf("%d lines pushed over both leaders, want 200 (20,000 bytes)", n)
		}
		if !g.Status().Paused {
			t.Fatal("the new leader is not paused with the day's budget spent")
		}
		// A restart the same day stays paused.
		p, g = egressPipeline(t, clk, rig, cfg, nil)
		if err := runUntil(t, clk, p, rig, src(), start.Add(2*time.Hour), nil); err != nil {
			t.Fatal(err)
		}
		if n := len(rig.pushed["elf"]); n != 200 || !g.Status().Paused {
			t.Fatalf("after a restart: %d lines pushed, paused %v; want 200 and paused", n, g.Status().Paused)
		}
		// The next day a restarted process starts a fresh count.
		clk.Set(time.Date(2026, 3, 2, 9, 0, 0, 0, time.UTC))
		p, _ = egressPipeline(t, clk, rig, cfg, nil)
		if err := runUntil(t, clk, p, rig, src(), clk.Now().Add(time.Minute), nil); err != nil {
			t.Fatal(err)
		}
		if day, used := rig.budgetUse(t); day != "2026-03-02" || used != 20_000 || len(rig.pushed["elf"]) != 400 {
			t.Fatalf("next day: stored %s %d with %d lines pushed, want 2026-03-02 20000 and 400", day, used, len(rig.pushed["elf"]))
		}
	})
}

// With budget_action drop, batches past the budget are discarded and their
// checkpoints move: the source is not held, and what was dropped is told.
func TestEgressBudgetDropAdvances(t *testing.T) {
	bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
		rig := newEgressRig(clk)
		var mu sync.Mutex
		dropped := 0
		p, g := egressPipeline(t, clk, rig, domain.EgressConfig{DailyBytes: 5_000, Action: domain.BudgetDrop,
			OnDrop: func(n int, _ int64) { mu.Lock(); dropped += n; mu.Unlock() }}, nil)
		if err := runUntil(t, clk, p, rig, []ports.Source{&seqSource{lane: ports.LaneBulk, key: "elf", n: 200, size: 100}}, t0.Add(time.Minute), nil); err != nil {
			t.Fatal(err)
		}
		if n := len(rig.pushed["elf"]); n != 50 || dropped != 150 {
			t.Fatalf("%d pushed, %d dropped; want 50 and 150", n, dropped)
		}
		if v, _ := rig.resume("elf"); v != "000200" {
			t.Fatalf("checkpoint %q after the drops, want 000200", v)
		}
		if g.Status().Paused {
			t.Fatal("drop must not pause")
		}
	})
}

// The rate limits delay and lose nothing: 1,000 lines at 100 lines a
// second take about 10 s; 100 kB at 20 kB/s about 5 s.
func TestEgressRatesDelayLosslessly(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  domain.EgressConfig
		want time.Duration
	}{
		{"lines", domain.EgressConfig{LinesPerSecond: 100}, 9 * time.Second},
		{"bytes", domain.EgressConfig{BytesPerSecond: 20_000}, 4 * time.Second},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
				rig := newEgressRig(clk)
				p, _ := egressPipeline(t, clk, rig, tc.cfg, nil)
				if err := runUntil(t, clk, p, rig, []ports.Source{&seqSource{lane: ports.LaneBulk, key: "elf", n: 1000, size: 100}}, t0.Add(time.Minute), nil); err != nil {
					t.Fatal(err)
				}
				times := rig.pushed["elf"]
				if len(times) != 1000 {
					t.Fatalf("%d lines pushed, want 1000", len(times))
				}
				if took := times[len(times)-1].Sub(t0); took < tc.want || took > tc.want+2*time.Second {
					t.Fatalf("1000 lines took %s, want about %s", took, tc.want)
				}
			})
		})
	}
}

// A document written with another replica's clock a little ahead (the new
// day already begun there) is taken as today's count; an unreadable one is
// logged and counted from 0.
func TestEgressRestoreEdges(t *testing.T) {
	clk := porttest.NewFakeClock(time.Date(2026, 3, 1, 23, 59, 59, 0, time.UTC))
	log := &logBuffer{}
	g, err := domain.NewEgress(clk, domain.EgressConfig{DailyBytes: 1000, Logger: log.logger()})
	if err != nil {
		t.Fatal(err)
	}
	g.Restore(`{"date":"2026-03-02","bytes":900}`, true)
	if st := g.Status(); st.Day != "2026-03-02" || st.Used != 900 {
		t.Fatalf("a record of the next day: %+v, want it kept", st)
	}
	g.Restore(`{"date":"2026-02-28","bytes":900}`, true)
	if st := g.Status(); st.Used != 0 {
		t.Fatalf("a record of an earlier day: %+v, want 0", st)
	}
	g.Restore(`garbage`, true)
	if st := g.Status(); st.Used != 0 || !strings.Contains(log.String(), "unreadable") {
		t.Fatalf("an unreadable record: %+v, log %q", st, log.String())
	}
	if g, _ := domain.NewEgress(clk, domain.EgressConfig{}); g != nil {
		t.Fatal("no limits must give no governor")
	}
	if _, err := domain.NewEgress(clk, domain.EgressConfig{LinesPerSecond: -1}); err == nil {
		t.Fatal("a negative rate must be refused")
	}
}

// A record dated later than tomorrow (a replica whose clock was far ahead,
// or a hand edit) is not taken as today's count: otherwise the day would
// never roll over and a spent budget would pause until the day after that
// date.
func TestEgressRecordFromTheFarFutureIsNotTaken(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := porttest.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
		g, err := domain.NewEgress(clk, domain.EgressConfig{DailyBytes: 1000, Action: domain.BudgetPause})
		if err != nil {
			t.Fatal(err)
		}
		g.Restore(`{"date":"2099-12-31","bytes":1000}`, true)
		if st := g.Status(); st.Paused || st.Day != "2026-03-01" || st.Used != 0 {
			t.Fatalf("after a record dated 2099-12-31: %+v, want today counted from 0", st)
		}
		if err := domain.CheckEgressRecord(`{"date":"2099-12-31","bytes":5}`); err != nil {
			t.Fatalf("a well-formed record is refused by the hand-edit check: %v", err)
		}
		for _, bad := range []string{`garbage`, `{"date":"yesterday","bytes":1}`, `{"date":"2026-03-01","bytes":-1}`} {
			if domain.CheckEgressRecord(bad) == nil {
				t.Errorf("CheckEgressRecord accepts %s", bad)
			}
		}
	})
}

// A leader that takes over (or restarts) with the day's budget already
// spent reports the pause at once, before any batch waits on it: /readyz,
// /statusz and sf2loki_egress_paused read Status.
func TestEgressRestoredSpentBudgetIsReportedPaused(t *testing.T) {
	clk := porttest.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	g, _ := domain.NewEgress(clk, domain.EgressConfig{DailyBytes: 1000, Action: domain.BudgetPause})
	g.Restore(`{"date":"2026-03-01","bytes":5000}`, true)
	if st := g.Status(); !st.Paused || !st.Until.Equal(time.Date(2026, 3, 2, 0, 0, 0, 0, time.UTC)) {
		t.Fatalf("a restored spent budget: %+v, want paused until 00:00 UTC", st)
	}
	d, _ := domain.NewEgress(clk, domain.EgressConfig{DailyBytes: 1000, Action: domain.BudgetDrop})
	d.Restore(`{"date":"2026-03-01","bytes":5000}`, true)
	if d.Status().Paused {
		t.Fatal("budget_action drop never pauses")
	}
}

// A leader stopped while paused does not spend its drain grace waiting for
// a midnight nothing can be pushed before: it stops at once, its batches
// uncommitted.
func TestEgressStopWhilePausedIsPrompt(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		clk := porttest.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
		rig := newEgressRig(clk)
		p, g := egressPipeline(t, clk, rig, domain.EgressConfig{DailyBytes: 1000, Action: domain.BudgetPause}, nil)
		ctx, stop := context.WithCancel(t.Context())
		drain, stopDrain := context.WithTimeout(context.Background(), 25*time.Second) // bubble time
		defer stopDrain()
		done := make(chan error, 1)
		go func() {
			done <- p.Run(ctx, drain, rig, rig.resume, []ports.Source{&seqSource{lane: ports.LaneBulk, key: "elf", n: 100, size: 100}})
		}()
		for !g.Status().Paused {
			synctest.Wait()
			if ds := clk.Deadlines(); len(ds) > 0 {
				clk.Set(ds[0])
			}
		}
		synctest.Wait()
		stop()
		if err := <-done; err != nil {
			t.Logf("run: %v", err)
		}
		if drain.Err() != nil {
			t.Error("stopping a paused pipeline waited out the drain grace (25s)")
		}
		if v, _ := rig.resume("elf"); v != "000010" {
			t.Errorf("checkpoint %q after the stop, want 000010 (the 10 lines the budget admitted)", v)
		}
	})
}
