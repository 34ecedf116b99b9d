package pubsub_test

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/clock"
	"github.com/sf2loki/sf2loki/internal/adapters/salesforce"
	"github.com/sf2loki/sf2loki/internal/adapters/salesforce/pubsub"
	"github.com/sf2loki/sf2loki/internal/adapters/salesforce/pubsub/eventbus"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/sfrules"
	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/internal/testenv/fakepubsub"
	"github.com/sf2loki/sf2loki/internal/testenv/fakesf"
)

// An unreadable stored replay id logs an ERROR with the key and the repair
// commands, is counted, and the topic subscribes from the preset.
func TestUnreadableReplayIDLogsTheRepairAndStartsFromThePreset(t *testing.T) {
	srv := fakepubsub.Start(t)
	srv.AddTopic(fakepubsub.LoginTopic, fakepubsub.LoginEventStreamSchema)
	web := httptest.NewServer(&fakesf.Org{})
	t.Cleanup(web.Close)
	a, err := salesforce.New(salesforce.Config{AuthMode: sfrules.ClientCredentials, LoginURL: web.URL, ClientID: "ck", ClientSecret: "x", OrgID: "00D000000000001"})
	if err != nil {
		t.Fatal(err)
	}
	logs := &testenv.Buffer{}
	src, err := pubsub.New(a, pubsub.Spec{Endpoint: srv.Addr, Plaintext: true, Topics: []string{fakepubsub.LoginTopic}, ReplayPreset: pubsub.Earliest},
		clock.New(), slog.New(slog.NewTextHandler(logs, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var garbage []string
	var mu sync.Mutex
	src.Hooks.GarbageCheckpoint = func(topic string) { mu.Lock(); garbage = append(garbage, topic); mu.Unlock() }
	key := pubsub.KeyPrefix + fakepubsub.LoginTopic
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- src.Run(ctx, func(k string) (string, bool) { return map[string]string{key: "not base64!"}[k], k == key },
			func(ports.Entry) error { return nil })
	}()
	deadline := time.Now().Add(10 * time.Second)
	for len(srv.Subscriptions()) == 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("the source stopped: %v", err)
	}
	subs := srv.Subscriptions()
	if len(subs) == 0 || subs[0].Preset != eventbus.ReplayPreset_EARLIEST {
		t.Fatalf("subscriptions %+v, want one from EARLIEST", subs)
	}
	out := logs.String()
	if !strings.Contains(out, "level=ERROR") || !strings.Contains(out, "sf2loki state set "+key) || !strings.Contains(out, "sf2loki state delete "+key) {
		t.Fatalf("the log does not say ERROR and the repair commands:\n%s", out)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(garbage) != 1 || garbage[0] != fakepubsub.LoginTopic {
		t.Fatalf("counted %v", garbage)
	}
	for v, ok := range map[string]bool{"AAAAAAAAAAE=": true, "": false, "not base64!": false, "AAAA AAAAAAE=": false} {
		if err := pubsub.CheckReplayID(v); (err == nil) != ok {
			t.Errorf("CheckReplayID(%q) = %v, want ok=%v", v, err, ok)
		}
	}
}
