package sfrules

import "strings"

// RTEMStream is a Real-Time Event Monitoring streaming event and the
// object Salesforce stores the same events in ("Real-Time Event Monitoring
// Objects", Platform Events Developer Guide:
// https://developer.salesforce.com/docs/atlas.en-us.platform_events.meta/platform_events/platform_events_objects_monitoring.htm).
type RTEMStream struct {
	// Stream is the platform event (the Pub/Sub topic /event/<Stream>),
	// Storage the object that stores its events, Label the event's name in
	// Event Manager.
	Stream, Storage, Label string
}

// RTEMStreams are the streaming events that have a storage object.
var RTEMStreams = []RTEMStream{
	{"ApiAnomalyEvent", "ApiAnomalyEventStore", "API Anomaly Event"},
	{"ApiEventStream", "ApiEvent", "API Event"},
	{"BulkApiResultEvent", "BulkApiResultEventStore", "Bulk API Result Event"},
	{"CredentialStuffingEvent", "CredentialStuffingEventStore", "Credential Stuffing Event"},
	{"FileEvent", "FileEventStore", "File Event"},
	{"LightningUriEventStream", "LightningUriEvent", "Lightning URI Event"},
	{"ListViewEventStream", "ListViewEvent", "List View Event"},
	{"LoginAsEventStream", "LoginAsEvent", "Login As Event"},
	{"LoginEventStream", "LoginEvent", "Login Event"},
	{"LogoutEventStream", "LogoutEvent", "Logout Event"},
	{"PermissionSetEvent", "PermissionSetEventStore", "Permission Set Event"},
	{"ReportAnomalyEvent", "ReportAnomalyEventStore", "Report Anomaly Event"},
	{"ReportEventStream", "ReportEvent", "Report Event"},
	{"SessionHijackingEvent", "SessionHijackingEventStore", "Session Hijacking Event"},
	{"UriEventStream", "UriEvent", "URI Event"},
}

// RTEMStreamOf returns the pair whose stream is the topic /event/<Stream>.
func RTEMStreamOf(topic string) (RTEMStream, bool) {
	name, ok := strings.CutPrefix(topic, "/event/")
	if !ok {
		return RTEMStream{}, false
	}
	for _, s := range RTEMStreams {
		if s.Stream == name {
			return s, true
		}
	}
	return RTEMStream{}, false
}
