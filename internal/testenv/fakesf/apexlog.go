package fakesf

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// ApexOrg serves Apex debug logs through the Tooling API as Salesforce
// documents it (Tooling API Developer Guide, "ApexLog", "TraceFlag",
// "query"), the REST API's limits resource, and mints tokens:
//
//   - GET /services/data/v60.0/tooling/query?q=… (or …/query/?q=…) parses
//     the query as SOQL (the same parser as Org) over ApexLog and
//     TraceFlag: only their fields (LogUser.Username and LogUser.Name as
//     the LogUser relationship's), each compared with a literal of its
//     type (a dateTime unquoted in a documented form, without fractional
//     seconds; a number; a quoted string), IN with quoted strings only,
//     ORDER BY, LIMIT. Records carry attributes and the selected fields
//     only (a relationship field nested under LogUser); batches follow
//     behind a nextRecordsUrl below /tooling/query/.
//   - GET /services/data/v60.0/tooling/sobjects/ApexLog/<Id>/Body answers
//     the raw log as text/plain; a log listed but deleted since, or an
//     unknown Id, answers 404 NOT_FOUND.
//   - Errors are Salesforce's JSON arrays of {message, errorCode}:
//     MALFORMED_QUERY, INVALID_FIELD, INVALID_TYPE (400), NOT_FOUND (404),
//     SERVER_UNAVAILABLE (503) and, when told to, REQUEST_LIMIT_EXCEEDED
//     (403) on any call.
type ApexOrg struct {
	mu     sync.Mutex
	logs   []map[string]any
	bodies map[string]string
	gone   map[string]bool
	flags  []map[string]any
	// FailBody makes the next downloads of an Id's body answer 503
	// SERVER_UNAVAILABLE; ThrottleBody makes them answer 403
	// REQUEST_LIMIT_EXCEEDED.
	FailBody, ThrottleBody map[string]int
	// Throttle makes the next requests answer 403 REQUEST_LIMIT_EXCEEDED;
	// Unavailable makes them answer 503.
	Throttle, Unavailable int
	// Batch is the most records one query answer holds; the rest follow
	// behind nextRecordsUrl. 0 answers up to 2,000 at once.
	Batch int
	// Limits, if set, answers GET /services/data/v60.0/limits.
	Limits *OrgLimits
	// Queries are the queries received (refused and throttled ones too),
	// Rejected the refused ones as "ERROR_CODE: message | query",
	// Downloads the Ids whose body was served.
	Queries, Rejected, Downloads []string
	pages                        pager
}

// ApexLog is one debug log: its ApexLog record and its body.
type ApexLog struct {
	ID string
	// UserID is LogUserId; Username the LogUser's Username.
	UserID, Username string
	Start            time.Time
	// Operation, Request, Status, Application and Location default to
	// /apex/Example, API, Success, Browser and Monitoring.
	Operation, Request, Status, Application, Location string
	DurationMilliseconds                              int
	Body                                              string
	// LogLength, if set, is the size the record declares instead of the
	// body's (a log that grew after it was listed).
	LogLength int
	// Deleted makes the body answer 404 NOT_FOUND while the log is still
	// listed (deleted between the listing and the download).
	Deleted bool
}

// apexLogFields are the ApexLog fields the fake knows, by SOQL type.
var apexLogFields = map[string]string{
	"Id": "id", "LogUserId": "reference", "LogLength": "int", "Operation": "string", "Request": "string", "Status": "string",
	"StartTime": "datetime", "Application": "textarea", "DurationMilliseconds": "int", "Location": "picklist",
	"LastModifiedDate": "datetime", "SystemModstamp": "datetime", "RequestIdentifier": "string",
	"LogUser.Username": "string", "LogUser.Name": "string",
}

// traceFlagFields are the TraceFlag fields the fake knows.
var traceFlagFields = map[string]string{
	"Id": "id", "TracedEntityId": "reference", "LogType": "picklist", "DebugLevelId": "reference",
	"StartDate": "datetime", "ExpirationDate": "datetime", "CreatedDate": "datetime",
}

// Add stores a log.
func (o *ApexOrg) Add(l ApexLog) {
	o.mu.Lock()
	defer o.mu.Unlock()
	def := func(v, d string) string {
		if v == "" {
			return d
		}
		return v
	}
	length := l.LogLength
	if length == 0 {
		length = len(l.Body)
	}
	start := l.Start.UTC().Format(restTime)
	o.logs = slices.DeleteFunc(o.logs, func(r map[string]any) bool { return r["Id"] == l.ID })
	o.logs = append(o.logs, map[string]any{"Id": l.ID, "LogUserId": def(l.UserID, "005000000000001AAA"),
		"LogUser.Username": def(l.Username, "integration@example.com"), "LogUser.Name": "Integration User",
		"LogLength": float64(length), "Operation": def(l.Operation, "/apex/Example"), "Request": def(l.Request, "API"),
		"Status": def(l.Status, "Success"), "StartTime": start, "Application": def(l.Application, "Browser"),
		"DurationMilliseconds": float64(l.DurationMilliseconds), "Location": def(l.Location, "Monitoring"),
		"LastModifiedDate": start, "SystemModstamp": start, "RequestIdentifier": "TID:" + l.ID})
	if o.bodies == nil {
		o.bodies, o.gone = map[string]string{}, map[string]bool{}
	}
	o.bodies[l.ID] = l.Body
	o.gone[l.ID] = l.Deleted
}

// AddTraceFlag stores a trace flag active from start to expiration.
func (o *ApexOrg) AddTraceFlag(id string, start, expiration time.Time) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.flags = append(o.flags, map[string]any{"Id": id, "TracedEntityId": "005000000000001AAA", "LogType": "USER_DEBUG",
		"DebugLevelId": "7dl000000000001AAA", "StartDate": start.UTC().Format(restTime),
		"ExpirationDate": expiration.UTC().Format(restTime), "CreatedDate": start.UTC().Format(restTime)})
}

// SetBatch changes Batch while the org serves.
func (o *ApexOrg) SetBatch(n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.Batch = n
}

// SetThrottle changes Throttle while the org serves.
func (o *ApexOrg) SetThrottle(n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.Throttle = n
}

// SetFailBody makes the next n downloads of id's body answer 503 while the
// org serves.
func (o *ApexOrg) SetFailBody(id string, n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.FailBody == nil {
		o.FailBody = map[string]int{}
	}
	o.FailBody[id] = n
}

// QueriesSoFar returns the queries received so far.
func (o *ApexOrg) QueriesSoFar() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.Queries)
}

// RejectedSoFar returns the refused queries so far.
func (o *ApexOrg) RejectedSoFar() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.Rejected)
}

// DownloadsSoFar returns the Ids whose body was served so far.
func (o *ApexOrg) DownloadsSoFar() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.Downloads)
}

const (
	toolingQuery = "/services/data/v60.0/tooling/query"
	apexLogPath  = "/services/data/v60.0/tooling/sobjects/ApexLog/"
)

// ServeHTTP answers the token, userinfo, limits, Tooling query and ApexLog
// Body endpoints.
func (o *ApexOrg) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	o.mu.Lock()
	defer o.mu.Unlock()
	q := r.URL.Query().Get("q")
	if strings.TrimSuffix(r.URL.Path, "/") == toolingQuery {
		o.Queries = append(o.Queries, q)
	}
	switch {
	case r.URL.Path == "/services/oauth2/token":
		_, _ = fmt.Fprintf(w, `{"access_token":"tok","instance_url":"http://%s","token_type":"Bearer"}`, r.Host)
	case r.URL.Path == "/services/oauth2/userinfo":
		_, _ = io.WriteString(w, `{"organization_id":"00D000000000001EAA"}`)
	case o.Throttle > 0:
		o.Throttle--
		sfError(w, http.StatusForbidden, "REQUEST_LIMIT_EXCEEDED", "TotalRequests Limit exceeded.")
	case o.Unavailable > 0:
		o.Unavailable--
		unavailable(w)
	case o.Limits.serve(w, r, "60.0"):
	// Tooling query locators live below /tooling/query/.
	case o.pages.follow(w, r, "60.0/tooling", o.batch()):
	case strings.TrimSuffix(r.URL.Path, "/") == toolingQuery:
		rows, err := o.query(q)
		if err != nil {
			var e *soqlError
			if !errors.As(err, &e) {
				e = &soqlError{"MALFORMED_QUERY", err.Error()}
			}
			o.Rejected = append(o.Rejected, e.code+": "+e.msg+" | "+q)
			sfError(w, http.StatusBadRequest, e.code, e.msg)
			return
		}
		o.pages.answer(w, "60.0/tooling", rows, o.batch())
	case strings.HasPrefix(r.URL.Path, apexLogPath) && strings.HasSuffix(strings.TrimSuffix(r.URL.Path, "/"), "/Body"):
		o.body(w, strings.TrimSuffix(strings.TrimPrefix(strings.TrimSuffix(r.URL.Path, "/"), apexLogPath), "/Body"))
	default:
		sfError(w, http.StatusNotFound, "NOT_FOUND", "The requested resource does not exist")
	}
}

func (o *ApexOrg) batch() int {
	if o.Batch > 0 {
		return o.Batch
	}
	return 2000
}

// body answers GET …/ApexLog/<id>/Body.
func (o *ApexOrg) body(w http.ResponseWriter, id string) {
	b, ok := o.bodies[id]
	if !ok || o.gone[id] {
		sfError(w, http.StatusNotFound, "NOT_FOUND", "The requested resource does not exist")
		return
	}
	if o.FailBody[id] > 0 {
		o.FailBody[id]--
		unavailable(w)
		return
	}
	if o.ThrottleBody[id] > 0 {
		o.ThrottleBody[id]--
		sfError(w, http.StatusForbidden, "REQUEST_LIMIT_EXCEEDED", "TotalRequests Limit exceeded.")
		return
	}
	o.Downloads = append(o.Downloads, id)
	w.Header().Set("Content-Type", "text/plain")
	w.Header().Set("Content-Length", fmt.Sprint(len(b)))
	_, _ = io.WriteString(w, b)
}

// query answers one Tooling API query on ApexLog or TraceFlag.
func (o *ApexOrg) query(q string) ([]map[string]any, error) {
	pq, err := parseQuery(q)
	if err != nil {
		return nil, err
	}
	var fields map[string]string
	var stored []map[string]any
	switch pq.object {
	case "ApexLog":
		fields, stored = apexLogFields, o.logs
	case "TraceFlag":
		fields, stored = traceFlagFields, o.flags
	default:
		return nil, &soqlError{"INVALID_TYPE", fmt.Sprintf("sObject type '%s' is not supported.", pq.object)}
	}
	return toolingRows(pq, fields, stored, compareELFField, nil)
}

// checkTypes refuses a comparison of a field with a literal of another
// type: a dateTime field takes an unquoted dateTime, a number field a
// number, any other field a quoted string (IN lists included, which take
// no dateTime or number field).
func checkTypes(e expr, fields map[string]string) error {
	switch e := e.(type) {
	case andExpr:
		return cmpErr(checkTypes(e.l, fields), checkTypes(e.r, fields))
	case orExpr:
		return cmpErr(checkTypes(e.l, fields), checkTypes(e.r, fields))
	case notExpr:
		return checkTypes(e.e, fields)
	case inExpr:
		if t := fields[e.field]; t == "datetime" || t == "int" {
			return &soqlError{"INVALID_FIELD", fmt.Sprintf("value of filter criterion for field '%s' must be of type %s", e.field, t)}
		}
	case cmpExpr:
		want := "string"
		switch fields[e.field] {
		case "datetime":
			want = "datetime"
		case "int":
			want = "number"
		}
		if e.val.kind != want {
			return &soqlError{"INVALID_FIELD", fmt.Sprintf("value of filter criterion for field '%s' must be of type %s and should %sbe enclosed in quotes",
				e.field, fields[e.field], map[bool]string{true: "", false: "not "}[want == "string"])}
		}
	}
	return nil
}

func cmpErr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}
