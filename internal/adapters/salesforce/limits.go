package salesforce

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
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
func Limits(ctx context.Context, auth *Auth, apiVersion string) (map[string]Limit, error) {
	var raw map[string]json.RawMessage
	if err := GetJSON(ctx, auth, fmt.Sprintf("/services/data/v%s/limits", apiVersion), &raw); err != nil {
		return nil, err
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
