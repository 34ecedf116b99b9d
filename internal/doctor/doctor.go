package doctor

import (
	"cmp"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/sf2loki/sf2loki/internal/adapters/clock"
	"github.com/sf2loki/sf2loki/internal/adapters/file"
	"github.com/sf2loki/sf2loki/internal/adapters/gcs"
	"github.com/sf2loki/sf2loki/internal/adapters/k8s"
	"github.com/sf2loki/sf2loki/internal/adapters/loki"
	"github.com/sf2loki/sf2loki/internal/adapters/redact"
	"github.com/sf2loki/sf2loki/internal/adapters/s3"
	"github.com/sf2loki/sf2loki/internal/adapters/salesforce"
	"github.com/sf2loki/sf2loki/internal/app"
	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/ports"
)

// Doctor check statuses.
const (
	Pass = "PASS"
	Warn = "WARN"
	Fail = "FAIL"
	Skip = "SKIP"
)

// ProbeSuffix names the probe object the doctor writes next to a live one.
const ProbeSuffix = ".sf2loki-doctor-probe"

// Check is one doctor row.
type Check struct {
	Name   string `json:"name"`
	Status string `json:"status"`
	Detail string `json:"detail"`
}

// Report is the doctor's result.
type Report struct {
	Checks   []Check `json:"checks"`
	ExitCode int     `json:"exit_code"`
}

// Size caps of the stored documents, given to the adapters as MaxSize: a
// larger object is not read and counts as corrupt. A lease record is a few
// hundred bytes; 64 KiB (the daemon's leaseMaxSize) leaves room for any
// holder id and newer fields. The
// checkpoint document holds one key per object, event type and topic; its
// largest values (an eventlog_objects cursor carrying 500 Ids, an
// eventlogfile position carrying 200 files) are about 12 KiB, so 16 MiB
// holds over a thousand of those, or over 100,000 replay ids
// (TestDocumentCapsHoldTheLargestDocuments).
const (
	MaxLeaseDocumentBytes = app.LeaseMaxSize
	MaxStateDocumentBytes = 16 << 20
)

// absurdTTL is how many times the configured ttl a lease's declared ttl
// may be before the doctor warns: standbys wait the longer of the two.
const absurdTTL = 10

// permissions names what each operation needs, per backend.
var permissions = map[string]map[string]string{
	"s3": {"put": "s3:PutObject", "delete": "s3:DeleteObject",
		"get": "s3:ListBucket on the bucket (without it S3 answers 403, not 404, for an object that does not exist yet) and s3:GetObject on the key"},
	"gcs":  {"put": "storage.objects.create", "get": "storage.objects.get", "delete": "storage.objects.delete"},
	"file": {"put": "write access to the directory", "get": "read access to the file", "delete": "write access to the directory"},
}

// probe is a store under test: the probe object next to the live one.
type probe struct {
	backend string
	probe   ports.ObjectCAS
	live    ports.ObjectCAS
	// lease tells the live object is a lease (else the checkpoint
	// document); ttl is the configured lease ttl.
	lease bool
	ttl   time.Duration
	// moveAside and remove are the backend's commands that move the live
	// object aside and delete it.
	moveAside, remove string
	// org is the org the checkpoint document must belong to ("" without
	// orgs).
	org string
	// members: the live object is the membership document (heartbeats,
	// soft state: its content is not judged).
	members bool
}

// clients are what one doctor run opened; Doctor closes them all.
type clients struct{ list []io.Closer }

// doctorOpened, when set (tests), sees every client a doctor run opens and
// returns what the run closes in its place.
var doctorOpened func(io.Closer) io.Closer

// add keeps v to close if it holds a client.
func (c *clients) add(v any) {
	cl, ok := v.(io.Closer)
	if !ok {
		return
	}
	if doctorOpened != nil {
		cl = doctorOpened(cl)
	}
	c.list = append(c.list, cl)
}

func (c *clients) close() {
	for _, cl := range c.list {
		_ = cl.Close()
	}
	c.list = nil
}

// Doctor runs the checks for the configuration at path. No secret of the
// configuration appears in the report.
func Doctor(ctx context.Context, path string) Report {
	var cl clients
	defer cl.close()
	var r Report
	err := app.RequireConfiguration(path)
	var cfg *config.Config
	var warnings []string
	if err == nil {
		cfg, warnings, err = config.Load(path)
	}
	if err != nil {
		r.Checks = append(r.Checks, Check{"config", Fail, err.Error()},
			Check{"state", Skip, "the configuration is invalid"}, Check{"coordinator", Skip, "the configuration is invalid"},
			Check{"loki", Skip, "the configuration is invalid"}, Check{"auth", Skip, "the configuration is invalid"},
			Check{"permissions", Skip, "the configuration is invalid"}, Check{"entitlement", Skip, "the configuration is invalid"})
		r.ExitCode = app.ExitInvalidConfig
		return r
	}
	if log := app.LibraryLogger(ctx); log != nil {
		// The clients' own log lines (the AWS SDK's) pass the redaction too.
		ctx = app.WithLibraryLogger(ctx, app.RedactLogger(log, cfg))
	}
	r.Checks = append(r.Checks, Check{"config", Pass, fmt.Sprintf("coordinate.type %s, state.store %s", cfg.Coordinate.Type, cfg.State.Store)})
	for _, w := range warnings {
		if strings.Contains(w, config.UnsaltedHashAdvice) {
			continue // the org's transforms check says it
		}
		if strings.Contains(w, config.CustomChannelAdvice) {
			continue // the org's channel checks read the members and say it
		}
		r.Checks = append(r.Checks, Check{"config", Warn, w})
	}
	r.Checks = append(r.Checks, checkLoki(ctx, cfg))
	r.Checks = append(r.Checks, checkTelemetry(ctx, cfg))
	// Every org (shard) has its own checkpoint document, lease and
	// credentials: each is checked, its checks named after it.
	for _, sc := range cfg.Shards() {
		auth, sf := checkAuth(ctx, sc, &cl)
		checks := checkState(ctx, sc, &cl)
		checks = append(checks, checkCoordinator(ctx, sc, &cl)...)
		checks = append(checks, auth)
		checks = append(checks, checkSalesforceAccess(ctx, sc, sf)...)
		checks = append(checks, checkPubSub(ctx, sc, sf)...)
		checks = append(checks, checkEventManager(ctx, sc, sf)...)
		checks = append(checks, checkChannels(ctx, sc, sf)...)
		checks = append(checks, checkTransforms(sc))
		checks = append(checks, checkApexLog(ctx, sc, sf)...)
		checks = append(checks, checkLimits(ctx, sc, sf)...)
		if sc.ShardName != "" {
			for i := range checks {
				checks[i].Name += " [org " + sc.ShardName + "]"
			}
		}
		r.Checks = append(r.Checks, checks...)
	}
	if mc := cfg.MembersConfig(); mc != nil && mc.Coordinate.Type != config.CoordinateNoop {
		// The replicas' heartbeats: without them a replica sees only itself
		// and the shards never balance.
		checks := probeLease(ctx, mc, &cl, true)
		for i := range checks {
			checks[i].Name = "members"
		}
		r.Checks = append(r.Checks, checks...)
	}
	red := redact.New(app.RedactSecrets(cfg)...)
	for i, c := range r.Checks {
		r.Checks[i].Detail = red.String(c.Detail)
		if c.Status == Fail {
			r.ExitCode = 1
		}
	}
	return r
}

// checkAuth mints a Salesforce token with the configured credentials and
// returns the token source when it passed (nil otherwise).
func checkAuth(ctx context.Context, cfg *config.Config, cl *clients) (Check, *salesforce.Auth) {
	if cfg.Salesforce.AuthMode == "none" {
		return Check{"auth", Skip, "salesforce.auth_mode is none"}, nil
	}
	auth, err := app.NewSalesforceAuth(cfg.Salesforce)
	if err != nil {
		return Check{"auth", Fail, err.Error()}, nil
	}
	cl.add(auth)
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	tok, err := auth.Token(ctx)
	if cause, ok := ports.NetworkCause(err); ok {
		return Check{"auth", Fail, fmt.Sprintf("cannot reach the login URL %s: %s: check salesforce.login_url, the host's DNS, and the proxy (HTTPS_PROXY, NO_PROXY) (%v)",
			cfg.Salesforce.SalesforceLoginURL(), cause, err)}, nil
	}
	if err != nil {
		return Check{"auth", Fail, err.Error()}, nil
	}
	org, err := auth.OrgID(ctx)
	if err != nil {
		return Check{"auth", Fail, fmt.Sprintf("token minted for %s, but: %v", tok.InstanceURL, err)}, nil
	}
	return Check{"auth", Pass, fmt.Sprintf("%s token minted at %s for %s, org %s", cfg.Salesforce.AuthMode, cfg.Salesforce.SalesforceLoginURL(), tok.InstanceURL, org)}, auth
}

// checkSalesforceAccess runs the checks that need a token: permissions (a
// one-row query per configured object, a describe of EventLogFile) and
// entitlement (the configured EventLogFile types against those the org
// has) with the token source the auth check built. They SKIP when auth did
// not pass (a is nil).
func checkSalesforceAccess(ctx context.Context, cfg *config.Config, a *salesforce.Auth) []Check {
	objs, elf := cfg.Sources.EventlogObjects.Objects, cfg.Sources.EventLogFile
	if a == nil {
		why := "the auth check did not pass"
		if cfg.Salesforce.AuthMode == "none" {
			why = "salesforce.auth_mode is none"
		}
		return []Check{{"permissions", Skip, why}, {"entitlement", Skip, why}}
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	v := cfg.Salesforce.APIVersion
	perm := Check{"permissions", Pass, ""}
	var ok []string
	for _, o := range objs {
		if _, err := salesforce.Query(ctx, a, v, fmt.Sprintf("SELECT Id FROM %s LIMIT 1", o.Name)); err != nil {
			perm = Check{"permissions", Fail, fmt.Sprintf("query %s: %s (%v)", o.Name, app.SalesforceProblem(err, "grant read access to the object and its fields"), err)}
			break
		}
		ok = append(ok, o.Name)
	}
	if perm.Status == Pass && len(elf.EventTypes) > 0 {
		if q, err := salesforce.Describe(ctx, a, v, "EventLogFile"); err != nil || !q {
			perm = Check{"permissions", Fail, fmt.Sprintf("EventLogFile is not queryable: %s (%v)", app.SalesforceProblem(err, "grant View Event Log Files"), err)}
		} else {
			ok = append(ok, "EventLogFile")
		}
	}
	if perm.Status == Pass {
		perm.Detail = "queryable: " + strings.Join(ok, ", ")
		if len(ok) == 0 {
			perm = Check{"permissions", Skip, "no Salesforce source is configured"}
		}
	}
	ent := Check{"entitlement", Skip, "sources.eventlogfile is not configured"}
	if len(elf.EventTypes) > 0 && perm.Status == Pass {
		// auto reads Hourly or Daily files, whichever the org publishes.
		q, kind := "SELECT EventType FROM EventLogFile GROUP BY EventType", "EventLogFile"
		if elf.Interval != "auto" && elf.Interval != "" {
			q, kind = fmt.Sprintf("SELECT EventType FROM EventLogFile WHERE Interval = '%s' GROUP BY EventType", elf.Interval), elf.Interval
		}
		rows, err := salesforce.Query(ctx, a, v, q)
		if err != nil {
			ent = Check{"entitlement", Fail, err.Error()}
		} else {
			have := map[string]bool{}
			for _, r := range rows {
				have[fmt.Sprint(r["EventType"])] = true
			}
			var missing []string
			for _, t := range elf.EventTypes {
				if t != "*" && !have[t] {
					missing = append(missing, t)
				}
			}
			ent = Check{"entitlement", Pass, fmt.Sprintf("%d event types have %s files", len(have), kind)}
			if len(missing) > 0 {
				ent = Check{"entitlement", Warn, fmt.Sprintf("no %s files for %s in the retention window: not licensed (Event Monitoring), or no activity yet",
					kind, strings.Join(missing, ", "))}
			}
		}
	}
	return []Check{perm, ent}
}

// checkPubSub asks GetTopic about every Pub/Sub topic ("*" listed first):
// a row pubsub:<topic> each, FAIL when the user cannot subscribe.
func checkPubSub(ctx context.Context, cfg *config.Config, a *salesforce.Auth) []Check {
	if len(cfg.Sources.PubSub.Topics) == 0 {
		return nil
	}
	if a == nil {
		return []Check{{"pubsub", Skip, "the auth check did not pass"}}
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	src, err := app.NewPubSubSource(cfg, a, clock.New(), nil, nil, nil)
	if err != nil {
		return []Check{{"pubsub", Fail, err.Error()}}
	}
	defer src.Close()
	topics, err := src.Topics(ctx)
	var out []Check
	if err != nil {
		out = append(out, Check{"pubsub", Fail, fmt.Sprintf("listing the \"*\" topics with describeGlobal: %v", err)})
	}
	if len(topics) == 0 && err == nil {
		out = append(out, Check{"pubsub", Warn, "no topic to subscribe to: \"*\" found no *EventStream object (Real-Time Event Monitoring not licensed or not enabled), or include/exclude left none"})
	}
	for _, t := range topics {
		info, err := src.TopicInfo(ctx, t)
		switch {
		case err != nil:
			out = append(out, Check{"pubsub:" + t, Fail, fmt.Sprintf("GetTopic: %v (check the name, that the event is enabled, and the endpoint %s)", err, cfg.Sources.PubSub.Endpoint)})
		case !info.GetCanSubscribe():
			out = append(out, Check{"pubsub:" + t, Fail, "the user cannot subscribe: grant the permission for the event (for Real-Time Event Monitoring: View Real-Time Event Monitoring Data)"})
		default:
			out = append(out, Check{"pubsub:" + t, Pass, "can subscribe (schema " + info.GetSchemaId() + ")"})
		}
	}
	return out
}

func checkState(ctx context.Context, cfg *config.Config, cl *clients) []Check {
	var p probe
	var err error
	switch cfg.State.Store {
	case config.StoreFile:
		p, err = fileProbe(cfg.State.File.Path, MaxStateDocumentBytes)
	case config.StoreS3:
		p, err = s3Probe(ctx, cfg.State.S3, MaxStateDocumentBytes)
	case config.StoreGCS:
		p, err = gcsProbe(ctx, cfg.State.GCS, MaxStateDocumentBytes, cl)
	}
	p.org = cfg.ShardName
	return runProbe(ctx, "state", p, err)
}

// checkCoordinator reaches one probe branch per coordinate.type.
func checkCoordinator(ctx context.Context, cfg *config.Config, cl *clients) []Check {
	return probeLease(ctx, cfg, cl, false)
}

// probeLease probes coordinate's lease object: a lease, or (members) the
// membership document beside the shards' leases.
func probeLease(ctx context.Context, cfg *config.Config, cl *clients, members bool) []Check {
	c := cfg.Coordinate
	var p probe
	var err error
	switch c.Type {
	case config.CoordinateNoop:
		return []Check{{"coordinator", Skip, "noop: a single instance, nothing to arbitrate"}}
	case config.CoordinateFileLease:
		p, err = fileProbe(c.FileLease.Path, MaxLeaseDocumentBytes)
	case config.CoordinateS3Lease:
		p, err = s3Probe(ctx, c.S3Lease.S3Object, MaxLeaseDocumentBytes)
	case config.CoordinateGCSLease:
		p, err = gcsProbe(ctx, c.GCSLease.GCSObject, MaxLeaseDocumentBytes, cl)
	case config.CoordinateK8sLease:
		return k8sProbe(ctx, c.K8sLease, app.LeaseConfig(cfg).TTL, members)
	default:
		return []Check{{"coordinator", Fail, fmt.Sprintf("unknown coordinate.type %q", c.Type)}}
	}
	p.lease, p.ttl, p.members = true, app.LeaseConfig(cfg).TTL, members
	return runProbe(ctx, "coordinator", p, err)
}

func s3Probe(ctx context.Context, o config.S3Object, maxSize int64) (probe, error) {
	cfg := s3.Config{Bucket: o.Bucket, Key: o.Key, Region: o.Region, EndpointURL: o.EndpointURL, MaxSize: maxSize, Logger: app.LibraryLogger(ctx)}
	live, err := s3.New(ctx, cfg)
	if err != nil {
		return probe{}, err
	}
	cfg.Key += ProbeSuffix
	pr, err := s3.New(ctx, cfg)
	uri, endpoint := "s3://"+o.Bucket+"/"+o.Key, ""
	if o.EndpointURL != "" {
		endpoint = " --endpoint-url " + o.EndpointURL
	}
	return probe{backend: "s3", probe: pr, live: live,
		moveAside: fmt.Sprintf("aws s3 mv %s %s.corrupt%s", uri, uri, endpoint), remove: fmt.Sprintf("aws s3 rm %s%s", uri, endpoint)}, err
}

func gcsProbe(ctx context.Context, o config.GCSObject, maxSize int64, cl *clients) (probe, error) {
	live, err := gcs.New(ctx, gcs.Config{Bucket: o.Bucket, ObjectName: o.ObjectName, ServiceFile: o.ServiceFile, MaxSize: maxSize})
	if err != nil {
		return probe{}, err
	}
	cl.add(live)
	pr, err := gcs.New(ctx, gcs.Config{Bucket: o.Bucket, ObjectName: o.ObjectName + ProbeSuffix, ServiceFile: o.ServiceFile, MaxSize: maxSize})
	if err != nil {
		return probe{}, err
	}
	cl.add(pr)
	uri := "gs://" + o.Bucket + "/" + o.ObjectName
	return probe{backend: "gcs", probe: pr, live: live,
		moveAside: fmt.Sprintf("gcloud storage mv %s %s.corrupt", uri, uri), remove: "gcloud storage rm " + uri}, nil
}

func fileProbe(path string, maxSize int64) (probe, error) {
	live, err := file.New(file.Config{Path: path, MaxSize: maxSize})
	if err != nil {
		return probe{}, err
	}
	pr, err := file.New(file.Config{Path: path + ProbeSuffix, MaxSize: maxSize})
	return probe{backend: "file", probe: pr, live: live,
		moveAside: fmt.Sprintf("mv %s %s.corrupt", live.Path(), live.Path()), remove: "rm " + live.Path()}, err
}

// ignoring is the verdict on a store that accepted a write it had to refuse.
const ignoring = "this endpoint ignores conditional writes (If-None-Match / If-Match); sf2loki cannot arbitrate leadership or protect checkpoints on it"

// runProbe writes, races and deletes the probe object, then reads and
// decodes the live object. The live object is never written.
func runProbe(ctx context.Context, name string, p probe, buildErr error) []Check {
	if buildErr != nil {
		return []Check{{name, Fail, buildErr.Error()}}
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	fail := func(op string, obj ports.ObjectCAS, err error) []Check {
		switch {
		case errors.Is(err, ports.ErrConditionalWriteUnsupported):
			return []Check{{name, Fail, ignoring + ": " + err.Error()}}
		case errors.Is(err, ports.ErrNoCredentials), errors.Is(err, ports.ErrCredentialsRefused):
			// Not a permission: the adapter's message names the
			// credentials' problem and its fix.
			return []Check{{name, Fail, err.Error()}}
		case errors.Is(err, ports.ErrUnreachable):
			return []Check{{name, Fail, fmt.Sprintf("cannot reach the store of %s: %v", obj, err)}}
		case errors.Is(err, ports.ErrPermissionDenied):
			return []Check{{name, Fail, fmt.Sprintf("%s %s is not allowed: grant %s (%v)", op, obj, permissions[p.backend][op], err)}}
		case errors.Is(err, ports.ErrBucketNotFound):
			return []Check{{name, Fail, fmt.Sprintf("the bucket of %s does not exist: create it or fix the name (%v)", p.live, err)}}
		}
		return []Check{{name, Fail, fmt.Sprintf("%s %s: %v", op, obj, err)}}
	}
	stamp := fmt.Sprintf(`{"sf2loki_doctor":%q,"pid":%d}`, time.Now().UTC().Format(time.RFC3339Nano), os.Getpid())
	if obj, err := p.probe.Get(ctx); err == nil {
		// A probe left behind by an interrupted run.
		_ = p.probe.Delete(ctx, ports.IfVersion(obj.Version))
	}
	v1, err := p.probe.Put(ctx, []byte(stamp+" 1"), ports.CreateOnly())
	if err != nil {
		return fail("put", p.probe, err)
	}
	defer func() {
		if obj, err := p.probe.Get(context.WithoutCancel(ctx)); err == nil {
			_ = p.probe.Delete(context.WithoutCancel(ctx), ports.IfVersion(obj.Version))
		}
	}()
	if _, err := p.probe.Put(ctx, []byte(stamp+" 2"), ports.CreateOnly()); err == nil {
		return []Check{{name, Fail, ignoring + ": a second create-only write (If-None-Match: *) succeeded"}}
	} else if !errors.Is(err, ports.ErrPreconditionFailed) {
		return fail("put", p.probe, err)
	}
	v2, err := p.probe.Put(ctx, []byte(stamp+" 3"), ports.IfVersion(v1))
	if err != nil {
		return fail("put", p.probe, err)
	}
	if _, err := p.probe.Put(ctx, []byte(stamp+" 4"), ports.IfVersion(v1)); err == nil {
		return []Check{{name, Fail, ignoring + ": a write with a stale version (If-Match) succeeded"}}
	} else if !errors.Is(err, ports.ErrPreconditionFailed) && !errors.Is(err, ports.ErrNotFound) {
		return fail("put", p.probe, err)
	}
	if err := p.probe.Delete(ctx, ports.IfVersion(v2)); err != nil {
		return fail("delete", p.probe, err)
	}
	enforced := "conditional writes enforced on " + p.probe.String()
	obj, err := p.live.Get(ctx)
	switch {
	case errors.Is(err, ports.ErrNotFound):
		return []Check{{name, Pass, fmt.Sprintf("%s; %s does not exist yet (it will be created)", enforced, p.live)}}
	case errors.Is(err, ports.ErrTooLarge):
		if p.lease {
			return []Check{corruptLease(name, p.live.String(), err.Error(), p.remove)}
		}
		return []Check{corruptState(name, p.live.String(), err.Error(), p.moveAside)}
	case err != nil:
		return fail("get", p.live, err)
	}
	if err := fileSidecar(p); err != nil {
		return []Check{{name, Fail, err.Error()}}
	}
	switch {
	case p.members:
		return []Check{{name, Pass, fmt.Sprintf("%s; %s holds the replicas' heartbeats (%d bytes)", enforced, p.live, len(obj.Data))}}
	case p.lease:
		return judgeLease(name, enforced, p.live.String(), obj, p.ttl, p.remove)
	}
	return judgeState(ctx, name, enforced, p.live.String(), obj, p.moveAside, p.org)
}

// judgeLease decodes a lease with the daemon's decoder: a corrupt one
// FAILs with the repair, one declaring a ttl over absurdTTL times the
// configured one WARNs naming its holder.
func judgeLease(name, enforced, what string, obj ports.Object, ttl time.Duration, remove string) []Check {
	rec, err := domain.DecodeLeaseRecord(obj.Data)
	if err != nil {
		return []Check{corruptLease(name, what, err.Error(), remove)}
	}
	if rec.Holder == "" {
		return []Check{{name, Pass, fmt.Sprintf("%s; the lease %s is released (epoch %d)", enforced, what, rec.Epoch)}}
	}
	out := []Check{{name, Pass, fmt.Sprintf("%s; the lease %s is held by %q (epoch %d)", enforced, what, rec.Holder, rec.Epoch)}}
	if d, err := time.ParseDuration(rec.TTL); err == nil && ttl > 0 && d > absurdTTL*ttl {
		out = append(out, Check{name, Warn, fmt.Sprintf("the lease %s held by %q declares ttl %s, over %d times the configured %s: "+
			"standbys wait the longer ttl before taking over if %q dies. If %q runs, restart it with the configured ttl (a graceful stop releases the lease); "+
			"if it no longer runs, stop the replicas and delete the lease: %s", what, rec.Holder, d, absurdTTL, ttl, rec.Holder, rec.Holder, remove)})
	}
	return out
}

func corruptLease(name, what, problem, remove string) Check {
	return Check{name, Fail, fmt.Sprintf("the lease %s is corrupt: %s. A standby takes it over only after a ttl unchanged; "+
		"to clear it at once, stop the replicas and delete it (%s): the first replica to start creates a new one", what, problem, remove)}
}

// judgeState decodes the checkpoint document with the daemon's committer
// (read-only): a corrupt one FAILs with the repair; values a source could
// not resume from WARN with theirs.
func judgeState(ctx context.Context, name, enforced, what string, obj ports.Object, moveAside, org string) []Check {
	c, err := domain.NewCheckpointCommitter(loadedObject{obj: obj, name: what}, clock.New(), domain.CommitterConfig{})
	if err != nil {
		return []Check{{name, Fail, err.Error()}}
	}
	doc, err := c.Load(ctx)
	if err != nil {
		problem := err.Error()
		var ce *domain.CorruptError
		if errors.As(err, &ce) {
			problem = ce.Problem
		}
		return []Check{corruptState(name, what, problem, moveAside)}
	}
	epoch, owner := doc[domain.FenceEpochKey], doc[domain.OrgKey]
	delete(doc, domain.FenceEpochKey)
	delete(doc, domain.OrgKey)
	if org != "" && owner != "" && owner != org {
		return []Check{{name, Fail, (&domain.WrongOrgError{Document: what, Org: org, Owner: owner}).Error()}}
	}
	out := []Check{{name, Pass, fmt.Sprintf("%s; %s holds %d checkpoints (epoch %s)", enforced, what, len(doc), cmp.Or(epoch, "none"))}}
	for _, k := range slices.Sorted(maps.Keys(doc)) {
		if err := app.CheckCheckpoint(k, doc[k]); err != nil {
			out = append(out, Check{name, Warn, fmt.Sprintf("%v: its source cannot resume from it and starts from its lookback or replay preset; "+
				"to choose the position, stop the replicas and run sf2loki state set %s VALUE (or sf2loki state delete %s)", err, strconv.Quote(k), strconv.Quote(k))})
		}
	}
	return out
}

func corruptState(name, what, problem, moveAside string) Check {
	return Check{name, Fail, fmt.Sprintf("the checkpoint document %s is corrupt: %s. No leader can start on it and sf2loki will not overwrite it. "+
		"Repair: stop the replicas, move it aside (%s), then restore the checkpoints with sf2loki state import --if-empty FILE from an export "+
		"(sf2loki state export); without one every source starts from its lookback window or replay preset", what, problem, moveAside)}
}

// loadedObject is an object already read, for decoding with the domain's
// committer: it answers Get with it and refuses to write.
type loadedObject struct {
	obj  ports.Object
	name string
}

var errReadOnly = errors.New("doctor: read only")

func (l loadedObject) Get(context.Context) (ports.Object, error) { return l.obj, nil }
func (l loadedObject) Put(context.Context, []byte, ports.Precondition) (ports.Version, error) {
	return "", errReadOnly
}
func (l loadedObject) Delete(context.Context, ports.Precondition) error { return errReadOnly }
func (l loadedObject) String() string                                   { return l.name }

// fileSidecar checks that an existing file's lock sidecar opens read-write:
// the daemon needs it for every write.
func fileSidecar(p probe) error {
	fs, ok := p.live.(*file.Store)
	if !ok {
		return nil
	}
	lock := fs.Path() + ".lock"
	f, err := os.OpenFile(lock, os.O_RDWR, 0)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot open the lock %s read-write: %w; give the daemon's user write access to it (chown or chmod)", lock, err)
	}
	return f.Close()
}

// checkLoki pushes one entry labelled source=sf2loki-doctor with structured
// metadata: a backend that rejects metadata fails here, not in production.
func checkLoki(ctx context.Context, cfg *config.Config) Check {
	if cfg.Sink.Loki.URL == "" {
		return Check{"loki", Skip, "sink.loki.url is not set"}
	}
	sink, err := app.NewLokiSink(cfg.Sink.Loki, nil, nil)
	if err != nil {
		return Check{"loki", Fail, err.Error()}
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	e := ports.Entry{Time: time.Now(), Line: `{"sf2loki_doctor":"preflight push"}`,
		Labels:   map[string]string{"source": "sf2loki-doctor"},
		Metadata: map[string]string{"doctor_check": "structured_metadata"}}
	err = sink.Push(ctx, []ports.Entry{e})
	shown, _ := loki.Secrets(loki.Config{URL: cfg.Sink.Loki.URL}) // the URL without its password
	if rej := (*loki.RejectingError)(nil); errors.As(err, &rej) {
		return Check{"loki", Fail, fmt.Sprintf("%s answered %d %q to a push of one entry with structured metadata: check that the URL ends in /loki/api/v1/push "+
			"(or /insert/loki/api/v1/push for VictoriaLogs), the tenant and credentials, and that Loki accepts structured metadata (schema v13, allow_structured_metadata)",
			shown, rej.Status, rej.Body)}
	}
	// A certificate Loki's host presents but this one does not trust is
	// reached, not unreachable: the push's own error names the TLS fix.
	if cause, ok := ports.NetworkCause(err); ok && !isTLSError(err) {
		return Check{"loki", Fail, fmt.Sprintf("cannot reach Loki at %s: %s: check sink.loki.url, the host's DNS, and the proxy (HTTPS_PROXY, NO_PROXY) (%v)",
			shown, cause, err)}
	}
	if err != nil {
		return Check{"loki", Fail, fmt.Sprintf("push to %s failed: %v", shown, err)}
	}
	return Check{"loki", Pass, fmt.Sprintf("pushed one entry with structured metadata to %s (source=sf2loki-doctor)", shown)}
}

// isTLSError reports a TLS handshake that failed on the certificate or the
// protocol: the server answered.
func isTLSError(err error) bool {
	var (
		unknownCA x509.UnknownAuthorityError
		hostErr   x509.HostnameError
		invalid   x509.CertificateInvalidError
		verify    *tls.CertificateVerificationError
		record    tls.RecordHeaderError
	)
	return errors.As(err, &unknownCA) || errors.As(err, &hostErr) || errors.As(err, &invalid) ||
		errors.As(err, &verify) || errors.As(err, &record)
}

func k8sProbe(ctx context.Context, l config.K8sLease, ttl time.Duration, members bool) []Check {
	s, err := k8s.New(k8s.Config{Namespace: l.Namespace, Name: l.Name, Kubeconfig: l.Kubeconfig, MaxSize: MaxLeaseDocumentBytes})
	if err != nil {
		return []Check{{"coordinator", Fail, err.Error()}}
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	verb, err := s.DryRun(ctx)
	switch {
	case errors.Is(err, ports.ErrPermissionDenied):
		return []Check{{"coordinator", Fail, fmt.Sprintf("%s of lease %s is not allowed: grant get, create and patch on leases in %s (%v)", verb, s, l.Namespace, err)}}
	case err != nil:
		return []Check{{"coordinator", Fail, fmt.Sprintf("%s %s: %v", verb, s, err)}}
	}
	// A standby watches the Lease; without the verb it polls, so a refusal
	// is a warning.
	var watchWarn []Check
	if err := s.CanWatch(ctx); err != nil {
		watchWarn = []Check{{"coordinator", Warn, fmt.Sprintf("%v; sf2loki works without it, its standbys poll the Lease every renew_interval instead of learning of a release at once", err)}}
	}
	allowed := fmt.Sprintf("lease %s: get and %s allowed (server-side dry run)", s, verb)
	if watchWarn == nil {
		allowed += ", watch allowed"
	}
	remove := fmt.Sprintf("kubectl -n %s delete lease %s", l.Namespace, l.Name)
	obj, err := s.Get(ctx)
	switch {
	case errors.Is(err, ports.ErrNotFound):
		return append([]Check{{"coordinator", Pass, allowed}}, watchWarn...)
	case errors.Is(err, ports.ErrTooLarge):
		return append([]Check{corruptLease("coordinator", s.String(), err.Error(), remove)}, watchWarn...)
	case err != nil:
		return append([]Check{{"coordinator", Fail, fmt.Sprintf("get %s: %v", s, err)}}, watchWarn...)
	}
	if members {
		return append([]Check{{"coordinator", Pass, fmt.Sprintf("%s; %s holds the replicas' heartbeats", allowed, s)}}, watchWarn...)
	}
	return append(judgeLease("coordinator", allowed, s.String(), obj, ttl, remove), watchWarn...)
}

// Write renders the report as a table, or JSON.
func (r Report) Write(w io.Writer, asJSON bool) error {
	if asJSON {
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	}
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CHECK\tSTATUS\tDETAIL")
	counts := map[string]int{}
	for _, c := range r.Checks {
		counts[c.Status]++
		fmt.Fprintf(tw, "%s\t%s\t%s\n", c.Name, c.Status, strings.ReplaceAll(c.Detail, "\n", " "))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%d passed, %d warned, %d failed, %d skipped\n", counts[Pass], counts[Warn], counts[Fail], counts[Skip])
	return err
}

// NewCommand returns sf2loki doctor.
func NewCommand() *cobra.Command {
	var (
		path   string
		asJSON bool
	)
	cmd := &cobra.Command{
		Use:   "doctor",
		Short: "Probe what run needs: Loki (one real push), the metrics push, the state store, the lease, and each org's Salesforce login, permissions, entitlement, Pub/Sub topics, Event Manager streaming, debug logs and API limits",
		Long: "doctor validates the configuration as check does, then tries every backend with the production credentials,\n" +
			"one row per check (with orgs, the rows from state on for every org):\n" +
			"  config                the configuration; a WARN row per warning\n" +
			"  loki                  pushes one real entry to sink.loki.url (source=sf2loki-doctor)\n" +
			"  telemetry             an empty OTLP export to service.telemetry.endpoint\n" +
			"  state, coordinator    the probe writes below (coordinator SKIPs for noop)\n" +
			"  auth                  mints a Salesforce token and reads the org's id\n" +
			"  permissions           reads each configured object and EventLogFile\n" +
			"  entitlement           which configured EventLogFile types the org has files of\n" +
			"  pubsub:<topic>        GetTopic for each Pub/Sub topic\n" +
			"  streaming:<topic>     Event Manager's streaming switch of each Real-Time Event Monitoring stream\n" +
			"  transforms            every source's transforms and sample compile\n" +
			"  apexlog, traceflags   the debug logs and their active trace flags\n" +
			"  limits                the org's API limits (WARN under 20% left)\n" +
			"  members               the replicas' membership document, with orgs and an HA coordinator\n" +
			"The state store and an object-store lease are probed with a separate object next to the live one\n" +
			"(<key>" + ProbeSuffix + "): create-only, a second create-only that must fail, a stale-version write that must fail,\n" +
			"a conditional delete. It never writes the live lease or checkpoint.\n" +
			"Exit 0 without failures, 1 with, 2 for an invalid or missing configuration.",
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// The libraries' own warnings (the AWS SDK's) go to stderr as
			// log lines, apart from the report.
			r := Doctor(app.WithLibraryLogger(cmd.Context(), app.NewLogger(cmd.ErrOrStderr(), "warn", "text")), path)
			if err := r.Write(cmd.OutOrStdout(), asJSON); err != nil {
				return err
			}
			if r.ExitCode != 0 {
				return &app.ExitError{Code: r.ExitCode, Err: app.ErrReported}
			}
			return nil
		},
	}
	cmd.Flags().StringVarP(&path, "config", "c", "", "YAML configuration file")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print one JSON object")
	return cmd
}
