package salesforce

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sf2loki/sf2loki/internal/domain/shape"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/sfrules"
)

// ObjectSpec is one SOQL-polled object (sources.eventlog_objects).
type ObjectSpec struct {
	Name           string
	TimestampField string        // default EventDate
	PollInterval   time.Duration // default 5m
	Lookback       time.Duration // first run: from now − lookback; default 1h
	// Settle re-reads this window behind the watermark each cycle and
	// drops the Ids already emitted: rows that become visible late (a
	// timestamp behind the watermark) are not lost.
	Settle time.Duration
	// MaxCatchupRecords bounds the rows one poll emits (0 = unbounded); for
	// a big object it bounds the window held in memory and committed at
	// once.
	MaxCatchupRecords int
	// BigObject is "auto" (or empty: the standard big objects and names
	// ending in __b), "true" or "false".
	BigObject string
	big       bool
}

// SOQLSource polls objects with SOQL: an ordinary object ascending by its
// timestamp field, a big object newest first (bigobject.go).
type SOQLSource struct {
	auth    *Auth
	version string
	objects []ObjectSpec
	clock   ports.Clock
	log     *slog.Logger
	// GarbageCheckpoint counts unreadable stored checkpoints (each falls
	// back to the lookback window).
	GarbageCheckpoint func()
	// Shaper transforms and samples the rows, by object name (nil: every
	// row as read); set before Run. Sampling decides by the row's key (an
	// ordinary object's Id, a big object's EventIdentifier). A row left out
	// emits nothing but still moves the cursor; an entry's time comes from
	// the row as read.
	Shaper *shape.Shaper

	mu             sync.Mutex
	throttledUntil time.Time
	fields         map[string][]string // described field lists, by object
	drains         map[string]*drain   // catch-up drains under way, by object (progress.go)
}

// PageSize is the most rows one FIELDS(ALL) query may return.
const PageSize = 200

// SOQLKeyPrefix prefixes the checkpoint keys: eventlog_objects:<Object>.
const SOQLKeyPrefix = "eventlog_objects:"

// maxCarriedIDs bounds the Ids a checkpoint carries.
const maxCarriedIDs = 500

// ErrThrottled is Salesforce's REQUEST_LIMIT_EXCEEDED.
var ErrThrottled = errors.New("salesforce: REQUEST_LIMIT_EXCEEDED (the org's API limit); every object waits one poll interval")

// NewSOQLSource validates the objects.
func NewSOQLSource(auth *Auth, apiVersion string, objects []ObjectSpec, clk ports.Clock, log *slog.Logger) (*SOQLSource, error) {
	if len(objects) == 0 {
		return nil, errors.New("salesforce: eventlog_objects needs at least one object")
	}
	out := make([]ObjectSpec, len(objects))
	for i, o := range objects {
		if o.TimestampField == "" {
			o.TimestampField = "EventDate"
		}
		if !sfrules.ValidName(o.Name) || !sfrules.ValidName(o.TimestampField) {
			return nil, fmt.Errorf("salesforce: eventlog_objects: %q / %q: object and field names may hold only letters, digits and _", o.Name, o.TimestampField)
		}
		if o.PollInterval <= 0 {
			o.PollInterval = 5 * time.Minute
		}
		if o.Lookback <= 0 {
			o.Lookback = time.Hour
		}
		big, err := sfrules.IsBigObject(o.Name, o.BigObject)
		if err != nil {
			return nil, err
		}
		o.big = big
		out[i] = o
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &SOQLSource{auth: auth, version: apiVersion, objects: out, clock: clk, log: log}, nil
}

// Name implements ports.Source.
func (s *SOQLSource) Name() string { return "eventlog_objects" }

// Lane implements ports.Source: polled objects are bulk.
func (s *SOQLSource) Lane() ports.Lane { return ports.LaneBulk }

// cursor is an object's position: the newest timestamp emitted (as
// Salesforce wrote it, to the millisecond) and the newest Ids emitted (for
// a big object, EventIdentifiers), which tell the rows at and just behind
// it apart.
type cursor struct {
	LastTS string   `json:"last_ts"`
	IDs    []string `json:"ids"`
	last   time.Time
}

// Run implements ports.Source: one polling loop per object.
func (s *SOQLSource) Run(ctx context.Context, resume func(string) (string, bool), emit func(ports.Entry) error) error {
	var wg sync.WaitGroup
	errs := make(chan error, len(s.objects))
	for _, o := range s.objects {
		cur := s.resumeCursor(o, resume)
		wg.Go(func() {
			if err := s.loop(ctx, o, cur, emit); err != nil && ctx.Err() == nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs
}

// resumeCursor reads the stored position: the JSON document, or a bare
// timestamp from older documents; anything else falls back to the
// lookback window, with an ERROR naming the repair.
func (s *SOQLSource) resumeCursor(o ObjectSpec, resume func(string) (string, bool)) *cursor {
	key := SOQLKeyPrefix + o.Name
	v, ok := resume(key)
	if ok && v != "" {
		c, err := parseCursor(v)
		if err == nil {
			return c
		}
		s.log.Error("unreadable checkpoint; the object starts from its lookback window, and the next commit replaces the value",
			"key", key, "value", v, "error", err, "lookback", o.Lookback, "repair", RepairHint(key, soqlExample))
		if s.GarbageCheckpoint != nil {
			s.GarbageCheckpoint()
		}
	}
	start := s.clock.Now().Add(-o.Lookback).UTC().Truncate(time.Millisecond)
	return &cursor{LastTS: start.Format(sfTimeLayout), last: start}
}

// soqlExample is a valid eventlog_objects checkpoint.
const soqlExample = `{"last_ts":"2026-03-01T00:00:00.000+0000","ids":[]}`

// parseCursor reads a stored eventlog_objects position.
func parseCursor(v string) (*cursor, error) {
	var c cursor
	if json.Unmarshal([]byte(v), &c) != nil {
		c = cursor{LastTS: strings.Trim(v, `"`)}
	}
	t, err := ParseTime(c.LastTS)
	if err != nil {
		return nil, fmt.Errorf("%q is not a position like %s or a timestamp like 2026-03-01T00:00:00Z", v, soqlExample)
	}
	c.last = t
	return &c, nil
}

// CheckSOQLCheckpoint reports whether v is a position the eventlog_objects
// source can resume from (the value of an eventlog_objects:<Object> key).
func CheckSOQLCheckpoint(v string) error {
	_, err := parseCursor(v)
	return err
}

// RepairHint names the commands that replace or remove an unreadable
// checkpoint, with an example of a valid value.
func RepairHint(key, example string) string {
	return fmt.Sprintf("with the replicas stopped: sf2loki state set %s '%s' (a position of your choice), or sf2loki state delete %s (the default start)",
		key, example, key)
}

func (s *SOQLSource) loop(ctx context.Context, o ObjectSpec, cur *cursor, emit func(ports.Entry) error) error {
	for {
		s.mu.Lock()
		wait := s.throttledUntil.Sub(s.clock.Now())
		s.mu.Unlock()
		if wait <= 0 {
			err := s.cycle(ctx, o, cur, emit)
			switch {
			case ctx.Err() != nil:
				return nil
			case errors.Is(err, ErrThrottled):
				// The org's throttle gate logged and counted it once.
				s.mu.Lock()
				s.throttledUntil = s.clock.Now().Add(o.PollInterval)
				s.mu.Unlock()
				s.log.Debug("SOQL poll skipped: the org's API limit", "object", o.Name, "error", err)
			case err != nil:
				s.log.Warn("SOQL poll failed; retrying at the next interval", "object", o.Name, "error", err)
			}
			wait = o.PollInterval
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.clock.After(wait):
		}
	}
}

// row is one record read: its key (Id; for a big object EventIdentifier),
// its timestamp, and the record.
type row struct {
	key string
	t   time.Time
	ts  string
	rec map[string]any
}

// rows reads the key and timestamp of each record.
// queryRows runs one query (all its pages) and reads its records as rows.
func (s *SOQLSource) queryRows(ctx context.Context, o ObjectSpec, q string) ([]row, error) {
	recs, err := Query(ctx, s.auth, s.version, q)
	if err != nil {
		return nil, err
	}
	return s.rows(o, recs)
}

func (s *SOQLSource) rows(o ObjectSpec, recs []map[string]any) ([]row, error) {
	out := make([]row, len(recs))
	for i, rec := range recs {
		ts, _ := rec[o.TimestampField].(string)
		t, err := ParseTime(ts)
		key := rowKey(o, rec)
		if key == "" || err != nil {
			return nil, fmt.Errorf("salesforce: %s row without Id or a readable %s: %v", o.Name, o.TimestampField, rec["Id"])
		}
		out[i] = row{key: key, t: t, ts: ts, rec: rec}
	}
	return out, nil
}

// cycle drains an object from its cursor.
//
// SOQL dateTime literals have whole seconds, so every query starts at the
// start of a second: the first at the second holding the watermark (less
// settle), and rows already emitted are told apart in the client: a row
// before the cut (the watermark less settle, to the millisecond) is
// behind it, a row at or after it whose Id the cursor carries was
// emitted. An ordinary object is read ascending by (timestamp, Id); a full
// page continues from the start of its last row's second, or, when the
// whole page lies in one second, that second is read whole, by Id, and the
// drain goes on from the next.
//
// A row the transforms drop or sampling leaves out moves the cursor and
// emits nothing; the next entry carries the cursor past it, or, when no
// entry follows in the poll, a checkpoint-only entry at its end.
func (s *SOQLSource) cycle(ctx context.Context, o ObjectSpec, cur *cursor, emit func(ports.Entry) error) (err error) {
	if o.big {
		return s.bigCycle(ctx, o, cur, emit)
	}
	plan := s.Shaper.For(o.Name)
	unsent := false // the cursor moved past a row left out, and no entry carries it yet
	defer func() {
		if unsent {
			if e := emit(ports.Entry{CheckpointOnly: true, Checkpoint: ports.Checkpoint{Key: SOQLKeyPrefix + o.Name, Value: cur.encode()}}); err == nil {
				err = e
			}
		}
	}()
	cut := cur.last.Add(-o.Settle)
	seen := map[string]bool{}
	for _, id := range cur.IDs {
		seen[id] = true
	}
	emitted := 0
	take := func(rows []row) error {
		for _, r := range rows {
			if r.t.Before(cut) || seen[r.key] {
				continue
			}
			seen[r.key] = true
			if r.t.After(cur.last) {
				cur.last, cur.LastTS = r.t, r.ts
			}
			cur.IDs = carried(cur.IDs, r.key)
			emitted++ // rows read past, left out or not: the bound of one poll's work
			delete(r.rec, "attributes")
			if !plan.Noop() && (!plan.Keep(r.key) || !plan.Values(r.rec)) {
				unsent = true
				continue
			}
			line, level, err := render(r.rec)
			if err != nil {
				return err
			}
			if err := emit(s.entry(o, line, level, r.t, cur.encode())); err != nil {
				return err
			}
			unsent = false
		}
		return nil
	}
	from := cut.Truncate(time.Second)
	for {
		q := fmt.Sprintf("SELECT FIELDS(ALL) FROM %s WHERE %s >= %s ORDER BY %s ASC, Id ASC LIMIT %d",
			o.Name, o.TimestampField, literal(from), o.TimestampField, PageSize)
		rows, err := s.queryRows(ctx, o, q)
		if err != nil {
			return err
		}
		if err := take(rows); err != nil {
			return err
		}
		s.drainProgress(o, cur, len(rows), len(rows) == PageSize)
		if len(rows) < PageSize || (o.MaxCatchupRecords > 0 && emitted >= o.MaxCatchupRecords) {
			return nil
		}
		sec := rows[len(rows)-1].t.Truncate(time.Second)
		if !rows[0].t.Truncate(time.Second).Equal(sec) {
			from = sec // the rest of this second and later ones
			continue
		}
		whole, err := s.secondByID(ctx, o, sec)
		if err != nil {
			return err
		}
		if err := take(whole); err != nil {
			return err
		}
		from = sec.Add(time.Second)
	}
}

// secondByID reads every row of an ordinary object in one second, paging
// by Id, and returns them ascending by (timestamp, Id).
func (s *SOQLSource) secondByID(ctx context.Context, o ObjectSpec, sec time.Time) ([]row, error) {
	var all []row
	after := ""
	for {
		cond := fmt.Sprintf("%s >= %s AND %s < %s", o.TimestampField, literal(sec), o.TimestampField, literal(sec.Add(time.Second)))
		if after != "" {
			cond += fmt.Sprintf(" AND Id > '%s'", after)
		}
		rows, err := s.queryRows(ctx, o, fmt.Sprintf("SELECT FIELDS(ALL) FROM %s WHERE %s ORDER BY Id ASC LIMIT %d", o.Name, cond, PageSize))
		if err != nil {
			return nil, err
		}
		all = append(all, rows...)
		if len(rows) < PageSize {
			break
		}
		if after = rows[len(rows)-1].key; !sfrules.ValidName(after) {
			return nil, fmt.Errorf("salesforce: %s row with an Id that cannot be a query value: %q", o.Name, after)
		}
	}
	slices.SortFunc(all, func(a, b row) int { return cmp.Or(a.t.Compare(b.t), strings.Compare(a.key, b.key)) })
	return all, nil
}

// carried appends id and keeps the newest maxCarriedIDs (the backing
// array is reused: once it is full, append moves the newest into a new
// one).
func carried(ids []string, id string) []string {
	ids = append(ids, id)
	if len(ids) > maxCarriedIDs {
		ids = ids[len(ids)-maxCarriedIDs:]
	}
	return ids
}

// render is a record's Loki line (sorted-key JSON without attributes) and
// level.
func render(rec map[string]any) (line, level string, err error) {
	delete(rec, "attributes")
	b, err := json.Marshal(rec) // maps marshal with sorted keys
	return string(b), RecordLevel(rec), err
}

func (c *cursor) encode() string {
	b, _ := json.Marshal(c)
	return string(b)
}

func (s *SOQLSource) entry(o ObjectSpec, line, level string, t time.Time, checkpoint string) ports.Entry {
	return ports.Entry{Time: t, Line: line, Metadata: map[string]string{"level": level},
		Labels:     map[string]string{"source": "eventlog_objects", "event_type": o.Name},
		Checkpoint: ports.Checkpoint{Key: SOQLKeyPrefix + o.Name, Value: checkpoint}}
}

// Query runs one SOQL query with auth and follows nextRecordsUrl.
func Query(ctx context.Context, auth *Auth, apiVersion, soql string) ([]map[string]any, error) {
	return queryAt(ctx, auth, fmt.Sprintf("/services/data/v%s/query", apiVersion), soql)
}

// queryAt runs one SOQL query on the query resource at endpoint (the REST
// API's or the Tooling API's) and follows nextRecordsUrl.
func queryAt(ctx context.Context, auth *Auth, endpoint, soql string) ([]map[string]any, error) {
	next := endpoint + "?" + url.Values{"q": {soql}}.Encode()
	var rows []map[string]any
	for next != "" {
		path := next
		resp, err := auth.Do(ctx, func(tok *Token) (*http.Request, error) {
			return http.NewRequest(http.MethodGet, tok.InstanceURL+path, nil)
		})
		if err != nil {
			return nil, err
		}
		body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
		_ = resp.Body.Close()
		if err != nil {
			return nil, ports.Transient("query", fmt.Errorf("salesforce: reading a query answer: %w", err))
		}
		if strings.Contains(string(body), "REQUEST_LIMIT_EXCEEDED") {
			return nil, ErrThrottled
		}
		if resp.StatusCode >= 500 {
			return nil, ports.TransientAfter("query", ports.ParseRetryAfter(resp.Header.Get("Retry-After")),
				fmt.Errorf("salesforce: query answered %d (the org is unavailable; the query is retried): %s", resp.StatusCode, auth.snippet(body)))
		}
		if resp.StatusCode != http.StatusOK {
			return nil, fmt.Errorf("salesforce: query answered %d: %s", resp.StatusCode, auth.snippet(body))
		}
		var page struct {
			Records        []map[string]any `json:"records"`
			Done           bool             `json:"done"`
			NextRecordsURL string           `json:"nextRecordsUrl"`
		}
		if err := json.Unmarshal(body, &page); err != nil {
			return nil, fmt.Errorf("salesforce: query answered 200 with a body that is not JSON (%w): %s", err, auth.snippet(body))
		}
		rows = append(rows, page.Records...)
		next = ""
		if !page.Done {
			next = page.NextRecordsURL
		}
	}
	return rows, nil
}

// sfTimeLayout is how Salesforce writes datetimes: 2026-11-28T10:00:00.000+0000.
const sfTimeLayout = "2006-01-02T15:04:05.000-0700"

// ParseTime reads a Salesforce datetime (or RFC 3339).
func ParseTime(s string) (time.Time, error) {
	if t, err := time.Parse(sfTimeLayout, s); err == nil {
		return t.UTC(), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	return t.UTC(), err
}

// literal renders t as a SOQL dateTime literal in its documented form,
// YYYY-MM-DDThh:mm:ssZ: whole seconds (a fraction is cut off, so a lower
// bound written with it is at or before t).
func literal(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05Z") }

// Describe reports whether object exists for this user and is queryable.
func Describe(ctx context.Context, auth *Auth, apiVersion, object string) (bool, error) {
	if !sfrules.ValidName(object) {
		return false, fmt.Errorf("salesforce: %q is not an object name", object)
	}
	var d struct {
		Queryable bool `json:"queryable"`
	}
	if err := GetJSON(ctx, auth, fmt.Sprintf("/services/data/v%s/sobjects/%s/describe", apiVersion, object), &d); err != nil {
		return false, fmt.Errorf("salesforce: describe %s: %w", object, err)
	}
	return d.Queryable, nil
}
