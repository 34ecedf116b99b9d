package salesforce

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/gzip"

	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/domain/shape"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/sfrules"
)

// EventLogFile intervals: auto chooses Hourly or Daily per event type.
const (
	IntervalAuto   = "auto"
	IntervalHourly = "Hourly"
	IntervalDaily  = "Daily"
)

// ELFSpec configures the EventLogFile source.
type ELFSpec struct {
	// Interval is auto (the default: per event type, Hourly where the org
	// publishes Hourly files for it, else Daily), Hourly or Daily.
	Interval     string
	EventTypes   []string // names, or ["*"] to discover them
	PollInterval time.Duration
	Lookback     time.Duration
	// SettleWindow leaves files younger than this for the next poll (an
	// Hourly file may still be written); a younger file also stops the
	// type's poll so no later file moves the watermark past it.
	SettleWindow time.Duration
	Concurrency  int
	// Owners, if set, is the org's overlap registry: a discovered ("*")
	// type whose category another source ingests is skipped.
	Owners *domain.Owners
	// Shaper transforms and samples the rows (nil: every row as read). A
	// row left out emits nothing, but its file still moves the checkpoint;
	// an entry's time comes from the row as read.
	Shaper *shape.Shaper
	// Exclude are globs (case-insensitive) over discovered ("*") types to
	// leave out; a type listed by name is never excluded.
	Exclude []string
	// Types shape each event type's entries: columns shipped as structured
	// metadata and columns promoted to stream labels.
	Types map[string]ELFTypeSpec
}

// ELFTypeSpec is one event type's shaping.
type ELFTypeSpec struct {
	Metadata []string // columns added to the entry's structured metadata
	Labels   []string // columns promoted to stream labels (label name = column name)
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

	mu     sync.Mutex
	chosen map[string]string // the interval each event type is read in, as last logged
	rules  map[string]string // each type's interval rule, as last logged
}

// NewELFSource validates spec.
func NewELFSource(auth *Auth, apiVersion string, spec ELFSpec, clk ports.Clock, log *slog.Logger) (*ELFSource, error) {
	if spec.Interval == "" {
		spec.Interval = IntervalAuto
	}
	if spec.Interval != IntervalAuto && spec.Interval != IntervalHourly && spec.Interval != IntervalDaily {
		return nil, fmt.Errorf("salesforce: eventlogfile interval %q is not auto, Hourly or Daily", spec.Interval)
	}
	if len(spec.EventTypes) == 0 {
		return nil, errors.New("salesforce: eventlogfile needs event_types (names, or \"*\" to discover them)")
	}
	for _, t := range spec.EventTypes {
		if t != "*" && !sfrules.ValidName(t) {
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
	return &ELFSource{auth: auth, version: apiVersion, spec: spec, clock: clk, log: log, chosen: map[string]string{}, rules: map[string]string{}}, nil
}

// Intervals returns the interval each event type is read in (Hourly or
// Daily), for the types the source has decided: with interval auto, a type
// is decided once its listing holds a file.
func (s *ELFSource) Intervals() map[string]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.chosen)
}

// Name implements ports.Source.
func (s *ELFSource) Name() string { return "eventlogfile" }

// Lane implements ports.Source: file downloads are bulk.
func (s *ELFSource) Lane() ports.Lane { return ports.LaneBulk }

// elfPos is a type's position: the newest CreatedDate processed, the files
// processed at or below it, and the interval the type is read in.
type elfPos struct {
	LastCreated string      `json:"last_created"`
	IDs         [][2]string `json:"ids"`
	// Interval is Hourly or Daily; "" in a position written before the
	// interval was recorded (those versions read Hourly by default).
	Interval string `json:"interval,omitempty"`
	// Since is the LogDate at which the type last switched interval: the
	// files of Interval with a LogDate at or after it are the type's.
	// Empty: every file of Interval.
	Since string `json:"interval_since,omitempty"`
	// Earlier are the switches before the last one, oldest first (see
	// intervalAt).
	Earlier []elfSwitch `json:"interval_earlier,omitempty"`
	last    time.Time
	since   time.Time
	// legacyIDs counts the bare file Ids read from a position of the older
	// implementation (kept as [Id, ""], which matches any CreatedDate).
	legacyIDs int
}

func (p *elfPos) done(id, created string) bool {
	return slices.Contains(p.IDs, [2]string{id, created}) || slices.Contains(p.IDs, [2]string{id, ""})
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
const elfExample = `{"last_created":"2026-03-01T00:00:00.000+0000","ids":[],"interval":"Daily"}`

// parsePos reads a stored eventlogfile position.
func parsePos(v string) (*elfPos, error) {
	var p elfPos
	if err := json.Unmarshal([]byte(v), &p); err != nil {
		var legacy bool
		if p, legacy = parseOlderPos(v); !legacy {
			return nil, fmt.Errorf("%q is not a position like %s: %w", v, elfExample, err)
		}
	}
	last, err := ParseTime(p.LastCreated)
	if err != nil {
		return nil, fmt.Errorf("%q is not a position like %s: last_created is not a timestamp", v, elfExample)
	}
	p.last = last
	if p.Interval != "" && p.Interval != IntervalHourly && p.Interval != IntervalDaily {
		return nil, fmt.Errorf("%q is not a position like %s: interval is not Hourly or Daily", v, elfExample)
	}
	if err := p.parseRule(); err != nil {
		return nil, fmt.Errorf("%q is not a position like %s: %w", v, elfExample, err)
	}
	return &p, nil
}

// parseOlderPos reads a position of the older implementation whose ids
// hold bare file Ids (its legacy entries, which match any CreatedDate)
// among [Id, CreatedDate] pairs. ok is false for anything else.
func parseOlderPos(v string) (elfPos, bool) {
	var raw struct {
		LastCreated string            `json:"last_created"`
		IDs         []json.RawMessage `json:"ids"`
	}
	if json.Unmarshal([]byte(v), &raw) != nil {
		return elfPos{}, false
	}
	p := elfPos{LastCreated: raw.LastCreated, IDs: make([][2]string, 0, len(raw.IDs))}
	for _, m := range raw.IDs {
		var id string
		var pair [2]string
		switch {
		case json.Unmarshal(m, &id) == nil && id != "":
			p.IDs = append(p.IDs, [2]string{id, ""})
			p.legacyIDs++
		case json.Unmarshal(m, &pair) == nil && pair[0] != "" && pair[1] != "":
			p.IDs = append(p.IDs, pair)
		default:
			return elfPos{}, false
		}
	}
	return p, p.legacyIDs > 0
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

// elfType is what the source keeps of one event type between polls.
type elfType struct {
	pos *elfPos
	// fresh: no stored position (the type starts at its lookback window).
	fresh bool
	// covered are the Daily files (Id and CreatedDate) whose day the org
	// also published Hourly files for, already asked.
	covered map[[2]string]bool
}

// elfFile is one listed EventLogFile record.
type elfFile struct {
	id, created string
	ct          time.Time
	interval    string
	// logDate is the start of the period covered: the hour of an Hourly
	// file, the UTC day of a Daily one.
	logDate time.Time
	// length is the file's LogFileLength in bytes (0: not listed).
	length int64
}

// Run implements ports.Source: every poll_interval, each event type (at
// most concurrency at once) lists its new files and streams them. When a
// call meets the org's API limit (ErrThrottled), the poll stops for every
// type and the next one tries again; no checkpoint moves past a file that
// was not read.
func (s *ELFSource) Run(ctx context.Context, resume func(string) (string, bool), emit func(ports.Entry) error) error {
	states := map[string]*elfType{}
	for {
		s.cycle(ctx, states, resume, emit)
		select {
		case <-ctx.Done():
			return nil
		case <-s.clock.After(s.spec.PollInterval):
		}
	}
}

// cycle is one poll of every event type.
func (s *ELFSource) cycle(ctx context.Context, states map[string]*elfType, resume func(string) (string, bool), emit func(ports.Entry) error) {
	types, err := s.types(ctx)
	switch {
	case ctx.Err() != nil:
		return
	case errors.Is(err, ErrThrottled):
		s.log.Debug("eventlogfile poll skipped: the org's API limit; the next poll tries again", "error", err)
		return
	case err != nil:
		s.log.Warn("eventlogfile: cannot list event types; retrying at the next poll", "error", err)
		return
	}
	var throttled atomic.Bool
	sem := make(chan struct{}, s.spec.Concurrency)
	var wg sync.WaitGroup
	for _, t := range types {
		st, ok := states[t]
		if !ok {
			st = s.resumeType(t, resume)
			states[t] = st
		}
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			err := s.poll(ctx, t, st, emit, &throttled)
			switch {
			case ctx.Err() != nil:
			case errors.Is(err, ErrThrottled):
				throttled.Store(true)
				s.log.Debug("eventlogfile poll stopped: the org's API limit; the next poll tries again", "event_type", t, "error", err)
			case err != nil:
				s.log.Warn("eventlogfile poll stopped for this cycle", "event_type", t, "error", err)
			}
		})
	}
	wg.Wait()
}

// errPollThrottled stops a type's poll once another type met the org's
// API limit in the same cycle.
var errPollThrottled = fmt.Errorf("%w: met by another event type in this poll", ErrThrottled)

// types returns the configured event types, discovering "*".
func (s *ELFSource) types(ctx context.Context) ([]string, error) {
	if !slices.Contains(s.spec.EventTypes, "*") {
		return s.spec.EventTypes, nil
	}
	if err := s.awaitOwners(ctx); err != nil {
		return nil, err
	}
	q := "SELECT EventType FROM EventLogFile GROUP BY EventType"
	if s.spec.Interval != IntervalAuto {
		q = fmt.Sprintf("SELECT EventType FROM EventLogFile WHERE Interval = '%s' GROUP BY EventType", s.spec.Interval)
	}
	rows, err := Query(ctx, s.auth, s.version, q)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, r := range rows {
		if t, _ := r["EventType"].(string); sfrules.ValidName(t) {
			out = append(out, t)
		}
	}
	slices.Sort(out)
	return s.owned(s.excluded(out)), nil
}

// excluded drops the discovered types an exclude glob matches, keeping the
// types listed by name.
func (s *ELFSource) excluded(types []string) []string {
	if len(s.spec.Exclude) == 0 {
		return types
	}
	return slices.DeleteFunc(types, func(t string) bool {
		if slices.Contains(s.spec.EventTypes, t) {
			return false
		}
		return slices.ContainsFunc(s.spec.Exclude, func(g string) bool {
			return shape.MatchGlob(strings.ToLower(g), strings.ToLower(t))
		})
	})
}

func (s *ELFSource) resumeType(t string, resume func(string) (string, bool)) *elfType {
	st := &elfType{covered: map[[2]string]bool{}}
	key := ELFKeyPrefix + t
	if v, ok := resume(key); ok && v != "" {
		p, err := parsePos(v)
		if err == nil {
			if p.legacyIDs > 0 {
				s.log.Info("eventlogfile: a checkpoint of the older implementation lists files by Id alone; each counts as read whatever its CreatedDate",
					"key", key, "bare_ids", p.legacyIDs)
			}
			st.pos = p
			return st
		}
		s.log.Error("unreadable checkpoint; the event type starts from its lookback window, and the next commit replaces the value",
			"key", key, "value", v, "error", err, "lookback", s.spec.Lookback, "repair", RepairHint(key, elfExample))
		if s.GarbageCheckpoint != nil {
			s.GarbageCheckpoint()
		}
	}
	start := s.clock.Now().Add(-s.spec.Lookback).UTC()
	st.pos, st.fresh = &elfPos{LastCreated: start.Format(sfTimeLayout), last: start}, true
	return st
}

// poll lists the type's files from its watermark and streams each new one
// its interval rule takes. Every row carries the checkpoint from before
// its file except the last, which carries the advanced one: a crash
// mid-file replays the file. A failed download stops the type for this
// cycle.
func (s *ELFSource) poll(ctx context.Context, t string, st *elfType, emit func(ports.Entry) error, throttled *atomic.Bool) error {
	if throttled.Load() {
		return errPollThrottled
	}
	pos := st.pos
	settled := s.clock.Now().Add(-s.spec.SettleWindow)
	var files []elfFile
	// A switch of the interval rule may move the watermark back (to read a
	// Daily file listed before): the type is then listed again.
	for i := 0; ; i++ {
		var err error
		if files, err = s.list(ctx, t, pos); err != nil {
			return err
		}
		if s.spec.Interval != IntervalAuto {
			if pos.Interval != s.spec.Interval || pos.Since != "" {
				pos.set(s.spec.Interval, time.Time{})
			}
			break
		}
		if i == 2 { // decided on an earlier listing, which this one holds
			break
		}
		// The rule is decided on settled files only: a younger one may
		// still change (and so may what it says of its day).
		young := func(f elfFile) bool { return s.spec.SettleWindow > 0 && f.ct.After(settled) }
		back, err := s.choose(ctx, t, st, slices.DeleteFunc(slices.Clone(files), young))
		if err != nil {
			return err
		}
		if !back {
			break
		}
	}
	if pos.Interval == "" {
		return nil // no file listed yet to decide by
	}
	s.note(t, pos, "")
	for _, f := range files {
		if pos.done(f.id, f.created) || !pos.wants(f) {
			continue
		}
		if s.spec.SettleWindow > 0 && f.ct.After(settled) {
			return nil // not settled: this file and every later one wait for the next poll
		}
		if throttled.Load() {
			return errPollThrottled
		}
		if err := s.file(ctx, t, f, pos, emit); err != nil {
			return err
		}
	}
	return nil
}

// list returns the type's files created at or after its watermark, in
// CreatedDate order.
func (s *ELFSource) list(ctx context.Context, t string, pos *elfPos) ([]elfFile, error) {
	q := fmt.Sprintf("SELECT Id, EventType, Interval, LogDate, CreatedDate, LogFileLength FROM EventLogFile "+
		"WHERE EventType = '%s' AND CreatedDate >= %s ORDER BY CreatedDate ASC, Id ASC", t, literal(pos.last))
	if s.spec.Interval != IntervalAuto {
		q = fmt.Sprintf("SELECT Id, EventType, Interval, LogDate, CreatedDate, LogFileLength FROM EventLogFile "+
			"WHERE EventType = '%s' AND Interval = '%s' AND CreatedDate >= %s ORDER BY CreatedDate ASC, Id ASC",
			t, s.spec.Interval, literal(pos.last))
	}
	rows, err := Query(ctx, s.auth, s.version, q)
	if err != nil {
		return nil, err
	}
	return elfFiles(rows)
}

// elfFiles reads listed EventLogFile records.
func elfFiles(rows []map[string]any) ([]elfFile, error) {
	files := make([]elfFile, len(rows))
	for i, r := range rows {
		f := elfFile{}
		f.id, _ = r["Id"].(string)
		f.created, _ = r["CreatedDate"].(string)
		f.interval, _ = r["Interval"].(string)
		ct, err := ParseTime(f.created)
		if f.id == "" || err != nil {
			return nil, fmt.Errorf("salesforce: EventLogFile row without Id or CreatedDate: %v", r)
		}
		f.ct = ct
		if ld, _ := r["LogDate"].(string); ld != "" {
			f.logDate, _ = ParseTime(ld)
		}
		if f.logDate.IsZero() {
			f.logDate = ct
		}
		if n, ok := r["LogFileLength"].(float64); ok {
			f.length = int64(n)
		}
		files[i] = f
	}
	return files, nil
}

func (s *ELFSource) file(ctx context.Context, t string, f elfFile, pos *elfPos, emit func(ports.Entry) error) error {
	before := pos.encode()
	after := *pos
	after.IDs = slices.Clone(pos.IDs)
	after.advance(f.id, f.created, f.ct)
	key := ELFKeyPrefix + t
	body, closeBody, err := s.open(ctx, t, f)
	if err != nil {
		return err
	}
	defer closeBody()
	body, emit, finish := s.progress(t, f, body, emit) // a long download says how far it got
	defer finish()
	// One row of look-ahead: a row is emitted when the next one is read,
	// so the last row can carry the advanced checkpoint. A row the
	// transforms drop or sampling leaves out is skipped: when no row is
	// left, the file is as one without rows.
	var held ports.Entry // the row read last, when holding is true
	holding := false
	plan := s.spec.Shaper.For(t)
	entries := newELFEntries(t, f.logDate, key, before, s.spec.Types[t])
	err = ReadEventLogFile(body, func(r Row) error {
		var e ports.Entry
		var err error
		if plan.Noop() {
			e, err = entries.entry(r)
		} else {
			if plan.Sampling() && !plan.Keep(elfSampleKey(r)) {
				return nil
			}
			fields := r.Fields()
			if !plan.Strings(fields) {
				return nil
			}
			e, err = entries.entryOf(fields, r.Time)
		}
		if err != nil {
			return err
		}
		if holding {
			if err := emit(held); err != nil {
				return err
			}
		}
		held, holding = e, true
		return nil
	})
	if err != nil {
		return ports.Transient("logfile", fmt.Errorf("salesforce: EventLogFile %s (%s): %w", f.id, t, err))
	}
	next := after.encode()
	if !holding { // a file without rows still moves the watermark
		if err := emit(ports.Entry{CheckpointOnly: true, Checkpoint: ports.Checkpoint{Key: key, Value: next}}); err != nil {
			return err
		}
	} else {
		held.Checkpoint.Value = next
		if err := emit(held); err != nil {
			return err
		}
	}
	*pos = after
	return nil
}

// open requests f's LogFile body, compressed, and returns it decompressed
// and a function that closes it.
func (s *ELFSource) open(ctx context.Context, t string, f elfFile) (io.Reader, func(), error) {
	resp, err := s.auth.Do(ctx, func(tok *Token) (*http.Request, error) { //nolint:bodyclose // closed by the function returned
		req, err := http.NewRequest(http.MethodGet, fmt.Sprintf("%s/services/data/v%s/sobjects/EventLogFile/%s/LogFile", tok.InstanceURL, s.version, f.id), nil)
		if err == nil {
			// Salesforce recommends compression for large files. Set by
			// hand, the transport leaves the answer compressed: it is
			// decompressed below, under the idle watchdog.
			req.Header.Set("Accept-Encoding", "gzip")
		}
		return req, err
	})
	if err != nil {
		return nil, nil, err
	}
	closeBody := func() { _ = resp.Body.Close() }
	if resp.StatusCode != http.StatusOK {
		defer closeBody()
		body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return nil, nil, ports.Transient("logfile", fmt.Errorf("salesforce: EventLogFile %s answered %d: %s", f.id, resp.StatusCode, s.auth.snippet(body)))
	}
	switch enc := strings.ToLower(strings.TrimSpace(resp.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
		return resp.Body, closeBody, nil
	case "gzip":
		zr, err := gzip.NewReader(resp.Body)
		if err != nil {
			closeBody()
			return nil, nil, ports.Transient("logfile", fmt.Errorf("salesforce: EventLogFile %s (%s): gzip: %w", f.id, t, err))
		}
		return zr, func() { _ = zr.Close(); closeBody() }, nil
	default:
		closeBody()
		return nil, nil, fmt.Errorf("salesforce: EventLogFile %s came with Content-Encoding %q; sf2loki asks for gzip and reads gzip or identity only", f.id, enc)
	}
}

// elfSampleKey is what sampling decides a row by: its REQUEST_ID, else
// the whole row as read (its JSON, keys sorted).
func elfSampleKey(r Row) string {
	if id := r.Field("REQUEST_ID"); id != "" {
		return id
	}
	return string(r.appendJSON(nil))
}

// elfEntries builds the entries of one file's rows. The entries share one
// labels map, and one metadata map per level, unless the type promotes
// columns into them: nothing writes to an entry's maps once it is made.
type elfEntries struct {
	t, key, checkpoint string
	logDate            time.Time
	ts                 ELFTypeSpec
	labels             map[string]string
	meta               map[string]map[string]string // by level
	// keys are the previous transformed row's columns, sorted (see
	// appendFieldsJSON); line is the scratch buffer of the JSON line.
	keys []string
	line []byte
}

func newELFEntries(t string, logDate time.Time, key, checkpoint string, ts ELFTypeSpec) *elfEntries {
	return &elfEntries{t: t, key: key, checkpoint: checkpoint, logDate: logDate, ts: ts,
		labels: map[string]string{"source": "eventlogfile", "event_type": t}, meta: map[string]map[string]string{}}
}

// entry is a row's entry: its fields as a JSON object with sorted keys.
// A row without TIMESTAMP_DERIVED or TIMESTAMP takes its file's LogDate,
// which a file regenerated in place keeps (its CreatedDate changes): every
// copy of a row is the same entry, and the copies collapse in Loki.
func (b *elfEntries) entry(r Row) (ports.Entry, error) {
	b.line = r.appendJSON(b.line[:0])
	return b.finish(r.Time, r.Field), nil
}

// entryOf is entry for a row whose fields the transforms rewrote: fields,
// at the time the row had as read.
func (b *elfEntries) entryOf(fields map[string]string, at time.Time) (ports.Entry, error) {
	b.line = appendFieldsJSON(b.line[:0], fields, &b.keys)
	return b.finish(at, func(k string) string { return fields[k] }), nil
}

// finish makes the entry of the JSON line in b.line, whose fields get
// returns.
func (b *elfEntries) finish(at time.Time, get func(string) string) ports.Entry {
	if at.IsZero() {
		at = b.logDate
	}
	level := Level(get)
	e := ports.Entry{Time: at, Line: string(b.line), Labels: b.labels, Checkpoint: ports.Checkpoint{Key: b.key, Value: b.checkpoint}}
	if len(b.ts.Metadata) == 0 {
		e.Metadata = b.meta[level]
		if e.Metadata == nil {
			e.Metadata = map[string]string{"level": level}
			b.meta[level] = e.Metadata
		}
	} else {
		e.Metadata = map[string]string{"level": level}
		for _, c := range b.ts.Metadata {
			if v := get(c); v != "" {
				e.Metadata[c] = v
			}
		}
	}
	own := false
	for _, c := range b.ts.Labels {
		if v := get(c); v != "" {
			if !own {
				e.Labels, own = maps.Clone(b.labels), true
			}
			e.Labels[c] = v
		}
	}
	return e
}
