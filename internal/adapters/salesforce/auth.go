// Package salesforce talks to a Salesforce org: OAuth 2.0 server-to-server
// authentication (JWT bearer and client credentials) with a single-flight
// token cache, authenticated REST calls that re-mint once on a 401, and the
// REST sources built on them: EventLogFile (and its history for backfills),
// SOQL polling of event objects (eventlog_objects), Apex debug logs through
// the Tooling API (apexlog), and the org's limits.
//
// Imports: ports, domain (its errors and shape), sfrules, buildinfo and the
// shared adapter helpers (clock, jsonstr, redact); never config, telemetry or
// anything above them.
package salesforce

import (
	"bytes"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/clock"
	"github.com/sf2loki/sf2loki/internal/adapters/redact"
	"github.com/sf2loki/sf2loki/internal/buildinfo"
	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/sfrules"
)

// Login hosts for the environment shortcut.
const (
	ProductionLoginURL = "https://login.salesforce.com"
	SandboxLoginURL    = "https://test.salesforce.com"
)

// Config is one org's credentials.
type Config struct {
	// AuthMode is sfrules.JWTBearer or sfrules.ClientCredentials.
	AuthMode string
	// LoginURL is the token host: login/test.salesforce.com or the My Domain
	// URL (client credentials requires My Domain).
	LoginURL string
	ClientID string
	// Username is the user a JWT bearer token runs as.
	Username string
	// Audience is the JWT's aud claim. Salesforce accepts only
	// https://login.salesforce.com (production), https://test.salesforce.com
	// (sandboxes) or an Experience Cloud site URL, whatever host the token
	// request goes to (a My Domain login_url included). Empty: derived from
	// LoginURL (see JWTAudience).
	Audience string
	// PrivateKeyPEM signs the JWT (PKCS#1 or PKCS#8 RSA).
	PrivateKeyPEM []byte
	ClientSecret  string
	// OrgID, if set, is used instead of asking /services/oauth2/userinfo.
	OrgID string
	// TokenTTL is how long a minted token is trusted (the org's session
	// timeout); the cache renews 60s before it ends. Default 2h.
	TokenTTL time.Duration
	// HTTPClient defaults to one without an overall timeout: a LogFile
	// download may take as long as the pipeline needs to take its rows.
	HTTPClient *http.Client
	// IdleTimeout fails a request whose server sends nothing for this long:
	// before the response headers, or while the caller waits in a read of
	// the body. Time the caller spends between reads does not count.
	// Default 30s.
	IdleTimeout time.Duration
	// Clock defaults to the real clock.
	Clock ports.Clock
	// MintAttempts bounds token requests per mint on transport errors and
	// 5xx (default 4), with backoff from MintBackoff (default 500ms)
	// doubling.
	MintAttempts int
	MintBackoff  time.Duration
	// RefusedBackoff is the first wait after the token endpoint refused the
	// credentials (a revoked app, a wrong key) before asking again; it
	// doubles to RefusedBackoffMax. Defaults 5s and 5m.
	RefusedBackoff, RefusedBackoffMax time.Duration
	// Logger receives token refreshes (INFO) and refusals (ERROR, once per
	// change). Nil discards them.
	Logger *slog.Logger
	// Refreshed, if set, counts a token minted for reason: "initial",
	// "expiry" (the cached token's time was up) or "invalid_session" (a
	// request answered 401).
	Refreshed func(reason string)
	// MintFailed, if set, counts a mint that failed: "refused" (the token
	// endpoint refused the credentials) or "unavailable" (no answer).
	MintFailed func(reason string)
	// ThrottlePause is how long the org's throttle gate stays closed after
	// an answer of REQUEST_LIMIT_EXCEEDED (the org's API limit): every REST
	// call through this Auth fails with ErrThrottled, without a request,
	// until then. The app sets the shortest poll interval of the org's
	// sources ("until the next poll"). Default 1m.
	ThrottlePause time.Duration
	// Throttled, if set, counts each closing of the gate, by the call that
	// met the limit: "query", "logfile" or "rest".
	Throttled func(call string)
}

// JWTAudience is the aud claim for a token host: test.salesforce.com for a
// sandbox's hosts (test.salesforce.com, <name>--<sandbox>.sandbox.my.salesforce.com),
// else login.salesforce.com. Salesforce's own CLI maps My Domain URLs the
// same way; an Experience Cloud site needs an explicit audience.
func JWTAudience(loginURL string) string {
	u, err := url.Parse(loginURL)
	if err != nil {
		return ProductionLoginURL
	}
	h := strings.ToLower(u.Hostname())
	if h == "test.salesforce.com" || strings.HasSuffix(h, ".sandbox.my.salesforce.com") {
		return SandboxLoginURL
	}
	return ProductionLoginURL
}

// Token is a minted access token.
type Token struct {
	AccessToken string
	InstanceURL string
	// IdentityURL is https://login.salesforce.com/id/<org>/<user>.
	IdentityURL string
	Expires     time.Time
}

// AuthError is the token endpoint's refusal: a configuration problem, not
// retried.
type AuthError struct {
	Status      int
	Code        string
	Description string
	LoginURL    string
}

func (e *AuthError) Error() string {
	hint := ""
	switch e.Code {
	case "invalid_grant":
		hint = "; check the username, that the user is pre-authorised for the connected app, the certificate, and login_url"
		if strings.Contains(strings.ToLower(e.Description), "audience") {
			hint = "; the JWT audience must be https://login.salesforce.com (production) or https://test.salesforce.com (sandbox), " +
				"whatever login_url is: set salesforce.environment to match the org, or salesforce.jwt_audience for an Experience Cloud site"
		}
	case "invalid_client_id", "invalid_client":
		hint = "; check client_id (the consumer key) and client_secret"
	}
	return fmt.Sprintf("salesforce: %s refused the token request (%d %s: %s)%s", e.LoginURL, e.Status, e.Code, e.Description, hint)
}

// Auth mints and caches tokens for one org. It is safe for concurrent use:
// concurrent callers share one mint.
type Auth struct {
	cfg   Config
	key   *rsa.PrivateKey
	clock ports.Clock
	// secrets are the configured ones (client secret, private key lines);
	// tokens the access tokens in use. Both are removed from any answer an
	// error quotes.
	secrets *redact.Redactor
	tokens  *redact.Redactor

	log *slog.Logger

	mu       sync.Mutex
	cur      *Token
	inflight *mint
	orgID    string
	minted   bool // a token was minted before (the next is a refresh)
	// refused is the token endpoint's last refusal, until a mint succeeds;
	// no mint is tried again before refusedUntil.
	refused      *AuthError
	refusedUntil time.Time
	refusedWait  time.Duration
	// session401 is set by Do before it mints again after a 401.
	session401 bool
	// gateUntil: the throttle gate is closed until then.
	gateUntil time.Time
}

type mint struct {
	done chan struct{}
	tok  *Token
	err  error
}

// New validates cfg and parses the key. It makes no request.
func New(cfg Config) (*Auth, error) {
	if cfg.ClientID == "" {
		return nil, errors.New("salesforce: client_id is required")
	}
	u, err := url.Parse(cfg.LoginURL)
	if err != nil || u.Scheme == "" || u.Host == "" {
		return nil, fmt.Errorf("salesforce: login_url %q is not a URL like https://login.salesforce.com", cfg.LoginURL)
	}
	cfg.LoginURL = strings.TrimRight(cfg.LoginURL, "/")
	a := &Auth{cfg: cfg, clock: cfg.Clock, orgID: cfg.OrgID, secrets: redact.New(Secrets(cfg.ClientSecret, string(cfg.PrivateKeyPEM))...),
		tokens: redact.New()}
	switch cfg.AuthMode {
	case sfrules.JWTBearer:
		if cfg.Username == "" {
			return nil, errors.New("salesforce: username is required for jwt_bearer")
		}
		if a.key, err = parsePrivateKey(cfg.PrivateKeyPEM); err != nil {
			return nil, fmt.Errorf("salesforce: private_key %w", err)
		}
	case sfrules.ClientCredentials:
		if cfg.ClientSecret == "" {
			return nil, errors.New("salesforce: client_secret is required for client_credentials")
		}
		if err := RequireMyDomain(cfg.LoginURL); err != nil {
			return nil, err
		}
	default:
		return nil, fmt.Errorf("salesforce: auth_mode %q is not one of %s, %s", cfg.AuthMode, sfrules.JWTBearer, sfrules.ClientCredentials)
	}
	if a.cfg.TokenTTL <= 0 {
		a.cfg.TokenTTL = 2 * time.Hour
	}
	if a.cfg.HTTPClient == nil {
		a.cfg.HTTPClient = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
	}
	if a.cfg.IdleTimeout <= 0 {
		a.cfg.IdleTimeout = 30 * time.Second
	}
	if a.clock == nil {
		a.clock = clock.New()
	}
	if a.cfg.MintBackoff <= 0 {
		a.cfg.MintBackoff = 500 * time.Millisecond
	}
	if a.cfg.MintAttempts <= 0 {
		a.cfg.MintAttempts = 4
	}
	if a.cfg.RefusedBackoff <= 0 {
		a.cfg.RefusedBackoff = 5 * time.Second
	}
	if a.cfg.RefusedBackoffMax < a.cfg.RefusedBackoff {
		a.cfg.RefusedBackoffMax = max(5*time.Minute, a.cfg.RefusedBackoff)
	}
	if a.cfg.Audience == "" {
		a.cfg.Audience = JWTAudience(a.cfg.LoginURL)
	}
	if a.cfg.ThrottlePause <= 0 {
		a.cfg.ThrottlePause = time.Minute
	}
	a.log = cfg.Logger
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	return a, nil
}

// Failing returns why the token endpoint refuses the credentials (its last
// refusal), or "" while tokens are minted.
func (a *Auth) Failing() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.refused == nil {
		return ""
	}
	return a.refused.Error()
}

// RequireMyDomain refuses the generic login hosts, which the client
// credentials flow does not support.
func RequireMyDomain(loginURL string) error {
	u, err := url.Parse(loginURL)
	if err != nil {
		return fmt.Errorf("salesforce: login_url %q: %w", loginURL, err)
	}
	if sfrules.GenericLoginHost(u.Hostname()) {
		return fmt.Errorf("salesforce: client_credentials needs the org's My Domain URL as login_url "+
			"(https://<name>.my.salesforce.com), not %s: Salesforce does not support this flow on the generic login hosts", u.Hostname())
	}
	return nil
}

// Secrets returns what must never be logged of a client secret and a PEM
// private key: the secret, the key's text and each line of its body (a
// quoted fragment is as bad as the whole).
func Secrets(clientSecret, privateKeyPEM string) []string {
	out := []string{strings.TrimSpace(clientSecret)}
	if k := strings.TrimSpace(privateKeyPEM); k != "" {
		out = append(out, k, privateKeyPEM)
		for line := range strings.Lines(k) {
			if line = strings.TrimSpace(line); !strings.HasPrefix(line, "-----") && len(line) >= 16 {
				out = append(out, line)
			}
		}
	}
	return out
}

// Redact removes from s the secrets this token source holds: the client
// secret, the private key, and the access tokens in use.
func (a *Auth) Redact(s string) string { return a.tokens.String(a.secrets.String(s)) }

// snippet is the start of a body for an error message, with the secrets
// removed first (a cut must not leave half a secret).
func (a *Auth) snippet(b []byte, extra ...string) string {
	s := a.Redact(string(b))
	if len(extra) > 0 {
		s = redact.New(extra...).String(s)
	}
	return snippet([]byte(s))
}

// parsePrivateKey is sfrules.ParsePrivateKey, its *sfrules.KeyError also
// unwrapping to domain.ErrInvalidConfig.
func parsePrivateKey(pemBytes []byte) (*rsa.PrivateKey, error) {
	k, err := sfrules.ParsePrivateKey(pemBytes)
	if ke, ok := errors.AsType[*sfrules.KeyError](err); ok {
		return nil, invalidKey{ke}
	}
	return k, err
}

// invalidKey is a *sfrules.KeyError that is also domain.ErrInvalidConfig.
type invalidKey struct{ *sfrules.KeyError }

// Unwrap returns the *sfrules.KeyError and domain.ErrInvalidConfig.
func (e invalidKey) Unwrap() []error { return []error{e.KeyError, domain.ErrInvalidConfig} }

// LoadSecret returns value, or the trimmed contents of file when value is
// empty. A blank secret is missing, whichever way it came (what names the
// setting in the error). A private_key is also parsed: a file that holds
// something else (a certificate, an EC or an encrypted key) is a
// *sfrules.KeyError naming the file (also domain.ErrInvalidConfig).
func LoadSecret(what, value, file string) (string, error) {
	from := what
	if strings.TrimSpace(value) == "" && file != "" { // a blank value is not set
		b, err := os.ReadFile(file)
		if err != nil {
			return "", fmt.Errorf("salesforce: %s_file %s %s (%w)", what, file, sfrules.FileProblem(err), bareErr(err))
		}
		value = string(b)
		if strings.TrimSpace(value) == "" {
			return "", fmt.Errorf("salesforce: %s_file %s is empty: a blank secret is a missing secret", what, file)
		}
		from = what + "_file " + file
	}
	if strings.TrimSpace(value) == "" {
		return "", fmt.Errorf("salesforce: %s is missing: set %s or %s_file", what, what, what)
	}
	if what == "private_key" {
		if _, err := parsePrivateKey([]byte(value)); err != nil {
			return "", fmt.Errorf("salesforce: %s %w", from, err)
		}
		return strings.TrimSpace(value) + "\n", nil
	}
	return strings.TrimSpace(value), nil
}

// bareErr is a *fs.PathError's cause, without the operation and path the
// message already gives.
func bareErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Token returns a valid token, minting one when the cache is empty or
// within 60s of expiry. Concurrent callers share one mint.
func (a *Auth) Token(ctx context.Context) (*Token, error) {
	a.mu.Lock()
	if t := a.cur; t != nil && a.clock.Now().Before(t.Expires) {
		a.mu.Unlock()
		return t, nil
	}
	m := a.inflight
	if m == nil {
		if a.refused != nil && a.clock.Now().Before(a.refusedUntil) {
			err := a.refused
			a.mu.Unlock()
			return nil, err
		}
		m = &mint{done: make(chan struct{})}
		a.inflight = m
		go a.mint(m)
	}
	a.mu.Unlock()
	select {
	case <-m.done:
		return m.tok, m.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// Close releases the idle connections of the token source's HTTP client.
// The Auth stays usable (a later request opens a new connection).
func (a *Auth) Close() error {
	a.cfg.HTTPClient.CloseIdleConnections()
	return nil
}

// Invalidate drops tok from the cache if it is still the cached token: a
// 401 on an old token must not throw away a newer one another caller
// already minted.
func (a *Auth) Invalidate(tok *Token) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.cur != nil && tok != nil && a.cur.AccessToken == tok.AccessToken {
		a.cur = nil
	}
}

func (a *Auth) mint(m *mint) {
	// The mint outlives any one caller: a cancelled caller must not fail
	// the others waiting on it.
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	tok, err := a.mintWithRetry(ctx)
	a.mu.Lock()
	reason := "initial"
	switch {
	case a.session401:
		reason = "invalid_session"
	case a.minted:
		reason = "expiry"
	}
	var refusal *AuthError
	var recovered, newRefusal bool
	switch {
	case err == nil:
		// The previous token may still be in flight in another request.
		prev := ""
		if a.cur != nil {
			prev = a.cur.AccessToken
		}
		a.tokens.Replace(tok.AccessToken, prev)
		a.cur = tok
		a.minted, a.session401 = true, false
		recovered = a.refused != nil
		a.refused, a.refusedWait = nil, 0
	case errors.As(err, &refusal):
		newRefusal = a.refused == nil || a.refused.Code != refusal.Code || a.refused.Description != refusal.Description
		a.refusedWait = min(max(2*a.refusedWait, a.cfg.RefusedBackoff), a.cfg.RefusedBackoffMax)
		a.refused, a.refusedUntil = refusal, a.clock.Now().Add(a.refusedWait)
	}
	wait := a.refusedWait
	a.inflight = nil
	a.mu.Unlock()
	switch {
	case err == nil:
		if recovered {
			a.log.Info("salesforce accepts the credentials again", "login_url", a.cfg.LoginURL)
		}
		if reason != "initial" {
			a.log.Info("salesforce token refreshed", "reason", reason, "login_url", a.cfg.LoginURL)
		}
		if a.cfg.Refreshed != nil {
			a.cfg.Refreshed(reason)
		}
	case refusal != nil:
		if newRefusal {
			a.log.Error("salesforce refuses the credentials; no Salesforce source can run until they are fixed", "error", err.Error(), "retry_in", wait)
		}
		if a.cfg.MintFailed != nil {
			a.cfg.MintFailed("refused")
		}
	default:
		if a.cfg.MintFailed != nil {
			a.cfg.MintFailed("unavailable")
		}
	}
	m.tok, m.err = tok, err
	close(m.done)
}

func (a *Auth) mintWithRetry(ctx context.Context) (*Token, error) {
	backoff := a.cfg.MintBackoff
	var lastErr error
	for attempt := 1; attempt <= a.cfg.MintAttempts; attempt++ {
		if attempt > 1 {
			select {
			case <-a.clock.After(backoff):
			case <-ctx.Done():
				return nil, ctx.Err()
			}
			backoff *= 2
		}
		tok, err := a.mintOnce(ctx)
		if err == nil || !ports.IsTransient(err) {
			return tok, err
		}
		lastErr = err
	}
	return nil, fmt.Errorf("salesforce: no token after %d attempts: %w", a.cfg.MintAttempts, lastErr)
}

func (a *Auth) form() (url.Values, error) {
	if a.cfg.AuthMode == sfrules.ClientCredentials {
		return url.Values{"grant_type": {"client_credentials"}, "client_id": {a.cfg.ClientID}, "client_secret": {a.cfg.ClientSecret}}, nil
	}
	assertion, err := a.assertion()
	if err != nil {
		return nil, err
	}
	return url.Values{"grant_type": {"urn:ietf:params:oauth:grant-type:jwt-bearer"}, "assertion": {assertion}}, nil
}

// assertion is the RS256-signed JWT: iss = client id, sub = username,
// aud = Config.Audience, exp = now + 3 minutes (epoch seconds).
func (a *Auth) assertion() (string, error) {
	enc := base64.RawURLEncoding
	header := enc.EncodeToString([]byte(`{"alg":"RS256"}`))
	claims, err := json.Marshal(map[string]any{
		"iss": a.cfg.ClientID, "sub": a.cfg.Username, "aud": a.cfg.Audience,
		"exp": a.clock.Now().Add(3 * time.Minute).Unix(),
	})
	if err != nil {
		return "", err
	}
	signing := header + "." + enc.EncodeToString(claims)
	sum := sha256.Sum256([]byte(signing))
	sig, err := rsa.SignPKCS1v15(rand.Reader, a.key, crypto.SHA256, sum[:])
	if err != nil {
		return "", fmt.Errorf("salesforce: sign the JWT: %w", err)
	}
	return signing + "." + enc.EncodeToString(sig), nil
}

func (a *Auth) mintOnce(ctx context.Context) (*Token, error) {
	form, err := a.form()
	if err != nil {
		return nil, err
	}
	minted := a.clock.Now()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, a.cfg.LoginURL+"/services/oauth2/token", strings.NewReader(form.Encode()))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	resp, err := a.send(ctx, req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		return nil, ports.Transient("token", fmt.Errorf("salesforce: token request to %s: %w", a.cfg.LoginURL, err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, ports.Transient("token", fmt.Errorf("salesforce: reading the token response: %w", err))
	}
	// An endpoint or proxy may echo the request: the assertion (and its
	// signature alone) is as secret as the client secret.
	sent := []string{form.Get("assertion")}
	if i := strings.LastIndexByte(sent[0], '.'); i >= 0 {
		sent = append(sent, sent[0][i+1:])
	}
	if resp.StatusCode >= 500 || resp.StatusCode == http.StatusTooManyRequests {
		return nil, ports.TransientAfter("token", ports.ParseRetryAfter(resp.Header.Get("Retry-After")),
			fmt.Errorf("salesforce: token endpoint %s answered %d: %s", a.cfg.LoginURL, resp.StatusCode, a.snippet(body, sent...)))
	}
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error       string `json:"error"`
			Description string `json:"error_description"`
		}
		if json.Unmarshal(body, &e) != nil || e.Error == "" {
			e.Error, e.Description = http.StatusText(resp.StatusCode), a.snippet(body, sent...)
		}
		return nil, &AuthError{Status: resp.StatusCode, Code: a.snippet([]byte(e.Error), sent...),
			Description: a.snippet([]byte(e.Description), sent...), LoginURL: a.cfg.LoginURL}
	}
	var ok struct {
		AccessToken string `json:"access_token"`
		InstanceURL string `json:"instance_url"`
		ID          string `json:"id"`
	}
	if err := json.Unmarshal(body, &ok); err != nil || ok.AccessToken == "" || ok.InstanceURL == "" {
		return nil, fmt.Errorf("salesforce: the token endpoint %s answered 200 without access_token and instance_url: %s", a.cfg.LoginURL, a.snippet(body, sent...))
	}
	return &Token{AccessToken: ok.AccessToken, InstanceURL: strings.TrimRight(ok.InstanceURL, "/"), IdentityURL: ok.ID,
		Expires: minted.Add(a.cfg.TokenTTL - time.Minute)}, nil
}

// snippet is the start of a body, for error messages.
func snippet(b []byte) string {
	s := strings.TrimSpace(string(b))
	if len(s) > 300 {
		s = s[:300] + "…"
	}
	return s
}

// Do sends the request build makes for a token, with the token as bearer.
// On a 401 it invalidates that token only, mints a new one and sends once
// more. While the org's throttle gate is closed it fails with ErrThrottled
// without a request; an answer of REQUEST_LIMIT_EXCEEDED closes the gate
// (for ThrottlePause) and fails with ErrThrottled, whatever the call. The
// caller closes the response body.
func (a *Auth) Do(ctx context.Context, build func(tok *Token) (*http.Request, error)) (*http.Response, error) {
	for attempt := 1; ; attempt++ {
		if err := a.gateClosed(); err != nil {
			return nil, err
		}
		tok, err := a.Token(ctx)
		if err != nil {
			return nil, err
		}
		req, err := build(tok)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Authorization", "Bearer "+tok.AccessToken)
		resp, err := a.send(ctx, req)
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, ports.Transient("request", fmt.Errorf("salesforce: %s %s: %w", req.Method, req.URL.Path, err))
		}
		if resp.StatusCode == http.StatusForbidden {
			return a.checkLimit(req, resp)
		}
		if resp.StatusCode != http.StatusUnauthorized || attempt > 1 {
			return resp, nil
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		_ = resp.Body.Close()
		a.log.Info("salesforce answered 401 (the session expired or was revoked); minting a new token and sending again",
			"call", req.Method+" "+req.URL.Path)
		a.mu.Lock()
		a.session401 = true
		a.mu.Unlock()
		a.Invalidate(tok)
	}
}

// gateClosed returns ErrThrottled while the org's throttle gate is closed.
func (a *Auth) gateClosed() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	if until := a.gateUntil; a.clock.Now().Before(until) {
		return fmt.Errorf("%w; REST calls pause until %s", ErrThrottled, until.UTC().Format(time.RFC3339))
	}
	return nil
}

// checkLimit reads a 403 answer: REQUEST_LIMIT_EXCEEDED closes the throttle
// gate and becomes ErrThrottled; any other 403 is handed back, its body
// intact.
func (a *Auth) checkLimit(req *http.Request, resp *http.Response) (*http.Response, error) {
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	_ = resp.Body.Close()
	if err != nil {
		return nil, ports.Transient("request", fmt.Errorf("salesforce: reading a 403 answer to %s %s: %w", req.Method, req.URL.Path, err))
	}
	if !bytes.Contains(body, []byte("REQUEST_LIMIT_EXCEEDED")) {
		resp.Body = io.NopCloser(bytes.NewReader(body))
		return resp, nil
	}
	call := "rest"
	switch {
	case strings.Contains(req.URL.Path, "/LogFile"):
		call = "logfile"
	case strings.HasSuffix(req.URL.Path, "/query") || strings.Contains(req.URL.Path, "/query/"):
		call = "query"
	}
	a.mu.Lock()
	opened := !a.clock.Now().Before(a.gateUntil)
	a.gateUntil = a.clock.Now().Add(a.cfg.ThrottlePause)
	until := a.gateUntil
	a.mu.Unlock()
	if opened {
		a.log.Warn("salesforce API limit reached (REQUEST_LIMIT_EXCEEDED); every REST call of this org pauses (Pub/Sub streams go on)",
			"call", req.Method+" "+req.URL.Path, "until", until.UTC().Format(time.RFC3339), "answer", a.snippet(body))
		if a.cfg.Throttled != nil {
			a.cfg.Throttled(call)
		}
	}
	return nil, fmt.Errorf("%w; REST calls pause until %s", ErrThrottled, until.UTC().Format(time.RFC3339))
}

// ErrStalled is a request whose server sent nothing for the idle timeout.
var ErrStalled = errors.New("salesforce: the server sent nothing within the idle timeout; the request is abandoned and retried")

// send runs req under ctx with the idle watchdog (Config.IdleTimeout); the
// watchdog stays on the response body until it is closed.
func (a *Auth) send(ctx context.Context, req *http.Request) (*http.Response, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	b := &idleBody{ctx: ctx, cancel: cancel, idle: a.cfg.IdleTimeout}
	b.timer = time.AfterFunc(b.idle, b.fire)
	req.Header.Set("User-Agent", buildinfo.UserAgent())
	resp, err := a.cfg.HTTPClient.Do(req.WithContext(ctx))
	b.timer.Stop()
	if err != nil {
		err = b.explain(err)
		cancel(nil)
		return nil, err
	}
	b.rc = resp.Body
	resp.Body = b
	return resp, nil
}

// idleBody cancels its request when a Read waits longer than idle.
type idleBody struct {
	rc     io.ReadCloser
	ctx    context.Context
	cancel context.CancelCauseFunc
	timer  *time.Timer
	idle   time.Duration
}

func (b *idleBody) fire() {
	b.cancel(fmt.Errorf("%w (%s)", ErrStalled, b.idle))
}

// explain names the watchdog as the cause of an error it provoked.
func (b *idleBody) explain(err error) error {
	if cause := context.Cause(b.ctx); errors.Is(cause, ErrStalled) {
		return cause
	}
	return err
}

func (b *idleBody) Read(p []byte) (int, error) {
	b.timer.Reset(b.idle)
	n, err := b.rc.Read(p)
	b.timer.Stop()
	if err != nil && !errors.Is(err, io.EOF) {
		err = b.explain(err)
	}
	return n, err
}

func (b *idleBody) Close() error {
	b.timer.Stop()
	b.cancel(nil)
	return b.rc.Close()
}

// GetJSON GETs path (below the instance URL) with auth and decodes the
// JSON answer into v; any status but 200 is an error quoting the body.
func GetJSON(ctx context.Context, auth *Auth, path string, v any) error {
	resp, err := auth.Do(ctx, func(tok *Token) (*http.Request, error) {
		return http.NewRequest(http.MethodGet, tok.InstanceURL+path, nil)
	})
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return ports.Transient("get", fmt.Errorf("salesforce: reading %s: %w", path, err))
	}
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("salesforce: %s answered %d: %s", path, resp.StatusCode, auth.snippet(body))
	}
	if err := json.Unmarshal(body, v); err != nil {
		return fmt.Errorf("salesforce: %s answered 200 with a body that is not the expected JSON (%w): %s", path, err, auth.snippet(body))
	}
	return nil
}

// OrgID returns the configured org id, or asks /services/oauth2/userinfo
// once and caches the answer.
func (a *Auth) OrgID(ctx context.Context) (string, error) {
	a.mu.Lock()
	id := a.orgID
	a.mu.Unlock()
	if id != "" {
		return id, nil
	}
	var info struct {
		OrganizationID string `json:"organization_id"`
	}
	if err := GetJSON(ctx, a, "/services/oauth2/userinfo", &info); err != nil {
		return "", fmt.Errorf("salesforce: asking userinfo for the org id (or set salesforce.org_id): %w", err)
	}
	if info.OrganizationID == "" {
		return "", errors.New("salesforce: userinfo answered without organization_id (the token needs the openid scope); set salesforce.org_id")
	}
	a.mu.Lock()
	a.orgID = info.OrganizationID
	a.mu.Unlock()
	return info.OrganizationID, nil
}
