package config

import (
	"fmt"
	"maps"
	"net"
	"net/url"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/salesforce"
	"github.com/sf2loki/sf2loki/internal/adapters/salesforce/pubsub"
)

// loopback reports whether host is this machine (a local proxy or a test).
func loopback(host string) bool {
	ip := net.ParseIP(host)
	return host == "localhost" || (ip != nil && ip.IsLoopback())
}

var apiVersion = regexp.MustCompile(`^[0-9]{2,3}\.0$`)

// StaticLabels are the stream labels sink.loki.labels may set; sf2loki
// sets source and event_type itself. Every other field belongs in
// structured metadata, where it costs no stream.
var StaticLabels = []string{"job", "service_name", "sf_org_id", "environment", "org"}

// Validate checks the configuration and returns warnings about risky but
// valid choices and every problem found.
func (c *Config) Validate() (warnings []string, problems []Problem) {
	add := func(path, format string, args ...any) {
		problems = append(problems, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
	}
	// Enumerations.
	v := reflect.ValueOf(c).Elem()
	for _, f := range Schema() {
		if len(f.Enum) > 0 && !f.Item {
			if val := v.FieldByIndex(f.index).String(); !slices.Contains(f.Enum, val) {
				add(f.Path, "%q is not one of %v", val, f.Enum)
			}
		}
	}
	ct := c.Coordinate.Type
	requiredFor := func(path, value, what string) {
		if value == "" {
			add(path, "required when %s", what)
		}
	}
	timing := func(section string, ttl, renew time.Duration, ttlName string) {
		if ttl <= 0 {
			add(section+"."+ttlName, "must be > 0, got %s", ttl)
		}
		if renew <= 0 {
			add(section+".renew_interval", "must be > 0, got %s", renew)
		} else if ttl > 0 && renew >= ttl/2 {
			add(section+".renew_interval", "must be below %s/2 (%s), got %s: a single missed renewal must not cost leadership",
				ttlName, ttl/2, renew)
		}
	}
	switch ct {
	case CoordinateFileLease:
		l := c.Coordinate.FileLease
		requiredFor("coordinate.file_lease.path", l.Path, "coordinate.type is file_lease")
		timing("coordinate.file_lease", l.TTL, l.RenewInterval, "ttl")
	case CoordinateK8sLease:
		l := c.Coordinate.K8sLease
		requiredFor("coordinate.k8s_lease.namespace", l.Namespace, "coordinate.type is k8s_lease")
		requiredFor("coordinate.k8s_lease.name", l.Name, "coordinate.type is k8s_lease")
		timing("coordinate.k8s_lease", l.LeaseDuration, l.RenewInterval, "lease_duration")
		if l.LeaseDuration > 0 && l.LeaseDuration%time.Second != 0 {
			add("coordinate.k8s_lease.lease_duration", "must be whole seconds (a Lease stores leaseDurationSeconds), got %s", l.LeaseDuration)
		}
	case CoordinateS3Lease:
		l := c.Coordinate.S3Lease
		requiredFor("coordinate.s3_lease.bucket", l.Bucket, "coordinate.type is s3_lease")
		requiredFor("coordinate.s3_lease.key", l.Key, "coordinate.type is s3_lease")
		timing("coordinate.s3_lease", l.TTL, l.RenewInterval, "ttl")
	case CoordinateGCSLease:
		l := c.Coordinate.GCSLease
		requiredFor("coordinate.gcs_lease.bucket", l.Bucket, "coordinate.type is gcs_lease")
		requiredFor("coordinate.gcs_lease.object_name", l.ObjectName, "coordinate.type is gcs_lease")
		timing("coordinate.gcs_lease", l.TTL, l.RenewInterval, "ttl")
		if l.RenewInterval > 0 && l.RenewInterval < time.Second {
			add("coordinate.gcs_lease.renew_interval", "must be at least 1s: GCS allows about one write per second to one object, got %s", l.RenewInterval)
		}
	}
	switch c.State.Store {
	case StoreFile:
		requiredFor("state.file.path", c.State.File.Path, "state.store is file")
	case StoreS3:
		requiredFor("state.s3.bucket", c.State.S3.Bucket, "state.store is s3")
		requiredFor("state.s3.key", c.State.S3.Key, "state.store is s3")
	case StoreGCS:
		requiredFor("state.gcs.bucket", c.State.GCS.Bucket, "state.store is gcs")
		requiredFor("state.gcs.object_name", c.State.GCS.ObjectName, "state.store is gcs")
	}
	if path, same := c.leaseIsCheckpoint(); same {
		add(path, "the lease and the checkpoint document are the same object (%s); they must be separate objects, each with its own version", c.leaseURI())
	}
	if sf := c.Salesforce; sf.AuthMode != "none" {
		requiredFor("salesforce.client_id", strings.TrimSpace(sf.ClientID), "salesforce.auth_mode is "+sf.AuthMode)
		secret := func(key, value, file string) {
			if strings.TrimSpace(value) == "" && file == "" {
				add("salesforce."+key, "required when salesforce.auth_mode is %s: set %s or %s_file (a blank value is a missing secret)", sf.AuthMode, key, key)
			}
		}
		switch sf.AuthMode {
		case "jwt_bearer":
			requiredFor("salesforce.username", strings.TrimSpace(sf.Username), "salesforce.auth_mode is jwt_bearer")
			secret("private_key", sf.PrivateKey, sf.PrivateKeyFile)
		case "client_credentials":
			secret("client_secret", sf.ClientSecret, sf.ClientSecretFile)
			if sf.LoginURL == "" {
				add("salesforce.login_url", "required when salesforce.auth_mode is client_credentials: the org's My Domain URL (https://<name>.my.salesforce.com)")
			}
		}
		if u, err := url.Parse(sf.SalesforceLoginURL()); err != nil || u.Host == "" || (u.Scheme != "https" && !loopback(u.Hostname())) {
			add("salesforce.login_url", "%q is not an https URL (plain http only to a loopback address)", sf.LoginURL)
		} else if h := strings.ToLower(u.Hostname()); sf.AuthMode == "client_credentials" && salesforce.GenericLoginHost(h) {
			add("salesforce.login_url", "client_credentials needs the org's My Domain URL, not %s: Salesforce does not support the flow on the generic login hosts", h)
		}
		if !apiVersion.MatchString(sf.APIVersion) {
			add("salesforce.api_version", "%q is not a version like 60.0", sf.APIVersion)
		}
		if sf.TokenTTL < 2*time.Minute {
			add("salesforce.token_ttl", "must be at least 2m (a token is re-minted 60s before it ends), got %s", sf.TokenTTL)
		}
	}
	names := map[string]bool{}
	for i, o := range c.Sources.EventlogObjects.Objects {
		path := fmt.Sprintf("sources.eventlog_objects.objects[%d]", i)
		switch {
		case !salesforce.ValidName(o.Name):
			add(path+".name", "%q is not an object API name (letters, digits and _ only)", o.Name)
		case names[o.Name]:
			add(path+".name", "%s is listed twice", o.Name)
		}
		names[o.Name] = true
		if !salesforce.ValidName(o.TimestampField) {
			add(path+".timestamp_field", "%q is not a field API name (letters, digits and _ only)", o.TimestampField)
		}
		if o.PollInterval < 10*time.Second || o.Lookback <= 0 || o.Settle < 0 || o.MaxCatchupRecords < 0 {
			add(path, "poll_interval must be at least 10s, lookback > 0, settle and max_catchup_records >= 0")
		}
		if o.BigObject {
			add(path+".big_object", "big objects need a newest-first drain, which sf2loki does not have yet; remove %s or set big_object: false for an object that supports ORDER BY %s ASC", o.Name, o.TimestampField)
		}
	}
	if elf := c.Sources.EventLogFile; len(elf.EventTypes) > 0 {
		for _, t := range elf.EventTypes {
			if t != "*" && !salesforce.ValidName(t) {
				add("sources.eventlogfile.event_types", "%q is not an event type name (letters, digits and _) or \"*\"", t)
			}
		}
		if elf.PollInterval < time.Minute || elf.Lookback <= 0 || elf.SettleWindow < 0 || elf.Concurrency < 1 || elf.Concurrency > 16 {
			add("sources.eventlogfile", "poll_interval must be at least 1m, lookback > 0, settle_window >= 0 and concurrency 1 to 16")
		}
	}
	if ps := c.Sources.PubSub; len(ps.Topics) > 0 {
		for _, t := range ps.Topics {
			if t != "*" && !pubsub.ValidTopic(t) {
				add("sources.pubsub.topics", "%q is not a topic: /event/<Name>, /data/<Name> or \"*\"", t)
			}
		}
		if ps.NumRequested < 1 || ps.NumRequested > pubsub.MaxRequested {
			add("sources.pubsub.num_requested", "must be 1 to %d (Salesforce's limit per subscription), got %d", pubsub.MaxRequested, ps.NumRequested)
		}
		if ps.StallTimeout < time.Second || ps.RediscoveryInterval < 0 || ps.BridgeMaxBytes < 0 {
			add("sources.pubsub", "stall_timeout must be at least 1s (5m or more against Salesforce), rediscovery_interval and bridge_max_bytes >= 0")
		}
		host, _, err := net.SplitHostPort(ps.Endpoint)
		switch {
		case err != nil:
			add("sources.pubsub.endpoint", "%q is not host:port (%v)", ps.Endpoint, err)
		case ps.Plaintext && !loopback(host):
			add("sources.pubsub.plaintext", "plaintext is allowed only to a loopback endpoint, not %s: Salesforce's Pub/Sub API needs TLS", host)
		}
	}
	for _, src := range []struct {
		on   bool
		name string
	}{
		{len(c.Sources.EventlogObjects.Objects) > 0, "sources.eventlog_objects.objects"},
		{len(c.Sources.EventLogFile.EventTypes) > 0, "sources.eventlogfile.event_types"},
		{len(c.Sources.PubSub.Topics) > 0, "sources.pubsub.topics"},
	} {
		if !src.on {
			continue
		}
		if c.Salesforce.AuthMode == "none" {
			add("salesforce.auth_mode", "required when %s is set: jwt_bearer or client_credentials", src.name)
		}
		if c.Sink.Loki.URL == "" {
			add("sink.loki.url", "required when a source is enabled (%s is set)", src.name)
		}
	}
	if c.Sources.Synthetic.Rate < 0 {
		add("sources.synthetic.rate", "must be >= 0, got %d", c.Sources.Synthetic.Rate)
	}
	if c.Sources.Synthetic.Rate > 0 && c.Sink.Loki.URL == "" {
		add("sink.loki.url", "required when a source is enabled (sources.synthetic.rate > 0)")
	}
	if b := c.Sink.Loki.Batch; b.MaxEntries < 1 || b.MaxBytes < 1 || b.MaxWait <= 0 || b.QueueEntries < 1 || b.QueueBytes < 0 {
		add("sink.loki.batch", "max_entries, max_bytes, max_wait and queue_entries must be > 0 and queue_bytes >= 0, got %+v", b)
	}
	for _, k := range slices.Sorted(maps.Keys(c.Sink.Loki.Labels)) {
		if !slices.Contains(StaticLabels, k) {
			add("sink.loki.labels."+k, "not an allowed label (allowed: %s); put high-cardinality fields in sink.loki.structured_metadata_fields",
				strings.Join(StaticLabels, ", "))
		}
	}
	if c.Sink.Loki.MaxLineBytes < 0 || c.Sink.Loki.Timeout <= 0 {
		add("sink.loki", "max_line_bytes must be >= 0 and timeout > 0")
	}
	if st := c.Service.StallTimeout; st != 0 && st < 30*time.Second {
		add("service.stall_timeout", "must be 0 (off) or at least 30s, got %s", st)
	}
	if c.Service.ShutdownGrace <= 0 {
		add("service.shutdown_grace", "must be > 0, got %s", c.Service.ShutdownGrace)
	}
	if c.Service.HealthAddr == "" {
		add("service.health_addr", "required")
	}
	// Risky pairings.
	if ct != CoordinateNoop && ct != CoordinateFileLease && c.State.Store == StoreFile {
		warnings = append(warnings, fmt.Sprintf("coordinate.type %s with state.store file: every replica must mount the same state file on shared storage, "+
			"or a new leader starts from its own stale checkpoints; use state.store s3 or gcs", ct))
	}
	return warnings, problems
}

// leaseIsCheckpoint reports whether the lease object is the checkpoint
// object, and the key to blame.
func (c *Config) leaseIsCheckpoint() (string, bool) {
	switch {
	case c.Coordinate.Type == CoordinateS3Lease && c.State.Store == StoreS3:
		l, s := c.Coordinate.S3Lease, c.State.S3
		return "coordinate.s3_lease.key", l.Bucket == s.Bucket && l.Key == s.Key && l.EndpointURL == s.EndpointURL
	case c.Coordinate.Type == CoordinateGCSLease && c.State.Store == StoreGCS:
		l, s := c.Coordinate.GCSLease, c.State.GCS
		return "coordinate.gcs_lease.object_name", l.Bucket == s.Bucket && l.ObjectName == s.ObjectName
	case c.Coordinate.Type == CoordinateFileLease && c.State.Store == StoreFile:
		return "coordinate.file_lease.path", filepath.Clean(c.Coordinate.FileLease.Path) == filepath.Clean(c.State.File.Path)
	}
	return "", false
}

func (c *Config) leaseURI() string {
	switch c.Coordinate.Type {
	case CoordinateS3Lease:
		return "s3://" + c.Coordinate.S3Lease.Bucket + "/" + c.Coordinate.S3Lease.Key
	case CoordinateGCSLease:
		return "gs://" + c.Coordinate.GCSLease.Bucket + "/" + c.Coordinate.GCSLease.ObjectName
	case CoordinateFileLease:
		return "file://" + c.Coordinate.FileLease.Path
	}
	return ""
}
