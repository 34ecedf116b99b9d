package domain

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/sf2loki/sf2loki/internal/ports"
)

// settleRounds is how many renew intervals a replica that became live
// counts as settling: every live peer beats within one, so after two each
// has seen it (drift and request latency allowing).
const settleRounds = 2

// maxSettleRounds bounds how long releases for balance wait while replicas
// keep becoming live (one crash-looping under new instances, a flapping
// network): after that many renew intervals of settling without a break,
// a replica releases as if settled, so that one leading above the ceiling
// always hands off.
const maxSettleRounds = 2 * settleRounds

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
//
// A claim its gate allowed counts as led until the keeper reports it ended
// (ClaimEnded), so that two shards freed at once are not both claimed with
// room for one. A replica whose lease was let go stale, or released as it
// stopped, is counted gone at once and stays gone until its heartbeat
// changes again (Membership.MarkGone). Claims wait for the first
// membership round; releases for balance wait until every replica that
// became live is settled (settleRounds), but never longer than
// maxSettleRounds in a row.
type Balancer struct {
	members *Membership
	clock   ports.Clock
	renew   time.Duration
	log     *slog.Logger

	self string

	// gateMu makes a gate's plan and its reservation one step.
	gateMu sync.Mutex

	mu     sync.Mutex
	shards []Shard
	said   string // the plan last logged
	// claiming are the shards whose claim the gate allowed and whose
	// keeper has not yet said it ended.
	claiming map[string]bool
	// started is when the first step began; beaten when the first
	// heartbeat landed; learned once a heartbeat landed half a renew
	// interval after it (or two renew intervals passed without one).
	started, beaten time.Time
	learned         bool
	// settlingSince is when the current run of settling began (zero when
	// not settling).
	settlingSince time.Time
}

// NewBalancer returns a balancer beating in members every renew.
func NewBalancer(members *Membership, clock ports.Clock, renew time.Duration, log *slog.Logger) *Balancer {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Balancer{members: members, clock: clock, renew: renew, log: log, self: members.cfg.Holder, claiming: map[string]bool{}}
}

// Gate is the claim gate of shard name, for its keeper's LeaseConfig: it
// plans afresh from what every keeper last observed and the live replicas
// now, so a shard freed by a dead replica is claimed at the keeper's next
// poll. An allowed claim counts as led until it ends.
func (b *Balancer) Gate(name string) ClaimGate { return shardGate{b: b, name: name} }

type shardGate struct {
	b    *Balancer
	name string
}

func (g shardGate) MayClaim() bool {
	b := g.b
	b.gateMu.Lock()
	defer b.gateMu.Unlock()
	plan, _, _ := b.evaluate()
	ok := slices.Contains(plan.Claim, g.name)
	if ok {
		b.mu.Lock()
		b.claiming[g.name] = true
		b.mu.Unlock()
	}
	return ok
}

func (g shardGate) ClaimEnded() {
	g.b.mu.Lock()
	delete(g.b.claiming, g.name)
	g.b.mu.Unlock()
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
	claiming := maps.Clone(b.claiming)
	learning := !b.learned
	b.mu.Unlock()
	views := make([]ShardView, 0, len(shards))
	for _, s := range shards {
		st := s.Keeper.Status()
		if st.Role != RoleLeader && st.Blocked != "" && st.Blocked != BlockedResigned {
			// No replica can lead it (a corrupt document, an unreadable
			// lease: the keeper says why): it is left out of the shares, so
			// it neither takes a claim slot nor keeps the others from
			// balancing.
			continue
		}
		holder := holderOf(st, b.self)
		if claiming[s.Name] {
			holder = b.self
		}
		views = append(views, ShardView{Name: s.Name, Holder: holder})
		if st.Role == RoleLeader || b.clock.Now().Sub(st.LastObserved) > b.renew+b.renew/2 {
			continue // an old observation (reads failing) says nothing of now
		}
		switch {
		case st.Free && st.LeaseHolder != "" && st.LeaseHolder != b.self:
			// A lease its holder let go stale: that process is dead (a live
			// one renews, or fences itself before its lease goes stale),
			// whatever its last heartbeat says.
			b.members.MarkGone(st.LeaseHolder, st.LeaseInstance)
		case st.Departed != "" && st.Departed != b.self:
			// A lease its holder released as it stopped (a process of the
			// same holder id started since is not that one).
			b.members.MarkGone(st.Departed, st.LeaseInstance)
		}
	}
	live := b.members.Live()
	newest := b.members.Newest()
	settling := b.settling(newest)
	return Balance(BalanceInput{Self: b.self, Members: live, Shards: views, Learning: learning, Settling: settling}), live, shards
}

// settling reports whether a replica became live too recently to release
// for balance: within settleRounds of newest, and for at most
// maxSettleRounds in a row.
func (b *Balancer) settling(newest time.Time) bool {
	now := b.clock.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	if newest.IsZero() || now.Sub(newest) >= settleRounds*b.renew {
		b.settlingSince = time.Time{}
		return false
	}
	if b.settlingSince.IsZero() {
		b.settlingSince = now
	}
	return now.Sub(b.settlingSince) < maxSettleRounds*b.renew
}

// Step beats, then plans: it logs a changed plan and asks the keeper of the
// shard to release to resign.
func (b *Balancer) Step(ctx context.Context) BalancePlan {
	now := b.clock.Now()
	b.mu.Lock()
	if b.started.IsZero() {
		b.started = now
	}
	b.mu.Unlock()
	err := b.members.Beat(ctx)
	if err != nil && ctx.Err() == nil {
		b.log.Warn("membership heartbeat failed; balancing on the replicas seen before", "error", err)
	}
	b.mu.Lock()
	switch {
	case b.learned:
	case now.Sub(b.started) >= settleRounds*b.renew:
		// Without two heartbeats landing in time, balancing goes on with
		// the replicas seen so far.
		b.learned = true
	case err == nil && b.beaten.IsZero():
		b.beaten = now
	case err == nil && now.Sub(b.beaten) >= b.renew/2:
		// A heartbeat half a renew interval after the first has seen every
		// replica started together.
		b.learned = true
	}
	b.mu.Unlock()
	plan, live, shards := b.evaluate()
	b.mu.Lock()
	learning := !b.learned
	b.mu.Unlock()
	said := fmt.Sprintf("%d replicas, leading %d (fair share %d to %d), claiming %v, releasing %q, learning %v", len(live), plan.Led, plan.Floor, plan.Ceil, plan.Claim, plan.Release, learning)
	b.mu.Lock()
	changed := said != b.said
	b.said = said
	b.mu.Unlock()
	if changed {
		b.log.Info("shard balance", "replicas", live, "leading", plan.Led, "floor", plan.Floor, "ceil", plan.Ceil,
			"claiming", plan.Claim, "releasing", plan.Release, "learning_peers", learning)
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

// Run steps every renew interval (the second step after half of one, to
// learn the peers started together) until ctx ends, then leaves the
// membership (so that the others rebalance at once).
func (b *Balancer) Run(ctx context.Context) {
	for {
		b.Step(ctx)
		next := b.renew
		b.mu.Lock()
		if !b.learned && !b.beaten.IsZero() {
			next = b.renew / 2
		}
		b.mu.Unlock()
		select {
		case <-ctx.Done():
			lctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.renew)
			defer cancel()
			if err := b.members.Leave(lctx); err != nil {
				b.log.Warn("could not leave the membership; the others count this replica gone after its ttl", "error", err)
			}
			return
		case <-b.clock.After(next):
		}
	}
}
