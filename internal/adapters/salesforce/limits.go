package salesforce

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"

	"github.com/sf2loki/sf2loki/internal/ports"
)

// Limit is one of the org's limits: its allocation and what is left.
type Limit struct {
	Max, Remaining int64
}

// DailyAPIRequests names the org's daily API request allocation in the
// limits resource.
const DailyAPIRequests = "DailyApiRequests"

// Limits asks the org's limits (GET /services/data/vXX.X/limits; the user
// needs View Setup and Configuration). Every entry with a Max and a
// Remaining is returned, by name; Salesforce adds limits over releases, so
// none is assumed. Numbers written as strings (as older API versions show
// them) are read too; nested entries (a connected app's share of
// DailyApiRequests) are ignored.
//
// A failure says its cause: an instance that cannot be reached (its name
// does not resolve, the connection or TLS fails) wraps
// ports.ErrUnreachable (ports.NetworkCause names why) and stays
// transient; a 403 other than the API limit (INSUFFICIENT_ACCESS: the
// missing permission) wraps ports.ErrPermissionDenied; a 401 to a new
// token wraps ports.ErrCredentialsRefused; the API limit is ErrThrottled;
// a token Salesforce refuses is the token source's *AuthError.
func Limits(ctx context.Context, auth *Auth, apiVersion string) (map[string]Limit, error) {
	path := fmt.Sprintf("/services/data/v%s/limits", apiVersion)
	resp, err := auth.Do(ctx, func(tok *Token) (*http.Request, error) {
		return http.NewRequest(http.MethodGet, tok.InstanceURL+path, nil)
	})
	if err != nil {
		if _, ok := ports.NetworkCause(err); ok {
			// The caller names the cause (ports.NetworkCause) and the fix
			// (UnreachableFix).
			return nil, fmt.Errorf("salesforce: reading the org's limits: %w: %w", ports.ErrUnreachable, err)
		}
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return nil, ports.Transient("get", fmt.Errorf("salesforce: reading %s: %w", path, err))
	}
	switch {
	case resp.StatusCode == http.StatusUnauthorized:
		// Do sent again with a new token: Salesforce refuses the session.
		return nil, fmt.Errorf("salesforce: %s answered 401 to a new token: %w: Salesforce does not accept the session "+
			"(a frozen user, or the app's session policy?): %s", path, ports.ErrCredentialsRefused, auth.snippet(body))
	case resp.StatusCode == http.StatusForbidden:
		return nil, fmt.Errorf("salesforce: %s answered %d: %w: the user needs View Setup and Configuration: %s",
			path, resp.StatusCode, ports.ErrPermissionDenied, auth.snippet(body))
	case resp.StatusCode >= 500:
		return nil, ports.Transient("get", fmt.Errorf("salesforce: %s answered %d: %s", path, resp.StatusCode, auth.snippet(body)))
	case resp.StatusCode != http.StatusOK:
		return nil, fmt.Errorf("salesforce: %s answered %d: %s", path, resp.StatusCode, auth.snippet(body))
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(body, &raw); err != nil {
		return nil, fmt.Errorf("salesforce: %s answered 200 with a body that is not the expected JSON (%w): %s", path, err, auth.snippet(body))
	}
	out := make(map[string]Limit, len(raw))
	for name, v := range raw {
		var e struct {
			Max, Remaining json.RawMessage
		}
		if json.Unmarshal(v, &e) != nil || e.Max == nil || e.Remaining == nil {
			continue
		}
		maxV, err1 := limitNumber(e.Max)
		rem, err2 := limitNumber(e.Remaining)
		if err1 != nil || err2 != nil {
			continue
		}
		out[name] = Limit{Max: maxV, Remaining: rem}
	}
	return out, nil
}

// UnreachableFix is what to check when a Salesforce host cannot be
// reached.
const UnreachableFix = "check the instance URL (the My Domain the token names) and salesforce.login_url, " +
	"the host's DNS, and the proxy (HTTPS_PROXY, NO_PROXY)"

// limitNumber reads a number, or a number written as a JSON string.
func limitNumber(b json.RawMessage) (int64, error) {
	s := string(bytes.TrimSpace(b))
	if strings.HasPrefix(s, `"`) {
		if err := json.Unmarshal(b, &s); err != nil {
			return 0, err
		}
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		return n, nil
	}
	f, err := strconv.ParseFloat(s, 64)
	return int64(f), err
}
