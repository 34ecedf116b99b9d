// Package integration runs the built sf2loki binary as several OS processes
// against real backends: failover, graceful handover, the noop instance
// lock and the check command.
package integration

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/testenv"
)

// Lease timing for the file and S3 runs; GCS renews at most once a second.
var (
	ttl   = 2 * time.Second
	renew = 500 * time.Millisecond
)

const (
	// slack absorbs process start-up and scheduling on a busy machine in
	// upper bounds only.
	slack = 4 * time.Second
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// binary builds bin/sf2loki's source once into a temp dir.
func binary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "sf2loki-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "sf2loki")
		cmd := exec.Command("go", "build", "-o", binPath, "./cmd/sf2loki")
		cmd.Dir = testenv.RepoRoot(t)
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// daemon is one running sf2loki process.
type daemon struct {
	name string
	addr string
	cmd  *exec.Cmd
	out  *testenv.Buffer
	done chan struct{} // closed when the process has exited
	err  error         // its exit error, once done is closed
}

// start runs `sf2loki run` with cfg (YAML) and env.
func start(t *testing.T, name, cfg string, env ...string) *daemon {
	t.Helper()
	port := testenv.FreePort(t)
	path := filepath.Join(t.TempDir(), name+".yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	d := &daemon{name: name, addr: fmt.Sprintf("127.0.0.1:%d", port), out: &testenv.Buffer{}, done: make(chan struct{})}
	d.cmd = exec.Command(binary(t), "run", "--config", path)
	d.cmd.Env = append(os.Environ(), append(env, "SF2LOKI_SERVICE__HEALTH_ADDR="+d.addr, "SF2LOKI_SERVICE__LOG_FORMAT=text")...)
	d.cmd.Stdout, d.cmd.Stderr = d.out, d.out
	if err := d.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		d.err = d.cmd.Wait()
		close(d.done)
	}()
	t.Cleanup(func() {
		_ = d.cmd.Process.Kill()
		<-d.done
		if t.Failed() {
			t.Logf("--- %s output ---\n%s", d.name, d.out.String())
		}
	})
	return d
}

var client = &http.Client{Timeout: time.Second}

func (d *daemon) readyz() (int, string) {
	resp, err := client.Get("http://" + d.addr + "/readyz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

func (d *daemon) metric(t *testing.T, name string) float64 {
	t.Helper()
	resp, err := client.Get("http://" + d.addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if f := strings.Fields(sc.Text()); len(f) == 2 && f[0] == name {
			v, _ := strconv.ParseFloat(f[1], 64)
			return v
		}
	}
	t.Fatalf("%s: no metric %s", d.name, name)
	return 0
}

// waitReady waits until d answers /readyz with code and returns how long
// that took.
func (d *daemon) waitReady(t *testing.T, code int, body string, limit time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		c, b := d.readyz()
		if c == code && b == body {
			return time.Since(start)
		}
		select {
		case <-d.done:
			t.Fatalf("%s exited (%v) while waiting for /readyz %d %q:\n%s", d.name, d.err, code, body, d.out.String())
		default:
		}
		if time.Since(start) > limit {
			t.Fatalf("%s: /readyz %d %q after %s, want %d %q", d.name, c, b, limit, code, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// failover runs the scenario of every backend: two daemons, one leads;
// SIGKILL hands over within ttl+renew; SIGTERM within renew+1s.
func failover(t *testing.T, ttl, renew time.Duration, cfg func(holder string) string, env ...string) {
	a := start(t, "a", cfg("a"), env...)
	a.waitReady(t, 200, "leader", ttl+slack)
	b := start(t, "b", cfg("b"), env...)
	b.waitReady(t, 503, "standby", slack)
	if a.metric(t, "sf2loki_leader") != 1 || b.metric(t, "sf2loki_leader") != 0 {
		t.Fatalf("sf2loki_leader: a=%v b=%v, want 1 and 0", a.metric(t, "sf2loki_leader"), b.metric(t, "sf2loki_leader"))
	}
	time.Sleep(2*renew + renew/2) // b has seen a renew; stop off b's poll phase

	if err := a.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	took := b.waitReady(t, 200, "leader", ttl+renew+slack)
	t.Logf("SIGKILL: standby ready after %s (ttl %s + renew %s = %s)", took.Round(time.Millisecond), ttl, renew, ttl+renew)
	if b.metric(t, "sf2loki_leader") != 1 || b.metric(t, "sf2loki_lease_epoch") != 2 {
		t.Fatalf("after takeover: leader=%v epoch=%v", b.metric(t, "sf2loki_leader"), b.metric(t, "sf2loki_lease_epoch"))
	}

	c := start(t, "c", cfg("c"), env...)
	c.waitReady(t, 503, "standby", slack)
	time.Sleep(2*renew + renew/2)
	if err := b.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	took = c.waitReady(t, 200, "leader", renew+time.Second+slack)
	t.Logf("SIGTERM: standby ready after %s (renew %s + 1s)", took.Round(time.Millisecond), renew)
	select {
	case <-b.done:
		if b.err != nil {
			t.Fatalf("b exited with %v after SIGTERM, want 0", b.err)
		}
	case <-time.After(slack):
		t.Fatal("b did not exit after SIGTERM")
	}
}

func timing(ttl, renew time.Duration) string {
	return fmt.Sprintf("    ttl: %s\n    renew_interval: %s\n", ttl, renew)
}

func TestFailoverFileLease(t *testing.T) {
	dir := t.TempDir()
	failover(t, ttl, renew, func(holder string) string {
		return fmt.Sprintf(`coordinate:
  type: file_lease
  file_lease:
    path: %s/lease.json
    holder_id: %s
%sstate:
  store: file
  file: {path: %s/state.json}
`, dir, holder, timing(ttl, renew), dir)
	})
}

func TestFailoverS3Lease(t *testing.T) {
	srv := testenv.StartS3(t)
	bucket := srv.NewBucket(t)
	failover(t, ttl, renew, func(holder string) string {
		return fmt.Sprintf(`coordinate:
  type: s3_lease
  s3_lease:
    bucket: %s
    key: ha/leader.lease
    endpoint_url: %s
    holder_id: %s
%sstate:
  store: s3
  s3: {bucket: %s, key: ha/state.json, endpoint_url: %s}
`, bucket, srv.Endpoint, holder, timing(ttl, renew), bucket, srv.Endpoint)
	}, "AWS_ACCESS_KEY_ID="+testenv.S3AccessKey, "AWS_SECRET_ACCESS_KEY="+testenv.S3SecretKey, "AWS_REGION="+testenv.S3Region)
}

func TestFailoverGCSLease(t *testing.T) {
	srv := testenv.StartGCS(t)
	bucket := srv.NewBucket(t)
	// GCS allows about one write per second to an object: renew every 1s.
	failover(t, 3*time.Second, time.Second, func(holder string) string {
		return fmt.Sprintf(`coordinate:
  type: gcs_lease
  gcs_lease:
    bucket: %s
    object_name: ha/leader.lease
    holder_id: %s
%sstate:
  store: gcs
  gcs: {bucket: %s, object_name: ha/state.json}
`, bucket, holder, timing(3*time.Second, time.Second), bucket)
	}, "STORAGE_EMULATOR_HOST="+strings.TrimPrefix(srv.URL, "http://"))
}

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
