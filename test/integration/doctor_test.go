package integration

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// publicDir returns a fresh directory every user may read and traverse.
func publicDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sf2loki-doctor-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = filepath.Walk(dir, func(p string, _ os.FileInfo, _ error) error { return os.Chmod(p, 0o755) })
		_ = os.RemoveAll(dir)
	})
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestDoctorNamesFilePermissionProblems runs `sf2loki doctor` as an
// unprivileged user (root ignores file modes) against a state directory it
// cannot enter and a lease file owned by another user with mode 0600.
func TestDoctorNamesFilePermissionProblems(t *testing.T) {
	pub := publicDir(t)
	bin := filepath.Join(pub, "sf2loki")
	data, err := os.ReadFile(binary(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	locked := filepath.Join(pub, "locked")
	if err := os.Mkdir(locked, 0o000); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(locked, 0o000); err != nil {
		t.Fatal(err)
	}
	leaseDir := filepath.Join(pub, "lease")
	if err := os.Mkdir(leaseDir, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(leaseDir, 0o777); err != nil {
		t.Fatal(err)
	}
	lease := filepath.Join(leaseDir, "leader.lease")
	if err := os.WriteFile(lease, []byte(`{"holder":""}`), 0o600); err != nil { // owned by root
		t.Fatal(err)
	}
	cfg := filepath.Join(pub, "sf2loki.yaml")
	yaml := fmt.Sprintf("coordinate: {type: file_lease, file_lease: {path: %s}}\nstate: {file: {path: %s/state.json}}\n", lease, locked)
	if err := os.WriteFile(cfg, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "doctor", "--config", cfg)
	if os.Geteuid() == 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	}
	out, _ := cmd.CombinedOutput()
	if cmd.ProcessState.ExitCode() != 1 {
		t.Fatalf("doctor exited %d, want 1:\n%s", cmd.ProcessState.ExitCode(), out)
	}
	var state, coord string
	for _, line := range strings.Split(string(out), "\n") {
		switch {
		case strings.HasPrefix(line, "state "):
			state = line
		case strings.HasPrefix(line, "coordinator "):
			coord = line
		}
	}
	if !strings.Contains(state, "FAIL") || !strings.Contains(state, "write access to the directory") {
		t.Fatalf("state row does not name the directory permission:\n%s", out)
	}
	// (Only another user's 0600 file is unreadable; as a non-root developer
	// the file is our own.)
	if os.Geteuid() == 0 && (!strings.Contains(coord, "FAIL") || !strings.Contains(coord, "read access to the file")) {
		t.Fatalf("coordinator row does not name the unreadable lease file:\n%s", out)
	}
}
