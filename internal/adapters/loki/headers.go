package loki

import (
	"encoding/base64"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"

	"github.com/sf2loki/sf2loki/internal/lokirules"
)

// checkHeaders refuses an extra header that lokirules.HeaderProblem
// refuses.
func checkHeaders(cfg Config) error {
	auth := cfg.AuthToken != ""
	if u, err := url.Parse(cfg.URL); err == nil && u.User != nil {
		auth = true
	}
	for _, k := range slices.Sorted(maps.Keys(cfg.Headers)) {
		if p := lokirules.HeaderProblem(k, cfg.Headers[k], cfg.TenantID != "", auth); p != "" {
			return fmt.Errorf("sink.loki.headers.%s: %s", k, p)
		}
	}
	return nil
}

// setAuth sets the tenant and the credentials of a push, as Promtail's and
// Grafana Alloy's Loki clients do: the tenant is X-Scope-OrgID whenever one
// is set, whatever the credentials; a token is basic auth with the
// basic-auth user, else a bearer token.
func setAuth(h http.Header, cfg Config) {
	if cfg.TenantID != "" {
		h.Set("X-Scope-OrgID", cfg.TenantID)
	}
	switch user := cfg.basicAuthUser(); {
	case cfg.AuthToken != "" && user != "":
		h.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte(user+":"+cfg.AuthToken)))
	case cfg.AuthToken != "":
		h.Set("Authorization", "Bearer "+cfg.AuthToken)
	}
}

// basicAuthUser is the user a token is sent with: BasicAuthUser, else the
// tenant (Grafana Cloud's shorthand, where the Loki user is the tenant; the
// tenant is still sent as X-Scope-OrgID, so it is never lost).
func (cfg Config) basicAuthUser() string {
	if cfg.BasicAuthUser != "" {
		return cfg.BasicAuthUser
	}
	return cfg.TenantID
}
