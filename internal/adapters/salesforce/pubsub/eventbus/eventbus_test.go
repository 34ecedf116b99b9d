package eventbus_test

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"strings"
	"testing"

	"github.com/sf2loki/sf2loki/internal/adapters/salesforce/pubsub/eventbus"
)

// TestGeneratedCodeMatchesTheProto fails when third_party/pubsub-api/
// pubsub_api.proto changed after the code here was generated: run
// `make proto`.
func TestGeneratedCodeMatchesTheProto(t *testing.T) {
	proto, err := os.ReadFile("../../../../../third_party/pubsub-api/pubsub_api.proto")
	if err != nil {
		t.Fatal(err)
	}
	recorded, err := os.ReadFile("pubsub_api.proto.sha256")
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(proto)
	if got, want := hex.EncodeToString(sum[:]), strings.Fields(string(recorded))[0]; got != want {
		t.Fatalf("pubsub_api.proto has SHA-256 %s, the generated code came from %s: run make proto", got, want)
	}
	if d := eventbus.File_pubsub_api_proto.Services().ByName("PubSub"); d == nil || d.Methods().ByName("Subscribe") == nil {
		t.Fatal("the generated descriptor lacks eventbus.v1.PubSub.Subscribe")
	}
}
