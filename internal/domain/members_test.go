package domain_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/ports/porttest"
)

func newMember(t *testing.T, cas ports.ObjectCAS, clk ports.Clock, holder string) *domain.Membership {
	t.Helper()
	m, err := domain.NewMembership(cas, clk, domain.MemberConfig{Holder: holder, TTL: 3 * time.Second, RenewInterval: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// beatAll beats each membership in turn, failing the test on an error.
func beatAll(t *testing.T, ms ...*domain.Membership) {
	t.Helper()
	for _, m := range ms {
		if err := m.Beat(ctx(t)); err != nil {
			t.Fatal(err)
		}
	}
}

// Replicas beating into one document see each other; one that stops is
// gone for the others once its beat has not changed for its ttl (on their
// clocks), and its entry is dropped; one that leaves is gone at once.
func TestMembershipSeesBeatsAndLosesTheSilent(t *testing.T) {
	bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
		cas := porttest.NewMemoryCAS("members")
		a, b, c := newMember(t, cas, clk, "a"), newMember(t, cas, clk, "b"), newMember(t, cas, clk, "c")
		beat := func(ms ...*domain.Membership) { beatAll(t, ms...) }
		beat(a, b, c, a, b)
		if got := a.Live(); !slices.Equal(got, []string{"a", "b", "c"}) {
			t.Fatalf("a sees %v", got)
		}
		for range 4 { // c stops beating
			advance(t, clk, time.Second)
			beat(a, b)
		}
		if got := a.Live(); !slices.Equal(got, []string{"a", "b"}) {
			t.Fatalf("after c's silence a sees %v", got)
		}
		if doc := string(mustGet(t, cas)); !containsAll(doc, `"a"`, `"b"`) || containsAll(doc, `"c"`) {
			t.Fatalf("c's entry was not dropped: %s", doc)
		}
		if err := b.Leave(ctx(t)); err != nil {
			t.Fatal(err)
		}
		advance(t, clk, time.Second)
		beat(a)
		if got := a.Live(); !slices.Equal(got, []string{"a"}) {
			t.Fatalf("after b left a sees %v", got)
		}
	})
}

// A replica the balance learned is dead (MarkGone) is gone at once for
// this replica, before its heartbeat's ttl ends, and stays gone until its
// beat changes: then it is live again, and Newest says when it became so.
// The mark is this replica's opinion: the entry stays in the document, so
// a third replica still counts it. A mark naming another process of the
// same holder id (a restart) marks nothing.
func TestMembershipMarkGoneLastsUntilTheNextBeat(t *testing.T) {
	bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
		cas := porttest.NewMemoryCAS("members")
		a, b, c := newMember(t, cas, clk, "a"), newMember(t, cas, clk, "b"), newMember(t, cas, clk, "c")
		beat := func(ms ...*domain.Membership) { beatAll(t, ms...) }
		beat(b, c, a, c)
		joined := clk.Now()
		if got := a.Live(); !slices.Equal(got, []string{"a", "b", "c"}) || !a.Newest().Equal(joined) {
			t.Fatalf("a sees %v, newest %v", got, a.Newest())
		}
		advance(t, clk, time.Second)
		beat(a)
		if !a.Newest().Equal(joined) {
			t.Fatalf("a beat that did not change keeps b's newest: %v", a.Newest())
		}
		a.MarkGone("b", "an-earlier-process-of-b")
		if got := a.Live(); !slices.Equal(got, []string{"a", "b", "c"}) {
			t.Fatalf("a mark naming another process of b marked b: %v", got)
		}
		a.MarkGone("b", "")
		a.MarkGone("a", "") // never itself
		if got := a.Live(); !slices.Equal(got, []string{"a", "c"}) {
			t.Fatalf("after MarkGone a sees %v", got)
		}
		beat(a, c) // b's beat has not changed: still gone to a, and still in the document for c
		if got := a.Live(); !slices.Equal(got, []string{"a", "c"}) {
			t.Fatalf("b's unchanged beat revived it: %v", got)
		}
		if got := c.Live(); !slices.Equal(got, []string{"a", "b", "c"}) {
			t.Fatalf("a's mark spread to c through the document: c sees %v", got)
		}
		advance(t, clk, time.Second)
		beat(b, a)
		if got := a.Live(); !slices.Equal(got, []string{"a", "b", "c"}) || !a.Newest().Equal(clk.Now()) {
			t.Fatalf("after b beat again a sees %v, newest %v (now %v)", got, a.Newest(), clk.Now())
		}
	})
}

// The document is soft state: an unreadable one is replaced.
func TestMembershipReplacesAnUnreadableDocument(t *testing.T) {
	bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
		cas := porttest.NewMemoryCAS("members")
		if _, err := cas.Put(ctx(t), []byte("not json"), ports.CreateOnly()); err != nil {
			t.Fatal(err)
		}
		a := newMember(t, cas, clk, "a")
		if err := a.Beat(ctx(t)); err != nil {
			t.Fatal(err)
		}
		if doc := string(mustGet(t, cas)); !containsAll(doc, `"members"`, `"a"`) {
			t.Fatalf("document %s", doc)
		}
	})
}

// Replicas beating at once lose compare-and-swaps to each other and retry:
// every beat lands, and everyone ends up in the document.
func TestMembershipConcurrentBeats(t *testing.T) {
	bubble(t, func(t *testing.T, clk *porttest.FakeClock) {
		cas := porttest.NewMemoryCAS("members")
		var ms []*domain.Membership
		for i := range 5 {
			ms = append(ms, newMember(t, cas, clk, fmt.Sprintf("r%d", i)))
		}
		for range 3 {
			done := make(chan error, len(ms))
			for _, m := range ms {
				go func() { done <- m.Beat(ctx(t)) }()
			}
			for range ms {
				if err := <-done; err != nil {
					t.Log(err) // a replica may lose three races in a row: it beats again next interval
				}
			}
			advance(t, clk, time.Second)
		}
		for _, m := range ms {
			if err := m.Beat(ctx(t)); err != nil {
				t.Fatal(err)
			}
		}
		// r0 beat first in that round: a replica that lost every race
		// above joined after r0 last read. r0 sees it at its next beat.
		if err := ms[0].Beat(ctx(t)); err != nil {
			t.Fatal(err)
		}
		if got := ms[0].Live(); len(got) != 5 {
			t.Fatalf("r0 sees %v", got)
		}
	})
}

func mustGet(t *testing.T, cas ports.ObjectCAS) []byte {
	t.Helper()
	obj, err := cas.Get(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	return obj.Data
}

func containsAll(s string, subs ...string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
