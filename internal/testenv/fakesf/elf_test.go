package fakesf_test

import (
	"compress/gzip"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/testenv/fakesf"
)

// elfDay is an org with Event Monitoring for one type on 2026-11-28: the
// Daily file of the day, two Hourly files of 10:00 (the second, sequence
// 2, generated later with the events that arrived late) and one of 11:00.
func elfDay(t *testing.T) (*fakesf.ELFOrg, *httptest.Server) {
	t.Helper()
	org := &fakesf.ELFOrg{}
	d := time.Date(2026, 11, 28, 0, 0, 0, 0, time.UTC)
	body := "EVENT_TYPE,TIMESTAMP_DERIVED,REQUEST_ID\nAPI,2026-11-28T10:00:00.000Z,r1\n"
	org.AddFile(fakesf.ELFFile{ID: "0ATd", EventType: "API", Interval: "Daily", LogDate: d, CreatedDate: d.Add(27 * time.Hour), Sequence: 0, Body: body})
	org.AddFile(fakesf.ELFFile{ID: "0ATh1", EventType: "API", Interval: "Hourly", LogDate: d.Add(10 * time.Hour), CreatedDate: d.Add(13 * time.Hour), Sequence: 1, Body: body})
	org.AddFile(fakesf.ELFFile{ID: "0ATh2", EventType: "API", Interval: "Hourly", LogDate: d.Add(10 * time.Hour), CreatedDate: d.Add(17 * time.Hour), Sequence: 2, Body: body})
	org.AddFile(fakesf.ELFFile{ID: "0ATh3", EventType: "API", Interval: "Hourly", LogDate: d.Add(11 * time.Hour), CreatedDate: d.Add(14 * time.Hour), Sequence: 1, Body: body})
	srv := httptest.NewServer(org)
	t.Cleanup(srv.Close)
	return org, srv
}

type listing struct {
	TotalSize int              `json:"totalSize"`
	Done      bool             `json:"done"`
	Records   []map[string]any `json:"records"`
}

func list(t *testing.T, srv *httptest.Server, q string) listing {
	t.Helper()
	status, body := query(t, srv, q)
	var l listing
	if status != 200 || json.Unmarshal([]byte(body), &l) != nil {
		t.Fatalf("%s: %d %s", q, status, body)
	}
	return l
}

func ids(l listing) string {
	var out []string
	for _, r := range l.Records {
		out = append(out, r["Id"].(string))
	}
	return strings.Join(out, ",")
}

func TestELFOrgServesDailyAndHourlyFilesWithSequence(t *testing.T) {
	_, srv := elfDay(t)
	const fields = "SELECT Id, EventType, Interval, LogDate, CreatedDate, Sequence, LogFile FROM EventLogFile WHERE "
	both := list(t, srv, fields+"EventType = 'API' AND CreatedDate >= 2026-11-28T00:00:00Z ORDER BY CreatedDate ASC, Id ASC")
	if ids(both) != "0ATh1,0ATh3,0ATh2,0ATd" || both.TotalSize != 4 || !both.Done {
		t.Fatalf("both intervals, by CreatedDate: %s", ids(both))
	}
	d := both.Records[3]
	attrs, _ := d["attributes"].(map[string]any)
	if d["Interval"] != "Daily" || d["Sequence"] != 0.0 || d["LogDate"] != "2026-11-28T00:00:00.000+0000" ||
		d["CreatedDate"] != "2026-11-29T03:00:00.000+0000" || d["LogFile"] != "/services/data/v60.0/sobjects/EventLogFile/0ATd/LogFile" ||
		attrs["type"] != "EventLogFile" || attrs["url"] != "/services/data/v60.0/sobjects/EventLogFile/0ATd" {
		t.Fatalf("the Daily record %v", d)
	}
	if h := both.Records[2]; h["Interval"] != "Hourly" || h["Sequence"] != 2.0 || h["LogDate"] != "2026-11-28T10:00:00.000+0000" {
		t.Fatalf("the late Hourly record %v", h)
	}
	for q, want := range map[string]string{
		fields + "Interval = 'Hourly' ORDER BY CreatedDate ASC, Id ASC":                                                              "0ATh1,0ATh3,0ATh2",
		fields + "Sequence != 0 ORDER BY CreatedDate ASC, Id ASC":                                                                    "0ATh1,0ATh3,0ATh2",
		fields + "Sequence >= 0 AND Interval = 'Daily'":                                                                              "0ATd",
		fields + "Interval = 'Hourly' AND LogDate >= 2026-11-28T10:00:00Z AND LogDate < 2026-11-28T11:00:00Z ORDER BY Sequence DESC": "0ATh2,0ATh1",
		fields + "Interval = 'Hourly' AND LogDate >= 2026-11-29T00:00:00Z LIMIT 1":                                                   "",
	} {
		if got := ids(list(t, srv, q)); got != want {
			t.Errorf("%s: %s, want %s", q, got, want)
		}
	}
	// Only the selected fields come back.
	if r := list(t, srv, "SELECT Id FROM EventLogFile LIMIT 1").Records[0]; len(r) != 2 {
		t.Errorf("SELECT Id answered %v", r)
	}
}

func TestELFOrgGroupsAndRefusesWhatSalesforceRefuses(t *testing.T) {
	_, srv := elfDay(t)
	g := list(t, srv, "SELECT EventType, Interval FROM EventLogFile GROUP BY EventType, Interval")
	if len(g.Records) != 2 {
		t.Fatalf("GROUP BY EventType, Interval: %v", g.Records)
	}
	for _, r := range g.Records {
		if attrs, _ := r["attributes"].(map[string]any); attrs["type"] != "AggregateResult" || r["EventType"] != "API" || len(r) != 3 {
			t.Fatalf("aggregate record %v", r)
		}
	}
	if g := list(t, srv, "SELECT EventType FROM EventLogFile WHERE Interval = 'Daily' GROUP BY EventType"); len(g.Records) != 1 {
		t.Fatalf("GROUP BY EventType of the Daily files: %v", g.Records)
	}
	for q, code := range map[string]string{
		"SELECT Id, EventType FROM EventLogFile GROUP BY EventType":                                        "MALFORMED_QUERY", // Id not grouped
		"SELECT LogDate FROM EventLogFile GROUP BY LogDate":                                                "INVALID_FIELD",   // not groupable
		"SELECT Id FROM EventLogFile WHERE CreatedDate >= 2026-11-28T00:00:00.000Z":                        "MALFORMED_QUERY", // fractional seconds
		"SELECT Id FROM EventLogFile WHERE CreatedDate >= '2026-11-28T00:00:00Z'":                          "INVALID_FIELD",   // quoted
		"SELECT Id FROM EventLogFile WHERE LogDate >= 2026-11-28":                                          "INVALID_FIELD",   // a date for a dateTime
		"SELECT Id FROM EventLogFile WHERE Sequence = '1'":                                                 "INVALID_FIELD",   // a string for a number
		"SELECT Id FROM EventLogFile WHERE Interval = Hourly":                                              "MALFORMED_QUERY", // unquoted
		"SELECT Id FROM EventLogFile WHERE LogFile = 'x'":                                                  "INVALID_FIELD",   // base64
		"SELECT Nope FROM EventLogFile":                                                                    "INVALID_FIELD",
		"SELECT Id FROM EventLogFiles":                                                                     "INVALID_TYPE",
		"SELECT Id FROM EventLogFile WHERE EventType = 'API' AND CreatedDate >= 2026-11-28T00:00:00 ORDER": "MALFORMED_QUERY",
	} {
		status, body := query(t, srv, q)
		var errs []struct{ Message, ErrorCode string }
		if status != 400 || json.Unmarshal([]byte(body), &errs) != nil || len(errs) != 1 || errs[0].ErrorCode != code || errs[0].Message == "" {
			t.Errorf("%s: %d %s, want 400 and [{message, errorCode: %s}]", q, status, body, code)
		}
	}
}

func TestELFOrgCompressesWhenAsked(t *testing.T) {
	org, srv := elfDay(t)
	want := "EVENT_TYPE,TIMESTAMP_DERIVED,REQUEST_ID\r\nAPI,2026-11-28T10:00:00.000Z,r1\r\n"
	// A transport that leaves the encoding to the caller.
	client := &http.Client{Transport: &http.Transport{DisableCompression: true}}
	download := func(accept string) (http.Header, string) {
		req, _ := http.NewRequest(http.MethodGet, srv.URL+"/services/data/v60.0/sobjects/EventLogFile/0ATd/LogFile", nil)
		if accept != "" {
			req.Header.Set("Accept-Encoding", accept)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.Header, string(b)
	}
	if h, body := download(""); h.Get("Content-Encoding") != "" || body != want {
		t.Fatalf("without Accept-Encoding: %v %q", h, body)
	}
	if h, _ := download("gzip;q=0, identity"); h.Get("Content-Encoding") != "" {
		t.Fatalf("gzip;q=0 was compressed: %v", h)
	}
	h, body := download("deflate, gzip")
	if h.Get("Content-Encoding") != "gzip" {
		t.Fatalf("Accept-Encoding: gzip answered %v", h)
	}
	zr, err := gzip.NewReader(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := io.ReadAll(zr)
	if err != nil || string(plain) != want {
		t.Fatalf("gunzipped %q, %v", plain, err)
	}
	if org.Gzipped != 1 {
		t.Fatalf("%d downloads counted compressed, want 1", org.Gzipped)
	}
	if status, body := get(t, srv, "/services/data/v60.0/sobjects/EventLogFile/0ATnope/LogFile"); status != 404 || !strings.Contains(body, `"errorCode":"NOT_FOUND"`) {
		t.Fatalf("an unknown file: %d %s", status, body)
	}
}

func TestELFOrgAnswersRequestLimitExceededWhenTold(t *testing.T) {
	org, srv := elfDay(t)
	org.SetThrottle(2)
	org.ThrottleLogFile = map[string]int{"0ATd": 1}
	limited := func(status int, body string) bool {
		var errs []map[string]string
		return status == 403 && json.Unmarshal([]byte(body), &errs) == nil && len(errs) == 1 && len(errs[0]) == 2 &&
			errs[0]["errorCode"] == "REQUEST_LIMIT_EXCEEDED" && errs[0]["message"] == "TotalRequests Limit exceeded."
	}
	const limit = `[{"message":"TotalRequests Limit exceeded.","errorCode":"REQUEST_LIMIT_EXCEEDED"}]`
	for _, path := range []string{"/services/data/v60.0/query?q=SELECT+Id+FROM+EventLogFile", "/services/data/v60.0/sobjects/EventLogFile/0ATh1/LogFile"} {
		if status, body := get(t, srv, path); !limited(status, body) {
			t.Fatalf("%s: %d %s, want 403 %s", path, status, body, limit)
		}
	}
	if status, _ := get(t, srv, "/services/data/v60.0/sobjects/EventLogFile/0ATh1/LogFile"); status != 200 {
		t.Fatalf("after the throttled answers: %d", status)
	}
	if status, body := get(t, srv, "/services/data/v60.0/sobjects/EventLogFile/0ATd/LogFile"); !limited(status, body) {
		t.Fatalf("a throttled download: %d %s", status, body)
	}
	if status, _ := get(t, srv, "/services/data/v60.0/sobjects/EventLogFile/0ATd/LogFile"); status != 200 {
		t.Fatalf("the download again: %d", status)
	}
	if d := org.DownloadsSoFar(); strings.Join(d, ",") != "0ATh1,0ATd" {
		t.Fatalf("downloads %v: the throttled ones are not downloads", d)
	}
}
