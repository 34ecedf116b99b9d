package salesforce

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// The interval rule of an event type says, per UTC day of LogDate, which
// interval's files are read: Salesforce writes the same events into a
// Daily file and (with Event Monitoring) into Hourly files, so a day read
// from both would be read twice, and a day read from neither lost.
//
// The rule is a list of switches, oldest first: from each switch's day on,
// files of its interval are the type's, up to the next switch. Consecutive
// switches alternate, so the days before the oldest one are read from the
// other interval. The last switch is stored as interval and
// interval_since (the form of every earlier version), the ones before it
// as interval_earlier; at most maxSwitches are kept (a dropped switch only
// concerns days older than any file a listing still returns).

// elfSwitch is one switch of a type's interval rule.
type elfSwitch struct {
	Interval string `json:"interval"`
	Since    string `json:"since"`
	since    time.Time
}

// maxSwitches bounds the switches a position keeps.
const maxSwitches = 16

// other is the interval that is not iv.
func other(iv string) string {
	if iv == IntervalDaily {
		return IntervalHourly
	}
	return IntervalDaily
}

// switches returns the rule's switches, oldest first.
func (p *elfPos) switches() []elfSwitch {
	r := slices.Clone(p.Earlier)
	if !p.since.IsZero() {
		r = append(r, elfSwitch{Interval: p.Interval, Since: p.Since, since: p.since})
	}
	return r
}

// base is the interval of the days before the oldest switch.
func (p *elfPos) base() string {
	if r := p.switches(); len(r) > 0 {
		return other(r[0].Interval)
	}
	return p.Interval
}

// intervalAt is the interval the rule reads for a file with LogDate t.
func (p *elfPos) intervalAt(t time.Time) string {
	r := p.switches()
	for i := len(r) - 1; i >= 0; i-- {
		if !t.Before(r[i].since) {
			return r[i].Interval
		}
	}
	return p.base()
}

// wants reports whether f is one of the type's files under its rule.
func (p *elfPos) wants(f elfFile) bool {
	return p.Interval != "" && f.interval == p.intervalAt(f.logDate)
}

// set makes the rule read interval from the day from on (every day, when
// from is zero), keeping the switches before from.
func (p *elfPos) set(interval string, from time.Time) {
	if from.IsZero() {
		p.Interval, p.Since, p.since, p.Earlier = interval, "", time.Time{}, nil
		return
	}
	base := p.base()
	if p.Interval == "" {
		base = other(interval)
	}
	r := p.switches()
	r = slices.DeleteFunc(r, func(w elfSwitch) bool { return !w.since.Before(from) })
	cur := base
	if len(r) > 0 {
		cur = r[len(r)-1].Interval
	}
	if cur != interval {
		r = append(r, elfSwitch{Interval: interval, Since: from.Format(sfTimeLayout), since: from})
	}
	if len(r) > maxSwitches {
		r = r[len(r)-maxSwitches:]
	}
	if len(r) == 0 {
		p.Interval, p.Since, p.since, p.Earlier = base, "", time.Time{}, nil
		return
	}
	last := r[len(r)-1]
	p.Interval, p.Since, p.since = last.Interval, last.Since, last.since
	p.Earlier = nil
	if len(r) > 1 {
		p.Earlier = r[:len(r)-1]
	}
}

// parseRule checks and reads a stored rule.
func (p *elfPos) parseRule() error {
	if p.Interval != "" && p.Interval != IntervalHourly && p.Interval != IntervalDaily {
		return errors.New("interval is not Hourly or Daily")
	}
	if p.Since != "" {
		t, err := ParseTime(p.Since)
		if err != nil || p.Interval == "" {
			return errors.New("interval_since is not a timestamp following an interval")
		}
		p.since = t
	}
	if len(p.Earlier) > 0 && p.Since == "" {
		return errors.New("interval_earlier without interval_since")
	}
	for i := range p.Earlier {
		w := &p.Earlier[i]
		t, err := ParseTime(w.Since)
		if err != nil || (w.Interval != IntervalHourly && w.Interval != IntervalDaily) {
			return errors.New("interval_earlier holds an entry that is not {\"interval\": Hourly or Daily, \"since\": a timestamp}")
		}
		w.since = t
	}
	r := p.switches()
	for i := 1; i < len(r); i++ {
		if !r[i-1].since.Before(r[i].since) || r[i-1].Interval == r[i].Interval {
			return errors.New("interval_earlier and interval_since are not switches in time order, each to the other interval")
		}
	}
	return nil
}

// describe is the rule in words, for the log.
func (p *elfPos) describe() string {
	r := p.switches()
	if len(r) == 0 {
		return p.Interval + " files"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s files with a LogDate before %s, %s files from it", p.base(), r[0].since.Format(time.DateOnly), r[0].Interval)
	for _, w := range r[1:] {
		fmt.Fprintf(&b, ", %s files from %s", w.Interval, w.since.Format(time.DateOnly))
	}
	return b.String()
}

// choose decides, with interval auto, the type's rule from its listing
// (the files created since its watermark):
//
//   - A type without a stored position takes Hourly when its listing holds
//     an Hourly file, else Daily (undecided while it lists nothing). A
//     position written before intervals were recorded was read Hourly.
//     Either is then checked by the two rules below, before any file is
//     read.
//   - Daily → Hourly (Event Monitoring licensed), when the listing holds an
//     Hourly file of a day the rule reads Daily: from the day after both
//     the earliest such file's LogDate and the watermark, or from that
//     file's day itself when its LogDate is the day's first hour (the
//     Hourly files cover the whole day) and the day is after the
//     watermark's. The Daily file of a day Hourly files began in covers the
//     hours before they began and is read instead; every Hourly file from
//     the switch is created after the watermark, so the listing sees it.
//     Hourly files of the day a Daily range begins on are the ones that
//     stopped there, and switch nothing.
//   - Hourly → Daily, when a listed Daily file covers a day D the rule
//     reads Hourly and the org has no Hourly file for D, or D is the first
//     day it has any and they began after D's first hour (asked once per
//     file): Daily files are read from the day after the org's last Hourly
//     file before D, or from every day when there is none. When that file
//     is not of the day's last hour, its day is read from its Daily file
//     too (it holds the hours after the Hourly files stopped; those read
//     already are read again), moving the watermark back to that file when
//     it was listed and skipped before (the caller lists again). When the
//     org has Hourly files after D (they began, or came back, later),
//     Hourly files are read again from the day of the first of them, or the
//     day after it when they began after its first hour. So a day without
//     Hourly files is read from its Daily file, and a type switches to
//     Daily for good only when the Hourly files stopped.
//
// It reports whether the watermark moved back.
func (s *ELFSource) choose(ctx context.Context, t string, st *elfType, files []elfFile) (relist bool, _ error) {
	pos := st.pos
	var reason string
	if pos.Interval == "" {
		switch {
		case !st.fresh:
			pos.set(IntervalHourly, time.Time{})
			reason = "a checkpoint written before the interval was recorded, by a version that read Hourly files by default"
		case slices.ContainsFunc(files, func(f elfFile) bool { return f.interval == IntervalHourly }):
			pos.set(IntervalHourly, time.Time{})
			reason = "the org publishes Hourly files for the type"
		case len(files) > 0:
			pos.set(IntervalDaily, time.Time{})
			reason = "the org publishes no Hourly files for the type (Event Monitoring not licensed): Daily files"
		default:
			return false, nil
		}
	}
	defer func() { s.note(t, pos, reason) }()
	// Each rule changes what the other sees: apply them until neither
	// switches (every switch makes a listed file the type's, so this ends;
	// the bound is a guard).
	for range 2*len(files) + 2 {
		var why string
		if pos.Interval == IntervalDaily {
			why = toHourly(pos, files)
		} else {
			var err error
			if why, relist, err = s.toDaily(ctx, t, st, files); err != nil || relist {
				if why != "" {
					reason = why
				}
				return relist, err
			}
		}
		if why == "" {
			return false, nil
		}
		reason = why
	}
	return false, nil
}

// toHourly applies the Daily → Hourly rule; it returns the reason of a
// switch, or "".
func toHourly(pos *elfPos, files []elfFile) string {
	var first time.Time
	for _, f := range files {
		// Hourly files of the day the Daily files began on are those that
		// stopped (see toDaily), not new ones.
		if f.interval == IntervalHourly && !pos.wants(f) && (pos.since.IsZero() || day(f.logDate).After(pos.since)) &&
			(first.IsZero() || f.logDate.Before(first)) {
			first = f.logDate
		}
	}
	if first.IsZero() {
		return ""
	}
	from := day(first)
	if !first.Equal(from) {
		from = from.AddDate(0, 0, 1)
	}
	pos.set(IntervalHourly, later(from, day(pos.last).AddDate(0, 0, 1)))
	return "the org began publishing Hourly files for the type"
}

// toDaily applies the Hourly → Daily rule; it returns the reason of a
// switch, or "", and whether the watermark moved back to a Daily file that
// must be read (the type is then listed again).
func (s *ELFSource) toDaily(ctx context.Context, t string, st *elfType, files []elfFile) (string, bool, error) {
	pos := st.pos
	daily := slices.DeleteFunc(slices.Clone(files), func(f elfFile) bool { return f.interval != IntervalDaily })
	slices.SortStableFunc(daily, func(a, b elfFile) int { return a.logDate.Compare(b.logDate) })
	for _, f := range daily {
		key := [2]string{f.id, f.created}
		if pos.wants(f) || st.covered[key] {
			continue
		}
		d := day(f.logDate)
		next, err := s.hourlyLogDate(ctx, t, ">=", d)
		if err != nil {
			return "", false, err
		}
		fromFirstHour := next.Equal(d)
		if day(next).Equal(d) && fromFirstHour {
			st.covered[key] = true
			continue
		}
		prev, err := s.hourlyLogDate(ctx, t, "<", d)
		if err != nil {
			return "", false, err
		}
		if day(next).Equal(d) && !prev.IsZero() {
			st.covered[key] = true // Hourly files that day, and before it
			continue
		}
		// d has no Hourly file, or is the first day with any and they began
		// after its first hour: its Daily file holds hours they do not.
		var from time.Time // every day
		back := false
		if !prev.IsZero() {
			from = day(prev).AddDate(0, 0, 1)
			if prev.Before(from.Add(-time.Hour)) { // they stopped before the day's last hour
				listed := slices.ContainsFunc(daily, func(g elfFile) bool { return day(g.logDate).Equal(day(prev)) && !pos.done(g.id, g.created) })
				if !listed {
					// That day's Daily file was listed before and skipped:
					// move the watermark back to it.
					if back, err = s.rewindTo(ctx, t, pos, day(prev)); err != nil {
						return "", false, err
					}
				}
				if listed || back {
					from = day(prev)
				}
			}
		}
		pos.set(IntervalDaily, from)
		if next.IsZero() {
			return fmt.Sprintf("the org published no Hourly file for %s or later", d.Format(time.DateOnly)), back, nil
		}
		until := day(next)
		if !next.Equal(until) {
			until = until.AddDate(0, 0, 1)
		}
		pos.set(IntervalHourly, until)
		if day(next).Equal(d) {
			return fmt.Sprintf("the org's Hourly files begin on %s, after its first hour", d.Format(time.DateOnly)), back, nil
		}
		return fmt.Sprintf("the org published no Hourly file from %s to %s", d.Format(time.DateOnly), day(next).AddDate(0, 0, -1).Format(time.DateOnly)), back, nil
	}
	return "", false, nil
}

// rewindTo moves the watermark back to the creation of the type's Daily
// file of day d, when there is one not yet read and older than the
// watermark; it reports whether it moved. The files read since stay in the
// position's ids (the last few hundred), so the listing skips them.
func (s *ELFSource) rewindTo(ctx context.Context, t string, pos *elfPos, d time.Time) (bool, error) {
	rows, err := Query(ctx, s.auth, s.version, fmt.Sprintf("SELECT Id, EventType, Interval, LogDate, CreatedDate, LogFileLength FROM EventLogFile "+
		"WHERE EventType = '%s' AND Interval = 'Daily' AND LogDate >= %s AND LogDate < %s ORDER BY CreatedDate ASC, Id ASC",
		t, literal(d), literal(d.AddDate(0, 0, 1))))
	if err != nil {
		return false, err
	}
	files, err := elfFiles(rows)
	if err != nil {
		return false, err
	}
	for _, f := range files {
		if !pos.done(f.id, f.created) && f.ct.Before(pos.last) {
			pos.last, pos.LastCreated = f.ct, f.created
			return true, nil
		}
	}
	return false, nil
}

// hourlyLogDate returns the LogDate of the org's first Hourly file of type
// t at or after d (op ">="), or of its last one before d (op "<"); zero
// when there is none.
func (s *ELFSource) hourlyLogDate(ctx context.Context, t, op string, d time.Time) (time.Time, error) {
	order := "ASC"
	if op == "<" {
		order = "DESC"
	}
	rows, err := Query(ctx, s.auth, s.version, fmt.Sprintf("SELECT LogDate FROM EventLogFile WHERE EventType = '%s' AND Interval = 'Hourly' "+
		"AND LogDate %s %s ORDER BY LogDate %s LIMIT 1", t, op, literal(d), order))
	if err != nil || len(rows) == 0 {
		return time.Time{}, err
	}
	ld, _ := rows[0]["LogDate"].(string)
	v, err := ParseTime(ld)
	if err != nil {
		return time.Time{}, fmt.Errorf("salesforce: EventLogFile LogDate %q: %w", ld, err)
	}
	return v, nil
}

// day is the start of t's UTC day.
func day(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// note logs, once per type and whenever it changes, the interval rule the
// type is read by.
func (s *ELFSource) note(t string, pos *elfPos, reason string) {
	rule := pos.describe()
	s.mu.Lock()
	prev, ok := s.rules[t]
	s.chosen[t], s.rules[t] = pos.Interval, rule
	s.mu.Unlock()
	if ok && prev == rule {
		return
	}
	if reason == "" {
		reason = "configured"
		if s.spec.Interval == IntervalAuto {
			reason = "the stored checkpoint"
		}
	}
	attrs := []any{"event_type", t, "interval", pos.Interval, "reason", reason}
	if !pos.since.IsZero() {
		attrs = append(attrs, "rule", rule)
	}
	s.log.Info("eventlogfile interval", attrs...)
}
