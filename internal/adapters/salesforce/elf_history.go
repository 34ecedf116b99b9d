package salesforce

import (
	"context"
	"fmt"
	"io"
	"slices"
	"time"

	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/sfrules"
)

// HistoryFile is one EventLogFile of a history load (sf2loki backfill).
type HistoryFile struct {
	ID, EventType string
	// Interval is Hourly or Daily.
	Interval string
	// Created is the CreatedDate as listed: a Daily file regenerated in
	// place keeps its Id and gets a later one.
	Created string
	// LogDate is the start of the period the file covers: the hour of an
	// Hourly file, the UTC day of a Daily one.
	LogDate time.Time
	// Length is the LogFileLength in bytes (0: not listed).
	Length int64
}

// HistoryTypes returns the event types of a history load: the spec's
// names, or with "*" every type the org has files of (in the spec's
// interval). Give the source no Owners: the overlap registry is filled by
// the daemon's other sources, which a history load does not run.
func (s *ELFSource) HistoryTypes(ctx context.Context) ([]string, error) {
	types, err := s.types(ctx)
	return slices.Clone(types), err
}

// History lists type t's files whose LogDate lies in [since, until),
// oldest first (then by CreatedDate and Id: the later Hourly files of one
// hour after the first). With interval Hourly or Daily, those files; with
// auto, per UTC day of LogDate, the Daily file where the org has one (it
// holds the whole day), else the day's Hourly files (a day whose Daily file
// is not written yet): every event once, whatever the org publishes.
func (s *ELFSource) History(ctx context.Context, t string, since, until time.Time) ([]HistoryFile, error) {
	if !sfrules.ValidName(t) {
		return nil, fmt.Errorf("salesforce: eventlogfile event type %q may hold only letters, digits and _", t)
	}
	where := fmt.Sprintf("EventType = '%s' AND LogDate >= %s AND LogDate < %s", t, literal(since), literal(until))
	if s.spec.Interval != IntervalAuto {
		where += fmt.Sprintf(" AND Interval = '%s'", s.spec.Interval)
	}
	rows, err := Query(ctx, s.auth, s.version, "SELECT Id, EventType, Interval, LogDate, CreatedDate, LogFileLength FROM EventLogFile WHERE "+
		where+" ORDER BY LogDate ASC, CreatedDate ASC, Id ASC")
	if err != nil {
		return nil, err
	}
	files, err := elfFiles(rows)
	if err != nil {
		return nil, err
	}
	daily := map[time.Time]bool{}
	for _, f := range files {
		if f.interval == IntervalDaily {
			daily[f.logDate.UTC().Truncate(24*time.Hour)] = true
		}
	}
	out := make([]HistoryFile, 0, len(files))
	for _, f := range files {
		if s.spec.Interval == IntervalAuto && f.interval != IntervalDaily && daily[f.logDate.UTC().Truncate(24*time.Hour)] {
			continue // the day's Daily file holds these events
		}
		out = append(out, HistoryFile{ID: f.id, EventType: t, Interval: f.interval, Created: f.created, LogDate: f.logDate, Length: f.length})
	}
	return out, nil
}

// ReadHistory downloads f and emits one entry per row, in the file's
// order: transformed by the spec's Shaper but never sampled (a history load
// is asked for explicitly), labelled source=eventlogfile and
// event_type=<EventType>, at the row's own time (TIMESTAMP_DERIVED, else
// TIMESTAMP, else the file's LogDate). The entries carry no checkpoint.
// read, if set, receives the count of the body's bytes as they are read
// (decompressed). An error of emit is returned as it is; a failed download
// or an unreadable body is transient.
func (s *ELFSource) ReadHistory(ctx context.Context, f HistoryFile, emit func(ports.Entry) error, read func(n int)) error {
	ef := elfFile{id: f.ID, created: f.Created, interval: f.Interval, logDate: f.LogDate, length: f.Length}
	body, closeBody, err := s.open(ctx, f.EventType, ef)
	if err != nil {
		return err
	}
	defer closeBody()
	if read != nil {
		body = readCounter{r: body, n: read}
	}
	plan := s.spec.Shaper.For(f.EventType)
	entries := newELFEntries(f.EventType, f.LogDate, "", "", s.spec.Types[f.EventType])
	var emitErr error
	err = ReadEventLogFile(body, func(r Row) error {
		var e ports.Entry
		var err error
		if plan.Noop() {
			e, err = entries.entry(r)
		} else {
			fields := r.Fields()
			if !plan.Strings(fields) {
				return nil // dropped by a drop_row transform
			}
			e, err = entries.entryOf(fields, r.Time)
		}
		if err != nil {
			return err
		}
		emitErr = emit(e)
		return emitErr
	})
	switch {
	case err == nil:
		return nil
	case emitErr != nil:
		return emitErr
	}
	return ports.Transient("logfile", fmt.Errorf("salesforce: EventLogFile %s (%s): %w", f.ID, f.EventType, err))
}

// readCounter reports the bytes read through it.
type readCounter struct {
	r io.Reader
	n func(int)
}

func (c readCounter) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	if n > 0 {
		c.n(n)
	}
	return n, err
}
