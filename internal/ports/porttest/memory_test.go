package porttest_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/ports/porttest"
)

func memoryFactory(opts ...porttest.MemoryOption) porttest.Factory {
	return func(t *testing.T) porttest.Opener {
		m := porttest.NewMemoryCAS(t.Name(), opts...)
		return func(*testing.T) ports.ObjectCAS { return m }
	}
}

func TestMemoryCASContract(t *testing.T) {
	porttest.RunObjectCAS(t, memoryFactory())
}

func TestMemoryCASContractContentVersions(t *testing.T) {
	porttest.RunObjectCAS(t, memoryFactory(porttest.WithContentVersions()))
}

func TestContentVersionsRepeatForIdenticalBytes(t *testing.T) {
	m := porttest.NewMemoryCAS("aba", porttest.WithContentVersions())
	ctx := t.Context()
	v1, err := m.Put(ctx, []byte("same"), ports.CreateOnly())
	if err != nil {
		t.Fatal(err)
	}
	v2, err := m.Put(ctx, []byte("other"), ports.IfVersion(v1))
	if err != nil {
		t.Fatal(err)
	}
	v3, err := m.Put(ctx, []byte("same"), ports.IfVersion(v2))
	if err != nil {
		t.Fatal(err)
	}
	if v1 != v3 || v1 == v2 {
		t.Fatalf("content versions: v1=%q v2=%q v3=%q; want v1==v3 != v2", v1, v2, v3)
	}
}

func TestApplyFirstIsALostAck(t *testing.T) {
	m := porttest.NewMemoryCAS("lostack")
	m.Inject(porttest.Fault{Op: porttest.OpPut, ApplyFirst: true, Times: 1})
	_, err := m.Put(t.Context(), []byte("landed"), ports.CreateOnly())
	if !ports.IsTransient(err) {
		t.Fatalf("lost ack: got %v, want a transient error", err)
	}
	obj, ok := m.Peek()
	if !ok || string(obj.Data) != "landed" {
		t.Fatalf("lost ack did not apply the write: %q, %v", obj.Data, ok)
	}
	// The fault fired once; a retry of the same create-only now loses its CAS.
	if _, err := m.Put(t.Context(), []byte("landed"), ports.CreateOnly()); !errors.Is(err, ports.ErrPreconditionFailed) {
		t.Fatalf("retry after lost ack: got %v, want ErrPreconditionFailed", err)
	}
	if got := m.Calls(porttest.OpPut); got != 2 {
		t.Fatalf("Calls(put) = %d, want 2", got)
	}
}

func TestFaultTargeting(t *testing.T) {
	m := porttest.NewMemoryCAS("faults")
	ctx := t.Context()
	v, _ := m.Put(ctx, []byte("x"), ports.CreateOnly())
	m.Inject(porttest.Fault{Op: porttest.OpGet, Nth: 2, Err: porttest.ErrUnavailable})
	m.Inject(porttest.Fault{
		Op:   porttest.OpPut,
		When: func(c porttest.Call) bool { return bytes.Equal(c.Data, []byte("throttle me")) },
		Err:  porttest.ErrThrottled,
	})
	m.Inject(porttest.Fault{Op: porttest.OpDelete, Err: ports.ErrPreconditionFailed, Times: 1})

	if _, err := m.Get(ctx); err != nil {
		t.Fatalf("1st get: %v", err)
	}
	if _, err := m.Get(ctx); !errors.Is(err, porttest.ErrUnavailable) {
		t.Fatalf("2nd get: got %v, want ErrUnavailable", err)
	}
	if _, err := m.Get(ctx); err != nil {
		t.Fatalf("3rd get: %v", err)
	}
	_, err := m.Put(ctx, []byte("throttle me"), ports.IfVersion(v))
	if d, ok := ports.RetryAfter(err); !ok || d != time.Second || !ports.IsTransient(err) {
		t.Fatalf("throttled put: got %v (retry-after %v, %v)", err, d, ok)
	}
	if err := m.Delete(ctx, ports.IfVersion(v)); !errors.Is(err, ports.ErrPreconditionFailed) {
		t.Fatalf("1st delete: got %v, want injected ErrPreconditionFailed", err)
	}
	if _, ok := m.Peek(); !ok {
		t.Fatal("an injected precondition failure deleted the object")
	}
	if err := m.Delete(ctx, ports.IfVersion(v)); err != nil {
		t.Fatalf("2nd delete (fault spent): %v", err)
	}
	if got := m.Calls(porttest.OpGet); got != 3 {
		t.Fatalf("Calls(get) = %d, want 3", got)
	}
}

func TestFaultBeforeLetsACompetitorIn(t *testing.T) {
	m := porttest.NewMemoryCAS("race")
	ctx := t.Context()
	v, _ := m.Put(ctx, []byte("base"), ports.CreateOnly())
	m.Inject(porttest.Fault{Op: porttest.OpPut, Nth: 2, Before: func() { m.Store([]byte("competitor")) }})
	_, err := m.Put(ctx, []byte("mine"), ports.IfVersion(v))
	if !errors.Is(err, ports.ErrPreconditionFailed) {
		t.Fatalf("got %v, want ErrPreconditionFailed after the competitor's write", err)
	}
}

func TestFaultDelayUsesClockAndHonoursContext(t *testing.T) {
	clk := porttest.NewFakeClock(time.Unix(1000, 0))
	m := porttest.NewMemoryCAS("slow", porttest.WithClock(clk))
	m.Inject(porttest.Fault{Op: porttest.OpGet, Delay: 2 * time.Second})
	done := make(chan error, 1)
	go func() { _, err := m.Get(t.Context()); done <- err }()
	if err := clk.BlockUntil(ctxTimeout(t), 1); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		t.Fatalf("delayed get returned before the clock moved: %v", err)
	default:
	}
	clk.Advance(2 * time.Second)
	if err := <-done; !errors.Is(err, ports.ErrNotFound) {
		t.Fatalf("delayed get: got %v, want ErrNotFound", err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	go func() { _, err := m.Get(ctx); done <- err }()
	if err := clk.BlockUntil(ctxTimeout(t), 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled delayed get: got %v, want context.Canceled", err)
	}
}

func ctxTimeout(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// brokenCAS ignores preconditions: every write is blind. The contract suite
// must reject it.
type brokenCAS struct{ *porttest.MemoryCAS }

func (b brokenCAS) Put(_ context.Context, data []byte, _ ports.Precondition) (ports.Version, error) {
	return b.Store(data), nil
}

func (b brokenCAS) Delete(context.Context, ports.Precondition) error {
	b.Remove()
	return nil
}

const brokenEnv = "SF2LOKI_PORTTEST_RUN_BROKEN"

// TestContractCatchesBrokenStore proves the suite can fail: it runs the suite
// against brokenCAS in a child process and expects the precondition subtests
// to fail there.
func TestContractCatchesBrokenStore(t *testing.T) {
	if os.Getenv(brokenEnv) == "1" {
		porttest.RunObjectCAS(t, func(t *testing.T) porttest.Opener {
			b := brokenCAS{porttest.NewMemoryCAS(t.Name())}
			return func(*testing.T) ports.ObjectCAS { return b }
		})
		return
	}
	cmd := exec.CommandContext(t.Context(), os.Args[0], "-test.run=^TestContractCatchesBrokenStore$", "-test.v")
	cmd.Env = append(os.Environ(), brokenEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Fatalf("the contract suite passed a store that ignores preconditions:\n%s", out)
	}
	for _, sub := range []string{
		"CreateOnlyOnPresentFailsAndKeepsObject",
		"IfVersionStaleFailsAndKeepsObject",
		"DeleteStaleFailsAndKeepsObject",
		"ConcurrentCreateOnlyOneWinner",
		"ConcurrentIfVersionOneWinner",
	} {
		if !strings.Contains(string(out), "--- FAIL: TestContractCatchesBrokenStore/"+sub) {
			t.Errorf("subtest %s did not fail against the broken store", sub)
		}
	}
	if t.Failed() {
		t.Logf("child output:\n%s", out)
	}
}

func TestWatchedMemoryContract(t *testing.T) {
	porttest.RunWatcher(t, func(*testing.T) porttest.WatchOpener {
		w := porttest.NewWatchedMemory(porttest.NewMemoryCAS("watched"))
		return func(*testing.T) interface {
			ports.ObjectCAS
			ports.Watcher
		} {
			return w
		}
	})
}
