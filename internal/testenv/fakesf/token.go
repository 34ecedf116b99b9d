package fakesf

import (
	"bytes"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Grants makes the token endpoint as strict as Salesforce's
// (/services/oauth2/token, OAuth 2.0 JWT bearer and client credentials
// flows). A nil Org.Grants accepts any token request.
type Grants struct {
	// Key verifies JWT bearer assertions (RS256); nil refuses that flow.
	Key *rsa.PublicKey
	// ClientID is the connected app's consumer key (the assertion's iss,
	// or client_id); Username the pre-authorised user (the assertion's sub).
	ClientID, Username string
	// ClientSecret, if set, allows the client credentials flow.
	ClientSecret string
	// Site is an Experience Cloud site URL accepted as an audience besides
	// https://login.salesforce.com and https://test.salesforce.com.
	Site string
	// Now is the server's clock for exp (default time.Now).
	Now func() time.Time
	// Refuse, if set, refuses every grant with invalid_grant and this
	// description (a revoked app).
	Refuse string
}

// token answers a token request: a refusal is HTTP 400 with Salesforce's
// {"error","error_description"} body. o.mu held.
func (o *Org) token(w http.ResponseWriter, r *http.Request) {
	if g := o.Grants; g != nil {
		if code, desc := g.check(r); code != "" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]string{"error": code, "error_description": desc})
			return
		}
	}
	o.mints++
	_, _ = fmt.Fprintf(w, `{"access_token":"t%d","instance_url":"http://%s","id":"https://login.salesforce.com/id/00D000000000001EAA/005000000000001AAA","token_type":"Bearer"}`, o.mints, r.Host)
}

// check returns the refusal of a token request ("" when granted).
func (g *Grants) check(r *http.Request) (code, desc string) {
	if err := r.ParseForm(); err != nil {
		return "invalid_request", err.Error()
	}
	if g.Refuse != "" {
		return "invalid_grant", g.Refuse
	}
	switch r.PostForm.Get("grant_type") {
	case "urn:ietf:params:oauth:grant-type:jwt-bearer":
		return g.checkJWT(r.PostForm.Get("assertion"))
	case "client_credentials":
		if g.ClientSecret == "" || r.PostForm.Get("client_id") != g.ClientID || r.PostForm.Get("client_secret") != g.ClientSecret {
			return "invalid_client", "invalid client credentials"
		}
		return "", ""
	}
	return "unsupported_grant_type", "grant type not supported"
}

// checkJWT verifies an assertion's signature and its iss, sub, aud and
// exp claims as Salesforce documents them.
func (g *Grants) checkJWT(assertion string) (code, desc string) {
	parts := strings.Split(assertion, ".")
	if g.Key == nil || len(parts) != 3 {
		return "invalid_grant", "invalid assertion"
	}
	enc := base64.RawURLEncoding
	header, err1 := enc.DecodeString(parts[0])
	body, err2 := enc.DecodeString(parts[1])
	sig, err3 := enc.DecodeString(parts[2])
	if err1 != nil || err2 != nil || err3 != nil || !bytes.Contains(header, []byte(`"RS256"`)) {
		return "invalid_grant", "invalid assertion"
	}
	sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
	if rsa.VerifyPKCS1v15(g.Key, crypto.SHA256, sum[:], sig) != nil {
		return "invalid_grant", "invalid assertion"
	}
	var c struct {
		Iss, Sub, Aud string
		Exp           float64
	}
	if json.Unmarshal(body, &c) != nil {
		return "invalid_grant", "invalid assertion"
	}
	now := time.Now
	if g.Now != nil {
		now = g.Now
	}
	switch {
	case c.Iss != g.ClientID:
		return "invalid_client_id", "client identifier invalid"
	case c.Aud != "https://login.salesforce.com" && c.Aud != "https://test.salesforce.com" && (g.Site == "" || c.Aud != g.Site):
		return "invalid_grant", "audience is invalid"
	case c.Sub != g.Username:
		return "invalid_grant", "user hasn't approved this consumer"
	case int64(c.Exp) <= now().Unix() || int64(c.Exp) > now().Add(5*time.Minute).Unix():
		return "invalid_grant", "expired authorization code"
	}
	return "", ""
}

// SetRefuse makes the token endpoint refuse every grant with desc (""
// grants again), while the org serves.
func (o *Org) SetRefuse(desc string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.Grants != nil {
		o.Grants.Refuse = desc
	}
}
