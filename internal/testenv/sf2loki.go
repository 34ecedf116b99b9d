package testenv

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// Sf2loki builds cmd/sf2loki once per test process into a temp dir and
// returns the binary's path. A package that calls it removes the binary
// in its TestMain (Main): a test process leaves none behind.
func Sf2loki(t testing.TB) string {
	t.Helper()
	root := RepoRoot(t)
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "sf2loki-bin-")
		if err != nil {
			buildErr = err
			return
		}
		binPath = filepath.Join(dir, "sf2loki")
		// The flags of make build and the Dockerfile, so the three share
		// the build cache.
		cmd := exec.Command("go", "build", "-tags", "disable_grpc_modules", "-trimpath", "-o", binPath, "./cmd/sf2loki")
		cmd.Dir = root
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			buildErr = fmt.Errorf("go build: %w\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// Main is a TestMain for a package that calls Sf2loki: it runs the tests,
// removes the binary and exits with the tests' code.
func Main(m *testing.M) {
	code := m.Run()
	if err := RemoveSf2loki(); err != nil {
		fmt.Fprintln(os.Stderr, "removing the built sf2loki:", err)
	}
	os.Exit(code)
}

// RemoveSf2loki removes the binary Sf2loki built, if it built one; a
// later Sf2loki builds it again. Not for use while a test may still call
// Sf2loki.
func RemoveSf2loki() error {
	if binPath == "" {
		return nil
	}
	err := os.RemoveAll(filepath.Dir(binPath))
	buildOnce, binPath, buildErr = sync.Once{}, "", nil
	return err
}
