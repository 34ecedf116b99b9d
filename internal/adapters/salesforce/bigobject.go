package salesforce

import (
	"cmp"
	"container/heap"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/sfrules"
)

// rowKey tells rows apart: the Id of an ordinary object; for a big object
// EventIdentifier (the event's unique id), else a non-empty Id, else a
// digest of the record.
func rowKey(o ObjectSpec, rec map[string]any) string {
	id, _ := rec["Id"].(string)
	if !o.big {
		return id
	}
	if ei, _ := rec["EventIdentifier"].(string); ei != "" {
		return ei
	}
	if strings.Trim(id, "0A") != "" {
		return id
	}
	line, _, _ := render(rec)
	sum := sha256.Sum256([]byte(line))
	return "sha256:" + hex.EncodeToString(sum[:12])
}

// bigCycle drains a big object.
//
// A big object's index serves its rows newest first only, and a query may
// filter only on the index's leading field (with whole-second literals), so
// the drain walks down from now with a ratcheting upper bound:
//
//	WHERE ts >= floor(cut) [AND ts < upper] ORDER BY ts DESC LIMIT 200
//
// where cut is the watermark less settle. A full page moves upper to the
// second after its oldest row's (that second is read again from its top;
// the rows already read are dropped by key), or, when the whole page lies
// in one second, that second is read whole with a field list from
// describe, no LIMIT and nextRecordsUrl, and upper becomes that second.
// Every query is legal on a big object: one range on the first index
// field, DESC, no Id, no OR, no NOT IN; and no page repeats, however many
// rows share a second or a millisecond.
//
// The rows (not before the cut, not carried by the cursor) form one window,
// emitted ascending by (timestamp, key); every entry carries the
// checkpoint from before the window except the last, which carries the
// advanced one, so a stop midway advances nothing. Rows the transforms
// drop or sampling leaves out stay in the window and emit nothing; when
// the last one is such a row, a checkpoint-only entry carries the advance.
// The window holds at most MaxCatchupRecords rows: the oldest ones above
// the watermark. When more are waiting, the newer ones are left, with a
// WARN, for the next polls, which continue from the window's end: nothing
// is skipped.
func (s *SOQLSource) bigCycle(ctx context.Context, o ObjectSpec, cur *cursor, emit func(ports.Entry) error) error {
	cut := cur.last.Add(-o.Settle)
	carriedIDs := make(map[string]bool, len(cur.IDs))
	for _, id := range cur.IDs {
		carriedIDs[id] = true
	}
	w := &window{max: o.MaxCatchupRecords}
	plan := s.Shaper.For(o.Name)
	// recent holds the keys of the rows read in the second a page ended
	// in: the only rows a later query reads again.
	recent := map[string]bool{}
	take := func(rows []row) error {
		for _, r := range rows {
			if r.t.Before(cut) || carriedIDs[r.key] || recent[r.key] {
				continue
			}
			delete(r.rec, "attributes")
			if !plan.Noop() && (!plan.Keep(r.key) || !plan.Values(r.rec)) {
				// Left out: it moves the cursor with the window, emits
				// nothing. (A row the window then evicts is read, and
				// counted, again by a later poll.)
				w.add(&held{key: r.key, t: r.t, ts: r.ts, left: true})
				continue
			}
			line, level, err := render(r.rec)
			if err != nil {
				return err
			}
			w.add(&held{key: r.key, t: r.t, ts: r.ts, line: line, level: level})
		}
		return nil
	}
	floor := cut.Truncate(time.Second)
	var upper time.Time
	for {
		cond := fmt.Sprintf("%s >= %s", o.TimestampField, literal(floor))
		if !upper.IsZero() {
			cond += fmt.Sprintf(" AND %s < %s", o.TimestampField, literal(upper))
		}
		rows, err := s.queryRows(ctx, o, fmt.Sprintf("SELECT FIELDS(ALL) FROM %s WHERE %s ORDER BY %s DESC LIMIT %d",
			o.Name, cond, o.TimestampField, PageSize))
		if err != nil {
			return err
		}
		if err := take(rows); err != nil {
			return err
		}
		if len(rows) < PageSize {
			break
		}
		sec := rows[len(rows)-1].t.Truncate(time.Second)
		clear(recent)
		for _, r := range rows {
			if !r.t.Before(sec) {
				recent[r.key] = true
			}
		}
		if rows[0].t.Truncate(time.Second).Equal(sec) {
			whole, err := s.wholeSecond(ctx, o, sec)
			if err != nil {
				return err
			}
			if err := take(whole); err != nil {
				return err
			}
			clear(recent)
			upper = sec
		} else {
			upper = sec.Add(time.Second)
		}
		if !upper.After(floor) {
			break
		}
	}
	rows := w.ascending()
	if len(rows) == 0 {
		return nil
	}
	if w.left > 0 {
		s.log.Warn("more rows wait than max_catchup_records: this poll emits the oldest ones, the next polls continue from them",
			"object", o.Name, "max_catchup_records", o.MaxCatchupRecords,
			"emitted_from", rows[0].ts, "emitted_to", rows[len(rows)-1].ts,
			"left_from", w.leftFrom.ts, "left_to", w.leftTo.ts)
	}
	before := cur.encode()
	after := cursor{last: cur.last, LastTS: cur.LastTS}
	if newest := rows[len(rows)-1]; newest.t.After(after.last) {
		after.last, after.LastTS = newest.t, newest.ts
	}
	if tail := rows[max(0, len(rows)-maxCarriedIDs):]; len(tail) < maxCarriedIDs {
		after.IDs = slices.Clone(cur.IDs[max(0, len(cur.IDs)-(maxCarriedIDs-len(tail))):])
	}
	for _, r := range rows[max(0, len(rows)-maxCarriedIDs):] {
		after.IDs = append(after.IDs, r.key)
	}
	for i, r := range rows {
		cp := before
		if i == len(rows)-1 {
			cp = after.encode()
		}
		if r.left {
			if i == len(rows)-1 { // the window's end still moves the cursor
				if err := emit(ports.Entry{CheckpointOnly: true, Checkpoint: ports.Checkpoint{Key: SOQLKeyPrefix + o.Name, Value: cp}}); err != nil {
					return err
				}
			}
			continue
		}
		if err := emit(s.entry(o, r.line, r.level, r.t, cp)); err != nil {
			return err
		}
	}
	*cur = after
	return nil
}

// wholeSecond reads every row of a big object in one second: the fields
// describe lists (FIELDS(ALL) would need LIMIT 200), no LIMIT, every
// nextRecordsUrl batch.
func (s *SOQLSource) wholeSecond(ctx context.Context, o ObjectSpec, sec time.Time) ([]row, error) {
	fields, err := s.describedFields(ctx, o)
	if err != nil {
		return nil, err
	}
	q := fmt.Sprintf("SELECT %s FROM %s WHERE %s >= %s AND %s < %s ORDER BY %s DESC", strings.Join(fields, ", "), o.Name,
		o.TimestampField, literal(sec), o.TimestampField, literal(sec.Add(time.Second)), o.TimestampField)
	return s.queryRows(ctx, o, q)
}

// describedFields lists an object's fields (once per source). Id is left
// out of a custom big object's list: Salesforce documents that a query
// naming Id on one returns only rows with an empty Id.
func (s *SOQLSource) describedFields(ctx context.Context, o ObjectSpec) ([]string, error) {
	s.mu.Lock()
	f, ok := s.fields[o.Name]
	s.mu.Unlock()
	if ok {
		return f, nil
	}
	var d struct {
		Fields []struct {
			Name string `json:"name"`
		} `json:"fields"`
	}
	if err := GetJSON(ctx, s.auth, fmt.Sprintf("/services/data/v%s/sobjects/%s/describe", s.version, o.Name), &d); err != nil {
		return nil, fmt.Errorf("salesforce: describe %s: %w", o.Name, err)
	}
	for _, fd := range d.Fields {
		if sfrules.ValidName(fd.Name) && (fd.Name != "Id" || !strings.HasSuffix(o.Name, "__b")) {
			f = append(f, fd.Name)
		}
	}
	if !slices.Contains(f, o.TimestampField) {
		return nil, fmt.Errorf("salesforce: describe %s lists no field %s", o.Name, o.TimestampField)
	}
	s.mu.Lock()
	if s.fields == nil {
		s.fields = map[string][]string{}
	}
	s.fields[o.Name] = f
	s.mu.Unlock()
	return f, nil
}

// held is a row of a window, rendered.
type held struct {
	key, ts     string
	t           time.Time
	line, level string
	// left: the transforms dropped the row or sampling left it out (no
	// line).
	left bool
}

func older(a, b *held) bool { return cmp.Or(a.t.Compare(b.t), strings.Compare(a.key, b.key)) < 0 }

// window keeps the oldest max rows added (all when max is 0): a max-heap
// whose newest row makes way for an older one. It remembers the range of
// the rows it left out.
type window struct {
	max  int
	rows []*held
	// left counts the rows left out; leftFrom and leftTo are the oldest
	// and the newest of them.
	left             int
	leftFrom, leftTo *held
}

func (w *window) Len() int           { return len(w.rows) }
func (w *window) Less(i, j int) bool { return older(w.rows[j], w.rows[i]) }
func (w *window) Swap(i, j int)      { w.rows[i], w.rows[j] = w.rows[j], w.rows[i] }
func (w *window) Push(x any)         { w.rows = append(w.rows, x.(*held)) }
func (w *window) Pop() any {
	r := w.rows[len(w.rows)-1]
	w.rows = w.rows[:len(w.rows)-1]
	return r
}

func (w *window) add(r *held) {
	if w.max <= 0 || len(w.rows) < w.max {
		heap.Push(w, r)
		return
	}
	out := r
	if older(r, w.rows[0]) {
		out = w.rows[0]
		w.rows[0] = r
		heap.Fix(w, 0)
	}
	w.left++
	if w.leftFrom == nil || older(out, w.leftFrom) {
		w.leftFrom = out
	}
	if w.leftTo == nil || older(w.leftTo, out) {
		w.leftTo = out
	}
}

// ascending returns the window's rows, oldest first.
func (w *window) ascending() []*held {
	out := slices.Clone(w.rows)
	slices.SortFunc(out, func(a, b *held) int { return cmp.Or(a.t.Compare(b.t), strings.Compare(a.key, b.key)) })
	return out
}
