package pubsub_test

import (
	"slices"
	"testing"

	"github.com/sf2loki/sf2loki/internal/adapters/salesforce/pubsub"
)

// "*" subscribes to the Real-Time Event Monitoring streams only: the change
// events describeGlobal lists beside them (AccountChangeEvent,
// Employee__ChangeEvent) are no topic it adds, so a "*" beside
// /data/ChangeEvents never ships a change a second time.
func TestAWildcardSubscribesToNoChangeEventChannel(t *testing.T) {
	e := newEnv(t, pubsub.Spec{Topics: []string{"*", "/data/ChangeEvents"}}, nil)
	e.org.SObjects = []string{"Account", "AccountChangeEvent", "Employee__c", "Employee__ChangeEvent", "LoginEventStream"}
	got, err := e.src.Topics(t.Context())
	if want := []string{"/data/ChangeEvents", "/event/LoginEventStream"}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("topics %v (%v), want %v", got, err, want)
	}
}
