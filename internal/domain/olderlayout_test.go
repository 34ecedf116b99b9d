package domain_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"log/slog"
	"maps"
	"strings"
	"testing"

	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/ports/porttest"
)

// olderMultiOrg is a checkpoint document as the older implementation
// writes it for orgs prod (listed first) and emea: one flat object, every
// key prefixed org=<name>:, the unprefixed keys left from when prod was the
// only org, and one egress count for the whole deployment. The bytes are
// Python's json.dump: ", " and ": " separators, insertion order.
const olderMultiOrg = `{"pubsub:/event/LoginEventStream": "AAAAAAAAAAE=", ` +
	`"eventlogfile:API": "{\"ids\": [[\"0AT000000000001AAA\", \"2026-11-27T06:00:00.000+0000\"]], \"last_created\": \"2026-11-27T06:00:00.000+0000\"}", ` +
	`"egress:budget": "{\"date\": \"2026-11-28\", \"bytes\": 1001}", ` +
	`"org=prod:pubsub:/event/LoginEventStream": "AAAAAAAAAGQ=", ` +
	`"org=prod:eventlogfile:API": "{\"ids\": [[\"0AT000000000009AAA\", \"2026-11-28T06:00:00.000+0000\"]], \"last_created\": \"2026-11-28T06:00:00.000+0000\"}", ` +
	`"org=prod:apexlog": "{\"ids\": [\"07L000000000001AAA\"], \"last_ts\": \"2026-11-28T09:00:00.000+0000\"}", ` +
	`"org=emea:pubsub:/event/LoginEventStream": "AAAAAAAAAMg=", ` +
	`"org=emea:eventlog_objects:LoginHistory": "{\"ids\": [\"0Ya000000000001AAA\"], \"last_ts\": \"2026-11-28T10:00:00.000+0000\"}", ` +
	`"__fence_epoch__": "7"}`

func TestAdoptOlderLayoutFirstOrg(t *testing.T) {
	var older map[string]string
	mustJSON(t, olderMultiOrg, &older)
	own := maps.Clone(older)
	did := domain.AdoptOlderLayout(own, maps.Clone(older), "prod", true, 2)
	if did.Adopted != 1 || did.Replaced != 2 || !did.Budget {
		t.Fatalf("did %+v, want 1 adopted (apexlog), 2 replaced (pubsub, eventlogfile), the budget shared", did)
	}
	for k, want := range map[string]string{
		"pubsub:/event/LoginEventStream": "AAAAAAAAAGQ=", // the prefixed one: what the older implementation resumed from
		"eventlogfile:API":               older["org=prod:eventlogfile:API"],
		"apexlog":                        older["org=prod:apexlog"],
		"egress:budget":                  `{"date":"2026-11-28","bytes":501}`, // 1001 bytes over 2 orgs, rounded up
		"__fence_epoch__":                "7",
	} {
		if own[k] != want {
			t.Errorf("%s = %q, want %q", k, own[k], want)
		}
	}
	for k, v := range older {
		switch {
		case strings.HasPrefix(k, "org=prod:") && own[k] != "":
			t.Errorf("%s is still there: once adopted, the first org's prefixed keys must go, or they are adopted again", k)
		case strings.HasPrefix(k, "org=emea:") && own[k] != v:
			t.Errorf("%s was changed or removed (%q): another org's keys stay until it adopted them", k, own[k])
		}
	}
	if _, ok := own["eventlog_objects:LoginHistory"]; ok {
		t.Error("the first org took another org's key")
	}
}

func TestAdoptOlderLayoutOtherOrg(t *testing.T) {
	var older map[string]string
	mustJSON(t, olderMultiOrg, &older)
	own := map[string]string{"eventlog_objects:LoginHistory": `{"last_ts":"2026-11-29T00:00:00.000+0000","ids":[]}`}
	did := domain.AdoptOlderLayout(own, older, "emea", false, 2)
	if did.Adopted != 1 || did.Kept != 1 || did.Replaced != 0 || did.Budget {
		t.Fatalf("did %+v, want 1 adopted, 1 kept", did)
	}
	want := map[string]string{
		"pubsub:/event/LoginEventStream": "AAAAAAAAAMg=",
		"eventlog_objects:LoginHistory":  `{"last_ts":"2026-11-29T00:00:00.000+0000","ids":[]}`, // its own, newer
	}
	if !maps.Equal(own, want) {
		t.Fatalf("own %v, want %v", own, want)
	}
	// Nothing of a document without the org's keys; never the single-org form.
	for _, tc := range []struct {
		org   string
		first bool
	}{{"emea", false}, {"", true}} {
		own := map[string]string{}
		if did := domain.AdoptOlderLayout(own, map[string]string{"pubsub:/event/X": "AQ==", "org=prod:apexlog": "{}"}, tc.org, tc.first, 2); did != (domain.OlderAdoption{}) || len(own) != 0 {
			t.Errorf("org %q: %+v %v", tc.org, did, own)
		}
	}
	// Reserved keys and nested prefixes are never adopted.
	own = map[string]string{}
	domain.AdoptOlderLayout(own, map[string]string{"org=emea:__fence_epoch__": "99", "org=emea:__org__": "x", "org=emea:org=prod:apexlog": "{}"}, "emea", false, 2)
	if len(own) != 0 {
		t.Fatalf("adopted %v", own)
	}
}

func mustJSON(t *testing.T, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatal(err)
	}
}

// The first org's claim of the configured document in the older layout
// reads its prefixed keys as its own, keeps the other orgs' keys, and says
// so once; a later claim never adopts again over the org's newer values.
func TestFirstOrgClaimAdoptsOlderLayoutOnce(t *testing.T) {
	m := porttest.NewMemoryCAS("state")
	if _, err := m.Put(ctx(t), []byte(olderMultiOrg), ports.CreateOnly()); err != nil {
		t.Fatal(err)
	}
	var logs bytes.Buffer
	clk := porttest.NewFakeClock(t0)
	c, err := domain.NewCheckpointCommitter(m, clk, domain.CommitterConfig{Org: "prod", Logger: slog.New(slog.NewTextHandler(&logs, nil)),
		Older: &domain.OlderLayout{First: true, Orgs: 2}})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Claim(ctx(t), 8); err != nil {
		t.Fatal(err)
	}
	doc := docOf(t, m)
	if doc["pubsub:/event/LoginEventStream"] != "AAAAAAAAAGQ=" || doc["apexlog"] == "" || doc[domain.OrgKey] != "prod" ||
		doc["org=emea:pubsub:/event/LoginEventStream"] != "AAAAAAAAAMg=" || doc["org=emea:eventlog_objects:LoginHistory"] == "" {
		t.Fatalf("document after the claim: %v", doc)
	}
	if n := strings.Count(logs.String(), "adopted from the older"); n != 1 || !strings.Contains(logs.String(), "level=INFO") ||
		!strings.Contains(logs.String(), "adopted=1") || !strings.Contains(logs.String(), "replaced_unprefixed=2") {
		t.Fatalf("want one INFO line with the counts:\n%s", logs.String())
	}
	if err := c.Commit(ctx(t), "pubsub:/event/LoginEventStream", "AAAAAAAAAMk="); err != nil {
		t.Fatal(err)
	}
	logs.Reset()
	if err := c.Claim(ctx(t), 9); err != nil {
		t.Fatal(err)
	}
	if v := docOf(t, m)["pubsub:/event/LoginEventStream"]; v != "AAAAAAAAAMk=" {
		t.Fatalf("a later claim adopted the older value again over the newer one: %s", v)
	}
	if logs.Len() != 0 && strings.Contains(logs.String(), "adopted") {
		t.Fatalf("adopted again:\n%s", logs.String())
	}
	// The documented repair of a corrupt document (move it aside, import an
	// earlier export) loses __org__: the next claim must not move the
	// positions back to the older values.
	doc = docOf(t, m)
	delete(doc, domain.OrgKey)
	b, _ := json.Marshal(doc)
	obj, err := m.Get(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Put(ctx(t), b, ports.IfVersion(obj.Version)); err != nil {
		t.Fatal(err)
	}
	if err := c.Claim(ctx(t), 10); err != nil {
		t.Fatal(err)
	}
	if v := docOf(t, m)["pubsub:/event/LoginEventStream"]; v != "AAAAAAAAAMk=" {
		t.Fatalf("a claim of a document whose __org__ was lost moved the position back to the older value: %s", v)
	}
}

// Another org's claim seeds its own document from its prefixed keys in the
// configured document, which it never writes; once claimed, it never
// adopts again, and a corrupt configured document no longer matters to it.
func TestOtherOrgClaimSeedsFromTheConfiguredDocument(t *testing.T) {
	configured := porttest.NewMemoryCAS("state")
	if _, err := configured.Put(ctx(t), []byte(olderMultiOrg), ports.CreateOnly()); err != nil {
		t.Fatal(err)
	}
	before, _ := configured.Peek()
	own := porttest.NewMemoryCAS("shards/emea/state")
	var logs bytes.Buffer
	clk := porttest.NewFakeClock(t0)
	newEmea := func() *domain.CheckpointCommitter {
		c, err := domain.NewCheckpointCommitter(own, clk, domain.CommitterConfig{Org: "emea", Logger: slog.New(slog.NewTextHandler(&logs, nil)),
			Older: &domain.OlderLayout{Document: configured, Orgs: 2}})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c := newEmea()
	if err := c.Claim(ctx(t), 1); err != nil {
		t.Fatal(err)
	}
	doc := docOf(t, own)
	want := map[string]string{"pubsub:/event/LoginEventStream": "AAAAAAAAAMg=",
		"eventlog_objects:LoginHistory": `{"ids": ["0Ya000000000001AAA"], "last_ts": "2026-11-28T10:00:00.000+0000"}`,
		domain.OrgKey:                   "emea", domain.FenceEpochKey: "1"}
	if !maps.Equal(doc, want) {
		t.Fatalf("emea's document %v, want %v", doc, want)
	}
	if after, _ := configured.Peek(); !bytes.Equal(after.Data, before.Data) {
		t.Fatal("emea's claim wrote the configured document")
	}
	if !strings.Contains(logs.String(), "adopted=2") || !strings.Contains(logs.String(), "from=mem://state") {
		t.Fatalf("no INFO line saying what was adopted from where:\n%s", logs.String())
	}
	if err := c.Commit(ctx(t), "pubsub:/event/LoginEventStream", "AAAAAAAAAMk="); err != nil {
		t.Fatal(err)
	}
	// The configured document turns corrupt: emea, claimed, reads only its own.
	if _, err := configured.Put(ctx(t), []byte(`{"truncated`), ports.IfVersion(before.Version)); err != nil {
		t.Fatal(err)
	}
	if err := newEmea().Claim(ctx(t), 2); err != nil {
		t.Fatalf("a claimed shard read the configured document again: %v", err)
	}
	if v := docOf(t, own)["pubsub:/event/LoginEventStream"]; v != "AAAAAAAAAMk=" {
		t.Fatalf("re-adopted over the newer value: %s", v)
	}
}

// Before its first claim, an org whose older positions cannot be read
// (the configured document is corrupt) claims nothing and says what to do;
// the error is ErrCorrupt, so the shard resigns and tries again later
// instead of starting from its lookback and losing the positions.
func TestOtherOrgClaimRefusesACorruptConfiguredDocument(t *testing.T) {
	configured := porttest.NewMemoryCAS("state")
	if _, err := configured.Put(ctx(t), []byte(`{"org=emea:apexlog": 12}`), ports.CreateOnly()); err != nil {
		t.Fatal(err)
	}
	own := porttest.NewMemoryCAS("shards/emea/state")
	c, err := domain.NewCheckpointCommitter(own, porttest.NewFakeClock(t0), domain.CommitterConfig{Org: "emea",
		Older: &domain.OlderLayout{Document: configured, Orgs: 2}})
	if err != nil {
		t.Fatal(err)
	}
	err = c.Claim(ctx(t), 1)
	var oe *domain.OlderDocumentError
	if !errors.Is(err, domain.ErrCorrupt) || !errors.As(err, &oe) || !strings.Contains(err.Error(), "org emea") ||
		!strings.Contains(err.Error(), "state") || !strings.Contains(err.Error(), "move it aside") {
		t.Fatalf("claim: %v", err)
	}
	if _, ok := own.Peek(); ok {
		t.Fatal("the refused claim wrote emea's document")
	}
}
