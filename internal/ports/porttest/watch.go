package porttest

import (
	"bytes"
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/ports"
)

// WatchOpener opens a new, independent handle that can watch the object.
type WatchOpener func(t *testing.T) interface {
	ports.ObjectCAS
	ports.Watcher
}

// WatchFactory makes a fresh, absent object for one subtest and returns how
// to open watching handles on it.
type WatchFactory func(t *testing.T) WatchOpener

// RunWatcher runs the Watcher contract suite against the store that factory
// makes: every adapter with a watch calls it against its real server.
func RunWatcher(t *testing.T, factory WatchFactory) {
	t.Helper()
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, open WatchOpener)
	}{
		{"FirstChangeOfAnAbsentObjectIsAbsent", testWatchAbsent},
		{"FirstChangeIsTheCurrentState", testWatchPresent},
		{"EveryWriteIsReported", testWatchWrites},
		{"SlowReaderSeesTheLatestState", testWatchSlowReader},
		{"ClosesWhenContextEnds", testWatchCloses},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, factory(t)) })
	}
}

// next returns the next Change without Err, failing the test after
// callTimeout or when the channel closes.
func next(t *testing.T, ch <-chan ports.Change) ports.Change {
	t.Helper()
	deadline := time.After(callTimeout)
	for {
		select {
		case c, ok := <-ch:
			switch {
			case !ok:
				t.Fatal("the watch closed while its context was live")
			case c.Err != nil:
				t.Logf("watch broken (tolerated; the next change must be the current state): %v", c.Err)
				continue
			}
			return c
		case <-deadline:
			t.Fatalf("no change within %s", callTimeout)
		}
	}
}

// await reads changes until want holds, failing after callTimeout. Every
// present change must carry the bytes written at its version.
func await(t *testing.T, ch <-chan ports.Change, written map[ports.Version][]byte, what string, want func(ports.Change) bool) {
	t.Helper()
	deadline := time.Now().Add(callTimeout)
	for time.Now().Before(deadline) {
		c := next(t, ch)
		if !c.Absent {
			if data, ok := written[c.Object.Version]; ok && !bytes.Equal(data, c.Object.Data) {
				t.Fatalf("change at version %q carries %q, the write at that version stored %q", c.Object.Version, clip(c.Object.Data), clip(data))
			}
		}
		if want(c) {
			return
		}
	}
	t.Fatalf("no change %s within %s", what, callTimeout)
}

func watch(t *testing.T, open WatchOpener) (<-chan ports.Change, context.CancelFunc) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	return open(t).Watch(ctx), cancel
}

func testWatchAbsent(t *testing.T, open WatchOpener) {
	ch, _ := watch(t, open)
	if c := next(t, ch); !c.Absent {
		t.Fatalf("first change of an absent object: %+v, want Absent", c)
	}
}

func testWatchPresent(t *testing.T, open WatchOpener) {
	s := open(t)
	v := mustPut(t, s, []byte(`{"n":1}`), ports.CreateOnly())
	ch, _ := watch(t, open)
	c := next(t, ch)
	if c.Absent || c.Object.Version != v || string(c.Object.Data) != `{"n":1}` {
		t.Fatalf("first change: %+v, want the stored state at version %q", c, v)
	}
}

func testWatchWrites(t *testing.T, open WatchOpener) {
	s := open(t)
	ch, _ := watch(t, open)
	if c := next(t, ch); !c.Absent {
		t.Fatalf("first change of an absent object: %+v, want Absent", c)
	}
	written := map[ports.Version][]byte{}
	pre := ports.CreateOnly()
	for i := range 3 {
		data := fmt.Appendf(nil, `{"n":%d}`, i)
		v := mustPut(t, s, data, pre)
		written[v] = data
		await(t, ch, written, fmt.Sprintf("at version %q", v), func(c ports.Change) bool { return !c.Absent && c.Object.Version == v })
		pre = ports.IfVersion(v)
	}
	v, _ := pre.Version()
	if err := s.Delete(ctxT(t), pre); err != nil {
		t.Fatalf("delete at %q: %v", v, err)
	}
	await(t, ch, written, "reporting the delete", func(c ports.Change) bool { return c.Absent })
}

func testWatchSlowReader(t *testing.T, open WatchOpener) {
	s := open(t)
	ch, _ := watch(t, open)
	written := map[ports.Version][]byte{}
	pre := ports.CreateOnly()
	var last ports.Version
	for i := range 20 {
		data := fmt.Appendf(nil, `{"n":%d}`, i)
		last = mustPut(t, s, data, pre)
		written[last] = data
		pre = ports.IfVersion(last)
	}
	await(t, ch, written, fmt.Sprintf("at the last version %q", last), func(c ports.Change) bool { return !c.Absent && c.Object.Version == last })
}

func testWatchCloses(t *testing.T, open WatchOpener) {
	ch, cancel := watch(t, open)
	next(t, ch)
	cancel()
	deadline := time.After(callTimeout)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatalf("the watch did not close within %s of its context ending", callTimeout)
		}
	}
}
