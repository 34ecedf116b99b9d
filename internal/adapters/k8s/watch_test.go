package k8s_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/k8s"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/ports/porttest"
	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/internal/testenv/e2e"
)

// watchBound bounds every wait for a Change: generous, for a busy machine
// and for the watch's backoff (at most 30 s) after a failure.
const watchBound = 120 * time.Second

func TestWatchContract(t *testing.T) {
	srv := server(t)
	ns := srv.NewNamespace(t)
	porttest.RunWatcher(t, func(*testing.T) porttest.WatchOpener {
		name := e2e.Name("watch")
		return func(t *testing.T) interface {
			ports.ObjectCAS
			ports.Watcher
		} {
			return open(t, srv.REST(testenv.KubeAdminToken), ns, name)
		}
	})
}

// watch starts w.Watch for the test's lifetime.
func watch(t *testing.T, w ports.Watcher) <-chan ports.Change {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	return w.Watch(ctx)
}

// receive returns the next Change, failing after watchBound or when the
// channel closes.
func receive(t *testing.T, ch <-chan ports.Change, what string) ports.Change {
	t.Helper()
	select {
	case c, ok := <-ch:
		if !ok {
			t.Fatalf("waiting for %s: the watch closed while its context was live", what)
		}
		return c
	case <-time.After(watchBound):
		t.Fatalf("no change within %s: want %s", watchBound, what)
	}
	return ports.Change{}
}

func mustPut(t *testing.T, s ports.ObjectCAS, data string, pre ports.Precondition) ports.Version {
	t.Helper()
	v, err := s.Put(t.Context(), []byte(data), pre)
	if err != nil {
		t.Fatalf("put %s: %v", data, err)
	}
	return v
}

// TestWatchForbiddenSaysToGrantWatch: with get, create and patch but not
// watch, the watch reports ErrPermissionDenied naming the verb, and never a
// state (which would tell the reader the watch is up).
func TestWatchForbiddenSaysToGrantWatch(t *testing.T) {
	srv := server(t)
	ns := srv.NewNamespace(t)
	srv.GrantLeases(t, ns, "get", "create", "patch")
	s := open(t, srv.REST(testenv.KubeLimitedToken), ns, "lease")
	mustPut(t, s, `{"holder":"a"}`, ports.CreateOnly())
	ch := watch(t, s)
	c := receive(t, ch, "a change reporting the refused watch")
	if c.Err == nil {
		t.Fatalf("first change of a watch without the watch verb: %+v, want Err", c)
	}
	if !errors.Is(c.Err, ports.ErrPermissionDenied) || ports.IsTransient(c.Err) || !strings.Contains(c.Err.Error(), "grant the watch verb on leases") {
		t.Fatalf("refused watch: %v, want ErrPermissionDenied saying to grant the watch verb", c.Err)
	}
}

// TestWatchResumesAfterTheAPIServerRestarts: a restart of the API server
// breaks the watch, which says so; once the server is back the watch
// reports the current state again and then a write made after the break.
func TestWatchResumesAfterTheAPIServerRestarts(t *testing.T) {
	srv := server(t)
	ns := srv.NewNamespace(t)
	s := open(t, srv.REST(testenv.KubeAdminToken), ns, "lease")
	v1 := mustPut(t, s, `{"n":1}`, ports.CreateOnly())
	ch := watch(t, s)
	if c := receive(t, ch, "the first state"); c.Err != nil || c.Absent || c.Object.Version != v1 {
		t.Fatalf("first change: %+v, want the state at %q", c, v1)
	}

	srv.StopAPIServer(t)
	c := receive(t, ch, "a change reporting the broken watch")
	if c.Err == nil || !ports.IsTransient(c.Err) {
		t.Fatalf("after the API server stopped: %+v, want a transient Err", c)
	}
	t.Logf("broken watch reported: %v", c.Err)
	srv.StartAPIServer(t)
	v2 := mustPut(t, s, `{"n":2}`, ports.IfVersion(v1))

	// The first state after the Err is the current one: v1 if the watch
	// came back before the write, v2 otherwise; then v2.
	for {
		c := receive(t, ch, "the write made after the restart")
		switch {
		case c.Err != nil:
			t.Logf("still broken (tolerated until it recovers): %v", c.Err)
			continue
		case !c.Absent && c.Object.Version == v2 && string(c.Object.Data) == `{"n":2}`:
			return
		case !c.Absent && c.Object.Version == v1 && string(c.Object.Data) == `{"n":1}`:
			continue
		}
		t.Fatalf("after the restart: %+v, want the state at %q or %q", c, v1, v2)
	}
}

// TestWatchFromAnExpiredVersionReadsAgain: a resume from a resourceVersion
// the server no longer keeps (410 Gone) reads the Lease again: the first
// change is the current state, with no Err, and later writes follow.
func TestWatchFromAnExpiredVersionReadsAgain(t *testing.T) {
	srv := server(t)
	ns := srv.NewNamespace(t)
	s := open(t, srv.REST(testenv.KubeAdminToken), ns, "lease")
	v := mustPut(t, s, `{"n":1}`, ports.CreateOnly())
	v = mustPut(t, s, `{"n":2}`, ports.IfVersion(v))
	v = mustPut(t, s, `{"n":3}`, ports.IfVersion(v))
	ctx, cancel := context.WithCancel(t.Context())
	t.Cleanup(cancel)
	// resourceVersion 1 is older than any history the API server keeps.
	ch := s.WatchFrom(ctx, "1")
	c := receive(t, ch, "the current state")
	if c.Err != nil || c.Absent || c.Object.Version != v || string(c.Object.Data) != `{"n":3}` {
		t.Fatalf("first change of a watch from an expired resourceVersion: %+v, want the current state at %q", c, v)
	}
	v4 := mustPut(t, s, `{"n":4}`, ports.IfVersion(v))
	if c := receive(t, ch, "the next write"); c.Err != nil || c.Object.Version != v4 || string(c.Object.Data) != `{"n":4}` {
		t.Fatalf("after a write: %+v, want the state at %q", c, v4)
	}
}

// TestWatchReportsAnOversizedDocumentAsGetDoes: a document over the cap is
// ports.ErrTooLarge with its Version, as Get returns it, so the reader can
// replace it; the replacement follows without Err.
func TestWatchReportsAnOversizedDocumentAsGetDoes(t *testing.T) {
	srv := server(t)
	ns := srv.NewNamespace(t)
	rc := srv.REST(testenv.KubeAdminToken)
	big := mustPut(t, open(t, rc, ns, "big"), strings.Repeat("x", 4096), ports.CreateOnly())
	capped, err := k8s.New(k8s.Config{Namespace: ns, Name: "big", REST: rc, MaxSize: 1024})
	if err != nil {
		t.Fatal(err)
	}
	ch := watch(t, capped)
	c := receive(t, ch, "the oversized state")
	if !errors.Is(c.Err, ports.ErrTooLarge) || c.Object.Version != big || c.Object.Data != nil {
		t.Fatalf("first change of a 4096-byte document with a 1024-byte cap: %+v, want ErrTooLarge at %q", c, big)
	}
	small := mustPut(t, capped, `{"holder":""}`, ports.IfVersion(c.Object.Version))
	if c := receive(t, ch, "the replacement"); c.Err != nil || c.Object.Version != small {
		t.Fatalf("after replacing the document: %+v, want the state at %q", c, small)
	}
}
