package fakesf

import (
	"encoding/json"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
)

// OrgLimits answers the REST API's limits resource (REST API Developer
// Guide, "Limits"): GET /services/data/vXX.X/limits (with or without the
// trailing slash) is one JSON object keyed by limit name, each value
// {"Max": n, "Remaining": n}. Like Salesforce's, the answer holds entries
// with nested objects besides Max and Remaining (DailyApiRequests carries
// one per connected app), which a client must tolerate.
type OrgLimits struct {
	mu     sync.Mutex
	values map[string][2]int64
	// Strings writes Max and Remaining as JSON strings, as the older
	// versions of the guide's examples show them.
	Strings bool
	// Forbidden answers 403 INSUFFICIENT_ACCESS: the user lacks View Setup
	// and Configuration.
	Forbidden bool
	requests  int
}

// DefaultLimits is an org with a few of the limits Salesforce lists, the
// daily API requests nearly untouched.
func DefaultLimits() *OrgLimits {
	l := &OrgLimits{}
	l.Set("DailyApiRequests", 15000, 14998)
	l.Set("DailyBulkApiBatches", 15000, 15000)
	l.Set("DailyAsyncApexExecutions", 250000, 250000)
	l.Set("DataStorageMB", 5, 5)
	return l
}

// Set stores (or changes) one limit.
func (l *OrgLimits) Set(name string, maxV, remaining int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.values == nil {
		l.values = map[string][2]int64{}
	}
	l.values[name] = [2]int64{maxV, remaining}
}

// SetStrings changes Strings while the org serves.
func (l *OrgLimits) SetStrings(s bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.Strings = s
}

// SetForbidden changes Forbidden while the org serves.
func (l *OrgLimits) SetForbidden(f bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.Forbidden = f
}

// Requests returns how many limits requests were answered.
func (l *OrgLimits) Requests() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.requests
}

// serve answers r if it asks for the limits of API version version, and
// reports whether it did.
func (l *OrgLimits) serve(w http.ResponseWriter, r *http.Request, version string) bool {
	if l == nil || strings.TrimSuffix(r.URL.Path, "/") != "/services/data/v"+version+"/limits" {
		return false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.requests++
	if r.Method != http.MethodGet {
		sfError(w, http.StatusMethodNotAllowed, "METHOD_NOT_ALLOWED", "HTTP Method '"+r.Method+"' not allowed. Allowed are GET,HEAD")
		return true
	}
	if l.Forbidden {
		sfError(w, http.StatusForbidden, "INSUFFICIENT_ACCESS", "The user does not have the View Setup and Configuration permission")
		return true
	}
	out := map[string]any{}
	for _, name := range slices.Sorted(maps.Keys(l.values)) {
		v := l.values[name]
		entry := map[string]any{"Max": v[0], "Remaining": v[1]}
		if l.Strings {
			entry = map[string]any{"Max": strconv.FormatInt(v[0], 10), "Remaining": strconv.FormatInt(v[1], 10)}
		}
		if name == "DailyApiRequests" {
			entry["Salesforce CLI"] = map[string]any{"Max": 0, "Remaining": 0}
		}
		out[name] = entry
	}
	w.Header().Set("Content-Type", "application/json;charset=UTF-8")
	_ = json.NewEncoder(w).Encode(out)
	return true
}
