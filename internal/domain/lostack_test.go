package domain_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/ports/porttest"
)

// applyThenFailEveryAttempt makes the next put land but answer a transient
// error, and every retry of that call fail without landing: the call gives
// up with its outcome unknown.
func applyThenFailEveryAttempt(m *porttest.MemoryCAS) {
	m.Inject(porttest.Fault{Op: porttest.OpPut, ApplyFirst: true, Times: 1})
	m.Inject(porttest.Fault{Op: porttest.OpPut, Err: porttest.ErrUnavailable, Times: domain.DefaultMaxAttempts - 1})
}

// A write whose first attempt landed while every attempt of its call failed
// leaves the cached Version stale. The next call's first-attempt precondition
// failure is then ours, not another writer's: it must be verified against
// the bytes sent, exactly as a retry within one call is.
func TestCommitterLostAckAcrossCalls(t *testing.T) {
	for _, op := range writeOps {
		for _, firstUpload := range []bool{false, true} {
			if firstUpload && op.name == "Delete" {
				continue // a delete needs a document to delete from
			}
			t.Run(fmt.Sprintf("%s first upload %v", op.name, firstUpload), func(t *testing.T) {
				bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
					// Generation versions, as GCS: a first upload is create-only
					// (generation 0) and the retry after it lands answers 412.
					m := porttest.NewMemoryCAS("state")
					logs := &logBuffer{}
					c, rec := newCommitter(t, m, clk, func(cfg *domain.CommitterConfig) { cfg.Logger = logs.logger() })
					if !firstUpload {
						op.prepare(t, c)
					}
					applyThenFailEveryAttempt(m)
					var err error
					call(t, clk, func() { err = op.run(t, c) })
					if err == nil || errors.Is(err, domain.ErrConflict) {
						t.Fatalf("first call: got %v, want a give-up with the outcome unknown", err)
					}
					m.ClearFaults()
					call(t, clk, func() { err = c.Commit(ctx(t), "after", "1") })
					if err != nil {
						t.Fatalf("the next call after our own write landed: %v (misdiagnosed as a conflict)", err)
					}
					doc := docOf(t, m)
					op.check(t, doc)
					if doc["after"] != "1" {
						t.Fatalf("document %v lacks the second call's key", doc)
					}
					obj, _ := m.Peek()
					if c.Version() != obj.Version {
						t.Fatalf("cached version %q, stored %q", c.Version(), obj.Version)
					}
					if rec.count(domain.EventRecoveredLostAck) != 1 || rec.count(domain.EventConflict) != 0 {
						t.Fatalf("events %v", rec.kinds())
					}
					if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "outcome was unknown") {
						t.Fatalf("not logged at WARN: %q", logs.String())
					}
				})
			})
		}
	}
}

// The cross-call verification is exact: when the stored document is not
// what the unknown write sent, the next call's loss is a real conflict.
func TestCommitterLostAckAcrossCallsStillDetectsAForeignWriter(t *testing.T) {
	for name, landed := range map[string]bool{"our write landed, then a foreign one": true, "our write never landed": false} {
		t.Run(name, func(t *testing.T) {
			bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
				m := porttest.NewMemoryCAS("state")
				c, rec := newCommitter(t, m, clk)
				if err := c.Commit(ctx(t), "base", "0"); err != nil {
					t.Fatal(err)
				}
				if landed {
					applyThenFailEveryAttempt(m)
				} else {
					m.Inject(porttest.Fault{Op: porttest.OpPut, Err: porttest.ErrUnavailable, Times: domain.DefaultMaxAttempts})
				}
				call(t, clk, func() { _ = c.Commit(ctx(t), "a", "1") })
				m.ClearFaults()
				m.Store([]byte(`{"base":"0","foreign":"x"}`))
				var err error
				call(t, clk, func() { err = c.Commit(ctx(t), "b", "2") })
				if !errors.Is(err, domain.ErrConflict) {
					t.Fatalf("got %v, want ErrConflict", err)
				}
				if doc := docOf(t, m); doc["foreign"] != "x" || doc["b"] != "" {
					t.Fatalf("the foreign document was overwritten: %v", doc)
				}
				if rec.count(domain.EventRecoveredLostAck) != 0 {
					t.Fatalf("events %v", rec.kinds())
				}
			})
		})
	}
}

// A store that acknowledges a write without a version (an S3 PUT answered
// without an ETag) must not turn the next write into a conflict.
func TestCommitterWriteAcknowledgedWithoutAVersion(t *testing.T) {
	bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
		m := porttest.NewMemoryCAS("state")
		c, rec := newCommitter(t, &noVersionCAS{MemoryCAS: m, blank: 1}, clk)
		for i := range 3 {
			var err error
			call(t, clk, func() { err = c.Commit(ctx(t), "k", fmt.Sprint(i)) })
			if err != nil {
				t.Fatalf("commit %d: %v", i, err)
			}
		}
		if doc := docOf(t, m); doc["k"] != "2" || rec.count(domain.EventConflict) != 0 {
			t.Fatalf("document %v, events %v", doc, rec.kinds())
		}
	})
}

// noVersionCAS answers its first blank puts without a version.
type noVersionCAS struct {
	*porttest.MemoryCAS
	blank int
}

func (n *noVersionCAS) Put(ctx context.Context, data []byte, pre ports.Precondition) (ports.Version, error) {
	v, err := n.MemoryCAS.Put(ctx, data, pre)
	if err == nil && n.blank > 0 {
		n.blank--
		return "", nil
	}
	return v, err
}

// The same for the lease: a renewal that landed while every attempt of its
// round failed must not read as a takeover at the next round.
func TestLeaseKeeperRenewalLostAckAcrossRounds(t *testing.T) {
	bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
		m := porttest.NewMemoryCAS("lease")
		logs := &logBuffer{}
		k, rec := newKeeper(t, m, clk, "a", func(c *domain.LeaseConfig) { c.Logger = logs.logger() })
		acquire(t, k)
		applyThenFailEveryAttempt(m)
		clk.Advance(renew)
		var res domain.StepResult
		call(t, clk, func() { res = k.Step(ctx(t)) })
		if res.Role != domain.RoleLeader || res.Err == nil {
			t.Fatalf("round 1: %+v, want a failed round that keeps leading", res)
		}
		m.ClearFaults()
		call(t, clk, func() { res = k.Step(ctx(t)) })
		if res.Role != domain.RoleLeader || res.Transition == domain.TransitionLost || k.CheckFence() != nil {
			t.Fatalf("round 2 after our own renewal landed: %+v (misdiagnosed as a takeover)", res)
		}
		_, v := stored(t, m)
		if k.Status().Version != v {
			t.Fatalf("cached version %q, stored %q", k.Status().Version, v)
		}
		if rec.count(domain.EventRecoveredLostAck) != 1 || rec.count(domain.EventLost) != 0 {
			t.Fatalf("events %v", rec.kinds())
		}
		if !strings.Contains(logs.String(), "outcome was unknown") {
			t.Fatalf("not logged: %q", logs.String())
		}
		// A release after such a round also verifies instead of failing.
		applyThenFailEveryAttempt(m)
		clk.Advance(renew)
		call(t, clk, func() { res = k.Step(ctx(t)) })
		m.ClearFaults()
		var err error
		call(t, clk, func() { err = k.Release(ctx(t)) })
		if err != nil {
			t.Fatalf("release after an unknown renewal: %v", err)
		}
		if rec2, _ := stored(t, m); rec2.Holder != "" {
			t.Fatalf("lease still names %q after the release", rec2.Holder)
		}
	})
}

// The next call's own first attempt may fail transiently before its
// precondition failure shows: the verification still recognises the
// earlier call's write.
func TestCommitterLostAckAcrossCallsAfterATransientFirstAttempt(t *testing.T) {
	bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
		m := porttest.NewMemoryCAS("state")
		c, rec := newCommitter(t, m, clk)
		if err := c.Commit(ctx(t), "base", "0"); err != nil {
			t.Fatal(err)
		}
		applyThenFailEveryAttempt(m)
		call(t, clk, func() { _ = c.Commit(ctx(t), "a", "1") })
		m.ClearFaults()
		m.Inject(porttest.Fault{Op: porttest.OpPut, Err: porttest.ErrUnavailable, Times: 1})
		var err error
		call(t, clk, func() { err = c.Commit(ctx(t), "b", "2") })
		if err != nil {
			t.Fatalf("got %v, want the earlier write recognised", err)
		}
		if doc := docOf(t, m); doc["a"] != "1" || doc["b"] != "2" || rec.count(domain.EventConflict) != 0 {
			t.Fatalf("document %v, events %v", doc, rec.kinds())
		}
	})
}
