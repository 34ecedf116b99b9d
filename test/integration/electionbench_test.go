package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/sf2loki/sf2loki/internal/testenv"
)

// The lease timing both systems run with: sf2loki's lease_duration and
// renew_interval, client-go's LeaseDuration and RetryPeriod (its
// RenewDeadline is electionRenewDeadline).
const (
	electionTTL           = 4 * time.Second
	electionRenew         = time.Second
	electionRenewDeadline = 3 * time.Second
)

// BenchmarkLeaderElection sets sf2loki's Kubernetes Lease beside client-go's
// leader election (tools/leaderelection with a LeaseLock) on one
// kube-apiserver, at the same timing, and prints one table
// (`make bench-leader-election`). Each system runs two contenders as
// processes: two sf2loki daemons, and two copies of this test binary
// running client-go (TestLeaderElectionCandidate). Each contender
// authenticates as a user of its own, and the API server's audit log
// attributes every request to it.
//
// First an idle window, HA_IDLE (default 30s), with one contender leading
// and one standing by in each system: the requests each made, a watch
// counted once however long it lasts. Then HA_REPEATS (default 10)
// handovers of each kind per system, the systems alternating round by
// round: unplanned (SIGKILL of the leader) and planned (SIGTERM: sf2loki
// releases the lease on its way out, client-go cancels its context with
// ReleaseOnCancel). Every handover is timed the same way: from the harness
// sending the signal to the API server's answer to the standby's first
// successful write after it (its acquiring update, patch or create; the
// audit event's ResponseComplete stageTimestamp). An administrator then
// reads the Lease to check that its holder is the standby.
func BenchmarkLeaderElection(b *testing.B) {
	testenv.Long(b, "the leader election benchmark")
	var report strings.Builder
	for b.Loop() {
		report.Reset()
		benchElection(b, &report)
	}
	fmt.Print(report.String())
}

// electionSystem is one system's two contenders and its measurements.
type electionSystem struct {
	name   string
	lease  string
	ids    [2]string // the contenders' identities, which are also their API users
	launch func(id string) *contender
	procs  map[string]*contender
	leader string

	unplanned, planned []time.Duration
	leaderReqs         map[string]int // by verb, in the idle window
	standbyReqs        map[string]int
}

// contender is one process of either system.
type contender struct {
	id      string
	cmd     *exec.Cmd
	out     *testenv.Buffer
	started time.Time
	done    chan struct{} // closed when the process has exited
}

func (s *electionSystem) other(id string) string {
	if id == s.ids[0] {
		return s.ids[1]
	}
	return s.ids[0]
}

func benchElection(b *testing.B, w *strings.Builder) {
	n := envInt("HA_REPEATS", 10)
	window := 30 * time.Second
	if d, err := time.ParseDuration(os.Getenv("HA_IDLE")); err == nil && d > 0 {
		window = d
	}
	sf := &electionSystem{name: "sf2loki (k8s_lease)", lease: "sf2loki-leader", ids: [2]string{"sf2loki-a", "sf2loki-b"}}
	cg := &electionSystem{name: "client-go (leaderelection, LeaseLock)", lease: "client-go-leader", ids: [2]string{"client-go-a", "client-go-b"}}
	var users []testenv.KubeUser
	for _, s := range []*electionSystem{sf, cg} {
		for _, id := range s.ids {
			users = append(users, testenv.KubeUser{Name: id, Token: id + "-token"})
		}
	}
	kube := testenv.StartKube(b, testenv.KubeOptions{Users: users, Audit: true})
	b.Cleanup(kube.Stop)
	ns := kube.NewNamespace(b)
	admin := kube.Admin(b)
	audit := kube.AuditLog()
	serverVersion := "?"
	if v, err := admin.Discovery().ServerVersion(); err == nil {
		serverVersion = v.GitVersion
	}

	stateDir := b.TempDir()
	sf.launch = func(id string) *contender {
		cfg := fmt.Sprintf(`coordinate:
  type: k8s_lease
  k8s_lease: {namespace: %s, name: %s, identity: %s, lease_duration: %s, renew_interval: %s, kubeconfig: %s}
state:
  file: {path: %s/state.json}
`, ns, sf.lease, id, electionTTL, electionRenew, kube.Kubeconfig(b, id+"-token"), stateDir)
		d := start(b, id, cfg)
		return &contender{id: id, cmd: d.cmd, out: d.out, started: d.started, done: d.done}
	}
	cg.launch = func(id string) *contender {
		spec, err := json.Marshal(candidateSpec{URL: kube.URL, Token: id + "-token", Namespace: ns, Lease: cg.lease, Identity: id})
		if err != nil {
			b.Fatal(err)
		}
		return startCandidate(b, id, string(spec))
	}

	holder := func(s *electionSystem) string {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		l, err := admin.CoordinationV1().Leases(ns).Get(ctx, s.lease, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	fail := func(s *electionSystem, format string, args ...any) {
		b.Helper()
		for _, id := range s.ids {
			if c := s.procs[id]; c != nil {
				b.Logf("--- %s output ---\n%s", id, tail(c.out.String(), 40))
			}
		}
		b.Fatalf("%s: "+format, append([]any{s.name}, args...)...)
	}
	// waitAudit returns the first request in the audit log that match
	// accepts, waiting up to limit for it.
	waitAudit := func(s *electionSystem, what string, limit time.Duration, match func(testenv.AuditRequest) bool) testenv.AuditRequest {
		b.Helper()
		deadline := time.Now().Add(limit)
		for {
			reqs, err := audit.Requests()
			if err != nil {
				b.Fatal(err)
			}
			if i := slices.IndexFunc(reqs, match); i >= 0 {
				return reqs[i]
			}
			if time.Now().After(deadline) {
				fail(s, "no %s in the audit log within %s", what, limit)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	// waitStandby waits until the standby has read the Lease since it
	// started: it knows the leader.
	waitStandby := func(s *electionSystem) {
		b.Helper()
		c := s.procs[s.other(s.leader)]
		waitAudit(s, c.id+"'s first read", electionTTL+slack, func(r testenv.AuditRequest) bool {
			return r.User == c.id && isRead(r.Verb) && !r.Received.Before(c.started)
		})
	}

	systems := []*electionSystem{sf, cg}
	for _, s := range systems {
		s.procs = map[string]*contender{}
		s.leader = s.ids[0]
		s.procs[s.ids[0]] = s.launch(s.ids[0])
		deadline := time.Now().Add(electionTTL + slack)
		for holder(s) != s.ids[0] {
			if time.Now().After(deadline) {
				fail(s, "%s does not hold the lease %s after it started", s.ids[0], electionTTL+slack)
			}
			time.Sleep(20 * time.Millisecond)
		}
		s.procs[s.ids[1]] = s.launch(s.ids[1])
	}
	for _, s := range systems {
		waitStandby(s)
	}

	// The idle window, both systems at once: each contender is its own
	// user in the audit log.
	time.Sleep(2 * electionRenew)
	from := time.Now()
	time.Sleep(window)
	to := time.Now()
	// A request received before to is logged once answered.
	time.Sleep(time.Second)
	reqs, err := audit.Requests()
	if err != nil {
		b.Fatal(err)
	}
	for _, s := range systems {
		if h := holder(s); h != s.leader {
			fail(s, "the lease's holder is %q after the idle window, want %s", h, s.leader)
		}
		s.leaderReqs = countRequests(reqs, s.leader, from, to)
		s.standbyReqs = countRequests(reqs, s.other(s.leader), from, to)
	}

	round := func(s *electionSystem, sig syscall.Signal) time.Duration {
		b.Helper()
		old, next := s.leader, s.other(s.leader)
		waitStandby(s)
		// The jitter spreads the signal over the phases of the renew and
		// retry cycles.
		time.Sleep(2*electionRenew + rand.N(electionRenew))
		oldProc := s.procs[old]
		at := time.Now()
		if err := oldProc.cmd.Process.Signal(sig); err != nil {
			fail(s, "%s: %s: %v", old, sig, err)
		}
		acquired := waitAudit(s, next+"'s acquiring write", 4*electionTTL, func(r testenv.AuditRequest) bool {
			return r.User == next && isWrite(r.Verb) && r.Succeeded() && !r.Received.Before(at)
		})
		took := acquired.Completed.Sub(at)
		if h := holder(s); h != next {
			fail(s, "after %s of %s the lease's holder is %q, want %s", sig, old, h, next)
		}
		select {
		case <-oldProc.done:
		case <-time.After(slack):
			fail(s, "%s did not exit within %s of %s", old, slack, sig)
		}
		if sig == syscall.SIGTERM && !oldProc.cmd.ProcessState.Success() {
			fail(s, "%s exited with %v after SIGTERM, want 0", old, oldProc.cmd.ProcessState)
		}
		s.leader = next
		s.procs[old] = s.launch(old)
		return took
	}
	for i := range n {
		order := systems
		if i%2 == 1 {
			order = []*electionSystem{cg, sf}
		}
		for _, s := range order {
			s.unplanned = append(s.unplanned, round(s, syscall.SIGKILL))
		}
		for _, s := range order {
			s.planned = append(s.planned, round(s, syscall.SIGTERM))
		}
	}
	for _, s := range systems {
		for _, c := range s.procs {
			_ = c.cmd.Process.Signal(syscall.SIGTERM)
		}
	}

	clientGo := "?"
	list := exec.Command("go", "list", "-m", "-f", "{{.Version}}", "k8s.io/client-go")
	list.Dir = testenv.RepoRoot(b)
	if out, err := list.Output(); err == nil {
		clientGo = strings.TrimSpace(string(out))
	}
	be := backend{ttl: electionTTL, renew: electionRenew}
	fmt.Fprintf(w, "\n## Leader election on one kube-apiserver: sf2loki beside client-go (%s, %d CPUs)\n\n", time.Now().UTC().Format("2006-01-02"), runtime.NumCPU())
	fmt.Fprintf(w, "kube-apiserver %s, client-go %s. Timing: sf2loki lease_duration %s, renew_interval %s; client-go LeaseDuration %s, RenewDeadline %s, RetryPeriod %s, ReleaseOnCancel. "+
		"%d handovers of each kind per system, alternating; each from the signal to the API server's answer to the standby's acquiring write (audit log). "+
		"Requests from the audit log over %s idle, one contender leading and one standing by.\n\n",
		serverVersion, clientGo, electionTTL, electionRenew, electionTTL, electionRenewDeadline, electionRenew, n, window)
	fmt.Fprintf(w, "| System | Unplanned (SIGKILL) min / median / max | Planned (SIGTERM) min / median / max | Standby requests/s | Leader requests/s |\n|---|---|---|---|---|\n")
	rate := func(c map[string]int) float64 {
		total := 0
		for _, v := range c {
			total += v
		}
		return float64(total) / to.Sub(from).Seconds()
	}
	for _, s := range systems {
		fmt.Fprintf(w, "| %s | %s | %s | %.2f (%s) | %.2f (%s) |\n", s.name, spread(s.unplanned, be), spread(s.planned, be),
			rate(s.standbyReqs), formatCounts(s.standbyReqs), rate(s.leaderReqs), formatCounts(s.leaderReqs))
	}
	ratio := func(x, y float64) string {
		if y == 0 {
			return "–"
		}
		return fmt.Sprintf("%.2f", x/y)
	}
	median := func(ds []time.Duration) float64 { return minMedMax(ds)[1].Seconds() }
	fmt.Fprintf(w, "| **sf2loki ÷ client-go** (medians, rates) | **%s** | **%s** | **%s** | %s |\n\n", ratio(median(sf.unplanned), median(cg.unplanned)),
		ratio(median(sf.planned), median(cg.planned)), ratio(rate(sf.standbyReqs), rate(cg.standbyReqs)), ratio(rate(sf.leaderReqs), rate(cg.leaderReqs)))
}

// minMedMax returns the min, median and max of ds.
func minMedMax(ds []time.Duration) [3]time.Duration {
	s := slices.Sorted(slices.Values(ds))
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return [3]time.Duration{s[0], med, s[len(s)-1]}
}

func isRead(verb string) bool { return verb == "get" || verb == "list" || verb == "watch" }

func isWrite(verb string) bool { return verb == "update" || verb == "patch" || verb == "create" }

// countRequests counts user's requests in [from, to) by verb: each one
// received in it, and a watch received before it that was still open at
// from (a watch is one request however long it lasts).
func countRequests(reqs []testenv.AuditRequest, user string, from, to time.Time) map[string]int {
	out := map[string]int{}
	for _, r := range reqs {
		if r.User != user || !r.Received.Before(to) {
			continue
		}
		inside := !r.Received.Before(from)
		openAtFrom := r.Verb == "watch" && (r.Completed.IsZero() || !r.Completed.Before(from))
		if inside || openAtFrom {
			out[r.Verb]++
		}
	}
	return out
}

// formatCounts writes counts as "30 get, 1 watch".
func formatCounts(counts map[string]int) string {
	var parts []string
	for _, v := range slices.Sorted(maps.Keys(counts)) {
		parts = append(parts, fmt.Sprintf("%d %s", counts[v], v))
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// candidateEnv carries a candidateSpec to TestLeaderElectionCandidate.
const candidateEnv = "LEADER_ELECTION_CANDIDATE"

// candidateSpec is what one client-go contender runs against.
type candidateSpec struct {
	URL, Token, Namespace, Lease, Identity string
}

// startCandidate runs this test binary as a client-go contender.
func startCandidate(t testing.TB, id, spec string) *contender {
	t.Helper()
	c := &contender{id: id, out: &testenv.Buffer{}, done: make(chan struct{})}
	c.cmd = exec.Command(os.Args[0], "-test.run=^TestLeaderElectionCandidate$")
	c.cmd.Env = append(os.Environ(), candidateEnv+"="+spec)
	c.cmd.Stdout, c.cmd.Stderr = c.out, c.out
	c.started = time.Now()
	if err := c.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = c.cmd.Wait()
		close(c.done)
	}()
	t.Cleanup(func() {
		_ = c.cmd.Process.Kill()
		<-c.done
	})
	return c
}

// TestLeaderElectionCandidate is the body of a client-go contender for
// BenchmarkLeaderElection; it does nothing in a normal run. It contends
// for the Lease until SIGTERM, which cancels its context: a leader then
// releases the Lease (ReleaseOnCancel).
func TestLeaderElectionCandidate(t *testing.T) {
	raw := os.Getenv(candidateEnv)
	if raw == "" {
		return
	}
	var spec candidateSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		t.Fatal(err)
	}
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: spec.URL, BearerToken: spec.Token, TLSClientConfig: rest.TLSClientConfig{Insecure: true}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock: &resourcelock.LeaseLock{
			LeaseMeta:  metav1.ObjectMeta{Namespace: spec.Namespace, Name: spec.Lease},
			Client:     cs.CoordinationV1(),
			LockConfig: resourcelock.ResourceLockConfig{Identity: spec.Identity},
		},
		LeaseDuration:   electionTTL,
		RenewDeadline:   electionRenewDeadline,
		RetryPeriod:     electionRenew,
		ReleaseOnCancel: true,
		Name:            spec.Lease,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(context.Context) { fmt.Println("leading") },
			OnStoppedLeading: func() { fmt.Println("stopped leading") },
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	le.Run(ctx)
}
