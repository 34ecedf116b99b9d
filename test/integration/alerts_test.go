package integration

import (
	"cmp"
	"fmt"
	"maps"
	"net/http/httptest"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/internal/testenv/fakesf"
)

// TestShippedAlertsOnRealScrapes runs real sf2loki processes, scrapes
// every replica's /metrics as Prometheus would (alertharness_test.go) and
// checks with promtool that the shipped rules fire on what they export:
//
//   - fence: a leader frozen (SIGSTOP) past its fence and resumed fires
//     Sf2lokiFenceClosed for each shard it lost that way, and
//     Sf2lokiCheckpointConflicts for each shard and outcome of the commits
//     the fence refused (or a compare-and-swap lost), single-org (no shard
//     label) and with two orgs (shard = the org);
//   - throttled: a REQUEST_LIMIT_EXCEEDED answer fires
//     Sf2lokiSalesforceThrottled with the api that met it (and the shard
//     of the org that answered, with two orgs);
//   - planned moves: a shard handed back and forth many times, every move
//     a graceful hand-off (a join, a rebalance, a SIGTERM), does not fire
//     Sf2lokiLeaderChurn.
//
// What each alert must fire on is read from what the daemons logged
// (event=fenced, commit_fenced, conflict, acquired, released, and the
// throttle WARN) and cross-checked with the scraped counters, so a
// counter that only appears at its first event (which increase() cannot
// count) fails here.
func TestShippedAlertsOnRealScrapes(t *testing.T) {
	testenv.Long(t, "the shipped alerts on real processes")
	rules := loadPromRules(t)
	testenv.Binary(t, "promtool")
	logs := testenv.StartLogs(t)
	modes := []struct {
		name string
		orgs []string // none: the single-org form
	}{{"single org", nil}, {"two orgs", []string{"org-a", "org-b"}}}
	for _, m := range modes {
		t.Run("fence/"+m.name, func(t *testing.T) { alertsOnAFrozenLeader(t, rules, logs, m.orgs) })
	}
	for _, m := range modes {
		t.Run("throttled/"+m.name, func(t *testing.T) { alertsOnThrottling(t, rules, logs, m.orgs) })
	}
	t.Run("planned moves", func(t *testing.T) { alertsOnPlannedMoves(t, rules, logs) })
}

// syntheticOrgs is the sources part of a config: the synthetic source at
// rate, in the single-org form or once per org.
func syntheticOrgs(orgs []string, rate int) string {
	if len(orgs) == 0 {
		return fmt.Sprintf("sources:\n  synthetic: {rate: %d}\n", rate)
	}
	var b strings.Builder
	b.WriteString("orgs:\n")
	for _, o := range orgs {
		fmt.Fprintf(&b, "  - {name: %s, sources: {synthetic: {rate: %d}}}\n", o, rate)
	}
	return b.String()
}

// eventsSeen returns the events round i surely saw, and those it may or
// may not have seen (logged while it ran).
func eventsSeen(events []loggedEvent, rounds []scrapeRound, i int) (seen, unsure []loggedEvent) {
	for _, e := range events {
		switch surely, maybe := e.seen(rounds, i); {
		case surely:
			seen = append(seen, e)
		case maybe:
			unsure = append(unsure, e)
		}
	}
	return seen, unsure
}

// eventsInRecording returns the events the last round surely saw, and
// fails the test for one logged while it ran (the harness cannot tell
// whether it was scraped; the scenarios wait for quiet before they stop
// scraping, so it does not happen).
func eventsInRecording(t *testing.T, events []loggedEvent, rounds []scrapeRound) []loggedEvent {
	t.Helper()
	seen, unsure := eventsSeen(events, rounds, len(rounds)-1)
	for _, e := range unsure {
		t.Fatalf("%s logged %s at %s, during the last scrape round (%s to %s): the harness cannot tell whether it was scraped",
			e.replica, e.event, e.at.Format("15:04:05.000"), rounds[len(rounds)-1].at.Format("15:04:05.000"), rounds[len(rounds)-1].end.Format("15:04:05.000"))
	}
	return seen
}

// alertsOnAFrozenLeader freezes the leader of everything past its fence
// (as TestAFrozenLeaderPushesNothingAfterItsFence), lets the other replica
// take over, resumes it and checks Sf2lokiFenceClosed and
// Sf2lokiCheckpointConflicts: silent before the freeze, firing after the
// resumption for every shard (and outcome) the replicas logged.
func alertsOnAFrozenLeader(t *testing.T, rules promRules, logs *testenv.LogsServer, orgs []string) {
	began := time.Now()
	b := fileBackend(t, ttl, renew)
	sink := fmt.Sprintf("sink:\n  loki: {url: %s, labels: {job: alerts-fence}, batch: {max_wait: 100ms}}\n", logs.PushURL)
	c := newCluster(t, b, func(string) string { return sink + syntheticOrgs(orgs, 100) })
	leadsAll := func(limit time.Duration) time.Duration {
		t.Helper()
		if orgs != nil {
			return untilBalanced(t, c, limit, len(orgs))
		}
		from := time.Now()
		for time.Since(from) < limit {
			for _, d := range c.live() {
				if st, err := d.statusz(client); err == nil && st.Role == "leader" {
					return time.Since(from)
				}
			}
			time.Sleep(100 * time.Millisecond)
		}
		t.Fatalf("no leader after %s", limit)
		return 0
	}
	sc := startScraper(t, rules)
	a := c.start("a")
	sc.target(a)
	leadsAll(10 * ttl)
	sc.waitRounds(t, 12) // the counters as a healthy leader exports them
	frozen := time.Now()
	b.freeze(t, a)
	standby := c.start("b")
	sc.target(standby)
	took := leadsAll(15 * ttl) // a bound, not a measure: a busy machine slows the take-over
	time.Sleep(renew)
	resumed := time.Now()
	a.signal(t, syscall.SIGCONT)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, ok := a.logTime(frozen, "event=fenced"); ok {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a logged no event=fenced within 30s of its resumption:\n%s", tail(a.out.String(), 30))
		}
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(3 * renew) // the commits the fence refuses
	sc.waitRounds(t, 16)
	rounds := sc.finish()
	t.Logf("a frozen at %s, b led everything %s later, a resumed at %s; %d scrape rounds over %s; failed scrapes: %v",
		frozen.Format("15:04:05.000"), took.Round(time.Millisecond), resumed.Format("15:04:05.000"), len(rounds),
		rounds[len(rounds)-1].at.Sub(rounds[0].at).Round(time.Millisecond), sc.failures())
	for _, d := range c.live() {
		d.signal(t, syscall.SIGTERM)
		d.waitExit(t, 30*time.Second)
	}
	c.unexpectedExits(t)

	last := len(rounds) - 1
	events := eventsInRecording(t, loggedEvents(c.all, "fenced", "commit_fenced", "conflict"), rounds)
	fencedShards := map[string]bool{}
	conflicts := map[[2]string]bool{} // shard, outcome
	count := map[string]int{}
	for _, e := range events {
		t.Logf("logged: %s %s %s org=%q", e.at.Format("15:04:05.000"), e.replica, e.event, e.org)
		count[e.event]++
		switch e.event {
		case "fenced":
			fencedShards[e.org] = true
		case "commit_fenced":
			conflicts[[2]string{e.org, "fenced"}] = true
		case "conflict":
			conflicts[[2]string{e.org, "conflict"}] = true
		}
	}
	// The run did what the alerts are about: a lost its fence on every
	// shard it led, and the logs agree with the counters scraped last.
	want := []string{""}
	if orgs != nil {
		want = orgs
	}
	if got := slices.Sorted(maps.Keys(fencedShards)); !slices.Equal(got, want) {
		t.Fatalf("event=fenced logged for shards %q, want %q (every shard a led)", got, want)
	}
	final := rounds[last]
	for kind, series := range map[string][2]string{
		"fenced":        {"sf2loki_lease_transitions_total", "transition"},
		"commit_fenced": {"sf2loki_checkpoint_commits_total", "outcome"},
		"conflict":      {"sf2loki_checkpoint_commits_total", "outcome"},
	} {
		value := strings.TrimPrefix(kind, "commit_")
		if got := counterTotal(final, series[0], map[string]string{series[1]: value}); got != float64(count[kind]) {
			t.Errorf("the last scrape sums %s{%s=%q} to %v; the replicas logged %d event=%s", series[0], series[1], value, got, count[kind], kind)
		}
	}

	var fence, commits []map[string]string
	for _, s := range slices.Sorted(maps.Keys(fencedShards)) {
		fence = append(fence, shardLabels(s))
	}
	for _, k := range slices.SortedFunc(maps.Keys(conflicts), func(x, y [2]string) int { return cmp.Or(cmp.Compare(x[0], y[0]), cmp.Compare(x[1], y[1])) }) {
		commits = append(commits, shardLabels(k[0], "outcome", k[1]))
	}
	if len(commits) == 0 {
		t.Logf("no commit was refused or lost (no event=commit_fenced or conflict): Sf2lokiCheckpointConflicts must stay silent")
	}
	checks := []alertCheck{
		{last, "Sf2lokiFenceClosed", fence},
		{last, "Sf2lokiCheckpointConflicts", commits},
	}
	// Before the freeze nothing was fenced: both silent (unless a busy
	// machine made a healthy leader miss its fence: then there is nothing
	// to say before the freeze).
	if before := lastRoundBefore(rounds, frozen); before >= 0 {
		if seen, unsure := eventsSeen(events, rounds, before); len(seen)+len(unsure) > 0 {
			t.Logf("events before the freeze (%v %v): no check of the silence before it", seen, unsure)
		} else {
			checks = append(checks, alertCheck{before, "Sf2lokiFenceClosed", nil}, alertCheck{before, "Sf2lokiCheckpointConflicts", nil})
		}
	}
	checkAlerts(t, rules, t.Name(), rounds, checks)
	t.Logf("took %s", time.Since(began).Round(time.Millisecond))
}

var apiRE = regexp.MustCompile(`[{,]api=("(?:[^"\\]|\\.)*")`)

// alertsOnThrottling runs one replica polling the Apex debug logs of one
// org (or two, each its own fake org) every 10s; once the scrapes show the
// steady state, the org (with two, the second) answers the next request
// REQUEST_LIMIT_EXCEEDED. Sf2lokiSalesforceThrottled is silent before and
// fires after, with the api that met the limit and the org's shard.
func alertsOnThrottling(t *testing.T, rules promRules, logs *testenv.LogsServer, orgs []string) {
	began := time.Now()
	names := orgs
	if names == nil {
		names = []string{""}
	}
	fakes := map[string]*fakesf.ApexOrg{}
	conn := map[string]string{}
	base := time.Now().Add(-20 * time.Minute).UTC().Truncate(time.Second)
	for i, n := range names {
		org := &fakesf.ApexOrg{}
		for j := range 3 {
			org.Add(fakesf.ApexLog{ID: fmt.Sprintf("07L%02d000000000%dAAA", i, j), Username: "integration@acme.com",
				Start: base.Add(time.Duration(j) * time.Second), Body: fmt.Sprintf("60.0 APEX_CODE,FINEST\n%s (1)|USER_DEBUG|[1]|DEBUG|log %d\n", base.Format("15:04:05.0"), j)})
		}
		srv := httptest.NewServer(org)
		t.Cleanup(srv.Close)
		fakes[n] = org
		conn[n] = fmt.Sprintf("salesforce: {auth_mode: client_credentials, login_url: %q, client_id: ck, client_secret: s3cret, limits: {enabled: false}}\n"+
			"sources: {apexlog: {enabled: true, poll_interval: 10s, users: [integration@acme.com]}}\n", srv.URL)
	}
	cfg := fmt.Sprintf("state: {file: {path: %s/state.json}}\nsink: {loki: {url: %s, labels: {job: alerts-throttled}}}\n", t.TempDir(), logs.PushURL)
	if orgs == nil {
		cfg += conn[""]
	} else {
		cfg += "orgs:\n"
		for _, n := range orgs {
			cfg += "  - name: " + n + "\n" + indent(conn[n], "    ")
		}
	}
	throttled := names[len(names)-1]
	sc := startScraper(t, rules)
	d := start(t, "r1", cfg)
	sc.target(d)
	deadline := time.Now().Add(30 * time.Second)
	for _, n := range names {
		for len(fakes[n].QueriesSoFar()) == 0 {
			if d.exited() || time.Now().After(deadline) {
				t.Fatalf("org %q was not polled within 30s (exited: %v):\n%s", n, d.exited(), tail(d.out.String(), 30))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	sc.waitRounds(t, 8)
	throttleAt := time.Now()
	fakes[throttled].SetThrottle(1)
	const warn = "salesforce API limit reached (REQUEST_LIMIT_EXCEEDED)"
	deadline = time.Now().Add(40 * time.Second)
	for !strings.Contains(d.out.String(), warn) {
		if d.exited() || time.Now().After(deadline) {
			t.Fatalf("no %q logged within 40s of the throttle (exited: %v):\n%s", warn, d.exited(), tail(d.out.String(), 30))
		}
		time.Sleep(100 * time.Millisecond)
	}
	warnedAt, _ := d.logTime(throttleAt, warn)
	sc.waitRounds(t, 12)
	rounds := sc.finish()
	d.signal(t, syscall.SIGTERM)
	d.waitExit(t, 30*time.Second)
	line := lineWith(d.out.String(), warn)
	t.Logf("%d scrape rounds; log: %s", len(rounds), line)

	last := len(rounds) - 1
	if surely, _ := (loggedEvent{at: warnedAt}).seen(rounds, last); !surely {
		t.Fatalf("the throttle was logged at %s, during the last scrape round (%s)", warnedAt.Format("15:04:05.000"), rounds[last].at.Format("15:04:05.000"))
	}
	if n := strings.Count(d.out.String(), warn); n != 1 {
		t.Fatalf("%d throttle WARN lines, want 1 (one REQUEST_LIMIT_EXCEEDED answer)", n)
	}
	// The api label is the daemon's (query, logfile or rest, by the call
	// that met the limit): read it off the counter that moved.
	final := rounds[last]
	var apis []string
	for s, v := range final.series {
		if strings.HasPrefix(s, "sf2loki_salesforce_throttled_total{") && v > 0 {
			m := apiRE.FindStringSubmatch(s)
			if m == nil {
				t.Fatalf("%s = %v has no api label", s, v)
			}
			api, err := strconv.Unquote(m[1])
			if err != nil {
				t.Fatal(err)
			}
			apis = append(apis, api)
			t.Logf("scraped last: %s %v", s, v)
		}
	}
	if got := counterTotal(final, "sf2loki_salesforce_throttled_total", nil); got != 1 || len(apis) != 1 {
		t.Fatalf("the last scrape sums sf2loki_salesforce_throttled_total to %v over apis %v: want 1 (one REQUEST_LIMIT_EXCEEDED answer)", got, apis)
	}
	checks := []alertCheck{{last, "Sf2lokiSalesforceThrottled", []map[string]string{shardLabels(throttled, "api", apis[0])}}}
	if before := lastRoundBefore(rounds, throttleAt); before >= 0 {
		checks = append(checks, alertCheck{before, "Sf2lokiSalesforceThrottled", nil})
	}
	checkAlerts(t, rules, t.Name(), rounds, checks)
	t.Logf("took %s", time.Since(began).Round(time.Millisecond))
}

func indent(s, prefix string) string {
	var b strings.Builder
	for l := range strings.Lines(s) {
		b.WriteString(prefix + l)
	}
	return b.String()
}

// alertsOnPlannedMoves runs three replicas over two orgs on a file lease:
// r1 leads both; r2 and r3 take turns joining (r1 hands one shard off to
// the newcomer) and stopping (SIGTERM: it hands the shard back), so one
// shard moves twice a turn, every move planned. No Sf2lokiLeaderChurn.
func alertsOnPlannedMoves(t *testing.T, rules promRules, logs *testenv.LogsServer) {
	began := time.Now()
	const turns = 6
	orgs := []string{"org-a", "org-b"}
	b := fileBackend(t, ttl, renew)
	sink := fmt.Sprintf("sink:\n  loki: {url: %s, labels: {job: alerts-moves}, batch: {max_wait: 100ms}}\n", logs.PushURL)
	c := newCluster(t, b, func(string) string { return sink + syntheticOrgs(orgs, 20) })
	sc := startScraper(t, rules)
	r1 := c.start("r1")
	sc.target(r1)
	untilBalanced(t, c, 10*ttl, 2)
	for turn := range turns {
		d := c.start([]string{"r2", "r3"}[turn%2])
		sc.target(d)
		joined := untilBalanced(t, c, 10*ttl, 1, 1)
		l := leads(c)
		d.signal(t, syscall.SIGTERM)
		d.waitExit(t, 30*time.Second)
		left := untilBalanced(t, c, 4*ttl, 2)
		t.Logf("turn %d: %s joined, shards %v after %s; stopped, r1 led both again after %s",
			turn, d.name, l, joined.Round(time.Millisecond), left.Round(time.Millisecond))
	}
	sc.waitRounds(t, 8)
	rounds := sc.finish()
	r1.signal(t, syscall.SIGTERM)
	r1.waitExit(t, 30*time.Second)
	c.unexpectedExits(t)

	// Count the moves per shard from the logs, and check each was planned:
	// the shard's holder released it before the next replica acquired it,
	// and nothing was fenced or lost.
	last := len(rounds) - 1
	events := eventsInRecording(t, loggedEvents(c.all, "acquired", "released", "fenced", "lost"), rounds)
	moves := map[string]int{}
	holder := map[string]string{}
	for _, e := range events {
		switch e.event {
		case "acquired":
			if h, ok := holder[e.org]; ok {
				moves[e.org]++
				if h != "" {
					t.Errorf("%s: %s acquired %s at %s while %s held it unreleased: an unplanned move", t.Name(), e.replica, e.org, e.at.Format("15:04:05.000"), h)
				}
			}
			holder[e.org] = e.replica
		case "released":
			if holder[e.org] == e.replica {
				holder[e.org] = ""
			}
		default:
			t.Errorf("%s logged event=%s for %s at %s: not a planned move", e.replica, e.event, e.org, e.at.Format("15:04:05.000"))
		}
	}
	most := slices.MaxFunc(orgs, func(x, y string) int { return cmp.Compare(moves[x], moves[y]) })
	t.Logf("moves per shard: %v; %d scrape rounds", moves, len(rounds))
	if moves[most] < 7 {
		t.Fatalf("shard %s moved %d times, want at least 7: the run proves nothing about churn", most, moves[most])
	}
	checkAlerts(t, rules, t.Name(), rounds, []alertCheck{{last, "Sf2lokiLeaderChurn", nil}})
	t.Logf("took %s", time.Since(began).Round(time.Millisecond))
}
