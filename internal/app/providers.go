package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/clock"
	"github.com/sf2loki/sf2loki/internal/adapters/file"
	"github.com/sf2loki/sf2loki/internal/adapters/gcs"
	"github.com/sf2loki/sf2loki/internal/adapters/k8s"
	"github.com/sf2loki/sf2loki/internal/adapters/s3"
	"github.com/sf2loki/sf2loki/internal/adapters/salesforce"
	"github.com/sf2loki/sf2loki/internal/buildinfo"
	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/sfrules"
	"github.com/sf2loki/sf2loki/internal/telemetry"
)

// Overrides swaps parts of the graph; tests use it to build the same graph
// over in-memory stores and a fake clock. Nil fields use the real parts.
type Overrides struct {
	Clock      ports.Clock
	LeaseStore ports.ObjectCAS
	StateStore ports.ObjectCAS
	// MembersStore is the membership document (several shards).
	MembersStore ports.ObjectCAS
	Workload     Workload
	Logger       *slog.Logger
	Telemetry    telemetry.Options
	// Stdout receives a dry run's entries (nil: os.Stdout).
	Stdout io.Writer
}

// LeaseStore is the object that holds the lease (distinct type for wire).
type LeaseStore struct{ ports.ObjectCAS }

// StateStore is the object that holds the checkpoint document.
type StateStore struct{ ports.ObjectCAS }

// Fence is what the committer checks before every write and the pipeline
// before and during every push: the lease keeper's FenceDeadline, or nil
// for a single instance.
type Fence func() (deadline time.Time, err error)

// check is the fence as the committer asks it (nil for none).
func (f Fence) check() func() error {
	if f == nil {
		return nil
	}
	return func() error { _, err := f(); return err }
}

// Coordinator is what the daemon needs of a leadership coordinator.
type Coordinator interface {
	Run(ctx context.Context, cb domain.Callbacks) error
	CheckFence() error
	Status() domain.Status
	// Resign ends this replica's leadership so that another can try, and
	// holds it off for holdOff.
	Resign(reason string, holdOff time.Duration)
}

// Shared is what every shard's graph shares: the clock, the logger, the
// telemetry, the Loki sink and the claim gate of the shard balance.
type Shared struct {
	Clock     ports.Clock
	Logger    *slog.Logger
	Telemetry *telemetry.Recorder
	Sink      SharedSink
	Gate      Gate
	Older     OlderLayouts
}

// OlderLayouts returns where a shard finds its org's positions written by
// the older implementation (nil: nowhere, the single-org form).
type OlderLayouts func(shard string) *domain.OlderLayout

// Gate returns a shard's claim gate (LeaseConfig.Gate); nil lets every
// shard be claimed freely.
type Gate func(shard string) domain.ClaimGate

func provideClock(o Overrides) ports.Clock {
	if o.Clock != nil {
		return o.Clock
	}
	return clock.New()
}

func provideLogger(cfg *config.Config, o Overrides) *slog.Logger {
	if o.Logger != nil {
		return o.Logger
	}
	return RedactLogger(NewLogger(os.Stderr, cfg.Service.LogLevel, cfg.Service.LogFormat), cfg)
}

// provideStateStore builds the checkpoint store chosen by state.store.
func provideStateStore(ctx context.Context, cfg *config.Config, o Overrides, t *telemetry.Recorder) (StateStore, func(), error) {
	if cfg.Sink.Stdout.Enabled {
		return dryRunState(cfg, t), func() {}, nil
	}
	if o.StateStore != nil {
		return StateStore{t.Instrument("test", o.StateStore)}, func() {}, nil
	}
	s, err := NewStateStore(ctx, cfg)
	if err != nil {
		return StateStore{}, nil, fmt.Errorf("state store: %w", err)
	}
	return StateStore{t.Instrument(cfg.State.Store, s)}, Closer(s), nil
}

// Closer returns a cleanup that closes s if it holds a client.
func Closer(s ports.ObjectCAS) func() {
	return func() {
		if c, ok := s.(io.Closer); ok {
			_ = c.Close()
		}
	}
}

// NewStateStore opens the checkpoint store chosen by state.store.
func NewStateStore(ctx context.Context, cfg *config.Config) (ports.ObjectCAS, error) {
	switch cfg.State.Store {
	case config.StoreFile:
		return file.New(file.Config{Path: cfg.State.File.Path})
	case config.StoreS3:
		return NewS3(ctx, cfg.State.S3, 0)
	case config.StoreGCS:
		return NewGCS(ctx, cfg.State.GCS, 0)
	}
	return nil, fmt.Errorf("state.store %q is not one of file, s3, gcs", cfg.State.Store)
}

// LeaseMaxSize caps what a lease read may return: a lease record is a few
// hundred bytes, so a standby polling a foreign 50 MB object reads at most
// this much and judges it unreadable. Checkpoint documents take the
// adapters' default cap (16 MiB).
const LeaseMaxSize = 64 << 10

// NewS3 opens the S3 object o, reading at most maxSize bytes of it.
func NewS3(ctx context.Context, o config.S3Object, maxSize int64) (ports.ObjectCAS, error) {
	return s3.New(ctx, s3.Config{Bucket: o.Bucket, Key: o.Key, Region: o.Region, EndpointURL: o.EndpointURL, MaxSize: maxSize,
		Logger: LibraryLogger(ctx)})
}

// NewGCS opens the GCS object o, reading at most maxSize bytes of it.
func NewGCS(ctx context.Context, o config.GCSObject, maxSize int64) (ports.ObjectCAS, error) {
	return gcs.New(ctx, gcs.Config{Bucket: o.Bucket, ObjectName: o.ObjectName, ServiceFile: o.ServiceFile, MaxSize: maxSize})
}

// leaseStore wraps a real lease store, unless a test supplied one.
func leaseStore(o Overrides, t *telemetry.Recorder, backend string, build func() (ports.ObjectCAS, error)) (LeaseStore, func(), error) {
	if o.LeaseStore != nil {
		return LeaseStore{t.Instrument("test", o.LeaseStore)}, func() {}, nil
	}
	s, err := build()
	if err != nil {
		return LeaseStore{}, nil, fmt.Errorf("lease store: %w", err)
	}
	return LeaseStore{t.Instrument(backend, s)}, Closer(s), nil
}

func provideFileLeaseStore(ctx context.Context, cfg *config.Config, o Overrides, t *telemetry.Recorder) (LeaseStore, func(), error) {
	return leaseStore(o, t, "file", func() (ports.ObjectCAS, error) { return NewLeaseStore(ctx, cfg) })
}

func provideS3LeaseStore(ctx context.Context, cfg *config.Config, o Overrides, t *telemetry.Recorder) (LeaseStore, func(), error) {
	return leaseStore(o, t, "s3", func() (ports.ObjectCAS, error) { return NewLeaseStore(ctx, cfg) })
}

func provideGCSLeaseStore(ctx context.Context, cfg *config.Config, o Overrides, t *telemetry.Recorder) (LeaseStore, func(), error) {
	return leaseStore(o, t, "gcs", func() (ports.ObjectCAS, error) { return NewLeaseStore(ctx, cfg) })
}

func provideK8sLeaseStore(ctx context.Context, cfg *config.Config, o Overrides, t *telemetry.Recorder) (LeaseStore, func(), error) {
	return leaseStore(o, t, "k8s", func() (ports.ObjectCAS, error) { return NewLeaseStore(ctx, cfg) })
}

// NewLeaseStore opens the lease object of coordinate.type (none for noop).
func NewLeaseStore(ctx context.Context, cfg *config.Config) (ports.ObjectCAS, error) {
	c := cfg.Coordinate
	switch c.Type {
	case config.CoordinateFileLease:
		return file.New(file.Config{Path: c.FileLease.Path, MaxSize: LeaseMaxSize})
	case config.CoordinateS3Lease:
		return NewS3(ctx, c.S3Lease.S3Object, LeaseMaxSize)
	case config.CoordinateGCSLease:
		return NewGCS(ctx, c.GCSLease.GCSObject, LeaseMaxSize)
	case config.CoordinateK8sLease:
		return k8s.New(k8s.Config{Namespace: c.K8sLease.Namespace, Name: c.K8sLease.Name, Kubeconfig: c.K8sLease.Kubeconfig, MaxSize: LeaseMaxSize})
	}
	return nil, fmt.Errorf("coordinate.type %q has no lease object", c.Type)
}

// LeaseConfig maps the selected lease section onto the keeper's config.
func LeaseConfig(cfg *config.Config) domain.LeaseConfig {
	c := cfg.Coordinate
	var t config.LeaseTiming
	switch c.Type {
	case config.CoordinateFileLease:
		t = c.FileLease.LeaseTiming
	case config.CoordinateS3Lease:
		t = c.S3Lease.LeaseTiming
	case config.CoordinateGCSLease:
		t = c.GCSLease.LeaseTiming
	case config.CoordinateK8sLease:
		t = config.LeaseTiming{TTL: c.K8sLease.LeaseDuration, RenewInterval: c.K8sLease.RenewInterval, HolderID: c.K8sLease.Identity}
		if t.HolderID == "" {
			t.HolderID = os.Getenv("HOSTNAME")
		}
	}
	poll := (c.Type == config.CoordinateFileLease && !c.FileLease.Watch) || (c.Type == config.CoordinateK8sLease && !c.K8sLease.Watch)
	return domain.LeaseConfig{Holder: HolderID(t.HolderID), TTL: t.TTL, RenewInterval: t.RenewInterval, Poll: poll}
}

// HolderID returns configured, or hostname-pid (buildinfo.Instance) when it
// is blank.
func HolderID(configured string) string {
	if configured != "" {
		return configured
	}
	return buildinfo.Instance()
}

// provideKeeper builds the lease keeper. Its epoch floor is the checkpoint
// document's stored epoch, read fresh before every acquisition.
func provideKeeper(cfg *config.Config, lease LeaseStore, state StateStore, clk ports.Clock, t *telemetry.Recorder, log *slog.Logger, gate Gate) (*domain.LeaseKeeper, error) {
	lc := LeaseConfig(cfg)
	lc.Observer, lc.Logger = t.ForShard(cfg.ShardName), log
	if cfg.ShardName != "" {
		lc.Logger = log.With("org", cfg.ShardName)
	}
	if gate != nil {
		lc.Gate = gate(cfg.ShardName)
	}
	floor, err := domain.NewCheckpointCommitter(state, clk, domain.CommitterConfig{})
	if err != nil {
		return nil, err
	}
	lc.EpochFloor = floor.StoredEpoch
	// The bare store, not the wire type: its watch (ports.Watcher) must show.
	return domain.NewLeaseKeeper(lease.ObjectCAS, clk, lc)
}

func keeperCoordinator(k *domain.LeaseKeeper) Coordinator { return k }

// keeperFence is the only way a fence enters the graph: the keeper's.
func keeperFence(k *domain.LeaseKeeper) Fence { return k.FenceDeadline }

func provideSoleLeader(clk ports.Clock) Coordinator {
	return domain.NewSoleLeader(HolderID(""), clk)
}

// noFence: a single instance has nobody to be fenced by.
func noFence() Fence { return nil }

func provideCommitter(cfg *config.Config, state StateStore, clk ports.Clock, fence Fence, t *telemetry.Recorder, log *slog.Logger, older OlderLayouts) (*domain.CheckpointCommitter, error) {
	c := domain.CommitterConfig{Fence: fence.check(), Observer: t.ForShard(cfg.ShardName), Logger: log, Org: cfg.ShardName}
	if older != nil {
		c.Older = older(cfg.ShardName)
	}
	return domain.NewCheckpointCommitter(state, clk, c)
}

// olderLayouts tells each shard of shards where the older implementation
// kept its org's positions: the configured checkpoint document (the first
// org's), every org's keys prefixed with org=<name>:. Every other org reads
// it through a read-only handle opened here (a test's state store when one
// is given); the first org reads its own. Nil in the single-org form and in
// a dry run, which reads no document.
func olderLayouts(ctx context.Context, shards []*config.Config, o Overrides) (OlderLayouts, func(), error) {
	if len(shards) == 0 || shards[0].ShardName == "" || shards[0].Sink.Stdout.Enabled {
		return nil, func() {}, nil
	}
	first := shards[0]
	var doc ports.ObjectCAS
	cleanup := func() {}
	if len(shards) > 1 {
		if o.StateStore != nil {
			doc = o.StateStore
		} else {
			s, err := NewStateStore(ctx, first)
			if err != nil {
				return nil, nil, fmt.Errorf("state store (the configured checkpoint document, read for the older layout): %w", err)
			}
			doc, cleanup = readOnly{s}, Closer(s)
		}
	}
	return func(shard string) *domain.OlderLayout {
		if shard == first.ShardName {
			return &domain.OlderLayout{First: true, Orgs: len(shards)}
		}
		return &domain.OlderLayout{Document: doc, Orgs: len(shards)}
	}, cleanup, nil
}

// readOnly is an object that is only read: a write is a programming error
// reported as one, never sent.
type readOnly struct{ ports.ObjectCAS }

func (r readOnly) Put(context.Context, []byte, ports.Precondition) (ports.Version, error) {
	return "", fmt.Errorf("%s is read only here: the older layout's document is never written by another org's shard", r.ObjectCAS)
}

func (r readOnly) Delete(context.Context, ports.Precondition) error {
	return fmt.Errorf("%s is read only here: the older layout's document is never deleted by another org's shard", r.ObjectCAS)
}

// NewSalesforceAuth reads the secrets (value or *_file) and builds the
// org's token source. It makes no request.
func NewSalesforceAuth(sf config.Salesforce) (*salesforce.Auth, error) {
	return NewSalesforceAuthObserved("", sf, 0, nil, nil)
}

// NewSalesforceAuthObserved is newSalesforceAuth with the org's throttle
// pause, the token source's logs and, with t, its counters and failing
// state exported.
func NewSalesforceAuthObserved(org string, sf config.Salesforce, pause time.Duration, log *slog.Logger, t *telemetry.Recorder) (*salesforce.Auth, error) {
	c := salesforce.Config{AuthMode: sf.AuthMode, LoginURL: sf.SalesforceLoginURL(), ClientID: strings.TrimSpace(sf.ClientID),
		Username: strings.TrimSpace(sf.Username), OrgID: sf.OrgID, TokenTTL: sf.TokenTTL, Audience: sf.JWTAudience(), Logger: log,
		ThrottlePause: pause}
	if t != nil {
		t.ZeroSalesforce(org)
		c.Refreshed = func(reason string) { t.SalesforceAuthRefreshed(org, reason) }
		c.MintFailed = func(reason string) { t.SalesforceAuthFailed(org, reason) }
		c.Throttled = func(api string) { t.SalesforceThrottled(org, api) }
	}
	switch sf.AuthMode {
	case sfrules.JWTBearer:
		key, err := salesforce.LoadSecret("private_key", sf.PrivateKey, sf.PrivateKeyFile)
		if err != nil {
			return nil, err
		}
		c.PrivateKeyPEM = []byte(key)
	case sfrules.ClientCredentials:
		secret, err := salesforce.LoadSecret("client_secret", sf.ClientSecret, sf.ClientSecretFile)
		if err != nil {
			return nil, err
		}
		c.ClientSecret = secret
	}
	a, err := salesforce.New(c)
	if err == nil && t != nil {
		t.AddSalesforceAuthProbe(org, a.Failing)
	}
	return a, err
}

// newBalancer builds the membership document (beside the leases, in the
// same store) and the balance that spreads the shards over the replicas.
func newBalancer(ctx context.Context, cfg *config.Config, o Overrides, clk ports.Clock, log *slog.Logger, t *telemetry.Recorder) (*domain.Balancer, func(), error) {
	mc := cfg.MembersConfig()
	store, clean, err := leaseStore(Overrides{LeaseStore: o.MembersStore}, t, cfg.Coordinate.Type, func() (ports.ObjectCAS, error) { return NewLeaseStore(ctx, mc) })
	if err != nil {
		return nil, nil, fmt.Errorf("members document: %w", err)
	}
	lc := LeaseConfig(cfg)
	m, err := domain.NewMembership(store, clk, domain.MemberConfig{Holder: lc.Holder, TTL: lc.TTL, RenewInterval: lc.RenewInterval, Logger: log})
	if err != nil {
		clean()
		return nil, nil, err
	}
	return domain.NewBalancer(m, clk, lc.RenewInterval, log), clean, nil
}
