package sfrules

import (
	"slices"
	"strings"
)

// EventLogFileTypes are the values of EventLogFile.EventType that
// Salesforce documents, as "EventLogFile Supported Event Types" lists them
// (https://developer.salesforce.com/docs/atlas.en-us.object_reference.meta/object_reference/sforce_api_objects_eventlogfile_supportedeventtypes.htm),
// each spelled as its page's EVENT_TYPE field gives it. Salesforce adds
// types with new releases: a name missing here is not refused, only
// warned about (the configuration check), and types the page lists whose
// API name it does not spell out are left out for the same reason.
var EventLogFileTypes = []string{
	"API", "ApexCallout", "ApexExecution", "ApexRestApi", "ApexSoap", "ApexTrigger", "ApexUnexpectedException",
	"ApiTotalUsage", "AsyncReportRun", "AuraRequest", "BlockedRedirect", "BulkApi", "BulkApi2", "BulkApiRequest",
	"ChangeSetOperation", "CompositeApi", "CompositeApiSubrequest", "ConcurrentLongRunningApexLimit", "Console",
	"ContentDistribution", "ContentDocumentLink", "ContentTransfer", "ContinuationCallout", "ContinuationCalloutSummary",
	"CorsViolation", "CspViolation", "Dashboard", "DocumentAttachmentDownloads", "ExternalCrossOrgCallout",
	"ExternalCustomApexCallout", "ExternalDataSourceCallout", "ExternalODataCallout", "FlowExecution",
	"GroupMembership", "HostnameRedirects", "InsecureExternalAssets", "InsufficientAccess", "InvocableAction",
	"KnowledgeArticleView", "LightningError", "LightningInteraction", "LightningLogger", "LightningPageView",
	"LightningPerformance", "Login", "LoginAs", "Logout", "MetadataApiOperation", "MultiBlockReport",
	"NamedCredential", "OneCommerceUsage", "PackageInstall", "PermissionUpdate", "PlatformEncryption",
	"QueuedExecution", "Report", "ReportExport", "RestApi", "Sandbox", "Search", "SearchClick", "Sites",
	"TimeBasedWorkflow", "TransactionSecurity", "UITelemetryNavigationTiming", "UITelemetryResourceTiming", "URI",
	"VisualforceRequest", "WaveChange", "WaveDownload", "WaveInteraction", "WavePerformance",
}

// FreeEventLogFileTypes are the types "available in supported Salesforce
// editions at no additional cost" (the same page); the others need Event
// Monitoring (Shield or the add-on).
var FreeEventLogFileTypes = []string{
	"ApexUnexpectedException", "ApiTotalUsage", "CorsViolation", "CspViolation", "HostnameRedirects",
	"InsecureExternalAssets", "Login", "Logout",
}

// DocumentedEventLogFileType returns the documented spelling of name,
// matched without regard to case (SOQL compares EventType so), and whether
// Salesforce documents it.
func DocumentedEventLogFileType(name string) (string, bool) {
	i := slices.IndexFunc(EventLogFileTypes, func(t string) bool { return strings.EqualFold(t, name) })
	if i < 0 {
		return "", false
	}
	return EventLogFileTypes[i], true
}
