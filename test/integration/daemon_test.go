package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/testenv"
)

func TestNoopRefusesASecondInstanceOnOneStateFile(t *testing.T) {
	dir := t.TempDir()
	cfg := fmt.Sprintf("state:\n  file: {path: %s/state.json}\n", dir)
	a := start(t, "a", cfg)
	a.waitReady(t, 200, "leader", slack)
	b := start(t, "b", cfg)
	select {
	case <-b.done:
		if b.err == nil {
			t.Fatal("a second noop instance on the same state file started")
		}
		out := b.out.String()
		if !strings.Contains(out, dir+"/state.json.instance.lock") || !strings.Contains(out, fmt.Sprintf("pid %d", a.cmd.Process.Pid)) {
			t.Fatalf("the refusal does not name the lock and the other instance:\n%s", out)
		}
	case <-time.After(slack):
		t.Fatal("a second noop instance on the same state file kept running")
	}
}

func TestCheckCommand(t *testing.T) {
	bin := binary(t)
	example := filepath.Join(testenv.RepoRoot(t), "configs", "sf2loki.example.yaml")
	out, err := exec.Command(bin, "check", "--config", example).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "configuration is valid") {
		t.Fatalf("check on the example: %v\n%s", err, out)
	}
	for name, tc := range map[string]struct{ yaml, want string }{
		"unknown key": {"coordinate:\n  type: s3_lease\n  s3_lease: {bukcet: x}\n",
			"coordinate.s3_lease.bukcet: unknown key; did you mean coordinate.s3_lease.bucket?"},
		"empty lease bucket": {"coordinate: {type: s3_lease}\nstate: {store: s3, s3: {bucket: b}}\n",
			"coordinate.s3_lease.bucket: required when coordinate.type is s3_lease"},
		"empty state bucket": {"state: {store: gcs}\n", "state.gcs.bucket: required when state.store is gcs"},
		"same object": {"coordinate: {type: gcs_lease, gcs_lease: {bucket: b, object_name: o}}\nstate: {store: gcs, gcs: {bucket: b, object_name: o}}\n",
			"must be separate objects"},
		"renew >= ttl/2": {"coordinate: {type: file_lease, file_lease: {ttl: 10s, renew_interval: 5s}}\n", "must be below ttl/2"},
		"gcs renew < 1s": {"coordinate: {type: gcs_lease, gcs_lease: {bucket: b, ttl: 1s, renew_interval: 200ms}}\nstate: {store: gcs, gcs: {bucket: c}}\n", "at least 1s"},
		"zero ttl":       {"coordinate: {type: s3_lease, s3_lease: {bucket: b, ttl: 0s}}\nstate: {store: s3, s3: {bucket: c}}\n", "must be > 0"},
		"undefined var":  {"state: {file: {path: \"${SF2LOKI_TEST_NO_SUCH_VAR}\"}}\n", "${SF2LOKI_TEST_NO_SUCH_VAR} is not set"},
		"bad coordinate": {"coordinate: {type: etcd}\n", `coordinate.type: "etcd" is not one of`},
	} {
		bad := filepath.Join(t.TempDir(), "bad.yaml")
		if err := os.WriteFile(bad, []byte(tc.yaml), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "check", "--config", bad)
		out, err = cmd.CombinedOutput()
		if cmd.ProcessState.ExitCode() != 2 || !strings.Contains(string(out), tc.want) {
			t.Errorf("check on %s: exit %d (%v), want 2 and %q:\n%s", name, cmd.ProcessState.ExitCode(), err, tc.want, out)
		}
	}
}

// TestReadmeHAPair runs the README's local HA pair configuration as written.
func TestReadmeHAPair(t *testing.T) {
	readme, err := os.ReadFile(filepath.Join(testenv.RepoRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(readme), "<<'YAML'\n")
	cfg, _, ok2 := strings.Cut(rest, "\nYAML\n")
	if !ok || !ok2 {
		t.Fatal("README has no YAML heredoc for the HA pair")
	}
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "ha"), 0o755); err != nil {
		t.Fatal(err)
	}
	// The README's paths are relative to the working directory.
	binary(t)
	t.Chdir(dir)
	a := start(t, "a", cfg)
	b := start(t, "b", cfg)
	deadline := time.Now().Add(6*time.Second + slack)
	for {
		ca, _ := a.readyz()
		cb, _ := b.readyz()
		if (ca == 200) != (cb == 200) && ca != 0 && cb != 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("README pair: /readyz %d and %d, want one leader and one standby", ca, cb)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
