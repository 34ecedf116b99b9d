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

// A standby that cannot contend says why, in its Status, and logs it once
// per change of reason, not at every poll.
func TestLeaseKeeperBlockedReasons(t *testing.T) {
	cases := []struct {
		name  string
		floor func(context.Context) (uint64, error)
		lease *domain.LeaseRecord
		code  string
	}{
		{name: "corrupt checkpoint document", code: domain.BlockedCheckpointCorrupt,
			floor: func(context.Context) (uint64, error) {
				return 0, &domain.CorruptError{Object: "mem://state", Problem: "not valid JSON"}
			}},
		{name: "unreadable checkpoint document", code: domain.BlockedCheckpointUnreadable,
			floor: func(context.Context) (uint64, error) { return 0, fmt.Errorf("read: %w", ports.ErrPermissionDenied) }},
		{name: "a passing outage of the checkpoint store blocks nothing", code: "",
			floor: func(context.Context) (uint64, error) { return 0, fmt.Errorf("read: %w", porttest.ErrUnavailable) }},
		{name: "epoch exhausted by the checkpoint document", code: domain.BlockedEpochExhausted,
			floor: func(context.Context) (uint64, error) { return domain.MaxEpoch, nil }},
		{name: "epoch exhausted by the lease", code: domain.BlockedEpochExhausted,
			lease: &domain.LeaseRecord{Holder: "", Instance: "x", Epoch: domain.MaxEpoch}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
				m := porttest.NewMemoryCAS("lease")
				if tc.lease != nil {
					plant(m, *tc.lease)
				}
				logs := &logBuffer{}
				k, _ := newKeeper(t, m, clk, "a", func(c *domain.LeaseConfig) {
					c.Logger = logs.logger()
					c.EpochFloor = tc.floor
				})
				log, stop := runKeeper(t, clk, k)
				settle(t, clk, 10*renew, func() bool { return false || clk.Now().Sub(t0) >= 9*renew })
				st := k.Status()
				stop()
				if len(log()) != 0 {
					t.Fatalf("callbacks %v: a blocked standby must not lead", log())
				}
				if st.Blocked != tc.code || (st.BlockedDetail == "") != (tc.code == "") {
					t.Fatalf("status blocked %q (%q), want %q", st.Blocked, st.BlockedDetail, tc.code)
				}
				want := 1
				if tc.code == "" {
					want = 0
				}
				if n := strings.Count(logs.String(), "cannot contend for the lease"); n != want {
					t.Fatalf("%d ERROR lines over 9 polls, want %d:\n%s", n, want, logs.String())
				}
				if tc.code != "" && strings.Contains(logs.String(), "standby step failed") {
					t.Fatalf("a per-poll WARN besides the ERROR:\n%s", logs.String())
				}
			})
		})
	}
}

// A lease whose holder wrote an absurd ttl blocks takeover for at most ten
// times our ttl, with a WARN naming the holder.
func TestLeaseKeeperCapsAForeignTTL(t *testing.T) {
	bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
		m := porttest.NewMemoryCAS("lease")
		plant(m, domain.LeaseRecord{Holder: "squatter", Instance: "s-1", Epoch: 4, TTL: "2000000h"})
		logs := &logBuffer{}
		k, _ := newKeeper(t, m, clk, "a", func(c *domain.LeaseConfig) { c.Logger = logs.logger() })
		log, stop := runKeeper(t, clk, k)
		settle(t, clk, 12*ttl, func() bool { return len(log()) > 0 })
		defer stop()
		if got := clk.Now().Sub(t0); got < 10*ttl || got > 10*ttl+renew {
			t.Fatalf("took over after %s, want 10 x ttl (%s)", got, 10*ttl)
		}
		if st := k.Status(); st.Epoch != 5 {
			t.Fatalf("epoch %d, want 5", st.Epoch)
		}
		if !strings.Contains(logs.String(), "lease_holder=squatter") || strings.Count(logs.String(), "far above ours") != 1 {
			t.Fatalf("want one WARN naming the holder:\n%s", logs.String())
		}
	})
}

// A stored epoch above MaxEpoch is refused as corrupt: fencing can never
// wrap to epoch 0.
func TestEpochsAreBounded(t *testing.T) {
	if _, err := domain.ParseEpoch(fmt.Sprint(domain.MaxEpoch + 1)); err == nil {
		t.Fatal("an epoch above MaxEpoch parsed")
	}
	if _, err := domain.DecodeLeaseRecord([]byte(`{"holder":"x","epoch":18446744073709551615}`)); err == nil {
		t.Fatal("a lease at 2^64-1 decoded")
	}
	bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
		m := porttest.NewMemoryCAS("state")
		m.Store([]byte(`{"__fence_epoch__":"18446744073709551615"}`))
		c, _ := newCommitter(t, m, clk)
		if _, err := c.StoredEpoch(ctx(t)); err == nil || !strings.Contains(err.Error(), "above the maximum") {
			t.Fatalf("StoredEpoch of 2^64-1: %v, want corrupt", err)
		}
		if err := c.ForceEpoch(ctx(t), domain.MaxEpoch+1); err == nil {
			t.Fatal("ForceEpoch above the maximum accepted")
		}
		if err := c.Claim(ctx(t), domain.MaxEpoch+1); err == nil {
			t.Fatal("Claim above the maximum accepted")
		}
	})
}

// Resign releases the lease at once for another replica and holds this one
// off; the other takes over at its next poll, not after ttl.
func TestLeaseKeeperResignHandsOver(t *testing.T) {
	bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
		m := porttest.NewMemoryCAS("lease")
		a, _ := newKeeper(t, m, clk, "a")
		logA, stopA := runKeeper(t, clk, a)
		defer stopA()
		settle(t, clk, renew, func() bool { return len(logA()) == 1 })
		b, _ := newKeeper(t, m, clk, "b")
		logB, stopB := runKeeper(t, clk, b)
		defer stopB()
		settle(t, clk, renew, func() bool { return b.Status().Decided })
		a.Resign("pipeline stalled", ttl)
		start := clk.Now()
		settle(t, clk, 2*renew, func() bool { return len(logB()) == 1 })
		if got := clk.Now().Sub(start); got > renew+time.Second {
			t.Fatalf("b took over %s after the resignation, want within one renew interval", got)
		}
		if l := logA(); len(l) != 2 || !strings.HasPrefix(l[1], "lose@1") {
			t.Fatalf("a's callbacks %v", l)
		}
		settle(t, clk, renew, func() bool { return a.Status().LeaseHolder == "b" })
		st := a.Status()
		if st.Blocked != domain.BlockedResigned || !strings.Contains(st.BlockedDetail, "pipeline stalled") || st.LeaseHolder != "b" {
			t.Fatalf("a's status %+v", st)
		}
		// b releases in turn: after its hold-off, a contends again.
		stopB()
		settle(t, clk, 2*ttl, func() bool { return len(logA()) == 3 })
		if a.Status().Blocked != "" {
			t.Fatalf("still blocked: %+v", a.Status())
		}
	})
}

// tooLargeCAS answers every Get with ports.ErrTooLarge, as an adapter does
// for an object over its size cap.
type tooLargeCAS struct{ *porttest.MemoryCAS }

func (c tooLargeCAS) Get(ctx context.Context) (ports.Object, error) {
	obj, err := c.MemoryCAS.Get(ctx)
	if err != nil {
		return obj, err
	}
	return ports.Object{Version: obj.Version}, fmt.Errorf("get: %w", ports.ErrTooLarge)
}

// An oversized lease is an unreadable one (taken over after ttl); an
// oversized checkpoint document is corrupt.
func TestOversizedDocuments(t *testing.T) {
	bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
		state := porttest.NewMemoryCAS("state")
		state.Store([]byte(`{}`))
		c, _ := newCommitter(t, tooLargeCAS{state}, clk)
		if _, err := c.Load(ctx(t)); !errors.Is(err, domain.ErrCorrupt) {
			t.Fatalf("Load of an oversized document: %v, want ErrCorrupt", err)
		}
		if _, err := c.StoredEpoch(ctx(t)); !errors.Is(err, domain.ErrCorrupt) {
			t.Fatalf("StoredEpoch of an oversized document: %v, want ErrCorrupt", err)
		}
		lease := porttest.NewMemoryCAS("lease")
		plant(lease, domain.LeaseRecord{Holder: "x", Instance: "x-1", Epoch: 3})
		k, _ := newKeeper(t, tooLargeCAS{lease}, clk, "a")
		log, stop := runKeeper(t, clk, k)
		defer stop()
		settle(t, clk, 2*ttl, func() bool { return len(log()) == 1 })
		if got := clk.Now().Sub(t0); got < ttl {
			t.Fatalf("took over an oversized lease after %s, before ttl", got)
		}
	})
}
