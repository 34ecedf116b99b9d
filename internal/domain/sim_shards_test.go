package domain_test

// The shard simulation's scripted end: once the faults have stopped and the
// shards are balanced, the node leading the most shards is killed (frozen
// for good: it neither renews nor releases nor leaves the membership), and
// later a new node joins. The balance rule promises, and these phases
// check at every instant the scheduler stops:
//
//   - on the loss, only the dead node's shards move, each acquired once,
//     and no survivor ever leads more than the new ceiling (shards over the
//     survivors, rounded up);
//   - on the join, only the excess moves, each shard once, and only to the
//     joiner, which never leads more than the new ceiling.

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"time"
)

// simAcq is one acquisition of a shard's lease.
type simAcq struct {
	at    time.Time
	node  string
	shard int
}

// simPhase is where the scripted end stands.
type simPhase int

const (
	phaseChaos simPhase = iota // before the kill (faults, then calm)
	phaseLoss                  // a node was killed
	phaseJoin                  // a node joined
)

// phaseGap is how long each phase lasts: the balance bound, and a margin.
func phaseGap() time.Duration { return balanceBound() + 5*time.Second }

// shardPhases is the scripted end's state (shards only).
type shardPhases struct {
	phase  simPhase
	killAt time.Time
	victim string
	joiner string
	// before is each shard's leader when the phase began.
	before []string
	// counts are the shards each node led when the phase began.
	counts map[string]int
	// acquired are the acquisitions since the phase began.
	acquired []simAcq
	// said keeps each broken rule reported once per seed.
	said map[string]bool
}

// noteAcquired records an acquisition (w.mu held).
func (w *world) noteAcquiredLocked(node string, shard int) {
	if w.phases.phase != phaseChaos {
		w.phases.acquired = append(w.phases.acquired, simAcq{at: w.now, node: node, shard: shard})
	}
}

// violateOnce reports a broken rule of the scripted end once (w.mu held).
func (w *world) violateOnce(rule, format string, args ...any) {
	if w.phases.said == nil {
		w.phases.said = map[string]bool{}
	}
	if w.phases.said[rule] {
		return
	}
	w.phases.said[rule] = true
	w.violate(format, args...)
}

// ceilOf is the fair share's ceiling of shards over n replicas.
func ceilOf(shards, n int) int { return (shards + n - 1) / n }

// beginLoss kills the node leading the most shards (ties: the lowest id).
func (w *world) beginLoss() {
	w.mu.Lock()
	defer w.mu.Unlock()
	p := &w.phases
	p.phase, p.killAt, p.before, p.counts, p.acquired = phaseLoss, w.now, slices.Clone(w.leaders), countLed(w.leaders), nil
	best := ""
	for _, n := range w.nodes {
		if best == "" || p.counts[n.name] > p.counts[best] {
			best = n.name
		}
	}
	p.victim = best
	for _, n := range w.nodes {
		if n.name == best {
			n.paused, n.pausedTo = true, w.now.Add(1000*time.Hour)
		}
	}
	w.logLocked("scripted: %s killed while leading %d shards (leaders %v)", best, p.counts[best], p.before)
}

// beginJoin starts a new node.
func (w *world) beginJoin() *simNode {
	w.mu.Lock()
	defer w.mu.Unlock()
	p := &w.phases
	w.closeLossLocked()
	id := len(w.nodes)
	n := &simNode{id: id, name: fmt.Sprintf("n%d", id), ratePPT: 1000, base: w.now.Add(-17 * time.Second),
		rng: &lockedRand{r: rand.New(rand.NewPCG(w.cfg.seed, uint64(id+1)))}}
	n.clock = &simClock{w: w, node: n}
	w.nodes = append(w.nodes, n)
	p.phase, p.joiner, p.before, p.counts, p.acquired = phaseJoin, n.name, slices.Clone(w.leaders), countLed(w.leaders), nil
	w.logLocked("scripted: %s joins (leaders %v)", n.name, p.before)
	return n
}

// countLed counts the shards each node leads.
func countLed(leaders []string) map[string]int {
	out := map[string]int{}
	for _, l := range leaders {
		if l != "" {
			out[l]++
		}
	}
	return out
}

// unbalancedLocked reports, when the shards are not all led by live nodes
// in shares that differ by at most one, why. w.mu held.
func (w *world) unbalancedLocked() string {
	counts := countLed(w.leaders)
	lo, hi := len(w.leaders), 0
	for _, n := range w.nodes {
		if n.name != w.phases.victim {
			lo, hi = min(lo, counts[n.name]), max(hi, counts[n.name])
		}
	}
	if slices.Contains(w.leaders, "") || hi-lo > 1 {
		return fmt.Sprintf("leaders %v", w.leaders)
	}
	return ""
}

// closeLossLocked checks the loss phase's outcome: every dead node's shard
// acquired exactly once, by a survivor; nothing else acquired; balanced.
func (w *world) closeLossLocked() {
	p := &w.phases
	if why := w.unbalancedLocked(); why != "" {
		w.violateOnce("loss-balance", "loss of %s: not balanced %s after it: %s", p.victim, phaseGap(), why)
	}
	per := map[int][]string{}
	for _, a := range p.acquired {
		per[a.shard] = append(per[a.shard], a.node)
	}
	for i, l := range p.before {
		got := per[i]
		switch {
		case l == p.victim && len(got) != 1:
			w.violateOnce(fmt.Sprintf("loss-moves-%d", i), "loss of %s: its shard %s was acquired %d times (%v), not once", p.victim, leaseObj(i), len(got), got)
		case l != p.victim && len(got) > 0:
			w.violateOnce(fmt.Sprintf("loss-kept-%d", i), "loss of %s: shard %s, led by survivor %s, moved (acquired by %v)", p.victim, leaseObj(i), l, got)
		}
	}
}

// checkPhasesLocked checks the scripted end's rules at this instant, given
// each shard's leader ("" when unled). w.mu held.
func (w *world) checkPhasesLocked(leaders []string) {
	p := &w.phases
	counts := countLed(leaders)
	switch p.phase {
	case phaseLoss:
		ceil := ceilOf(len(leaders), len(w.nodes)-1)
		for node, c := range counts {
			if node != p.victim && c > ceil {
				w.violateOnce("loss-ceil-"+node, "loss of %s: survivor %s leads %d shards, above the new ceiling %d (leaders %v)", p.victim, node, c, ceil, leaders)
			}
		}
		for i, l := range p.before {
			if l != p.victim && leaders[i] != l {
				w.violateOnce(fmt.Sprintf("loss-unled-%d", i), "loss of %s: shard %s, led by survivor %s, is led by %q", p.victim, leaseObj(i), l, leaders[i])
			}
		}
	case phaseJoin:
		live := len(w.nodes) - 1 // the dead node stays dead
		ceil := ceilOf(len(leaders), live)
		if c := counts[p.joiner]; c > ceil {
			w.violateOnce("join-ceil", "join of %s: it leads %d shards, above the ceiling %d (leaders %v)", p.joiner, c, ceil, leaders)
		}
		for _, a := range p.acquired {
			if a.node != p.joiner {
				w.violateOnce(fmt.Sprintf("join-other-%d", a.shard), "join of %s: shard %s moved to %s, not to the joiner", p.joiner, leaseObj(a.shard), a.node)
			}
		}
		seen := map[int]int{}
		for _, a := range p.acquired {
			if seen[a.shard]++; seen[a.shard] == 2 {
				w.violateOnce(fmt.Sprintf("join-twice-%d", a.shard), "join of %s: shard %s moved twice", p.joiner, leaseObj(a.shard))
			}
		}
		if excess := joinExcess(p.counts, len(leaders), live, p.victim); len(p.acquired) > excess {
			w.violateOnce("join-excess", "join of %s: %d shards moved, the excess is %d (leaders before %v)", p.joiner, len(p.acquired), excess, p.before)
		}
	}
}

// joinExcess is how many shards must move to a joiner: enough that every
// old node is at most the ceiling and the joiner at least the floor.
func joinExcess(counts map[string]int, shards, live int, dead string) int {
	floor, ceil := shards/live, ceilOf(shards, live)
	over := 0
	for node, c := range counts {
		if node != dead {
			over += max(0, c-ceil)
		}
	}
	return max(floor, over)
}

// closeJoinLocked checks the join phase's outcome at the end: the joiner
// got exactly the excess.
func (w *world) closeJoinLocked() {
	p := &w.phases
	if why := w.unbalancedLocked(); why != "" {
		w.violateOnce("join-balance", "join of %s: not balanced %s after it: %s", p.joiner, phaseGap(), why)
	}
	live := len(w.nodes) - 1
	excess := joinExcess(p.counts, len(p.before), live, p.victim)
	if len(p.acquired) != excess {
		var got []string
		for _, a := range p.acquired {
			got = append(got, fmt.Sprintf("%s→%s", leaseObj(a.shard), a.node))
		}
		w.violateOnce("join-count", "join of %s: %d shards moved (%s), the excess was %d (leaders before %v)", p.joiner, len(p.acquired),
			strings.Join(got, ", "), excess, p.before)
	}
}
