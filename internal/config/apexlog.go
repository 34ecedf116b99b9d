package config

import "time"

// ApexLog configures the ApexLog source (sources.apexlog).
type ApexLog struct {
	Enabled      bool               `yaml:"enabled" mapstructure:"enabled" default:"false" doc:"Ship the org's debug logs. Each log costs one API request for its body, besides one listing per poll_interval: an org writing thousands of logs a day spends thousands of its daily API requests. Checkpoint key apexlog ({\"last_ts\": StartTime, \"ids\": [the newest 500 log Ids]})."`
	PollInterval time.Duration      `yaml:"poll_interval" mapstructure:"poll_interval" default:"1m" min:"10s" max:"24h" doc:"How often new logs are listed."`
	Lookback     time.Duration      `yaml:"lookback" mapstructure:"lookback" default:"1h" min:"1m" max:"168h" doc:"How far back the first poll (no checkpoint yet) starts. Salesforce keeps a monitoring log 7 days and a Developer Console log 24 hours."`
	Users        []string           `yaml:"users" mapstructure:"users" default:"" example:"[integration@acme.com]" doc:"Usernames whose logs are shipped (LogUser.Username); empty ships every user's. Each is put in the query, so only letters, digits and . _ + - around one @ are accepted."`
	MaxBodyBytes int                `yaml:"max_body_bytes" mapstructure:"max_body_bytes" default:"5242880" min:"1024" max:"16777216" doc:"A longer body is not shipped: the log ships as its metadata JSON with body_skipped=true and body_skip_reason (the record's LogLength tells before the download; the read stops there too). The sink truncates lines over sink.loki.max_line_bytes (256 KiB by default): raise it, and Loki's max_line_size, to ship whole bodies."`
	Transforms   []Transform        `yaml:"transforms" mapstructure:"transforms" doc:"Rules applied in order to each log before it is shipped: hash, mask, drop_field, regex_replace, drop_row (docs/governance.md). They see the ApexLog fields (Id, LogUserId, Operation, Status, …) and the body as the field Body: regex_replace on Body masks what a debug log prints; a drop_field of Body ships the metadata alone. A log's time and checkpoint come from the log as listed."`
	Sample       map[string]float64 `yaml:"sample" mapstructure:"sample" default:"" example:"{\"ApexLog\": 0.25}" doc:"The fraction of logs kept, 0 to 1, under the event type ApexLog. Deterministic on the log's Id and decided before its body is downloaded, so a log left out costs no API request."`
}

// OrgLimits configures the org-limits poller (salesforce.limits).
type OrgLimits struct {
	Enabled      bool          `yaml:"enabled" mapstructure:"enabled" default:"true" doc:"Read the org's limits (GET /services/data/vXX.X/limits) every poll_interval: one API request each time (288 a day at 5m), from the org's daily allocation the gauges show. The user needs View Setup and Configuration; without it each poll fails (one WARN) and the gauges stay empty."`
	PollInterval time.Duration `yaml:"poll_interval" mapstructure:"poll_interval" default:"5m" min:"1m" max:"24h" doc:"How often the limits are read."`
}
