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
		{map[string]string{"LOGIN_STATUS": "LOGIN_ERROR_INVALID_PASSWORD"}, "warn"},
		{map[string]string{"Status": "Success"}, "info"},
		{map[string]string{"Status": "Invalid Password"}, "warn"},
		{map[string]string{"Status": "Failed: Computer activation required"}, "error"},
		{map[string]string{"OPERATION_STATUS": "FAILURE"}, "error"},
		{map[string]string{}, "info"},
	} {
		if got := salesforce.Level(func(k string) string { return tc.fields[k] }); got != tc.want {
			t.Errorf("%v: %s, want %s", tc.fields, got, tc.want)
		}
	}
}
