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
	// Most rows carry no STATUS_CODE: strconv.Atoi("") would allocate
	// its error for each of them.
	if v := strings.TrimSpace(get("STATUS_CODE")); v != "" {
		if code, err := strconv.Atoi(v); err == nil {
			switch {
			case code >= 500:
				return "error"
			case code >= 400:
				return "warn"
			}
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
		v := strings.TrimSpace(get(f))
		if v == "" || lowerIs(v, "success") || lowerIs(v, "succeeded") || lowerIs(v, "null") {
			continue // the common answers, without lower-casing a copy
		}
		switch v = strings.ToLower(v); {
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

// lowerIs reports whether strings.ToLower(v) == lower, for an ASCII lower
// case word without a k (no other rune lower-cases to one of its
// letters), without making the copy.
func lowerIs(v, lower string) bool {
	if len(v) != len(lower) {
		return false
	}
	for i := range len(v) {
		c := v[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
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
