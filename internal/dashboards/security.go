package dashboards

// sel is a stream selector over what sf2loki ships: the job variable (All
// matches streams without a job label too) and the given label matchers.
func sel(matchers string) string { return `{job=~"$job", ` + matchers + `}` }

// by counts the lines of a selector and pipeline per interval, summed by the
// given fields, the ten largest.
func by(fields, stream, pipeline string) string {
	return "topk(10, sum by (" + fields + ") (count_over_time(" + stream + " | json" + pipeline + " [$__auto])))"
}

const (
	elfLogin    = `source="eventlogfile", event_type="Login"`
	streamLogin = `source=~"pubsub|eventlog_objects", event_type=~"LoginEventStream|LoginEvent"`
	elfAPI      = `source="eventlogfile", event_type=~"API|RestApi"`
	elfExport   = `source="eventlogfile", event_type="ReportExport"`
	setupAudit  = `source="eventlog_objects", event_type="SetupAuditTrail"`

	elfFailed    = ` | LOGIN_STATUS != "LOGIN_NO_ERROR"`
	streamFailed = ` | Status != "Success"`

	reliesELFLogin = "EventLogFile Login rows: labels `source=eventlogfile`, `event_type=Login`; " +
		"the line is the row as sorted-key JSON with the CSV's columns `LOGIN_STATUS` (`LOGIN_NO_ERROR` on success), `USER_NAME`, `SOURCE_IP`."
	reliesStreamLogin = "Login events from Pub/Sub (`source=pubsub`, `event_type=LoginEventStream`, the topic's basename) " +
		"or the stored LoginEvent object (`source=eventlog_objects`, `event_type=LoginEvent`); " +
		"the line is the event as sorted-key JSON with `Status` (`Success` on success), `Username`, `SourceIp`."
	reliesAPI = "EventLogFile API and RestApi rows: labels `source=eventlogfile`, `event_type=API` or `RestApi`; " +
		"JSON fields `USER_ID` and `CLIENT_NAME` (empty when the caller sends no client name)."
	reliesExport = "EventLogFile ReportExport rows: labels `source=eventlogfile`, `event_type=ReportExport`; JSON fields `USER_ID` and `REPORT_DESCRIPTION`."
	reliesSetup  = "SetupAuditTrail polled by `sources.eventlog_objects`: labels `source=eventlog_objects`, `event_type=SetupAuditTrail`; " +
		"the record as sorted-key JSON with `Section`, `Action`, `Display`, `CreatedById`."
)

func security() Dashboard {
	return Dashboard{
		File:  "salesforce-security.json",
		UID:   "sf2loki-salesforce-security",
		Title: "Salesforce security overview",
		Description: "Login failures, API volume, report exports and setup changes, queried in LogQL from the entries sf2loki ships to Loki " +
			"(labels `source` and `event_type`, and `job` when `sink.loki.labels` sets it; each line a record as sorted-key JSON, read with `| json`).",
		Datasource: "loki",
		Variables: []Variable{{
			Name: "job", Label: "Job", Query: "label_values(job)",
			Doc: "the `job` label of `sink.loki.labels`; All also matches streams without one.",
		}},
		Rows: []Row{
			{Title: "Logins", Panels: []Panel{
				{Title: "Failed logins by user (EventLogFile)", Kind: TimeSeries,
					Description: "Login rows whose LOGIN_STATUS is not LOGIN_NO_ERROR, by USER_NAME.",
					Relies:      reliesELFLogin,
					Queries:     []Query{{Expr: by("USER_NAME", sel(elfLogin), elfFailed), Legend: "{{USER_NAME}}"}}},
				{Title: "Failed logins by source IP (EventLogFile)", Kind: TimeSeries,
					Description: "The same rows by SOURCE_IP.",
					Relies:      reliesELFLogin,
					Queries:     []Query{{Expr: by("SOURCE_IP", sel(elfLogin), elfFailed), Legend: "{{SOURCE_IP}}"}}},
				{Title: "Failed logins by user (login events)", Kind: TimeSeries,
					Description: "LoginEventStream and LoginEvent events whose Status is not Success, by Username: near real time with Pub/Sub.",
					Relies:      reliesStreamLogin,
					Queries:     []Query{{Expr: by("Username", sel(streamLogin), streamFailed), Legend: "{{Username}}"}}},
				{Title: "Failed logins by source IP (login events)", Kind: TimeSeries,
					Description: "The same events by SourceIp.",
					Relies:      reliesStreamLogin,
					Queries:     []Query{{Expr: by("SourceIp", sel(streamLogin), streamFailed), Legend: "{{SourceIp}}"}}},
				{Title: "Failed logins", Kind: Logs, Width: 24,
					Description: "The failed logins themselves, from both kinds of source.",
					Relies:      reliesELFLogin + " " + reliesStreamLogin,
					Queries: []Query{
						{Expr: sel(elfLogin) + " | json" + elfFailed},
						{Expr: sel(streamLogin) + " | json" + streamFailed},
					}},
			}},
			{Title: "API", Panels: []Panel{
				{Title: "API calls by user", Kind: TimeSeries,
					Description: "API and RestApi rows by USER_ID.",
					Relies:      reliesAPI,
					Queries:     []Query{{Expr: by("USER_ID", sel(elfAPI), ""), Legend: "{{USER_ID}}"}}},
				{Title: "API calls by client", Kind: TimeSeries,
					Description: "API and RestApi rows by CLIENT_NAME.",
					Relies:      reliesAPI,
					Queries:     []Query{{Expr: by("CLIENT_NAME", sel(elfAPI), ""), Legend: "{{CLIENT_NAME}}"}}},
			}},
			{Title: "Report exports", Panels: []Panel{
				{Title: "Report exports by user", Kind: TimeSeries,
					Description: "ReportExport rows by USER_ID.",
					Relies:      reliesExport,
					Queries:     []Query{{Expr: by("USER_ID", sel(elfExport), ""), Legend: "{{USER_ID}}"}}},
				{Title: "Report exports", Kind: Logs,
					Description: "The exports themselves.",
					Relies:      reliesExport,
					Queries:     []Query{{Expr: sel(elfExport) + " | json"}}},
			}},
			{Title: "Setup changes", Panels: []Panel{
				{Title: "Setup changes by section", Kind: TimeSeries,
					Description: "SetupAuditTrail records by Section.",
					Relies:      reliesSetup,
					Queries:     []Query{{Expr: by("Section", sel(setupAudit), ""), Legend: "{{Section}}"}}},
				{Title: "Setup changes by user", Kind: TimeSeries,
					Description: "SetupAuditTrail records by CreatedById.",
					Relies:      reliesSetup,
					Queries:     []Query{{Expr: by("CreatedById", sel(setupAudit), ""), Legend: "{{CreatedById}}"}}},
				{Title: "Setup changes", Kind: Logs, Width: 24,
					Description: "The audit trail itself: Display says what changed.",
					Relies:      reliesSetup,
					Queries:     []Query{{Expr: sel(setupAudit) + " | json"}}},
			}},
		},
	}
}
