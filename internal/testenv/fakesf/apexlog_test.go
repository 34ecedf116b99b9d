package fakesf_test

import (
	"encoding/json"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/testenv/fakesf"
)

func tooling(t *testing.T, srv *httptest.Server, q string) (int, string) {
	t.Helper()
	return get(t, srv, "/services/data/v60.0/tooling/query?"+url.Values{"q": {q}}.Encode())
}

// apexDay is an org with three debug logs of two users at 10:00 on
// 2026-11-28 and one trace flag that expired at 09:00.
func apexDay(t *testing.T) (*fakesf.ApexOrg, *httptest.Server) {
	t.Helper()
	org := &fakesf.ApexOrg{Limits: fakesf.DefaultLimits()}
	at := time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC)
	org.Add(fakesf.ApexLog{ID: "07L000000000002AAA", Username: "a@example.com", Start: at, Body: "60.0 APEX_CODE,DEBUG\nline\n"})
	org.Add(fakesf.ApexLog{ID: "07L000000000001AAA", Username: "b@example.com", Start: at, Body: "body 1"})
	org.Add(fakesf.ApexLog{ID: "07L000000000003AAA", Username: "a@example.com", Start: at.Add(1500 * time.Millisecond), Body: "body 3",
		Status: "System.NullPointerException: Attempt to de-reference a null object", DurationMilliseconds: 42})
	org.Add(fakesf.ApexLog{ID: "07L000000000004AAA", Start: at.Add(time.Hour), Body: "gone", Deleted: true})
	org.AddTraceFlag("7tf000000000001AAA", at.Add(-2*time.Hour), at.Add(-time.Hour))
	srv := httptest.NewServer(org)
	t.Cleanup(srv.Close)
	return org, srv
}

func TestApexOrgListsLogsWithTheCompoundCursor(t *testing.T) {
	_, srv := apexDay(t)
	const sel = "SELECT Id, LogUserId, LogLength, Operation, Request, Status, StartTime, Application, DurationMilliseconds, Location FROM ApexLog WHERE "
	list := func(q string) listing {
		status, body := tooling(t, srv, q)
		var l listing
		if status != 200 || json.Unmarshal([]byte(body), &l) != nil {
			t.Fatalf("%s: %d %s", q, status, body)
		}
		return l
	}
	all := list(sel + "StartTime >= 2026-11-28T00:00:00Z ORDER BY StartTime ASC, Id ASC LIMIT 200")
	if ids(all) != "07L000000000001AAA,07L000000000002AAA,07L000000000003AAA,07L000000000004AAA" {
		t.Fatalf("by StartTime, Id: %s", ids(all))
	}
	r := all.Records[2]
	attrs, _ := r["attributes"].(map[string]any)
	if attrs["type"] != "ApexLog" || attrs["url"] != "/services/data/v60.0/tooling/sobjects/ApexLog/07L000000000003AAA" ||
		r["StartTime"] != "2026-11-28T10:00:01.500+0000" || r["LogLength"] != 6.0 || r["DurationMilliseconds"] != 42.0 ||
		r["Location"] != "Monitoring" || r["Request"] != "API" || len(r) != 11 {
		t.Fatalf("record %v", r)
	}
	for q, want := range map[string]string{
		sel + "(StartTime > 2026-11-28T10:00:00Z OR (StartTime = 2026-11-28T10:00:00Z AND Id > '07L000000000001AAA')) ORDER BY StartTime ASC, Id ASC LIMIT 200": "07L000000000002AAA,07L000000000003AAA,07L000000000004AAA",
		sel + "StartTime >= 2026-11-28T00:00:00Z AND LogUser.Username IN ('a@example.com') ORDER BY StartTime ASC, Id ASC LIMIT 200":                            "07L000000000002AAA,07L000000000003AAA",
		sel + "LogUser.Username IN ('b@example.com', 'c@example.com') ORDER BY StartTime ASC, Id ASC LIMIT 1":                                                   "07L000000000001AAA",
	} {
		if got := ids(list(q)); got != want {
			t.Errorf("%s: %s, want %s", q, got, want)
		}
	}
	if r := list("SELECT Id, LogUser.Username FROM ApexLog WHERE Id = '07L000000000001AAA'").Records[0]; r["LogUser"].(map[string]any)["Username"] != "b@example.com" {
		t.Errorf("the relationship field nests under LogUser: %v", r)
	}
	if l := list("SELECT Id FROM TraceFlag WHERE ExpirationDate > 2026-11-28T10:00:00Z LIMIT 1"); len(l.Records) != 0 {
		t.Errorf("an expired trace flag is listed as active: %v", l.Records)
	}
	if l := list("SELECT Id FROM TraceFlag WHERE ExpirationDate > 2026-11-28T08:30:00Z LIMIT 1"); ids(l) != "7tf000000000001AAA" {
		t.Errorf("the active trace flag: %v", l.Records)
	}
}

func TestApexOrgRefusesWhatSalesforceRefuses(t *testing.T) {
	_, srv := apexDay(t)
	for q, code := range map[string]string{
		"SELECT Id FROM ApexLog WHERE StartTime > 2026-11-28T10:00:00.000Z":             "MALFORMED_QUERY", // fractional seconds
		"SELECT Id FROM ApexLog WHERE StartTime > '2026-11-28T10:00:00Z'":               "INVALID_FIELD",   // quoted
		"SELECT Id FROM ApexLog WHERE LogLength > '5'":                                  "INVALID_FIELD",   // a string for a number
		"SELECT Id FROM ApexLog WHERE Id > 07L":                                         "MALFORMED_QUERY", // unquoted
		"SELECT Id FROM ApexLog WHERE LogUser.Username IN (a@example.com)":              "MALFORMED_QUERY",
		"SELECT Id FROM ApexLog WHERE LogUser.Username IN ()":                           "MALFORMED_QUERY",
		"SELECT Id FROM ApexLog WHERE StartTime IN ('2026-11-28T10:00:00Z')":            "INVALID_FIELD",
		"SELECT Id FROM ApexLog WHERE LogUser.Email = 'a@example.com'":                  "INVALID_FIELD",
		"SELECT Body FROM ApexLog":                                                      "INVALID_FIELD",
		"SELECT FIELDS(ALL) FROM ApexLog LIMIT 200":                                     "MALFORMED_QUERY",
		"SELECT Id FROM ApexLogs":                                                       "INVALID_TYPE",
		"SELECT Id FROM ApexLog WHERE StartTime > 2026-11-28T10:00:00Z ORDER StartTime": "MALFORMED_QUERY",
	} {
		status, body := tooling(t, srv, q)
		var errs []struct{ Message, ErrorCode string }
		if status != 400 || json.Unmarshal([]byte(body), &errs) != nil || len(errs) != 1 || errs[0].ErrorCode != code || errs[0].Message == "" {
			t.Errorf("%s: %d %s, want 400 and [{message, errorCode: %s}]", q, status, body, code)
		}
	}
	// The REST query endpoint does not serve the Tooling API's objects.
	if status, _ := query(t, srv, "SELECT Id FROM ApexLog"); status != 404 {
		t.Errorf("the REST query endpoint answered %d", status)
	}
}

func TestApexOrgServesBodiesAndFailsWhenTold(t *testing.T) {
	org, srv := apexDay(t)
	body := func(id string) (int, string) {
		return get(t, srv, "/services/data/v60.0/tooling/sobjects/ApexLog/"+id+"/Body")
	}
	if status, b := body("07L000000000002AAA"); status != 200 || b != "60.0 APEX_CODE,DEBUG\nline\n" {
		t.Fatalf("a body: %d %q", status, b)
	}
	notFound := func(status int, b string) bool {
		return status == 404 && strings.Contains(b, `"errorCode":"NOT_FOUND"`)
	}
	if status, b := body("07L000000000004AAA"); !notFound(status, b) {
		t.Fatalf("a deleted log's body: %d %s", status, b)
	}
	if status, b := body("07Lnope"); !notFound(status, b) {
		t.Fatalf("an unknown log's body: %d %s", status, b)
	}
	if status, b := get(t, srv, "/services/data/v60.0/sobjects/ApexLog/07L000000000002AAA/Body"); !notFound(status, b) {
		t.Fatalf("a body outside the Tooling API: %d %s", status, b)
	}
	org.SetFailBody("07L000000000001AAA", 2)
	for range 2 {
		if status, b := body("07L000000000001AAA"); status != 503 || !strings.Contains(b, `"errorCode":"SERVER_UNAVAILABLE"`) {
			t.Fatalf("a failing body: %d %s", status, b)
		}
	}
	if status, b := body("07L000000000001AAA"); status != 200 || b != "body 1" {
		t.Fatalf("after the failures: %d %q", status, b)
	}
	org.SetThrottle(1)
	if status, b := body("07L000000000003AAA"); status != 403 || !strings.Contains(b, `"errorCode":"REQUEST_LIMIT_EXCEEDED"`) {
		t.Fatalf("a throttled body: %d %s", status, b)
	}
	if d := strings.Join(org.DownloadsSoFar(), ","); d != "07L000000000002AAA,07L000000000001AAA" {
		t.Fatalf("downloads %s: only the bodies served count", d)
	}
}

func TestApexOrgPagesBelowTheToolingQuery(t *testing.T) {
	org, srv := apexDay(t)
	org.SetBatch(2)
	status, b := tooling(t, srv, "SELECT Id FROM ApexLog ORDER BY StartTime ASC, Id ASC")
	var first struct {
		Done           bool   `json:"done"`
		NextRecordsURL string `json:"nextRecordsUrl"`
		listing
	}
	if status != 200 || json.Unmarshal([]byte(b), &first) != nil || first.Done || !strings.HasPrefix(first.NextRecordsURL, "/services/data/v60.0/tooling/query/") {
		t.Fatalf("the first batch: %d %s", status, b)
	}
	if status, b := get(t, srv, first.NextRecordsURL); status != 200 || !strings.Contains(b, "07L000000000004AAA") {
		t.Fatalf("the next batch: %d %s", status, b)
	}
}

func TestOrgLimits(t *testing.T) {
	org, srv := apexDay(t)
	for _, path := range []string{"/services/data/v60.0/limits", "/services/data/v60.0/limits/"} {
		status, b := get(t, srv, path)
		var l map[string]map[string]any
		if status != 200 || json.Unmarshal([]byte(b), &l) != nil || l["DailyApiRequests"]["Max"] != 15000.0 ||
			l["DailyApiRequests"]["Remaining"] != 14998.0 || l["DailyApiRequests"]["Salesforce CLI"] == nil {
			t.Fatalf("%s: %d %s", path, status, b)
		}
	}
	org.Limits.SetStrings(true)
	if _, b := get(t, srv, "/services/data/v60.0/limits"); !strings.Contains(b, `"Max":"15000"`) {
		t.Fatalf("limits as strings: %s", b)
	}
	org.Limits.SetForbidden(true)
	if status, b := get(t, srv, "/services/data/v60.0/limits"); status != 403 || !strings.Contains(b, `"errorCode":"INSUFFICIENT_ACCESS"`) {
		t.Fatalf("without View Setup and Configuration: %d %s", status, b)
	}
	if n := org.Limits.Requests(); n != 4 {
		t.Fatalf("%d limits requests counted, want 4", n)
	}
}
