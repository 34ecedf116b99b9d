package config

import (
	"errors"
	"fmt"
	"maps"
	"net"
	"net/url"
	pathpkg "path"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sf2loki/sf2loki/internal/lokirules"
	"github.com/sf2loki/sf2loki/internal/sfrules"
)

// loopback reports whether host is this machine (a local proxy or a test).
func loopback(host string) bool {
	ip := net.ParseIP(host)
	return strings.EqualFold(host, "localhost") || (ip != nil && ip.IsLoopback())
}

var apiVersion = regexp.MustCompile(`^[0-9]{2,3}\.0$`)

// Validate checks the configuration and returns warnings about risky but
// valid choices and every problem found. Every number and duration is
// checked against its key's range and every URL and address is parsed
// (the min, max and format tags), so that what check accepts, run can
// build and keep running.
func (c *Config) Validate() (warnings []string, problems []Problem) {
	reported := map[string]bool{}
	add := func(path, format string, args ...any) {
		reported[path] = true
		problems = append(problems, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
	}
	// addOnce adds a problem unless the key already has one (a more
	// specific check said it first).
	addOnce := func(path, format string, args ...any) {
		if !reported[path] {
			add(path, format, args...)
		}
	}
	// Enumerations.
	c.eachLeaf(func(f Field, v reflect.Value, path string) {
		if len(f.Enum) > 0 {
			if val := v.String(); !slices.Contains(f.Enum, val) {
				add(path, "%q is not one of %v", val, f.Enum)
			}
		}
	})
	ct := c.Coordinate.Type
	orgs := c.orgSections()
	// Checks more specific than a key's range come first: they win.
	if l := c.Coordinate.GCSLease; ct == CoordinateGCSLease && l.RenewInterval > 0 && l.RenewInterval < time.Second {
		add("coordinate.gcs_lease.renew_interval", "must be at least 1s: GCS allows about one write per second to one object, got %s", l.RenewInterval)
	}
	for _, o := range orgs {
		if sf := o.sf; sf.AuthMode != "none" && sf.TokenTTL > 0 && sf.TokenTTL < 2*time.Minute {
			add(o.prefix+"salesforce.token_ttl", "must be at least 2m (a token is re-minted 60s before it ends), got %s", sf.TokenTTL)
		}
	}
	c.checkFields(func(path, msg string) { addOnce(path, "%s", msg) })
	requiredFor := func(path, value, what string) {
		if value == "" {
			add(path, "required when %s", what)
		}
	}
	timing := func(section string, ttl, renew time.Duration, ttlName string) {
		if ttl > 0 && renew > 0 && renew >= ttl/2 {
			addOnce(section+".renew_interval", "must be below %s/2 (%s), got %s: a single missed renewal must not cost leadership",
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
			addOnce("coordinate.k8s_lease.lease_duration", "must be whole seconds (a Lease stores leaseDurationSeconds), got %s", l.LeaseDuration)
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
	path, msg := c.leaseIsCheckpoint()
	if msg != "" {
		add(path, "%s", msg)
	}
	if len(c.Orgs) > 0 {
		namesOK := c.validateOrgNames(add)
		for _, section := range []string{"salesforce", "sources"} {
			if keys := c.setBesideOrgs(section); len(keys) > 0 {
				add(section, "set beside orgs (%s): with orgs, each org's salesforce and sources belong in its orgs entry; "+
					"move them into one (orgs[].%s) and leave the top-level %s out", strings.Join(keys, ", "), section, section)
			}
		}
		// One problem at a time: names that are wrong or twice, or a
		// lease that already is the checkpoint, make the derived objects
		// meaningless.
		if namesOK && msg == "" {
			if path, msg := c.shardObjectsAlias(); msg != "" {
				add(path, "%s", msg)
			}
		}
		if name := c.Coordinate.K8sLease.Name; ct == CoordinateK8sLease && namesOK {
			longest := len(membersSuffix)
			for _, o := range c.Orgs[1:] {
				longest = max(longest, len(o.Name))
			}
			if len(name)+1+longest > maxK8sName {
				add("coordinate.k8s_lease.name", "%d characters is too long with orgs: the Leases <name>-<org> and <name>-members must fit in %d characters; "+
					"shorten it to at most %d", len(name), maxK8sName, maxK8sName-1-longest)
			}
		}
	}
	for _, o := range orgs {
		c.validateOrg(o, add, addOnce, requiredFor)
	}
	c.checkOverlap(orgs, add)
	checkStandardChannel(orgs, add)
	c.checkSameOrg(add)
	warnings = append(warnings, c.channelWarnings(orgs)...)
	c.checkLokiClient(add)
	warnings = append(warnings, c.checkServiceTelemetry(add)...)
	warnings = append(warnings, c.validateShape(add)...)
	c.checkApexLog(orgs, add)
	warnings = append(warnings, c.checkELFTypes(orgs, add)...)
	warnings = append(warnings, c.compressionWarning()...)
	for _, k := range slices.Sorted(maps.Keys(c.Sink.Loki.Labels)) {
		switch {
		case !lokirules.IsStatic(k):
			add("sink.loki.labels."+k, "not an allowed label (allowed: %s); put high-cardinality fields in sink.loki.structured_metadata_fields",
				strings.Join(lokirules.StaticLabels, ", "))
		case len(c.Orgs) > 0 && slices.Contains(OrgLabels, k):
			add("sink.loki.labels."+k, "set by each org when orgs are configured (org=<its name>, sf_org_id=<its org id>); remove it from sink.loki.labels")
		}
	}
	if c.Service.HealthAddr == "" {
		add("service.health_addr", "required")
	}
	if ci := c.State.CommitInterval; c.State.Store == StoreGCS && ci > 0 && ci < MinGCSCommitInterval {
		add("state.commit_interval", "%s with state.store gcs: GCS allows about one write per second to an object and answers 429 above it; "+
			"use at least %s (0 takes the default, %s)", ci, MinGCSCommitInterval, DefaultObjectCommitInterval)
	}
	// Risky pairings.
	if st, least := c.Service.StallTimeout, c.MinStallTimeout(); st > 0 && st < least {
		warnings = append(warnings, fmt.Sprintf("service.stall_timeout %s is shorter than one batch can legitimately take "+
			"(sink.loki.batch.max_wait + 5 push attempts of sink.loki.timeout + the checkpoint commit interval); the daemon uses %s", st, least))
	}
	warnings = append(warnings, c.egressWarnings()...)
	warnings = append(warnings, c.lokiClientWarnings()...)
	if ct != CoordinateNoop && ct != CoordinateFileLease && c.State.Store == StoreFile {
		warnings = append(warnings, fmt.Sprintf("coordinate.type %s with state.store file: every replica must mount the same state file on shared storage, "+
			"or a new leader starts from its own stale checkpoints; use state.store s3 or gcs", ct))
	}
	return warnings, problems
}

// maxK8sName is the longest name of a Kubernetes object (a DNS subdomain).
const maxK8sName = 253

// orgSection is one org's salesforce and sources as validation sees them:
// the top level's (prefix "") and each orgs entry's (prefix "orgs[i].").
type orgSection struct {
	prefix string
	sf     Salesforce
	src    Sources
}

func (c *Config) orgSections() []orgSection {
	out := []orgSection{{"", c.Salesforce, c.Sources}}
	for i, o := range c.Orgs {
		out = append(out, orgSection{fmt.Sprintf("orgs[%d].", i), o.Salesforce, o.Sources})
	}
	return out
}

// validateOrg checks one org's connection and sources.
func (c *Config) validateOrg(o orgSection, add, addOnce func(path, format string, args ...any), requiredFor func(path, value, what string)) {
	p := o.prefix
	if id := strings.TrimSpace(o.sf.OrgID); id != "" {
		if _, ok := orgID15(id); !ok {
			add(p+"salesforce.org_id", "%q is not an org id: 18 letters and digits (or the 15 Setup > Company Information shows); "+
				"correct it, or leave it blank to ask /services/oauth2/userinfo", o.sf.OrgID)
		}
	}
	if sf := o.sf; sf.AuthMode != "none" {
		mode := p + "salesforce.auth_mode is " + sf.AuthMode
		requiredFor(p+"salesforce.client_id", strings.TrimSpace(sf.ClientID), mode)
		secret := func(key, value, file string) {
			if strings.TrimSpace(value) == "" && file == "" {
				add(p+"salesforce."+key, "required when %s: set %s or %s_file (a blank value is a missing secret)", mode, key, key)
			}
		}
		switch sf.AuthMode {
		case "jwt_bearer":
			requiredFor(p+"salesforce.username", strings.TrimSpace(sf.Username), mode)
			secret("private_key", sf.PrivateKey, sf.PrivateKeyFile)
		case "client_credentials":
			secret("client_secret", sf.ClientSecret, sf.ClientSecretFile)
			if sf.LoginURL == "" {
				add(p+"salesforce.login_url", "required when %s: the org's My Domain URL (https://<name>.my.salesforce.com)", mode)
			}
		}
		if u, err := url.Parse(sf.SalesforceLoginURL()); err != nil || u.Host == "" {
			addOnce(p+"salesforce.login_url", "%q is not an https URL (plain http only to a loopback address)", sf.LoginURL)
		} else if what, use := sfrules.NotALoginHost(u.Hostname()); what != "" {
			addOnce(p+"salesforce.login_url", "%s is %s, which has no OAuth token endpoint: use the org's My Domain login URL, %s "+
				"(Setup > My Domain; a sandbox's ends in .sandbox.my.salesforce.com)", sf.LoginURL, what, use)
		} else if u.Scheme != "https" && !loopback(u.Hostname()) {
			addOnce(p+"salesforce.login_url", "%s is plain %s: Salesforce takes the token request (the key's assertion or the client secret) over https only; "+
				"write https://%s (plain http is allowed only to a loopback address, for a local test server)", sf.LoginURL, u.Scheme, u.Host)
		} else if h := strings.ToLower(u.Hostname()); sf.AuthMode == "client_credentials" && sfrules.GenericLoginHost(h) {
			addOnce(p+"salesforce.login_url", "client_credentials needs the org's My Domain URL, not %s: Salesforce does not support the flow on the generic login hosts", h)
		}
		if u, err := url.Parse(sf.JWTAudienceURL); err == nil && sf.JWTAudienceURL != "" {
			if what, use := sfrules.NotALoginHost(u.Hostname()); what != "" {
				addOnce(p+"salesforce.jwt_audience", "%s is %s: the audience is https://login.salesforce.com (production), https://test.salesforce.com (a sandbox) "+
					"or an Experience Cloud site's URL; leave jwt_audience blank for the first two, and set login_url to %s", sf.JWTAudienceURL, what, use)
			}
		}
		if !apiVersion.MatchString(sf.APIVersion) {
			add(p+"salesforce.api_version", "%q is not a version like 60.0", sf.APIVersion)
		}
	}
	names := map[string]bool{}
	for i, obj := range o.src.EventlogObjects.Objects {
		path := fmt.Sprintf("%ssources.eventlog_objects.objects[%d]", p, i)
		switch {
		case !sfrules.ValidName(obj.Name):
			add(path+".name", "%q is not an object API name (letters, digits and _ only)", obj.Name)
		case names[obj.Name]:
			add(path+".name", "%s is listed twice", obj.Name)
		}
		names[obj.Name] = true
		if !sfrules.ValidName(obj.TimestampField) {
			add(path+".timestamp_field", "%q is not a field API name (letters, digits and _ only)", obj.TimestampField)
		}
		if _, err := sfrules.IsBigObject(obj.Name, obj.BigObject); err != nil {
			add(path+".big_object", "%q is not auto, true or false", obj.BigObject)
		}
	}
	if elf := o.src.EventLogFile; len(elf.EventTypes) > 0 {
		for _, t := range elf.EventTypes {
			if t != "*" && !sfrules.ValidName(t) {
				add(p+"sources.eventlogfile.event_types", "%q is not an event type name (letters, digits and _) or \"*\"", t)
			}
		}
	}
	if ps := o.src.PubSub; len(ps.Topics) > 0 {
		for _, t := range ps.Topics {
			if t != "*" && !sfrules.ValidTopic(t) {
				add(p+"sources.pubsub.topics", "%q is not a topic: /event/<Name>, /data/<Name> or \"*\"", t)
			}
		}
		if host, _, err := net.SplitHostPort(ps.Endpoint); err == nil && ps.Plaintext && !loopback(host) {
			add(p+"sources.pubsub.plaintext", "plaintext is allowed only to a loopback endpoint, not %s: Salesforce's Pub/Sub API needs TLS", host)
		}
	}
	for _, src := range []struct {
		on   bool
		name string
	}{
		{len(o.src.EventlogObjects.Objects) > 0, p + "sources.eventlog_objects.objects"},
		{len(o.src.EventLogFile.EventTypes) > 0, p + "sources.eventlogfile.event_types"},
		{len(o.src.PubSub.Topics) > 0, p + "sources.pubsub.topics"},
		{o.src.ApexLog.Enabled, p + "sources.apexlog.enabled"},
	} {
		if !src.on {
			continue
		}
		if o.sf.AuthMode == "none" {
			add(p+"salesforce.auth_mode", "required when %s is set: jwt_bearer or client_credentials", src.name)
		}
		if c.lokiURLMissing() {
			add("sink.loki.url", "required when a source is enabled (%s is set)", src.name)
		}
	}
	if o.src.Synthetic.Rate > 0 && c.lokiURLMissing() {
		add("sink.loki.url", "required when a source is enabled (%ssources.synthetic.rate > 0)", p)
	}
}

// checkFields checks every number and duration against its range and every
// string with a format, list items included (as path[i].key).
func (c *Config) checkFields(report func(path, msg string)) {
	c.eachLeaf(func(f Field, v reflect.Value, path string) {
		if msg := checkField(f, v); msg != "" {
			report(path, msg)
		}
	})
}

// eachLeaf calls fn with every key's field, value and path as problems show
// it, list items included at every depth (as path[i].key).
func (c *Config) eachLeaf(fn func(f Field, v reflect.Value, path string)) {
	eachLeaf(reflect.ValueOf(c).Elem(), "", "", fn)
}

// eachLeaf walks the fields of one level (see levelFields) of v, a Config
// or a list item, whose keys are shown under prefix.
func eachLeaf(v reflect.Value, level, prefix string, fn func(f Field, v reflect.Value, path string)) {
	for _, f := range levelFields()[level] {
		switch {
		case f.List:
			items := v.FieldByIndex(f.index)
			for i := range items.Len() {
				eachLeaf(items.Index(i), f.Path, fmt.Sprintf("%s%s[%d].", prefix, f.rel(), i), fn)
			}
		case f.Section:
		default:
			fn(f, v.FieldByIndex(f.index), prefix+f.rel())
		}
	}
}

// checkField checks one value against f's range or format.
func checkField(f Field, fv reflect.Value) string {
	if f.Format != "" {
		return checkFormat(f.Format, fv.String())
	}
	if !f.hasMin && !f.hasMax {
		return ""
	}
	n := fv.Int()
	show := func(n int64) string {
		if f.Type == "duration" {
			return time.Duration(n).String()
		}
		return strconv.FormatInt(n, 10)
	}
	switch {
	case n == 0 && f.ZeroAllowed:
	case f.hasMin && n < f.min && n <= 0 && f.min > 0:
		return fmt.Sprintf("must be > 0, got %s; the minimum is %s%s", show(n), f.boundText(f.Min), zeroHint(f))
	case f.hasMin && n < f.min:
		return fmt.Sprintf("must be at least %s, got %s%s", f.boundText(f.Min), show(n), zeroHint(f))
	case f.hasMax && n > f.max:
		return fmt.Sprintf("must be at most %s, got %s", f.boundText(f.Max), show(n))
	}
	return ""
}

func zeroHint(f Field) string {
	if f.ZeroAllowed {
		return " (or 0)"
	}
	return ""
}

// checkFormat parses s as the format says; "" is always fine here (a
// required key says so itself).
func checkFormat(format, s string) string {
	if s == "" {
		return ""
	}
	switch format {
	case "url":
		return checkURL(s)
	case "hostport", "listen":
		host, port, err := net.SplitHostPort(s)
		if err != nil {
			var ae *net.AddrError
			if errors.As(err, &ae) {
				err = errors.New(ae.Err)
			}
			return fmt.Sprintf("%q is not host:port (%v)", s, err)
		}
		if host == "" && format == "hostport" {
			return fmt.Sprintf("%q has no host; write it like api.example.com:443", s)
		}
		low := 1
		if format == "listen" {
			low = 0 // port 0: any free port
		}
		if p, err := strconv.Atoi(port); err != nil || p < low || p > 65535 {
			return fmt.Sprintf("%q: the port must be a number from %d to 65535", s, low)
		}
	}
	return ""
}

// checkURL accepts an absolute http or https URL with a host and a valid
// port.
func checkURL(s string) string {
	if !strings.Contains(s, "://") {
		return fmt.Sprintf("%q has no scheme; write http://%s or https://%s", s, s, s)
	}
	u, err := url.Parse(s)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return fmt.Sprintf("%q is not a URL: %v", s, err)
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Sprintf("%q: the scheme must be http or https, not %q", s, u.Scheme)
	}
	if u.Hostname() == "" {
		return fmt.Sprintf("%q has no host; write it like %s://host:port/path", s, u.Scheme)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err != nil || n < 1 || n > 65535 {
			return fmt.Sprintf("%q: the port must be a number from 1 to 65535", s)
		}
	}
	return ""
}

// leaseIsCheckpoint compares the lease's and the checkpoint document's
// identities, as the stores will address them: S3 by endpoint (host and
// port as the scheme implies them, lower case; the path without trailing
// slashes), bucket and key; GCS by bucket and object name; files by
// absolute, cleaned path with symbolic links of existing directories
// resolved, including the lock files the file store writes next to each
// file (<path>.lock). If they alias, it returns the key to blame and what
// to do; run would otherwise read the checkpoint document as an unreadable
// lease and overwrite it after ttl.
func (c *Config) leaseIsCheckpoint() (path, msg string) {
	const same = "the lease and the checkpoint document are the same object (%s); they must be separate objects, each with its own version: %s"
	switch {
	case c.Coordinate.Type == CoordinateS3Lease && c.State.Store == StoreS3:
		l, s := c.Coordinate.S3Lease.S3Object, c.State.S3
		if l.Bucket == s.Bucket && l.Key == s.Key && endpointIdentity(l.EndpointURL) == endpointIdentity(s.EndpointURL) {
			return "coordinate.s3_lease.key", fmt.Sprintf(same, c.leaseURI(), "give coordinate.s3_lease.key another key, e.g. sf2loki/leader.lease")
		}
	case c.Coordinate.Type == CoordinateGCSLease && c.State.Store == StoreGCS:
		l, s := c.Coordinate.GCSLease.GCSObject, c.State.GCS
		if l.Bucket == s.Bucket && l.ObjectName == s.ObjectName {
			return "coordinate.gcs_lease.object_name", fmt.Sprintf(same, c.leaseURI(), "give coordinate.gcs_lease.object_name another name, e.g. sf2loki/leader.lease")
		}
	case c.Coordinate.Type == CoordinateFileLease && c.State.Store == StoreFile:
		if c.Coordinate.FileLease.Path == "" || c.State.File.Path == "" {
			return "", ""
		}
		lease, state := canonicalPath(c.Coordinate.FileLease.Path), canonicalPath(c.State.File.Path)
		fix := "point coordinate.file_lease.path at another file, e.g. " + filepath.Join(filepath.Dir(state), "leader.lease")
		switch {
		case lease == state:
			return "coordinate.file_lease.path", fmt.Sprintf(same, "file://"+lease, fix)
		case lease == state+".lock" || state == lease+".lock":
			return "coordinate.file_lease.path", fmt.Sprintf("the lease file %s and the checkpoint file %s: one is the other's lock file (<path>.lock); %s",
				lease, state, fix)
		case strings.HasPrefix(state, lease+string(filepath.Separator)) || strings.HasPrefix(lease, state+string(filepath.Separator)):
			return "coordinate.file_lease.path", fmt.Sprintf("the lease file %s and the checkpoint file %s: one is inside the other, which must be a file; %s",
				lease, state, fix)
		}
	}
	return "", ""
}

// endpointIdentity is an S3 endpoint as the server it reaches: lower-case
// host, the port the scheme implies when none is written, loopback names
// as one, the path cleaned without a trailing slash. "" is AWS itself.
func endpointIdentity(endpoint string) string {
	if endpoint == "" {
		return ""
	}
	u, err := url.Parse(endpoint)
	if err != nil || u.Host == "" {
		return endpoint // checkURL reports it
	}
	host, port := strings.ToLower(u.Hostname()), u.Port()
	if port == "" {
		port = map[string]string{"http": "80", "https": "443"}[strings.ToLower(u.Scheme)]
	}
	if loopback(host) {
		host = "localhost"
	}
	p := strings.TrimRight(pathpkg.Clean("/"+u.EscapedPath()), "/")
	return net.JoinHostPort(host, port) + p
}

// canonicalPath is the file a path names, as the file store opens it:
// absolute and cleaned (as filepath.Abs does), then with symbolic links
// resolved for the longest part that exists. It only reads the filesystem.
func canonicalPath(p string) string {
	abs, err := filepath.Abs(p)
	if err != nil {
		return filepath.Clean(p)
	}
	var rest []string
	for dir := abs; ; dir = filepath.Dir(dir) {
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			return filepath.Join(append([]string{real}, rest...)...)
		}
		if filepath.Dir(dir) == dir {
			return abs
		}
		rest = append([]string{filepath.Base(dir)}, rest...)
	}
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

// MinStallTimeout is the shortest liveness guard that cannot fire on a
// healthy pipeline: a batch waits up to sink.loki.batch.max_wait before it
// is pushed, and one push may take 5 attempts of sink.loki.timeout.
func (c *Config) MinStallTimeout() time.Duration {
	return c.Sink.Loki.Batch.MaxWait + 5*c.Sink.Loki.Timeout + c.EffectiveCommitInterval() + 10*time.Second
}

// Checkpoint commit intervals by store (state.commit_interval 0).
const (
	// DefaultObjectCommitInterval is the s3 and gcs default: 10s bounds a
	// constant load to about 260,000 writes a month.
	DefaultObjectCommitInterval = 10 * time.Second
	// DefaultFileCommitInterval is the file default: under a constant
	// load a checkpoint file is written (and synced, with its directory)
	// once a second, not once per push.
	DefaultFileCommitInterval = time.Second
	// MinGCSCommitInterval is the least interval on gcs, which allows about
	// one write per second to an object.
	MinGCSCommitInterval = time.Second
)

// EffectiveCommitInterval is state.commit_interval, or the store's default
// when 0: a file every second, an object every 10s.
func (c *Config) EffectiveCommitInterval() time.Duration {
	switch {
	case c.State.CommitInterval > 0:
		return c.State.CommitInterval
	case c.State.Store == StoreFile:
		return DefaultFileCommitInterval
	}
	return DefaultObjectCommitInterval
}

// EffectiveStallTimeout is service.stall_timeout, raised to
// MinStallTimeout (0 stays 0: the guard is off).
func (c *Config) EffectiveStallTimeout() time.Duration {
	if c.Service.StallTimeout == 0 {
		return 0
	}
	return max(c.Service.StallTimeout, c.MinStallTimeout())
}
