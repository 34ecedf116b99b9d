package fakesf_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/testenv/fakesf"
)

// get sends a GET to the org and returns the status and the body.
func get(t *testing.T, srv *httptest.Server, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func query(t *testing.T, srv *httptest.Server, q string) (int, string) {
	t.Helper()
	return get(t, srv, "/services/data/v60.0/query?"+url.Values{"q": {q}}.Encode())
}

func TestOrgIsAsStrictAsSalesforce(t *testing.T) {
	org := &fakesf.Org{}
	base := time.Date(2026, 11, 28, 9, 59, 1, 360e6, time.UTC)
	for i, id := range []string{"A", "B", "C"} {
		org.Add(id, base.Add(time.Duration(i)*700*time.Millisecond))
		org.AddTo("LoginHistory", "LoginTime", id, base.Add(time.Duration(i)*700*time.Millisecond))
	}
	srv := httptest.NewServer(org)
	defer srv.Close()
	for _, tc := range []struct{ q, code string }{
		// dateTime literals: only the documented forms.
		{"SELECT FIELDS(ALL) FROM LoginHistory WHERE LoginTime >= 2026-11-28T09:59:01.360Z ORDER BY LoginTime ASC LIMIT 200", "MALFORMED_QUERY"},
		{"SELECT FIELDS(ALL) FROM LoginHistory WHERE LoginTime >= 2026-11-28T09:59:01 LIMIT 200", "MALFORMED_QUERY"},
		{"SELECT FIELDS(ALL) FROM LoginHistory WHERE LoginTime >= '2026-11-28T09:59:01Z' LIMIT 200", ""}, // a string: compared as text, accepted
		// FIELDS(ALL) needs LIMIT ≤ 200.
		{"SELECT FIELDS(ALL) FROM LoginHistory", "MALFORMED_QUERY"},
		{"SELECT FIELDS(ALL) FROM LoginHistory LIMIT 201", "MALFORMED_QUERY"},
		{"SELECT FIELDS(STANDARD) FROM LoginHistory", ""},
		{"SELECT Nope FROM LoginHistory", "INVALID_FIELD"},
		{"SELECT Id FROM Nope", "INVALID_TYPE"},
		// Big objects: the index, in order, newest first, never Id, no OR.
		{"SELECT FIELDS(ALL) FROM LoginEvent WHERE EventDate >= 2026-11-28T09:59:01Z ORDER BY EventDate ASC LIMIT 200", "MALFORMED_QUERY"},
		{"SELECT FIELDS(ALL) FROM LoginEvent WHERE EventDate >= 2026-11-28T09:59:01Z ORDER BY EventDate DESC, Id ASC LIMIT 200", "MALFORMED_QUERY"},
		{"SELECT FIELDS(ALL) FROM LoginEvent ORDER BY Id LIMIT 200", "MALFORMED_QUERY"},
		{"SELECT FIELDS(ALL) FROM LoginEvent WHERE Id > 'A' LIMIT 200", "INVALID_QUERY_FILTER_OPERATOR"},
		{"SELECT FIELDS(ALL) FROM LoginEvent WHERE Username = 'uA' LIMIT 200", "INVALID_QUERY_FILTER_OPERATOR"},
		{"SELECT FIELDS(ALL) FROM LoginEvent WHERE EventIdentifier = 'ei-A' LIMIT 200", "INVALID_QUERY_FILTER_OPERATOR"},
		{"SELECT FIELDS(ALL) FROM LoginEvent WHERE EventDate > 2026-11-28T09:59:01Z OR EventDate < 2026-11-28T09:00:00Z LIMIT 200", "INVALID_QUERY_FILTER_OPERATOR"},
		{"SELECT FIELDS(ALL) FROM LoginEvent WHERE EventDate != 2026-11-28T09:59:01Z LIMIT 200", "INVALID_QUERY_FILTER_OPERATOR"},
		{"SELECT FIELDS(ALL) FROM LoginEvent WHERE EventDate > 2026-11-28T09:59:01Z AND EventIdentifier = 'ei-A' LIMIT 200", "INVALID_QUERY_FILTER_OPERATOR"},
		{"SELECT FIELDS(ALL) FROM LoginEvent WHERE EventDate = 2026-11-28T09:59:01Z AND EventIdentifier > 'ei-A' LIMIT 200", ""},
		{"SELECT FIELDS(ALL) FROM LoginEvent WHERE EventDate >= 2026-11-28T09:59:01Z AND EventDate < 2026-11-28T09:59:03Z ORDER BY EventDate DESC LIMIT 200", ""},
		// Ordinary objects take OR, Id and either direction.
		{"SELECT FIELDS(ALL) FROM LoginHistory WHERE (LoginTime > 2026-11-28T09:59:01Z OR (LoginTime = 2026-11-28T09:59:01Z AND Id > 'A')) ORDER BY LoginTime ASC, Id ASC LIMIT 200", ""},
	} {
		status, body := query(t, srv, tc.q)
		if tc.code == "" {
			if status != 200 {
				t.Errorf("%s: %d %s, want it answered", tc.q, status, body)
			}
			continue
		}
		var errs []struct{ Message, ErrorCode string }
		if status != 400 || json.Unmarshal([]byte(body), &errs) != nil || len(errs) != 1 || errs[0].ErrorCode != tc.code || errs[0].Message == "" {
			t.Errorf("%s: %d %s, want 400 and [{message, errorCode: %s}]", tc.q, status, body, tc.code)
		}
	}
	if len(org.RejectedSoFar()) != 15 {
		t.Errorf("%d queries recorded as refused, want 15", len(org.RejectedSoFar()))
	}
}

func TestOrgAnswersLikeTheRESTAPI(t *testing.T) {
	org := &fakesf.Org{}
	base := time.Date(2026, 11, 28, 9, 59, 1, 360e6, time.UTC)
	org.Add("A", base)
	org.Add("B", base.Add(540*time.Millisecond))
	org.Add("C", base.Add(640*time.Millisecond))
	srv := httptest.NewServer(org)
	defer srv.Close()
	status, body := query(t, srv, "SELECT FIELDS(ALL) FROM LoginEvent WHERE EventDate >= 2026-11-28T09:59:01Z AND EventDate < 2026-11-28T09:59:02Z ORDER BY EventDate DESC LIMIT 200")
	var page struct {
		TotalSize int              `json:"totalSize"`
		Done      bool             `json:"done"`
		Records   []map[string]any `json:"records"`
	}
	if status != 200 || json.Unmarshal([]byte(body), &page) != nil {
		t.Fatalf("%d %s", status, body)
	}
	if page.TotalSize != 2 || !page.Done || len(page.Records) != 2 || page.Records[0]["Id"] != "B" || page.Records[1]["Id"] != "A" ||
		page.Records[1]["EventDate"] != "2026-11-28T09:59:01.360+0000" || page.Records[0]["EventIdentifier"] != "ei-B" {
		t.Fatalf("answer %s: want B then A (newest first), dateTimes as 2026-11-28T09:59:01.360+0000", body)
	}
	attrs, _ := page.Records[0]["attributes"].(map[string]any)
	if attrs["type"] != "LoginEvent" || attrs["url"] != "/services/data/v60.0/sobjects/LoginEvent/B" {
		t.Fatalf("attributes %v", attrs)
	}
	status, body = get(t, srv, "/services/data/v60.0/sobjects/LoginEvent/describe")
	if status != 200 || !strings.Contains(body, `"name":"EventIdentifier"`) || !strings.Contains(body, `"queryable":true`) {
		t.Fatalf("describe: %d %s", status, body)
	}
	if status, body = get(t, srv, "/services/data/v60.0/sobjects/Nope/describe"); status != 404 || !strings.Contains(body, `"errorCode":"NOT_FOUND"`) {
		t.Fatalf("describe of an unknown object: %d %s", status, body)
	}
}

func TestELFOrgServesCSVAsSalesforceWritesIt(t *testing.T) {
	org := &fakesf.ELFOrg{}
	created := time.Date(2026, 11, 28, 9, 0, 0, 0, time.UTC)
	org.Add("0AT1", "ReportExport", created, "EVENT_TYPE,REPORT_DESCRIPTION\nReportExport,\"line one\nline two\"\n")
	srv := httptest.NewServer(org)
	defer srv.Close()
	if status, body := get(t, srv, "/services/data/v60.0/sobjects/EventLogFile/0AT1/LogFile"); status != 200 ||
		body != "EVENT_TYPE,REPORT_DESCRIPTION\r\nReportExport,\"line one\r\nline two\"\r\n" {
		t.Fatalf("LogFile: %d %q, want CRLF line ends, inside quotes too", status, body)
	}
	list := "SELECT Id, CreatedDate FROM EventLogFile WHERE EventType = 'ReportExport' AND Interval = 'Hourly' AND CreatedDate >= %s ORDER BY CreatedDate ASC, Id ASC"
	if status, body := query(t, srv, strings.Replace(list, "%s", "2026-11-28T08:00:00.000Z", 1)); status != 400 || !strings.Contains(body, `"errorCode":"MALFORMED_QUERY"`) {
		t.Fatalf("a fractional literal: %d %s", status, body)
	}
	if status, body := query(t, srv, strings.Replace(list, "%s", "2026-11-28T08:00:00Z", 1)); status != 200 || !strings.Contains(body, `"Id":"0AT1"`) ||
		!strings.Contains(body, `"CreatedDate":"2026-11-28T09:00:00.000+0000"`) || !strings.Contains(body, `"attributes"`) {
		t.Fatalf("listing: %d %s", status, body)
	}
}
