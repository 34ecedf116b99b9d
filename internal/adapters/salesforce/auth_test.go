package salesforce_test

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/salesforce"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/ports/porttest"
	"github.com/sf2loki/sf2loki/internal/sfrules"
	"github.com/sf2loki/sf2loki/internal/testenv"
)

// fakeOrg is an httptest Salesforce: a token endpoint that verifies JWT
// bearer assertions with the test key (or a client secret), userinfo, and
// an API endpoint that answers 401 to tokens it has been told to revoke.
type fakeOrg struct {
	t   *testing.T
	srv *httptest.Server
	pub *rsa.PublicKey

	mu       sync.Mutex
	mints    int
	revoked  map[string]bool
	failNext []int // statuses the token endpoint answers before succeeding
	refuse   string
	delay    time.Duration
	claims   map[string]any
	form     map[string]string
	// now is the fake's clock for the assertion's exp (default time.Now);
	// site is an Experience Cloud site URL it accepts as an audience.
	now  func() time.Time
	site string
}

func newFakeOrg(t *testing.T, pub *rsa.PublicKey) *fakeOrg {
	f := &fakeOrg{t: t, pub: pub, revoked: map[string]bool{}}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

func (f *fakeOrg) serve(w http.ResponseWriter, r *http.Request) {
	switch r.URL.Path {
	case "/services/oauth2/token":
		f.token(w, r)
	case "/services/oauth2/userinfo":
		if !f.authorised(w, r) {
			return
		}
		_, _ = fmt.Fprint(w, `{"organization_id":"00D000000000001EAA","user_id":"005x"}`)
	case "/services/data/v60.0/limits":
		if !f.authorised(w, r) {
			return
		}
		_, _ = fmt.Fprint(w, `{}`)
	default:
		http.NotFound(w, r)
	}
}

func (f *fakeOrg) authorised(w http.ResponseWriter, r *http.Request) bool {
	tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	f.mu.Lock()
	bad := f.revoked[tok] || !strings.HasPrefix(tok, "token-")
	f.mu.Unlock()
	if bad {
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = fmt.Fprint(w, `[{"message":"Session expired or invalid","errorCode":"INVALID_SESSION_ID"}]`)
		return false
	}
	return true
}

func (f *fakeOrg) token(w http.ResponseWriter, r *http.Request) {
	if err := r.ParseForm(); err != nil {
		http.Error(w, err.Error(), 400)
		return
	}
	f.mu.Lock()
	delay := f.delay
	var fail int
	if len(f.failNext) > 0 {
		fail, f.failNext = f.failNext[0], f.failNext[1:]
	}
	f.form = map[string]string{}
	for k := range r.PostForm {
		f.form[k] = r.PostForm.Get(k)
	}
	refuse := f.refuse
	f.mu.Unlock()
	time.Sleep(delay)
	if fail != 0 {
		w.WriteHeader(fail)
		_, _ = fmt.Fprint(w, "upstream trouble")
		return
	}
	if refuse != "" {
		w.WriteHeader(http.StatusBadRequest)
		_, _ = fmt.Fprintf(w, `{"error":"invalid_grant","error_description":%q}`, refuse)
		return
	}
	switch r.PostForm.Get("grant_type") {
	case "urn:ietf:params:oauth:grant-type:jwt-bearer":
		claims, err := verifyJWT(r.PostForm.Get("assertion"), f.pub)
		if err == nil {
			err = f.checkClaims(claims)
		}
		if err != nil {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = fmt.Fprintf(w, `{"error":"invalid_grant","error_description":%q}`, err.Error())
			return
		}
		f.mu.Lock()
		f.claims = claims
		f.mu.Unlock()
	case "client_credentials":
		if r.PostForm.Get("client_secret") != "s3cret" {
			w.WriteHeader(http.StatusBadRequest)
			_, _ = fmt.Fprint(w, `{"error":"invalid_client","error_description":"invalid client credentials"}`)
			return
		}
	default:
		w.WriteHeader(http.StatusBadRequest)
		_, _ = fmt.Fprint(w, `{"error":"unsupported_grant_type","error_description":"grant type not supported"}`)
		return
	}
	f.mu.Lock()
	f.mints++
	n := f.mints
	f.mu.Unlock()
	_ = json.NewEncoder(w).Encode(map[string]string{
		"access_token": fmt.Sprintf("token-%d", n), "instance_url": f.srv.URL + "/",
		"id": "https://login.salesforce.com/id/00D000000000001EAA/005x", "token_type": "Bearer",
	})
}

// checkClaims applies Salesforce's documented rules for a JWT bearer
// assertion: iss is the consumer key, sub the (pre-authorised) username,
// aud https://login.salesforce.com, https://test.salesforce.com or an
// Experience Cloud site URL — never the My Domain host the request went
// to — and exp in the future, at most a few minutes ahead.
func (f *fakeOrg) checkClaims(c map[string]any) error {
	now := time.Now
	if f.now != nil {
		now = f.now
	}
	aud, _ := c["aud"].(string)
	exp, _ := c["exp"].(float64)
	switch {
	case c["iss"] != "consumer-key":
		return errors.New("invalid_client_id: client identifier invalid")
	case c["sub"] != "integration@example.com":
		return errors.New("user hasn't approved this consumer")
	case aud != "https://login.salesforce.com" && aud != "https://test.salesforce.com" && (f.site == "" || aud != f.site):
		return errors.New("audience is invalid")
	case int64(exp) <= now().Unix() || int64(exp) > now().Add(5*time.Minute).Unix():
		return errors.New("expired authorization code")
	}
	return nil
}

// verifyJWT checks an RS256 assertion's signature and returns its claims.
func verifyJWT(assertion string, pub *rsa.PublicKey) (map[string]any, error) {
	parts := strings.Split(assertion, ".")
	if len(parts) != 3 {
		return nil, errors.New("malformed JWT")
	}
	enc := base64.RawURLEncoding
	header, _ := enc.DecodeString(parts[0])
	if string(header) != `{"alg":"RS256"}` {
		return nil, fmt.Errorf("header %s", header)
	}
	sig, err := enc.DecodeString(parts[2])
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if err := rsa.VerifyPKCS1v15(pub, crypto.SHA256, sum[:], sig); err != nil {
		return nil, fmt.Errorf("bad signature: %w", err)
	}
	body, _ := enc.DecodeString(parts[1])
	var claims map[string]any
	return claims, json.Unmarshal(body, &claims)
}

func (f *fakeOrg) mintCount() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.mints
}

func testKey(t *testing.T) (*rsa.PrivateKey, []byte) { return testenv.RSAKey(t) }

func jwtAuth(t *testing.T, f *fakeOrg, keyPEM []byte, clk ports.Clock) *salesforce.Auth {
	t.Helper()
	a, err := salesforce.New(salesforce.Config{AuthMode: sfrules.JWTBearer, LoginURL: f.srv.URL, ClientID: "consumer-key",
		Username: "integration@example.com", PrivateKeyPEM: keyPEM, TokenTTL: time.Hour, Clock: clk, MintBackoff: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func TestJWTBearerMintsASignedAssertionAndCaches(t *testing.T) {
	k, keyPEM := testKey(t)
	f := newFakeOrg(t, &k.PublicKey)
	clk := porttest.NewFakeClock(time.Now())
	f.now = clk.Now
	a := jwtAuth(t, f, keyPEM, clk)
	tok, err := a.Token(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if tok.AccessToken != "token-1" || tok.InstanceURL != f.srv.URL {
		t.Fatalf("token %+v", tok)
	}
	c := f.claims
	exp, _ := c["exp"].(float64)
	if c["iss"] != "consumer-key" || c["sub"] != "integration@example.com" || c["aud"] != "https://login.salesforce.com" ||
		int64(exp) != clk.Now().Add(3*time.Minute).Unix() {
		t.Fatalf("claims %v", c)
	}
	if _, ok := f.form["client_secret"]; ok {
		t.Fatal("the JWT bearer flow sent a client_secret")
	}
	if again, _ := a.Token(t.Context()); again != tok || f.mintCount() != 1 {
		t.Fatalf("second call minted again (%d mints)", f.mintCount())
	}
	// The cache trusts a token until token_ttl − 60s after it was minted.
	clk.Advance(time.Hour - time.Minute - time.Second)
	if again, _ := a.Token(t.Context()); again != tok {
		t.Fatal("re-minted before token_ttl − 60s")
	}
	clk.Advance(time.Second)
	if again, _ := a.Token(t.Context()); again == tok || again.AccessToken != "token-2" {
		t.Fatalf("not re-minted at token_ttl − 60s: %+v", again)
	}
}

func TestConcurrentCallersShareOneMint(t *testing.T) {
	k, keyPEM := testKey(t)
	f := newFakeOrg(t, &k.PublicKey)
	f.delay = 100 * time.Millisecond
	a := jwtAuth(t, f, keyPEM, nil)
	var wg sync.WaitGroup
	var got atomic.Int32
	for range 20 {
		wg.Go(func() {
			if tok, err := a.Token(t.Context()); err == nil && tok.AccessToken == "token-1" {
				got.Add(1)
			}
		})
	}
	wg.Wait()
	if got.Load() != 20 || f.mintCount() != 1 {
		t.Fatalf("%d callers got token-1 from %d mints, want 20 from 1", got.Load(), f.mintCount())
	}
}

func TestA401InvalidatesOnlyTheFailedTokenAndRetriesOnce(t *testing.T) {
	k, keyPEM := testKey(t)
	f := newFakeOrg(t, &k.PublicKey)
	a := jwtAuth(t, f, keyPEM, nil)
	old, err := a.Token(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	f.revoked["token-1"] = true
	get := func(tok *salesforce.Token) (*http.Request, error) {
		return http.NewRequest(http.MethodGet, tok.InstanceURL+"/services/data/v60.0/limits", nil)
	}
	resp, err := a.Do(t.Context(), get)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("after a 401: %v %v", resp, err)
	}
	_ = resp.Body.Close()
	if f.mintCount() != 2 {
		t.Fatalf("%d mints, want 2 (one re-mint)", f.mintCount())
	}
	// A late 401 on the old token must not throw away the new one.
	a.Invalidate(old)
	if tok, _ := a.Token(t.Context()); tok.AccessToken != "token-2" || f.mintCount() != 2 {
		t.Fatalf("invalidating the old token dropped the new one: %+v, %d mints", tok, f.mintCount())
	}
	// A token the org keeps refusing: one retry, then the 401 is the answer.
	f.revoked["token-2"], f.revoked["token-3"] = true, true
	resp, err = a.Do(t.Context(), get)
	if err != nil || resp.StatusCode != http.StatusUnauthorized || f.mintCount() != 3 {
		t.Fatalf("a persistent 401: %v, %v, %d mints (want 401 after one re-mint)", resp, err, f.mintCount())
	}
	_ = resp.Body.Close()
}

func TestMintRetriesServerErrorsButNotRefusals(t *testing.T) {
	k, keyPEM := testKey(t)
	f := newFakeOrg(t, &k.PublicKey)
	f.failNext = []int{503, 500}
	a := jwtAuth(t, f, keyPEM, nil)
	if tok, err := a.Token(t.Context()); err != nil || tok.AccessToken != "token-1" {
		t.Fatalf("after two 5xx: %v %v", tok, err)
	}
	b := jwtAuth(t, f, keyPEM, nil)
	f.refuse = "user hasn't approved this consumer"
	_, err := b.Token(t.Context())
	var ae *salesforce.AuthError
	if !errors.As(err, &ae) || ae.Code != "invalid_grant" || !strings.Contains(err.Error(), "user hasn't approved this consumer") ||
		!strings.Contains(err.Error(), "pre-authorised") || ports.IsTransient(err) {
		t.Fatalf("a refusal: %v", err)
	}
	if f.mintCount() != 1 {
		t.Fatalf("a refusal was retried: %d mints", f.mintCount())
	}
	f.refuse, f.failNext = "", []int{503, 503, 503, 503}
	// A refused source waits out its backoff before asking again.
	if _, err := b.Token(t.Context()); !errors.As(err, &ae) || f.mintCount() != 1 {
		t.Fatalf("within the refusal backoff: %v after %d mints", err, f.mintCount())
	}
	c := jwtAuth(t, f, keyPEM, nil)
	if _, err := c.Token(t.Context()); err == nil || !strings.Contains(err.Error(), "no token after 4 attempts") {
		t.Fatalf("persistent 5xx: %v", err)
	}
}

func TestAJWTSignedWithAnotherKeyIsRefused(t *testing.T) {
	k, _ := testKey(t)
	_, otherPEM := testKey(t)
	f := newFakeOrg(t, &k.PublicKey)
	if _, err := jwtAuth(t, f, otherPEM, nil).Token(t.Context()); err == nil || !strings.Contains(err.Error(), "bad signature") {
		t.Fatalf("got %v", err)
	}
}

func TestClientCredentials(t *testing.T) {
	f := newFakeOrg(t, nil)
	cfg := salesforce.Config{AuthMode: sfrules.ClientCredentials, LoginURL: "https://login.salesforce.com", ClientID: "ck", ClientSecret: "s3cret"}
	if _, err := salesforce.New(cfg); err == nil || !strings.Contains(err.Error(), "My Domain") {
		t.Fatalf("client_credentials on login.salesforce.com: %v", err)
	}
	cfg.LoginURL = f.srv.URL
	a, err := salesforce.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if tok, err := a.Token(t.Context()); err != nil || tok.AccessToken != "token-1" {
		t.Fatalf("%v %v", tok, err)
	}
	if f.form["client_id"] != "ck" || f.form["grant_type"] != "client_credentials" {
		t.Fatalf("form %v", f.form)
	}
	id, err := a.OrgID(t.Context())
	if err != nil || id != "00D000000000001EAA" {
		t.Fatalf("org id %q %v", id, err)
	}
}

func TestNonJSONTokenAnswerIsAnErrorNotACrash(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = fmt.Fprint(w, "<html>maintenance</html>")
	}))
	defer srv.Close()
	a, err := salesforce.New(salesforce.Config{AuthMode: sfrules.ClientCredentials, LoginURL: srv.URL, ClientID: "ck", ClientSecret: "x"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if _, err := a.Token(ctx); err == nil || !strings.Contains(err.Error(), "without access_token") {
		t.Fatalf("got %v", err)
	}
}

func TestLoadSecret(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	if s, err := salesforce.LoadSecret("client_secret", "", write("ok", "  s3cret\n")); err != nil || s != "s3cret" {
		t.Fatalf("%q %v", s, err)
	}
	// A blank value (an SF2LOKI_* variable set to a space) is not set: the
	// file is read, as check says.
	if s, err := salesforce.LoadSecret("client_secret", " ", write("ok2", "s3cret\n")); err != nil || s != "s3cret" {
		t.Fatalf("a blank value beside a file: %q, %v; want the file's secret", s, err)
	}
	if _, err := salesforce.LoadSecret("client_secret", "", write("blank", " \n")); err == nil || !strings.Contains(err.Error(), "blank secret is a missing secret") {
		t.Fatalf("blank file: %v", err)
	}
	if _, err := salesforce.LoadSecret("client_secret", "  ", ""); err == nil || !strings.Contains(err.Error(), "set client_secret or client_secret_file") {
		t.Fatalf("blank value: %v", err)
	}
	if s, _ := salesforce.LoadSecret("client_secret", "inline", write("ignored", "file")); s != "inline" {
		t.Fatalf("the value must win over the file: %q", s)
	}
}

func TestIdleTimeoutCountsOnlyTheServersSilence(t *testing.T) {
	const idle = 300 * time.Millisecond
	// The server sends half the body, then nothing for 10 idle timeouts
	// (or until the client gives up), then the rest.
	var pause atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/services/oauth2/token" {
			_, _ = fmt.Fprintf(w, `{"access_token":"tok","instance_url":"http://%s"}`, r.Host)
			return
		}
		if r.URL.Path == "/headers" {
			select {
			case <-r.Context().Done():
			case <-time.After(10 * idle):
			}
		}
		_, _ = fmt.Fprint(w, "first half,")
		w.(http.Flusher).Flush()
		if pause.Load() {
			select {
			case <-r.Context().Done():
				return
			case <-time.After(10 * idle):
			}
		}
		_, _ = fmt.Fprint(w, "second half")
	}))
	defer srv.Close()
	a, err := salesforce.New(salesforce.Config{AuthMode: sfrules.ClientCredentials, LoginURL: srv.URL, ClientID: "ck", ClientSecret: "x", IdleTimeout: idle})
	if err != nil {
		t.Fatal(err)
	}
	get := func(path string) (*http.Response, error) {
		return a.Do(t.Context(), func(tok *salesforce.Token) (*http.Request, error) {
			return http.NewRequest(http.MethodGet, tok.InstanceURL+path, nil)
		})
	}
	// A reader that takes its time between reads is not the server's
	// silence: the body arrives whole.
	resp, err := get("/body")
	if err != nil {
		t.Fatal(err)
	}
	var got []byte
	buf := make([]byte, 4)
	for {
		n, err := resp.Body.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			break
		}
		time.Sleep(idle / 2) // 6 reads: 3 idle timeouts spent outside Read
	}
	_ = resp.Body.Close()
	if string(got) != "first half,second half" {
		t.Fatalf("a slow reader got %q", got)
	}
	// A server that stops mid-body fails the read, transiently, naming why.
	pause.Store(true)
	resp, err = get("/body")
	if err != nil {
		t.Fatal(err)
	}
	_, err = io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if !errors.Is(err, salesforce.ErrStalled) {
		t.Fatalf("a stalled body: %v, want ErrStalled", err)
	}
	// A server that sends no headers fails the request.
	resp, err = get("/headers")
	if err == nil {
		_ = resp.Body.Close()
	}
	if !errors.Is(err, salesforce.ErrStalled) || !ports.IsTransient(err) {
		t.Fatalf("no headers: %v, want a transient ErrStalled", err)
	}
}
