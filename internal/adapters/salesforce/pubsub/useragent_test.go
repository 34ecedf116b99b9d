package pubsub_test

import (
	"strings"
	"testing"

	"github.com/sf2loki/sf2loki/internal/adapters/salesforce/pubsub"
	"github.com/sf2loki/sf2loki/internal/buildinfo"
	"github.com/sf2loki/sf2loki/internal/testenv/fakepubsub"
)

// The Pub/Sub API stream names sf2loki and its version first in its
// user-agent, before gRPC's own token.
func TestSubscribeSendsTheUserAgent(t *testing.T) {
	e := newEnv(t, pubsub.Spec{}, nil)
	e.srv.Append(fakepubsub.LoginTopic, loginEvents(0, 2)...)
	e.run(t, map[string]string{"pubsub:/event/LoginEventStream": e.b64(fakepubsub.LoginTopic, 0)}, &sink{}, hasN(2))
	subs := e.srv.Subscriptions()
	if len(subs) == 0 || !strings.HasPrefix(subs[0].UserAgent, buildinfo.UserAgent()+" grpc-go/") {
		t.Fatalf("subscriptions %+v: want a user-agent starting %q", subs, buildinfo.UserAgent()+" grpc-go/")
	}
}
