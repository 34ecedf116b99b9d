package fakesf

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"
)

// ELFOrg serves EventLogFile listings (by type and CreatedDate, and the
// GROUP BY discovery) and LogFile bodies, and mints tokens. Bodies are
// served as Salesforce writes its CSV: every line ends in CRLF, and so does
// every line break inside a quoted field. A listing's CreatedDate literal
// must be in a documented SOQL dateTime form (no fractional seconds).
type ELFOrg struct {
	mu     sync.Mutex
	files  []map[string]any // Id, EventType, Interval, CreatedDate
	bodies map[string]string
	// Truncate makes the next downloads of an Id end mid-body.
	Truncate map[string]int
	// Stall makes the next downloads of an Id send half the body and then
	// nothing more until the client goes away.
	Stall map[string]int
	// Unavailable makes the next requests (queries and downloads) answer
	// 503.
	Unavailable int
	// Batch is the most listing records one answer holds; the rest follow
	// behind nextRecordsUrl. 0 answers everything at once.
	Batch int
	// Downloads lists the files downloaded, in order.
	Downloads []string
	pages     pager
}

// Follows returns how many nextRecordsUrl pages were answered.
func (o *ELFOrg) Follows() int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.pages.follows
}

var (
	elfType    = regexp.MustCompile(`EventType = '(\w+)'`)
	elfCreated = regexp.MustCompile(`CreatedDate >= (\S+) ORDER`)
)

// Add stores (or regenerates) a file. Its line breaks (LF or CRLF) are
// stored as CRLF.
func (o *ELFOrg) Add(id, typ string, created time.Time, body string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.files = slices.DeleteFunc(o.files, func(f map[string]any) bool { return f["Id"] == id })
	o.files = append(o.files, map[string]any{"Id": id, "EventType": typ, "Interval": "Hourly",
		"CreatedDate": created.UTC().Format(restTime),
		"attributes":  map[string]any{"type": "EventLogFile", "url": "/services/data/v60.0/sobjects/EventLogFile/" + id}})
	slices.SortFunc(o.files, func(a, b map[string]any) int {
		return strings.Compare(a["CreatedDate"].(string)+a["Id"].(string), b["CreatedDate"].(string)+b["Id"].(string))
	})
	if o.bodies == nil {
		o.bodies = map[string]string{}
	}
	o.bodies[id] = CRLF(body)
}

// CRLF rewrites every line break of s (LF or CRLF) as CRLF.
func CRLF(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "\r\n", "\n"), "\n", "\r\n")
}

// ServeHTTP answers the token, query and LogFile endpoints.
func (o *ELFOrg) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	o.mu.Lock()
	defer o.mu.Unlock()
	switch {
	case r.URL.Path == "/services/oauth2/token":
		_, _ = fmt.Fprintf(w, `{"access_token":"tok","instance_url":"http://%s"}`, r.Host)
	case o.Unavailable > 0:
		o.Unavailable--
		unavailable(w)
	case o.pages.follow(w, r, "60.0", o.Batch):
	case strings.HasSuffix(r.URL.Path, "/LogFile"):
		id := strings.Split(r.URL.Path, "/")[6]
		o.Downloads = append(o.Downloads, id)
		body := o.bodies[id]
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
		_, _ = io.WriteString(w, body)
	case r.URL.Path == "/services/data/v60.0/query":
		q := r.URL.Query().Get("q")
		var out []map[string]any
		if strings.Contains(q, "GROUP BY EventType") {
			seen := map[string]bool{}
			for _, f := range o.files {
				if t := f["EventType"].(string); !seen[t] {
					seen[t] = true
					out = append(out, map[string]any{"EventType": t})
				}
			}
		} else {
			typ, created := elfType.FindStringSubmatch(q), elfCreated.FindStringSubmatch(q)
			if typ == nil || created == nil {
				sfError(w, http.StatusBadRequest, "MALFORMED_QUERY", "the fake org does not answer: "+q)
				return
			}
			from, err := ParseDateTimeLiteral(created[1])
			if err != nil {
				sfError(w, http.StatusBadRequest, "MALFORMED_QUERY", "value of filter criterion for field 'CreatedDate' must be of type dateTime: "+err.Error())
				return
			}
			for _, f := range o.files {
				if f["EventType"] != typ[1] {
					continue
				}
				c, _ := time.Parse(restTime, f["CreatedDate"].(string))
				if !c.Before(from) {
					out = append(out, f)
				}
			}
		}
		o.pages.answer(w, "60.0", out, o.Batch)
	default:
		sfError(w, http.StatusNotFound, "NOT_FOUND", "The requested resource does not exist")
	}
}

// DownloadsSoFar returns the downloads so far.
func (o *ELFOrg) DownloadsSoFar() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Clone(o.Downloads)
}

// APIEventLogFile is an API EventLogFile body of n rows, about 119 bytes
// each (450,000 rows make 50 MB), as Salesforce writes it: CRLF line ends,
// and a quoted CRLF in every row's QUERY field.
func APIEventLogFile(n int) string {
	var b strings.Builder
	b.Grow(n * 122)
	b.WriteString("EVENT_TYPE,TIMESTAMP_DERIVED,USER_ID,URI,QUERY\r\n")
	for i := range n {
		fmt.Fprintf(&b, "API,2026-11-28T10:%02d:%02d.000Z,005%012d,/services/data/v60.0/query,\"SELECT Id, Name\r\nFROM Account WHERE Id = '%d'\"\r\n",
			(i/60)%60, i%60, i, i)
	}
	return b.String()
}
