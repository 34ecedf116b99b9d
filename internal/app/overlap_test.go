package app

import (
	"context"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/clock"
	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/domain"
)

func TestEachOrgGetsAnOverlapRegistryForItsWildcards(t *testing.T) {
	src := func(topics, types []string, objects ...string) config.Sources {
		s := config.Sources{PubSub: config.PubSub{Topics: topics}, EventLogFile: config.EventLogFile{EventTypes: types}}
		for _, o := range objects {
			s.EventlogObjects.Objects = append(s.EventlogObjects.Objects, config.EventlogObject{Name: o})
		}
		return s
	}
	if o := overlapOwners(src([]string{"/event/LoginEventStream"}, []string{"API"}), nil); o != nil {
		t.Fatal("a registry without a wildcard")
	}
	allowed := src([]string{"*"}, []string{"*"})
	allowed.AllowOverlap = true
	if o := overlapOwners(allowed, nil); o != nil {
		t.Fatal("a registry with allow_overlap")
	}
	o := overlapOwners(src([]string{"*"}, []string{"*"}, "LoginEvent"), nil)
	// The named object owns login; the Pub/Sub "*" is ahead of the
	// EventLogFile one.
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if err := o.Await(ctx, domain.SourceEventLogFile, clock.New(), time.Minute, func(domain.Waiting) {}); err == nil {
		t.Fatal("the EventLogFile wildcard did not wait for the Pub/Sub listing")
	}
	ds := o.List(domain.SourcePubSub, []string{"/event/LoginEventStream", "/event/ApiEventStream"})
	if ds[0].Ingest || ds[0].Owner != (domain.Owner{Source: domain.SourceEventlogObjects, Name: "LoginEvent", Static: true}) || !ds[1].Ingest {
		t.Fatalf("pubsub decisions %+v", ds)
	}
	if err := o.Await(context.Background(), domain.SourceEventLogFile, clock.New(), time.Minute, func(domain.Waiting) {}); err != nil {
		t.Fatal(err)
	}
}

// One org split over two orgs entries: the EventLogFile "*" of one skips
// the categories the other entry's Pub/Sub topics ship, and takes the rest.
func TestAWildcardSkipsWhatAnotherEntryOfTheOrgShips(t *testing.T) {
	rt := config.Sources{PubSub: config.PubSub{Topics: []string{"/event/LoginEventStream", "/event/Order__e"}}}
	elf := config.Sources{EventLogFile: config.EventLogFile{EventTypes: []string{"*"}}}
	o := overlapOwners(elf, []config.OrgSibling{{Name: "prod-rt", Sources: rt}})
	if o == nil {
		t.Fatal("no registry for a wildcard")
	}
	ds := o.List(domain.SourceEventLogFile, []string{"Login", "API"})
	if ds[0].Ingest || ds[0].Owner.Entry != "prod-rt" || !ds[1].Ingest {
		t.Fatalf("decisions %+v", ds)
	}
	if o := overlapOwners(rt, []config.OrgSibling{{Name: "prod-elf", Sources: elf}}); o != nil {
		t.Fatal("a registry for an entry without a wildcard")
	}
}
