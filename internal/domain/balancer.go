package domain

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/sf2loki/sf2loki/internal/ports"
)

// Shard is one shard's lease keeper, as the Balancer sees it.
type Shard struct {
	Name   string
	Keeper *LeaseKeeper
}

// Balancer spreads a replica's shards: every renew interval it beats in the
// membership document, reads what each shard's keeper last observed, and
// applies Balance: it opens the claim gate (LeaseConfig.MayClaim, from
// Gate) of the shards the plan lets it claim, closes the others, and asks
// the keeper of a shard to hand off to resign (drain, commit, release).
type Balancer struct {
	members *Membership
	clock   ports.Clock
	renew   time.Duration
	log     *slog.Logger

	self string

	mu     sync.Mutex
	shards []Shard
	said   string // the plan last logged
}

// NewBalancer returns a balancer beating in members every renew.
func NewBalancer(members *Membership, clock ports.Clock, renew time.Duration, log *slog.Logger) *Balancer {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Balancer{members: members, clock: clock, renew: renew, log: log, self: members.cfg.Holder}
}

// Gate is the claim gate of shard name, for its keeper's LeaseConfig: it
// plans afresh from what every keeper last observed and the live replicas
// now, so a shard freed by a dead replica is claimed at the keeper's next
// poll.
func (b *Balancer) Gate(name string) func() bool {
	return func() bool {
		plan, _, _ := b.evaluate()
		return slices.Contains(plan.Claim, name)
	}
}

// Add registers shards (their keepers built with Gate).
func (b *Balancer) Add(shards ...Shard) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.shards = append(b.shards, shards...)
}

// Plan returns the plan as of now (what every keeper last observed).
func (b *Balancer) Plan() BalancePlan {
	plan, _, _ := b.evaluate()
	return plan
}

// Members returns the live replicas as last seen.
func (b *Balancer) Members() []string { return b.members.Live() }

// evaluate plans from what every keeper last observed and the live
// replicas now.
func (b *Balancer) evaluate() (BalancePlan, []string, []Shard) {
	b.mu.Lock()
	shards := slices.Clone(b.shards)
	b.mu.Unlock()
	views := make([]ShardView, 0, len(shards))
	gone := map[string]bool{}
	for _, s := range shards {
		st := s.Keeper.Status()
		if st.Role != RoleLeader && st.Blocked != "" && st.Blocked != BlockedResigned {
			// No replica can lead it (a corrupt document, an unreadable
			// lease: the keeper says why): it is left out of the shares, so
			// it neither takes a claim slot nor keeps the others from
			// balancing.
			continue
		}
		views = append(views, ShardView{Name: s.Name, Holder: holderOf(st, b.self)})
		if st.Role != RoleLeader && st.Free && st.LeaseHolder != "" && st.LeaseHolder != b.self {
			// A lease its holder let go stale: the holder is dead (a live
			// one renews, or fences itself before its lease goes stale),
			// whatever its last heartbeat says.
			gone[st.LeaseHolder] = true
		}
	}
	live := slices.DeleteFunc(b.members.Live(), func(m string) bool { return gone[m] })
	return Balance(BalanceInput{Self: b.self, Members: live, Shards: views}), live, shards
}

// Step beats, then plans: it logs a changed plan and asks the keeper of the
// shard to release to resign.
func (b *Balancer) Step(ctx context.Context) BalancePlan {
	if err := b.members.Beat(ctx); err != nil && ctx.Err() == nil {
		b.log.Warn("membership heartbeat failed; balancing on the replicas seen before", "error", err)
	}
	plan, live, shards := b.evaluate()
	said := fmt.Sprintf("%d replicas, leading %d (fair share %d to %d), claiming %v, releasing %q", len(live), plan.Led, plan.Floor, plan.Ceil, plan.Claim, plan.Release)
	b.mu.Lock()
	changed := said != b.said
	b.said = said
	b.mu.Unlock()
	if changed {
		b.log.Info("shard balance", "replicas", live, "leading", plan.Led, "floor", plan.Floor, "ceil", plan.Ceil,
			"claiming", plan.Claim, "releasing", plan.Release)
	}
	if plan.Release != "" {
		for _, s := range shards {
			if s.Name == plan.Release {
				s.Keeper.Resign(fmt.Sprintf("rebalancing: this replica leads %d shards, the fair share over %d replicas is at most %d",
					plan.Led, len(live), plan.Ceil), 0)
			}
		}
	}
	return plan
}

// holderOf is the shard's holder as a keeper last observed it: this replica
// while it leads; "" when the lease is free; "(unknown)" before the first
// read (it counts for no live replica, so nothing moves on it).
func holderOf(st Status, self string) string {
	switch {
	case st.Role == RoleLeader:
		return self
	case st.Free:
		return ""
	case st.LeaseHolder == "":
		return "(unknown)"
	case st.LeaseHolder == self:
		return "(unknown)" // our own lease, no longer ours: stale soon
	}
	return st.LeaseHolder
}

// Run steps every renew interval until ctx ends, then leaves the
// membership (so that the others rebalance at once).
func (b *Balancer) Run(ctx context.Context) {
	for {
		b.Step(ctx)
		select {
		case <-ctx.Done():
			lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.renew)
			defer cancel()
			if err := b.members.Leave(lctx); err != nil {
				b.log.Warn("could not leave the membership; the others count this replica gone after its ttl", "error", err)
			}
			return
		case <-b.clock.After(b.renew):
		}
	}
}
