package app

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/salesforce"
	"github.com/sf2loki/sf2loki/internal/ports/porttest"
	"github.com/sf2loki/sf2loki/internal/testenv"
)

func TestStreamSilent(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	m := 10 * time.Minute
	for _, c := range []struct {
		name                   string
		watermark, stored, now time.Time
		want                   bool
	}{
		{"nothing stored", t0, time.Time{}, t0.Add(time.Hour), false},
		{"stored before what the stream delivered", t0, t0.Add(-time.Second), t0.Add(time.Hour), false},
		{"stored at what the stream delivered", t0, t0, t0.Add(time.Hour), false},
		{"stored after, and the stream had the margin", t0, t0.Add(time.Second), t0.Add(m + time.Second), true},
		{"stored after, exactly the margin ago", t0, t0.Add(time.Second), t0.Add(time.Second + m), true},
		{"stored after, too recent to judge", t0, t0.Add(time.Second), t0.Add(time.Second + m - time.Millisecond), false},
	} {
		if got := streamSilent(c.watermark, c.stored, c.now, m); got != c.want {
			t.Errorf("%s: %v, want %v", c.name, got, c.want)
		}
	}
}

// storage is a storage object's event times, answered as NewestStored
// does.
type storage struct {
	mu      sync.Mutex
	times   []time.Time
	err     error
	queries int
}

func (s *storage) newest(_ context.Context, _ string, from, to time.Time) (time.Time, bool, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queries++
	if s.err != nil {
		return time.Time{}, false, s.err
	}
	var best time.Time
	for _, t := range s.times {
		if !t.Before(from.Truncate(time.Second)) && t.Before(to.Truncate(time.Second)) && t.After(best) {
			best = t
		}
	}
	return best, !best.IsZero(), nil
}

func (s *storage) add(t time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.times = append(s.times, t)
}

// runStreamCheck starts c.run; step advances the clock by d and returns
// once the check that fired has finished.
func runStreamCheck(t *testing.T, c *streamCheck, clk *porttest.FakeClock) (step func(d time.Duration)) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { c.run(ctx) })
	t.Cleanup(func() { cancel(); wg.Wait() })
	if err := clk.BlockUntil(ctx, 1); err != nil {
		t.Fatal(err)
	}
	return func(d time.Duration) {
		t.Helper()
		for range d / streamCheckEvery {
			clk.Advance(streamCheckEvery)
			if err := clk.BlockUntil(ctx, 1); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// found records the findings counted.
type found struct {
	mu  sync.Mutex
	all []string
}

func (f *found) count(topic, what string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.all = append(f.all, topic+" "+what)
}

func (f *found) list() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.all)
}

func newStreamCheck(clk *porttest.FakeClock, st *storage, switches map[string]bool, f *found, logs *testenv.Buffer) *streamCheck {
	return &streamCheck{clock: clk, log: slog.New(slog.NewTextHandler(logs, nil)), seen: map[string]time.Time{},
		topics: func(context.Context) ([]string, error) {
			return []string{"/event/LoginEventStream", "/event/My_Event__e"}, nil
		},
		switches: func(context.Context) (map[string]bool, error) {
			if switches == nil {
				return nil, salesforce.ErrNoMetadataAccess
			}
			return switches, nil
		},
		stored: st.newest, counted: f.count}
}

// A stream whose storage object holds events it never delivered is
// reported, naming the Event Manager switch; one that delivers them is
// not.
func TestStreamCheckFindsASilentStream(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	clk := porttest.NewFakeClock(t0)
	st := &storage{}
	var f found
	var logs testenv.Buffer
	c := newStreamCheck(clk, st, nil, &f, &logs)
	step := runStreamCheck(t, c, clk)

	// Streaming on: every stored login arrives on the stream too.
	for i := range 6 {
		at := t0.Add(time.Duration(2+5*i) * time.Minute)
		st.add(at)
		c.Event("/event/LoginEventStream", at)
		step(streamCheckEvery)
	}
	if got := f.list(); len(got) != 0 || strings.Contains(logs.String(), "level=WARN") {
		t.Fatalf("a delivering stream was reported: %v\n%s", got, logs.String())
	}
	if !strings.Contains(logs.String(), "cannot read Event Manager's switches") {
		t.Fatalf("the unreadable switches are not said:\n%s", logs.String())
	}

	// Streaming switched off: the logins are stored, the stream is silent.
	off := clk.Now()
	st.add(off.Add(time.Minute))
	step(streamCheckEvery) // the stored login is too recent to judge
	step(streamCheckEvery)
	if got := f.list(); len(got) != 0 {
		t.Fatalf("reported before the margin passed: %v", got)
	}
	step(streamCheckEvery)
	if got := f.list(); !slices.Equal(got, []string{"/event/LoginEventStream streaming_silent"}) {
		t.Fatalf("findings: %v\n%s", got, logs.String())
	}
	for _, want := range []string{"level=WARN", "topic=/event/LoginEventStream", "object=LoginEvent", "stream_newest_event=",
		"turn on Enable Streaming for Login Event (LoginEventStream) in Setup > Event Manager"} {
		if !strings.Contains(logs.String(), want) {
			t.Fatalf("the warning lacks %q:\n%s", want, logs.String())
		}
	}

	// Streaming on again: the stream delivers, the findings stop.
	c.Event("/event/LoginEventStream", clk.Now())
	n := len(f.list())
	step(3 * streamCheckEvery)
	if len(f.list()) != n {
		t.Fatalf("still reported once the stream delivered: %v", f.list())
	}
}

// Event Manager's switches are read once at the start: a stream that is
// on costs no query afterwards, one that is off or that Event Manager does
// not list is warned about once, with the fix for a named topic and for one
// "*" found.
func TestStreamCheckSwitches(t *testing.T) {
	for _, tc := range []struct {
		name     string
		switches map[string]bool
		named    []string
		found    []string
		logs     []string
	}{
		{"on", map[string]bool{"LoginEvent": true, "LoginEventStream": true}, []string{"/event/LoginEventStream"}, nil, nil},
		{"off", map[string]bool{"LoginEvent": true, "LoginEventStream": false}, []string{"/event/LoginEventStream"},
			[]string{"/event/LoginEventStream streaming_off"},
			[]string{"level=WARN", "streaming is off in Event Manager", "or remove the topic /event/LoginEventStream"}},
		{"off, from *", map[string]bool{"LoginEventStream": false}, []string{"*"},
			[]string{"/event/LoginEventStream streaming_off"},
			[]string{"level=WARN", "add /event/LoginEventStream to sources.pubsub.exclude"}},
		{"off, named beside *", map[string]bool{"LoginEventStream": false}, []string{"*", "/event/LoginEventStream"},
			[]string{"/event/LoginEventStream streaming_off"},
			[]string{"level=WARN", "add /event/LoginEventStream to sources.pubsub.exclude"}},
		{"not listed", map[string]bool{"LoginEvent": true}, []string{"/event/LoginEventStream"},
			[]string{"/event/LoginEventStream streaming_off"},
			[]string{"level=WARN", "Event Manager does not list LoginEventStream: its streaming was probably never turned on"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
			clk := porttest.NewFakeClock(t0)
			st := &storage{}
			st.add(t0.Add(2 * time.Minute)) // stored, never streamed
			var f found
			var logs testenv.Buffer
			c := newStreamCheck(clk, st, tc.switches, &f, &logs)
			c.named = NamedTopics(tc.named)
			step := runStreamCheck(t, c, clk)
			step(6 * streamCheckEvery)
			if got := f.list(); !slices.Equal(got, tc.found) {
				t.Errorf("findings %v, want %v\n%s", got, tc.found, logs.String())
			}
			for _, want := range tc.logs {
				if !strings.Contains(logs.String(), want) {
					t.Errorf("the log lacks %q:\n%s", want, logs.String())
				}
			}
			if tc.logs == nil && strings.Contains(logs.String(), "level=WARN") {
				t.Errorf("a warning for a stream that is on:\n%s", logs.String())
			}
			if st.queries != 0 {
				t.Errorf("%d storage queries for a stream Event Manager judged", st.queries)
			}
		})
	}
}

// Without Event Manager's switches, a storage object that cannot be
// queried leaves nothing to tell by: a WARN says so once, naming what to
// check by hand, and the check stops for its topic.
func TestStreamCheckUnqueryableStorage(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	clk := porttest.NewFakeClock(t0)
	st := &storage{err: errors.New("salesforce: /services/data/v60.0/query answered 400: INVALID_TYPE")}
	var f found
	var logs testenv.Buffer
	c := newStreamCheck(clk, st, nil, &f, &logs)
	step := runStreamCheck(t, c, clk)
	step(6 * streamCheckEvery)
	if st.queries != 1 || strings.Count(logs.String(), "level=WARN") != 1 ||
		!strings.Contains(logs.String(), "cannot tell whether this stream delivers") ||
		!strings.Contains(logs.String(), "check by hand that Enable Streaming is on for LoginEventStream") {
		t.Fatalf("queries %d after a refusal:\n%s", st.queries, logs.String())
	}
	if got := f.list(); len(got) != 0 {
		t.Errorf("findings %v", got)
	}
}

// A stream that stays silent is counted at every check and warned about
// once an hour.
func TestStreamCheckWarnsOfASilentStreamHourly(t *testing.T) {
	t0 := time.Date(2026, 11, 28, 12, 0, 0, 0, time.UTC)
	clk := porttest.NewFakeClock(t0)
	st := &storage{}
	var f found
	var logs testenv.Buffer
	c := newStreamCheck(clk, st, nil, &f, &logs)
	step := runStreamCheck(t, c, clk)
	for range 30 { // 2.5 hours, a login stored every 5 minutes
		st.add(clk.Now())
		step(streamCheckEvery)
	}
	n := len(f.list())
	warns := strings.Count(logs.String(), "the storage object holds an event the stream never delivered")
	if n < 20 || warns != 3 {
		t.Errorf("%d findings counted, %d warnings; want one finding per check and a warning per hour (3)\n%s", n, warns, logs.String())
	}
}
