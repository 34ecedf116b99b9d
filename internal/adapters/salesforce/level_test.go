package salesforce_test

import (
	"testing"

	"github.com/sf2loki/sf2loki/internal/adapters/salesforce"
)

func TestLevel(t *testing.T) {
	for _, tc := range []struct {
		fields map[string]string
		want   string
	}{
		{map[string]string{"EVENT_TYPE": "API", "STATUS_CODE": "200", "REQUEST_STATUS": "S"}, "info"},
		{map[string]string{"STATUS_CODE": "503"}, "error"},
		{map[string]string{"STATUS_CODE": "404"}, "warn"},
		{map[string]string{"REQUEST_STATUS": "F"}, "error"},
		{map[string]string{"REQUEST_STATUS": "A"}, "warn"},
		{map[string]string{"EXCEPTION_TYPE": "System.NullPointerException"}, "error"},
		{map[string]string{"LOGIN_STATUS": "LOGIN_NO_ERROR"}, "info"},
		{map[string]string{"Status": "Success"}, "info"},
		{map[string]string{"Status": "Failed: Computer activation required"}, "error"},
		{map[string]string{"OPERATION_STATUS": "FAILURE"}, "error"},
		{map[string]string{"OPERATION_STATUS": "PARTIAL"}, "warn"},
		{map[string]string{"Status": "Queued"}, "warn"}, // not a login: a non-success outcome
		{map[string]string{}, "info"},
	} {
		if got := salesforce.Level(func(k string) string { return tc.fields[k] }); got != tc.want {
			t.Errorf("%v: %s, want %s", tc.fields, got, tc.want)
		}
	}
}

// Every failed login is an error, however Salesforce words it: a
// LoginEvent, LoginEventStream or LoginHistory Status other than Success
// ("Invalid Password" as much as "Failed: …"), an EventLogFile Login
// LOGIN_STATUS other than LOGIN_NO_ERROR. Only a successful login is info.
func TestEveryFailedLoginIsAnError(t *testing.T) {
	for _, tc := range []struct {
		fields map[string]string
		want   string
	}{
		{map[string]string{"LoginType": "Application", "Status": "Success"}, "info"},
		{map[string]string{"LoginType": "Application", "Status": "Invalid Password"}, "error"},
		{map[string]string{"LoginType": "Application", "Status": "Failed: Computer activation required"}, "error"},
		{map[string]string{"LoginType": "Remote Access 2.0", "Status": "Restricted IP"}, "error"},
		{map[string]string{"LoginType": "Application", "Status": "User is Frozen"}, "error"},
		{map[string]string{"LOGIN_STATUS": "LOGIN_NO_ERROR"}, "info"},
		{map[string]string{"LOGIN_STATUS": "LOGIN_ERROR_INVALID_PASSWORD"}, "error"},
		{map[string]string{"LOGIN_STATUS": "LOGIN_CHALLENGE_ISSUED"}, "error"},
	} {
		if got := salesforce.Level(func(k string) string { return tc.fields[k] }); got != tc.want {
			t.Errorf("%v: %s, want %s", tc.fields, got, tc.want)
		}
	}
	// A Pub/Sub or SOQL record reads the same.
	rec := map[string]any{"LoginType": "Application", "Status": "Invalid Password", "EventDate": int64(1)}
	if got := salesforce.RecordLevel(rec); got != "error" {
		t.Errorf("RecordLevel(%v) = %s, want error", rec, got)
	}
}
