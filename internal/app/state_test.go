package app

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sf2loki/sf2loki/internal/adapters/file"
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
	var exit *ExitError
	if errors.As(err, &exit) {
		return out.String() + err.Error(), exit.Code
	}
	return out.String() + err.Error(), 1
}

// backends returns a configuration file per state store (noop coordinator).
func backends(t *testing.T) map[string]string {
	s3srv, gcssrv := testenv.StartS3(t), testenv.StartGCS(t)
	s3Env(t)
	t.Setenv("STORAGE_EMULATOR_HOST", strings.TrimPrefix(gcssrv.URL, "http://"))
	return map[string]string{
		"file": writeConfig(t, fmt.Sprintf("state: {file: {path: %s/state.json}}\n", t.TempDir())),
		"s3":   writeConfig(t, fmt.Sprintf("state: {store: s3, s3: {bucket: %s, endpoint_url: %s}}\n", s3srv.NewBucket(t), s3srv.Endpoint)),
		"gcs":  writeConfig(t, fmt.Sprintf("state: {store: gcs, gcs: {bucket: %s}}\n", gcssrv.NewBucket(t))),
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
			must("", "set", "pubsub:/event/B", "r2")
			must("", "set", "pubsub:/event/A", "r1")
			must("", "set", "eventlogfile:Login", "2026-03-01")
			if out := must("", "show"); out != "eventlogfile:Login\t2026-03-01\npubsub:/event/A\tr1\npubsub:/event/B\tr2\n3 keys\n" {
				t.Fatalf("show:\n%s", out)
			}
			if out := must("", "show", "--key", "pubsub:*", "--json"); !strings.Contains(out, `"pubsub:/event/A": "r1"`) || strings.Contains(out, "eventlogfile") {
				t.Fatalf("show --key --json:\n%s", out)
			}
			must("", "delete", "pubsub:/event/B")
			if out := must("", "export"); out != "{\n  \"eventlogfile:Login\": \"2026-03-01\",\n  \"pubsub:/event/A\": \"r1\"\n}\n" {
				t.Fatalf("export:\n%s", out)
			}
			must(`{"apexlog":"x"}`, "import", "-")
			if out := must("", "show", "--key", "apexlog"); !strings.Contains(out, "apexlog\tx") {
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

func TestStateRefusesWhileALeaderMayRun(t *testing.T) {
	dir := t.TempDir()
	leasePath := filepath.Join(dir, "leader.lease")
	cfg := writeConfig(t, fmt.Sprintf("coordinate: {type: file_lease, file_lease: {path: %s}}\nstate: {file: {path: %s/state.json}}\n", leasePath, dir))
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
	noop := writeConfig(t, fmt.Sprintf("state: {file: {path: %s/noop.json}}\n", dir))
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
