package integration

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awss3 "github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/internal/testenv/faultproxy"
)

// sampleSlack is the sampling's share of a measured leaderless gap: the
// last sample that saw the old leader and the first that saw the new one
// are each up to a period (100ms) plus a paused replica's timeout (300ms)
// away from the moments leadership ended and began.
const sampleSlack = 2 * (100*time.Millisecond + 300*time.Millisecond)

// soakDuration is SOAK (a Go duration), 60s by default.
func soakDuration(t testing.TB) time.Duration {
	v := os.Getenv("SOAK")
	if v == "" {
		return 60 * time.Second
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		t.Fatalf("SOAK=%q: want a positive duration such as 10m", v)
	}
	return d
}

// write is one write of the checkpoint document the store accepted.
type write struct {
	replica   string
	at        time.Time
	ifMatch   string // "" for a create
	etag      string
	epoch     uint64
	positions map[string]uint64
	lostAck   bool
}

func unquote(etag string) string { return strings.Trim(etag, `"`) }

// parseDoc reads the checkpoint document: its epoch and the synthetic
// source's positions.
func parseDoc(body []byte) (epoch uint64, pos map[string]uint64, err error) {
	var doc map[string]string
	if err := json.Unmarshal(body, &doc); err != nil {
		return 0, nil, err
	}
	pos = map[string]uint64{}
	for k, v := range doc {
		if k == "__org__" { // the org a shard's document belongs to
			continue
		}
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			return 0, nil, fmt.Errorf("%s=%q: %w", k, v, err)
		}
		if k == "__fence_epoch__" {
			epoch = n
		} else {
			pos[k] = n
		}
	}
	return epoch, pos, nil
}

// soakCounts is what the chaos driver did and the checker found.
type soakCounts struct {
	kills, pauses, terms, restarts int
	takeovers, writes, polls       int
	lostAcks, recovered, conflicts int
	fencedCommits                  int
	straddles                      int
	maxGap, gapBound, maxPeriod    time.Duration
	wedgeBound                     time.Duration
	entries, dups                  int
}

func (c soakCounts) String() string {
	return fmt.Sprintf("kills %d, pauses %d, graceful restarts %d, restarts %d; takeovers %d; checkpoint writes %d (polls %d); lost acks injected %d, recovered %d; conflicts %d, fenced commits %d; handover straddles %d; max leaderless gap %s (%.2f× ttl + 2·renew_interval + sampling = %s; fails above %s; sample period ≤ %s); %d entries stored, %d duplicates, 0 gaps",
		c.kills, c.pauses, c.terms, c.restarts, c.takeovers, c.writes, c.polls, c.lostAcks, c.recovered, c.conflicts,
		c.fencedCommits, c.straddles, c.maxGap.Round(time.Millisecond), float64(c.maxGap)/float64(c.gapBound), c.gapBound, c.wedgeBound,
		c.maxPeriod.Round(time.Millisecond), c.entries, c.dups)
}

// TestChaosSoak runs three replicas on versitygw, each behind a fault proxy
// that loses one checkpoint acknowledgement in seven, while a driver kills,
// pauses (longer than ttl), resumes, stops and restarts them at random for
// SOAK (default 60s; SOAK=10m by hand). It then checks the history: the
// accepted checkpoint writes form one chain of compare-and-swaps, no
// position moves backwards, epochs never decrease, no two replicas held a
// valid fence in one sample, no leaderless gap is a wedge (see
// leaderlessBounds), and the stream in VictoriaLogs has no gap.
func TestChaosSoak(t *testing.T) {
	testenv.Long(t, "the chaos soak")
	dur := soakDuration(t)
	srv := testenv.StartS3(t)
	logs := testenv.StartLogs(t)
	b := s3Backend(t, srv, ttl, renew)
	names := []string{"a", "b", "c"}
	proxies := map[string]*faultproxy.Proxy{}
	for _, n := range names {
		p := faultproxy.New(t, b.url)
		p.Capture(conditionalWrite(b.state))
		p.Add(faultproxy.Rule{Name: "lost-ack", Match: conditionalWrite(b.state), Every: 7,
			Action: faultproxy.ApplyThenRespond, Status: 500, Body: storeError(b, 500)})
		proxies[n] = p
	}
	c := newCluster(t, b, func(string) string { return workload(logs.PushURL, "soak", 100) })
	c.storeURL = func(name string) string { return proxies[name].URL }
	smp := c.sample(100 * time.Millisecond)

	// Poll the document directly (not through a proxy) for the checker.
	stopPoll := pollDocuments(srv, b.bucket, []string{b.state})

	current := map[string]*daemon{}
	for _, n := range names {
		current[n] = c.start(n)
	}
	var counts soakCounts
	// peak counters per process (a killed process's counters die with it).
	peak := map[*daemon]map[string]int64{}
	collect := func() {
		for _, s := range smp.snapshot() {
			for _, v := range s.views {
				if peak[v.d] == nil {
					peak[v.d] = map[string]int64{}
				}
				for k, n := range v.st.Counters {
					peak[v.d][k] = max(peak[v.d][k], n)
				}
			}
		}
	}
	leader := func() string {
		for _, n := range names {
			if code, _ := current[n].readyz(); code == http.StatusOK {
				return n
			}
		}
		return ""
	}
	chaos(t, c, b, names, current, dur, leader, &counts)
	// Let the last disruption settle, then stop everything gracefully.
	time.Sleep(b.ttl + 2*b.renew)
	for _, n := range names {
		current[n].signal(t, syscall.SIGTERM)
	}
	for _, n := range names {
		current[n].waitExit(t, 30*time.Second)
	}
	collect()
	polled := stopPoll()[b.state]
	samples := smp.Stop()
	c.unexpectedExits(t)

	writes := acceptedWrites(t, proxies, names, func(faultproxy.Request) bool { return true }, &counts)
	counts.gapBound, counts.wedgeBound = leaderlessBounds(b.ttl, b.renew)
	violations, hist := checkHistory(writes, polled, samples, counts.wedgeBound)
	counts.writes, counts.takeovers, counts.polls = hist.writes, hist.takeovers, len(polled)
	counts.straddles, counts.maxGap, counts.maxPeriod = hist.leaders.straddles, hist.leaders.maxGap, hist.leaders.maxPeriod
	for _, ctr := range peak {
		counts.recovered += int(ctr["recovered_lost_ack"])
		counts.conflicts += int(ctr["conflict"])
		counts.fencedCommits += int(ctr["commit_fenced"])
	}
	counts.entries, counts.dups = requireNoGaps(t, logs, "soak")
	t.Logf("soak %s: %s", dur, counts)
	for _, v := range violations {
		t.Error(v)
	}
	t.Logf("%d invariant violations", len(violations))
	if counts.takeovers == 0 || counts.writes < 10 {
		t.Errorf("the soak exercised too little: %d takeovers, %d writes", counts.takeovers, counts.writes)
	}
}

// leaderlessBounds are the two measures of the soak's longest leaderless
// gap. want, ttl + 2·renew_interval plus sampleSlack, is what a standby
// needs when its timers fire on time: the deterministic simulation
// (internal/domain, sim_test.go) holds every seed to ttl + 2·renew_interval,
// and the soak prints its gap as a ratio of want. On a busy two-core machine
// a standby's poll fires late by however long the scheduler makes it wait,
// so the soak fails only above wedge, twice ttl + 2·renew_interval plus
// sampleSlack: a standby that restarted its staleness clock or stopped
// polling, not one that ran late.
func leaderlessBounds(ttl, renew time.Duration) (want, wedge time.Duration) {
	return ttl + 2*renew + sampleSlack, 2*(ttl+2*renew) + sampleSlack
}

// pollDocuments reads each of keys directly (not through a proxy) every
// 100 ms until the returned stop, which returns what it read, per key.
func pollDocuments(srv *testenv.S3Server, bucket string, keys []string) (stop func() map[string][]write) {
	var mu sync.Mutex
	polled := map[string][]write{}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s3c := srv.Client()
		for ctx.Err() == nil {
			for _, key := range keys {
				out, err := s3c.GetObject(ctx, &awss3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
				if err != nil {
					continue
				}
				body, rerr := io.ReadAll(out.Body)
				_ = out.Body.Close()
				epoch, pos, perr := parseDoc(body)
				if rerr == nil && perr == nil {
					mu.Lock()
					polled[key] = append(polled[key], write{at: time.Now(), etag: unquote(aws.ToString(out.ETag)), epoch: epoch, positions: pos})
					mu.Unlock()
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	return func() map[string][]write {
		cancel()
		<-done
		mu.Lock()
		defer mu.Unlock()
		return polled
	}
}

// acceptedWrites are the checkpoint writes the proxies captured, of the
// documents which selects, that the store accepted; it counts the lost
// acknowledgements among them.
func acceptedWrites(t *testing.T, proxies map[string]*faultproxy.Proxy, names []string, which func(faultproxy.Request) bool, counts *soakCounts) []write {
	var writes []write
	for _, n := range names {
		for _, r := range proxies[n].Requests() {
			if r.Body == nil || r.Upstream != http.StatusOK || !which(r) {
				continue
			}
			epoch, pos, err := parseDoc(r.Body)
			if err != nil {
				t.Fatalf("an accepted checkpoint write from %s does not parse: %v: %s", n, err, r.Body)
			}
			writes = append(writes, write{replica: n, at: r.At, ifMatch: unquote(r.Header.Get("If-Match")), etag: unquote(r.UpstreamHeader.Get("Etag")),
				epoch: epoch, positions: pos, lostAck: r.Fault == "lost-ack"})
			if r.Fault == "lost-ack" {
				counts.lostAcks++
			}
		}
	}
	return writes
}

// chaos kills, pauses (longer than ttl) and gracefully restarts the
// replicas at random for dur, half the time the one leader() names.
func chaos(t *testing.T, c *cluster, b backend, names []string, current map[string]*daemon, dur time.Duration, leader func() string, counts *soakCounts) {
	deadline := time.Now().Add(dur)
	for time.Now().Before(deadline) {
		time.Sleep(time.Second + rand.N(2*time.Second))
		// Half the actions hit the leader, so takeovers happen.
		target := names[rand.N(len(names))]
		if l := leader(); l != "" && rand.N(2) == 0 {
			target = l
		}
		d := current[target]
		switch rand.N(3) {
		case 0: // SIGKILL, restart a little later
			d.signal(t, syscall.SIGKILL)
			<-d.done
			counts.kills++
			time.Sleep(500*time.Millisecond + rand.N(1500*time.Millisecond))
			current[target] = c.start(target)
			counts.restarts++
		case 1: // SIGSTOP for longer than ttl, then SIGCONT
			d.signal(t, syscall.SIGSTOP)
			counts.pauses++
			time.Sleep(b.ttl + rand.N(b.ttl))
			d.signal(t, syscall.SIGCONT)
		case 2: // graceful restart
			d.signal(t, syscall.SIGTERM)
			d.waitExit(t, 30*time.Second)
			counts.terms++
			current[target] = c.start(target)
			counts.restarts++
		}
	}
}

// history is what checkHistory counted.
type history struct {
	writes, takeovers int
	leaders           leaderReport
}

// checkHistory checks the soak's invariants and returns every violation:
// the accepted writes form one compare-and-swap chain (orderWrites); along
// it epochs never decrease and no position moves backwards; every polled
// version is an accepted write and polled positions never move backwards;
// no sample saw two leaders; no leaderless gap exceeds maxGap.
func checkHistory(writes, polled []write, samples []sample, maxGap time.Duration) ([]string, history) {
	chain, violations := orderWrites(writes)
	h := history{writes: len(chain)}
	seen := map[string]bool{}
	last := write{positions: map[string]uint64{}}
	for i, w := range chain {
		seen[w.etag] = true
		if w.epoch < last.epoch {
			violations = append(violations, fmt.Sprintf("write %d (%s) has epoch %d after epoch %d", i, w.replica, w.epoch, last.epoch))
		}
		if w.epoch > last.epoch && i > 0 {
			h.takeovers++
		}
		for k, p := range last.positions {
			if w.positions[k] < p {
				violations = append(violations, fmt.Sprintf("write %d (%s, epoch %d) moves %s back from %d to %d", i, w.replica, w.epoch, k, p, w.positions[k]))
			}
		}
		last = w
	}
	lastPolled := map[string]uint64{}
	for _, p := range polled {
		if !seen[p.etag] {
			violations = append(violations, fmt.Sprintf("polled version %s at %s is not an accepted write through the proxies", p.etag, p.at.Format("15:04:05.000")))
		}
		for k, n := range p.positions {
			if n < lastPolled[k] {
				violations = append(violations, fmt.Sprintf("polled %s went back from %d to %d", k, lastPolled[k], n))
			}
			lastPolled[k] = n
		}
	}
	h.leaders = checkLeaders(samples)
	violations = append(violations, h.leaders.overlaps...)
	if h.leaders.maxGap > maxGap {
		violations = append(violations, fmt.Sprintf("leaderless for %s, above twice ttl + 2·renew_interval, plus sampling = %s: a standby stopped taking over", h.leaders.maxGap, maxGap))
	}
	return violations, h
}

// orderWrites orders the accepted writes by their compare-and-swap chain:
// the create first, then each write whose If-Match names the previous
// write's ETag. Two accepted writes on one version (a lost update) and
// writes off the chain are violations.
func orderWrites(writes []write) (chain []write, violations []string) {
	next := map[string][]write{}
	for _, w := range writes {
		next[w.ifMatch] = append(next[w.ifMatch], w)
	}
	cur := ""
	for {
		ws := next[cur]
		if len(ws) == 0 {
			break
		}
		if len(ws) > 1 {
			violations = append(violations, fmt.Sprintf("%d writes were accepted on top of version %q (a lost update)", len(ws), cur))
		}
		chain = append(chain, ws[0])
		delete(next, cur)
		cur = ws[0].etag
	}
	if len(chain) != len(writes) {
		violations = append(violations, fmt.Sprintf("%d of %d accepted writes are off the compare-and-swap chain", len(writes)-len(chain), len(writes)))
	}
	return chain, violations
}

// TestSoakCheckerFlagsViolations feeds the soak's checker a clean history
// and one broken copy per invariant: each break must be reported.
func TestSoakCheckerFlagsViolations(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	w := func(ifMatch, etag string, epoch, pos uint64) write {
		return write{replica: "a", ifMatch: ifMatch, etag: etag, epoch: epoch, positions: map[string]uint64{"synthetic:LoginEvent": pos}}
	}
	a := &daemon{name: "a", out: &testenv.Buffer{}}
	b := &daemon{name: "b", out: &testenv.Buffer{}}
	leads := func(d *daemon, epoch uint64, fence time.Time) view {
		return view{d: d, gauge: 1, st: status{Role: "leader", Epoch: epoch, FenceDeadline: &fence}}
	}
	stands := func(d *daemon) view { return view{d: d, st: status{Role: "standby"}} }
	type fixture struct {
		writes, polled []write
		samples        []sample
	}
	// a leads with epoch 1, then b with epoch 2 after a one-second gap.
	clean := func() *fixture {
		f := &fixture{
			writes: []write{w("", "e1", 1, 0), w("e1", "e2", 1, 5), w("e2", "e3", 2, 5), w("e3", "e4", 2, 9)},
			polled: []write{w("", "e2", 1, 5), w("", "e4", 2, 9)},
		}
		for i := range 20 {
			s := sample{from: at(i * 100), to: at(i*100 + 5)}
			switch {
			case i < 8:
				s.views = []view{leads(a, 1, at(i*100+1000)), stands(b)}
			case i >= 18:
				s.views = []view{stands(a), leads(b, 2, at(i*100+1000))}
			}
			f.samples = append(f.samples, s)
		}
		return f
	}
	check := func(f *fixture) ([]string, history) {
		_, wedge := leaderlessBounds(ttl, renew)
		return checkHistory(f.writes, f.polled, f.samples, wedge)
	}
	if v, h := check(clean()); len(v) != 0 || h.writes != 4 || h.takeovers != 1 {
		t.Fatalf("clean history: %v, %+v", v, h)
	}
	// A take-over whose standby ran late on a busy machine (a gap 100ms
	// above ttl + 2·renew_interval + sampling) is reported, not failed.
	late := clean()
	want, _ := leaderlessBounds(ttl, renew)
	late.samples = append(late.samples[:8], sample{from: at(700).Add(want + 100*time.Millisecond), to: at(705).Add(want + 100*time.Millisecond), views: []view{leads(b, 2, at(9000))}})
	if v, h := check(late); len(v) != 0 || h.leaders.maxGap <= want {
		t.Fatalf("late take-over: gap %s, violations %v; want a gap above %s and no violation", h.leaders.maxGap, v, want)
	}
	for name, tc := range map[string]struct {
		breakIt func(f *fixture)
		want    string
	}{
		"lost update":        {func(f *fixture) { f.writes = append(f.writes, w("e2", "x", 2, 6)) }, "lost update"},
		"off the chain":      {func(f *fixture) { f.writes = append(f.writes, w("nope", "x", 2, 6)) }, "off the compare-and-swap chain"},
		"position backwards": {func(f *fixture) { f.writes[3].positions["synthetic:LoginEvent"] = 4 }, "moves synthetic:LoginEvent back from 5 to 4"},
		"epoch backwards":    {func(f *fixture) { f.writes[3].epoch = 1 }, "has epoch 1 after epoch 2"},
		"unknown polled":     {func(f *fixture) { f.polled = append(f.polled, w("", "zz", 2, 9)) }, "not an accepted write"},
		"polled backwards":   {func(f *fixture) { f.polled = append(f.polled, w("", "e2", 1, 5)) }, "polled synthetic:LoginEvent went back"},
		"two leaders": {func(f *fixture) {
			f.samples[5].views = []view{leads(a, 1, at(1500)), leads(b, 2, at(1600))}
		}, "b(gauge=1 role=leader epoch=2"},
		"long gap": {func(f *fixture) {
			f.samples = append(f.samples[:8], sample{from: at(8000), to: at(8005), views: []view{leads(b, 2, at(9000))}})
		}, "leaderless for"},
	} {
		f := clean()
		tc.breakIt(f)
		v, _ := check(f)
		if !slices.ContainsFunc(v, func(x string) bool { return strings.Contains(x, tc.want) }) {
			t.Errorf("%s: violations %v, want one containing %q", name, v, tc.want)
		}
	}
}

// TestChaosSoakShards is the chaos soak over shards: three replicas over
// four orgs on versitygw, each replica behind a fault proxy losing one
// checkpoint acknowledgement in seven (on every org's document), and the
// same random kills, pauses and restarts for SOAK. Every org's document is
// checked like the single one (one compare-and-swap chain, no epoch or
// position backwards, every polled version an accepted write); a sampler
// checks that no shard ever had two replicas passing its fence; every
// org's stream is stored without a gap; and the replicas end balanced.
func TestChaosSoakShards(t *testing.T) {
	testenv.Long(t, "the shard chaos soak")
	dur := soakDuration(t)
	srv := testenv.StartS3(t)
	logs := testenv.StartLogs(t)
	b := s3Backend(t, srv, ttl, renew)
	orgs := []string{"org-a", "org-b", "org-c", "org-d"}
	doc := func(i int) string { // the first org keeps the configured document
		if i == 0 {
			return b.state
		}
		return "ha/shards/" + orgs[i] + "/state.json"
	}
	anyDoc := func(r *http.Request) bool {
		for i := range orgs {
			if conditionalWrite(doc(i))(r) {
				return true
			}
		}
		return false
	}
	names := []string{"a", "b", "c"}
	proxies := map[string]*faultproxy.Proxy{}
	for _, n := range names {
		p := faultproxy.New(t, b.url)
		p.Capture(anyDoc)
		p.Add(faultproxy.Rule{Name: "lost-ack", Match: anyDoc, Every: 7, Action: faultproxy.ApplyThenRespond, Status: 500, Body: storeError(b, 500)})
		proxies[n] = p
	}
	var orgYAML strings.Builder
	for _, o := range orgs {
		fmt.Fprintf(&orgYAML, "  - name: %s\n    sources: {synthetic: {rate: 50}}\n", o)
	}
	c := newCluster(t, b, func(string) string {
		return fmt.Sprintf("sink:\n  loki: {url: %s, labels: {job: soak-shards}, batch: {max_wait: 200ms}}\norgs:\n%s", logs.PushURL, orgYAML.String())
	})
	c.storeURL = func(name string) string { return proxies[name].URL }
	watch := watchShards(c)
	docs := make([]string, len(orgs))
	for i := range orgs {
		docs[i] = doc(i)
	}
	stopPoll := pollDocuments(srv, b.bucket, docs)
	current := map[string]*daemon{}
	for _, n := range names {
		current[n] = c.start(n)
	}
	var counts soakCounts
	chaos(t, c, b, names, current, dur, func() string { return "" }, &counts)
	time.Sleep(b.ttl + 2*b.renew)
	final := untilBalanced(t, c, 6*b.ttl, 1, 1, 2)
	polled := stopPoll()
	samples, overlaps := watch.finish()
	for _, n := range names {
		current[n].signal(t, syscall.SIGTERM)
	}
	for _, n := range names {
		current[n].waitExit(t, 30*time.Second)
	}
	c.unexpectedExits(t)
	var violations []string
	writes, takeovers := 0, 0
	for i := range orgs {
		ws := acceptedWrites(t, proxies, names, func(r faultproxy.Request) bool { return isConditionalWrite(r, doc(i)) }, &counts)
		v, h := checkHistory(ws, polled[doc(i)], nil, time.Hour)
		for _, msg := range v {
			violations = append(violations, orgs[i]+": "+msg)
		}
		writes, takeovers = writes+h.writes, takeovers+h.takeovers
		total, dups := requireNoGapsIn(t, logs, "soak-shards", orgs[i])
		counts.entries, counts.dups = counts.entries+total, counts.dups+dups
	}
	violations = append(violations, overlaps...)
	t.Logf("shard soak %s: kills %d, pauses %d, graceful restarts %d; %d checkpoint writes over %d documents, %d takeovers, lost acks injected %d; %d samples, %d with a shard led twice; balanced 1/1/2 %s after the last disruption settled; %d entries stored, %d duplicates, 0 gaps",
		dur, counts.kills, counts.pauses, counts.terms, writes, len(orgs), takeovers, counts.lostAcks, samples, len(overlaps), final.Round(time.Millisecond), counts.entries, counts.dups)
	for _, v := range violations {
		t.Error(v)
	}
	t.Logf("%d invariant violations", len(violations))
	if takeovers == 0 || writes < 10 {
		t.Errorf("the shard soak exercised too little: %d takeovers, %d writes", takeovers, writes)
	}
}
