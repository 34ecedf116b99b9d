package config

import (
	"maps"
	"net/url"
	"slices"
	"strings"

	"github.com/sf2loki/sf2loki/internal/adapters/loki"
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
		if msg := loki.HeaderProblem(k, l.Headers[k], l.TenantID != "", auth); msg != "" {
			add("sink.loki.headers."+k, "%s", msg)
		}
	}
}

// lokiClientWarnings: a server certificate that is not verified.
func (c *Config) lokiClientWarnings() []string {
	if !c.Sink.Loki.TLS.InsecureSkipVerify {
		return nil
	}
	return []string{"sink.loki.tls.insecure_skip_verify is true: Loki's certificate is not verified, so anyone on the network path can read and " +
		"forge the connection (the entries and the credentials sent with them); set sink.loki.tls.ca_file to the CA that signed it instead"}
}
