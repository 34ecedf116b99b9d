package salesforce_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/salesforce"
	"github.com/sf2loki/sf2loki/internal/sfrules"
)

// echoOrg answers the token endpoint by quoting the request back, the way
// a misconfigured proxy or endpoint does, in the shape set by mode.
func echoOrg(t *testing.T, mode string) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		form, _ := url.ParseQuery(string(body))
		decoded := fmt.Sprintf("client_secret=%s assertion=%s", form.Get("client_secret"), form.Get("assertion"))
		switch {
		case r.URL.Path != "/services/oauth2/token":
			// An API answer that quotes the request's Authorization header.
			w.WriteHeader(http.StatusBadRequest)
			_, _ = fmt.Fprintf(w, `[{"errorCode":"BAD","message":"you sent %s"}]`, r.Header.Get("Authorization"))
		case mode == "raw":
			w.WriteHeader(http.StatusBadRequest)
			_, _ = w.Write(body)
		case mode == "json":
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "invalid_client", "error_description": "got " + decoded})
		case mode == "5xx":
			w.WriteHeader(http.StatusBadGateway)
			_, _ = fmt.Fprintf(w, "%s\n%s", body, decoded)
		case mode == "200":
			_, _ = fmt.Fprintf(w, `{"echo":%q}`, decoded)
		case mode == "ok":
			_, _ = fmt.Fprintf(w, `{"access_token":"00Dxx!AQ0Atoken-SECRET-abcdef","instance_url":"http://%s"}`, r.Host)
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

// A secret with characters that form, JSON and HTML encodings change.
const echoedSecret = "s3cr3t+/=&<value> with space"

func TestTokenErrorsNeverQuoteTheSecrets(t *testing.T) {
	_, keyPEM := testKey(t)
	for _, mode := range []string{"raw", "json", "5xx", "200"} {
		for _, authMode := range []string{sfrules.ClientCredentials, sfrules.JWTBearer} {
			t.Run(mode+"/"+authMode, func(t *testing.T) {
				srv := echoOrg(t, mode)
				var assertion string
				cfg := salesforce.Config{AuthMode: authMode, LoginURL: srv.URL, ClientID: "ck", ClientSecret: echoedSecret,
					Username: "u@example.com", PrivateKeyPEM: keyPEM, MintAttempts: 2, MintBackoff: time.Millisecond}
				if authMode == sfrules.JWTBearer {
					cfg.ClientSecret = ""
					cfg.HTTPClient = &http.Client{Transport: capture(&assertion)}
				}
				a, err := salesforce.New(cfg)
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
				defer cancel()
				_, err = a.Token(ctx)
				if err == nil {
					t.Fatal("an echoing token endpoint minted a token")
				}
				msg := err.Error()
				for _, secret := range leakForms(echoedSecret, assertion) {
					if strings.Contains(msg, secret) {
						t.Fatalf("the error quotes a secret (%.20q…):\n%s", secret, msg)
					}
				}
				if mode != "200" && !strings.Contains(msg, "[REDACTED]") {
					t.Fatalf("the error does not show where the secret was removed:\n%s", msg)
				}
			})
		}
	}
}

func TestAPIErrorsNeverQuoteTheAccessToken(t *testing.T) {
	srv := echoOrg(t, "ok")
	a, err := salesforce.New(salesforce.Config{AuthMode: sfrules.ClientCredentials, LoginURL: srv.URL, ClientID: "ck", ClientSecret: echoedSecret})
	if err != nil {
		t.Fatal(err)
	}
	_, qerr := salesforce.Query(t.Context(), a, "60.0", "SELECT Id FROM LoginEvent")
	gerr := salesforce.GetJSON(t.Context(), a, "/services/data/v60.0/limits", &struct{}{})
	for _, err := range []error{qerr, gerr} {
		if err == nil || strings.Contains(err.Error(), "token-SECRET") || !strings.Contains(err.Error(), "[REDACTED]") {
			t.Fatalf("an API error quoting the bearer token: %v", err)
		}
	}
}

// leakForms are the ways a secret can appear in an echoed body.
func leakForms(secrets ...string) []string {
	var out []string
	for _, s := range secrets {
		if s == "" {
			continue
		}
		j, _ := json.Marshal(s)
		out = append(out, s, url.QueryEscape(s), strings.Trim(string(j), `"`))
		if i := strings.LastIndexByte(s, '.'); i > 0 {
			out = append(out, s[i+1:]) // a JWT's signature alone
		}
		if len(s) > 40 {
			out = append(out, s[len(s)-40:]) // a tail left by truncation
		}
	}
	return out
}

// capture is a transport that records the assertion a request carries.
func capture(assertion *string) http.RoundTripper {
	return roundTripper(func(r *http.Request) (*http.Response, error) {
		body, _ := io.ReadAll(r.Body)
		form, _ := url.ParseQuery(string(body))
		if a := form.Get("assertion"); a != "" {
			*assertion = a
		}
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		return http.DefaultTransport.RoundTrip(r)
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
