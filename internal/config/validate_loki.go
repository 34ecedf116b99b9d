package config

import (
	"fmt"
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/sf2loki/sf2loki/internal/lokirules"
)

// checkLokiClient checks sink.loki.tls and sink.loki.headers. The TLS
// files are read by the sink, which check builds.
func (c *Config) checkLokiClient(add func(path, format string, args ...any)) {
	l := c.Sink.Loki
	switch {
	case l.TLS.CertFile != "" && l.TLS.KeyFile == "":
		add("sink.loki.tls.key_file", "required with sink.loki.tls.cert_file (the client certificate's private key)")
	case l.TLS.KeyFile != "" && l.TLS.CertFile == "":
		add("sink.loki.tls.cert_file", "required with sink.loki.tls.key_file (the client certificate)")
	}
	if u, err := url.Parse(l.URL); err == nil && strings.EqualFold(u.Scheme, "http") && l.TLS != (LokiTLS{}) {
		add("sink.loki.tls", "set, but sink.loki.url %s is http://: the connection would be plain text and the tls settings unused; "+
			"use an https:// url, or remove sink.loki.tls", u.Redacted())
	}
	auth := l.AuthToken != "" || l.AuthTokenFile != ""
	if u, err := url.Parse(l.URL); err == nil && u.User != nil {
		auth = true
	}
	for _, k := range slices.Sorted(maps.Keys(l.Headers)) {
		if msg := lokirules.HeaderProblem(k, l.Headers[k], l.TenantID != "", auth); msg != "" {
			add("sink.loki.headers."+k, "%s", msg)
		}
	}
}

// lokiClientWarnings: a server certificate that is not verified, a url
// whose path is not Loki's push path, credentials in the url that a token
// replaces, and a tenant Grafana Cloud would not take.
func (c *Config) lokiClientWarnings() []string {
	l := c.Sink.Loki
	var warnings []string
	if l.TLS.InsecureSkipVerify {
		warnings = append(warnings, "sink.loki.tls.insecure_skip_verify is true: Loki's certificate is not verified, so anyone on the network path can read and "+
			"forge the connection (the entries and the credentials sent with them); set sink.loki.tls.ca_file to the CA that signed it instead")
	}
	u, err := url.Parse(l.URL)
	if l.URL == "" || err != nil || checkURL(l.URL) != "" {
		return warnings // a missing or malformed url is a problem of its own
	}
	if want, wrong := lokiPushURL(u); wrong {
		what := "does not end in " + LokiPushPath
		if strings.Trim(u.Path, "/") == "" {
			what = "has no " + LokiPushPath + " path"
		}
		warnings = append(warnings, fmt.Sprintf("sink.loki.url %s %s: sf2loki posts to the URL as it is, and Loki serves pushes at %s; did you mean %s? "+
			"(A receiver that takes pushes on a path of its own is the exception: then keep the url.)", u.Redacted(), what, LokiPushPath, want))
	}
	token := l.AuthToken != "" || l.AuthTokenFile != ""
	if u.User != nil && token {
		warnings = append(warnings, fmt.Sprintf("sink.loki.url %s holds a user, but a token is set (sink.loki.auth_token or auth_token_file): "+
			"the token's Authorization header is sent and the url's user and password are not; remove them from the url, or remove the token", u.Redacted()))
	}
	if h := strings.ToLower(u.Hostname()); strings.HasSuffix(h, ".grafana.net") && token && l.TenantID != "" && l.BasicAuthUser != "" && l.TenantID != l.BasicAuthUser {
		warnings = append(warnings, fmt.Sprintf("sink.loki.tenant_id %q differs from sink.loki.basic_auth_user %q on Grafana Cloud (%s), whose Loki tenant is the basic-auth user "+
			"(the stack's Loki user id); both are sent (X-Scope-OrgID and the basic-auth user): remove tenant_id, or set it to the same id", l.TenantID, l.BasicAuthUser, h))
	}
	return warnings
}

// LokiPushPath is where Loki serves its push API.
const LokiPushPath = "/loki/api/v1/push"

// lokiPushURL reports whether u's path does not end in LokiPushPath, and
// the url it likely meant: the path's start kept (a gateway's prefix), a
// partial push path completed, another Loki API path replaced.
func lokiPushURL(u *url.URL) (string, bool) {
	if strings.HasSuffix(u.Path, LokiPushPath) {
		return "", false
	}
	p := strings.TrimRight(u.Path, "/")
	switch i := strings.Index(p, "/loki/api/"); {
	case strings.HasSuffix(p, LokiPushPath):
	case i >= 0:
		p = p[:i] + LokiPushPath
	default:
		rest := LokiPushPath
		for _, part := range []string{"/loki/api/v1", "/loki/api", "/loki"} {
			if strings.HasSuffix(p, part) {
				rest = strings.TrimPrefix(LokiPushPath, part)
				break
			}
		}
		p += rest
	}
	if u.User != nil {
		// The password is redacted: a url to copy would carry "xxxxx".
		return "the path " + p, true
	}
	want := *u
	want.Path, want.RawPath = p, ""
	return want.String(), true
}
