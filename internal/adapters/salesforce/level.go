package salesforce

import (
	"fmt"
	"strconv"
	"strings"
)

// RecordLevel is Level over a decoded record (a SOQL row, a Pub/Sub
// event): a field's value as text, "" when absent or null.
func RecordLevel(rec map[string]any) string {
	return Level(func(k string) string {
		if v, ok := rec[k]; ok && v != nil {
			return fmt.Sprint(v)
		}
		return ""
	})
}

// Level derives a row's level (error, warn or info), sent as structured
// metadata, from the fields Salesforce uses for outcomes: exception and
// error columns, the HTTP STATUS_CODE, REQUEST_STATUS (EventLogFile:
// F failure; A authorisation error, N not found), LOGIN_STATUS
// (LOGIN_NO_ERROR is success), and Status / OPERATION_STATUS (Success /
// Failed). Every failed login is an error, however Salesforce words it:
// an EventLogFile LOGIN_STATUS other than LOGIN_NO_ERROR, and a login's
// Status other than Success (LoginEvent, LoginEventStream and LoginHistory
// give the reason: "Invalid Password", "Failed: Computer activation
// required", "Restricted IP"). get returns a field's value, "" when absent.
func Level(get func(string) string) string {
	for _, f := range []string{"EXCEPTION_TYPE", "EXCEPTION_MESSAGE", "ERROR_CODE", "ExceptionType", "ErrorCode"} {
		if v := strings.TrimSpace(get(f)); v != "" && v != "null" {
			return "error"
		}
	}
	if code, err := strconv.Atoi(strings.TrimSpace(get("STATUS_CODE"))); err == nil {
		switch {
		case code >= 500:
			return "error"
		case code >= 400:
			return "warn"
		}
	}
	switch strings.ToUpper(strings.TrimSpace(get("REQUEST_STATUS"))) {
	case "F":
		return "error"
	case "A", "N":
		return "warn"
	}
	if v := strings.TrimSpace(get("LOGIN_STATUS")); v != "" && v != "LOGIN_NO_ERROR" {
		return "error"
	}
	for _, f := range []string{"OPERATION_STATUS", "Status"} {
		switch v := strings.ToLower(strings.TrimSpace(get(f))); {
		case v == "", v == "success", v == "succeeded", v == "null":
		case strings.HasPrefix(v, "fail"), strings.Contains(v, "error"):
			return "error"
		case f == "Status" && isLogin(get):
			return "error" // a login's Status is Success or why it failed
		default:
			return "warn"
		}
	}
	return "info"
}

// isLogin reports whether a record is a login (LoginEvent,
// LoginEventStream, LoginHistory): it has a login's LoginType, LoginKey or
// LoginHistoryId.
func isLogin(get func(string) string) bool {
	for _, f := range []string{"LoginType", "LoginKey", "LoginHistoryId"} {
		if v := strings.TrimSpace(get(f)); v != "" && v != "null" {
			return true
		}
	}
	return false
}
