package lokirules

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
)

// reservedByClient are headers the HTTP client sets from the request
// itself.
var reservedByClient = []string{"Host", "Content-Length", "Transfer-Encoding", "Connection", "Te", "Trailer", "Upgrade", "Keep-Alive", "Proxy-Connection"}

// HeaderProblem says what is wrong with sending the extra header name:
// value on every push, or "" when nothing is. sf2loki owns Content-Type
// and Content-Encoding (the body's encoding) and the headers the HTTP
// client derives from the request (Host, Content-Length, ...), always;
// Authorization when auth (an auth token, or a user in the URL) is set,
// and X-Scope-OrgID when tenant (a tenant id) is set. The answer never
// quotes the value: it may be a secret.
func HeaderProblem(name, value string, tenant, auth bool) string {
	canon := http.CanonicalHeaderKey(name)
	switch {
	case !validToken(name):
		return fmt.Sprintf("%q is not a header name (letters, digits and !#$%%&'*+-.^_`|~ only)", name)
	case canon == "Content-Type" || canon == "Content-Encoding":
		return "set by sf2loki from sink.loki.encoding; it may not be overridden"
	case containsFold(reservedByClient, canon):
		return "set by the HTTP client from the request (sink.loki.url and the body); it may not be set"
	case canon == "Authorization" && auth:
		return "set by sf2loki from sink.loki.auth_token (or the user and password of sink.loki.url); set one or the other, not both"
	case canon == "X-Scope-Orgid" && tenant:
		return "the tenant is sink.loki.tenant_id; set one or the other, not both"
	case strings.ContainsFunc(value, func(r rune) bool { return (r < ' ' && r != '\t') || r == 0x7f }):
		return "the value holds a control character (a line break?); a header value is one line"
	}
	return ""
}

func containsFold(list []string, s string) bool {
	for _, x := range list {
		if strings.EqualFold(x, s) {
			return true
		}
	}
	return false
}

// validToken reports whether s is an HTTP token (RFC 9110), as a header
// name must be.
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := range len(s) {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && !bytes.ContainsRune([]byte("!#$%&'*+-.^_`|~"), rune(c)) {
			return false
		}
	}
	return true
}
