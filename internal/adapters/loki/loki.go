// Package loki is the ports.Sink that pushes entries to Grafana Loki's push
// API (/loki/api/v1/push): protobuf + snappy by default, JSON (+gzip) for
// debugging, with retries, batch splitting on 400/413, and a line cap; over
// TLS (mutual TLS too) and through the environment's proxy, with extra
// headers. Config.Print makes it a dry run that prints the entries instead.
//
// Imports: internal/ports, internal/lokirules, internal/buildinfo, the shared
// adapter helpers (redact, lograte), net/http, crypto/tls, protowire and s2
// (snappy).
package loki

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/sf2loki/sf2loki/internal/adapters/lograte"
	"github.com/sf2loki/sf2loki/internal/adapters/redact"
	"github.com/sf2loki/sf2loki/internal/buildinfo"
	"github.com/sf2loki/sf2loki/internal/lokirules"
	"github.com/sf2loki/sf2loki/internal/ports"
)

// Defaults.
const (
	DefaultMaxLineBytes = 256 << 10
	DefaultTimeout      = 30 * time.Second
	DefaultAttempts     = 5
)

// Config configures the sink.
type Config struct {
	// URL is the push endpoint, e.g. http://loki:3100/loki/api/v1/push.
	URL string
	// TenantID is sent as X-Scope-OrgID on every push (and is the
	// basic-auth user of AuthToken when BasicAuthUser is blank).
	TenantID string
	// AuthToken is sent as basic auth with BasicAuthUser (else TenantID);
	// with neither, as a bearer token.
	AuthToken     string
	BasicAuthUser string
	// Encoding is "protobuf" (snappy, default) or "json" (gzip).
	Encoding string
	// Uncompressed sends a json body without gzip (protobuf is always
	// snappy, Loki's format).
	Uncompressed bool
	// Labels are static labels merged over every entry's (allowlisted).
	Labels map[string]string
	// StructuredMetadataFields are top-level keys of a JSON line promoted to
	// structured metadata (high-cardinality fields: user ids, IPs).
	StructuredMetadataFields []string
	// MaxLineBytes truncates longer lines on a UTF-8 boundary (0: 256 KiB).
	MaxLineBytes int
	// Timeout bounds each HTTP request (0: 30s).
	Timeout time.Duration
	// Attempts bounds tries of one push on transport errors, 429 and 5xx
	// (0: 5); then the pipeline gets a transient error and retries later.
	Attempts int
	// Backoff is the first retry's wait (0: 500ms), doubling up to 30s and
	// raised to a Retry-After (capped at 60s).
	Backoff time.Duration
	// TLS configures an https URL's connection (used when HTTPClient is
	// nil; the client's transport honours HTTP_PROXY, HTTPS_PROXY and
	// NO_PROXY either way).
	TLS TLS
	// Headers are extra headers sent on every push (lokirules.HeaderProblem says
	// which may not be set). Their values are secrets: never logged.
	Headers map[string]string
	// Print, when set, receives every entry a push would send as one JSON
	// line (labels, time, line, metadata), labels merged and lines capped
	// as for Loki, instead of the push: a dry run. No request is made and
	// URL is not needed.
	Print      io.Writer
	HTTPClient *http.Client
	Logger     *slog.Logger
	// OnPush, if set, receives the duration of every Push.
	OnPush func(time.Duration)
}

// Stats are the sink's counters.
type Stats struct {
	EntriesPushed  atomic.Int64
	BytesPushed    atomic.Int64
	LinesTruncated atomic.Int64
	LastSuccess    atomic.Int64 // unix nanoseconds
	// FailingSince is when the pushes began failing without one accepted
	// since (unix nanoseconds), 0 while they are accepted.
	FailingSince atomic.Int64
	mu           sync.Mutex
	dropped      map[string]int64
	rejecting    string // why the sink refuses every entry; "" while it accepts
}

// Rejecting returns why Loki refuses every entry (its status and the start
// of its answer), or "" while it accepts them.
func (s *Stats) Rejecting() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.rejecting
}

// setRejecting records the state (the answer is kept up to date) and
// reports whether it changed between accepting and rejecting.
func (s *Stats) setRejecting(why string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	changed := (s.rejecting == "") != (why == "")
	s.rejecting = why
	return changed
}

// entrySpecific reports whether a 400 answer names a problem of the entries
// themselves, which Loki's limits make it refuse one by one (too old, too
// new, out of order, too long), rather than of the configuration (a wrong
// path, a tenant, structured metadata not enabled).
func entrySpecific(body string) bool {
	b := strings.ToLower(body)
	for _, p := range []string{"timestamp too old", "timestamp too new", "too far behind", "out of order", "line too long",
		"max entry size", "structured metadata too large", "is too large"} {
		if strings.Contains(b, p) {
			return true
		}
	}
	return false
}

// ErrRejectingAll means Loki refused every entry of a push: a wrong URL, a
// tenant or an auth that is refused, or a Loki that does not accept what
// sf2loki sends (structured metadata needs schema v13 and
// allow_structured_metadata). The entries are kept and retried; nothing
// is committed past them.
var ErrRejectingAll = errors.New("loki rejects every entry")

// RejectingError carries Loki's answer. It unwraps to ErrRejectingAll.
type RejectingError struct {
	URL    string
	Status int
	Body   string
}

func (e *RejectingError) Error() string {
	return fmt.Sprintf("loki %s rejects every entry: answered %d %q; holding the data uncommitted: check sink.loki.url (the push path is /loki/api/v1/push), "+
		"the tenant and credentials, and that Loki accepts structured metadata (sf2loki doctor pushes a test entry)", e.URL, e.Status, e.Body)
}

// Unwrap returns ErrRejectingAll.
func (e *RejectingError) Unwrap() error { return ErrRejectingAll }

// DropReasons are the reasons Stats counts dropped entries by: Loki
// refused the entry pushed alone (bad_request, oversized_413), or the
// egress governor's budget_action drop (budget).
var DropReasons = []string{"bad_request", "oversized_413", "budget"}

// Dropped returns entries dropped by reason (DropReasons).
func (s *Stats) Dropped() map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int64{}
	for k, v := range s.dropped {
		out[k] = v
	}
	return out
}

// Drop counts n entries dropped for reason outside the sink (budget: the
// egress governor's budget_action drop).
func (s *Stats) Drop(reason string, n int) { s.drop(reason, n) }

func (s *Stats) drop(reason string, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropped[reason] += int64(n)
}

// Sink pushes to Loki.
type Sink struct {
	cfg    Config
	client *http.Client
	log    *slog.Logger
	Stats  *Stats
	// authFails counts consecutive 401/403 answers, for rate-limited logs.
	authFails atomic.Int64
	// accepting is true once a push was accepted and until a push is found
	// rejecting everything.
	accepting atomic.Bool
	// dropLog rate-limits the per-entry drop warnings (one per reason each
	// 10s, with the count held back); rejectLog the ERROR that Loki
	// refuses everything (one a minute).
	dropLog, rejectLog lograte.Limiter
	// lastFullSplit is when a refused batch was last split in full while
	// Loki refused everything (unix nanoseconds).
	lastFullSplit atomic.Int64
	// url is the URL without its password, for messages; secrets removes
	// the token (and a URL password) from answers a proxy may echo.
	url     string
	secrets *redact.Redactor
	// printMu keeps printed batches whole.
	printMu sync.Mutex
}

var _ ports.Sink = (*Sink)(nil)

// New validates cfg (the URL, the encoding, the label allowlist and the
// extra headers) and reads the TLS files.
func New(cfg Config) (*Sink, error) {
	switch u, err := url.Parse(cfg.URL); {
	case cfg.Print != nil && cfg.URL == "":
	case cfg.URL == "":
		return nil, errors.New("sink.loki.url is required (e.g. http://loki:3100/loki/api/v1/push)")
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		return nil, fmt.Errorf("sink.loki.url %q is not an http(s) URL with a host (e.g. http://loki:3100/loki/api/v1/push)", cfg.URL)
	}
	if err := checkHeaders(cfg); err != nil {
		return nil, err
	}
	switch cfg.Encoding {
	case "":
		cfg.Encoding = "protobuf"
	case "protobuf", "json":
	default:
		return nil, fmt.Errorf("sink.loki.encoding %q is not protobuf or json", cfg.Encoding)
	}
	for k := range cfg.Labels {
		if !slices.Contains(lokirules.AllowedLabels, k) {
			return nil, fmt.Errorf("sink.loki.labels.%s: not an allowed label (%v); put high-cardinality fields in structured metadata", k, lokirules.AllowedLabels)
		}
		if slices.Contains(lokirules.PerSourceLabels, k) {
			return nil, fmt.Errorf("sink.loki.labels.%s: set by each source, not statically", k)
		}
	}
	if cfg.MaxLineBytes == 0 {
		cfg.MaxLineBytes = DefaultMaxLineBytes
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.Attempts <= 0 {
		cfg.Attempts = DefaultAttempts
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = 500 * time.Millisecond
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	client := cfg.HTTPClient
	if client == nil && cfg.Print == nil {
		tr, err := newTransport(cfg.TLS, time.Now())
		if err != nil {
			return nil, err
		}
		client = &http.Client{Transport: tr}
		if cfg.TLS.InsecureSkipVerify {
			log.Warn(insecureWarning)
		}
	}
	shown, secrets := Secrets(cfg)
	return &Sink{cfg: cfg, client: client, log: log, Stats: &Stats{dropped: map[string]int64{}}, url: shown, secrets: redact.New(secrets...),
		rejectLog: lograte.Limiter{Every: time.Minute}}, nil
}

// Secrets returns the URL as it may be shown (without a password) and what
// must never be logged of cfg: the token, the basic-auth header value made
// from it, a password in the URL, and every extra header's value (also
// without a Bearer or Basic prefix).
func Secrets(cfg Config) (shownURL string, secrets []string) {
	shownURL = cfg.URL
	if u, err := url.Parse(cfg.URL); err == nil {
		shownURL = u.Redacted()
		if p, ok := u.User.Password(); ok {
			secrets = append(secrets, p, base64.StdEncoding.EncodeToString([]byte(u.User.Username()+":"+p)))
		}
	}
	if cfg.AuthToken != "" {
		secrets = append(secrets, cfg.AuthToken, base64.StdEncoding.EncodeToString([]byte(cfg.basicAuthUser()+":"+cfg.AuthToken)))
	}
	for _, v := range cfg.Headers {
		secrets = append(secrets, v, strings.TrimPrefix(strings.TrimPrefix(v, "Bearer "), "Basic "))
	}
	return shownURL, secrets
}

// Push implements ports.Sink.
func (s *Sink) Push(ctx context.Context, batch []ports.Entry) error {
	return s.pushLabelled(ctx, batch, s.cfg.Labels)
}

// Labelled is a view of a Sink that adds labels of its own (an org's) to
// every entry; it shares the sink's connection, counters and state.
type Labelled struct {
	sink   *Sink
	labels atomic.Pointer[map[string]string]
}

var _ ports.Sink = (*Labelled)(nil)

// WithLabels returns a view adding extra (over the static labels) to every
// entry. Only the allowed labels may be set.
func (s *Sink) WithLabels(extra map[string]string) (*Labelled, error) {
	for k := range extra {
		if !lokirules.IsStatic(k) {
			return nil, fmt.Errorf("loki: label %q may not be set per org (allowed: %v)", k, lokirules.AllowedLabels)
		}
	}
	v := &Labelled{sink: s}
	merged := maps.Clone(s.cfg.Labels)
	if merged == nil {
		merged = map[string]string{}
	}
	maps.Copy(merged, extra)
	v.labels.Store(&merged)
	return v, nil
}

// Set sets one of the view's labels (an org id once it is known).
func (v *Labelled) Set(k, value string) {
	m := maps.Clone(*v.labels.Load())
	m[k] = value
	v.labels.Store(&m)
}

// Push implements ports.Sink.
func (v *Labelled) Push(ctx context.Context, batch []ports.Entry) error {
	return v.sink.pushLabelled(ctx, batch, *v.labels.Load())
}

// String names the sink.
func (v *Labelled) String() string { return v.sink.String() }

func (s *Sink) pushLabelled(ctx context.Context, batch []ports.Entry, labels map[string]string) error {
	if s.cfg.OnPush != nil {
		defer func(start time.Time) { s.cfg.OnPush(time.Since(start)) }(time.Now())
	}
	buf := preparedBuffers.Get().(*[]ports.Entry)
	prepared := slices.Grow((*buf)[:0], len(batch))[:len(batch)]
	defer func() {
		// Nothing keeps prepared past the push (a rejection copies its
		// entry): cleared, so that the pool holds no lines, and given back.
		clear(prepared)
		if cap(prepared) <= maxPooledEntries {
			*buf = prepared[:0]
			preparedBuffers.Put(buf)
		}
	}()
	merge := labelMerger{static: labels}
	for i, e := range batch {
		prepared[i] = s.prepare(e, &merge)
	}
	if s.cfg.Print != nil {
		return s.print(prepared)
	}
	accepted, rejected, err := s.push(ctx, prepared, s.probing())
	if err != nil {
		return err
	}
	// The rule: Loki refusing every entry of a push is a configuration
	// error, not bad entries, when the push held more than one entry, or
	// when nothing was accepted since the sink started or last found it so
	// — unless every refusal names a problem of the entry itself (too old,
	// too long: Loki's limits, which a retry never changes). Then nothing is
	// dropped: the push fails (transiently) and the entries stay
	// uncommitted. Entries refused for themselves are dropped, counted, and
	// their checkpoints may advance.
	if accepted == 0 && len(rejected) > 0 && (len(prepared) > 1 || !s.accepting.Load()) &&
		slices.ContainsFunc(rejected, func(r rejection) bool { return !entrySpecific(r.body) }) {
		r := rejected[slices.IndexFunc(rejected, func(r rejection) bool { return !entrySpecific(r.body) })]
		rerr := &RejectingError{URL: s.url, Status: r.status, Body: r.body}
		s.accepting.Store(false)
		s.rejectingNow(r.status, r.body)
		return ports.Transient("push", rerr)
	}
	if accepted > 0 {
		s.accepting.Store(true)
		if s.Stats.setRejecting("") {
			s.log.Info("loki accepts entries again")
		}
	}
	for _, r := range rejected {
		s.Stats.drop(r.reason, 1)
		s.dropLog.Log(s.log, slog.LevelWarn, time.Now(), r.reason, "loki rejected an entry; dropped", "reason", r.reason, "status", r.status,
			"body", r.body, "bytes", len(r.entry.Line))
	}
	return nil
}

// rejectingNow records that Loki refuses every entry and logs it at ERROR
// when that starts, at most once a minute.
func (s *Sink) rejectingNow(status int, body string) {
	if !s.Stats.setRejecting(fmt.Sprintf("answered %d %q", status, body)) {
		return
	}
	if ok, _, _ := s.rejectLog.Allow("rejecting", time.Now()); ok {
		s.log.Error("loki rejects every entry; holding the data uncommitted until it accepts them", "status", status, "body", body, "url", s.url)
	}
}

// preparedBuffers holds the prepared entries' slices between pushes (up to
// maxPooledEntries entries each).
var preparedBuffers = sync.Pool{New: func() any { return new([]ports.Entry) }}

const maxPooledEntries = 4096 // 425 KB of slots at most per pooled slice

// rejection is an entry Loki refused on its own.
type rejection struct {
	entry  ports.Entry
	status int
	body   string
	reason string
}

// prepare merges the static labels and caps the line.
func (s *Sink) prepare(e ports.Entry, merge *labelMerger) ports.Entry {
	if len(merge.static) > 0 {
		e.Labels = merge.merged(e.Labels)
	}
	if len(s.cfg.StructuredMetadataFields) > 0 {
		e.Metadata = promote(e.Line, e.Metadata, s.cfg.StructuredMetadataFields)
	}
	if s.cfg.MaxLineBytes > 0 && len(e.Line) > s.cfg.MaxLineBytes {
		e.Line = truncate(e.Line, s.cfg.MaxLineBytes)
		s.Stats.LinesTruncated.Add(1)
	}
	return e
}

// labelMerger merges the static labels over the entries' labels of one
// push. Entries with equal labels share one merged map, which nothing
// writes to once made (the push only reads the prepared entries): the
// entries of a batch mostly carry one or two label sets, each in a map of
// its own.
type labelMerger struct {
	static map[string]string
	// seen are the label sets met so far (at most mergedSets) and their
	// merged maps.
	seen []mergedLabels
}

type mergedLabels struct{ from, merged map[string]string }

// mergedSets bounds the label sets a labelMerger compares an entry's with.
const mergedSets = 8

// merged returns labels with the static labels merged over them.
func (m *labelMerger) merged(labels map[string]string) map[string]string {
	// The same map first (a source's entries share theirs), without
	// comparing pairs; then an equal one.
	for _, s := range m.seen {
		if sameMap(s.from, labels) {
			return s.merged
		}
	}
	for _, s := range m.seen {
		if maps.Equal(s.from, labels) {
			return s.merged
		}
	}
	out := make(map[string]string, len(labels)+len(m.static))
	maps.Copy(out, labels)
	maps.Copy(out, m.static)
	if len(m.seen) < mergedSets {
		m.seen = append(m.seen, mergedLabels{from: labels, merged: out})
	}
	return out
}

// promote copies the named top-level fields of a JSON object line into
// the metadata (scalars only; the entry's own metadata wins).
func promote(line string, meta map[string]string, fields []string) map[string]string {
	if len(line) == 0 || line[0] != '{' {
		return meta
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(line), &obj) != nil {
		return meta
	}
	out := make(map[string]string, len(meta)+len(fields))
	for _, f := range fields {
		raw, ok := obj[f]
		if !ok {
			continue
		}
		var str string
		if json.Unmarshal(raw, &str) == nil {
			out[f] = str
		} else if len(raw) > 0 && raw[0] != '{' && raw[0] != '[' && string(raw) != "null" {
			out[f] = string(raw)
		}
	}
	for k, v := range meta {
		out[k] = v
	}
	return out
}

// truncate cuts line to at most limit bytes on a UTF-8 boundary and marks
// it with the original size.
func truncate(line string, limit int) string {
	marker := fmt.Sprintf(" …[truncated, %d bytes]", len(line))
	cut := max(0, limit-len(marker))
	for cut > 0 && !utf8.RuneStart(line[cut]) {
		cut--
	}
	return line[:cut] + marker
}

// fullSplitEvery is how often, while Loki refuses everything, a refused
// batch is still split down to single entries (instead of probed).
const fullSplitEvery = 10 * time.Minute

// probing reports whether a refused batch is probed rather than split: while
// Loki is known to refuse every entry, except once every fullSplitEvery.
func (s *Sink) probing() bool {
	if s.Stats.Rejecting() == "" {
		return false
	}
	now := time.Now().UnixNano()
	if last := s.lastFullSplit.Load(); now-last > int64(fullSplitEvery) {
		s.lastFullSplit.Store(now)
		return false
	}
	return true
}

// push sends batch; on 400/413 it splits the batch in halves down to the
// lone entries Loki refuses, and returns how many were accepted and which
// were refused. probe (while Loki refuses everything) first tries the
// batch's first and last entries alone: both refused, the rest is not
// split (a wrong URL would otherwise cost two requests per entry, at every
// retry); either accepted, the rest is split as usual.
func (s *Sink) push(ctx context.Context, batch []ports.Entry, probe bool) (int, []rejection, error) {
	status, body, err := s.send(ctx, batch)
	if err != nil {
		return 0, nil, err
	}
	if status != http.StatusBadRequest && status != http.StatusRequestEntityTooLarge {
		return len(batch), nil, nil
	}
	if len(batch) == 1 {
		reason := "bad_request"
		if status == http.StatusRequestEntityTooLarge {
			reason = "oversized_413"
		}
		return 0, []rejection{{entry: batch[0], status: status, body: body, reason: reason}}, nil
	}
	if probe {
		acc, rej, err := s.push(ctx, batch[:1], false)
		if err != nil {
			return 0, nil, err
		}
		if acc == 1 || entrySpecific(rej[0].body) { // not a refusal of everything: the rest as usual
			accRest, rejRest, err := s.push(ctx, batch[1:], false)
			return acc + accRest, append(rej, rejRest...), err
		}
		accLast, rejLast, err := s.push(ctx, batch[len(batch)-1:], false)
		if err != nil {
			return 0, nil, err
		}
		if accLast == 0 && !entrySpecific(rejLast[0].body) {
			return 0, append(rej, rejLast...), nil // both refused: the batch is held whole
		}
		accMid, rejMid, err := 0, []rejection(nil), error(nil)
		if len(batch) > 2 {
			accMid, rejMid, err = s.push(ctx, batch[1:len(batch)-1], false)
		}
		return accLast + accMid, append(append(rej, rejLast...), rejMid...), err
	}
	half := len(batch) / 2
	acc, rej, err := s.push(ctx, batch[:half], false)
	if err != nil {
		return 0, nil, err
	}
	acc2, rej2, err := s.push(ctx, batch[half:], false)
	return acc + acc2, append(rej, rej2...), err
}

// send posts one body with retries on transport errors, 401/403, 404,
// 429 and 5xx. It returns the final status (and the start of the answer)
// of a 2xx/400/413 answer, or a transient error when the attempts ran out.
func (s *Sink) send(ctx context.Context, batch []ports.Entry) (int, string, error) {
	streams := group(batch)
	var body []byte
	var err error
	if s.cfg.Encoding == "json" {
		body, err = encodeJSON(streams, !s.cfg.Uncompressed)
		if err != nil {
			return 0, "", fmt.Errorf("loki: encode: %w", err)
		}
	} else {
		body = encodeProtobuf(streams)
	}
	var last, refused error
	for attempt := 1; attempt <= s.cfg.Attempts; attempt++ {
		status, retryAfter, answer, err := s.post(ctx, body)
		refused = nil
		switch {
		case err == nil && status/100 == 2:
			s.authFails.Store(0)
			s.Stats.EntriesPushed.Add(int64(len(batch)))
			s.Stats.BytesPushed.Add(int64(len(body)))
			s.Stats.LastSuccess.Store(time.Now().UnixNano())
			s.Stats.FailingSince.Store(0)
			return status, "", nil
		case err == nil && (status == http.StatusBadRequest || status == http.StatusRequestEntityTooLarge):
			return status, answer, nil
		case errors.Is(err, ports.ErrGateClosed):
			return 0, "", err // the leader may no longer write: no retry
		case ctx.Err() != nil:
			return 0, "", ports.Transient("push", ctx.Err())
		case err != nil:
			last = err
			s.Stats.FailingSince.CompareAndSwap(0, time.Now().UnixNano())
		default:
			last = fmt.Errorf("loki answered %d %q", status, answer)
			s.Stats.FailingSince.CompareAndSwap(0, time.Now().UnixNano())
			if status/100 == 4 && status != http.StatusTooManyRequests && status != http.StatusRequestTimeout {
				refused = &RejectingError{URL: s.url, Status: status, Body: answer}
			}
			if refused != nil && attempt == s.cfg.Attempts {
				// A refusal no retry fixes (wrong path, auth): every entry
				// is refused.
				s.accepting.Store(false)
				s.rejectingNow(status, answer)
			}
			if status == http.StatusUnauthorized || status == http.StatusForbidden {
				if n := s.authFails.Add(1); n == 1 || n%10 == 0 {
					s.log.Error("loki refused the credentials; check sink.loki auth", "status", status, "consecutive", n)
				}
			}
		}
		if attempt == s.cfg.Attempts {
			break
		}
		wait := s.cfg.Backoff << (attempt - 1)
		wait = min(wait, 30*time.Second)
		wait = wait/2 + time.Duration(rand.Float64()*float64(wait/2))
		wait = max(wait, min(retryAfter, 60*time.Second))
		select {
		case <-time.After(wait):
		case <-ctx.Done():
			return 0, "", ports.Transient("push", ctx.Err())
		}
	}
	if refused != nil {
		return 0, "", ports.Transient("push", refused)
	}
	return 0, "", ports.Transient("push", fmt.Errorf("loki %s: %d attempts: %w", s.url, s.cfg.Attempts, last))
}

// answerBytes is how much of an error answer is kept for logs and errors.
const answerBytes = 512

// post sends one request and returns the status, a Retry-After hint and,
// for a non-2xx answer, the start of its body.
func (s *Sink) post(ctx context.Context, body []byte) (int, time.Duration, string, error) {
	// The leader's fence (a send gate) is asked just before each attempt;
	// a request under way ends with ctx, which the pipeline ends when the
	// fence closes.
	if err := ports.SendGate(ctx); err != nil {
		return 0, 0, "", err
	}
	rctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, s.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return 0, 0, "", err
	}
	req.Header.Set("User-Agent", buildinfo.UserAgent()) // sink.loki.headers may set another
	for k, v := range s.cfg.Headers {
		req.Header.Set(k, v)
	}
	if s.cfg.Encoding == "json" {
		req.Header.Set("Content-Type", "application/json")
		if !s.cfg.Uncompressed {
			req.Header.Set("Content-Encoding", "gzip")
		}
	} else {
		req.Header.Set("Content-Type", "application/x-protobuf")
		req.Header.Set("Content-Encoding", "snappy")
	}
	setAuth(req.Header, s.cfg)
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, 0, "", s.cfg.TLS.tlsHint(err)
	}
	defer resp.Body.Close()
	var answer string
	if resp.StatusCode/100 != 2 {
		// The secrets go before the cut: half a token is still a leak.
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 16*answerBytes))
		answer = s.secrets.String(strings.ToValidUTF8(strings.TrimSpace(string(b)), "?"))
		if len(answer) > answerBytes {
			cut := answerBytes
			for cut > 0 && !utf8.RuneStart(answer[cut]) {
				cut--
			}
			answer = answer[:cut]
		}
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, ports.ParseRetryAfter(resp.Header.Get("Retry-After")), answer, nil
}

// String names the sink.
func (s *Sink) String() string {
	if s.cfg.Print != nil {
		return "stdout (dry run: JSON lines)"
	}
	return "loki " + s.url + " (" + s.cfg.Encoding + ")"
}
