// Package testenv starts the real servers that adapter and integration tests
// run against (versitygw for S3, fake-gcs-server for GCS, etcd and
// kube-apiserver for Kubernetes Leases, VictoriaLogs as the Loki push peer),
// on random loopback ports, and stops them when the test ends. It also builds
// the sf2loki binary once per test process, makes test CAs and RSA keys, and
// reads the repository's files (the code blocks of its documents).
//
// Test support only: production code must not import it. Binaries come from
// .bin/ (installed by `make tools`). When a binary is missing the test is
// skipped locally with a message naming `make tools`, and fails in CI
// (CI=true or SF2LOKI_REQUIRE_INTEGRATION=1): a missing server never turns
// into a silently skipped test there.
//
// Imports: config (the test configurations it builds) and the Loki adapter
// (the dry run's printed lines it decodes); test support only: production
// code must not import it.
package testenv

import (
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Required reports whether a missing server must fail the test.
func Required() bool {
	return os.Getenv("CI") == "true" || os.Getenv("SF2LOKI_REQUIRE_INTEGRATION") == "1"
}

// Missing skips the test (locally) or fails it (CI) because what names is
// unavailable.
func Missing(t testing.TB, what string) {
	t.Helper()
	msg := fmt.Sprintf("%s is not installed: run `make tools`", what)
	if Required() {
		t.Fatal(msg + " (CI requires every test server)")
	}
	t.Skip(msg)
}

// Long skips a long multi-process test under -short, except where every
// test is required (CI): there -short must not hide it.
func Long(t testing.TB, what string) {
	t.Helper()
	if testing.Short() {
		if Required() {
			t.Fatalf("%s is required in CI; run without -short", what)
		}
		t.Skip(what + " (-short)")
	}
}

// RepoRoot returns the module root (the directory holding go.mod).
func RepoRoot(t testing.TB) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("testenv: no go.mod above the working directory")
		}
		dir = parent
	}
}

// Binary returns the path of a test server binary in .bin/, or skips/fails
// the test when it is missing.
func Binary(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(RepoRoot(t), ".bin", name)
	if st, err := os.Stat(p); err != nil || st.IsDir() {
		Missing(t, p)
	}
	return p
}

// FreePort returns a loopback TCP port that was free a moment ago, below
// the ephemeral range and never the same twice in one process.
func FreePort(t testing.TB) int {
	t.Helper()
	low := ephemeralLow()
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 1000 {
		p := minPort + rand.IntN(low-minPort)
		if handedOut[p] {
			continue
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			continue
		}
		_ = l.Close()
		handedOut[p] = true
		return p
	}
	t.Fatalf("no free port in %d–%d", minPort, low-1)
	return 0
}

// minPort is the lowest port FreePort hands out.
const minPort = 10000

var (
	portsMu   sync.Mutex
	handedOut = map[int]bool{}
)

// ephemeralLow is the start of the kernel's ephemeral port range (32768 if
// it cannot be read): the ports outgoing connections take their local end
// from. FreePort stays below it, so no connection made by any process can
// take the port between FreePort and the server's bind.
func ephemeralLow() int {
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if f := strings.Fields(string(data)); err == nil && len(f) == 2 {
		if n, err := strconv.Atoi(f[0]); err == nil && n > minPort+1000 {
			return n
		}
	}
	return 32768
}

// CodeBlocks returns the bodies of the ```lang fenced blocks in the
// repository file rel (a Markdown document).
func CodeBlocks(t testing.TB, rel, lang string) []string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(RepoRoot(t), rel))
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	rest := string(data)
	for {
		_, after, ok := strings.Cut(rest, "```"+lang+"\n")
		if !ok {
			return blocks
		}
		block, tail, _ := strings.Cut(after, "```")
		blocks = append(blocks, block)
		rest = tail
	}
}
