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
	if o := overlapOwners(src([]string{"/event/LoginEventStream"}, []string{"API"})); o != nil {
		t.Fatal("a registry without a wildcard")
	}
	allowed := src([]string{"*"}, []string{"*"})
	allowed.AllowOverlap = true
	if o := overlapOwners(allowed); o != nil {
		t.Fatal("a registry with allow_overlap")
	}
	o := overlapOwners(src([]string{"*"}, []string{"*"}, "LoginEvent"))
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
