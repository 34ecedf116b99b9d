package domain

import (
	"hash/fnv"
	"slices"
)

// Spreading shards over replicas. Every org is a shard with its own lease;
// every replica may lead any shard. Each replica decides for itself, from
// what it observed (the live replicas, and each shard's holder), with the
// pure function Balance; every replica applying it reaches, once the leases
// and the membership settle, a steady state where the numbers of shards any
// two live replicas lead differ by at most one:
//
//   - With S shards and N live replicas, floor = S/N and ceil = floor+1
//     (floor when N divides S).
//   - A replica leading more than ceil releases one shard (gracefully:
//     drain, commit, release), one per decision.
//   - When every shard is led by a live replica and one replica leads fewer
//     than floor, the replica leading the most (ties: the smallest id)
//     releases one, if it leads more than floor.
//   - A free shard (no holder, a released lease or a stale one) may be
//     claimed by a replica leading fewer than its cap: floor while some
//     replica leads fewer than floor (so that it gets the shard first),
//     else ceil. A replica claims at most cap minus what it leads (a claim
//     still in flight counts as led), the free shards ordered by a hash of
//     its id and the shard's name (rendezvous), so that replicas
//     contending at once mostly ask for different shards.
//   - A replica that has not yet learned its peers (its first membership
//     round) claims nothing, so that replicas started together each claim
//     their share rather than the first one up claiming all.
//   - While a replica became live less than a membership round ago
//     (settling), nothing is released for balance: some peers may not count
//     it yet, and would claim what is released for it. A run of settling
//     lasts at most a few rounds (replicas that keep becoming live do not
//     hold a replica above the ceiling for ever).
//
// Safety does not rest on this: each shard's lease and epoch fence let one
// replica at a time pass its fence whatever Balance says. Balance only
// decides which shards a replica releases and which it contends for.

// ShardView is what a replica observed of one shard's lease.
type ShardView struct {
	Name string
	// Holder is the replica leading it; "" when it is free (absent,
	// released, or unchanged for longer than its ttl).
	Holder string
}

// BalanceInput is one replica's view.
type BalanceInput struct {
	Self string
	// Members are the live replicas (Self is one whatever the list says).
	Members []string
	Shards  []ShardView
	// Learning is true until this replica has learned its peers: it
	// claims nothing.
	Learning bool
	// Settling is true while a replica became live less than a membership
	// round ago: nothing is released for balance.
	Settling bool
}

// BalancePlan is what a replica does next.
type BalancePlan struct {
	// Release is the shard to hand off gracefully, or "".
	Release string
	// Claim are the free shards the replica may contend for.
	Claim []string
	// Led is how many shards it leads, Floor and Ceil the fair share.
	Led, Floor, Ceil int
}

// Balance decides, from one replica's view, which shard it releases and
// which free shards it may claim.
func Balance(in BalanceInput) BalancePlan {
	live := map[string]bool{in.Self: true}
	for _, m := range in.Members {
		live[m] = true
	}
	counts := map[string]int{}
	var mine, free []string
	settled := true // every shard led by a live replica
	for _, s := range in.Shards {
		switch {
		case s.Holder == "":
			free = append(free, s.Name)
			settled = false
		case !live[s.Holder]:
			settled = false // its holder is gone: the lease goes stale within its ttl
		default:
			counts[s.Holder]++
			if s.Holder == in.Self {
				mine = append(mine, s.Name)
			}
		}
	}
	n, total := len(live), len(in.Shards)
	floor := total / n
	ceil := floor
	if total%n != 0 {
		ceil++
	}
	plan := BalancePlan{Led: len(mine), Floor: floor, Ceil: ceil}
	slices.Sort(mine)
	starved := false // some live replica leads fewer than floor
	for m := range live {
		if counts[m] < floor {
			starved = true
		}
	}
	switch {
	case in.Settling:
	case len(mine) > ceil:
		plan.Release = mine[len(mine)-1]
	case settled && starved && len(mine) > floor && designated(live, counts) == in.Self:
		plan.Release = mine[len(mine)-1]
	}
	if plan.Release != "" || in.Learning {
		return plan
	}
	limit := ceil
	if starved {
		limit = floor
	}
	if room := limit - len(mine); room > 0 && len(free) > 0 {
		slices.SortFunc(free, func(a, b string) int {
			ha, hb := rendezvous(in.Self, a), rendezvous(in.Self, b)
			switch {
			case ha < hb:
				return -1
			case ha > hb:
				return 1
			}
			return 0
		})
		plan.Claim = free[:min(room, len(free))]
		slices.Sort(plan.Claim)
	}
	return plan
}

// designated is the live replica that releases a shard for a starved one:
// the one leading the most, ties broken by the smallest id.
func designated(live map[string]bool, counts map[string]int) string {
	best := ""
	for m := range live {
		if best == "" || counts[m] > counts[best] || (counts[m] == counts[best] && m < best) {
			best = m
		}
	}
	return best
}

// rendezvous orders shards per replica.
func rendezvous(replica, shard string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(replica))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(shard))
	return h.Sum64()
}
