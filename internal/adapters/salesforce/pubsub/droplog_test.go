package pubsub_test

import (
	"log/slog"
	"strings"
	"testing"

	"github.com/sf2loki/sf2loki/internal/adapters/salesforce/pubsub"
	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/internal/testenv/fakepubsub"
)

// Undecodable events are each skipped and counted, but a burst of them is
// one WARN line per topic and interval (lograte), not one per event.
func TestABurstOfUndecodableEventsLogsOneWarning(t *testing.T) {
	logs := &testenv.Buffer{}
	e := newEnvLog(t, pubsub.Spec{ReplayPreset: pubsub.Earliest}, nil, slog.New(slog.NewTextHandler(logs, nil)))
	e.srv.Append(fakepubsub.LoginTopic, loginEvents(0, 1)...)
	for range 20 {
		e.srv.AppendRaw(fakepubsub.LoginTopic, []byte{0xff, 0xff, 0xff, 0xff, 0xff})
	}
	e.srv.Append(fakepubsub.LoginTopic, loginEvents(1, 2)...)
	got := e.run(t, nil, &sink{}, hasN(2))
	if ids := identifiers(got); len(ids) != 2 || e.count("undecodable") != 20 {
		t.Fatalf("events %v, %d undecodable; want 2 events and 20 skipped", ids, e.count("undecodable"))
	}
	if n := strings.Count(logs.String(), "does not decode"); n != 1 {
		t.Fatalf("%d lines for 20 undecodable events, want 1:\n%s", n, logs)
	}
}
