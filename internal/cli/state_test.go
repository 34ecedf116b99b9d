package cli

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/file"
	"github.com/sf2loki/sf2loki/internal/app"
	"github.com/sf2loki/sf2loki/internal/doctor"
	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/testenv"
)

// cli runs sf2loki with args and stdin; it returns stdout+stderr and the
// exit code main would use.
func cli(t *testing.T, stdin string, args ...string) (string, int) {
	t.Helper()
	root := NewRootCommand()
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetIn(strings.NewReader(stdin))
	root.SetArgs(args)
	err := root.ExecuteContext(t.Context())
	if err == nil {
		return out.String(), 0
	}
	var exit *app.ExitError
	if errors.As(err, &exit) {
		return out.String() + err.Error(), exit.Code
	}
	return out.String() + err.Error(), 1
}

// backends returns a configuration file per state store (noop coordinator).
func backends(t *testing.T) map[string]string {
	s3srv, gcssrv := testenv.StartS3(t), testenv.StartGCS(t)
	testenv.S3Env(t)
	t.Setenv("STORAGE_EMULATOR_HOST", strings.TrimPrefix(gcssrv.URL, "http://"))
	return map[string]string{
		"file": testenv.WriteConfig(t, fmt.Sprintf("state: {file: {path: %s/state.json}}\n", t.TempDir())),
		"s3":   testenv.WriteConfig(t, fmt.Sprintf("state: {store: s3, s3: {bucket: %s, endpoint_url: %s}}\n", s3srv.NewBucket(t), s3srv.Endpoint)),
		"gcs":  testenv.WriteConfig(t, fmt.Sprintf("state: {store: gcs, gcs: {bucket: %s}}\n", gcssrv.NewBucket(t))),
	}
}

func TestStateCommandsOnEveryBackend(t *testing.T) {
	for name, cfg := range backends(t) {
		t.Run(name, func(t *testing.T) {
			must := func(stdin string, args ...string) string {
				t.Helper()
				out, code := cli(t, stdin, append([]string{"state", "--config", cfg}, args...)...)
				if code != 0 {
					t.Fatalf("state %v: exit %d\n%s", args, code, out)
				}
				return out
			}
			must("", "set", "pubsub:/event/B", "AAAAAAAAAAI=")
			must("", "set", "pubsub:/event/A", "AAAAAAAAAAE=")
			must("", "set", "eventlogfile:Login", elfPos)
			if out := must("", "show"); out != "eventlogfile:Login\t"+elfPos+"\npubsub:/event/A\tAAAAAAAAAAE=\npubsub:/event/B\tAAAAAAAAAAI=\n3 keys\n" {
				t.Fatalf("show:\n%s", out)
			}
			if out := must("", "show", "--key", "pubsub:*", "--json"); !strings.Contains(out, `"pubsub:/event/A": "AAAAAAAAAAE="`) || strings.Contains(out, "eventlogfile") {
				t.Fatalf("show --key --json:\n%s", out)
			}
			must("", "delete", "pubsub:/event/B")
			if out := must("", "export"); out != "{\n  \"eventlogfile:Login\": \"{\\\"last_created\\\":\\\"2026-03-01T00:00:00.000+0000\\\",\\\"ids\\\":[]}\",\n  \"pubsub:/event/A\": \"AAAAAAAAAAE=\"\n}\n" {
				t.Fatalf("export:\n%s", out)
			}
			must(`{"custom":"x"}`, "import", "-")
			if out := must("", "show", "--key", "custom"); !strings.Contains(out, "custom\tx") {
				t.Fatalf("after import:\n%s", out)
			}
			for _, bad := range []struct {
				stdin string
				args  []string
				code  int
			}{
				{"", []string{"set", domain.FenceEpochKey, "9"}, 1},
				{"", []string{"delete", domain.FenceEpochKey}, 1},
				{`["not","an","object"]`, []string{"import", "-"}, 2},
				{`{"k": 5}`, []string{"import", "-"}, 2},
				{`{"__fence_epoch__": "1"}`, []string{"import", "-"}, 2},
				{`{"k":"v"}`, []string{"import", "--if-empty", "-"}, 1},
			} {
				if out, code := cli(t, bad.stdin, append([]string{"state", "--config", cfg}, bad.args...)...); code != bad.code {
					t.Errorf("state %v: exit %d, want %d\n%s", bad.args, code, bad.code, out)
				}
			}
			// The epoch repair of sfl-0015.
			must("", "set", domain.FenceEpochKey, "7", "--force-reserved")
			if out := must("", "export", "--include-reserved"); !strings.Contains(out, `"__fence_epoch__": "7"`) {
				t.Fatalf("export --include-reserved:\n%s", out)
			}
		})
	}
}

// elfPos is a valid eventlogfile checkpoint.
const elfPos = `{"last_created":"2026-03-01T00:00:00.000+0000","ids":[]}`

func TestStateImportRefusesMalformedInput(t *testing.T) {
	dir := t.TempDir()
	cfg := testenv.WriteConfig(t, fmt.Sprintf("state: {file: {path: %s/state.json}}\n", dir))
	if out, code := cli(t, `{"keep":"1"}`, "state", "--config", cfg, "import", "-"); code != 0 {
		t.Fatalf("import: exit %d\n%s", code, out)
	}
	for _, tc := range []struct{ name, stdin, want string }{
		{"trailing data", `{"a":"1"}{"b":"2"}`, "after the JSON object"},
		{"trailing garbage", `{"a":"1"} x`, "after the JSON object"},
		{"invalid UTF-8", "{\"a\":\"\xff\"}", "not valid UTF-8"},
		{"a lone surrogate", `{"a":"\ud800"}`, "U+FFFD"},
		{"an empty key", `{"":"v"}`, "empty key"},
		{"a duplicate key", `{"a":"1","b":"2","a":"3"}`, `"a" appears twice`},
		{"a tab in a key", "{\"a\\tb\":\"v\"}", "control character"},
		{"a newline in a key", "{\"a\\nb\":\"v\"}", "control character"},
		{"a nested object", `{"a":{"b":"c"}}`, "not a string"},
		{"an unreadable position", `{"eventlog_objects:LoginEvent":"abc"}`, "is not a position like"},
		{"a bad replay id", `{"pubsub:/event/LoginEventStream":"r1"}`, "is not a replay id"},
		{"a bad topic", `{"pubsub:LoginEventStream":"AAAAAAAAAAE="}`, "not a topic"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, code := cli(t, tc.stdin, "state", "--config", cfg, "import", "-")
			if code != app.ExitInvalidConfig || !strings.Contains(out, tc.want) {
				t.Fatalf("exit %d, want %d with %q:\n%s", code, app.ExitInvalidConfig, tc.want, out)
			}
			if out, _ := cli(t, "", "state", "--config", cfg, "export"); out != "{\n  \"keep\": \"1\"\n}\n" {
				t.Fatalf("the document changed:\n%s", out)
			}
		})
	}
}

func TestStateSetChecksTheValuesOfKnownKeys(t *testing.T) {
	dir := t.TempDir()
	cfg := testenv.WriteConfig(t, fmt.Sprintf("state: {file: {path: %s/state.json}}\n", dir))
	for _, tc := range []struct {
		key, value string
		ok         bool
		want       string
	}{
		{"eventlog_objects:LoginEvent", `{"last_ts":"2026-03-01T00:00:00.000+0000","ids":[]}`, true, ""},
		{"eventlog_objects:LoginEvent", "2026-03-01T00:00:00Z", true, ""},
		{"eventlog_objects:LoginEvent", "abc", false, `is not a position like {"last_ts"`},
		{"eventlog_objects:", "2026-03-01T00:00:00Z", false, "not an object name"},
		{"eventlogfile:API", elfPos, true, ""},
		{"eventlogfile:API", "2026-03-01", false, `is not a position like {"last_created"`},
		{"pubsub:/event/LoginEventStream", "AAAAAAAAAAE=", true, ""},
		{"pubsub:/event/LoginEventStream", "r1", false, "is not a replay id"},
		{"synthetic:LoginEvent", "41", true, ""},
		{"synthetic:LoginEvent", "abc", false, "is not a sequence number"},
		{"synthetic:LoginEvent", "", false, "state delete"},
		{"custom_key", "anything", true, ""},
		{"a\tb", "v", false, "control character"},
		{"", "v", false, "empty key"},
	} {
		out, code := cli(t, "", "state", "--config", cfg, "set", tc.key, tc.value)
		if tc.ok && code != 0 || !tc.ok && (code != app.ExitInvalidConfig || !strings.Contains(out, tc.want)) {
			t.Errorf("set %q %q: exit %d, want ok=%v with %q:\n%s", tc.key, tc.value, code, tc.ok, tc.want, out)
		}
	}
}

func TestStateShowEscapesControlCharacters(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.json")
	// Written by something else than sf2loki: the commands refuse such keys.
	if err := os.WriteFile(path, []byte(`{"a\tb":"x\ny","plain":"v","q\"uote":"\u0007"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := testenv.WriteConfig(t, fmt.Sprintf("state: {file: {path: %s}}\n", path))
	out, code := cli(t, "", "state", "--config", cfg, "show")
	want := "\"a\\tb\"\t\"x\\ny\"\nplain\tv\nq\"uote\t\"\\a\"\n3 keys\n"
	if code != 0 || out != want {
		t.Fatalf("show: exit %d\n%q\nwant\n%q", code, out, want)
	}
}

func TestStateRefusesWhileALeaderMayRun(t *testing.T) {
	dir := t.TempDir()
	leasePath := filepath.Join(dir, "leader.lease")
	cfg := testenv.WriteConfig(t, fmt.Sprintf("coordinate: {type: file_lease, file_lease: {path: %s}}\nstate: {file: {path: %s/state.json}}\n", leasePath, dir))
	lease, err := file.New(file.Config{Path: leasePath})
	if err != nil {
		t.Fatal(err)
	}
	v, err := lease.Put(t.Context(), domain.LeaseRecord{Holder: "sf2loki-a", Epoch: 4}.Encode(), ports.CreateOnly())
	if err != nil {
		t.Fatal(err)
	}
	out, code := cli(t, "", "state", "--config", cfg, "set", "k", "v")
	if code != 1 || !strings.Contains(out, `holder "sf2loki-a", epoch 4`) || !strings.Contains(out, "--force") {
		t.Fatalf("set while a lease is held: exit %d\n%s", code, out)
	}
	if out, code := cli(t, "", "state", "--config", cfg, "set", "k", "v", "--force"); code != 0 {
		t.Fatalf("set --force: exit %d\n%s", code, out)
	}
	// A released lease (empty holder) allows writes.
	if _, err := lease.Put(t.Context(), domain.LeaseRecord{Epoch: 4}.Encode(), ports.IfVersion(v)); err != nil {
		t.Fatal(err)
	}
	if out, code := cli(t, "", "state", "--config", cfg, "delete", "k"); code != 0 {
		t.Fatalf("delete after release: exit %d\n%s", code, out)
	}

	// noop + file: the instance lock of a running daemon refuses.
	noop := testenv.WriteConfig(t, fmt.Sprintf("state: {file: {path: %s/noop.json}}\n", dir))
	lock, err := file.LockInstance(filepath.Join(dir, "noop.json"), 0)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = lock.Release() }()
	if out, code := cli(t, "", "state", "--config", noop, "set", "k", "v"); code != 1 || !strings.Contains(out, "instance.lock") {
		t.Fatalf("set while the noop lock is held: exit %d\n%s", code, out)
	}
}

func TestStateMigrationFileToS3ToGCS(t *testing.T) {
	b := backends(t)
	state := func(cfg, stdin string, args ...string) string {
		t.Helper()
		out, code := cli(t, stdin, append([]string{"state", "--config", cfg}, args...)...)
		if code != 0 {
			t.Fatalf("state %v: exit %d\n%s", args, code, out)
		}
		return out
	}
	for i := range 20 {
		state(b["file"], "", "set", fmt.Sprintf("eventlog_objects:Obj%02d", i), fmt.Sprintf("2026-03-%02dT00:00:00Z", i+1))
	}
	fromFile := state(b["file"], "", "export")
	state(b["s3"], fromFile, "import", "--if-empty", "-")
	fromS3 := state(b["s3"], "", "export")
	state(b["gcs"], fromS3, "import", "--if-empty", "-")
	fromGCS := state(b["gcs"], "", "export")
	if fromFile != fromS3 || fromS3 != fromGCS || strings.Count(fromFile, "eventlog_objects:") != 20 {
		t.Fatalf("exports differ:\nfile:\n%s\ns3:\n%s\ngcs:\n%s", fromFile, fromS3, fromGCS)
	}
}

// The size caps hold the largest documents sf2loki writes: a checkpoint
// document with a thousand eventlog_objects cursors carrying 500 Ids each,
// every EventLogFile type carrying 250 files and ten thousand Pub/Sub
// replay ids; a lease naming the longest Kubernetes pod name.
func TestDocumentCapsHoldTheLargestDocuments(t *testing.T) {
	id := func(i int) string { return fmt.Sprintf("0Lg%015d", i) }
	const ts = "2026-03-01T00:00:00.000+0000"
	doc := map[string]string{domain.FenceEpochKey: "18446744073709551615"}
	ids := make([]string, 500)
	for i := range ids {
		ids[i] = id(i)
	}
	soql, _ := json.Marshal(map[string]any{"last_ts": ts, "ids": ids})
	pairs := make([][2]string, 250)
	for i := range pairs {
		pairs[i] = [2]string{id(i), ts}
	}
	elf, _ := json.Marshal(map[string]any{"last_created": ts, "ids": pairs})
	for i := range 1000 {
		doc[fmt.Sprintf("eventlog_objects:Custom_Object_Number_%04d__c", i)] = string(soql)
	}
	for i := range 70 {
		doc[fmt.Sprintf("eventlogfile:EventTypeNumber%02d", i)] = string(elf)
	}
	for i := range 10000 {
		doc[fmt.Sprintf("pubsub:/event/Platform_Event_Number_%05d__e", i)] = base64.StdEncoding.EncodeToString([]byte(fmt.Sprintf("replay-id-%06d", i)))
	}
	for k, v := range doc {
		if k != domain.FenceEpochKey {
			if err := app.CheckCheckpoint(k, v); err != nil {
				t.Fatal(err)
			}
		}
	}
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) > doctor.MaxStateDocumentBytes {
		t.Fatalf("the largest checkpoint document is %d bytes, over the cap of %d", len(b), doctor.MaxStateDocumentBytes)
	}
	holder := strings.Repeat("p", 253)
	lease := domain.LeaseRecord{Holder: holder, Instance: holder + "-" + strings.Repeat("i", 64), Epoch: 1<<64 - 1, Renewals: 1<<64 - 1,
		TTL: "2562047h47m16.854775807s", AcquiredAt: time.Now(), RenewedAt: time.Now(), ExpiresAt: time.Now()}.Encode()
	if len(lease)*16 > doctor.MaxLeaseDocumentBytes {
		t.Fatalf("the largest lease record is %d bytes: the cap of %d leaves less than 16 times that", len(lease), doctor.MaxLeaseDocumentBytes)
	}
	t.Logf("largest checkpoint document %d bytes (cap %d), largest lease %d bytes (cap %d)", len(b), doctor.MaxStateDocumentBytes, len(lease), doctor.MaxLeaseDocumentBytes)
}

// The epoch repair refuses an epoch above domain.MaxEpoch: 2^64-1 would
// wrap the next leader's epoch to 0 and switch fencing off.
func TestStateRefusesAnEpochAboveTheMaximum(t *testing.T) {
	dir := t.TempDir()
	cfg := testenv.WriteConfig(t, fmt.Sprintf("state: {file: {path: %s/state.json}}\n", dir))
	for _, v := range []string{"18446744073709551615", fmt.Sprint(domain.MaxEpoch + 1)} {
		out, code := cli(t, "", "state", "--config", cfg, "set", domain.FenceEpochKey, v, "--force-reserved")
		if code == 0 || !strings.Contains(out, "maximum") {
			t.Errorf("set %s %s: exit %d:\n%s", domain.FenceEpochKey, v, code, out)
		}
	}
	if out, code := cli(t, "", "state", "--config", cfg, "set", domain.FenceEpochKey, fmt.Sprint(domain.MaxEpoch), "--force-reserved"); code != 0 {
		t.Fatalf("the maximum itself: exit %d:\n%s", code, out)
	}
}

// With orgs, each org has its own checkpoint document: --org picks it, is
// required, and names the orgs when missing or wrong; without orgs it is
// refused. The first org's document is the single-org one.
func TestStateCommandsPerOrg(t *testing.T) {
	dir := t.TempDir()
	single := testenv.WriteConfig(t, fmt.Sprintf("state: {file: {path: %s/state.json}}\n", dir))
	orgs := testenv.WriteConfig(t, fmt.Sprintf(`state: {file: {path: %s/state.json}}
orgs:
  - name: prod
  - name: sandbox
`, dir))
	run := func(cfg string, args ...string) (string, int) {
		return cli(t, "", append([]string{"state", "--config", cfg}, args...)...)
	}
	if out, code := run(single, "set", "synthetic:ApiEvent", "7"); code != 0 {
		t.Fatalf("single form: %d %s", code, out)
	}
	if out, code := run(orgs, "set", "--org", "sandbox", "synthetic:ApiEvent", "3"); code != 0 {
		t.Fatalf("sandbox: %d %s", code, out)
	}
	if out, _ := run(orgs, "show", "--org", "prod"); !strings.Contains(out, "synthetic:ApiEvent") || !strings.Contains(out, "7") {
		t.Fatalf("prod shows %q: want the single-org document", out)
	}
	if out, _ := run(orgs, "show", "--org", "sandbox"); !strings.Contains(out, "3") || strings.Contains(out, "7") {
		t.Fatalf("sandbox shows %q", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "shards", "sandbox", "state.json")); err != nil {
		t.Fatalf("sandbox's document: %v", err)
	}
	for _, tc := range []struct {
		cfg  string
		args []string
		want string
	}{
		{orgs, []string{"show"}, "orgs prod, sandbox"},
		{orgs, []string{"show", "--org", "qa"}, "no such org"},
		{single, []string{"show", "--org", "prod"}, "has no orgs"},
	} {
		if out, code := run(tc.cfg, tc.args...); code == 0 || !strings.Contains(out, tc.want) {
			t.Errorf("%v: exit %d %q, want a refusal saying %q", tc.args, code, out, tc.want)
		}
	}
}
