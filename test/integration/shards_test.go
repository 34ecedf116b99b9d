package integration

import (
	"cmp"
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/internal/testenv/faultproxy"
)

// shardStatus is the part of /statusz's shards the tests read.
type shardStatus struct {
	Org           string     `json:"org"`
	Role          string     `json:"role"`
	Epoch         uint64     `json:"epoch"`
	FenceDeadline *time.Time `json:"fence_deadline"`
}

func shardsOf(c *http.Client, d *daemon) ([]shardStatus, error) {
	resp, err := c.Get("http://" + d.addr + "/statusz")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var st struct {
		Shards []shardStatus `json:"shards"`
	}
	err = json.NewDecoder(resp.Body).Decode(&st)
	return st.Shards, err
}

// shardWatch samples every replica's shards and checks that no shard ever
// has two replicas leading it with valid fences at once.
type shardWatch struct {
	mu      sync.Mutex
	samples int
	flagged []flaggedSample // samples that saw an overlap, judged again at finish
	stop    chan struct{}
	done    chan struct{}
}

// flaggedSample is a sample that saw a shard led twice, with the processes
// that answered it: at finish, an overlap whose older leader released that
// epoch (its release landed between its answer and the newer leader's) is
// a planned handover, not two leaders.
type flaggedSample struct {
	from, end time.Time
	views     map[string][]shardStatus
	daemons   map[string]*daemon
}

func watchShards(c *cluster) *shardWatch {
	w := &shardWatch{stop: make(chan struct{}), done: make(chan struct{})}
	client := &http.Client{Timeout: time.Second}
	go func() {
		defer close(w.done)
		for {
			select {
			case <-w.stop:
				return
			case <-time.After(100 * time.Millisecond):
			}
			from := time.Now()
			views := map[string][]shardStatus{}
			daemons := map[string]*daemon{}
			for _, d := range c.live() {
				shards, err := shardsOf(client, d)
				if err != nil {
					continue
				}
				views[d.name], daemons[d.name] = shards, d
			}
			end := time.Now()
			w.mu.Lock()
			w.samples++
			if len(shardOverlaps(end, views, nil)) > 0 {
				w.flagged = append(w.flagged, flaggedSample{from: from, end: end, views: views, daemons: daemons})
			}
			w.mu.Unlock()
		}
	}()
	return w
}

// shardOverlaps reports every shard that more than one replica led with a
// fence still valid at end, the moment the last replica of a sample
// answered. Judging at end, not at the sample's start, is what makes an
// overlap certain: each replica answered before end, a leader's authority
// began before it answered, and a fence valid at end had not expired. A
// fence that expired while a slow (or paused) replica was being asked is
// the normal handover, not two leaders.
//
// released, when set, says whether a replica released a shard's lease at
// an epoch: two leaders of consecutive claims where the older one released
// its epoch are the planned handover (the release demotes before it writes,
// so the older one had answered before it), as checkLeaders counts them.
func shardOverlaps(end time.Time, views map[string][]shardStatus, released func(name, org string, epoch uint64) bool) []string {
	type lead struct {
		name  string
		epoch uint64
	}
	leaders := map[string][]lead{}
	for _, name := range slices.Sorted(maps.Keys(views)) {
		for _, s := range views[name] {
			if s.Role == "leader" && s.FenceDeadline != nil && s.FenceDeadline.After(end) {
				leaders[s.Org] = append(leaders[s.Org], lead{name, s.Epoch})
			}
		}
	}
	var out []string
	for _, org := range slices.Sorted(maps.Keys(leaders)) {
		ls := leaders[org]
		if len(ls) < 2 {
			continue
		}
		slices.SortFunc(ls, func(a, b lead) int { return cmp.Compare(a.epoch, b.epoch) })
		if len(ls) == 2 && ls[0].epoch < ls[1].epoch && released != nil && released(ls[0].name, org, ls[0].epoch) {
			continue
		}
		var desc []string
		for _, l := range ls {
			desc = append(desc, fmt.Sprintf("%s (epoch %d)", l.name, l.epoch))
		}
		out = append(out, fmt.Sprintf("%s led by %v at once", org, desc))
	}
	return out
}

// TestShardOverlaps checks the shard watch's judgement: a fence that
// expired while the sample was taken is a handover, one valid when the
// last replica answered is two leaders.
func TestShardOverlaps(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) *time.Time { v := t0.Add(time.Duration(ms) * time.Millisecond); return &v }
	lead := func(org string, epoch uint64, fence *time.Time) shardStatus {
		return shardStatus{Org: org, Role: "leader", Epoch: epoch, FenceDeadline: fence}
	}
	// b was asked first (fence until 300 ms), a paused replica held the
	// sample up, then a answered as the new leader: a handover.
	handover := map[string][]shardStatus{"b": {lead("org-d", 8, at(300))}, "a": {lead("org-d", 9, at(3000))}}
	if v := shardOverlaps(t0.Add(time.Second), handover, nil); len(v) != 0 {
		t.Errorf("a fence that expired during the sample counted as an overlap: %v", v)
	}
	if v := shardOverlaps(t0.Add(200*time.Millisecond), handover, nil); len(v) != 1 || !strings.Contains(v[0], "org-d led by [b (epoch 8) a (epoch 9)]") {
		t.Errorf("two fences valid when the sample ended: got %v, want one org-d overlap", v)
	}
	// b answered, then resigned and released epoch 8, and a took over:
	// the planned handover. Had b not released epoch 8, it is two leaders.
	releasedBy := func(who string, epoch uint64) func(string, string, uint64) bool {
		return func(name, org string, e uint64) bool { return name == who && org == "org-d" && e == epoch }
	}
	if v := shardOverlaps(t0.Add(200*time.Millisecond), handover, releasedBy("b", 8)); len(v) != 0 {
		t.Errorf("a released epoch counted as an overlap: %v", v)
	}
	if v := shardOverlaps(t0.Add(200*time.Millisecond), handover, releasedBy("b", 7)); len(v) != 1 {
		t.Errorf("another epoch's release excused an overlap: %v", v)
	}
	standby := map[string][]shardStatus{"b": {{Org: "org-d", Role: "standby", Epoch: 8, FenceDeadline: at(3000)}}, "a": {lead("org-d", 9, at(3000)), lead("org-a", 2, at(3000))}}
	if v := shardOverlaps(t0, standby, nil); len(v) != 0 {
		t.Errorf("a standby counted as a leader: %v", v)
	}
}

func (w *shardWatch) finish() (int, []string) {
	close(w.stop)
	<-w.done
	w.mu.Lock()
	defer w.mu.Unlock()
	var violations []string
	for _, f := range w.flagged {
		released := func(name, org string, epoch uint64) bool {
			_, ok := f.daemons[name].logTime(time.Time{}, "org="+org+" ", "event=released", fmt.Sprintf("epoch=%d ", epoch))
			return ok
		}
		for _, msg := range shardOverlaps(f.end, f.views, released) {
			violations = append(violations, fmt.Sprintf("%s..%s: %s", f.from.Format("15:04:05.000"), f.end.Format("15:04:05.000"), msg))
		}
	}
	return w.samples, violations
}

// leads returns, per live replica, the orgs it leads.
func leads(c *cluster) map[string][]string {
	client := &http.Client{Timeout: time.Second}
	out := map[string][]string{}
	for _, d := range c.live() {
		shards, err := shardsOf(client, d)
		if err != nil {
			continue
		}
		out[d.name] = []string{}
		for _, s := range shards {
			if s.Role == "leader" {
				out[d.name] = append(out[d.name], s.Org)
			}
		}
	}
	return out
}

// balanced reports whether the live replicas lead want shards each (sorted
// counts), every org once.
func balanced(l map[string][]string, want ...int) bool {
	var counts []int
	seen := map[string]bool{}
	for _, orgs := range l {
		counts = append(counts, len(orgs))
		for _, o := range orgs {
			if seen[o] {
				return false
			}
			seen[o] = true
		}
	}
	slices.Sort(counts)
	return slices.Equal(counts, want)
}

// untilBalanced waits for want and returns how long it took.
func untilBalanced(t testing.TB, c *cluster, limit time.Duration, want ...int) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		l := leads(c)
		if balanced(l, want...) {
			return time.Since(start)
		}
		if time.Since(start) > limit {
			t.Fatalf("leads %v after %s, want counts %v", l, limit, want)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestShardsSpreadOverReplicas runs three replicas over six orgs (synthetic
// sources, one per org) into VictoriaLogs, on a file lease, on S3 and on a
// Kubernetes Lease (kube-apiserver; checkpoints on S3): they
// settle at 2/2/2; a SIGKILLed replica's shards move within ttl + renew
// (3/3); restarted, it gets two back (2/2/2); a SIGTERMed one hands its
// shards off within about a renew interval per shard. No shard ever has two
// leaders passing its fence, and every org's stream is stored without a
// gap.
func TestShardsSpreadOverReplicas(t *testing.T) {
	logs := testenv.StartLogs(t)
	var s3srv *testenv.S3Server
	s3 := func() *testenv.S3Server { // one server for the cells, stopped with the test
		if s3srv == nil {
			s3srv = testenv.StartS3(t)
		}
		return s3srv
	}
	cells := []cellSpec{
		{"file", func(t testing.TB) backend { return fileBackend(t, ttl, renew) }},
		{"s3", func(t testing.TB) backend { return s3Backend(t, s3(), ttl, renew) }},
		{"k8s", func(t testing.TB) backend {
			kube := testenv.StartKube(t)
			t.Cleanup(kube.Stop)
			return k8sBackend(t, kube, s3(), ttl, renew)
		}},
	}
	orgs := []string{"org-a", "org-b", "org-c", "org-d", "org-e", "org-f"}
	for _, cell := range cells {
		t.Run(cell.name, func(t *testing.T) {
			b := cell.make(t)
			job := "shards-" + cell.name + "-" + strconv.FormatInt(time.Now().UnixNano(), 36)
			var orgYAML strings.Builder
			for _, o := range orgs {
				fmt.Fprintf(&orgYAML, "  - name: %s\n    sources: {synthetic: {rate: 50}}\n", o)
			}
			c := newCluster(t, b, func(string) string {
				return fmt.Sprintf("sink:\n  loki: {url: %s, labels: {job: %s}, batch: {max_wait: 200ms}}\norgs:\n%s", logs.PushURL, job, orgYAML.String())
			})
			w := watchShards(c)
			c.start("r1")
			c.start("r2")
			r3 := c.start("r3")
			t.Logf("%s: three replicas started: 2/2/2 after %s: %v", cell.name, untilBalanced(t, c, 10*ttl, 2, 2, 2).Round(time.Millisecond), leads(c))
			time.Sleep(2 * renew)
			var r2 *daemon
			for _, d := range c.live() {
				if d.name == "r2" {
					r2 = d
				}
			}
			r2.signal(t, syscall.SIGKILL)
			<-r2.done
			took := untilBalanced(t, c, ttl+renew+2*time.Second, 3, 3)
			t.Logf("%s: r2 SIGKILLed: its shards moved after %s (ttl %s + renew %s): %v", cell.name, took.Round(time.Millisecond), ttl, renew, leads(c))
			c.start("r2")
			t.Logf("%s: r2 restarted: 2/2/2 after %s: %v", cell.name, untilBalanced(t, c, 6*ttl, 2, 2, 2).Round(time.Millisecond), leads(c))
			time.Sleep(2 * renew)
			r3.signal(t, syscall.SIGTERM)
			took = untilBalanced(t, c, 4*renew+ttl, 3, 3)
			t.Logf("%s: r3 SIGTERMed: its shards handed off after %s: %v", cell.name, took.Round(time.Millisecond), leads(c))
			r3.waitExit(t, 30*time.Second)
			time.Sleep(2 * renew)
			samples, violations := w.finish()
			for _, d := range c.live() {
				d.signal(t, syscall.SIGTERM)
				d.waitExit(t, 30*time.Second)
			}
			c.unexpectedExits(t)
			if len(violations) > 0 {
				t.Fatalf("%d samples, %d with a shard led twice: %v", samples, len(violations), violations[:min(5, len(violations))])
			}
			for _, o := range orgs {
				total, dups := requireNoGapsIn(t, logs, job, o)
				t.Logf("%s: %s: %d entries, %d duplicates, 0 gaps", cell.name, o, total, dups)
			}
			t.Logf("%s: %d samples, no shard led twice", cell.name, samples)
		})
	}
}

// TestGrowingFromOneOrgToTwo upgrades a single-org deployment (file lease)
// to two orgs: the first org listed keeps the lease and the checkpoint
// document, so it resumes from the stored positions (its first entry after
// the upgrade follows the last one before, nothing re-ingested), the new
// org starts from its own document; and with the orgs' order swapped the
// daemon refuses to read the first org's positions as the second's.
func TestGrowingFromOneOrgToTwo(t *testing.T) {
	logs := testenv.StartLogs(t)
	b := fileBackend(t, ttl, renew)
	job := "grow-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	single := newCluster(t, b, func(string) string {
		return fmt.Sprintf("sink:\n  loki: {url: %s, labels: {job: %s}, batch: {max_wait: 200ms}}\nsources: {synthetic: {rate: 50}}\n", logs.PushURL, job)
	})
	d := single.start("r1")
	d.waitReady(t, http.StatusOK, "leader", 10*ttl)
	time.Sleep(2 * time.Second)
	d.signal(t, syscall.SIGTERM)
	d.waitExit(t, 30*time.Second)
	key, before := syntheticPosition(t, b)
	if before == 0 {
		t.Fatal("the single-org daemon committed nothing")
	}
	orgs := func(first, second string) func(string) string {
		return func(string) string {
			return fmt.Sprintf("sink:\n  loki: {url: %s, labels: {job: %s}, batch: {max_wait: 200ms}}\norgs:\n"+
				"  - name: %s\n    sources: {synthetic: {rate: 50}}\n  - name: %s\n    sources: {synthetic: {rate: 50}}\n", logs.PushURL, job, first, second)
		}
	}
	two := newCluster(t, b, orgs("prod", "sandbox"))
	d = two.start("r1")
	untilBalanced(t, two, 10*ttl, 2)
	time.Sleep(5 * time.Second)
	d.signal(t, syscall.SIGTERM)
	d.waitExit(t, 30*time.Second)
	_, after := syntheticPosition(t, b)
	rows := logs.Query(t, fmt.Sprintf(`{source="synthetic",job=%q,org="prod"} | fields event_type, sequence`, job))
	first := 0
	for _, r := range rows {
		if n, _ := strconv.Atoi(r["sequence"]); r["event_type"] == strings.TrimPrefix(key, "synthetic:") && (first == 0 || n < first) {
			first = n
		}
	}
	t.Logf("single org: %s at %d; after the upgrade prod's first %s entry is %d, and it reached %d", key, before, key, first, after)
	if first != before+1 || after <= before {
		t.Fatalf("prod resumed at %d (document at %d before the upgrade, %d after): want %d, nothing re-ingested", first, before, after, before+1)
	}
	if n, _ := requireNoGapsIn(t, logs, job, "sandbox"); n == 0 {
		t.Fatal("sandbox stored nothing")
	}
	// The orgs swapped: sandbox would take prod's document.
	swapped := newCluster(t, b, orgs("sandbox", "prod"))
	d = swapped.start("r1")
	<-d.done
	if out := d.out.String(); !strings.Contains(out, "holds the positions of org prod") || !strings.Contains(out, "list prod first again") {
		t.Fatalf("with the orgs swapped: exit %v\n%s", d.err, tail(out, 20))
	}
}

// TestShardRequestCost checks the documented request cost of shards on S3
// against counted requests: three replicas over six orgs at 2/2/2, each
// behind its own counting proxy; over ten renew intervals, per replica and
// interval, one conditional PUT per shard it leads, one GET per shard it
// does not lead, and one GET and one PUT of the members document (a lost
// compare-and-swap on it costs one more of each).
func TestShardRequestCost(t *testing.T) {
	srv := testenv.StartS3(t)
	b := s3Backend(t, srv, ttl, renew)
	logs := testenv.StartLogs(t)
	orgs := []string{"org-a", "org-b", "org-c", "org-d", "org-e", "org-f"}
	var orgYAML strings.Builder
	for _, o := range orgs {
		fmt.Fprintf(&orgYAML, "  - name: %s\n    sources: {synthetic: {rate: 5}}\n", o)
	}
	c := newCluster(t, b, func(string) string {
		return fmt.Sprintf("sink:\n  loki: {url: %s, labels: {job: cost}}\norgs:\n%s", logs.PushURL, orgYAML.String())
	})
	proxies := map[string]*faultproxy.Proxy{}
	for _, n := range []string{"r1", "r2", "r3"} {
		proxies[n] = faultproxy.New(t, b.url)
	}
	c.storeURL = func(name string) string { return proxies[name].URL }
	for _, n := range []string{"r1", "r2", "r3"} {
		c.start(n)
	}
	untilBalanced(t, c, 10*ttl, 2, 2, 2)
	time.Sleep(2 * renew)
	for _, p := range proxies {
		p.Reset()
	}
	const intervals = 10
	time.Sleep(intervals * renew)
	lease := func(r faultproxy.Request) bool { return strings.HasSuffix(r.Path, "leader.lease") }
	members := func(r faultproxy.Request) bool { return strings.HasSuffix(r.Path, "shards/members.json") }
	for n, p := range proxies {
		reqs := p.Requests()
		count := func(match func(faultproxy.Request) bool, method string) int {
			k := 0
			for _, r := range reqs {
				if match(r) && r.Method == method {
					k++
				}
			}
			return k
		}
		lp, lg := count(lease, http.MethodPut), count(lease, http.MethodGet)
		mp, mg := count(members, http.MethodPut), count(members, http.MethodGet)
		// A heartbeat is one GET and one conditional PUT; a PUT that loses
		// its compare-and-swap to another replica's beat (412) is retried
		// against a fresh GET, so lost races cost pairs, not time: the beats
		// that landed follow the formula, and every attempt is a pair.
		landed := count(func(r faultproxy.Request) bool { return members(r) && r.Status == http.StatusOK }, http.MethodPut)
		t.Logf("%s over %d renew intervals: lease PUTs %d (formula %d), lease GETs %d (formula %d), members beats landed %d (formula %d), "+
			"members GETs %d and PUTs %d (one pair per attempt; %d lost a race)", n, intervals, lp, 2*intervals, lg, 4*intervals, landed, intervals, mg, mp, mp-landed)
		within := func(got, want int) bool { return got >= want-2-want/10 && got <= want+2+want/10 } // the window cuts a poll on a loaded machine
		if !within(lp, 2*intervals) || !within(lg, 4*intervals) || !within(landed, intervals) || mg-mp > 1 || mp-mg > 1 || mp > 3*(landed+1) {
			t.Errorf("%s: counted requests off the protocol (±2 ±10%% of the formula: the window's edges; members: a GET per PUT, at most three attempts a beat)", n)
		}
	}
	for _, d := range c.live() {
		d.signal(t, syscall.SIGTERM)
		d.waitExit(t, 30*time.Second)
	}
}
