package config

import (
	"net/url"
	"strings"
	"time"
)

// Config is the whole daemon's configuration. Field tags drive loading
// (yaml, mapstructure), the generated example, reference and JSON Schema
// (doc, default, enum), strictness (every key not declared here is an
// error) and redaction (secret: the value, or a map's values, is a secret).
type Config struct {
	Coordinate Coordinate `yaml:"coordinate" mapstructure:"coordinate" doc:"Leadership: how replicas agree on one leader. Exactly one replica ingests; standbys take over when it dies."`
	State      State      `yaml:"state" mapstructure:"state" doc:"Where the checkpoint document lives. It is shared by all replicas and written only by the leader, fenced by its epoch."`
	Service    Service    `yaml:"service" mapstructure:"service" doc:"The process: health and metrics endpoint, shutdown, logging."`
	Telemetry  Telemetry  `yaml:"telemetry" mapstructure:"telemetry" doc:"Traces over OTLP/HTTP. Metrics are always served on service.health_addr /metrics."`
	Salesforce Salesforce `yaml:"salesforce" mapstructure:"salesforce" doc:"The Salesforce org: OAuth 2.0 server-to-server credentials (a connected app or external client app)."`
	Sources    Sources    `yaml:"sources" mapstructure:"sources" doc:"What the leader ingests. With no source enabled the leader holds leadership and ingests nothing."`
	Orgs       []Org      `yaml:"orgs" mapstructure:"orgs" doc:"Several Salesforce orgs served by one deployment, each a shard with its own lease and checkpoint document, spread over the replicas. List them here instead of the top-level salesforce and sources, which must then be left out. Sink, state, coordinate, service and telemetry stay shared. Every org's entries get the labels org=<name> and sf_org_id=<its org id>, so sink.loki.labels may not set those two. The first org listed keeps the configured lease and checkpoint names, so a single-org deployment that moves its org here as the first entry keeps its lease and checkpoints (no re-ingestion); keep that org first, since whichever org is listed first takes those objects. Every other org's names are derived from the configured ones: an S3 key or GCS object dir/base becomes dir/shards/<org>/base (a key without a directory: shards/<org>/base), a file path likewise, a Kubernetes Lease <lease>-<org>. The replicas' membership document is dir/shards/members.json beside the lease (Kubernetes: the Lease <lease>-members). Only the configuration file can set orgs: environment overrides (SF2LOKI_...) do not reach list entries."`
	Sink       Sink       `yaml:"sink" mapstructure:"sink" doc:"Where entries go."`

	// ShardName is the org one shard serves: set by Shards on each copy in
	// the orgs form, "" in the single-org form. Never loaded.
	ShardName string `yaml:"-" mapstructure:"-"`
	// OrgCount is how many orgs share the deployment: set by Shards (0 or 1
	// in the single-org form). Never loaded.
	OrgCount int `yaml:"-" mapstructure:"-"`
	// OrgSiblings are the other orgs entries of this shard's Salesforce org
	// (one org listed under several names): set by Shards. Never loaded.
	OrgSiblings []OrgSibling `yaml:"-" mapstructure:"-"`
	// checkFiles makes Load read the files the configuration names
	// (CheckFiles). Never loaded.
	checkFiles bool `yaml:"-" mapstructure:"-"`
	// filesOf, when set, narrows checkFiles to what a command of one org
	// reads (CheckFilesOf).
	filesOf *string `yaml:"-" mapstructure:"-"`
}

// Org is one entry of orgs: a Salesforce org and what to ingest from it.
type Org struct {
	Name       string     `yaml:"name" mapstructure:"name" default:"" example:"prod" doc:"The org's name in this deployment: 1 to 40 of a-z, 0-9 and -, unique. It is the org label of its entries and names its shard's lease and checkpoint objects, so renaming an org (other than the first) starts it from no checkpoint."`
	Salesforce Salesforce `yaml:"salesforce" mapstructure:"salesforce" sameas:"salesforce" doc:"The org's connection (its own token cache and clients)."`
	Sources    Sources    `yaml:"sources" mapstructure:"sources" sameas:"sources" doc:"What to ingest from the org. One org may appear under two names with different sources (Pub/Sub in one, EventLogFile in another), to split one big org across shards. Entries are one org when they share a salesforce.org_id, a jwt_bearer username or a My Domain login host; among them a name listed twice, one event category on two sources or /data/ChangeEvents beside a /data/<Object>ChangeEvent topic (unless both entries set allow_overlap), \"*\" in two entries (unless on two sources of entries that both allow overlap), and one user's debug logs twice are refused, and a \"*\" skips the categories the other entries list (docs/governance.md, One org under two names)."`
}

// Salesforce configures the org connection.
type Salesforce struct {
	AuthMode         string        `yaml:"auth_mode" mapstructure:"auth_mode" default:"none" enum:"none,jwt_bearer,client_credentials" doc:"none: no Salesforce connection. jwt_bearer: an RS256 assertion signed with private_key for username (pre-authorised users). client_credentials: client_id and client_secret, on the org's My Domain login_url."`
	Environment      string        `yaml:"environment" mapstructure:"environment" default:"production" enum:"production,sandbox" doc:"Chooses login_url when it is blank: https://login.salesforce.com or https://test.salesforce.com."`
	LoginURL         string        `yaml:"login_url" mapstructure:"login_url" default:"" format:"url" doc:"The token host, e.g. https://mycompany.my.salesforce.com (required for client_credentials: the generic login hosts do not support it)."`
	ClientID         string        `yaml:"client_id" mapstructure:"client_id" default:"" doc:"The connected app's consumer key."`
	Username         string        `yaml:"username" mapstructure:"username" default:"" doc:"The user a jwt_bearer token runs as."`
	PrivateKey       string        `yaml:"private_key" mapstructure:"private_key" default:"" secret:"true" doc:"The PEM RSA key signing the JWT (secret). Prefer private_key_file."`
	PrivateKeyFile   string        `yaml:"private_key_file" mapstructure:"private_key_file" default:"" doc:"A file holding private_key; read at start, trimmed. A blank file is a missing key."`
	ClientSecret     string        `yaml:"client_secret" mapstructure:"client_secret" default:"" secret:"true" doc:"The consumer secret for client_credentials (secret). Prefer client_secret_file."`
	ClientSecretFile string        `yaml:"client_secret_file" mapstructure:"client_secret_file" default:"" doc:"A file holding client_secret; read at start, trimmed. A blank file is a missing secret."`
	APIVersion       string        `yaml:"api_version" mapstructure:"api_version" default:"60.0" doc:"The REST API version, like 60.0."`
	JWTAudienceURL   string        `yaml:"jwt_audience" mapstructure:"jwt_audience" default:"" format:"url" doc:"The JWT bearer assertion's audience. Blank: https://test.salesforce.com for environment sandbox (or a *.sandbox.my.salesforce.com login_url), else https://login.salesforce.com, whatever host login_url names (Salesforce refuses a My Domain host as the audience). Set it only for an Experience Cloud site (its URL)."`
	OrgID            string        `yaml:"org_id" mapstructure:"org_id" default:"" doc:"The 18-character org id (15 characters are accepted); blank asks /services/oauth2/userinfo once."`
	TokenTTL         time.Duration `yaml:"token_ttl" mapstructure:"token_ttl" default:"2h" min:"2m" max:"24h" doc:"How long a token is trusted (the org's session timeout); it is re-minted 60s before, and at once on a 401."`
	Limits           OrgLimits     `yaml:"limits" mapstructure:"limits" doc:"The org's limits (the REST limits resource) as gauges: sf2loki_salesforce_limit_max and sf2loki_salesforce_limit_remaining{limit}, read by the shard's leader while a Salesforce source is enabled."`
}

// JWTAudience is the JWT bearer audience: jwt_audience, else the login host
// of the environment (a sandbox My Domain login_url counts as a sandbox).
func (s Salesforce) JWTAudience() string {
	switch {
	case s.JWTAudienceURL != "":
		return strings.TrimRight(s.JWTAudienceURL, "/")
	case s.Environment == "sandbox":
		return "https://test.salesforce.com"
	}
	if u, err := url.Parse(s.LoginURL); err == nil && strings.HasSuffix(strings.ToLower(u.Hostname()), ".sandbox.my.salesforce.com") {
		return "https://test.salesforce.com"
	}
	return "https://login.salesforce.com"
}

// SalesforceLoginURL is login_url, or the environment's login host.
func (s Salesforce) SalesforceLoginURL() string {
	if s.LoginURL != "" {
		return s.LoginURL
	}
	if s.Environment == "sandbox" {
		return "https://test.salesforce.com"
	}
	return "https://login.salesforce.com"
}

// Sources configures the sources.
type Sources struct {
	Synthetic       Synthetic       `yaml:"synthetic" mapstructure:"synthetic" doc:"Salesforce-shaped test events (LoginEvent-, ApiEvent-like JSON) with a sequence checkpoint: for demos, soak tests and benchmarks."`
	EventlogObjects EventlogObjects `yaml:"eventlog_objects" mapstructure:"eventlog_objects" doc:"Salesforce objects polled with SOQL by a timestamp field: LoginHistory, SetupAuditTrail, stored real-time events such as LoginEvent, custom objects. Needs salesforce.auth_mode."`
	EventLogFile    EventLogFile    `yaml:"eventlogfile" mapstructure:"eventlogfile" doc:"EventLogFile CSVs (Event Monitoring; the Daily free subset on orgs without Shield), one Loki entry per row. Needs salesforce.auth_mode."`
	PubSub          PubSub          `yaml:"pubsub" mapstructure:"pubsub" doc:"The Salesforce Pub/Sub API (gRPC streaming): Real-Time Event Monitoring streams, platform events, Change Data Capture; one subscription per topic, one Loki entry per event. Needs salesforce.auth_mode."`
	ApexLog         ApexLog         `yaml:"apexlog" mapstructure:"apexlog" doc:"Apex debug logs (the Tooling API's ApexLog), one Loki entry per log with its body as the line. Salesforce writes debug logs only for what an active TraceFlag traces (Setup, Debug Logs); sf2loki sets none. Needs salesforce.auth_mode."`
	// Governance shared by the sources (docs/governance.md).
	TransformSalt     string `yaml:"transform_salt" mapstructure:"transform_salt" default:"" secret:"true" doc:"The secret key of every hash transform (HMAC-SHA-256): without it a hash of a low-entropy value such as a user id can be reversed by hashing every candidate. Prefer transform_salt_file. Changing it changes every hashed value."`
	TransformSaltFile string `yaml:"transform_salt_file" mapstructure:"transform_salt_file" default:"" doc:"A file holding transform_salt (trimmed); used when transform_salt is empty."`
	AllowOverlap      bool   `yaml:"allow_overlap" mapstructure:"allow_overlap" default:"false" doc:"Allow one event category on more than one source (LoginEventStream on pubsub, LoginEvent in eventlog_objects, Login in eventlogfile), or the standard channel /data/ChangeEvents beside a /data/<Object>ChangeEvent topic (it carries the change events of every entity selected for Change Data Capture): the same events would be shipped two or three times. Left false, such a configuration is refused, a custom channel (…__chn) beside topics that may carry its members' events is warned about (sf2loki doctor reads its members), and a \"*\" source skips the categories another source names (docs/governance.md, Overlap guard)."`
}

// Transform is one rule of a source's transforms, applied to each row in
// order before its line, metadata and level are built.
type Transform struct {
	Action      string            `yaml:"action" mapstructure:"action" default:"" enum:"hash,mask,drop_field,regex_replace,drop_row" example:"hash" doc:"hash: the first 16 hex characters of HMAC-SHA-256(transform_salt, value). mask: a value that is an e-mail address and nothing else keeps its domain (***@acme.com), an IPv4 address its /24 (10.1.2.x), an IPv6 address its /48 (2001:db8:1::x), anything else becomes *** (text holding an address included); an empty value stays empty. drop_field: the field is removed. regex_replace: pattern is replaced by replacement. drop_row: the row is not shipped when every match field matches (its checkpoint still moves)."`
	Fields      []string          `yaml:"fields" mapstructure:"fields" default:"" example:"[USER_ID, \"*_IP\"]" doc:"The fields the action applies to (not drop_row): names or globs (* any characters, ? one) over a row's top-level field names, matched case-sensitively. A dotted name is a path into a SOQL record's or a Pub/Sub event's nested records (ChangeEventHeader.commitUser; its last segment may be a glob). A field a row lacks is left alone."`
	Match       map[string]string `yaml:"match" mapstructure:"match" default:"" doc:"drop_row only: field name (case-sensitive; a dotted name is a path, as in fields) to glob over the field's text (a number's or a bool's JSON text); the row is dropped when every field named is present, not null, and matches."`
	Pattern     string            `yaml:"pattern" mapstructure:"pattern" default:"" verbatim:"true" doc:"regex_replace only: an RE2 regular expression, compiled at start (a bad one is refused). Taken as written, never interpolated from the environment: a ${NAME} whose $ is not escaped by a backslash is refused (that $ is the end-of-text anchor, so it matches nothing)."`
	Replacement string            `yaml:"replacement" mapstructure:"replacement" default:"" verbatim:"true" doc:"regex_replace only: the replacement, in Go's regexp syntax: $1 or ${1} for a group by number, $name or ${name} by name, $0 for the whole match, $$ for a literal $. Taken as written: ${name} is always a group, never an environment variable, and a reference to a group the pattern lacks is refused (a name runs as far as letters, digits and _ go: write ${1}x, not $1x)."`
	Name        string            `yaml:"name" mapstructure:"name" default:"" doc:"The rule's name in sf2loki_rows_filtered_total{rule}; blank: <action>#<position from 1>."`
	EventTypes  []string          `yaml:"event_types" mapstructure:"event_types" default:"" doc:"Globs over the rows' event types (EventLogFile types, object names, Pub/Sub topics such as /event/LoginEventStream or their last element LoginEventStream) the rule applies to, matched without regard to case; empty: every row of the source."`
}

// PubSub configures the Pub/Sub API source.
type PubSub struct {
	Topics              []string           `yaml:"topics" mapstructure:"topics" default:"" doc:"Topics such as /event/LoginEventStream, /event/My_Event__e or /data/AccountChangeEvent, or \"*\" for every *EventStream topic the org lists; empty disables the source. Checkpoint key pubsub:<topic> (the base64 replay id)."`
	Include             []string           `yaml:"include" mapstructure:"include" default:"" doc:"Globs over topic names a topic must match (* matches any characters, / included); empty means every topic."`
	Exclude             []string           `yaml:"exclude" mapstructure:"exclude" default:"" doc:"Globs over topic names to leave out, e.g. \"*ApiEventStream\"."`
	ReplayPreset        string             `yaml:"replay_preset" mapstructure:"replay_preset" default:"LATEST" enum:"LATEST,EARLIEST,CUSTOM" doc:"Where a topic with no stored replay id starts: LATEST (new events only), EARLIEST (all retained events, up to 72h), CUSTOM (as LATEST). A stored replay id always wins; one Salesforce refuses as expired restarts the topic from EARLIEST."`
	NumRequested        int                `yaml:"num_requested" mapstructure:"num_requested" default:"100" min:"1" max:"100" doc:"Events a subscription asks for at once (1 to 100). It asks for the next window once half have arrived, before handing them over: a full pipeline stops the requests after that window, nothing is dropped."`
	RediscoveryInterval time.Duration      `yaml:"rediscovery_interval" mapstructure:"rediscovery_interval" default:"1h" min:"1m" max:"24h" zero:"allowed" doc:"How often \"*\" is listed again to subscribe to new topics; 0 lists once at start. A listing that fails is retried every minute until one succeeds (a \"*\" eventlogfile of the same org waits for that first listing: docs/governance.md)."`
	StallTimeout        time.Duration      `yaml:"stall_timeout" mapstructure:"stall_timeout" default:"5m" min:"1s" max:"1h" doc:"A subscription that receives nothing (no events, no keepalive) for this long is reconnected from its last event. Salesforce sends a keepalive within 270s: keep this above that."`
	BridgeMaxBytes      int                `yaml:"bridge_max_bytes" mapstructure:"bridge_max_bytes" default:"0" min:"0" max:"4294967296" doc:"The most bytes of events the realtime lane holds between the subscriptions and Loki; when it is full, subscriptions stop asking Salesforce for events (nothing is dropped). 0 uses sink.loki.batch.queue_bytes."`
	Endpoint            string             `yaml:"endpoint" mapstructure:"endpoint" default:"api.pubsub.salesforce.com:7443" format:"hostport" doc:"The Pub/Sub API as host:port."`
	Plaintext           bool               `yaml:"plaintext" mapstructure:"plaintext" default:"false" doc:"Connect without TLS. Only to a loopback endpoint (tests, a local proxy)."`
	Transforms          []Transform        `yaml:"transforms" mapstructure:"transforms" doc:"Rules applied in order to each row before it is shipped: hash, mask, drop_field, regex_replace, drop_row (docs/governance.md). A row's time and checkpoint come from the row as Salesforce sent it."`
	Sample              map[string]float64 `yaml:"sample" mapstructure:"sample" default:"" example:"{\"ApiEventStream\": 0.25}" doc:"Globs over topics or their last element (ApiEventStream for /event/ApiEventStream, the event_type label's value), matched without regard to case, to the fraction of rows kept, 0 to 1: an exact name wins, else the longest glob that matches (of two as long, the first in sort order), and rows of no glob are all kept. An environment override sets one entry, e.g. SF2LOKI_SOURCES__PUBSUB__SAMPLE__APIEVENTSTREAM=0.25 (its name in lower case; a variable names the last element, it cannot hold a /). Deterministic on the row's replay id (lower-case hex), so a replay after a failover keeps the same rows; a row left out still moves the checkpoint."`
}

// EventLogFile configures the EventLogFile source.
type EventLogFile struct {
	EventTypes   []string           `yaml:"event_types" mapstructure:"event_types" default:"" doc:"Event types to ingest (API, Login, ReportExport, …), or \"*\" for every type the org has; empty disables the source. Checkpoint key eventlogfile:<EventType>."`
	Interval     string             `yaml:"interval" mapstructure:"interval" default:"auto" enum:"auto,Hourly,Daily" doc:"Which files: auto reads, per event type, the Hourly files where the org publishes them (Event Monitoring) and the Daily files elsewhere, never both for one period, switching at a day boundary when that changes (logged; /statusz eventlogfile_intervals). Hourly or Daily reads only those files."`
	PollInterval time.Duration      `yaml:"poll_interval" mapstructure:"poll_interval" default:"1h" min:"1m" max:"24h" doc:"How often new files are listed."`
	Lookback     time.Duration      `yaml:"lookback" mapstructure:"lookback" default:"24h" min:"1m" max:"8760h" doc:"How far back the first poll (no checkpoint yet) starts."`
	SettleWindow time.Duration      `yaml:"settle_window" mapstructure:"settle_window" default:"5m" min:"0s" max:"24h" doc:"Files younger than this wait for the next poll (and hold back later files of their type)."`
	Concurrency  int                `yaml:"concurrency" mapstructure:"concurrency" default:"4" min:"1" max:"16" doc:"Event types downloaded at once."`
	Transforms   []Transform        `yaml:"transforms" mapstructure:"transforms" doc:"Rules applied in order to each row before it is shipped: hash, mask, drop_field, regex_replace, drop_row (docs/governance.md). A row's time and checkpoint come from the row as Salesforce sent it."`
	Sample       map[string]float64 `yaml:"sample" mapstructure:"sample" default:"" example:"{\"API\": 0.25}" doc:"Globs over event types, matched without regard to case, to the fraction of rows kept, 0 to 1: an exact name wins, else the longest glob that matches (of two as long, the first in sort order), and rows of no glob are all kept. An environment override sets one entry, e.g. SF2LOKI_SOURCES__EVENTLOGFILE__SAMPLE__API=0.25 (its name in lower case). Deterministic on the row's REQUEST_ID (else its whole row as read), so a replay after a failover keeps the same rows; a row left out still moves the checkpoint."`
	Exclude      []string           `yaml:"exclude" mapstructure:"exclude" default:"" example:"[ApexCallout, \"*Api\"]" doc:"With \"*\" in event_types: globs over the discovered event types to leave out, matched without regard to case. Types listed by name are never excluded."`
	Types        []EventLogFileType `yaml:"types" mapstructure:"types" doc:"Per event type: columns shipped as structured metadata and columns promoted to stream labels."`
}

// EventLogFileType is one event type's shaping.
type EventLogFileType struct {
	Name                     string   `yaml:"name" mapstructure:"name" default:"" example:"ReportExport" doc:"The event type (letters, digits and _ only)."`
	StructuredMetadataFields []string `yaml:"structured_metadata_fields" mapstructure:"structured_metadata_fields" default:"" example:"[REPORT_ID]" doc:"Columns of this type's rows shipped as structured metadata, besides sink.loki.structured_metadata_fields."`
	Labels                   []string `yaml:"labels" mapstructure:"labels" default:"" example:"[DELEGATED_USER]" doc:"Columns of this type's rows promoted to stream labels (a column's name is its label's name). Keep them few-valued: every value is a stream. source, event_type, job, service_name, sf_org_id, environment and org are refused."`
}

// EventlogObjects configures SOQL polling.
type EventlogObjects struct {
	Objects    []EventlogObject   `yaml:"objects" mapstructure:"objects" doc:"The objects to poll; empty disables the source. Checkpoint key eventlog_objects:<name>."`
	Transforms []Transform        `yaml:"transforms" mapstructure:"transforms" doc:"Rules applied in order to each row before it is shipped: hash, mask, drop_field, regex_replace, drop_row (docs/governance.md). A row's time and checkpoint come from the row as Salesforce sent it."`
	Sample     map[string]float64 `yaml:"sample" mapstructure:"sample" default:"" example:"{\"ApiEvent\": 0.25}" doc:"Globs over object names, matched without regard to case, to the fraction of rows kept, 0 to 1: an exact name wins, else the longest glob that matches (of two as long, the first in sort order), and rows of no glob are all kept. An environment override sets one entry, e.g. SF2LOKI_SOURCES__EVENTLOG_OBJECTS__SAMPLE__APIEVENT=0.25 (its name in lower case). Deterministic on the row's record Id (a big object's EventIdentifier), so a replay after a failover keeps the same rows; a row left out still moves the checkpoint."`
}

// EventlogObject is one polled object.
type EventlogObject struct {
	Name              string        `yaml:"name" mapstructure:"name" default:"" example:"LoginHistory" doc:"The object's API name (letters, digits and _ only)."`
	TimestampField    string        `yaml:"timestamp_field" mapstructure:"timestamp_field" default:"EventDate" example:"LoginTime" doc:"The datetime field rows are polled by, in ascending order with Id."`
	PollInterval      time.Duration `yaml:"poll_interval" mapstructure:"poll_interval" default:"5m" min:"10s" max:"24h" doc:"How often the object is polled."`
	Lookback          time.Duration `yaml:"lookback" mapstructure:"lookback" default:"1h" min:"1s" max:"8760h" doc:"How far back the first poll (no checkpoint yet) starts."`
	Settle            time.Duration `yaml:"settle" mapstructure:"settle" default:"0s" min:"0s" max:"24h" doc:"A window behind the watermark re-read every poll, de-duplicated by Id, so rows that become visible late are not lost. 0 re-reads nothing."`
	MaxCatchupRecords int           `yaml:"max_catchup_records" mapstructure:"max_catchup_records" default:"200000" min:"0" max:"10000000" doc:"The most rows one poll emits (the next poll continues); 0 is unbounded."`
	BigObject         string        `yaml:"big_object" mapstructure:"big_object" default:"auto" enum:"auto,true,false" doc:"Whether the object is a big object, read newest first along its index (the timestamp field must lead it, descending) and emitted one window at a time: auto recognises the Real-Time Event Monitoring big objects (LoginEvent, ApiEvent, ReportEvent, …) and names ending in __b."`
}

// Synthetic configures the synthetic source.
type Synthetic struct {
	Rate       int                `yaml:"rate" mapstructure:"rate" default:"0" min:"0" max:"1000000" doc:"Events per second; 0 disables the source."`
	EventTypes []string           `yaml:"event_types" mapstructure:"event_types" default:"" doc:"Event types to generate, round robin; empty means LoginEvent and ApiEvent."`
	Transforms []Transform        `yaml:"transforms" mapstructure:"transforms" doc:"Rules applied in order to each row before it is shipped: hash, mask, drop_field, regex_replace, drop_row (docs/governance.md). A row's time and checkpoint come from the row as Salesforce sent it."`
	Sample     map[string]float64 `yaml:"sample" mapstructure:"sample" default:"" example:"{\"ApiEvent\": 0.25}" doc:"Globs over event types, matched without regard to case, to the fraction of rows kept, 0 to 1: an exact name wins, else the longest glob that matches (of two as long, the first in sort order), and rows of no glob are all kept. An environment override sets one entry, e.g. SF2LOKI_SOURCES__SYNTHETIC__SAMPLE__APIEVENT=0.25 (its name in lower case). Deterministic on the row's sequence number (decimal), so a replay after a failover keeps the same rows; a row left out still moves the checkpoint."`
}

// Sink configures where entries go.
type Sink struct {
	Loki   LokiSink   `yaml:"loki" mapstructure:"loki" doc:"Grafana Loki's push API (or a compatible receiver)."`
	Stdout StdoutSink `yaml:"stdout" mapstructure:"stdout" doc:"A dry run: entries printed on stdout instead of pushed to Loki, and nothing committed (docs/operations.md, Previewing a configuration)."`
}

// StdoutSink is the dry run's sink.
type StdoutSink struct {
	Enabled bool `yaml:"enabled" mapstructure:"enabled" default:"false" doc:"Print each entry that would be pushed to Loki as one JSON line on stdout, {\"labels\":{…},\"time\":\"…\",\"line\":\"…\",\"metadata\":{…}} with the labels, structured metadata and line cap sink.loki applies, instead of pushing it (time in RFC 3339 with nanoseconds, UTC); logs stay on stderr. Nothing is committed and no other replica is disturbed: the checkpoints are kept in memory from an empty document (every source starts as on a first deployment) and never written, the configured state store and lease are not opened, coordinate.type counts as noop (a dry run never takes leadership), its health endpoint listens on a free loopback port instead of service.health_addr, and sink.loki.url is not needed. sf2loki run --dry-run sets it. Only run is affected: doctor still pushes its test entry to a sink.loki.url, and backfill pushes to Loki."`
}

// LokiSink configures the Loki push client.
type LokiSink struct {
	URL                      string            `yaml:"url" mapstructure:"url" default:"" format:"url" doc:"The push endpoint, used as it is (nothing is appended), e.g. http://loki:3100/loki/api/v1/push; check warns when the path does not end in /loki/api/v1/push. Required when a source is enabled."`
	TenantID                 string            `yaml:"tenant_id" mapstructure:"tenant_id" default:"" doc:"The Loki tenant, sent as X-Scope-OrgID on every push whatever the credentials (as Promtail's and Alloy's tenant_id). With a token and no basic_auth_user it is also the basic-auth user (Grafana Cloud's shorthand: the Loki user is the tenant)."`
	AuthToken                string            `yaml:"auth_token" mapstructure:"auth_token" default:"" secret:"true" doc:"A token (secret): the basic-auth password of basic_auth_user (else of tenant_id); with neither, a bearer token. Prefer auth_token_file."`
	AuthTokenFile            string            `yaml:"auth_token_file" mapstructure:"auth_token_file" default:"" doc:"A file holding the token (trimmed); used when auth_token is empty."`
	BasicAuthUser            string            `yaml:"basic_auth_user" mapstructure:"basic_auth_user" default:"" doc:"The basic-auth user of the token (auth_token or auth_token_file; without one it has no effect and check warns). Blank: tenant_id."`
	Headers                  map[string]string `yaml:"headers" mapstructure:"headers" default:"" secret:"true" doc:"Extra HTTP headers sent on every push, such as an API gateway's key. Every value is a secret: masked wherever it appears in logs and errors. Refused: Content-Type and Content-Encoding (from encoding), the headers the HTTP client sets (Host, Content-Length, Connection, ...), Authorization when auth_token, auth_token_file or a user in url is set, and X-Scope-OrgID when tenant_id is set (those keys own them)."`
	Encoding                 string            `yaml:"encoding" mapstructure:"encoding" default:"protobuf" enum:"protobuf,json" doc:"protobuf (snappy; Loki's canonical format) or json (gzip; for debugging)."`
	Compression              string            `yaml:"compression" mapstructure:"compression" default:"" enum:",snappy,gzip,none" doc:"The push body's compression. Blank: the encoding's own, snappy for protobuf and gzip for json. protobuf is always snappy (Loki's format): gzip or none with it is ignored, with a WARN. json takes gzip or none (snappy with json means gzip)."`
	Labels                   map[string]string `yaml:"labels" mapstructure:"labels" default:"" doc:"Static labels on every stream; only job, service_name, sf_org_id, environment and org are allowed."`
	StructuredMetadataFields []string          `yaml:"structured_metadata_fields" mapstructure:"structured_metadata_fields" default:"" doc:"Top-level keys of a JSON line promoted to structured metadata (user ids, IPs: never labels)."`
	MaxLineBytes             int               `yaml:"max_line_bytes" mapstructure:"max_line_bytes" default:"262144" min:"0" max:"16777216" doc:"Longer lines are truncated on a UTF-8 boundary with a marker giving the original size; 0 means 262144."`
	Timeout                  time.Duration     `yaml:"timeout" mapstructure:"timeout" default:"30s" min:"1s" max:"10m" doc:"Bound on each push request."`
	MaxInFlight              int               `yaml:"max_in_flight" mapstructure:"max_in_flight" default:"16" min:"1" max:"64" doc:"Pushes each lane may have in the air at once: with pushes taking 150 ms, 16 batches of 1,000 entries move up to about 100,000 entries a second per lane. A key's checkpoint moves only once every earlier batch holding it was accepted, whatever order they land in. Batches in the air count against queue_bytes. 1 pushes one batch at a time."`
	ReorderWindow            time.Duration     `yaml:"reorder_window" mapstructure:"reorder_window" default:"30m" min:"1s" max:"24h" zero:"allowed" doc:"A batch is pushed before an earlier one of its lane has landed only when its entries are at most this much newer than that batch's oldest: Loki refuses, per stream, entries older than the stream's newest by more than half its max_chunk_age (1h by default: keep this under it). 0 for a Loki with unordered_writes: false (a batch then overtakes only batches at least as new)."`
	Batch                    Batch             `yaml:"batch" mapstructure:"batch" doc:"Batching and queue bounds, per lane (realtime streams and bulk downloads each get their own)."`
	Egress                   Egress            `yaml:"egress" mapstructure:"egress" doc:"Bounds on what is shipped: rates (lossless: pushes wait) and a daily byte budget. All off by default (docs/governance.md)."`
	TLS                      LokiTLS           `yaml:"tls" mapstructure:"tls" doc:"TLS for an https url (TLS 1.2 at least): the CAs to trust, a client certificate for mutual TLS, the server name. The files are read at start. Pushes go through the proxy the standard environment variables name: HTTPS_PROXY for an https url, HTTP_PROXY for an http one, except to the hosts NO_PROXY lists (docs/operations.md, Loki over TLS)."`
}

// LokiTLS configures the Loki client's TLS.
type LokiTLS struct {
	CAFile             string `yaml:"ca_file" mapstructure:"ca_file" default:"" doc:"A PEM bundle of the CAs that may sign Loki's certificate. It replaces the system roots: only its CAs are trusted (put the public roots in the bundle too to trust both). Blank: the system roots."`
	CertFile           string `yaml:"cert_file" mapstructure:"cert_file" default:"" doc:"A PEM client certificate for mutual TLS (its intermediates may follow it); needs key_file."`
	KeyFile            string `yaml:"key_file" mapstructure:"key_file" default:"" doc:"The PEM private key of cert_file (PKCS#8, PKCS#1 or EC); needs cert_file."`
	ServerName         string `yaml:"server_name" mapstructure:"server_name" default:"" doc:"The name Loki's certificate must hold, also sent as SNI; blank: the host of url. For a url that names an IP address or another name than the certificate's."`
	InsecureSkipVerify bool   `yaml:"insecure_skip_verify" mapstructure:"insecure_skip_verify" default:"false" doc:"Accept any server certificate: the connection is encrypted, but anyone on the network path can read and forge it (the entries and the credentials). For a test only: check and the daemon warn. Prefer ca_file."`
}

// Egress bounds what is shipped to Loki.
type Egress struct {
	MaxLinesPerSecond int    `yaml:"max_lines_per_second" mapstructure:"max_lines_per_second" default:"0" min:"0" max:"100000000" doc:"Lines pushed per second at most (a token bucket holding one second's worth; pushes wait, nothing is lost); 0 is no limit."`
	MaxBytesPerSecond int64  `yaml:"max_bytes_per_second" mapstructure:"max_bytes_per_second" default:"0" min:"0" max:"10737418240" doc:"Line bytes pushed per second at most (before compression; a token bucket like max_lines_per_second); 0 is no limit."`
	DailyByteBudget   int64  `yaml:"daily_byte_budget" mapstructure:"daily_byte_budget" default:"0" min:"0" max:"1099511627776000" doc:"Line bytes (before compression) shipped per UTC day at most; 0 is no budget. Its use is kept in the checkpoint document (key egress:budget), so a restart or a new leader continues the day's count. A WARN at 80%."`
	BudgetAction      string `yaml:"budget_action" mapstructure:"budget_action" default:"pause" enum:"pause,drop" doc:"When the day's budget is spent. pause: nothing more is pushed or committed until 00:00 UTC, then ingestion resumes where it stopped (sources wait; Pub/Sub keeps events 72h, EventLogFile files stay listed); /readyz says budget paused. drop: batches are discarded and their checkpoints move (counted in sf2loki_loki_entries_dropped_total{reason=\"budget\"}): those rows are never shipped."`
	Scope             string `yaml:"scope" mapstructure:"scope" default:"org" enum:"org,deployment" doc:"With several orgs, org: each org gets the limits and budget above. deployment: they bound the whole deployment and each org gets an equal share (1/number of orgs), held by its shard's leader; an idle org's share is not lent to a busy one."`
}

// Batch shapes batches and bounds each lane's queue.
type Batch struct {
	MaxEntries   int           `yaml:"max_entries" mapstructure:"max_entries" default:"1000" min:"1" max:"100000" doc:"A batch is pushed at this many entries, at max_bytes, or max_wait after its first entry."`
	MaxBytes     int           `yaml:"max_bytes" mapstructure:"max_bytes" default:"1048576" min:"1" max:"67108864" doc:"Bytes at which a batch is pushed."`
	MaxWait      time.Duration `yaml:"max_wait" mapstructure:"max_wait" default:"1s" min:"10ms" max:"5m" doc:"How long a batch waits for more entries after its first."`
	QueueEntries int           `yaml:"queue_entries" mapstructure:"queue_entries" default:"10000" min:"1" max:"1000000" doc:"Entries a lane may hold; a full lane blocks its sources (nothing is dropped). Each lane reserves about 100 bytes per entry at start."`
	QueueBytes   int           `yaml:"queue_bytes" mapstructure:"queue_bytes" default:"67108864" min:"0" max:"4294967296" doc:"Bytes a lane may hold, batches in the air included; 0 means no byte bound. At 64 MiB one org with both lanes full needs a 512 MiB container; 16 MiB fits 256 MiB (docs/operations.md, Memory)."`
}

// Coordinate types.
const (
	CoordinateNoop      = "noop"
	CoordinateFileLease = "file_lease"
	CoordinateK8sLease  = "k8s_lease"
	CoordinateS3Lease   = "s3_lease"
	CoordinateGCSLease  = "gcs_lease"
)

// Coordinate selects and configures the leadership coordinator.
type Coordinate struct {
	Type      string    `yaml:"type" mapstructure:"type" default:"noop" enum:"noop,file_lease,k8s_lease,s3_lease,gcs_lease" doc:"noop: a single instance, no coordination. file_lease: a lease file on storage all replicas share (NFSv4, EFS). k8s_lease: a coordination.k8s.io/v1 Lease. s3_lease / gcs_lease: an object in S3 (or an S3-compatible store with conditional writes) or GCS, for stateless platforms (ECS Fargate, Cloud Run)."`
	FileLease FileLease `yaml:"file_lease" mapstructure:"file_lease" doc:"Used when type is file_lease."`
	K8sLease  K8sLease  `yaml:"k8s_lease" mapstructure:"k8s_lease" doc:"Used when type is k8s_lease. RBAC: get, create and patch on leases in the namespace, and watch (else standbys poll)."`
	S3Lease   S3Lease   `yaml:"s3_lease" mapstructure:"s3_lease" doc:"Used when type is s3_lease. Credentials come from the AWS default chain; IAM: s3:GetObject and s3:PutObject on the key, s3:ListBucket on the bucket (else an absent key reads as 403)."`
	GCSLease  GCSLease  `yaml:"gcs_lease" mapstructure:"gcs_lease" doc:"Used when type is gcs_lease."`
}

// LeaseTiming is shared by the lease sections.
type LeaseTiming struct {
	TTL           time.Duration `yaml:"ttl" mapstructure:"ttl" default:"30s" min:"2s" max:"24h" doc:"How long a standby must see the lease unchanged, on its own clock, before taking over."`
	RenewInterval time.Duration `yaml:"renew_interval" mapstructure:"renew_interval" default:"10s" min:"500ms" max:"12h" doc:"How often the leader renews and a standby polls. Must be below ttl/2."`
	HolderID      string        `yaml:"holder_id" mapstructure:"holder_id" default:"" doc:"This replica's name in the lease; blank uses hostname-pid. Must be unique per replica."`
}

// FileLease is a lease file on shared storage.
type FileLease struct {
	Path        string `yaml:"path" mapstructure:"path" default:"/var/lib/sf2loki/leader.lease" doc:"The lease file, on storage every replica mounts."`
	LeaseTiming `yaml:",inline" mapstructure:",squash"`
	Watch       bool `yaml:"watch" mapstructure:"watch" default:"true" doc:"A standby watches the lease file (inotify) and sees a renewal or a release as it is written, instead of reading it every renew_interval; on NFS, EFS, SMB and FUSE it polls regardless (inotify misses other hosts' writes there). false always polls: for a shared filesystem sf2loki does not recognise as one."`
}

// K8sLease is a Kubernetes Lease object.
type K8sLease struct {
	Namespace     string        `yaml:"namespace" mapstructure:"namespace" default:"default" doc:"The Lease's namespace."`
	Name          string        `yaml:"name" mapstructure:"name" default:"sf2loki-leader" doc:"The Lease's name."`
	Identity      string        `yaml:"identity" mapstructure:"identity" default:"" doc:"This replica's name in the Lease; blank uses $HOSTNAME (the pod name), else hostname-pid."`
	LeaseDuration time.Duration `yaml:"lease_duration" mapstructure:"lease_duration" default:"30s" min:"2s" max:"24h" doc:"How long a standby must see the Lease unchanged before taking over (the ttl)."`
	RenewInterval time.Duration `yaml:"renew_interval" mapstructure:"renew_interval" default:"10s" min:"500ms" max:"12h" doc:"How often the leader renews and a standby polls. Must be below lease_duration/2."`
	Kubeconfig    string        `yaml:"kubeconfig" mapstructure:"kubeconfig" default:"" doc:"A kubeconfig file; blank uses the in-cluster service account."`
	Watch         bool          `yaml:"watch" mapstructure:"watch" default:"true" doc:"A standby watches the Lease (RBAC watch) and sees a renewal or a release at once, instead of reading it every renew_interval; it polls while the watch is down. false always polls: behind a proxy that cuts long-lived requests."`
}

// S3Lease is a lease object in S3.
type S3Lease struct {
	S3Object    `yaml:",inline" mapstructure:",squash"`
	LeaseTiming `yaml:",inline" mapstructure:",squash"`
}

// GCSLease is a lease object in GCS.
type GCSLease struct {
	GCSObject   `yaml:",inline" mapstructure:",squash"`
	LeaseTiming `yaml:",inline" mapstructure:",squash"`
}

// S3Object names an object in S3.
type S3Object struct {
	Bucket      string `yaml:"bucket" mapstructure:"bucket" default:"" doc:"The bucket (required)."`
	Key         string `yaml:"key" mapstructure:"key" default:"sf2loki/leader.lease" doc:"The object key."`
	Region      string `yaml:"region" mapstructure:"region" default:"" doc:"The bucket's region; blank uses AWS_REGION or the shared config."`
	EndpointURL string `yaml:"endpoint_url" mapstructure:"endpoint_url" default:"" format:"url" doc:"An S3-compatible endpoint, e.g. http://minio:9000 (path-style addressing). It must implement If-Match and If-None-Match; run sf2loki doctor to check."`
}

// GCSObject names an object in GCS.
type GCSObject struct {
	Bucket      string `yaml:"bucket" mapstructure:"bucket" default:"" doc:"The bucket (required)."`
	ObjectName  string `yaml:"object_name" mapstructure:"object_name" default:"sf2loki/leader.lease" doc:"The object name."`
	ServiceFile string `yaml:"service_file" mapstructure:"service_file" default:"" doc:"A service-account key file; blank uses Application Default Credentials. STORAGE_EMULATOR_HOST is honoured."`
}

// State stores.
const (
	StoreFile = "file"
	StoreS3   = "s3"
	StoreGCS  = "gcs"
)

// State selects and configures the checkpoint store.
type State struct {
	Store string    `yaml:"store" mapstructure:"store" default:"file" enum:"file,s3,gcs" doc:"file: a JSON file (shared storage for file_lease). s3 / gcs: an object, for every other coordinator."`
	File  StateFile `yaml:"file" mapstructure:"file" doc:"Used when store is file."`
	S3    S3Object  `yaml:"s3" mapstructure:"s3" doc:"Used when store is s3." defaults:"key=sf2loki/state.json"`
	GCS   GCSObject `yaml:"gcs" mapstructure:"gcs" doc:"Used when store is gcs." defaults:"object_name=sf2loki/state.json"`
	// CommitInterval: see EffectiveCommitInterval.
	CommitInterval time.Duration `yaml:"commit_interval" mapstructure:"commit_interval" default:"0s" min:"100ms" max:"10m" zero:"allowed" doc:"The least time between two checkpoint writes: positions the sink accepted are gathered (the latest per key) and written together, and always at a drain, a demotion and a shutdown. A crash re-sends at most this much (identical entries, which Loki stores once). 0 takes the store's default: file 1s (a write and two syncs a second under constant load, not one per push; 100ms is the closest to per-push commits), s3 and gcs 10s (about 260,000 writes a month under constant load: see docs/operations.md). gcs allows about one write per second to an object: under 1s is refused there."`
}

// StateFile is a checkpoint file.
type StateFile struct {
	Path string `yaml:"path" mapstructure:"path" default:"/var/lib/sf2loki/state.json" doc:"The checkpoint file."`
}

// Service configures the process.
type Service struct {
	HealthAddr              string        `yaml:"health_addr" mapstructure:"health_addr" default:":8080" format:"listen" doc:"Listen address for /healthz, /readyz, /metrics and /statusz."`
	ShutdownGrace           time.Duration `yaml:"shutdown_grace" mapstructure:"shutdown_grace" default:"25s" min:"1s" max:"1h" doc:"How long a graceful stop may take to drain and commit before the lease is released anyway."`
	StallTimeout            time.Duration `yaml:"stall_timeout" mapstructure:"stall_timeout" default:"5m" min:"30s" max:"24h" zero:"allowed" doc:"The leader's liveness guard: when entries wait undelivered and no push or commit succeeds for this long, the leader reports it (/readyz 503, sf2loki_pipeline_stalled 1, one ERROR), abandons the batches in flight uncommitted and releases the lease so that another replica can try; it contends again after one ttl. 0 disables the guard."`
	UnreadyAfterSinkFailing time.Duration `yaml:"unready_after_sink_failing" mapstructure:"unready_after_sink_failing" default:"15m" min:"1m" max:"24h" zero:"allowed" doc:"The leader's /readyz answers 503 once every push to Loki has failed for this long (the entries are held and retried, nothing is lost; an orchestrator or an alert should see it). 0 keeps the leader ready however long Loki fails."`
	LogLevel                string        `yaml:"log_level" mapstructure:"log_level" default:"info" enum:"debug,info,warn,error" doc:"Minimum log level."`
	LogFormat               string        `yaml:"log_format" mapstructure:"log_format" default:"json" enum:"json,text" doc:"Log format."`
	Pprof                   bool          `yaml:"pprof" mapstructure:"pprof" default:"false" doc:"Serve Go's runtime profiles (net/http/pprof) under /debug/pprof/ on service.health_addr, to profile a running replica: go tool pprof http://<health_addr>/debug/pprof/profile?seconds=30 (CPU), …/heap (memory). Off by default: the profiles show the process's internals (stacks, and in the heap profile allocation sites, not values), a CPU profile costs a few percent while it runs, and anyone who reaches health_addr can take them."`

	Telemetry ServiceTelemetry `yaml:"telemetry" mapstructure:"telemetry" doc:"Metrics pushed over OTLP/HTTP (protobuf), e.g. to Grafana Cloud, beside /metrics (docs/operations.md, OTLP metrics push). Off by default."`
}

// Telemetry configures trace export.
type Telemetry struct {
	OTLPEndpoint string            `yaml:"otlp_endpoint" mapstructure:"otlp_endpoint" default:"" format:"url" doc:"OTLP/HTTP endpoint for traces, e.g. http://otel-collector:4318 (/v1/traces is appended when the URL has no path); blank disables trace export."`
	Headers      map[string]string `yaml:"headers" mapstructure:"headers" default:"" secret:"true" doc:"Extra HTTP headers for the OTLP exporter (e.g. authentication). Values are never logged."`
	ServiceName  string            `yaml:"service_name" mapstructure:"service_name" default:"sf2loki" doc:"The service.name resource attribute."`
}
