// Package fakesf is an in-process Salesforce org for tests: a token
// endpoint (any client credentials), describe and describeGlobal, and the
// REST query endpoint, which parses SOQL and answers it over the rows the
// test stored, as strict as Salesforce documents the service: dateTime
// literals only in their documented forms (no fractional seconds), the
// FIELDS() LIMIT, the big-object rules, and Salesforce's JSON error arrays.
//
// Test support only: production code must not import it.
// Imports: the standard library only, so it cannot agree with the adapter
// by sharing its code.
package fakesf

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// StandardBigObjects are the objects Real-Time Event Monitoring stores
// events in that are big objects ("Real-Time Event Monitoring Data
// Storage" and the Platform Events Developer Guide's object pages): each is
// indexed by EventDate, newest first, then EventIdentifier. Custom big
// objects end in __b.
var StandardBigObjects = []string{"ApiEvent", "BulkApiResultEventStore", "IdentityVerificationEvent", "LightningUriEvent",
	"ListViewEvent", "LoginAsEvent", "LoginEvent", "LogoutEvent", "ReportEvent", "UriEvent"}

// IndexField is one field of a big object's index.
type IndexField struct {
	Name string
	Desc bool
}

// standardIndex is the index of the standard big objects.
var standardIndex = []IndexField{{"EventDate", true}, {"EventIdentifier", false}}

// Org answers SOQL queries over the rows a test stored (Add, AddTo). A big
// object (StandardBigObjects, or a name ending in __b) follows the rules of
// "SOQL with Big Objects": WHERE only on its index fields, in index order
// without gaps, = on all but the last, no OR, NOT or !=, ORDER BY only
// along its index (for the standard ones EventDate DESC), never on Id. It
// can answer REQUEST_LIMIT_EXCEEDED, a 503, a non-JSON 200 or a 401, and
// pages answers with nextRecordsUrl.
type Org struct {
	mu      sync.Mutex
	objects map[string]*object
	// Queries are the SOQL queries received, in order (those refused too).
	Queries []string
	// Rejected are the refused queries, each as "ERROR_CODE: message | query".
	Rejected []string
	// Throttle, Unavailable, Garbage and Revoke make the next requests
	// answer REQUEST_LIMIT_EXCEEDED, a 503, a non-JSON 200, or (to token
	// t1) a 401.
	Throttle, Unavailable, Garbage, Revoke int
	// Batch is the most records one answer holds; the rest follow behind
	// nextRecordsUrl. 0 answers up to 2,000 at once, as Salesforce does.
	Batch int
	// SObjects are the object names describeGlobal lists.
	SObjects []string
	// Index overrides the index of a custom big object (…__b); by default
	// it is the timestamp field its rows were added with, descending.
	Index map[string][]IndexField
	// Delay holds every query answer this long (set it with SetDelay once
	// the org serves).
	Delay time.Duration
	// Grants, if set, makes the token endpoint check grants as strictly as
	// Salesforce does (JWT signature and claims, client credentials).
	Grants *Grants
	// EventManager, if set, answers the Metadata API's readMetadata() of
	// the Event Manager's switches (metadata.go).
	EventManager *EventManager
	// Channels, if set, answers Tooling API queries on the org's event
	// channels and their members (channels.go).
	Channels *Channels
	pages    pager
	mints    int
}

// object is one sObject's rows and fields.
type object struct {
	rows    []map[string]any
	fields  []string
	tsField string
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

// IsBigObject reports whether the fake treats name as a big object.
func IsBigObject(name string) bool {
	return strings.HasSuffix(name, "__b") || slices.Contains(StandardBigObjects, name)
}

// Add stores a LoginEvent row (a big object): Id, EventDate,
// EventIdentifier and Username.
func (o *Org) Add(id string, ts time.Time) { o.AddTo("LoginEvent", "EventDate", id, ts) }

// AddTo stores a row of object with Id, the timestamp field tsField,
// EventIdentifier (for a big object) and Username.
func (o *Org) AddTo(obj, tsField, id string, ts time.Time) {
	row := map[string]any{"Id": id, tsField: ts.UTC().Format(restTime), "Username": "u" + id}
	if IsBigObject(obj) {
		row["EventIdentifier"] = "ei-" + id
	}
	o.AddRow(obj, tsField, row)
}

// AddRow stores a row of object as given (values as the REST API writes
// them; dateTimes like 2026-11-28T09:59:01.360+0000); tsField names the
// row's timestamp (a custom big object's default index).
func (o *Org) AddRow(obj, tsField string, row map[string]any) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.objects == nil {
		o.objects = map[string]*object{}
	}
	ob := o.objects[obj]
	if ob == nil {
		ob = &object{tsField: tsField}
		o.objects[obj] = ob
	}
	for k := range row {
		if !slices.Contains(ob.fields, k) {
			ob.fields = append(ob.fields, k)
		}
	}
	slices.Sort(ob.fields)
	ob.rows = append(ob.rows, row)
}

// index returns a big object's index.
func (o *Org) index(name string, ob *object) []IndexField {
	if ix, ok := o.Index[name]; ok {
		return ix
	}
	if strings.HasSuffix(name, "__b") {
		return []IndexField{{ob.tsField, true}}
	}
	return standardIndex
}

// ServeHTTP answers the token, describe, describeGlobal and query
// endpoints (and the Metadata and Tooling API calls of EventManager and
// Channels when set).
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
		o.token(w, r)
		return
	case o.EventManager.serve(w, r, o.minted):
		return
	case r.Header.Get("Authorization") == "Bearer t1" && o.Revoke > 0:
		o.Revoke--
		sfError(w, http.StatusUnauthorized, "INVALID_SESSION_ID", "Session expired or invalid")
		return
	case o.Throttle > 0:
		o.Throttle--
		sfError(w, http.StatusForbidden, "REQUEST_LIMIT_EXCEEDED", "TotalRequests Limit exceeded.")
		return
	case o.Unavailable > 0:
		o.Unavailable--
		unavailable(w)
		return
	case o.Channels.serve(w, r, o.minted):
		return
	case o.pages.follow(w, r, "60.0", o.batch()):
		return
	case r.URL.Path == "/services/data/v60.0/sobjects/":
		var objs []map[string]any
		for _, n := range o.SObjects {
			objs = append(objs, map[string]any{"name": n, "queryable": true})
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"encoding": "UTF-8", "maxBatchSize": 200, "sobjects": objs})
		return
	case strings.HasPrefix(r.URL.Path, "/services/data/v60.0/sobjects/") && strings.HasSuffix(r.URL.Path, "/describe"):
		o.describe(w, strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/services/data/v60.0/sobjects/"), "/describe"))
		return
	case o.Garbage > 0:
		o.Garbage--
		_, _ = fmt.Fprint(w, "<html>Service Unavailable</html>")
		return
	case r.URL.Path != "/services/data/v60.0/query":
		sfError(w, http.StatusNotFound, "NOT_FOUND", "The requested resource does not exist")
		return
	}
	q := r.URL.Query().Get("q")
	o.Queries = append(o.Queries, q)
	rows, err := o.answer(q)
	if err != nil {
		var e *soqlError
		if !errors.As(err, &e) {
			e = &soqlError{"MALFORMED_QUERY", err.Error()}
		}
		o.Rejected = append(o.Rejected, e.code+": "+e.msg+" | "+q)
		sfError(w, http.StatusBadRequest, e.code, e.msg)
		return
	}
	o.pages.answer(w, "60.0", rows, o.batch())
}

// minted reports whether the org's token endpoint issued session.
func (o *Org) minted(session string) bool {
	n, err := strconv.Atoi(strings.TrimPrefix(session, "t"))
	return strings.HasPrefix(session, "t") && err == nil && n >= 1 && n <= o.mints
}

func (o *Org) batch() int {
	if o.Batch > 0 {
		return o.Batch
	}
	return 2000
}

func (o *Org) describe(w http.ResponseWriter, name string) {
	ob := o.objects[name]
	if ob == nil {
		sfError(w, http.StatusNotFound, "NOT_FOUND", "The requested resource does not exist")
		return
	}
	var fields []map[string]any
	for _, f := range ob.fields {
		typ := "string"
		switch f {
		case "Id":
			typ = "id"
		case ob.tsField:
			typ = "datetime"
		}
		fields = append(fields, map[string]any{"name": f, "type": typ, "custom": strings.HasSuffix(f, "__c")})
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"name": name, "queryable": true, "custom": strings.HasSuffix(name, "__b"), "fields": fields})
}

// answer runs one query.
func (o *Org) answer(q string) ([]map[string]any, error) {
	pq, err := parseQuery(q)
	if err != nil {
		return nil, err
	}
	ob := o.objects[pq.object]
	if ob == nil {
		ob = &object{tsField: "EventDate", fields: []string{"Id", "EventDate", "EventIdentifier", "Username"}}
		if !IsBigObject(pq.object) {
			return nil, &soqlError{"INVALID_TYPE", fmt.Sprintf("sObject type '%s' is not supported.", pq.object)}
		}
	}
	if pq.fieldsFn == "ALL" || pq.fieldsFn == "CUSTOM" {
		if pq.limit < 1 || pq.limit > 200 {
			return nil, malformed("The SOQL FIELDS function must have a LIMIT of at most 200")
		}
	}
	referenced := append(slices.Clone(pq.fields), fieldsOf(pq.where, nil)...)
	for _, it := range pq.order {
		referenced = append(referenced, it.field)
	}
	for _, f := range referenced {
		if !slices.Contains(ob.fields, f) {
			return nil, &soqlError{"INVALID_FIELD", fmt.Sprintf("No such column '%s' on entity '%s'.", f, pq.object)}
		}
	}
	order := pq.order
	if IsBigObject(pq.object) {
		ix := o.index(pq.object, ob)
		if err := checkBigObject(pq, ix); err != nil {
			return nil, err
		}
		if len(order) == 0 {
			order = []orderItem{{ix[0].Name, ix[0].Desc}} // rows come in index order
		}
	} else if len(order) == 0 {
		order = []orderItem{{field: "Id"}}
	}
	var out []map[string]any
	for _, row := range ob.rows {
		if pq.where == nil || pq.where.eval(row) {
			out = append(out, row)
		}
	}
	sortRows(out, order, compareField)
	if pq.limit >= 0 && len(out) > pq.limit {
		out = out[:pq.limit]
	}
	shaped := make([]map[string]any, len(out))
	for i, row := range out {
		rec := map[string]any{"attributes": map[string]any{"type": pq.object,
			"url": fmt.Sprintf("/services/data/v60.0/sobjects/%s/%v", pq.object, row["Id"])}}
		for _, f := range ob.fields {
			if pq.fieldsFn == "ALL" || pq.fieldsFn == "STANDARD" && !strings.HasSuffix(f, "__c") ||
				pq.fieldsFn == "CUSTOM" && strings.HasSuffix(f, "__c") || slices.Contains(pq.fields, f) {
				rec[f] = row[f] // absent fields are null, as Salesforce answers them
			}
		}
		shaped[i] = rec
	}
	return shaped, nil
}

// compareField orders two field values: dateTimes by instant, the rest as
// strings, nulls first.
func compareField(a, b any) int {
	as, aok := a.(string)
	bs, bok := b.(string)
	switch {
	case !aok && !bok:
		return 0
	case !aok:
		return -1
	case !bok:
		return 1
	}
	at, aerr := time.Parse(restTime, as)
	bt, berr := time.Parse(restTime, bs)
	if aerr == nil && berr == nil {
		return at.Compare(bt)
	}
	return strings.Compare(as, bs)
}

// checkBigObject applies "SOQL with Big Objects" and the Real-Time Event
// Monitoring storage rules to a query on a big object with index ix.
func checkBigObject(q *query, ix []IndexField) error {
	names := make([]string, len(ix))
	for i, f := range ix {
		names[i] = f.Name
	}
	cmps, ok := conjuncts(q.where)
	if !ok {
		return badFilter("%s is a big object: its filters combine with AND only (no OR, no NOT)", q.object)
	}
	last := -1
	for _, c := range cmps {
		i := slices.Index(names, c.field)
		if i < 0 {
			return badFilter("%s is a big object: %s is not an index field; filters may use only %s, in that order", q.object, c.field, strings.Join(names, ", "))
		}
		if c.op == "!=" {
			return badFilter("%s is a big object: the != operator is not valid", q.object)
		}
		last = max(last, i)
	}
	for _, c := range cmps {
		i := slices.Index(names, c.field)
		if i < last && c.op != "=" {
			return badFilter("%s is a big object: only the last index field of a query (%s) may use a range operator, not %s", q.object, names[last], c.field)
		}
	}
	for i := 0; i < last; i++ {
		if !slices.ContainsFunc(cmps, func(c cmpExpr) bool { return c.field == names[i] }) {
			return badFilter("%s is a big object: the filter skips the index field %s (index: %s)", q.object, names[i], strings.Join(names, ", "))
		}
	}
	for i, it := range q.order {
		if i >= len(ix) || it.field != ix[i].Name || it.desc != ix[i].Desc {
			var want []string
			for _, f := range ix {
				dir := "ASC"
				if f.Desc {
					dir = "DESC"
				}
				want = append(want, f.Name+" "+dir)
			}
			return malformed("%s is a big object: ORDER BY may only follow its index (%s), not %s", q.object, strings.Join(want, ", "), it.field)
		}
	}
	return nil
}

// sfError writes Salesforce's REST error shape: a JSON array of one error.
func sfError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/json;charset=UTF-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode([]map[string]string{{"message": msg, "errorCode": code}})
}

// Snapshot returns the queries received so far.
func (o *Org) Snapshot() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.Queries)
}

// RejectedSoFar returns the refused queries so far.
func (o *Org) RejectedSoFar() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.Rejected)
}
