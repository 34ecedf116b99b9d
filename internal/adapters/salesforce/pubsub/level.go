package pubsub

import (
	"github.com/sf2loki/sf2loki/internal/adapters/salesforce"
)

// levelMemo remembers salesforce.Level on one fast decoder's events by the
// questions it asked and the answers it got. Level is a function of the
// values its get returns, so an event that answers the questions as a
// remembered event did has that event's level, and Level need not run.
// Questions about fields the schema does not have are left out: their
// answer is always "", and the next question after a given run of answers
// is always the same.
// One topic's stream uses it (no locking); it holds at most
// maxLevelSteps steps, then asks Level about what it has not seen.
type levelMemo struct {
	d     *fastDecoder
	root  *levelStep
	steps int
}

// levelStep is a question Level asked (the field whose value it read),
// or, with field "", the level it answered.
type levelStep struct {
	field string
	slot  int // the field's captured slot (probe.slot)
	level string
	next  map[string]*levelStep // by the field's value
}

// maxLevelSteps bounds a memo: a field read with values of many kinds (an
// exception message) fills it, and then only the paths already remembered
// are answered from it.
const maxLevelSteps = 512

// level is salesforce.Level(p.text).
func (m *levelMemo) level(p *probe) string {
	if m.d != p.d {
		*m = levelMemo{d: p.d}
	}
	for s := m.root; s != nil; {
		if s.field == "" {
			return s.level
		}
		s = p.lookup(s.field, s.slot, s.next)
	}
	var path []answer
	level := salesforce.Level(func(field string) string {
		v := p.text(field)
		path = append(path, answer{field, v})
		return v
	})
	m.remember(path, level)
	return level
}

type answer struct{ field, value string }

// remember adds the path Level took to level.
func (m *levelMemo) remember(path []answer, level string) {
	if m.steps+len(path)+1 > maxLevelSteps {
		return
	}
	var parent *levelStep // nil: the root
	var value string      // the answer leading from parent
	set := func(s *levelStep) {
		if parent == nil {
			m.root = s
		} else {
			parent.next[value] = s
		}
		m.steps++
	}
	s := m.root
	for _, a := range path {
		slot := m.d.slot(a.field)
		if slot == -1 {
			// A field the schema does not have reads "" on every event:
			// its answer tells nothing, and asking it again would cost a
			// lookup on every event.
			continue
		}
		switch {
		case s == nil:
			s = &levelStep{field: a.field, slot: slot, next: map[string]*levelStep{}}
			set(s)
		case s.field != a.field:
			return // not the question asked before on these answers
		}
		parent, value, s = s, a.value, s.next[a.value]
	}
	if s == nil {
		set(&levelStep{level: level})
	}
}

// slot is where probe.lookup reads a field from: its captured slot, -1
// for a field whose value is always "" (not captured), -2 for one read
// through probe.text.
func (d *fastDecoder) slot(name string) int {
	if name == "ChangeEventHeader" && d.header != -1 {
		return -2
	}
	for slot, c := range d.captured {
		if c.name == name && slot != d.header {
			return slot
		}
	}
	return -1
}

// lookup is next[p.text(field)], slot being d.slot(field), without
// copying a string value.
func (p *probe) lookup(field string, slot int, next map[string]*levelStep) *levelStep {
	switch {
	case slot == -1:
		return next[""]
	case slot < -1:
		return next[p.text(field)]
	}
	r := reader{in: p.payload, pos: p.offs[slot]}
	n := p.d.captured[slot].typ
	for n.kind == kUnion {
		i, _ := r.readInt() // it was read once already to write the line
		n = n.union[i]
	}
	if n.kind == kString {
		b, _ := r.readBytes()
		return next[string(b)]
	}
	return next[r.text(n)]
}
