package domain_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/ports/porttest"
)

func TestCategory(t *testing.T) {
	for _, c := range []struct {
		source, name string
		want         string // "" for a name that never overlaps
	}{
		// The same logins, three ways (and LoginHistory).
		{domain.SourcePubSub, "/event/LoginEventStream", "login"},
		{domain.SourceEventlogObjects, "LoginEvent", "login"},
		{domain.SourceEventLogFile, "Login", "login"},
		{domain.SourceEventlogObjects, "LoginHistory", "login"},
		// API calls.
		{domain.SourcePubSub, "/event/ApiEventStream", "api"},
		{domain.SourceEventlogObjects, "ApiEvent", "api"},
		{domain.SourceEventLogFile, "API", "api"},
		// Login-as: the ELF type, its label with a space, the stream.
		{domain.SourceEventLogFile, "LoginAs", "loginas"},
		{domain.SourceEventLogFile, "Login As", "loginas"},
		{domain.SourcePubSub, "/event/LoginAsEventStream", "loginas"},
		// Lightning URIs are their own category; URI is the classic one.
		{domain.SourcePubSub, "/event/LightningUriEventStream", "lightninguri"},
		{domain.SourceEventlogObjects, "LightningUriEvent", "lightninguri"},
		{domain.SourceEventLogFile, "LightningPageView", "lightningpageview"},
		{domain.SourceEventLogFile, "URI", "uri"},
		{domain.SourcePubSub, "/event/UriEventStream", "uri"},
		// Stored events and objects named like nothing else.
		{domain.SourceEventlogObjects, "BulkApiResultEventStore", "bulkapiresult"},
		{domain.SourceEventlogObjects, "SetupAuditTrail", "setupaudittrail"},
		{domain.SourceEventlogObjects, "Event", "event"}, // the calendar object: nothing left to cut
		// Never overlap: custom and namespaced names, CDC, "*", synthetic.
		{domain.SourcePubSub, "/event/Order_Shipped__e", ""},
		{domain.SourcePubSub, "/event/ns__Audit__e", ""},
		{domain.SourcePubSub, "/data/AccountChangeEvent", ""},
		{domain.SourcePubSub, "/data/Sales__chn", ""},
		{domain.SourceEventlogObjects, "Audit_Log__c", ""},
		{domain.SourceEventlogObjects, "Archive__b", ""},
		{domain.SourcePubSub, "*", ""},
		{domain.SourceEventLogFile, "*", ""},
		{domain.SourceSynthetic, "LoginEvent", ""},
	} {
		got, ok := domain.Category(c.source, c.name)
		if ok != (c.want != "") || got != c.want {
			t.Errorf("Category(%s, %q) = %q, %v; want %q", c.source, c.name, got, ok, c.want)
		}
	}
}

// SOQL object names are case-insensitive: any spelling of LoginEvent is
// the login category, its suffix cut whatever its case.
func TestCategoryIgnoresTheNamesCase(t *testing.T) {
	for _, name := range []string{"loginevent", "LOGINEVENT", "LoginEVENT", "LOGINHISTORY", "logineventlog"} {
		if got, _ := domain.Category(domain.SourceEventlogObjects, name); got != "login" {
			t.Errorf("Category(eventlog_objects, %q) = %q, want login", name, got)
		}
	}
	if got, _ := domain.Category(domain.SourcePubSub, "/event/loginEVENTSTREAM"); got != "login" {
		t.Errorf("Category(pubsub, /event/loginEVENTSTREAM) = %q, want login", got)
	}
}

// Salesforce's Event Log Objects (LoginEventLog, ApiEventLog) hold the
// EventLogFile rows as queryable objects: the same category as the type.
func TestEventLogObjectsShareTheEventLogFileCategory(t *testing.T) {
	for obj, elf := range map[string]string{"LoginEventLog": "Login", "ApiEventLog": "API", "LightningPageViewEventLog": "LightningPageView"} {
		a, _ := domain.Category(domain.SourceEventlogObjects, obj)
		b, _ := domain.Category(domain.SourceEventLogFile, elf)
		if a != b || a == "" {
			t.Errorf("%s -> %q, %s -> %q: one category expected", obj, a, elf, b)
		}
	}
}

// decided maps each listed name to whether the lister ingests it.
func decided(ds []domain.Decision) map[string]bool {
	out := map[string]bool{}
	for _, d := range ds {
		out[d.Name] = d.Ingest
	}
	return out
}

func TestStaticOwnersWinOverAWildcard(t *testing.T) {
	o := domain.NewOwners(domain.SourcePubSub)
	o.Static(domain.SourceEventLogFile, "Login")
	o.Static(domain.SourcePubSub, "/event/ApiEventStream")
	o.Static(domain.SourceEventlogObjects, "ApiEvent") // allow_overlap aside, the first static name keeps it
	listing := []string{"/event/ApiEventStream", "/event/LoginEventStream", "/event/ReportEventStream", "/data/AccountChangeEvent", "/event/Order__e"}
	ds := o.List(domain.SourcePubSub, listing)
	want := map[string]bool{"/event/ApiEventStream": true, "/event/LoginEventStream": false, "/event/ReportEventStream": true,
		"/data/AccountChangeEvent": true, "/event/Order__e": true}
	if got := decided(ds); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("decisions %v, want %v", got, want)
	}
	login := ds[1]
	if login.Owner != (domain.Owner{Source: domain.SourceEventLogFile, Name: "Login", Static: true}) || login.Category != "login" || !login.First || login.Claimed {
		t.Fatalf("login decision %+v", login)
	}
	if s := login.Owner.String(); s != "sources.eventlogfile (Login)" {
		t.Fatalf("owner shown as %q", s)
	}
	if r := ds[2]; !r.Claimed || !r.First || r.Owner != (domain.Owner{Source: domain.SourcePubSub, Name: "/event/ReportEventStream"}) {
		t.Fatalf("report decision %+v: want claimed by the listing", r)
	}
	if ds[3].Category != "" || ds[3].First || ds[4].Category != "" {
		t.Fatalf("exempt decisions %+v %+v", ds[3], ds[4])
	}
	// Listing again: the same answers, none of them first.
	again := o.List(domain.SourcePubSub, listing)
	if fmt.Sprint(decided(again)) != fmt.Sprint(want) || slices.ContainsFunc(again, func(d domain.Decision) bool { return d.First || d.Claimed }) {
		t.Fatalf("second listing %+v", again)
	}
}

// One org split over two orgs entries: the names the other entry lists own
// their categories here too, whatever the source, and the entry's own
// static names come first.
func TestAnotherEntryOfTheOrgOwnsItsNames(t *testing.T) {
	o := domain.NewOwners(domain.SourceEventLogFile)
	o.Static(domain.SourceEventlogObjects, "ApiEvent")
	o.Elsewhere("prod-rt", domain.SourcePubSub, "/event/ApiEventStream") // named here too: ours
	o.Elsewhere("prod-rt", domain.SourcePubSub, "/event/LoginEventStream")
	o.Elsewhere("prod-rt", domain.SourceEventLogFile, "Report")    // the check refuses it; never ours all the same
	o.Elsewhere("prod-rt", domain.SourcePubSub, "/event/Order__e") // never overlaps: no owner
	ds := o.List(domain.SourceEventLogFile, []string{"API", "Login", "Report", "URI"})
	want := map[string]bool{"API": false, "Login": false, "Report": false, "URI": true}
	if got := decided(ds); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("decisions %v, want %v", got, want)
	}
	if w := ds[0].Owner; w != (domain.Owner{Source: domain.SourceEventlogObjects, Name: "ApiEvent", Static: true}) {
		t.Fatalf("API owner %+v, want this entry's ApiEvent", w)
	}
	login := ds[1].Owner
	if login != (domain.Owner{Source: domain.SourcePubSub, Name: "/event/LoginEventStream", Static: true, Entry: "prod-rt"}) {
		t.Fatalf("login owner %+v", login)
	}
	if got, want := login.String(), `orgs entry "prod-rt"'s sources.pubsub (/event/LoginEventStream)`; got != want {
		t.Fatalf("owner named %q, want %q", got, want)
	}
	if _, ok := o.Owner("order"); ok {
		t.Fatal("a custom platform event got an owner")
	}
}

func TestTheFirstClaimerKeepsACategoryForTheRun(t *testing.T) {
	o := domain.NewOwners(domain.SourcePubSub, domain.SourceEventLogFile)
	o.List(domain.SourcePubSub, []string{"/event/LoginEventStream"})
	// The EventLogFile wildcard takes what the first listing left.
	if got := decided(o.List(domain.SourceEventLogFile, []string{"Login", "Logout", "ReportExport"})); !got["Logout"] || got["Login"] || !got["ReportExport"] {
		t.Fatalf("eventlogfile decisions %v", got)
	}
	// Rediscovery: a stream for a category EventLogFile took stays
	// skipped; a new category goes to whoever lists it first.
	ds := o.List(domain.SourcePubSub, []string{"/event/LoginEventStream", "/event/LogoutEventStream", "/event/ReportEventStream"})
	if got := decided(ds); !got["/event/LoginEventStream"] || got["/event/LogoutEventStream"] || !got["/event/ReportEventStream"] {
		t.Fatalf("pubsub rediscovery decisions %v", got)
	}
	if ds[1].Owner.Source != domain.SourceEventLogFile || !ds[1].First {
		t.Fatalf("logout decision %+v", ds[1])
	}
	if got := decided(o.List(domain.SourceEventLogFile, []string{"Login", "Logout", "Report"})); got["Report"] || !got["Logout"] {
		t.Fatalf("eventlogfile rediscovery decisions %v", got)
	}
	if w, _ := o.Owner("report"); w.Source != domain.SourcePubSub {
		t.Fatalf("report owned by %v", w)
	}
}

func TestAWildcardBehindAnotherWaitsForItsFirstListing(t *testing.T) {
	clk := porttest.NewFakeClock(t0)
	o := domain.NewOwners(domain.SourcePubSub, domain.SourceEventLogFile)
	// Asked before the Pub/Sub listing, nothing is decided.
	if d := o.List(domain.SourceEventLogFile, []string{"Login", "Order__c"}); d[0].Ingest || !d[0].Pending || d[0].First || !d[1].Ingest {
		t.Fatalf("decisions before the leading listing %+v", d)
	}
	reports := make(chan domain.Waiting, 10)
	done := make(chan error, 1)
	go func() {
		done <- o.Await(t.Context(), domain.SourceEventLogFile, clk, 5*time.Minute, func(w domain.Waiting) { reports <- w })
	}()
	if w := <-reports; !slices.Equal(w.For, []string{domain.SourcePubSub}) || w.Err != nil || w.Waited != 0 {
		t.Fatalf("first report %+v", w)
	}
	// A failed listing is reported at once, then every 5 minutes.
	boom := errors.New("describeGlobal answered 503")
	o.ListFailed(domain.SourcePubSub, boom)
	if w := <-reports; !errors.Is(w.Err, boom) {
		t.Fatalf("failure report %+v", w)
	}
	o.ListFailed(domain.SourcePubSub, boom) // again: no new report until the interval
	if err := clk.BlockUntil(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	clk.Advance(5 * time.Minute)
	if w := <-reports; !errors.Is(w.Err, boom) || w.Waited != 5*time.Minute {
		t.Fatalf("periodic report %+v", w)
	}
	select {
	case w := <-reports:
		t.Fatalf("extra report %+v", w)
	case err := <-done:
		t.Fatalf("Await returned %v before the listing", err)
	default:
	}
	o.List(domain.SourcePubSub, []string{"/event/LoginEventStream"})
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := decided(o.List(domain.SourceEventLogFile, []string{"Login", "API"})); got["Login"] || !got["API"] {
		t.Fatalf("decisions after the listing %v", got)
	}
	// The leading source and a source with nobody ahead never wait.
	for _, src := range []string{domain.SourcePubSub, domain.SourceEventLogFile, domain.SourceEventlogObjects} {
		if err := o.Await(t.Context(), src, clk, time.Minute, func(w domain.Waiting) { t.Errorf("%s waited: %+v", src, w) }); err != nil {
			t.Fatal(err)
		}
	}
}

func TestAwaitEndsWithItsContext(t *testing.T) {
	clk := porttest.NewFakeClock(t0)
	o := domain.NewOwners(domain.SourcePubSub, domain.SourceEventLogFile)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- o.Await(ctx, domain.SourceEventLogFile, clk, time.Minute, func(domain.Waiting) {}) }()
	if err := clk.BlockUntil(t.Context(), 1); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Await returned %v", err)
	}
	if n := clk.Waiters(); n != 0 {
		t.Fatalf("%d timers left behind", n)
	}
}

func TestConcurrentListingsGiveEachCategoryOneOwner(t *testing.T) {
	o := domain.NewOwners()
	names := map[string][]string{
		domain.SourcePubSub:       {"/event/LoginEventStream", "/event/ApiEventStream", "/event/LogoutEventStream", "/event/UriEventStream"},
		domain.SourceEventLogFile: {"Login", "API", "Logout", "URI"},
	}
	var mu sync.Mutex
	ingested := map[string][]string{} // category -> sources that ingest it
	var wg sync.WaitGroup
	for range 8 {
		for src, ns := range names {
			wg.Go(func() {
				for _, d := range o.List(src, ns) {
					if d.Ingest {
						mu.Lock()
						if !slices.Contains(ingested[d.Category], src) {
							ingested[d.Category] = append(ingested[d.Category], src)
						}
						mu.Unlock()
					}
				}
			})
		}
	}
	wg.Wait()
	if len(ingested) != 4 {
		t.Fatalf("categories ingested %v", ingested)
	}
	for cat, srcs := range ingested {
		if w, _ := o.Owner(cat); len(srcs) != 1 || srcs[0] != w.Source {
			t.Fatalf("category %s ingested by %v, owned by %v", cat, srcs, w)
		}
	}
}
