// Package redact removes secrets from text before it is logged or quoted in
// an error: every configured secret, in every form a server or proxy may
// echo it back (raw, form- and URL-encoded, JSON-escaped). The adapters that
// quote server answers use it, and so does the app's log handler.
//
// Imports: the standard library only.
package redact

import (
	"cmp"
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
)

// Mask replaces a secret.
const Mask = "[REDACTED]"

// MinLen is the shortest secret redacted: shorter values ("x", "true")
// would blank out ordinary words.
const MinLen = 6

// Forms returns secret in the forms it can take in an echoed request:
// itself, form-encoded, path-escaped and JSON-escaped (with and without
// HTML escaping). Nothing for a secret shorter than MinLen.
func Forms(secret string) []string {
	if len(secret) < MinLen {
		return nil
	}
	out := []string{secret, url.QueryEscape(secret), url.PathEscape(secret)}
	if j, err := json.Marshal(secret); err == nil {
		out = append(out, string(j[1:len(j)-1]))
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(secret) == nil {
		j := strings.TrimSpace(b.String())
		out = append(out, j[1:len(j)-1])
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// Redactor replaces secrets in text. The zero value redacts nothing; it is
// safe for concurrent use, and Add may be called while others redact.
type Redactor struct {
	mu      sync.Mutex
	secrets []string
	r       atomic.Pointer[strings.Replacer]
}

// New returns a Redactor for secrets (each in every form Forms gives;
// blank and short ones are ignored).
func New(secrets ...string) *Redactor {
	r := &Redactor{}
	r.Add(secrets...)
	return r
}

// Add adds secrets to redact.
func (r *Redactor) Add(secrets ...string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := len(r.secrets)
	for _, s := range secrets {
		for _, f := range Forms(s) {
			if !slices.Contains(r.secrets, f) {
				r.secrets = append(r.secrets, f)
			}
		}
	}
	if len(r.secrets) == n {
		return
	}
	r.r.Store(replacer(r.secrets))
}

// Replace sets the secrets to redact, dropping the previous ones (a token
// source that rotates its tokens keeps only the live ones).
func (r *Redactor) Replace(secrets ...string) {
	r.mu.Lock()
	r.secrets = nil
	r.r.Store(nil)
	r.mu.Unlock()
	r.Add(secrets...)
}

// replacer replaces the longest secrets first, so a secret that contains
// another is masked whole.
func replacer(secrets []string) *strings.Replacer {
	sorted := slices.Clone(secrets)
	slices.SortFunc(sorted, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	pairs := make([]string, 0, 2*len(sorted))
	for _, s := range sorted {
		pairs = append(pairs, s, Mask)
	}
	return strings.NewReplacer(pairs...)
}

// String returns s with every secret replaced by Mask.
func (r *Redactor) String(s string) string {
	if r == nil {
		return s
	}
	rep := r.r.Load()
	if rep == nil || s == "" {
		return s
	}
	return rep.Replace(s)
}

// Empty reports whether there is nothing to redact.
func (r *Redactor) Empty() bool { return r == nil || r.r.Load() == nil }
