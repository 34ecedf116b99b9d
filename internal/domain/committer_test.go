package domain_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/ports/porttest"
)

type committerOpt func(*domain.CommitterConfig)

func newCommitter(t *testing.T, m ports.ObjectCAS, clk ports.Clock, opts ...committerOpt) (*domain.CheckpointCommitter, *recorder) {
	t.Helper()
	rec := &recorder{}
	cfg := domain.CommitterConfig{Observer: rec, Retry: domain.RetryPolicy{Jitter: func() float64 { return 0.5 }}}
	for _, o := range opts {
		o(&cfg)
	}
	c, err := domain.NewCheckpointCommitter(m, clk, cfg)
	if err != nil {
		t.Fatalf("NewCheckpointCommitter: %v", err)
	}
	return c, rec
}

// writeOp is one of the committer's write operations, so verify-on-retry
// tests cover CommitMany and Delete alike.
type writeOp struct {
	name string
	// prepare seeds the committer so that run has something to write.
	prepare func(t *testing.T, c *domain.CheckpointCommitter)
	run     func(t *testing.T, c *domain.CheckpointCommitter) error
	// check asserts the stored document after run succeeded.
	check func(t *testing.T, doc map[string]string)
}

var writeOps = []writeOp{
	{
		name: "CommitMany",
		prepare: func(t *testing.T, c *domain.CheckpointCommitter) {
			if err := c.Commit(ctx(t), "base", "0"); err != nil {
				t.Fatal(err)
			}
		},
		run: func(t *testing.T, c *domain.CheckpointCommitter) error {
			return c.CommitMany(ctx(t), map[string]string{"pubsub:/event/A": "r10", "eventlogfile:Login": "2026-03-01"})
		},
		check: func(t *testing.T, doc map[string]string) {
			if doc["pubsub:/event/A"] != "r10" || doc["eventlogfile:Login"] != "2026-03-01" {
				t.Fatalf("document %v lacks the committed keys", doc)
			}
		},
	},
	{
		name: "Delete",
		prepare: func(t *testing.T, c *domain.CheckpointCommitter) {
			if err := c.CommitMany(ctx(t), map[string]string{"gone": "1", "kept": "2"}); err != nil {
				t.Fatal(err)
			}
		},
		run: func(t *testing.T, c *domain.CheckpointCommitter) error { return c.Delete(ctx(t), "gone") },
		check: func(t *testing.T, doc map[string]string) {
			if _, ok := doc["gone"]; ok || doc["kept"] != "2" {
				t.Fatalf("document %v: want gone deleted and kept kept", doc)
			}
		},
	},
}

func TestCommitter01_RetryPreconditionWithOwnBytesSucceeds(t *testing.T) {
	for _, op := range writeOps {
		t.Run(op.name, func(t *testing.T) {
			bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
				m := porttest.NewMemoryCAS("state")
				logs := &logBuffer{}
				c, rec := newCommitter(t, m, clk, func(cfg *domain.CommitterConfig) { cfg.Logger = logs.logger() })
				op.prepare(t, c)
				m.Inject(porttest.Fault{Op: porttest.OpPut, ApplyFirst: true, Times: 1})
				var err error
				call(t, clk, func() { err = op.run(t, c) })
				if err != nil {
					t.Fatalf("%s after a lost acknowledgement: %v", op.name, err)
				}
				obj, _ := m.Peek()
				if c.Version() != obj.Version {
					t.Fatalf("cached version %q, stored %q: not refreshed from the re-read", c.Version(), obj.Version)
				}
				op.check(t, docOf(t, m))
				if rec.count(domain.EventRecoveredLostAck) != 1 {
					t.Fatalf("not counted: %v", rec.kinds())
				}
				if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "acknowledgement was lost") {
					t.Fatalf("not logged at WARN: %q", logs.String())
				}
			})
		})
	}
}

func TestCommitter02_FirstAttemptPreconditionIsConflictWithoutRead(t *testing.T) {
	for _, op := range writeOps {
		t.Run(op.name, func(t *testing.T) {
			clk := porttest.NewFakeClock(t0)
			m := porttest.NewMemoryCAS("state")
			c, rec := newCommitter(t, m, clk)
			op.prepare(t, c)
			m.Store([]byte(`{"someone":"else"}`))
			m.ResetCalls()
			err := op.run(t, c)
			var ce *domain.ConflictError
			if !errors.Is(err, domain.ErrConflict) || !errors.As(err, &ce) || !errors.Is(err, ports.ErrPreconditionFailed) {
				t.Fatalf("got %v, want a ConflictError", err)
			}
			if m.Calls(porttest.OpGet) != 0 || m.Calls(porttest.OpPut) != 1 {
				t.Fatalf("%d reads, %d writes; want 0 reads and 1 write", m.Calls(porttest.OpGet), m.Calls(porttest.OpPut))
			}
			if !strings.Contains(err.Error(), "mem://state") || rec.count(domain.EventConflict) != 1 {
				t.Fatalf("conflict %q not named or not reported (%v)", err, rec.kinds())
			}
		})
	}
}

func TestCommitter03_RetryPreconditionWithOtherBytesIsConflict(t *testing.T) {
	variants := map[string]func(m *porttest.MemoryCAS){
		"different bytes": func(m *porttest.MemoryCAS) { m.Store([]byte(`{"other":"writer"}`)) },
		"absent":          func(m *porttest.MemoryCAS) { m.Remove() },
		"unreadable": func(m *porttest.MemoryCAS) {
			m.Store([]byte(`{"other":"writer"}`))
			m.Inject(porttest.Fault{Op: porttest.OpGet, Err: porttest.ErrUnavailable})
		},
	}
	for _, op := range writeOps {
		for name, interfere := range variants {
			t.Run(op.name+"/"+name, func(t *testing.T) {
				bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
					m := porttest.NewMemoryCAS("state")
					c, rec := newCommitter(t, m, clk)
					op.prepare(t, c)
					m.ResetCalls()
					m.Inject(porttest.Fault{Op: porttest.OpPut, Nth: 1, Err: porttest.ErrUnavailable})
					m.Inject(porttest.Fault{Op: porttest.OpPut, Nth: 2, Before: func() { interfere(m) }})
					var err error
					call(t, clk, func() { err = op.run(t, c) })
					if !errors.Is(err, domain.ErrConflict) {
						t.Fatalf("got %v, want ErrConflict", err)
					}
					if rec.count(domain.EventRecoveredLostAck) != 0 {
						t.Fatal("a foreign write was taken for our own")
					}
				})
			})
		}
	}
}

// TestCommitter04_CoveredForCommitManyAndDelete is a guard that the
// verify-on-retry tests above run for both write operations.
func TestCommitter04_CoveredForCommitManyAndDelete(t *testing.T) {
	names := map[string]bool{}
	for _, op := range writeOps {
		names[op.name] = true
	}
	if !names["CommitMany"] || !names["Delete"] || len(names) != 2 {
		t.Fatalf("writeOps covers %v", names)
	}
}

func TestCommitter05_LostAckThenNextCommitSucceeds(t *testing.T) {
	for _, firstUpload := range []bool{false, true} {
		t.Run(fmt.Sprintf("first upload %v", firstUpload), func(t *testing.T) {
			bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
				m := porttest.NewMemoryCAS("state", porttest.WithContentVersions())
				pres := putPreconditions(m)
				c, _ := newCommitter(t, m, clk)
				if !firstUpload {
					if err := c.Commit(ctx(t), "base", "0"); err != nil {
						t.Fatal(err)
					}
				}
				m.Inject(porttest.Fault{Op: porttest.OpPut, ApplyFirst: true, Times: 1})
				var err error
				call(t, clk, func() { err = c.CommitMany(ctx(t), map[string]string{"a": "1", "b": "2"}) })
				if err != nil {
					t.Fatalf("CommitMany after the store applied the write and answered 500: %v", err)
				}
				if doc := docOf(t, m); doc["a"] != "1" || doc["b"] != "2" {
					t.Fatalf("document %v", doc)
				}
				if firstUpload {
					if p := pres(); len(p) != 2 || !p[0].IsCreateOnly() || !p[1].IsCreateOnly() {
						t.Fatalf("first upload preconditions %v, want create-only twice", p)
					}
				}
				if err := c.Commit(ctx(t), "c", "3"); err != nil {
					t.Fatalf("the next commit of another key failed (version not re-synced): %v", err)
				}
				if doc := docOf(t, m); doc["a"] != "1" || doc["c"] != "3" {
					t.Fatalf("document %v", doc)
				}
			})
		})
	}
}

func TestCommitter06_PreconditionFailureIsNeverRetried(t *testing.T) {
	clk := porttest.NewFakeClock(t0)
	m := porttest.NewMemoryCAS("state")
	c, _ := newCommitter(t, m, clk, func(cfg *domain.CommitterConfig) { cfg.Retry.MaxAttempts = 5 })
	m.Inject(porttest.Fault{Op: porttest.OpPut, Err: fmt.Errorf("412: %w", ports.ErrPreconditionFailed)})
	if err := c.Commit(ctx(t), "k", "v"); !errors.Is(err, domain.ErrConflict) {
		t.Fatalf("got %v", err)
	}
	if n := m.Calls(porttest.OpPut); n != 1 {
		t.Fatalf("%d writes with 5 allowed attempts, want exactly 1", n)
	}
}

func TestCommitter07_FenceFirst(t *testing.T) {
	clk := porttest.NewFakeClock(t0)
	m := porttest.NewMemoryCAS("state")
	fenceErr := errors.New("holder a lost the lease")
	fenced := true
	c, rec := newCommitter(t, m, clk, func(cfg *domain.CommitterConfig) {
		cfg.Fence = func() error {
			if fenced {
				return fenceErr
			}
			return nil
		}
	})
	for name, op := range map[string]func() error{
		"CommitMany": func() error { return c.CommitMany(ctx(t), map[string]string{"k": "v"}) },
		"Delete":     func() error { return c.Delete(ctx(t), "k") },
		"Claim":      func() error { return c.Claim(ctx(t), 3) },
	} {
		err := op()
		if !errors.Is(err, domain.ErrFenced) || !errors.Is(err, fenceErr) {
			t.Fatalf("%s with a failing fence: %v", name, err)
		}
	}
	if m.Calls(porttest.OpPut) != 0 || m.Calls(porttest.OpGet) != 0 {
		t.Fatalf("fenced calls touched the store: %d reads, %d writes", m.Calls(porttest.OpGet), m.Calls(porttest.OpPut))
	}
	if rec.count(domain.EventCommitFenced) != 3 {
		t.Fatalf("events %v", rec.kinds())
	}
	fenced = false
	if err := c.Commit(ctx(t), "k", "v"); err != nil {
		t.Fatalf("after the fence passes: %v", err)
	}
}

func TestCommitter07_FenceCheckedBeforeEveryAttempt(t *testing.T) {
	bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
		m := porttest.NewMemoryCAS("state")
		checks := 0
		c, _ := newCommitter(t, m, clk, func(cfg *domain.CommitterConfig) {
			cfg.Fence = func() error {
				checks++
				if checks > 2 { // the pre-check and the first attempt pass
					return errors.New("deadline passed")
				}
				return nil
			}
		})
		m.Inject(porttest.Fault{Op: porttest.OpPut, Err: porttest.ErrUnavailable})
		var err error
		call(t, clk, func() { err = c.Commit(ctx(t), "k", "v") })
		if !errors.Is(err, domain.ErrFenced) || m.Calls(porttest.OpPut) != 1 {
			t.Fatalf("got %v after %d writes; a retry must not be sent once the fence fails", err, m.Calls(porttest.OpPut))
		}
	})
}

func TestCommitter08_ClaimStampsEpochAndFencesStaleLeaders(t *testing.T) {
	clk := porttest.NewFakeClock(t0)
	m := porttest.NewMemoryCAS("state")
	old, _ := newCommitter(t, m, clk)
	if err := old.Claim(ctx(t), 4); err != nil {
		t.Fatal(err)
	}
	if err := old.Commit(ctx(t), "k", "10"); err != nil {
		t.Fatal(err)
	}
	if doc := docOf(t, m); doc[domain.FenceEpochKey] != "4" || doc["k"] != "10" {
		t.Fatalf("after claim 4 and a commit: %v", doc)
	}

	// A new leader claims epoch 5: the document's version changes.
	next, rec := newCommitter(t, m, clk)
	if err := next.Claim(ctx(t), 5); err != nil {
		t.Fatal(err)
	}
	if doc := docOf(t, m); doc[domain.FenceEpochKey] != "5" || doc["k"] != "10" {
		t.Fatalf("after claim 5: %v", doc)
	}
	if rec.count(domain.EventClaimed) != 1 {
		t.Fatalf("events %v", rec.kinds())
	}

	// The old leader's delayed write fails its CAS; nothing moves.
	if err := old.Commit(ctx(t), "k", "20"); !errors.Is(err, domain.ErrConflict) {
		t.Fatalf("stale leader's write after the claim: %v, want ErrConflict", err)
	}
	// Reloading shows a newer epoch: fenced, not conflict.
	old.Reset()
	if _, err := old.Load(ctx(t)); !errors.Is(err, domain.ErrFenced) || errors.Is(err, domain.ErrConflict) {
		t.Fatalf("reload of a document with a newer epoch: %v, want ErrFenced", err)
	}
	if err := old.Commit(ctx(t), "k", "20"); !errors.Is(err, domain.ErrFenced) {
		t.Fatalf("stale leader's commit after reload: %v", err)
	}
	// Re-claiming an older epoch is refused.
	if err := old.Claim(ctx(t), 4); !errors.Is(err, domain.ErrFenced) {
		t.Fatalf("claiming epoch 4 over 5: %v", err)
	}
	if doc := docOf(t, m); doc["k"] != "10" || doc[domain.FenceEpochKey] != "5" {
		t.Fatalf("document moved: %v", doc)
	}
	// The new leader's commits carry its epoch; StoredEpoch reads it fresh.
	if err := next.Commit(ctx(t), "k", "11"); err != nil {
		t.Fatal(err)
	}
	if e, err := next.StoredEpoch(ctx(t)); err != nil || e != 5 {
		t.Fatalf("StoredEpoch = %d, %v", e, err)
	}
	if err := next.Claim(ctx(t), 0); err == nil {
		t.Fatal("Claim(0) accepted")
	}
	if err := next.Commit(ctx(t), domain.FenceEpochKey, "99"); err == nil {
		t.Fatal("committing the reserved epoch key was accepted")
	}
}

func TestCommitter09_CorruptDocumentIsNeverOverwritten(t *testing.T) {
	cases := map[string]struct{ data, problem string }{
		"not JSON":          {`{"k": "v"`, "not valid JSON"},
		"not UTF-8":         {"{\"k\": \"\xff\"}", "not valid UTF-8"},
		"array":             {`["a","b"]`, "JSON array, not an object"},
		"null":              {`null`, "JSON null, not an object"},
		"number value":      {`{"k": 5}`, `value of "k" is a JSON number`},
		"object value":      {`{"k": {"x":"y"}}`, `value of "k" is a JSON object`},
		"non-integer epoch": {`{"__fence_epoch__": "x"}`, "__fence_epoch__"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			clk := porttest.NewFakeClock(t0)
			m := porttest.NewMemoryCAS("state")
			v := m.Store([]byte(tc.data))
			c, _ := newCommitter(t, m, clk)
			for _, err := range []error{
				func() error { _, err := c.Load(ctx(t)); return err }(),
				c.Commit(ctx(t), "k", "v"),
				c.Claim(ctx(t), 2),
				func() error { _, err := c.StoredEpoch(ctx(t)); return err }(),
			} {
				var ce *domain.CorruptError
				if !errors.Is(err, domain.ErrCorrupt) || !errors.As(err, &ce) {
					t.Fatalf("got %v, want a CorruptError", err)
				}
				if !strings.Contains(err.Error(), "mem://state") || !strings.Contains(err.Error(), tc.problem) {
					t.Fatalf("error %q does not name the object and %q", err, tc.problem)
				}
			}
			if obj, _ := m.Peek(); obj.Version != v || string(obj.Data) != tc.data {
				t.Fatal("a corrupt document was overwritten")
			}
		})
	}
	t.Run("older implementation's document is adopted as-is", func(t *testing.T) {
		clk := porttest.NewFakeClock(t0)
		m := porttest.NewMemoryCAS("state")
		legacy := `{"pubsub:/event/LoginEventStream":"AAAAAAAB","eventlog_objects:LoginHistory":"2026-02-01T00:00:00Z","__fence_epoch__":"3"}`
		m.Store([]byte(legacy))
		c, _ := newCommitter(t, m, clk)
		doc, err := c.Load(ctx(t))
		if err != nil || doc["pubsub:/event/LoginEventStream"] != "AAAAAAAB" || doc[domain.FenceEpochKey] != "3" {
			t.Fatalf("Load = %v, %v", doc, err)
		}
		if err := c.Claim(ctx(t), 4); err != nil {
			t.Fatal(err)
		}
		got := docOf(t, m)
		if got["eventlog_objects:LoginHistory"] != "2026-02-01T00:00:00Z" || got[domain.FenceEpochKey] != "4" {
			t.Fatalf("after claim: %v", got)
		}
		if v, ok, err := c.Get(ctx(t), "pubsub:/event/LoginEventStream"); err != nil || !ok || v != "AAAAAAAB" {
			t.Fatalf("Get = %q %v %v", v, ok, err)
		}
	})
}

func TestCommitter10_RetryPolicy(t *testing.T) {
	t.Run("transient errors are retried with jittered, growing backoff", func(t *testing.T) {
		bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
			m := porttest.NewMemoryCAS("state")
			var sent []time.Time
			m.Inject(porttest.Fault{Op: porttest.OpPut, When: func(porttest.Call) bool {
				sent = append(sent, clk.Now())
				return false
			}})
			m.Inject(porttest.Fault{Op: porttest.OpPut, Err: porttest.ErrUnavailable, Times: 3})
			c, rec := newCommitter(t, m, clk, func(cfg *domain.CommitterConfig) {
				cfg.Retry = domain.RetryPolicy{BaseDelay: time.Second, MaxDelay: 4 * time.Second, Jitter: func() float64 { return 0.5 }}
			})
			var err error
			call(t, clk, func() { err = c.Commit(ctx(t), "k", "v") })
			if err != nil || len(sent) != 4 {
				t.Fatalf("got %v after %d attempts; want success on the 4th", err, len(sent))
			}
			// Backoff n is base*2^(n-1) capped, spread over [d/2, d]; jitter 0.5 → 3d/4.
			for i, want := range []time.Duration{750 * time.Millisecond, 1500 * time.Millisecond, 3 * time.Second} {
				if got := sent[i+1].Sub(sent[i]); got != want {
					t.Fatalf("wait before attempt %d = %s, want %s", i+2, got, want)
				}
			}
			if e := rec.all(); e[len(e)-1].Attempts != 4 {
				t.Fatalf("attempts reported %d", e[len(e)-1].Attempts)
			}
		})
	})
	t.Run("at most MaxAttempts, then the original error", func(t *testing.T) {
		bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
			m := porttest.NewMemoryCAS("state")
			m.Inject(porttest.Fault{Op: porttest.OpPut, Err: porttest.ErrUnavailable})
			c, _ := newCommitter(t, m, clk)
			var err error
			call(t, clk, func() { err = c.Commit(ctx(t), "k", "v") })
			if !errors.Is(err, porttest.ErrUnavailable) || m.Calls(porttest.OpPut) != domain.DefaultMaxAttempts {
				t.Fatalf("got %v after %d attempts; want the original error after %d", err, m.Calls(porttest.OpPut), domain.DefaultMaxAttempts)
			}
		})
	})
	t.Run("non-transient errors are not retried", func(t *testing.T) {
		m := porttest.NewMemoryCAS("state")
		m.Inject(porttest.Fault{Op: porttest.OpPut, Err: fmt.Errorf("403: %w", ports.ErrPermissionDenied)})
		c, _ := newCommitter(t, m, porttest.NewFakeClock(t0))
		if err := c.Commit(ctx(t), "k", "v"); !errors.Is(err, ports.ErrPermissionDenied) || m.Calls(porttest.OpPut) != 1 {
			t.Fatalf("got %v after %d attempts", err, m.Calls(porttest.OpPut))
		}
	})
	t.Run("cancellation is never retried", func(t *testing.T) {
		bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
			m := porttest.NewMemoryCAS("state")
			cctx, cancel := context.WithCancel(t.Context())
			m.Inject(porttest.Fault{Op: porttest.OpPut, Err: porttest.ErrUnavailable, Before: cancel})
			c, _ := newCommitter(t, m, clk)
			var err error
			call(t, clk, func() { err = c.Commit(cctx, "k", "v") })
			if !errors.Is(err, context.Canceled) || m.Calls(porttest.OpPut) != 1 {
				t.Fatalf("got %v after %d attempts; want context.Canceled after 1", err, m.Calls(porttest.OpPut))
			}
		})
	})
	t.Run("a Retry-After hint stretches the backoff", func(t *testing.T) {
		bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
			m := porttest.NewMemoryCAS("state")
			var sent []time.Time
			m.Inject(porttest.Fault{Op: porttest.OpPut, When: func(porttest.Call) bool { sent = append(sent, clk.Now()); return false }})
			m.Inject(porttest.Fault{Op: porttest.OpPut, Err: porttest.ErrThrottled, Times: 1})
			c, _ := newCommitter(t, m, clk)
			call(t, clk, func() { _ = c.Commit(ctx(t), "k", "v") })
			if len(sent) != 2 || sent[1].Sub(sent[0]) != time.Second {
				t.Fatalf("attempts at %v; want the retry one second (Retry-After) later", sent)
			}
		})
	})
	t.Run("a hung request is cut by the request timeout and retried", func(t *testing.T) {
		bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
			m := porttest.NewMemoryCAS("state", porttest.WithClock(clk))
			m.Inject(porttest.Fault{Op: porttest.OpPut, Delay: time.Hour, Times: 1})
			c, _ := newCommitter(t, m, clk, func(cfg *domain.CommitterConfig) { cfg.RequestTimeout = 5 * time.Second })
			start := clk.Now()
			var err error
			call(t, clk, func() { err = c.Commit(ctx(t), "k", "v") })
			if err != nil || clk.Now().Sub(start) > 10*time.Second {
				t.Fatalf("got %v after %s", err, clk.Now().Sub(start))
			}
		})
	})
}

func TestCommitterNoopWritesAndCache(t *testing.T) {
	clk := porttest.NewFakeClock(t0)
	m := porttest.NewMemoryCAS("state")
	c, _ := newCommitter(t, m, clk)
	if err := c.CommitMany(ctx(t), map[string]string{"a": "1"}); err != nil {
		t.Fatal(err)
	}
	m.ResetCalls()
	if err := c.CommitMany(ctx(t), map[string]string{"a": "1"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Delete(ctx(t), "missing"); err != nil {
		t.Fatal(err)
	}
	if m.Calls(porttest.OpPut) != 0 || m.Calls(porttest.OpGet) != 0 {
		t.Fatalf("unchanged document: %d reads, %d writes; want none", m.Calls(porttest.OpGet), m.Calls(porttest.OpPut))
	}
	// Reset serves an external write, and the next commit merges onto it.
	m.Store([]byte(`{"a":"external"}`))
	c.Reset()
	if v, _, _ := c.Get(ctx(t), "a"); v != "external" {
		t.Fatalf("after Reset: %q", v)
	}
	if err := c.Commit(ctx(t), "b", "2"); err != nil {
		t.Fatal(err)
	}
	if doc := docOf(t, m); doc["a"] != "external" || doc["b"] != "2" {
		t.Fatalf("document %v", doc)
	}
	if _, err := domain.NewCheckpointCommitter(nil, clk, domain.CommitterConfig{}); !errors.Is(err, domain.ErrInvalidConfig) {
		t.Fatalf("nil store: %v", err)
	}
	if c.String() != "mem://state" {
		t.Fatal(c.String())
	}
}

func TestCommitterForceEpochRepairs(t *testing.T) {
	clk := porttest.NewFakeClock(t0)
	m := porttest.NewMemoryCAS("state")
	m.Store([]byte(`{"k":"v","__fence_epoch__":"40"}`))
	c, _ := newCommitter(t, m, clk)
	if err := c.ForceEpoch(ctx(t), 3); err != nil {
		t.Fatal(err)
	}
	if doc := docOf(t, m); doc[domain.FenceEpochKey] != "3" || doc["k"] != "v" {
		t.Fatalf("after repair: %v", doc)
	}
	if err := c.ForceEpoch(ctx(t), 0); err != nil {
		t.Fatal(err)
	}
	if _, ok := docOf(t, m)[domain.FenceEpochKey]; ok {
		t.Fatal("ForceEpoch(0) kept the key")
	}
}

// With an org, a claim stamps it, and a claim by another org's shard is
// refused (the orgs were reordered): positions never pass between orgs.
func TestClaimStampsTheOrgAndRefusesAnother(t *testing.T) {
	m := porttest.NewMemoryCAS("state")
	if _, err := m.Put(ctx(t), []byte(`{"eventlogfile:API":"{}"}`), ports.CreateOnly()); err != nil {
		t.Fatal(err)
	}
	clk := porttest.NewFakeClock(t0)
	alpha, _ := domain.NewCheckpointCommitter(m, clk, domain.CommitterConfig{Org: "alpha"})
	if err := alpha.Claim(ctx(t), 1); err != nil {
		t.Fatalf("alpha adopts the single-org document: %v", err)
	}
	if doc := docOf(t, m); doc[domain.OrgKey] != "alpha" || doc["eventlogfile:API"] != "{}" {
		t.Fatalf("document %v", doc)
	}
	beta, _ := domain.NewCheckpointCommitter(m, clk, domain.CommitterConfig{Org: "beta"})
	err := beta.Claim(ctx(t), 2)
	var wrong *domain.WrongOrgError
	if !errors.As(err, &wrong) || !errors.Is(err, domain.ErrWrongOrg) || wrong.Owner != "alpha" || !strings.Contains(err.Error(), "list alpha first again") {
		t.Fatalf("beta's claim: %v", err)
	}
	if doc := docOf(t, m); doc[domain.FenceEpochKey] != "1" {
		t.Fatalf("the refused claim wrote: %v", doc)
	}
	single, _ := domain.NewCheckpointCommitter(m, clk, domain.CommitterConfig{})
	if err := single.Claim(ctx(t), 3); err != nil || docOf(t, m)[domain.OrgKey] != "alpha" {
		t.Fatalf("the single-org form claims whatever org is stamped, and keeps the stamp: %v %v", err, docOf(t, m))
	}
}
