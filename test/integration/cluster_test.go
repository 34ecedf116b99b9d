package integration

import (
	"cmp"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/testenv"
)

// backend is one coordination and state pairing the replicas share.
type backend struct {
	name       string
	ttl, renew time.Duration
	// url is the object store's endpoint ("" when there is none); a test
	// may put a proxy in front of it for each replica.
	url string
	// config renders the coordinate and state sections for holder, reaching
	// the object store at url.
	config func(holder, url string) string
	// env is the environment that reaches the object store at url.
	env func(url string) []string
	// lease and state name the two objects, for matching requests; bucket
	// holds them.
	lease, state, bucket string
	// dir is the file backend's directory (lease.json, state.json).
	dir string
}

func noEnv(string) []string { return nil }

func fileBackend(t testing.TB, ttl, renew time.Duration) backend {
	dir := t.TempDir()
	return backend{name: "file_lease+file", ttl: ttl, renew: renew, env: noEnv, dir: dir,
		config: func(holder, _ string) string {
			return fmt.Sprintf(`coordinate:
  type: file_lease
  file_lease: {path: %s/lease.json, holder_id: %s, ttl: %s, renew_interval: %s}
state:
  file: {path: %s/state.json}
`, dir, holder, ttl, renew, dir)
		}}
}

// freeze stops d (SIGSTOP) at a moment it holds none of the file backend's
// write locks (<document>.lock under b.dir): the test holds them all while
// it sends the signal. A file_lease writer paused inside its
// compare-and-write keeps the lock, and no standby can take over until it
// resumes or exits (docs/high-availability.md, "A paused leader on
// file_lease"); the tests that freeze a leader measure the fence, not that
// limit. Other backends' compare-and-swap is the server's: d is stopped as
// it is.
func (b backend) freeze(t testing.TB, d *daemon) {
	t.Helper()
	var held []*os.File
	defer func() {
		for _, f := range held {
			f.Close() // releases the lock
		}
	}()
	if b.dir != "" {
		err := filepath.WalkDir(b.dir, func(p string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() || !strings.HasSuffix(p, ".json.lock") {
				return err
			}
			f, err := os.OpenFile(p, os.O_RDWR, 0)
			if err != nil {
				return err
			}
			held = append(held, f)
			return waitWriteLock(f) // waits out a write in progress
		})
		if err != nil {
			t.Fatalf("taking the write locks under %s before freezing %s: %v", b.dir, d.name, err)
		}
	}
	d.signal(t, syscall.SIGSTOP)
}

var s3Env = []string{"AWS_ACCESS_KEY_ID=" + testenv.S3AccessKey, "AWS_SECRET_ACCESS_KEY=" + testenv.S3SecretKey, "AWS_REGION=" + testenv.S3Region}

// s3State is the checkpoint document on S3, committed as often as the
// tests' short leases renew (the 10s default would hide the commits the
// fault tests count).
func s3State(bucket, url string) string {
	return fmt.Sprintf("state:\n  store: s3\n  commit_interval: 200ms\n  s3: {bucket: %s, key: ha/state.json, endpoint_url: %s}\n", bucket, url)
}

func s3Backend(t testing.TB, srv *testenv.S3Server, ttl, renew time.Duration) backend {
	bucket := srv.NewBucket(t)
	return backend{name: "s3_lease+s3", ttl: ttl, renew: renew, url: srv.Endpoint, lease: "ha/leader.lease", state: "ha/state.json", bucket: bucket,
		env: func(string) []string { return s3Env },
		config: func(holder, url string) string {
			return fmt.Sprintf(`coordinate:
  type: s3_lease
  s3_lease: {bucket: %s, key: ha/leader.lease, endpoint_url: %s, holder_id: %s, ttl: %s, renew_interval: %s}
`, bucket, url, holder, ttl, renew) + s3State(bucket, url)
		}}
}

func gcsBackend(t testing.TB, srv *testenv.GCSServer, ttl, renew time.Duration) backend {
	bucket := srv.NewBucket(t)
	return backend{name: "gcs_lease+gcs", ttl: ttl, renew: renew, url: srv.URL, lease: "ha/leader.lease", state: "ha/state.json", bucket: bucket,
		env: func(url string) []string {
			return []string{"STORAGE_EMULATOR_HOST=" + strings.TrimPrefix(url, "http://")}
		},
		config: func(holder, _ string) string {
			return fmt.Sprintf(`coordinate:
  type: gcs_lease
  gcs_lease: {bucket: %s, object_name: ha/leader.lease, holder_id: %s, ttl: %s, renew_interval: %s}
state:
  store: gcs
  commit_interval: 1s
  gcs: {bucket: %s, object_name: ha/state.json}
`, bucket, holder, ttl, renew, bucket)
		}}
}

func k8sBackend(t testing.TB, kube *testenv.KubeServer, srv *testenv.S3Server, ttl, renew time.Duration) backend {
	ns := kube.NewNamespace(t)
	kube.GrantLeases(t, ns, "get", "create", "patch", "watch")
	kubeconfig := kube.Kubeconfig(t, testenv.KubeLimitedToken)
	bucket := srv.NewBucket(t)
	return backend{name: "k8s_lease+s3", ttl: ttl, renew: renew, url: srv.Endpoint, state: "ha/state.json", bucket: bucket,
		env: func(string) []string { return s3Env },
		config: func(holder, url string) string {
			return fmt.Sprintf(`coordinate:
  type: k8s_lease
  k8s_lease: {namespace: %s, name: sf2loki-leader, identity: %s, lease_duration: %s, renew_interval: %s, kubeconfig: %s}
`, ns, holder, ttl, renew, kubeconfig) + s3State(bucket, url)
		}}
}

// workload is the leader's work: the synthetic source pushing to a Loki
// push endpoint, labelled job.
func workload(pushURL, job string, rate int) string {
	return fmt.Sprintf("sources:\n  synthetic: {rate: %d}\nsink:\n  loki: {url: %s, labels: {job: %s}}\n", rate, pushURL, job)
}

// cluster starts replicas of one backend and samples them.
type cluster struct {
	t     testing.TB
	b     backend
	extra func(name string) string // appended to each replica's config
	// storeURL is the object store endpoint a replica uses (a per-replica
	// proxy in the fault tests); nil uses the backend's.
	storeURL func(name string) string

	mu  sync.Mutex
	all []*daemon
	seq int
}

func newCluster(t testing.TB, b backend, extra func(name string) string) *cluster {
	return &cluster{t: t, b: b, extra: extra}
}

// start starts the next replica (r1, r2, …) or the one named.
func (c *cluster) start(name ...string) *daemon {
	c.t.Helper()
	c.mu.Lock()
	c.seq++
	n := fmt.Sprintf("r%d", c.seq)
	c.mu.Unlock()
	if len(name) > 0 {
		n = name[0]
	}
	url := c.b.url
	if c.storeURL != nil {
		url = c.storeURL(n)
	}
	cfg := c.b.config(n, url)
	if c.extra != nil {
		cfg += c.extra(n)
	}
	d := start(c.t, n, cfg, c.b.env(url)...)
	c.mu.Lock()
	c.all = append(c.all, d)
	c.mu.Unlock()
	return d
}

// live returns the replicas that have not exited.
func (c *cluster) live() []*daemon {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*daemon
	for _, d := range c.all {
		if !d.exited() {
			out = append(out, d)
		}
	}
	return out
}

// unexpectedExits fails the test for every replica that exited without the
// test stopping it.
func (c *cluster) unexpectedExits(t testing.TB) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, d := range c.all {
		if d.exited() && !d.signalled {
			t.Errorf("%s exited on its own (%v):\n%s", d.name, d.err, d.out.String())
		}
	}
}

// view is one replica's answer in a sample.
type view struct {
	d     *daemon
	gauge float64 // sf2loki_leader
	st    status
}

// fenceValid reports whether the replica claims leadership with a fence
// that is still valid at t.
func (v view) fenceValid(t time.Time) bool {
	return v.st.Role == "leader" && v.st.FenceDeadline != nil && v.st.FenceDeadline.After(t)
}

// sample is one round of concurrent /metrics and /statusz requests to every
// live replica; from and to bracket it.
type sample struct {
	from, to time.Time
	views    []view // replicas that answered both
}

// sampler polls a cluster until stopped.
type sampler struct {
	c       *cluster
	stop    chan struct{}
	done    chan struct{}
	mu      sync.Mutex
	samples []sample
}

// sample starts sampling every period.
func (c *cluster) sample(period time.Duration) *sampler {
	s := &sampler{c: c, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		tick := time.NewTicker(period)
		defer tick.Stop()
		for {
			smp := takeSample(c.live())
			s.mu.Lock()
			s.samples = append(s.samples, smp)
			s.mu.Unlock()
			select {
			case <-s.stop:
				return
			case <-tick.C:
			}
		}
	}()
	return s
}

func takeSample(ds []*daemon) sample {
	smp := sample{from: time.Now()}
	views := make([]*view, len(ds))
	var wg sync.WaitGroup
	for i, d := range ds {
		wg.Go(func() {
			m, err := d.metrics(quick)
			if err != nil {
				return
			}
			st, err := d.statusz(quick)
			if err != nil {
				return
			}
			views[i] = &view{d: d, gauge: m["sf2loki_leader"], st: st}
		})
	}
	wg.Wait()
	smp.to = time.Now()
	for _, v := range views {
		if v != nil {
			smp.views = append(smp.views, *v)
		}
	}
	return smp
}

// snapshot returns the samples so far.
func (s *sampler) snapshot() []sample {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.samples)
}

// Stop ends sampling and returns the samples.
func (s *sampler) Stop() []sample {
	close(s.stop)
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.samples
}

// leaderReport is what the samples say about single leadership.
type leaderReport struct {
	samples int
	// overlaps describes every sample in which two replicas reported
	// sf2loki_leader 1 or a fence valid through the end of the sample.
	overlaps []string
	// straddles counts samples that caught both sides of a graceful
	// handover: the old leader answered before its release, the new one
	// after its acquisition (which the release's compare-and-swap orders).
	straddles int
	// maxGap is the longest time between two samples that saw a leader with
	// no sample in between seeing one.
	maxGap time.Duration
	// maxPeriod is the longest sample-to-sample interval.
	maxPeriod time.Duration
}

// released reports whether d logged the graceful release of epoch.
func released(d *daemon, epoch uint64) bool {
	_, ok := d.logTime(time.Time{}, "event=released", fmt.Sprintf("epoch=%d ", epoch))
	return ok
}

// checkLeaders evaluates samples.
func checkLeaders(samples []sample) leaderReport {
	r := leaderReport{samples: len(samples)}
	var lastLed time.Time
	var prev time.Time
	for _, s := range samples {
		mid := s.from.Add(s.to.Sub(s.from) / 2)
		if !prev.IsZero() {
			r.maxPeriod = max(r.maxPeriod, mid.Sub(prev))
		}
		prev = mid
		var leaders []view
		for _, v := range s.views {
			if v.gauge == 1 || v.fenceValid(s.to) {
				leaders = append(leaders, v)
			}
		}
		if len(leaders) > 0 {
			if !lastLed.IsZero() {
				r.maxGap = max(r.maxGap, mid.Sub(lastLed))
			}
			lastLed = mid
		}
		if len(leaders) < 2 {
			continue
		}
		slices.SortFunc(leaders, func(a, b view) int { return cmp.Compare(a.st.Epoch, b.st.Epoch) })
		if len(leaders) == 2 && leaders[0].st.Epoch < leaders[1].st.Epoch && released(leaders[0].d, leaders[0].st.Epoch) {
			r.straddles++
			continue
		}
		var desc []string
		for _, v := range leaders {
			desc = append(desc, fmt.Sprintf("%s(gauge=%v role=%s epoch=%d fence=%v)", v.d.name, v.gauge, v.st.Role, v.st.Epoch, v.st.FenceDeadline))
		}
		r.overlaps = append(r.overlaps, fmt.Sprintf("%s: %s", s.to.Format("15:04:05.000"), strings.Join(desc, ", ")))
	}
	return r
}

// requireSingleLeader fails the test when a sample saw two leaders.
func requireSingleLeader(t testing.TB, samples []sample) leaderReport {
	t.Helper()
	r := checkLeaders(samples)
	if r.samples < 10 {
		t.Fatalf("only %d samples taken", r.samples)
	}
	for _, o := range r.overlaps {
		t.Errorf("two leaders in one sample: %s", o)
	}
	return r
}
