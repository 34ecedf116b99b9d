// Package loki is the ports.Sink that pushes entries to Grafana Loki's push
// API (/loki/api/v1/push): protobuf + snappy by default, JSON (+gzip) for
// debugging, with retries, batch splitting on 400/413, and a line cap.
//
// Imports: internal/ports, net/http, protowire and snappy.
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
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/sf2loki/sf2loki/internal/ports"
)

// AllowedLabels are the only stream labels sf2loki sets: everything else
// (user ids, IPs, request ids) belongs in structured metadata, or Loki's
// stream count explodes.
var AllowedLabels = []string{"job", "service_name", "source", "event_type", "sf_org_id", "environment", "org"}

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
	// TenantID is sent as X-Scope-OrgID (or as the basic-auth user with a
	// token).
	TenantID string
	// AuthToken, with BasicAuthUser or TenantID, is sent as basic auth;
	// alone, as a bearer token.
	AuthToken     string
	BasicAuthUser string
	// Encoding is "protobuf" (snappy, default) or "json" (gzip).
	Encoding string
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
	Backoff    time.Duration
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
	mu             sync.Mutex
	dropped        map[string]int64
}

// Dropped returns entries dropped by reason (bad_request, oversized_413).
func (s *Stats) Dropped() map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[string]int64{}
	for k, v := range s.dropped {
		out[k] = v
	}
	return out
}

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
}

var _ ports.Sink = (*Sink)(nil)

// New validates cfg: the URL, the encoding and the label allowlist.
func New(cfg Config) (*Sink, error) {
	if cfg.URL == "" {
		return nil, errors.New("sink.loki.url is required (e.g. http://loki:3100/loki/api/v1/push)")
	}
	switch cfg.Encoding {
	case "":
		cfg.Encoding = "protobuf"
	case "protobuf", "json":
	default:
		return nil, fmt.Errorf("sink.loki.encoding %q is not protobuf or json", cfg.Encoding)
	}
	for k := range cfg.Labels {
		if !slices.Contains(AllowedLabels, k) {
			return nil, fmt.Errorf("sink.loki.labels.%s: not an allowed label (%v); put high-cardinality fields in structured metadata", k, AllowedLabels)
		}
		if k == "source" || k == "event_type" {
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
	client := cfg.HTTPClient
	if client == nil {
		client = &http.Client{}
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Sink{cfg: cfg, client: client, log: log, Stats: &Stats{dropped: map[string]int64{}}}, nil
}

// Push implements ports.Sink.
func (s *Sink) Push(ctx context.Context, batch []ports.Entry) error {
	if s.cfg.OnPush != nil {
		defer func(start time.Time) { s.cfg.OnPush(time.Since(start)) }(time.Now())
	}
	prepared := make([]ports.Entry, len(batch))
	for i, e := range batch {
		prepared[i] = s.prepare(e)
	}
	return s.push(ctx, prepared)
}

// prepare merges the static labels and caps the line.
func (s *Sink) prepare(e ports.Entry) ports.Entry {
	if len(s.cfg.Labels) > 0 {
		labels := make(map[string]string, len(e.Labels)+len(s.cfg.Labels))
		for k, v := range e.Labels {
			labels[k] = v
		}
		for k, v := range s.cfg.Labels {
			labels[k] = v
		}
		e.Labels = labels
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

// push sends batch; on 400/413 it splits the batch in halves, and a lone
// rejected entry is dropped (counted) so its checkpoint can advance.
func (s *Sink) push(ctx context.Context, batch []ports.Entry) error {
	status, err := s.send(ctx, batch)
	if err != nil || (status != http.StatusBadRequest && status != http.StatusRequestEntityTooLarge) {
		return err
	}
	if len(batch) == 1 {
		reason := "bad_request"
		if status == http.StatusRequestEntityTooLarge {
			reason = "oversized_413"
		}
		s.Stats.drop(reason, 1)
		s.log.Warn("loki rejected an entry; dropped", "reason", reason, "bytes", len(batch[0].Line))
		return nil
	}
	half := len(batch) / 2
	if err := s.push(ctx, batch[:half]); err != nil {
		return err
	}
	return s.push(ctx, batch[half:])
}

// send posts one body with retries on transport errors, 401/403, 429 and
// 5xx. It returns the final status of a 2xx/400/413 answer, or a transient
// error when the attempts ran out.
func (s *Sink) send(ctx context.Context, batch []ports.Entry) (int, error) {
	streams := group(batch)
	var body []byte
	var err error
	if s.cfg.Encoding == "json" {
		body, err = encodeJSON(streams, true)
		if err != nil {
			return 0, fmt.Errorf("loki: encode: %w", err)
		}
	} else {
		body = encodeProtobuf(streams)
	}
	var last error
	for attempt := 1; attempt <= s.cfg.Attempts; attempt++ {
		status, retryAfter, err := s.post(ctx, body)
		switch {
		case err == nil && status/100 == 2:
			s.authFails.Store(0)
			s.Stats.EntriesPushed.Add(int64(len(batch)))
			s.Stats.BytesPushed.Add(int64(len(body)))
			s.Stats.LastSuccess.Store(time.Now().UnixNano())
			return status, nil
		case err == nil && (status == http.StatusBadRequest || status == http.StatusRequestEntityTooLarge):
			return status, nil
		case ctx.Err() != nil:
			return 0, ports.Transient("push", ctx.Err())
		case err != nil:
			last = err
		default:
			last = fmt.Errorf("loki answered %d", status)
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
			return 0, ports.Transient("push", ctx.Err())
		}
	}
	return 0, ports.Transient("push", fmt.Errorf("loki %s: %d attempts: %w", s.cfg.URL, s.cfg.Attempts, last))
}

// post sends one request and returns the status and a Retry-After hint.
func (s *Sink) post(ctx context.Context, body []byte) (int, time.Duration, error) {
	rctx, cancel := context.WithTimeout(ctx, s.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, s.cfg.URL, bytes.NewReader(body))
	if err != nil {
		return 0, 0, err
	}
	if s.cfg.Encoding == "json" {
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Content-Encoding", "gzip")
	} else {
		req.Header.Set("Content-Type", "application/x-protobuf")
		req.Header.Set("Content-Encoding", "snappy")
	}
	user := s.cfg.BasicAuthUser
	if user == "" {
		user = s.cfg.TenantID
	}
	switch {
	case s.cfg.AuthToken != "" && user != "":
		req.Header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(user+":"+s.cfg.AuthToken)))
	case s.cfg.AuthToken != "":
		req.Header.Set("Authorization", "Bearer "+s.cfg.AuthToken)
	case s.cfg.TenantID != "":
		req.Header.Set("X-Scope-OrgID", s.cfg.TenantID)
	}
	resp, err := s.client.Do(req)
	if err != nil {
		return 0, 0, err
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode, ports.ParseRetryAfter(resp.Header.Get("Retry-After")), nil
}

// String names the sink.
func (s *Sink) String() string { return "loki " + s.cfg.URL + " (" + s.cfg.Encoding + ")" }
