package salesforce

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/sf2loki/sf2loki/internal/ports"
)

// ELFSpec configures the EventLogFile source.
type ELFSpec struct {
	Interval     string   // Hourly or Daily
	EventTypes   []string // names, or ["*"] to discover them
	PollInterval time.Duration
	Lookback     time.Duration
	// SettleWindow leaves files younger than this for the next poll (an
	// Hourly file may still be written); a younger file also stops the
	// type's poll so no later file moves the watermark past it.
	SettleWindow time.Duration
	Concurrency  int
}

// ELFKeyPrefix prefixes the checkpoint keys: eventlogfile:<EventType>.
const ELFKeyPrefix = "eventlogfile:"

// maxOlderPairs bounds the (id, created) pairs kept below the watermark.
const maxOlderPairs = 200

// ELFSource ingests EventLogFile CSVs, one Loki entry per row.
type ELFSource struct {
	auth    *Auth
	version string
	spec    ELFSpec
	clock   ports.Clock
	log     *slog.Logger
	// GarbageCheckpoint counts unreadable stored checkpoints (each falls back
	// to the lookback window).
	GarbageCheckpoint func()
}

// NewELFSource validates spec.
func NewELFSource(auth *Auth, apiVersion string, spec ELFSpec, clk ports.Clock, log *slog.Logger) (*ELFSource, error) {
	if spec.Interval != "Hourly" && spec.Interval != "Daily" {
		return nil, fmt.Errorf("salesforce: eventlogfile interval %q is not Hourly or Daily", spec.Interval)
	}
	if len(spec.EventTypes) == 0 {
		return nil, errors.New("salesforce: eventlogfile needs event_types (names, or \"*\" to discover them)")
	}
	for _, t := range spec.EventTypes {
		if t != "*" && !identifier.MatchString(t) {
			return nil, fmt.Errorf("salesforce: eventlogfile event type %q may hold only letters, digits and _", t)
		}
	}
	if spec.PollInterval <= 0 {
		spec.PollInterval = time.Hour
	}
	if spec.Lookback <= 0 {
		spec.Lookback = 24 * time.Hour
	}
	if spec.Concurrency <= 0 {
		spec.Concurrency = 4
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &ELFSource{auth: auth, version: apiVersion, spec: spec, clock: clk, log: log}, nil
}

// Name implements ports.Source.
func (s *ELFSource) Name() string { return "eventlogfile" }

// Lane implements ports.Source: file downloads are bulk.
func (s *ELFSource) Lane() ports.Lane { return ports.LaneBulk }

// elfPos is a type's position: the newest CreatedDate processed and the
// files processed at or below it.
type elfPos struct {
	LastCreated string      `json:"last_created"`
	IDs         [][2]string `json:"ids"`
	last        time.Time
}

func (p *elfPos) done(id, created string) bool {
	return slices.Contains(p.IDs, [2]string{id, created})
}

// advance records a processed file.
func (p *elfPos) advance(id, created string, t time.Time) {
	if t.After(p.last) {
		p.last, p.LastCreated = t, created
	}
	p.IDs = append(p.IDs, [2]string{id, created})
	var at, older [][2]string
	for _, pair := range p.IDs {
		if pair[1] == p.LastCreated {
			at = append(at, pair)
		} else {
			older = append(older, pair)
		}
	}
	if len(older) > maxOlderPairs {
		older = older[len(older)-maxOlderPairs:]
	}
	older = append(older, at...)
	p.IDs = older
}

// elfExample is a valid eventlogfile checkpoint.
const elfExample = `{"last_created":"2026-03-01T00:00:00.000+0000","ids":[]}`

// parsePos reads a stored eventlogfile position.
func parsePos(v string) (*elfPos, error) {
	var p elfPos
	if err := json.Unmarshal([]byte(v), &p); err != nil {
		return nil, fmt.Errorf("%q is not a position like %s: %w", v, elfExample, err)
	}
	last, err := ParseTime(p.LastCreated)
	if err != nil {
		return nil, fmt.Errorf("%q is not a position like %s: last_created is not a timestamp", v, elfExample)
	}
	p.last = last
	return &p, nil
}

// CheckELFCheckpoint reports whether v is a position the eventlogfile
// source can resume from (the value of an eventlogfile:<EventType> key).
func CheckELFCheckpoint(v string) error {
	_, err := parsePos(v)
	return err
}

func (p *elfPos) encode() string {
	b, _ := json.Marshal(p)
	return string(b)
}

// Run implements ports.Source: every poll_interval, each event type (at
// most concurrency at once) lists its new files and streams them.
func (s *ELFSource) Run(ctx context.Context, resume func(string) (string, bool), emit func(ports.Entry) error) error {
	positions := map[string]*elfPos{}
	for {
		types, err := s.types(ctx)
		if err != nil && ctx.Err() == nil {
			s.log.Warn("eventlogfile: cannot list event types; retrying at the next poll", "error", err)
		}
		sem := make(chan struct{}, s.spec.Concurrency)
		var wg sync.WaitGroup
		for _, t := range types {
			pos, ok := positions[t]
			if !ok {
				pos = s.resumePos(t, resume)
				positions[t] = pos
			}
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				if err := s.poll(ctx, t, pos, emit); err != nil && ctx.Err() == nil {
					s.log.Warn("eventlogfile poll stopped for this cycle", "event_type", t, "error", err)
				}
			})
		}
		wg.Wait()
		select {
		case <-ctx.Done():
			return nil
		case <-s.clock.After(s.spec.PollInterval):
		}
	}
}

// types returns the configured event types, discovering "*".
func (s *ELFSource) types(ctx context.Context) ([]string, error) {
	if !slices.Contains(s.spec.EventTypes, "*") {
		return s.spec.EventTypes, nil
	}
	q := fmt.Sprintf("SELECT EventType FROM EventLogFile WHERE Interval = '%s' GROUP BY EventType", s.spec.Interval)
	rows, err := Query(ctx, s.auth, s.version, q)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range rows {
		if t, _ := r["EventType"].(string); identifier.MatchString(t) {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return out, nil
}

func (s *ELFSource) resumePos(t string, resume func(string) (string, bool)) *elfPos {
	key := ELFKeyPrefix + t
	if v, ok := resume(key); ok && v != "" {
		p, err := parsePos(v)
		if err == nil {
			return p
		}
		s.log.Error("unreadable checkpoint; the event type starts from its lookback window, and the next commit replaces the value",
			"key", key, "value", v, "error", err, "lookback", s.spec.Lookback, "repair", RepairHint(key, elfExample))
		if s.GarbageCheckpoint != nil {
			s.GarbageCheckpoint()
		}
	}
	start := s.clock.Now().Add(-s.spec.Lookback).UTC()
	return &elfPos{LastCreated: start.Format(sfTimeLayout), last: start}
}

// poll lists the type's files from its watermark and streams each new one.
// Every row carries the checkpoint from before its file except the last,
// which carries the advanced one: a crash mid-file replays the file. A
// failed download stops the type for this cycle.
func (s *ELFSource) poll(ctx context.Context, t string, pos *elfPos, emit func(ports.Entry) error) error {
	q := fmt.Sprintf("SELECT Id, EventType, Interval, LogDate, CreatedDate, LogFileLength FROM EventLogFile "+
		"WHERE EventType = '%s' AND Interval = '%s' AND CreatedDate >= %s ORDER BY CreatedDate ASC, Id ASC",
		t, s.spec.Interval, literal(pos.last))
	files, err := Query(ctx, s.auth, s.version, q)
	if err != nil {
		return err
	}
	settled := s.clock.Now().Add(-s.spec.SettleWindow)
	for _, f := range files {
		id, _ := f["Id"].(string)
		created, _ := f["CreatedDate"].(string)
		ct, err := ParseTime(created)
		if id == "" || err != nil {
			return fmt.Errorf("salesforce: EventLogFile row without Id or CreatedDate: %v", f)
		}
		if pos.done(id, created) {
			continue
		}
		if s.spec.SettleWindow > 0 && ct.After(settled) {
			return nil // not settled: this file and every later one wait for the next poll
		}
		if err := s.file(ctx, t, id, created, ct, pos, emit); err != nil {
			return err
		}
	}
	return nil
}

func (s *ELFSource) file(ctx context.Context, t, id, created string, ct time.Time, pos *elfPos, emit func(ports.Entry) error) error {
	before := pos.encode()
	after := *pos
	after.IDs = slices.Clone(pos.IDs)
	after.advance(id, created, ct)
	key := ELFKeyPrefix + t
	resp, err := s.auth.Do(ctx, func(tok *Token) (*http.Request, error) {
		return http.NewRequest(http.MethodGet, fmt.Sprintf("%s/services/data/v%s/sobjects/EventLogFile/%s/LogFile", tok.InstanceURL, s.version, id), nil)
	})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return ports.Transient("logfile", fmt.Errorf("salesforce: EventLogFile %s answered %d: %s", id, resp.StatusCode, s.auth.snippet(body)))
	}
	// One row of look-ahead: a row is emitted when the next one is read,
	// so the last row can carry the advanced checkpoint.
	var held *ports.Entry
	err = ReadEventLogFile(resp.Body, func(r Row) error {
		e, err := elfEntry(t, r, ct, key, before)
		if err != nil {
			return err
		}
		if held != nil {
			if err := emit(*held); err != nil {
				return err
			}
		}
		held = &e
		return nil
	})
	if err != nil {
		return ports.Transient("logfile", fmt.Errorf("salesforce: EventLogFile %s (%s): %w", id, t, err))
	}
	next := after.encode()
	if held == nil { // a file without rows still moves the watermark
		if err := emit(ports.Entry{CheckpointOnly: true, Checkpoint: ports.Checkpoint{Key: key, Value: next}}); err != nil {
			return err
		}
	} else {
		held.Checkpoint.Value = next
		if err := emit(*held); err != nil {
			return err
		}
	}
	*pos = after
	return nil
}

func elfEntry(t string, r Row, created time.Time, key, checkpoint string) (ports.Entry, error) {
	line, err := json.Marshal(r.Fields) // maps marshal with sorted keys
	if err != nil {
		return ports.Entry{}, err
	}
	ts := r.Time
	if ts.IsZero() {
		ts = created
	}
	level := Level(func(k string) string { return r.Fields[k] })
	return ports.Entry{Time: ts, Line: string(line), Metadata: map[string]string{"level": level},
		Labels:     map[string]string{"source": "eventlogfile", "event_type": t},
		Checkpoint: ports.Checkpoint{Key: key, Value: checkpoint}}, nil
}
