// Package fakesf is an in-process Salesforce org for tests: a token
// endpoint (any client credentials) and the REST query endpoint answering
// the ascending FIELDS(ALL) queries of the SOQL source, with SOQL's
// semantics for its two cursor forms.
//
// Test support only: production code must not import it.
package fakesf

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Org answers the ascending FIELDS(ALL) queries SOQLSource sends, with
// SOQL's semantics for the two cursor forms, over records it holds sorted
// by (EventDate, Id). It can answer REQUEST_LIMIT_EXCEEDED, a 503, a
// non-JSON 200 or a 401, and pages answers with nextRecordsUrl.
type Org struct {
	mu   sync.Mutex
	rows []map[string]any
	// Queries are the SOQL queries answered, in order.
	Queries []string
	// Throttle, Unavailable, Garbage and Revoke make the next requests
	// answer REQUEST_LIMIT_EXCEEDED, a 503, a non-JSON 200, or (to token
	// t1) a 401.
	Throttle, Unavailable, Garbage, Revoke int
	// Batch is the most records one answer holds; the rest follow behind
	// nextRecordsUrl. 0 answers everything at once.
	Batch int
	// SObjects are the object names describeGlobal lists.
	SObjects []string
	// Delay holds every query answer this long (set it with SetDelay once
	// the org serves).
	Delay time.Duration
	pages pager
	mints int
}

// SetSObjects changes SObjects while the org serves.
func (o *Org) SetSObjects(names ...string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.SObjects = names
}

// SetDelay changes Delay while the org serves.
func (o *Org) SetDelay(d time.Duration) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.Delay = d
}

// Follows returns how many nextRecordsUrl pages were answered.
func (o *Org) Follows() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.pages.follows
}

var (
	whereGE       = regexp.MustCompile(`WHERE EventDate >= (\S+) ORDER`)
	whereCompound = regexp.MustCompile(`WHERE \(EventDate > (\S+) OR \(EventDate = \S+ AND Id > '(\w+)'\)\) ORDER`)
	limitRe       = regexp.MustCompile(`LIMIT (\d+)$`)
)

// Add stores a LoginEvent-shaped row.
func (o *Org) Add(id string, ts time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.rows = append(o.rows, map[string]any{"attributes": map[string]any{"type": "LoginEvent"}, "Id": id,
		"EventDate": ts.UTC().Format("2006-01-02T15:04:05.000+0000"), "Username": "u" + id})
	slices.SortFunc(o.rows, func(a, b map[string]any) int {
		if c := strings.Compare(a["EventDate"].(string), b["EventDate"].(string)); c != 0 {
			return c
		}
		return strings.Compare(a["Id"].(string), b["Id"].(string))
	})
}

// ServeHTTP answers the token, and the query endpoint.
func (o *Org) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	o.mu.Lock()
	if d := o.Delay; d > 0 && r.URL.Path != "/services/oauth2/token" {
		o.mu.Unlock()
		time.Sleep(d)
		o.mu.Lock()
	}
	defer o.mu.Unlock()
	switch {
	case r.URL.Path == "/services/oauth2/token":
		o.mints++
		_, _ = fmt.Fprintf(w, `{"access_token":"t%d","instance_url":"http://%s"}`, o.mints, r.Host)
		return
	case r.Header.Get("Authorization") == "Bearer t1" && o.Revoke > 0:
		o.Revoke--
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = fmt.Fprint(w, `[{"errorCode":"INVALID_SESSION_ID"}]`)
		return
	case o.Throttle > 0:
		o.Throttle--
		w.WriteHeader(http.StatusForbidden)
		_, _ = fmt.Fprint(w, `[{"message":"TotalRequests Limit exceeded.","errorCode":"REQUEST_LIMIT_EXCEEDED"}]`)
		return
	case o.Unavailable > 0:
		o.Unavailable--
		unavailable(w)
		return
	case o.pages.follow(w, r, "60.0", o.Batch):
		return
	case r.URL.Path == "/services/data/v60.0/sobjects/":
		var objs []map[string]any
		for _, n := range o.SObjects {
			objs = append(objs, map[string]any{"name": n, "queryable": true})
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"encoding": "UTF-8", "maxBatchSize": 200, "sobjects": objs})
		return
	case o.Garbage > 0:
		o.Garbage--
		_, _ = fmt.Fprint(w, "<html>Service Unavailable</html>")
		return
	}
	q := r.URL.Query().Get("q")
	o.Queries = append(o.Queries, q)
	parse := func(s string) time.Time {
		t, err := time.Parse("2006-01-02T15:04:05.000Z", s)
		if err != nil {
			http.Error(w, "MALFORMED_QUERY: "+s, http.StatusBadRequest)
		}
		return t
	}
	var keep func(ts time.Time, id string) bool
	if m := whereGE.FindStringSubmatch(q); m != nil {
		from := parse(m[1])
		keep = func(ts time.Time, _ string) bool { return !ts.Before(from) }
	} else if m := whereCompound.FindStringSubmatch(q); m != nil {
		after, id := parse(m[1]), m[2]
		keep = func(ts time.Time, rid string) bool { return ts.After(after) || (ts.Equal(after) && rid > id) }
	} else {
		http.Error(w, "MALFORMED_QUERY: "+q, http.StatusBadRequest)
		return
	}
	limit, _ := strconv.Atoi(limitRe.FindStringSubmatch(q)[1])
	var out []map[string]any
	for _, row := range o.rows {
		ts, _ := time.Parse("2006-01-02T15:04:05.000-0700", row["EventDate"].(string))
		if keep(ts, row["Id"].(string)) && len(out) < limit {
			out = append(out, row)
		}
	}
	o.pages.answer(w, "60.0", out, o.Batch)
}

// Snapshot returns the queries answered so far.
func (o *Org) Snapshot() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.Queries)
}
