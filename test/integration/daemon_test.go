package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
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

// commands returns a block's command lines: comments and heredoc bodies
// dropped.
func commands(block string) []string {
	var out []string
	heredoc := ""
	for line := range strings.Lines(block) {
		line = strings.TrimSpace(line)
		if heredoc != "" {
			if line == heredoc {
				heredoc = ""
			}
			continue
		}
		if cmd, _, _ := strings.Cut(line, "#"); strings.TrimSpace(cmd) != "" {
			out = append(out, strings.TrimSpace(cmd))
		}
		if _, tag, ok := strings.Cut(line, "<<'"); ok {
			heredoc, _, _ = strings.Cut(tag, "'")
		}
	}
	return out
}

// TestReadmeCommandsAreExercised: every command in the README is run by
// .ci/run or by a test here (the HA pair block verbatim, make demo).
func TestReadmeCommandsAreExercised(t *testing.T) {
	ci, err := os.ReadFile(filepath.Join(testenv.RepoRoot(t), ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	byTest := map[string]string{"make demo": "TestMakeDemo"}
	for _, c := range commands(haPairBlock(t)) {
		byTest[c] = "TestReadmeHAPair"
	}
	// The install block runs on a release's files: make release-snapshot
	// runs it on the snapshot's (test/release).
	for _, block := range testenv.CodeBlocks(t, "README.md", "sh") {
		if strings.Contains(block, "checksums.txt") {
			for _, c := range commands(block) {
				byTest[c] = "TestReadmeInstall"
			}
		}
	}
	// The quick start's check, doctor and run (and its export) run on the
	// README's configuration against the fakes in internal/app.
	for _, block := range testenv.CodeBlocks(t, "README.md", "sh") {
		if strings.Contains(block, "SF_CLIENT_ID") {
			for _, c := range commands(block) {
				byTest[c] = "TestReadmeQuickStartPassesCheck, TestReadmeQuickStartDoctorAndRun (internal/app)"
			}
		}
	}
	n := 0
	for _, block := range testenv.CodeBlocks(t, "README.md", "sh") {
		for _, c := range commands(block) {
			n++
			if _, ok := byTest[c]; ok || strings.Contains(string(ci), "\n"+c+"\n") {
				continue
			}
			t.Errorf("README command %q is run neither by .ci/run nor by a test", c)
		}
	}
	if n < 8 {
		t.Fatalf("found only %d README commands", n)
	}
}

// haPairBlock is the README block that starts the local HA pair.
func haPairBlock(t *testing.T) string {
	t.Helper()
	for _, b := range testenv.CodeBlocks(t, "README.md", "sh") {
		if strings.Contains(b, "<<'YAML'") {
			return b
		}
	}
	t.Fatal("README has no HA pair block")
	return ""
}

// TestReadmeHAPair runs the README's HA pair block as written, in a fresh
// directory, with `make build` standing for the binary already built.
func TestReadmeHAPair(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(binary(t), filepath.Join(dir, "bin", "sf2loki")); err != nil {
		t.Fatal(err)
	}
	script := "set -e\nmake() { test \"$*\" = build; }\ntrap 'kill $(jobs -p) 2>/dev/null' EXIT\n" + haPairBlock(t)
	cmd := exec.Command("bash", "-c", script)
	cmd.Dir = dir
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "SF2LOKI_") })
	out, err := cmd.CombinedOutput()
	lines := strings.Split(string(out), "\n")
	if err != nil || !slices.Contains(lines, "leader") || !slices.Contains(lines, "standby") {
		t.Fatalf("README HA pair (%v): want one leader and one standby:\n%s", err, out)
	}
}

// TestMakeDemo runs `make demo` for a few seconds: VictoriaLogs and two
// replicas, one leading, the synthetic events stored.
func TestMakeDemo(t *testing.T) {
	testenv.Binary(t, "victoria-logs")
	cmd := exec.Command("make", "demo")
	cmd.Dir = testenv.RepoRoot(t)
	cmd.Env = append(slices.DeleteFunc(os.Environ(), func(kv string) bool { return strings.HasPrefix(kv, "SF2LOKI_") }),
		"DEMO_DIR="+t.TempDir(), "DEMO_SECONDS=6")
	out, err := cmd.CombinedOutput()
	got := string(out)
	after, _, _ := strings.Cut(got[strings.LastIndex(got, "after 6s:")+1:], "\n")
	if err != nil || !strings.Contains(after, "leader") || !strings.Contains(after, "standby") || !strings.Contains(got, "synthetic:LoginEvent") {
		t.Fatalf("make demo (%v): want one leader, one standby and stored checkpoints:\n%s", err, got)
	}
	// The metrics command names the leader's address, whichever replica leads.
	leader := regexp.MustCompile(`(?m)^\s+(replica-[ab])\s+http://(\S+)\s.*/readyz: leader$`).FindStringSubmatch(got)
	metrics := regexp.MustCompile(`(?m)^Metrics:\s+curl -s (\S+)/metrics .*$`).FindStringSubmatch(got)
	if leader == nil || metrics == nil || metrics[1] != leader[2] || !strings.Contains(metrics[0], leader[1]) {
		t.Fatalf("make demo: the Metrics line %q does not name the leader %q:\n%s", metrics, leader, got)
	}
}
