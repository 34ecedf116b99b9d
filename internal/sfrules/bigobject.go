package sfrules

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// StandardBigObjects are the objects Real-Time Event Monitoring stores
// events in that are big objects (Salesforce Help, "Real-Time Event
// Monitoring Data Storage"; the Platform Events Developer Guide's object
// pages). Each is indexed by EventDate, newest first, then
// EventIdentifier: a query filters only on those fields, orders only along
// the index (ORDER BY EventDate DESC) and never by Id. Custom big objects
// end in __b.
var StandardBigObjects = []string{"ApiEvent", "BulkApiResultEventStore", "IdentityVerificationEvent", "LightningUriEvent",
	"ListViewEvent", "LoginAsEvent", "LoginEvent", "LogoutEvent", "ReportEvent", "UriEvent"}

// IsBigObject reports whether object is polled as a big object: mode
// "true" or "false" says so, "auto" (or "") recognises the standard big
// objects and names ending in __b.
func IsBigObject(object, mode string) (bool, error) {
	switch m := strings.ToLower(strings.TrimSpace(mode)); m {
	case "", "auto":
		return strings.HasSuffix(object, "__b") || slices.Contains(StandardBigObjects, object), nil
	default:
		b, err := strconv.ParseBool(m)
		if err != nil {
			return false, fmt.Errorf("salesforce: eventlog_objects: %s: big_object %q is not auto, true or false", object, mode)
		}
		return b, nil
	}
}
