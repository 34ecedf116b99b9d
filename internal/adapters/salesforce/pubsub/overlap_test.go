package pubsub_test

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/clock"
	"github.com/sf2loki/sf2loki/internal/adapters/salesforce"
	"github.com/sf2loki/sf2loki/internal/adapters/salesforce/pubsub"
	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/sfrules"
	"github.com/sf2loki/sf2loki/internal/testenv/fakepubsub"
	"github.com/sf2loki/sf2loki/internal/testenv/fakesf"
)

// logBuffer is a log both sources write to.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// overlapOrg is one org seen by both "*" sources: Pub/Sub lists
// LoginEventStream and ApiEventStream (and later LogoutEventStream);
// EventLogFile holds Login, API, Logout and ReportExport files.
type overlapOrg struct {
	ps    *env
	elf   *salesforce.ELFSource
	files *fakesf.ELFOrg
	web   *httptest.Server // serves files
	log   *logBuffer
}

const logoutTopic = "/event/LogoutEventStream"

func newOverlapOrg(t *testing.T, owners *domain.Owners, failListings int) *overlapOrg {
	t.Helper()
	o := &overlapOrg{log: &logBuffer{}, files: &fakesf.ELFOrg{}}
	log := slog.New(slog.NewTextHandler(o.log, nil))
	o.ps = newEnvLog(t, pubsub.Spec{Topics: []string{"*"}, ReplayPreset: pubsub.Earliest, RediscoveryInterval: 50 * time.Millisecond, Owners: owners},
		func(s *fakepubsub.Server) {
			s.AddTopic("/event/ApiEventStream", fakepubsub.LoginEventStreamSchema)
			s.AddTopic(logoutTopic, fakepubsub.LoginEventStreamSchema)
		}, log)
	o.ps.org.SObjects = []string{"Account", "LoginEventStream", "ApiEventStream"}
	o.ps.org.Unavailable = failListings
	o.ps.srv.Append(fakepubsub.LoginTopic, loginEvents(0, 3)...)
	o.ps.srv.Append("/event/ApiEventStream", loginEvents(100, 102)...)
	o.ps.srv.Append(logoutTopic, loginEvents(200, 201)...)

	now := time.Now()
	for i, typ := range []string{"Login", "API", "Logout", "ReportExport"} {
		o.files.Add(fmt.Sprintf("0AT%d", i), typ, now.Add(-2*time.Hour),
			fmt.Sprintf("EVENT_TYPE,TIMESTAMP_DERIVED,REQUEST_ID\n%s,%s,%s-1\n%s,%s,%s-2\n", typ, now.Add(-3*time.Hour).UTC().Format("2006-01-02T15:04:05.000Z"), typ,
				typ, now.Add(-3*time.Hour).UTC().Format("2006-01-02T15:04:05.000Z"), typ))
	}
	o.web = httptest.NewServer(o.files)
	t.Cleanup(o.web.Close)
	a, err := salesforce.New(salesforce.Config{AuthMode: sfrules.ClientCredentials, LoginURL: o.web.URL, ClientID: "ck", ClientSecret: "x"})
	if err != nil {
		t.Fatal(err)
	}
	o.elf, err = salesforce.NewELFSource(a, "60.0", salesforce.ELFSpec{Interval: "Hourly", EventTypes: []string{"*"}, PollInterval: 20 * time.Millisecond,
		Owners: owners}, clock.New(), log)
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// ingested counts the rows of each source by event type.
func ingested(es []ports.Entry) map[string]int {
	out := map[string]int{}
	for _, e := range es {
		if !e.CheckpointOnly {
			out[e.Labels["source"]+" "+e.Labels["event_type"]]++
		}
	}
	return out
}

// run starts EventLogFile, then (once start says so) Pub/Sub, and stops
// once every expected row is in and a few more polls found nothing else.
func (o *overlapOrg) run(t *testing.T, start func() bool, want map[string]int) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	s := &sink{}
	var wg sync.WaitGroup
	wg.Go(func() { _ = o.elf.Run(ctx, func(string) (string, bool) { return "", false }, s.emit) })
	for !start() {
		if ctx.Err() != nil {
			t.Fatalf("Pub/Sub never started; log:\n%s", o.log)
		}
		time.Sleep(5 * time.Millisecond)
	}
	wg.Go(func() { _ = o.ps.src.Run(ctx, func(string) (string, bool) { return "", false }, s.emit) })
	has := func() bool {
		got := ingested(s.snapshot())
		for k, n := range want {
			if got[k] < n {
				return false
			}
		}
		return true
	}
	for !has() {
		if ctx.Err() != nil {
			t.Fatalf("rows %v, want %v; log:\n%s", ingested(s.snapshot()), want, o.log)
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Rediscovery: a stream for a category EventLogFile already took.
	o.ps.org.SetSObjects("Account", "LoginEventStream", "ApiEventStream", "LogoutEventStream")
	for !strings.Contains(o.log.String(), "pubsub: skipping discovered topic "+logoutTopic) {
		if ctx.Err() != nil {
			t.Fatalf("no rediscovery; log:\n%s", o.log)
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond) // a few polls and listings more
	cancel()
	wg.Wait()
	return ingested(s.snapshot())
}

// exactlyOnce is each category by exactly one source: the streams by
// Pub/Sub (it lists them first), the rest by EventLogFile, and Logout by
// EventLogFile even once its stream is listed.
var exactlyOnce = map[string]int{
	"pubsub LoginEventStream": 3, "pubsub ApiEventStream": 2,
	"eventlogfile Logout": 2, "eventlogfile ReportExport": 2,
}

func (o *overlapOrg) check(t *testing.T, got map[string]int) {
	t.Helper()
	if fmt.Sprint(got) != fmt.Sprint(exactlyOnce) {
		t.Fatalf("rows by source and type %v, want %v; log:\n%s", got, exactlyOnce, o.log)
	}
	if slices.ContainsFunc(o.ps.srv.Subscriptions(), func(s fakepubsub.Subscription) bool { return s.Topic == logoutTopic }) {
		t.Fatal("subscribed to /event/LogoutEventStream, whose category EventLogFile ingests")
	}
	o.web.Close() // no request left in flight
	for _, q := range o.files.Queries {
		if strings.Contains(q, "EventType = 'Login'") || strings.Contains(q, "EventType = 'API'") {
			t.Fatalf("EventLogFile listed a type Pub/Sub ingests: %s", q)
		}
	}
	log := o.log.String()
	for _, line := range []string{
		"eventlogfile: skipping discovered type Login: category login is ingested by sources.pubsub (/event/LoginEventStream)",
		"eventlogfile: skipping discovered type API: category api is ingested by sources.pubsub (/event/ApiEventStream)",
		"pubsub: skipping discovered topic /event/LogoutEventStream: category logout is ingested by sources.eventlogfile (Logout)",
		"eventlogfile: discovered type ReportExport: category reportexport is ingested here",
	} {
		if n := strings.Count(log, line); n != 1 {
			t.Errorf("%q logged %d times, want once", line, n)
		}
	}
}

func TestTwoWildcardsIngestEachCategoryOnce(t *testing.T) {
	o := newOverlapOrg(t, domain.NewOwners(domain.SourcePubSub, domain.SourceEventLogFile), 0)
	// EventLogFile's discovery starts first, and waits for the Pub/Sub
	// listing.
	got := o.run(t, func() bool { return strings.Contains(o.log.String(), "eventlogfile: waiting for the first") }, exactlyOnce)
	o.check(t, got)
}

func TestAFailingPubSubListingHoldsTheEventLogFileDiscoveryAndSaysWhy(t *testing.T) {
	// describeGlobal fails 4 times (one minute apart in production; 50ms
	// here), then answers.
	o := newOverlapOrg(t, domain.NewOwners(domain.SourcePubSub, domain.SourceEventLogFile), 4)
	got := o.run(t, func() bool { return true }, exactlyOnce)
	o.check(t, got)
	log := o.log.String()
	warn := strings.Index(log, "eventlogfile: still waiting for the first \\\"*\\\" listing of sources.pubsub")
	if warn < 0 || !strings.Contains(log[warn:], "describeGlobal") || !strings.Contains(log[warn:], "503") {
		t.Fatalf("no warning naming the failed listing; log:\n%s", log)
	}
	if claim := strings.Index(log, "pubsub: discovered topic /event/LoginEventStream"); claim < warn {
		t.Fatalf("the listing was claimed before the failure was reported; log:\n%s", log)
	}
}
