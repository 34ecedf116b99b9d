package domain_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"github.com/sf2loki/sf2loki/internal/domain"
)

func views(holders ...string) []domain.ShardView {
	out := make([]domain.ShardView, len(holders))
	for i, h := range holders {
		out[i] = domain.ShardView{Name: fmt.Sprintf("org-%d", i), Holder: h}
	}
	return out
}

func TestBalanceDecisions(t *testing.T) {
	for _, tc := range []struct {
		name     string
		self     string
		members  []string
		shards   []domain.ShardView
		release  string
		claim    int
		learning bool
		settling bool
	}{
		{"fresh start: claim the fair share", "a", []string{"a", "b", "c"}, views("", "", "", "", "", ""), "", 2, false, false},
		{"balanced 2/2/2: nothing", "a", []string{"a", "b", "c"}, views("a", "a", "b", "b", "c", "c"), "", 0, false, false},
		{"above ceil: release the last", "a", []string{"a", "b", "c"}, views("a", "a", "a", "b", "c", "c"), "org-2", 0, false, false},
		{"a replica joined: 3/3 over three, release", "a", []string{"a", "b", "c"}, views("a", "a", "a", "b", "b", "b"), "org-2", 0, false, false},
		{"a joined replica claims nothing while none is free", "c", []string{"a", "b", "c"}, views("a", "a", "a", "b", "b", "b"), "", 0, false, false},
		{"7 over 3: 3/2/2 is balanced", "a", []string{"a", "b", "c"}, views("a", "a", "a", "b", "b", "c", "c"), "", 0, false, false},
		{"7 over 3: 3/3/1, the designated one releases", "a", []string{"a", "b", "c"}, views("a", "a", "a", "b", "b", "b", "c"), "org-2", 0, false, false},
		{"7 over 3: 3/3/1, the other waits", "b", []string{"a", "b", "c"}, views("a", "a", "a", "b", "b", "b", "c"), "", 0, false, false},
		{"a free shard goes to the starved first", "b", []string{"a", "b", "c"}, views("a", "a", "", "b", "b", "b", "c"), "", 0, false, false},
		{"the starved claims it", "c", []string{"a", "b", "c"}, views("a", "a", "", "b", "b", "b", "c"), "", 1, false, false},
		{"a dead holder's shards: no release while they are not free", "a", []string{"a", "b"}, views("a", "a", "a", "x", "x", "b"), "", 0, false, false},
		{"its shards, once free, are claimed up to the ceiling", "b", []string{"a", "b"}, views("a", "a", "a", "", "", "b"), "", 2, false, false},
		{"more replicas than shards", "d", []string{"a", "b", "c", "d"}, views("a", "b", ""), "", 1, false, false},
		{"self missing from members counts all the same", "c", []string{"a", "b"}, views("", "", ""), "", 1, false, false},
		{"learning its peers: no claim", "a", []string{"a"}, views("", "", "", "", "", ""), "", 0, true, false},
		{"learning its peers: a release still happens", "a", []string{"a", "b", "c"}, views("a", "a", "a", "b", "c", "c"), "org-2", 0, true, false},
		{"settling: above ceil, no release yet", "a", []string{"a", "b", "c"}, views("a", "a", "a", "b", "c", "c"), "", 0, false, true},
		{"settling: no release for a starved joiner yet", "a", []string{"a", "b", "c"}, views("a", "a", "a", "b", "b", "b", "c"), "", 0, false, true},
		{"settling: free shards are still claimed", "b", []string{"a", "b"}, views("a", "a", "a", "", "", "b"), "", 2, false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := domain.Balance(domain.BalanceInput{Self: tc.self, Members: tc.members, Shards: tc.shards, Learning: tc.learning, Settling: tc.settling})
			if p.Release != tc.release || len(p.Claim) != tc.claim {
				t.Fatalf("plan %+v, want release %q and %d claims", p, tc.release, tc.claim)
			}
		})
	}
}

// From any start (random replicas, shards and holders, some of them gone),
// replicas applying Balance in rounds (a release frees the shard; claims on
// one free shard are won by one of the contenders) reach a state where
// every shard is led and any two live replicas' counts differ by at most
// one, within a bound of rounds, and stay there.
func TestBalanceConverges(t *testing.T) {
	for seed := range 2000 {
		rng := rand.New(rand.NewPCG(uint64(seed), 11))
		n, s := 1+rng.IntN(6), rng.IntN(20)
		var members []string
		for i := range n {
			members = append(members, fmt.Sprintf("r%d", i))
		}
		holders := make([]string, s)
		for i := range holders {
			switch rng.IntN(3) {
			case 0:
				holders[i] = ""
			case 1:
				holders[i] = "gone" // a dead replica: its lease goes stale
			default:
				holders[i] = members[rng.IntN(n)]
			}
		}
		stable := 0
		for round := 0; round < 4*s+10; round++ {
			shards := views(holders...)
			claims := map[string][]string{}
			released := map[int]bool{}
			for _, m := range members {
				p := domain.Balance(domain.BalanceInput{Self: m, Members: members, Shards: shards})
				if p.Release != "" {
					released[slices.IndexFunc(shards, func(v domain.ShardView) bool { return v.Name == p.Release })] = true
				}
				for _, c := range p.Claim {
					claims[c] = append(claims[c], m)
				}
			}
			changed := false
			for i := range holders {
				switch {
				case released[i]:
					holders[i], changed = "", true
				case holders[i] == "gone":
					holders[i], changed = "", true // stale by the next round
				case holders[i] == "" && len(claims[shards[i].Name]) > 0:
					cs := claims[shards[i].Name]
					holders[i], changed = cs[rng.IntN(len(cs))], true
				}
			}
			if !changed {
				stable++
			} else if stable > 0 {
				t.Fatalf("seed %d: changed again after a stable round: %v", seed, holders)
			}
		}
		counts := map[string]int{}
		for _, h := range holders {
			if h == "" {
				t.Fatalf("seed %d (%d replicas, %d shards): a shard is free at the end: %v", seed, n, s, holders)
			}
			counts[h]++
		}
		lo, hi := s, 0
		for _, m := range members {
			lo, hi = min(lo, counts[m]), max(hi, counts[m])
		}
		if hi-lo > 1 {
			t.Fatalf("seed %d (%d replicas, %d shards): counts %v differ by %d", seed, n, s, counts, hi-lo)
		}
		if stable == 0 {
			t.Fatalf("seed %d: never stable", seed)
		}
	}
}
