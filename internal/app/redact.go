package app

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/sf2loki/sf2loki/internal/adapters/loki"
	"github.com/sf2loki/sf2loki/internal/adapters/redact"
	"github.com/sf2loki/sf2loki/internal/adapters/salesforce"
	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/telemetry"
)

// RedactSecrets collects every secret the configuration holds or points
// at: every org's Salesforce client secret and private key (from the value
// or its *_file), the Loki token (auth_token or auth_token_file) with the
// basic-auth header made from it, any password in sink.loki.url or
// telemetry.otlp_endpoint or service.telemetry.endpoint, the values of
// sink.loki.headers and of the telemetry headers, the basic-auth header
// of the metrics push, the private key
// of a GCS service_file, and the AWS secret key and session token of the
// environment. A file that cannot be read is skipped: the component that
// needs it reports that.
//
// Every key tagged secret is covered as well, with the content of its
// *_file (config.Secrets), so that a new secret key needs no change here.
func RedactSecrets(cfg *config.Config) []string {
	var out []string
	read := func(value, file string) string {
		if value != "" || file == "" {
			return value
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return ""
		}
		return strings.TrimSpace(string(b))
	}
	for _, s := range cfg.Secrets() {
		out = append(out, read(s.Value, s.File))
	}
	orgs := []config.Salesforce{cfg.Salesforce}
	for _, o := range cfg.Orgs {
		orgs = append(orgs, o.Salesforce)
	}
	for _, sf := range orgs {
		out = append(out, salesforce.Secrets(read(sf.ClientSecret, sf.ClientSecretFile), read(sf.PrivateKey, sf.PrivateKeyFile))...)
	}
	l := cfg.Sink.Loki
	_, lokiSecrets := loki.Secrets(loki.Config{URL: l.URL, TenantID: l.TenantID, BasicAuthUser: l.BasicAuthUser,
		AuthToken: read(l.AuthToken, l.AuthTokenFile), Headers: l.Headers})
	out = append(out, lokiSecrets...)
	_, otlp := loki.Secrets(loki.Config{URL: cfg.Telemetry.OTLPEndpoint})
	out = append(out, otlp...)
	for _, v := range cfg.Telemetry.Headers {
		out = append(out, v, strings.TrimPrefix(strings.TrimPrefix(v, "Bearer "), "Basic "))
	}
	// service.telemetry: a password in its endpoint, and its Authorization:
	// Basic header (the token itself is a secret key, or sink.loki's).
	_, push := loki.Secrets(loki.Config{URL: cfg.Service.Telemetry.Endpoint, Headers: cfg.Service.Telemetry.Headers})
	out = append(out, push...)
	if a := cfg.TelemetryBasicAuth(); cfg.Service.Telemetry.Auth == "basic" && a.User != "" {
		if token := strings.TrimSpace(read(a.Token, a.TokenFile)); token != "" {
			out = append(out, telemetry.BasicCredentials(a.User, token))
		}
	}
	for _, f := range []string{cfg.State.GCS.ServiceFile, cfg.Coordinate.GCSLease.ServiceFile} {
		out = append(out, serviceFileSecrets(f)...)
	}
	out = append(out, os.Getenv("AWS_SECRET_ACCESS_KEY"), os.Getenv("AWS_SESSION_TOKEN"))
	return out
}

// serviceFileSecrets returns the private key of a service-account key file.
func serviceFileSecrets(path string) []string {
	if path == "" {
		return nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil
	}
	var key struct {
		PrivateKey   string `json:"private_key"`
		PrivateKeyID string `json:"private_key_id"`
	}
	if json.Unmarshal(b, &key) != nil {
		return nil
	}
	return append(salesforce.Secrets("", key.PrivateKey), key.PrivateKeyID)
}

// NewRedactingHandler returns a handler that replaces every occurrence of
// a secret (MinLen characters or more, in any form a server may echo it) in
// the message and in every string, error or formatted value of the
// record's attributes, groups included, with "[REDACTED]", then hands the
// record to h.
func NewRedactingHandler(h slog.Handler, secrets []string) slog.Handler {
	r := redact.New(secrets...)
	if r.Empty() {
		return h
	}
	return &redactingHandler{next: h, r: r}
}

// RedactLogger wraps l's handler with the secrets of cfg.
func RedactLogger(l *slog.Logger, cfg *config.Config) *slog.Logger {
	return slog.New(NewRedactingHandler(l.Handler(), RedactSecrets(cfg)))
}

// RedactErr returns err with the secrets of cfg removed from its message
// (for errors printed outside the logger, such as the one a command
// returns). errors.Is and errors.As still see the original.
func RedactErr(cfg *config.Config, err error) error {
	if err == nil {
		return nil
	}
	r := redact.New(RedactSecrets(cfg)...)
	msg := r.String(err.Error())
	if msg == err.Error() {
		return err
	}
	return &redactedError{msg: msg, err: err}
}

type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

type redactingHandler struct {
	next slog.Handler
	r    *redact.Redactor
}

func (h *redactingHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return h.next.Enabled(ctx, level)
}

func (h *redactingHandler) Handle(ctx context.Context, rec slog.Record) error {
	out := slog.NewRecord(rec.Time, rec.Level, h.r.String(rec.Message), rec.PC)
	rec.Attrs(func(a slog.Attr) bool {
		out.AddAttrs(h.attr(a))
		return true
	})
	return h.next.Handle(ctx, out)
}

func (h *redactingHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	clean := make([]slog.Attr, len(attrs))
	for i, a := range attrs {
		clean[i] = h.attr(a)
	}
	return &redactingHandler{next: h.next.WithAttrs(clean), r: h.r}
}

func (h *redactingHandler) WithGroup(name string) slog.Handler {
	return &redactingHandler{next: h.next.WithGroup(name), r: h.r}
}

// attr redacts one attribute. Values without a secret keep their kind (a
// number stays a number, a list a list); one that holds a secret becomes
// its redacted text.
func (h *redactingHandler) attr(a slog.Attr) slog.Attr {
	v := a.Value.Resolve()
	switch v.Kind() {
	case slog.KindString:
		return slog.String(a.Key, h.r.String(v.String()))
	case slog.KindGroup:
		group := v.Group()
		clean := make([]any, len(group))
		for i, g := range group {
			clean[i] = h.attr(g)
		}
		return slog.Group(a.Key, clean...)
	case slog.KindAny:
		var text string
		var err error
		switch x := v.Any().(type) {
		case error:
			err, text = x, x.Error()
		case fmt.Stringer:
			text = x.String()
		default:
			text = fmt.Sprint(x)
			if b, jerr := json.Marshal(x); jerr == nil {
				text += " " + string(b)
			}
		}
		if clean := h.r.String(text); clean != text {
			if err != nil {
				return slog.Any(a.Key, &redactedError{msg: clean, err: errors.Unwrap(err)})
			}
			return slog.String(a.Key, h.r.String(fmt.Sprint(v.Any())))
		}
		return slog.Attr{Key: a.Key, Value: v}
	}
	return slog.Attr{Key: a.Key, Value: v}
}
