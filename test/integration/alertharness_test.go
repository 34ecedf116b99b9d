package integration

import (
	"bytes"
	"cmp"
	"fmt"
	"io"
	"maps"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"text/template"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"gopkg.in/yaml.v3"

	"github.com/sf2loki/sf2loki/internal/testenv"
)

// The alert harness: a scraper records what Prometheus would store from
// real replicas' /metrics, and the recording becomes a promtool unit test
// of the shipped rules (deploy/prometheus/sf2loki-rules.yaml), so an alert
// is judged on the series a real process exports, as it exports them
// (a counter created at its first event, a frozen process's failed
// scrapes, a restarted process's reset).

// promJob is the job label of every scraped series.
const promJob = "sf2loki"

// scrapeEvery is the real time between two scrape rounds; each round is
// one sample of the recording, whatever time it really took.
const scrapeEvery = 250 * time.Millisecond

// promRules is a rules file as the harness reads it.
type promRules struct {
	path string
	// series are the sf2loki_* names the expressions read (histograms as
	// their _bucket, _sum or _count series).
	series map[string]bool
	alerts map[string]promRule
}

type promRule struct {
	Alert       string            `yaml:"alert"`
	Record      string            `yaml:"record"`
	Expr        string            `yaml:"expr"`
	Labels      map[string]string `yaml:"labels"`
	Annotations map[string]string `yaml:"annotations"`
}

var (
	seriesNameRE = regexp.MustCompile(`sf2loki_[a-z_]+`)
	rangeRE      = regexp.MustCompile(`\[([0-9]+[smhdwy])\]`)
)

// loadPromRules reads the shipped rules file.
func loadPromRules(t testing.TB) promRules {
	t.Helper()
	return readPromRules(t, filepath.Join(testenv.RepoRoot(t), "deploy", "prometheus", "sf2loki-rules.yaml"))
}

// readPromRules reads a rules file.
func readPromRules(t testing.TB, path string) promRules {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Groups []struct {
			Rules []promRule `yaml:"rules"`
		} `yaml:"groups"`
	}
	if err := yaml.Unmarshal(data, &doc); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	r := promRules{path: path, series: map[string]bool{}, alerts: map[string]promRule{}}
	for _, g := range doc.Groups {
		for _, rule := range g.Rules {
			for _, n := range seriesNameRE.FindAllString(rule.Expr, -1) {
				r.series[n] = true
			}
			if rule.Alert != "" {
				r.alerts[rule.Alert] = rule
			}
		}
	}
	if len(r.series) == 0 || len(r.alerts) == 0 {
		t.Fatalf("%s: no series or no alerts read", path)
	}
	return r
}

// rule returns an alerting rule by name.
func (r promRules) rule(t testing.TB, alert string) promRule {
	t.Helper()
	rule, ok := r.alerts[alert]
	if !ok {
		t.Fatalf("%s has no alert %s", r.path, alert)
	}
	return rule
}

// window returns the shortest range an alert's expression reads (0 when
// it reads none).
func (r promRules) window(t testing.TB, alert string) time.Duration {
	t.Helper()
	var w time.Duration
	for _, m := range rangeRE.FindAllStringSubmatch(r.rule(t, alert).Expr, -1) {
		d, err := model.ParseDuration(m[1])
		if err != nil {
			t.Fatalf("%s: range %s: %v", alert, m[1], err)
		}
		if w == 0 || time.Duration(d) < w {
			w = time.Duration(d)
		}
	}
	return w
}

// promExpAlert is one exp_alerts entry.
type promExpAlert struct {
	Labels      map[string]string `yaml:"exp_labels"`
	Annotations map[string]string `yaml:"exp_annotations"`
}

// expect renders the alert Prometheus would fire for an expression result
// with labels: those labels plus the rule's own, and the rule's
// annotations expanded with them (as the rule manager does: the same
// variables, missing labels empty).
func (r promRules) expect(t testing.TB, alert string, labels map[string]string) promExpAlert {
	t.Helper()
	rule := r.rule(t, alert)
	out := promExpAlert{Labels: maps.Clone(labels), Annotations: map[string]string{}}
	if out.Labels == nil {
		out.Labels = map[string]string{}
	}
	maps.Copy(out.Labels, rule.Labels)
	data := struct {
		Labels         map[string]string
		ExternalLabels map[string]string
		ExternalURL    string
		Value          float64
	}{Labels: labels, ExternalLabels: map[string]string{}}
	if data.Labels == nil {
		data.Labels = map[string]string{}
	}
	for k, text := range rule.Annotations {
		if strings.Contains(text, "$value") || strings.Contains(text, ".Value") {
			t.Fatalf("%s's annotation %s reads the value: the harness cannot predict it", alert, k)
		}
		tmpl, err := template.New(alert + "." + k).Option("missingkey=zero").
			Parse("{{$labels := .Labels}}{{$externalLabels := .ExternalLabels}}{{$value := .Value}}" + text)
		if err != nil {
			t.Fatalf("%s's annotation %s: %v", alert, k, err)
		}
		var b strings.Builder
		if err := tmpl.Execute(&b, data); err != nil {
			t.Fatalf("%s's annotation %s: %v", alert, k, err)
		}
		out.Annotations[k] = b.String()
	}
	return out
}

// scrapeRound is one round of scrapes: every series the targets answered,
// named with job and instance as Prometheus stores them.
type scrapeRound struct {
	at, end time.Time // when the round began, and when its last scrape ended
	series  map[string]float64
}

// scraper scrapes every target each scrapeEvery, as Prometheus would with
// a fixed target per replica name: a replica restarted under its name is
// the same instance.
type scraper struct {
	keep   map[string]bool
	client *http.Client

	mu      sync.Mutex
	targets map[string]*daemon
	rounds  []scrapeRound
	errs    []string // the first failed scrapes, for the log
	stop    chan struct{}
	done    chan struct{}
	stopped bool
}

func startScraper(t testing.TB, rules promRules) *scraper {
	t.Helper()
	s := &scraper{keep: rules.series, client: &http.Client{Timeout: 700 * time.Millisecond},
		targets: map[string]*daemon{}, stop: make(chan struct{}), done: make(chan struct{})}
	go s.run()
	t.Cleanup(func() { s.finish() })
	return s
}

// target makes d the process scraped as instance d.name.
func (s *scraper) target(d *daemon) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.targets[d.name] = d
}

func (s *scraper) run() {
	defer close(s.done)
	tick := time.NewTicker(scrapeEvery)
	defer tick.Stop()
	for {
		select {
		case <-s.stop:
			return
		case <-tick.C:
		}
		s.mu.Lock()
		targets := maps.Clone(s.targets)
		s.mu.Unlock()
		if len(targets) == 0 {
			continue // Prometheus has nothing to scrape yet: no sample
		}
		r := scrapeRound{at: time.Now(), series: map[string]float64{}}
		var mu sync.Mutex
		var wg sync.WaitGroup
		for name, d := range targets {
			wg.Go(func() {
				got, err := s.scrape(d)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					s.mu.Lock()
					if len(s.errs) < 20 {
						s.errs = append(s.errs, fmt.Sprintf("%s %s: %v", time.Now().Format("15:04:05.000"), name, err))
					}
					s.mu.Unlock()
					return
				}
				maps.Copy(r.series, got)
			})
		}
		wg.Wait()
		r.end = time.Now()
		s.mu.Lock()
		s.rounds = append(s.rounds, r)
		s.mu.Unlock()
	}
}

// scrape reads one target's /metrics: a failed scrape returns nothing
// (Prometheus marks the target's series stale).
func (s *scraper) scrape(d *daemon) (map[string]float64, error) {
	req, err := http.NewRequest(http.MethodGet, "http://"+d.addr+"/metrics", nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("Accept", "text/plain;version=0.0.4")
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := s.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("/metrics answered %s", resp.Status)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return parseExposition(bytes.NewReader(body), s.keep, d.name)
}

// parseExposition reads a text exposition and returns the series whose
// names keep holds, with the target labels job and instance added (an
// exposed label of either name is kept as exported_<name>, as Prometheus
// does without honor_labels).
func parseExposition(r io.Reader, keep map[string]bool, instance string) (map[string]float64, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	add := func(name string, labels map[string]string, v float64) {
		if !keep[name] {
			return
		}
		all := map[string]string{}
		for k, val := range labels {
			if k == "job" || k == "instance" {
				k = "exported_" + k
			}
			all[k] = val
		}
		all["job"], all["instance"] = promJob, instance
		out[seriesString(name, all)] = v
	}
	for name, mf := range fams {
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, lp := range m.GetLabel() {
				labels[lp.GetName()] = lp.GetValue()
			}
			switch {
			case m.GetCounter() != nil:
				add(name, labels, m.GetCounter().GetValue())
			case m.GetGauge() != nil:
				add(name, labels, m.GetGauge().GetValue())
			case m.GetUntyped() != nil:
				add(name, labels, m.GetUntyped().GetValue())
			case m.GetHistogram() != nil:
				h := m.GetHistogram()
				inf := false
				for _, b := range h.GetBucket() {
					l := maps.Clone(labels)
					l["le"] = formatLe(b.GetUpperBound())
					inf = inf || l["le"] == "+Inf"
					add(name+"_bucket", l, float64(b.GetCumulativeCount()))
				}
				if !inf {
					l := maps.Clone(labels)
					l["le"] = "+Inf"
					add(name+"_bucket", l, float64(h.GetSampleCount()))
				}
				add(name+"_sum", labels, h.GetSampleSum())
				add(name+"_count", labels, float64(h.GetSampleCount()))
			case m.GetSummary() != nil:
				sm := m.GetSummary()
				for _, q := range sm.GetQuantile() {
					l := maps.Clone(labels)
					l["quantile"] = formatLe(q.GetQuantile())
					add(name, l, q.GetValue())
				}
				add(name+"_sum", labels, sm.GetSampleSum())
				add(name+"_count", labels, float64(sm.GetSampleCount()))
			}
		}
	}
	return out, nil
}

func formatLe(v float64) string {
	return model.SampleValue(v).String()
}

// seriesString is a series in PromQL notation, labels sorted.
func seriesString(name string, labels map[string]string) string {
	var b strings.Builder
	b.WriteString(name)
	b.WriteByte('{')
	for i, k := range slices.Sorted(maps.Keys(labels)) {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(k)
		b.WriteByte('=')
		b.WriteString(strconv.Quote(labels[k]))
	}
	b.WriteByte('}')
	return b.String()
}

// count returns how many rounds are recorded.
func (s *scraper) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.rounds)
}

// waitRounds waits until n more rounds are recorded.
func (s *scraper) waitRounds(t testing.TB, n int) {
	t.Helper()
	want := s.count() + n
	deadline := time.Now().Add(time.Duration(n)*scrapeEvery + 30*time.Second)
	for s.count() < want {
		if time.Now().After(deadline) {
			t.Fatalf("the scraper recorded %d rounds, want %d", s.count(), want)
		}
		time.Sleep(scrapeEvery / 5)
	}
}

// finish stops scraping and returns the recording.
func (s *scraper) finish() []scrapeRound {
	s.mu.Lock()
	if !s.stopped {
		s.stopped = true
		close(s.stop)
	}
	s.mu.Unlock()
	<-s.done
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.rounds)
}

// failures returns the first failed scrapes (a frozen or stopped process).
func (s *scraper) failures() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.errs)
}

// lastRoundBefore returns the index of the last round that began before
// at (-1 when none did).
func lastRoundBefore(rounds []scrapeRound, at time.Time) int {
	i := -1
	for j, r := range rounds {
		if r.at.Before(at) {
			i = j
		}
	}
	return i
}

// promInputSeries is one input_series entry.
type promInputSeries struct {
	Series string `yaml:"series"`
	Values string `yaml:"values"`
}

// inputSeries turns the rounds into promtool's input series, sample k at
// k intervals: `_` where a series was not scraped, `stale` for the first
// round without it after one with it (a failed scrape, a stopped
// process, a series that vanished), as Prometheus records them. A
// wall-clock value (sf2loki_start_time_seconds) is moved to the virtual
// time line, round k of scrapeEvery at k intervals of iv.
func inputSeries(rounds []scrapeRound, iv time.Duration) []promInputSeries {
	names := map[string]bool{}
	for _, r := range rounds {
		for s := range r.series {
			names[s] = true
		}
	}
	var out []promInputSeries
	for _, name := range slices.Sorted(maps.Keys(names)) {
		vals := make([]string, len(rounds))
		present := false
		for i, r := range rounds {
			v, ok := r.series[name]
			switch {
			case ok && strings.HasPrefix(name, "sf2loki_start_time_seconds{") && len(rounds) > 0:
				real := v - float64(rounds[0].at.UnixNano())/1e9
				vals[i] = strconv.FormatFloat(math.Round(real/scrapeEvery.Seconds()*iv.Seconds()), 'f', -1, 64)
			case ok:
				vals[i] = strconv.FormatFloat(v, 'f', -1, 64)
			case present:
				vals[i] = "stale"
			default:
				vals[i] = "_"
			}
			present = ok
		}
		out = append(out, promInputSeries{Series: name, Values: strings.Join(vals, " ")})
	}
	return out
}

// alertCheck is one alert_rule_test: at the time of round, exactly the
// alerts want (expression labels; the harness adds the rule's labels and
// annotations) fire.
type alertCheck struct {
	round int
	alert string
	want  []map[string]string
}

type promAlertTest struct {
	EvalTime  string         `yaml:"eval_time"`
	Alertname string         `yaml:"alertname"`
	ExpAlerts []promExpAlert `yaml:"exp_alerts"`
}

type promTestGroup struct {
	Name           string            `yaml:"name"`
	Interval       string            `yaml:"interval"`
	InputSeries    []promInputSeries `yaml:"input_series"`
	AlertRuleTests []promAlertTest   `yaml:"alert_rule_test"`
}

type promTestFile struct {
	RuleFiles          []string        `yaml:"rule_files"`
	EvaluationInterval string          `yaml:"evaluation_interval"`
	Tests              []promTestGroup `yaml:"tests"`
}

// promInterval is the virtual scrape interval for n rounds checked on
// alerts: the whole recording fits in the shortest range the alerts
// read, so an event anywhere in it is inside the window at every check.
// At most 15s (a common scrape interval), whole seconds.
func promInterval(t testing.TB, rules promRules, n int, checks []alertCheck) time.Duration {
	t.Helper()
	iv := 15 * time.Second
	for _, c := range checks {
		if w := rules.window(t, c.alert); w > 0 {
			iv = min(iv, (w / time.Duration(n+2)).Truncate(time.Second))
		}
	}
	if iv < time.Second {
		t.Fatalf("%d rounds do not fit in the alerts' windows at 1s a round: record less", n)
	}
	return iv
}

func secs(d time.Duration) string { return fmt.Sprintf("%ds", int64(d/time.Second)) }

// promtoolTest writes the recording and checks as a promtool unit test
// and runs `promtool test rules` on it; it returns promtool's output, the
// file, and promtool's error (nil when every check passed).
func promtoolTest(t testing.TB, rules promRules, name string, rounds []scrapeRound, checks []alertCheck) (string, string, error) {
	t.Helper()
	if len(rounds) == 0 {
		t.Fatal("nothing was recorded")
	}
	iv := promInterval(t, rules, len(rounds), checks)
	group := promTestGroup{Name: name, Interval: secs(iv), InputSeries: inputSeries(rounds, iv)}
	for _, c := range checks {
		if c.round < 0 || c.round >= len(rounds) {
			t.Fatalf("check of %s at round %d: the recording has %d rounds", c.alert, c.round, len(rounds))
		}
		at := promAlertTest{EvalTime: secs(time.Duration(c.round) * iv), Alertname: c.alert, ExpAlerts: []promExpAlert{}}
		for _, w := range c.want {
			at.ExpAlerts = append(at.ExpAlerts, rules.expect(t, c.alert, w))
		}
		group.AlertRuleTests = append(group.AlertRuleTests, at)
	}
	file := promTestFile{RuleFiles: []string{rules.path}, EvaluationInterval: secs(iv), Tests: []promTestGroup{group}}
	data, err := yaml.Marshal(file)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "alerts.test.yaml")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(testenv.Binary(t, "promtool"), "test", "rules", path)
	out, err := cmd.CombinedOutput()
	return string(out), path, err
}

// checkAlerts runs the checks on the recording and fails the test with
// promtool's output when one does not hold; the generated file is then
// kept out of the temp dir (the message names it: rerun promtool on it)
// and its alert_rule_test part is in the message.
func checkAlerts(t testing.TB, rules promRules, name string, rounds []scrapeRound, checks []alertCheck) {
	t.Helper()
	out, path, err := promtoolTest(t, rules, name, rounds, checks)
	iv := promInterval(t, rules, len(rounds), checks)
	if err == nil {
		t.Logf("promtool: %d rounds at a virtual %s: every check holds:\n%s", len(rounds), iv, describeChecks(rules, checks, iv))
		return
	}
	kept := keepFile(t, path)
	var tests string
	if data, rerr := os.ReadFile(path); rerr == nil {
		if i := strings.Index(string(data), "alert_rule_test:"); i >= 0 {
			tests = string(data[i:])
		}
	}
	t.Errorf("promtool test rules %s: %v\n%s\nthe checks (%d rounds at a virtual %s):\n%s\nthe file's alert_rule_test (its input_series are the recording):\n%s",
		kept, err, out, len(rounds), iv, describeChecks(rules, checks, iv), tests)
}

// keepFile copies a generated file out of the test's temp dir, which is
// removed when the test ends, and returns its new path.
func keepFile(t testing.TB, path string) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sf2loki-alerts-")
	if err != nil {
		t.Logf("keeping %s: %v", path, err)
		return path
	}
	data, err := os.ReadFile(path)
	if err == nil {
		dst := filepath.Join(dir, filepath.Base(path))
		if err = os.WriteFile(dst, data, 0o600); err == nil {
			return dst
		}
	}
	t.Logf("keeping %s: %v", path, err)
	return path
}

func describeChecks(rules promRules, checks []alertCheck, iv time.Duration) string {
	var b strings.Builder
	for _, c := range checks {
		fmt.Fprintf(&b, "  at round %d (%s): %s fires for %v (rule: %s)\n", c.round, secs(time.Duration(c.round)*iv), c.alert, c.want,
			strings.Join(strings.Fields(rules.alerts[c.alert].Expr), " "))
	}
	return b.String()
}

// loggedEvent is one lease or checkpoint event a replica logged.
type loggedEvent struct {
	replica string
	at      time.Time
	event   string
	org     string // "" in the single-org form
}

var (
	eventRE = regexp.MustCompile(`(?:^| )event=(\S+)`)
	orgRE   = regexp.MustCompile(`(?:^| )org=(\S+)`)
)

// loggedEvents returns the events of the kinds given that ds logged.
func loggedEvents(ds []*daemon, kinds ...string) []loggedEvent {
	var out []loggedEvent
	for _, d := range ds {
		for line := range strings.Lines(d.out.String()) {
			if !strings.HasPrefix(line, "time=") {
				continue
			}
			m := eventRE.FindStringSubmatch(line)
			if m == nil || !slices.Contains(kinds, m[1]) {
				continue
			}
			ts, _, _ := strings.Cut(strings.TrimPrefix(line, "time="), " ")
			at, err := time.Parse(time.RFC3339Nano, ts)
			if err != nil {
				continue
			}
			e := loggedEvent{replica: d.name, at: at, event: m[1]}
			if o := orgRE.FindStringSubmatch(line); o != nil {
				e.org = o[1]
			}
			out = append(out, e)
		}
	}
	// By time; within a millisecond a release before what follows it.
	first := func(e loggedEvent) int {
		if e.event == "released" {
			return 0
		}
		return 1
	}
	slices.SortStableFunc(out, func(a, b loggedEvent) int { return cmp.Or(a.at.Compare(b.at), cmp.Compare(first(a), first(b))) })
	return out
}

// seen reports whether round i surely saw e (it began after e was
// logged, and the log line follows the counter's increment; its time is
// cut to the millisecond), or may have (e was logged while it ran).
func (e loggedEvent) seen(rounds []scrapeRound, i int) (surely, maybe bool) {
	if i < 0 {
		return false, false
	}
	r := rounds[i]
	surely = e.at.Add(time.Millisecond).Before(r.at)
	return surely, !surely && !e.at.After(r.end.Add(time.Millisecond))
}

// shardLabels returns the expression labels of a per-shard alert: job,
// and shard unless org is "" (the single-org form exports none).
func shardLabels(org string, extra ...string) map[string]string {
	l := map[string]string{"job": promJob}
	if org != "" {
		l["shard"] = org
	}
	for i := 0; i+1 < len(extra); i += 2 {
		l[extra[i]] = extra[i+1]
	}
	return l
}

// counterTotal sums a counter's series in a round whose labels include
// match.
func counterTotal(r scrapeRound, name string, match map[string]string) float64 {
	var sum float64
	for s, v := range r.series {
		if !strings.HasPrefix(s, name+"{") {
			continue
		}
		ok := true
		for k, want := range match {
			ok = ok && strings.Contains(s, k+"="+strconv.Quote(want))
		}
		if ok {
			sum += v
		}
	}
	return sum
}

// harnessRules are rules of the shipped file's shapes (copied, so the
// harness's own test does not change with the shipped rules): per-shard
// sums of increase() over counters, and annotations naming labels.
const harnessRules = `groups:
  - name: harness
    rules:
      - alert: Sf2lokiFenceClosed
        expr: sum by (job, shard) (increase(sf2loki_lease_transitions_total{transition="fenced"}[15m])) > 0
        labels: {severity: ticket}
        annotations:
          summary: 'sf2loki {{ $labels.job }} shard "{{ $labels.shard }}": a leader lost its fence'
          runbook_url: https://example.com/runbook#fence
      - alert: Sf2lokiCheckpointConflicts
        expr: sum by (job, shard, outcome) (increase(sf2loki_checkpoint_commits_total{outcome=~"conflict|fenced"}[15m])) > 0
        labels: {severity: ticket}
        annotations:
          summary: 'sf2loki {{ $labels.job }} shard "{{ $labels.shard }}": checkpoint commits {{ $labels.outcome }}'
      - alert: Sf2lokiSalesforceThrottled
        expr: sum by (job, shard, api) (increase(sf2loki_salesforce_throttled_total[30m])) > 0
        labels: {severity: ticket}
        annotations:
          summary: 'sf2loki {{ $labels.job }}: Salesforce answered REQUEST_LIMIT_EXCEEDED ({{ $labels.api }})'
      - alert: Sf2lokiLeaderChurn
        expr: sum by (job, shard) (increase(sf2loki_lease_transitions_total{transition="acquired"}[1h])) > 5
        labels: {severity: ticket}
        annotations:
          summary: 'sf2loki {{ $labels.job }} shard "{{ $labels.shard }}": leadership changed more than 5 times in an hour'
      - record: sf2loki:lag:p90
        expr: histogram_quantile(0.9, sum by (job, le) (rate(sf2loki_ingest_lag_seconds_bucket[15m])))
`

// TestAlertHarness checks the harness on hand-made recordings, against
// rules of the shipped file's shapes: a counter exported at 0 that steps
// to 1 fires Sf2lokiFenceClosed, across a frozen (unscraped) stretch, after
// a restart, and with the shard label; one created at its first event
// (absent, then 1) does not, as Prometheus's increase() counts no first
// step; a wrong or missing expectation fails promtool; conflicts, the
// throttle and leader churn fire with the labels and annotations the
// rules render. The parser reads what the daemon's exporter writes (a
// counter with _total, a histogram, otel scope labels) and keeps only
// the series the rules read.
func TestAlertHarness(t *testing.T) {
	path := filepath.Join(t.TempDir(), "rules.yaml")
	if err := os.WriteFile(path, []byte(harnessRules), 0o600); err != nil {
		t.Fatal(err)
	}
	rules := readPromRules(t, path)
	if got := rules.expect(t, "Sf2lokiFenceClosed", shardLabels("")); got.Annotations["summary"] != `sf2loki sf2loki shard "": a leader lost its fence` ||
		got.Labels["severity"] != "ticket" || got.Labels["job"] != promJob || len(got.Labels) != 2 {
		t.Fatalf("rendered %+v", got)
	}
	base := time.Now()
	page := func(lines ...string) string {
		return "# HELP sf2loki_lease_transitions_total Lease transitions by kind.\n# TYPE sf2loki_lease_transitions_total counter\n" +
			strings.Join(lines, "\n") + "\n"
	}
	// rec makes a recording of one instance from pages ("" is a failed
	// scrape).
	rec := func(pages ...string) []scrapeRound {
		var out []scrapeRound
		for i, p := range pages {
			at := base.Add(time.Duration(i) * scrapeEvery)
			r := scrapeRound{at: at, end: at, series: map[string]float64{}}
			if p != "" {
				got, err := parseExposition(strings.NewReader(p), rules.series, "a")
				if err != nil {
					t.Fatalf("page %d: %v\n%s", i, err, p)
				}
				r.series = got
			}
			out = append(out, r)
		}
		return out
	}
	repeat := func(n int, p string) []string { return slices.Repeat([]string{p}, n) }
	const scope = `otel_scope_name="sf2loki",otel_scope_schema_url="",otel_scope_version=""`
	fenced := func(v int, shard string) string {
		l := scope + `,transition="fenced"`
		if shard != "" {
			l += `,shard="` + shard + `"`
		}
		return fmt.Sprintf("sf2loki_lease_transitions_total{%s} %d", l, v)
	}
	acquired := fmt.Sprintf(`sf2loki_lease_transitions_total{%s,transition="acquired"} 1`, scope)

	t.Run("parser", func(t *testing.T) {
		got, err := parseExposition(strings.NewReader(page(fenced(2, "org-a"), acquired)+
			"# TYPE sf2loki_ingest_lag_seconds histogram\n"+
			`sf2loki_ingest_lag_seconds_bucket{source="synthetic",le="1"} 3`+"\n"+
			`sf2loki_ingest_lag_seconds_bucket{source="synthetic",le="+Inf"} 4`+"\n"+
			`sf2loki_ingest_lag_seconds_sum{source="synthetic"} 2.5`+"\n"+
			`sf2loki_ingest_lag_seconds_count{source="synthetic"} 4`+"\n"+
			// The rules read the buckets only; a series they do not read is left out.
			"# TYPE sf2loki_not_in_the_rules gauge\nsf2loki_not_in_the_rules 1\n"), rules.series, "r1")
		if err != nil {
			t.Fatal(err)
		}
		want := map[string]float64{
			`sf2loki_lease_transitions_total{instance="r1",job="sf2loki",otel_scope_name="sf2loki",otel_scope_schema_url="",otel_scope_version="",shard="org-a",transition="fenced"}`: 2,
			`sf2loki_lease_transitions_total{instance="r1",job="sf2loki",otel_scope_name="sf2loki",otel_scope_schema_url="",otel_scope_version="",transition="acquired"}`:             1,
			`sf2loki_ingest_lag_seconds_bucket{instance="r1",job="sf2loki",le="1",source="synthetic"}`:                                                                                3,
			`sf2loki_ingest_lag_seconds_bucket{instance="r1",job="sf2loki",le="+Inf",source="synthetic"}`:                                                                             4,
		}
		if !maps.Equal(got, want) {
			t.Fatalf("parsed\n%v\nwant\n%v", got, want)
		}
		in := inputSeries(rec(page(fenced(0, "")), "", page(fenced(0, "")), page(), "", page(fenced(1, "")), page(fenced(1, ""))), time.Second)
		if len(in) != 1 || in[0].Values != "0 stale 0 stale _ 1 1" {
			t.Fatalf("input series %v, want one series valued 0 stale 0 stale _ 1 1", in)
		}
	})

	fires := func(shard string) []map[string]string { return []map[string]string{shardLabels(shard)} }
	for _, tc := range []struct {
		name   string
		pages  []string
		checks []alertCheck
		pass   bool
	}{
		{"a counter from 0 fires", append(repeat(10, page(fenced(0, ""))), repeat(5, page(fenced(1, "")))...),
			[]alertCheck{{9, "Sf2lokiFenceClosed", nil}, {14, "Sf2lokiFenceClosed", fires("")}}, true},
		{"a counter from 0 fires across a frozen stretch, per shard", slices.Concat(repeat(10, page(fenced(0, "org-a"), fenced(0, "org-b"))),
			repeat(8, ""), repeat(5, page(fenced(1, "org-a"), fenced(1, "org-b")))),
			[]alertCheck{{22, "Sf2lokiFenceClosed", append(fires("org-a"), fires("org-b")...)}}, true},
		{"a counter from 0 fires after a restart", slices.Concat(repeat(5, page(fenced(0, ""))), repeat(3, ""), repeat(5, page(fenced(0, ""))), repeat(2, page(fenced(1, "")))),
			[]alertCheck{{12, "Sf2lokiFenceClosed", nil}, {14, "Sf2lokiFenceClosed", fires("")}}, true},
		// The failure the daemon change fixes: increase() cannot count the
		// step from nothing to 1.
		{"a counter created at its first event does not fire", append(repeat(10, page()), repeat(5, page(fenced(1, "")))...),
			[]alertCheck{{14, "Sf2lokiFenceClosed", nil}}, true},
		{"a counter created at its first event: expecting it to fire fails", append(repeat(10, page()), repeat(5, page(fenced(1, "")))...),
			[]alertCheck{{14, "Sf2lokiFenceClosed", fires("")}}, false},
		{"expecting an alert that does not fire fails", repeat(15, page(fenced(0, ""))),
			[]alertCheck{{14, "Sf2lokiFenceClosed", fires("")}}, false},
		{"an alert that fires unexpected fails", append(repeat(10, page(fenced(0, ""))), repeat(5, page(fenced(1, "")))...),
			[]alertCheck{{14, "Sf2lokiFenceClosed", nil}}, false},
		{"the wrong shard fails", append(repeat(10, page(fenced(0, "org-a"))), repeat(5, page(fenced(1, "org-a")))...),
			[]alertCheck{{14, "Sf2lokiFenceClosed", fires("org-b")}}, false},
		{"checkpoint conflicts by outcome", slices.Concat(
			repeat(10, "# TYPE sf2loki_checkpoint_commits_total counter\n"+`sf2loki_checkpoint_commits_total{outcome="fenced",shard="org-a"} 0`+"\n"+`sf2loki_checkpoint_commits_total{outcome="conflict",shard="org-a"} 0`+"\n"),
			repeat(5, "# TYPE sf2loki_checkpoint_commits_total counter\n"+`sf2loki_checkpoint_commits_total{outcome="fenced",shard="org-a"} 2`+"\n"+`sf2loki_checkpoint_commits_total{outcome="conflict",shard="org-a"} 0`+"\n")),
			[]alertCheck{{14, "Sf2lokiCheckpointConflicts", []map[string]string{shardLabels("org-a", "outcome", "fenced")}}}, true},
		{"salesforce throttled by api", slices.Concat(
			repeat(10, "# TYPE sf2loki_salesforce_throttled_total counter\n"+`sf2loki_salesforce_throttled_total{api="query"} 0`+"\n"+`sf2loki_salesforce_throttled_total{api="rest"} 0`+"\n"),
			repeat(5, "# TYPE sf2loki_salesforce_throttled_total counter\n"+`sf2loki_salesforce_throttled_total{api="query"} 1`+"\n"+`sf2loki_salesforce_throttled_total{api="rest"} 0`+"\n")),
			[]alertCheck{{9, "Sf2lokiSalesforceThrottled", nil}, {14, "Sf2lokiSalesforceThrottled", []map[string]string{shardLabels("", "api", "query")}}}, true},
		{"leader churn: six acquisitions in the window fire", slices.Concat(
			repeat(5, page(`sf2loki_lease_transitions_total{transition="acquired"} 0`)),
			repeat(5, page(`sf2loki_lease_transitions_total{transition="acquired"} 3`)),
			repeat(5, page(`sf2loki_lease_transitions_total{transition="acquired"} 6`))),
			[]alertCheck{{14, "Sf2lokiLeaderChurn", fires("")}}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, path, err := promtoolTest(t, rules, tc.name, rec(tc.pages...), tc.checks)
			switch {
			case tc.pass && err != nil:
				t.Fatalf("promtool failed (%v) on %s:\n%s", err, keepFile(t, path), out)
			case !tc.pass && err == nil:
				t.Fatalf("promtool passed, want a failure:\n%s", out)
			case !tc.pass && !strings.Contains(out, "alertname: "+tc.checks[len(tc.checks)-1].alert):
				t.Fatalf("promtool failed (%v) without naming the alert:\n%s", err, out)
			}
			t.Logf("promtool: %s", strings.TrimSpace(out))
		})
	}
}
