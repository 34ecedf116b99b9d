package salesforce

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sf2loki/sf2loki/internal/domain/shape"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/sfrules"
)

// ApexLogKey is the ApexLog source's checkpoint key; its value is a
// position like eventlog_objects': {"last_ts": StartTime, "ids": [the
// newest ≤ 500 log Ids]}.
const ApexLogKey = "apexlog"

// DefaultMaxBodyBytes is the largest debug log body shipped by default.
const DefaultMaxBodyBytes = 5 << 20

// apexLogFields are the ApexLog fields listed; the body is downloaded
// apart.
const apexLogFields = "Id, LogUserId, LogLength, Operation, Request, Status, StartTime, Application, DurationMilliseconds, Location"

// apexLogMetadata are the fields shipped as structured metadata.
var apexLogMetadata = []string{"Id", "LogUserId", "LogLength", "Operation", "Request", "Status", "Application", "DurationMilliseconds", "Location"}

// ApexLogSpec configures the ApexLog source (sources.apexlog).
type ApexLogSpec struct {
	PollInterval time.Duration // default 1m
	Lookback     time.Duration // first run: from now − lookback; default 1h
	// Users, if set, keeps the logs of these users only (their
	// usernames: LogUser.Username IN (…)); each must pass sfrules.ValidUsername.
	Users []string
	// MaxBodyBytes bounds a body shipped; a larger one is left out (the
	// log ships as its metadata). Default DefaultMaxBodyBytes.
	MaxBodyBytes int64
}

// ApexLogSource ships Apex debug logs: it lists ApexLog records with the
// Tooling API and downloads each body, one Loki entry per log.
type ApexLogSource struct {
	auth    *Auth
	version string
	spec    ApexLogSpec
	clock   ports.Clock
	log     *slog.Logger
	users   string // the query's user filter, "" for every user
	// GarbageCheckpoint counts unreadable stored checkpoints (each falls
	// back to the lookback window).
	GarbageCheckpoint func()
	// BodySkipped, if set, counts a log shipped without its body, by
	// reason: oversized, not_found, dropped (by a transform).
	BodySkipped func(reason string)
	// DownloadFailed, if set, counts a body download that failed and
	// stopped the poll at its log (the next poll tries it again).
	DownloadFailed func()
	// Shaper transforms and samples the logs (event type ApexLog; nil:
	// every log as listed); set before Run. Sampling decides by the log's
	// Id, before its body is downloaded. The transforms see the record's
	// fields and the body as the field Body: a body a drop_field removes
	// ships as the metadata with body_skipped. A log left out emits only
	// its position.
	Shaper *shape.Shaper
}

// NewApexLogSource validates spec.
func NewApexLogSource(auth *Auth, apiVersion string, spec ApexLogSpec, clk ports.Clock, log *slog.Logger) (*ApexLogSource, error) {
	var quoted []string
	for _, u := range spec.Users {
		if !sfrules.ValidUsername(u) {
			return nil, fmt.Errorf("salesforce: apexlog user %q is not a username (letters, digits and . _ + - around one @)", u)
		}
		quoted = append(quoted, "'"+u+"'")
	}
	if spec.PollInterval <= 0 {
		spec.PollInterval = time.Minute
	}
	if spec.Lookback <= 0 {
		spec.Lookback = time.Hour
	}
	if spec.MaxBodyBytes <= 0 {
		spec.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &ApexLogSource{auth: auth, version: apiVersion, spec: spec, clock: clk, log: log}
	if len(quoted) > 0 {
		s.users = " AND LogUser.Username IN (" + strings.Join(quoted, ", ") + ")"
	}
	return s, nil
}

// Name implements ports.Source.
func (s *ApexLogSource) Name() string { return "apexlog" }

// Lane implements ports.Source: body downloads are bulk.
func (s *ApexLogSource) Lane() ports.Lane { return ports.LaneBulk }

// CheckApexLogCheckpoint reports whether v is a position the ApexLog
// source can resume from (the value of the apexlog key).
func CheckApexLogCheckpoint(v string) error {
	_, err := parseCursor(v)
	return err
}

// Run implements ports.Source: every poll_interval, the logs after the
// position are listed and shipped in (StartTime, Id) order. A body that
// cannot be downloaded for now (a 5xx, a broken connection, the org's API
// limit) stops the poll at its log, which the next poll tries again: no
// position moves past a log that was not shipped.
func (s *ApexLogSource) Run(ctx context.Context, resume func(string) (string, bool), emit func(ports.Entry) error) error {
	cur := s.resumeCursor(resume)
	for {
		err := s.cycle(ctx, cur, emit)
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, ErrThrottled):
			// The org's throttle gate logged and counted it once.
			s.log.Debug("apexlog poll stopped: the org's API limit; the next poll tries again", "error", err)
		case err != nil:
			s.log.Warn("apexlog poll stopped; the next poll retries from the last log shipped", "error", err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-s.clock.After(s.spec.PollInterval):
		}
	}
}

// resumeCursor reads the stored position; an unreadable one falls back to
// the lookback window, with an ERROR naming the repair.
func (s *ApexLogSource) resumeCursor(resume func(string) (string, bool)) *cursor {
	if v, ok := resume(ApexLogKey); ok && v != "" {
		c, err := parseCursor(v)
		if err == nil {
			return c
		}
		s.log.Error("unreadable checkpoint; apexlog starts from its lookback window, and the next commit replaces the value",
			"key", ApexLogKey, "value", v, "error", err, "lookback", s.spec.Lookback, "repair", RepairHint(ApexLogKey, soqlExample))
		if s.GarbageCheckpoint != nil {
			s.GarbageCheckpoint()
		}
	}
	start := s.clock.Now().Add(-s.spec.Lookback).UTC().Truncate(time.Millisecond)
	return &cursor{LastTS: start.Format(sfTimeLayout), last: start}
}

// apexLog is one listed ApexLog record.
type apexLog struct {
	id     string
	t      time.Time
	ts     string
	length int64
	rec    map[string]any
}

// lastID is the Id of the log the position ends at: the last one it
// carries ("" when it carries none, or one that cannot be a query value).
func lastID(c *cursor) string {
	if len(c.IDs) == 0 {
		return ""
	}
	if id := c.IDs[len(c.IDs)-1]; sfrules.ValidName(id) {
		return id
	}
	return ""
}

// cycle ships the logs after the position, a page at a time.
//
// A page is `SELECT … FROM ApexLog WHERE (StartTime > s OR (StartTime = s
// AND Id > last)) … ORDER BY StartTime ASC, Id ASC LIMIT 200`, where s is
// the second the previous page ended in (SOQL dateTime literals have whole
// seconds) and last that page's last Id: every log after it, and the logs
// of its second before it again, which the position tells apart. A full
// page that lies wholly in one second makes the drain read that second
// whole, by Id, and go on from the next.
func (s *ApexLogSource) cycle(ctx context.Context, cur *cursor, emit func(ports.Entry) error) error {
	from, after := cur.last.Truncate(time.Second), lastID(cur)
	for {
		cond := "StartTime >= " + literal(from)
		if after != "" {
			cond = fmt.Sprintf("(StartTime > %s OR (StartTime = %s AND Id > '%s'))", literal(from), literal(from), after)
		}
		logs, err := s.list(ctx, cond, "StartTime ASC, Id ASC")
		if err != nil {
			return err
		}
		if err := s.take(ctx, logs, cur, emit); err != nil {
			return err
		}
		if len(logs) < PageSize {
			return nil
		}
		last := logs[len(logs)-1]
		sec := last.t.Truncate(time.Second)
		if !logs[0].t.Truncate(time.Second).Equal(sec) {
			from, after = sec, last.id
			continue
		}
		whole, err := s.second(ctx, sec)
		if err != nil {
			return err
		}
		if err := s.take(ctx, whole, cur, emit); err != nil {
			return err
		}
		from, after = sec.Add(time.Second), ""
	}
}

// second lists every log of one second, paging by Id, in (StartTime, Id)
// order.
func (s *ApexLogSource) second(ctx context.Context, sec time.Time) ([]apexLog, error) {
	var all []apexLog
	after := ""
	for {
		cond := fmt.Sprintf("StartTime >= %s AND StartTime < %s", literal(sec), literal(sec.Add(time.Second)))
		if after != "" {
			cond += fmt.Sprintf(" AND Id > '%s'", after)
		}
		logs, err := s.list(ctx, cond, "Id ASC")
		if err != nil {
			return nil, err
		}
		all = append(all, logs...)
		if len(logs) < PageSize {
			break
		}
		after = logs[len(logs)-1].id
	}
	slices.SortFunc(all, func(a, b apexLog) int { return cmp.Or(a.t.Compare(b.t), strings.Compare(a.id, b.id)) })
	return all, nil
}

// list runs one page's query.
func (s *ApexLogSource) list(ctx context.Context, cond, order string) ([]apexLog, error) {
	q := fmt.Sprintf("SELECT %s FROM ApexLog WHERE %s%s ORDER BY %s LIMIT %d", apexLogFields, cond, s.users, order, PageSize)
	recs, err := ToolingQuery(ctx, s.auth, s.version, q)
	if err != nil {
		return nil, err
	}
	out := make([]apexLog, len(recs))
	for i, rec := range recs {
		id, _ := rec["Id"].(string)
		ts, _ := rec["StartTime"].(string)
		t, err := ParseTime(ts)
		if !sfrules.ValidName(id) || err != nil {
			return nil, fmt.Errorf("salesforce: an ApexLog record without an Id or a readable StartTime: %v", rec["Id"])
		}
		length, _ := rec["LogLength"].(float64)
		delete(rec, "attributes")
		out[i] = apexLog{id: id, t: t, ts: ts, length: int64(length), rec: rec}
	}
	return out, nil
}

// take ships the logs after the position, in order.
func (s *ApexLogSource) take(ctx context.Context, logs []apexLog, cur *cursor, emit func(ports.Entry) error) error {
	seen := make(map[string]bool, len(cur.IDs))
	for _, id := range cur.IDs {
		seen[id] = true
	}
	for _, l := range logs {
		after := lastID(cur)
		if l.t.Before(cur.last) || seen[l.id] || (l.t.Equal(cur.last) && after != "" && l.id <= after) {
			continue
		}
		if err := s.ship(ctx, l, cur, emit); err != nil {
			return err
		}
		seen[l.id] = true
	}
	return nil
}

// ApexLogType is the ApexLog source's event type: its entries' event_type
// label, and what its transforms' event_types and its sample map match.
const ApexLogType = "ApexLog"

// ship downloads a log's body and emits its entry, carrying the position
// after it. A body over max_body_bytes, or one Salesforce no longer has
// (404: the log was deleted), ships as the log's metadata with
// body_skipped; any other failure returns, and the position stays before
// the log. A log sampling leaves out is not downloaded; it, and one a
// drop_row transform drops, emits only the position after it.
func (s *ApexLogSource) ship(ctx context.Context, l apexLog, cur *cursor, emit func(ports.Entry) error) error {
	next := cursor{LastTS: l.ts, last: l.t, IDs: carried(slices.Clone(cur.IDs), l.id)}
	cp := ports.Checkpoint{Key: ApexLogKey, Value: next.encode()}
	plan := s.Shaper.For(ApexLogType)
	if !plan.Keep(l.id) {
		if err := emit(ports.Entry{CheckpointOnly: true, Checkpoint: cp}); err != nil {
			return err
		}
		*cur = next
		return nil
	}
	var body, skipped, reason string
	if l.length > s.spec.MaxBodyBytes {
		skipped, reason = "oversized", fmt.Sprintf("oversized (%d bytes > max_body_bytes)", l.length)
	} else {
		var err error
		if body, skipped, reason, err = s.body(ctx, l); err != nil {
			if s.DownloadFailed != nil && !errors.Is(err, ErrThrottled) {
				s.DownloadFailed()
			}
			return fmt.Errorf("ApexLog %s (StartTime %s): %w", l.id, l.ts, err)
		}
	}
	// The transforms see the record and its body (as Body); the entry's
	// time and position come from the log as listed.
	rec := maps.Clone(l.rec)
	if skipped == "" {
		rec["Body"] = body
	}
	if !plan.Noop() && !plan.Values(rec) {
		if err := emit(ports.Entry{CheckpointOnly: true, Checkpoint: cp}); err != nil {
			return err
		}
		*cur = next
		return nil
	}
	line, kept := rec["Body"].(string)
	delete(rec, "Body")
	if skipped == "" && !kept {
		skipped, reason = "dropped", "dropped by a drop_field transform"
	}
	meta := map[string]string{"level": apexLogLevel(rec)}
	for _, f := range apexLogMetadata {
		if v := text(rec[f]); v != "" {
			meta[f] = v
		}
	}
	if skipped != "" {
		meta["body_skipped"], meta["body_skip_reason"] = "true", reason
		rec["body_skipped"], rec["body_skip_reason"] = true, reason
		b, err := json.Marshal(rec) // maps marshal with sorted keys
		if err != nil {
			return err
		}
		line = string(b)
		if s.BodySkipped != nil {
			s.BodySkipped(skipped)
		}
	}
	err := emit(ports.Entry{Time: l.t, Line: line, Metadata: meta,
		Labels:     map[string]string{"source": "apexlog", "event_type": ApexLogType},
		Checkpoint: cp})
	if err != nil {
		return err
	}
	*cur = next
	return nil
}

// body downloads a log's body, reading at most max_body_bytes of it. It
// returns the reason (skipped, and the text of body_skip_reason) when the
// log ships without it, and an error when the download failed for now.
func (s *ApexLogSource) body(ctx context.Context, l apexLog) (body, skipped, reason string, err error) {
	resp, err := s.auth.Do(ctx, func(tok *Token) (*http.Request, error) {
		return http.NewRequest(http.MethodGet, fmt.Sprintf("%s/services/data/v%s/tooling/sobjects/ApexLog/%s/Body", tok.InstanceURL, s.version, l.id), nil)
	})
	if err != nil {
		return "", "", "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		switch {
		case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusGone:
			return "", "not_found", fmt.Sprintf("not found (the body answered %d: the log was deleted before it was downloaded)", resp.StatusCode), nil
		case resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests:
			return "", "", "", ports.TransientAfter("apexlog_body", ports.ParseRetryAfter(resp.Header.Get("Retry-After")),
				fmt.Errorf("salesforce: the body answered %d (retried at the next poll): %s", resp.StatusCode, s.auth.snippet(b)))
		}
		return "", "", "", fmt.Errorf("salesforce: the body answered %d (retried at the next poll): %s", resp.StatusCode, s.auth.snippet(b))
	}
	b, err := io.ReadAll(io.LimitReader(resp.Body, s.spec.MaxBodyBytes+1))
	if err != nil {
		return "", "", "", ports.Transient("apexlog_body", fmt.Errorf("salesforce: reading the body: %w", err))
	}
	if n := int64(len(b)); n > s.spec.MaxBodyBytes {
		// The log grew past what its record said: its size is at least
		// what was read, or what the answer declared.
		size := max(n, resp.ContentLength, l.length)
		return "", "oversized", fmt.Sprintf("oversized (%d bytes > max_body_bytes)", size), nil
	}
	return string(b), "", "", nil
}

// apexLogLevel is info for a transaction that succeeded, error for one
// that ended in an unhandled exception (Status is Success or the
// exception's text).
func apexLogLevel(rec map[string]any) string {
	switch st, _ := rec["Status"].(string); strings.TrimSpace(st) {
	case "", "Success":
		return "info"
	}
	return "error"
}

// text renders a JSON value as structured metadata: numbers without an
// exponent, null as "".
func text(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return v
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	}
	return fmt.Sprint(v)
}
