package fakesf

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// ELFOrg serves EventLogFile as the REST API documents it (Object
// Reference, "EventLogFile"; REST API Developer Guide, "Query Hourly Event
// Log Files", "Differences Between Hourly and 24-Hour Event Logs", "Download
// Large Event Log Files Using cURL with REST"), and mints tokens:
//
//   - Queries are parsed as SOQL (the same parser as Org): SELECT of
//     EventLogFile fields, WHERE with dateTime literals in their documented
//     forms only (no fractional seconds) and each field compared with a
//     literal of its type, ORDER BY, LIMIT, and GROUP BY on the groupable
//     fields (EventType, Interval, LogFileContentType), where every selected
//     field must be grouped. Records carry attributes (AggregateResult for a
//     grouped query) and only the selected fields; dateTimes are written
//     like 2026-11-28T10:00:00.000+0000.
//   - A 24-hour (Daily) file has Sequence 0 and a LogDate at the start of
//     its UTC day; an Hourly file has Sequence ≥ 1 and the hour it covers as
//     its LogDate. Several Hourly files can exist for one hour: a later one
//     (a higher Sequence, a new Id) holds the events that arrived late.
//   - LogFile bodies are CSV as Salesforce writes it: every line ends in
//     CRLF, and so does every line break inside a quoted field. A download
//     that asks for gzip (Accept-Encoding) gets the body gzip-compressed
//     (Content-Encoding: gzip).
//   - Errors are Salesforce's JSON arrays: MALFORMED_QUERY, INVALID_FIELD,
//     INVALID_TYPE (400), NOT_FOUND (404), SERVER_UNAVAILABLE (503) and,
//     when told to, REQUEST_LIMIT_EXCEEDED (403) on any call.
type ELFOrg struct {
	mu     sync.Mutex
	files  []map[string]any // the stored records, by CreatedDate and Id
	bodies map[string]string
	// gzipped holds the bodies compressed, by Id.
	gzipped map[string]string
	// Truncate makes the next downloads of an Id end mid-body.
	Truncate map[string]int
	// Stall makes the next downloads of an Id send half the body and then
	// nothing more until the client goes away.
	Stall map[string]int
	// Unavailable makes the next requests (queries and downloads) answer
	// 503.
	Unavailable int
	// Throttle makes the next requests (queries and downloads) answer 403
	// REQUEST_LIMIT_EXCEEDED, as Salesforce does once the org's API
	// request limit is used up.
	Throttle int
	// ThrottleLogFile makes the next downloads of an Id answer 403
	// REQUEST_LIMIT_EXCEEDED.
	ThrottleLogFile map[string]int
	// Batch is the most listing records one answer holds; the rest follow
	// behind nextRecordsUrl. 0 answers everything at once.
	Batch int
	// Downloads lists the files downloaded, in order.
	Downloads []string
	// Queries lists the SOQL queries received, in order (refused and
	// throttled ones too).
	Queries []string
	// Gzipped counts the downloads answered gzip-compressed.
	Gzipped int
	pages   pager
}

// ELFFile is one EventLogFile record and its body.
type ELFFile struct {
	ID, EventType string
	// Interval is Hourly or Daily.
	Interval string
	// LogDate is the start of the period the file covers: the hour of an
	// Hourly file, the UTC day of a Daily one.
	LogDate time.Time
	// CreatedDate is when Salesforce generated the file.
	CreatedDate time.Time
	// Sequence is 0 for a Daily file; 1, 2, … for the Hourly files of one
	// hour.
	Sequence int
	Body     string
}

// elfFields are the EventLogFile fields the fake knows, by SOQL type.
var elfFields = map[string]string{
	"Id": "id", "EventType": "picklist", "Interval": "picklist", "LogFileContentType": "string",
	"LogFileFieldNames": "string", "LogFileFieldTypes": "string", "LogFile": "base64", "CreatedById": "reference",
	"CreatedDate": "datetime", "LogDate": "datetime", "LastModifiedDate": "datetime", "SystemModstamp": "datetime",
	"LogFileLength": "double", "Sequence": "int", "ApiVersion": "double",
}

// elfGroupable are the fields with the Group property.
var elfGroupable = []string{"EventType", "Interval", "LogFileContentType", "CreatedById"}

// Follows returns how many nextRecordsUrl pages were answered.
func (o *ELFOrg) Follows() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.pages.follows
}

// Add stores (or regenerates) an Hourly file of sequence 1 covering the
// hour before created. Its line breaks (LF or CRLF) are stored as CRLF.
func (o *ELFOrg) Add(id, typ string, created time.Time, body string) {
	o.AddFile(ELFFile{ID: id, EventType: typ, Interval: "Hourly", LogDate: created.UTC().Truncate(time.Hour).Add(-time.Hour),
		CreatedDate: created, Sequence: 1, Body: body})
}

// AddFile stores a file; a file with the Id of a stored one replaces it
// (regenerated in place). Its line breaks (LF or CRLF) are stored as CRLF.
func (o *ELFOrg) AddFile(f ELFFile) {
	if f.Interval != "Hourly" && f.Interval != "Daily" {
		panic("fakesf: an EventLogFile interval is Hourly or Daily, not " + f.Interval)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	body := CRLF(f.Body)
	header, _, _ := strings.Cut(body, "\r\n")
	o.files = slices.DeleteFunc(o.files, func(r map[string]any) bool { return r["Id"] == f.ID })
	o.files = append(o.files, map[string]any{"Id": f.ID, "EventType": f.EventType, "Interval": f.Interval,
		"LogDate": f.LogDate.UTC().Format(restTime), "CreatedDate": f.CreatedDate.UTC().Format(restTime),
		"Sequence": float64(f.Sequence), "LogFileLength": float64(len(body)), "LogFileContentType": "CSV",
		"LogFileFieldNames": strings.ReplaceAll(header, `"`, ""), "ApiVersion": 60.0, "CreatedById": "005000000000001AAA",
		"LastModifiedDate": f.CreatedDate.UTC().Format(restTime), "SystemModstamp": f.CreatedDate.UTC().Format(restTime),
		"LogFile": "/services/data/v60.0/sobjects/EventLogFile/" + f.ID + "/LogFile"})
	slices.SortFunc(o.files, func(a, b map[string]any) int {
		return strings.Compare(a["CreatedDate"].(string)+a["Id"].(string), b["CreatedDate"].(string)+b["Id"].(string))
	})
	if o.bodies == nil {
		o.bodies = map[string]string{}
	}
	o.bodies[f.ID] = body
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestSpeed)
	_, _ = io.WriteString(zw, body)
	_ = zw.Close()
	if o.gzipped == nil {
		o.gzipped = map[string]string{}
	}
	o.gzipped[f.ID] = b.String()
}

// SetThrottle changes Throttle while the org serves.
func (o *ELFOrg) SetThrottle(n int) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.Throttle = n
}

// CRLF rewrites every line break of s (LF or CRLF) as CRLF.
func CRLF(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\n", "\r\n")
}

// ServeHTTP answers the token, query and LogFile endpoints.
func (o *ELFOrg) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	o.mu.Lock()
	defer o.mu.Unlock()
	q := r.URL.Query().Get("q")
	if r.URL.Path == "/services/data/v60.0/query" {
		o.Queries = append(o.Queries, q)
	}
	switch {
	case r.URL.Path == "/services/oauth2/token":
		_, _ = fmt.Fprintf(w, `{"access_token":"tok","instance_url":"http://%s"}`, r.Host)
	case o.Throttle > 0:
		o.Throttle--
		sfError(w, http.StatusForbidden, "REQUEST_LIMIT_EXCEEDED", "TotalRequests Limit exceeded.")
	case o.Unavailable > 0:
		o.Unavailable--
		unavailable(w)
	case o.pages.follow(w, r, "60.0", o.Batch):
	case strings.HasPrefix(r.URL.Path, "/services/data/v60.0/sobjects/EventLogFile/") && strings.HasSuffix(r.URL.Path, "/LogFile"):
		o.download(w, r, strings.Split(r.URL.Path, "/")[6])
	case r.URL.Path == "/services/data/v60.0/query":
		rows, grouped, err := o.query(q)
		if err != nil {
			sfError(w, http.StatusBadRequest, err.code, err.msg)
			return
		}
		if grouped { // aggregate results come in one answer
			o.pages.answer(w, "60.0", rows, 0)
			return
		}
		o.pages.answer(w, "60.0", rows, o.Batch)
	default:
		sfError(w, http.StatusNotFound, "NOT_FOUND", "The requested resource does not exist")
	}
}

// download answers GET …/EventLogFile/<id>/LogFile: the body, compressed
// when the client accepts gzip, cut short when told to.
func (o *ELFOrg) download(w http.ResponseWriter, r *http.Request, id string) {
	body, ok := o.bodies[id]
	if !ok {
		sfError(w, http.StatusNotFound, "NOT_FOUND", "The requested resource does not exist")
		return
	}
	if o.ThrottleLogFile[id] > 0 {
		o.ThrottleLogFile[id]--
		sfError(w, http.StatusForbidden, "REQUEST_LIMIT_EXCEEDED", "TotalRequests Limit exceeded.")
		return
	}
	o.Downloads = append(o.Downloads, id)
	if acceptsGzip(r.Header.Get("Accept-Encoding")) {
		body = o.gzipped[id]
		w.Header().Set("Content-Encoding", "gzip")
		o.Gzipped++
	}
	w.Header().Set("Content-Type", "text/csv")
	if o.Stall[id] > 0 {
		o.Stall[id]--
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		_, _ = io.WriteString(w, body[:len(body)/2])
		w.(http.Flusher).Flush()
		o.mu.Unlock()
		<-r.Context().Done()
		o.mu.Lock()
		return
	}
	if o.Truncate[id] > 0 {
		o.Truncate[id]--
		w.Header().Set("Content-Length", fmt.Sprint(len(body)))
		_, _ = io.WriteString(w, body[:len(body)/2])
		conn, _, _ := w.(http.Hijacker).Hijack()
		_ = conn.Close()
		return
	}
	w.Header().Set("Content-Length", fmt.Sprint(len(body)))
	_, _ = io.WriteString(w, body)
}

// acceptsGzip reports whether an Accept-Encoding header admits gzip.
func acceptsGzip(h string) bool {
	for part := range strings.SplitSeq(h, ",") {
		coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		if strings.EqualFold(strings.TrimSpace(coding), "gzip") && strings.ReplaceAll(params, " ", "") != "q=0" {
			return true
		}
	}
	return false
}

var groupBy = regexp.MustCompile(`(?is)^(.*?)\s+GROUP\s+BY\s+(\w+(?:\s*,\s*\w+)*)(.*)$`)

// query answers one SOQL query on EventLogFile; grouped reports a GROUP BY.
func (o *ELFOrg) query(q string) (rows []map[string]any, grouped bool, _ *soqlError) {
	var group []string
	if m := groupBy.FindStringSubmatch(q); m != nil {
		q = m[1] + m[3]
		for f := range strings.SplitSeq(m[2], ",") {
			group = append(group, strings.TrimSpace(f))
		}
	}
	pq, err := parseQuery(q)
	if err != nil {
		var e *soqlError
		if !errors.As(err, &e) {
			e = &soqlError{"MALFORMED_QUERY", err.Error()}
		}
		return nil, false, e
	}
	if pq.object != "EventLogFile" {
		return nil, false, &soqlError{"INVALID_TYPE", fmt.Sprintf("sObject type '%s' is not supported by the fake EventLogFile org.", pq.object)}
	}
	if pq.fieldsFn != "" {
		return nil, false, &soqlError{"MALFORMED_QUERY", "the fake EventLogFile org does not implement FIELDS()"}
	}
	referenced := append(slices.Clone(pq.fields), group...)
	referenced = append(referenced, fieldsOf(pq.where, nil)...)
	for _, it := range pq.order {
		referenced = append(referenced, it.field)
	}
	for _, f := range referenced {
		if _, ok := elfFields[f]; !ok {
			return nil, false, &soqlError{"INVALID_FIELD", fmt.Sprintf("No such column '%s' on entity 'EventLogFile'.", f)}
		}
	}
	if e := checkELFFilter(pq.where); e != nil {
		return nil, false, e
	}
	for _, f := range group {
		if !slices.Contains(elfGroupable, f) {
			return nil, false, &soqlError{"INVALID_FIELD", fmt.Sprintf("field '%s' can not be grouped in a query call", f)}
		}
	}
	if group != nil {
		for _, f := range pq.fields {
			if !slices.Contains(group, f) {
				return nil, false, &soqlError{"MALFORMED_QUERY", "Field must be grouped or aggregated: " + f}
			}
		}
		for _, it := range pq.order {
			if !slices.Contains(group, it.field) {
				return nil, false, &soqlError{"MALFORMED_QUERY", "Ordered field must be grouped or aggregated: " + it.field}
			}
		}
	}
	var matched []map[string]any
	for _, f := range o.files {
		if pq.where == nil || pq.where.eval(f) {
			matched = append(matched, f)
		}
	}
	sortRows(matched, pq.order, compareELFField)
	if group != nil {
		seen := map[string]bool{}
		for _, f := range matched {
			rec := map[string]any{"attributes": map[string]any{"type": "AggregateResult"}}
			var key []string
			for _, g := range group {
				key = append(key, fmt.Sprint(f[g]))
			}
			if seen[strings.Join(key, "\x00")] {
				continue
			}
			seen[strings.Join(key, "\x00")] = true
			for _, fl := range pq.fields {
				rec[fl] = f[fl]
			}
			rows = append(rows, rec)
		}
	} else {
		for _, f := range matched {
			rec := map[string]any{"attributes": map[string]any{"type": "EventLogFile",
				"url": "/services/data/v60.0/sobjects/EventLogFile/" + f["Id"].(string)}}
			for _, fl := range pq.fields {
				rec[fl] = f[fl]
			}
			rows = append(rows, rec)
		}
	}
	if pq.limit >= 0 && len(rows) > pq.limit {
		rows = rows[:pq.limit]
	}
	return rows, group != nil, nil
}

// compareELFField orders two field values: numbers by value, the rest as
// compareField does.
func compareELFField(a, b any) int {
	if af, ok := a.(float64); ok {
		if bf, ok := b.(float64); ok {
			return cmp.Compare(af, bf)
		}
	}
	return compareField(a, b)
}

// checkELFFilter refuses a comparison of a field with a literal of another
// type (a dateTime field takes a dateTime literal, unquoted; a picklist or
// string field a quoted string; a number field a number), and a filter on
// a field that cannot be filtered (LogFile).
func checkELFFilter(e expr) *soqlError {
	switch e := e.(type) {
	case andExpr:
		if err := checkELFFilter(e.l); err != nil {
			return err
		}
		return checkELFFilter(e.r)
	case orExpr:
		if err := checkELFFilter(e.l); err != nil {
			return err
		}
		return checkELFFilter(e.r)
	case notExpr:
		return checkELFFilter(e.e)
	case cmpExpr:
		want := "string"
		switch elfFields[e.field] {
		case "base64":
			return &soqlError{"INVALID_FIELD", fmt.Sprintf("field '%s' can not be filtered in a query call", e.field)}
		case "datetime":
			want = "datetime"
		case "double", "int":
			want = "number"
		}
		if e.val.kind != want {
			return &soqlError{"INVALID_FIELD", fmt.Sprintf("value of filter criterion for field '%s' must be of type %s", e.field, elfFields[e.field])}
		}
	}
	return nil
}

// DownloadsSoFar returns the downloads so far.
func (o *ELFOrg) DownloadsSoFar() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.Downloads)
}

// QueriesSoFar returns the queries received so far.
func (o *ELFOrg) QueriesSoFar() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.Queries)
}

// APIEventLogFile is an API EventLogFile body of n rows, about 119 bytes
// each (450,000 rows make 50 MB), as Salesforce writes an Hourly file: the
// hour's events in time order (TIMESTAMP_DERIVED spread evenly over 10:00 to
// 10:59:59.999), CRLF line ends, and a quoted CRLF in every row's QUERY
// field.
func APIEventLogFile(n int) string {
	var b strings.Builder
	b.Grow(n * 122)
	b.WriteString("EVENT_TYPE,TIMESTAMP_DERIVED,USER_ID,URI,QUERY\r\n")
	for i := range n {
		ms := int64(i) * 3_600_000 / int64(max(n, 1))
		fmt.Fprintf(&b, "API,2026-11-28T10:%02d:%02d.%03dZ,005%012d,/services/data/v60.0/query,\"SELECT Id, Name\r\nFROM Account WHERE Id = '%d'\"\r\n",
			ms/60_000, ms/1000%60, ms%1000, i, i)
	}
	return b.String()
}

// LoginEventLogFile is a Login EventLogFile body of n rows whose JSON lines
// are about the size of fakepubsub.LoginEvent's (11 fields, 317 bytes,
// against 12 fields and 304 bytes): the same logins as the Pub/Sub stream carries, one every
// millisecond from 10:00, with a failed one in every 20 (as
// fakepubsub.LoginEvent), CRLF line ends. It lets the two sources be
// compared on rows of similar size.
func LoginEventLogFile(n int) string {
	var b strings.Builder
	b.Grow(n * 230)
	b.WriteString("EVENT_TYPE,TIMESTAMP_DERIVED,REQUEST_ID,ORGANIZATION_ID,USER_ID,USER_NAME,SOURCE_IP,LOGIN_STATUS,LOGIN_TYPE,BROWSER_TYPE,URI\r\n")
	for i := range n {
		st := "LOGIN_NO_ERROR"
		switch i % 20 {
		case 9:
			st = "LOGIN_ERROR_INVALID_PASSWORD"
		case 19:
			st = "LOGIN_ERROR_COMPUTER_ACTIVATION"
		}
		ms := int64(i) % 3_600_000
		fmt.Fprintf(&b, "Login,2026-11-28T10:%02d:%02d.%03dZ,4-login-%d,00D000000000001,005000000000001,user%d@example.com,192.0.2.10,%s,Application,Chrome,/index.jsp\r\n",
			ms/60_000, ms/1000%60, ms%1000, i, i%50, st)
	}
	return b.String()
}
