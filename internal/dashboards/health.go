package dashboards

// sh is the shard matcher of the series exported per shard (per org); with
// All (`.*`) it also matches the single-org form, which has no shard label.
const sh = `shard=~"$shard"`

func rate(metric, by, match string) string {
	sel := metric
	if match != "" {
		sel += "{" + match + "}"
	}
	return "sum by (" + by + ") (rate(" + sel + "[$__rate_interval]))"
}

func increase(metric, by, match string) string {
	sel := metric
	if match != "" {
		sel += "{" + match + "}"
	}
	return "sum by (" + by + ") (increase(" + sel + "[$__rate_interval]))"
}

func quantile(q, bucket, by, match string) string {
	sel := bucket
	if match != "" {
		sel += "{" + match + "}"
	}
	return "histogram_quantile(" + q + ", sum by (" + by + ") (rate(" + sel + "[$__rate_interval])))"
}

func health() Dashboard {
	return Dashboard{
		File:  "sf2loki-health.json",
		UID:   "sf2loki-health",
		Title: "sf2loki — HA and pipeline health",
		Description: "Leadership, checkpoints, the Loki sink, ingestion per source, Salesforce API health and the egress budget, " +
			"from the metrics every replica serves on /metrics (scrape every replica; `instance` tells them apart).",
		Datasource: "prometheus",
		Variables: []Variable{{
			Name: "shard", Label: "Shard", Query: "label_values(sf2loki_leader, shard)",
			Doc: "the org (shard) of the per-shard series; empty in the single-org form, where All matches the series without a shard label.",
		}},
		Rows: []Row{
			{Title: "Leadership", Panels: []Panel{
				{Title: "Leaders per shard", Kind: Stat, Width: 6,
					Description: "sum(sf2loki_leader) per shard: 1 in steady state; 0 while nobody leads, 2 would be two leaders.",
					Queries:     []Query{{Expr: `sum by (shard) (sf2loki_leader{` + sh + `})`, Legend: "{{shard}}"}}},
				{Title: "Replicas per version", Kind: Stat, Width: 6,
					Description: "Replicas serving /metrics, by the binary's version and commit: one line during a rolling upgrade.",
					Queries:     []Query{{Expr: `count by (version, commit) (sf2loki_build_info)`, Legend: "{{version}} {{commit}}"}}},
				{Title: "Leader per replica", Kind: TimeSeries, Width: 12,
					Description: "1 on the replica leading the shard with a valid fence.",
					Queries:     []Query{{Expr: `max by (instance, shard) (sf2loki_leader{` + sh + `})`, Legend: "{{instance}} {{shard}}"}}},
				{Title: "Lease epoch", Kind: TimeSeries,
					Description: "The leader's epoch per shard: one step per takeover.",
					Queries:     []Query{{Expr: `max by (shard) (sf2loki_lease_epoch{` + sh + `})`, Legend: "{{shard}}"}}},
				{Title: "Lease transitions", Kind: TimeSeries, Unit: "ops",
					Description: "Lease transitions per second by shard and kind (acquired, renewed, lost, fenced, released, …).",
					Queries:     []Query{{Expr: rate("sf2loki_lease_transitions_total", "shard, transition", sh), Legend: "{{shard}} {{transition}}"}}},
				{Title: "Take-overs of stale leases", Kind: TimeSeries,
					Description: "Leases taken over because their holder stopped renewing (it died, froze or lost its store), per shard: unplanned moves. Hand-offs of a graceful stop or of rebalancing are not counted.",
					Queries:     []Query{{Expr: increase("sf2loki_lease_acquisitions_total", "shard", sh+`,from="stale"`), Legend: "{{shard}}"}}},
				{Title: "Renew failures and fence closures", Kind: TimeSeries,
					Description: "Renewal rounds that failed without losing the lease, and transitions fenced (a leader's fence closed), per replica and shard.",
					Queries: []Query{
						{Expr: increase("sf2loki_lease_renew_failures_total", "instance, shard", sh), Legend: "renew failures {{instance}} {{shard}}"},
						{Expr: increase("sf2loki_lease_transitions_total", "instance, shard", sh+`,transition="fenced"`), Legend: "fenced {{instance}} {{shard}}"},
					}},
				{Title: "Coordination blocked", Kind: TimeSeries,
					Description: "1 for the reason a replica does not contend for the lease (checkpoint_corrupt, lease_unreadable, resigned, …).",
					Queries:     []Query{{Expr: `max by (instance, shard, reason) (sf2loki_coordination_blocked{` + sh + `}) > 0`, Legend: "{{instance}} {{shard}} {{reason}}"}}},
			}},
			{Title: "Checkpoints and object store", Panels: []Panel{
				{Title: "Checkpoint commits by outcome", Kind: TimeSeries, Unit: "ops",
					Description: "Per shard: ok, recovered (a lost acknowledgement verified), conflict, fenced, error.",
					Queries:     []Query{{Expr: rate("sf2loki_checkpoint_commits_total", "shard, outcome", sh), Legend: "{{shard}} {{outcome}}"}}},
				{Title: "Checkpoint commit latency", Kind: TimeSeries, Unit: "s",
					Description: "p50 and p99 of a checkpoint write.",
					Queries: []Query{
						{Expr: quantile("0.5", "sf2loki_checkpoint_commit_duration_seconds_bucket", "le", ""), Legend: "p50"},
						{Expr: quantile("0.99", "sf2loki_checkpoint_commit_duration_seconds_bucket", "le", ""), Legend: "p99"},
					}},
				{Title: "Checkpoint age per source", Kind: TimeSeries, Unit: "s",
					Description: "How old each source's committed checkpoint is.",
					Queries:     []Query{{Expr: `max by (shard, source) (sf2loki_checkpoint_age_seconds{` + sh + `})`, Legend: "{{shard}} {{source}}"}}},
				{Title: "Object-store requests", Kind: TimeSeries, Unit: "reqps",
					Description: "Requests to the lease and checkpoint stores by backend, operation and outcome.",
					Queries:     []Query{{Expr: rate("sf2loki_objectstore_requests_total", "backend, op, outcome", ""), Legend: "{{backend}} {{op}} {{outcome}}"}}},
			}},
			{Title: "Loki sink", Panels: []Panel{
				{Title: "Entries pushed", Kind: TimeSeries, Unit: "cps",
					Description: "Entries Loki accepted per second, per replica.",
					Queries:     []Query{{Expr: rate("sf2loki_loki_entries_pushed_total", "instance", ""), Legend: "{{instance}}"}}},
				{Title: "Push latency", Kind: TimeSeries, Unit: "s",
					Description: "p50 and p99 of one batch push, retries included.",
					Queries: []Query{
						{Expr: quantile("0.5", "sf2loki_loki_push_duration_seconds_bucket", "le", ""), Legend: "p50"},
						{Expr: quantile("0.99", "sf2loki_loki_push_duration_seconds_bucket", "le", ""), Legend: "p99"},
					}},
				{Title: "Entries dropped", Kind: TimeSeries,
					Description: "Entries never shipped whose checkpoints moved on, by reason (bad_request, oversized_413, budget).",
					Queries:     []Query{{Expr: increase("sf2loki_loki_entries_dropped_total", "reason", ""), Legend: "{{reason}}"}}},
				{Title: "Push errors: Loki rejecting, pipeline stalled", Kind: TimeSeries,
					Description: "1 while Loki refuses every entry (the data is held uncommitted), and 1 after the liveness guard fired.",
					Queries: []Query{
						{Expr: `max by (instance) (sf2loki_loki_rejecting)`, Legend: "rejecting {{instance}}"},
						{Expr: `max by (instance) (sf2loki_pipeline_stalled)`, Legend: "stalled {{instance}}"},
					}},
				{Title: "Since the last accepted push, on leaders", Kind: TimeSeries, Unit: "s",
					Description: "Seconds since Loki last accepted a push from each replica that leads a shard; since its start while it has pushed nothing yet. Standbys push nothing and are left out.",
					Queries: []Query{{Expr: `(time() - max by (instance) (sf2loki_loki_last_success_timestamp_seconds)) and on (instance) (max by (instance) (sf2loki_shards_led) > 0)`,
						Legend: "{{instance}}"}}},
				{Title: "Lane depth", Kind: TimeSeries,
					Description: "Entries and bytes each shard's lanes (bulk, realtime) hold for Loki.",
					Queries: []Query{
						{Expr: `sum by (shard, lane) (sf2loki_lane_entries{` + sh + `})`, Legend: "{{shard}} {{lane}} entries"},
						{Expr: `sum by (shard, lane) (sf2loki_lane_bytes{` + sh + `})`, Legend: "{{shard}} {{lane}} bytes"},
					}},
			}},
			{Title: "Sources", Panels: []Panel{
				{Title: "Entries ingested per source", Kind: TimeSeries, Unit: "cps",
					Description: "Entries read per second by source.",
					Queries:     []Query{{Expr: rate("sf2loki_entries_ingested_total", "source", sh), Legend: "{{source}}"}}},
				{Title: "Entries ingested per event type", Kind: TimeSeries, Unit: "cps",
					Description: "The ten busiest source and event type pairs.",
					Queries:     []Query{{Expr: "topk(10, " + rate("sf2loki_entries_ingested_total", "source, event_type", sh) + ")", Legend: "{{source}} {{event_type}}"}}},
				{Title: "Ingest lag per source", Kind: TimeSeries, Unit: "s",
					Description: "p99 of the time from an event to its read, by source.",
					Queries:     []Query{{Expr: quantile("0.99", "sf2loki_ingest_lag_seconds_bucket", "source, le", sh), Legend: "{{source}}"}}},
				{Title: "Pub/Sub reconnects", Kind: TimeSeries,
					Description: "Subscriptions reopened, by topic and reason.",
					Queries:     []Query{{Expr: increase("sf2loki_pubsub_reconnects_total", "topic, reason", ""), Legend: "{{topic}} {{reason}}"}}},
			}},
			{Title: "Salesforce API", Panels: []Panel{
				{Title: "Throttled (REQUEST_LIMIT_EXCEEDED)", Kind: TimeSeries,
					Description: "Closings of the org's throttle gate by shard and the call that met the limit (query, logfile, rest).",
					Queries:     []Query{{Expr: increase("sf2loki_salesforce_throttled_total", "shard, api", sh), Legend: "{{shard}} {{api}}"}}},
				{Title: "Auth failing", Kind: TimeSeries,
					Description: "1 while the token endpoint refuses the credentials; and failed mints by reason.",
					Queries: []Query{
						{Expr: `max by (instance) (sf2loki_salesforce_auth_failing)`, Legend: "failing {{instance}}"},
						{Expr: increase("sf2loki_salesforce_auth_failures_total", "shard, reason", sh), Legend: "failures {{shard}} {{reason}}"},
					}},
				{Title: "Daily API requests remaining", Kind: TimeSeries,
					Description: "The org's DailyApiRequests limit as the shard's leader last read it.",
					Queries: []Query{{Expr: `max by (shard) (sf2loki_salesforce_limit_remaining{limit="DailyApiRequests", ` + sh + `})`,
						Legend: "{{shard}}"}}},
				{Title: "Lowest limits remaining", Kind: TimeSeries, Unit: "percentunit",
					Description: "The ten limits with the smallest fraction left.",
					Queries: []Query{{Expr: `bottomk(10, max by (shard, limit) (sf2loki_salesforce_limit_remaining{` + sh + `}) / max by (shard, limit) (sf2loki_salesforce_limit_max{` + sh + `} > 0))`,
						Legend: "{{shard}} {{limit}}"}}},
			}},
			{Title: "Egress budget", Panels: []Panel{
				{Title: "Egress budget used", Kind: TimeSeries, Unit: "bytes",
					Description: "Line bytes shipped this UTC day against sink.loki.egress.daily_byte_budget, per shard.",
					Queries: []Query{
						{Expr: `max by (shard) (sf2loki_egress_budget_used_bytes{` + sh + `})`, Legend: "used {{shard}}"},
						{Expr: `max by (shard) (sf2loki_egress_budget_bytes{` + sh + `})`, Legend: "budget {{shard}}"},
					}},
				{Title: "Egress paused", Kind: TimeSeries,
					Description: "1 while the shard's leader holds its pushes until 00:00 UTC (budget_action: pause).",
					Queries:     []Query{{Expr: `max by (shard) (sf2loki_egress_paused{` + sh + `})`, Legend: "{{shard}}"}}},
			}},
		},
	}
}
