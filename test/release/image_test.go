//go:build release

package release

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
)

// TestImage builds the release image as goreleaser's dockers_v2 does (the
// Dockerfile and extra_files of .goreleaser.yaml, the binary under
// <os>/<arch>/ in the context), with podman instead of docker buildx, from the
// snapshot's linux binary for this machine; then it checks the image's
// configuration and runs it: `version`, and the daemon itself from its
// default command with a mounted configuration, its default state directory
// and `sf2loki health` as the health check does.
//
// PODMAN_RUNTIME selects podman's OCI runtime (runc where crun refuses the
// host's cgroups). The build uses the vfs storage driver, which works
// without overlay support.
func TestImage(t *testing.T) {
	root, meta, arts := dist(t)
	if _, err := exec.LookPath("podman"); err != nil {
		t.Fatal("podman is not installed (Debian: apt-get install podman): ", err)
	}
	bin := find(arts, "Binary", "linux", runtime.GOARCH)
	if bin == nil {
		t.Fatalf("no linux/%s binary in dist/", runtime.GOARCH)
	}
	var cfg struct {
		DockersV2 []struct {
			Dockerfile string   `yaml:"dockerfile"`
			ExtraFiles []string `yaml:"extra_files"`
		} `yaml:"dockers_v2"`
	}
	b, err := os.ReadFile(filepath.Join(root, ".goreleaser.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil || len(cfg.DockersV2) != 1 {
		t.Fatalf(".goreleaser.yaml dockers_v2: %v (%d images)", err, len(cfg.DockersV2))
	}
	ctxDir := t.TempDir()
	platform := "linux/" + runtime.GOARCH
	copyFile(t, bin.Path, filepath.Join(ctxDir, platform, "sf2loki"), 0o755)
	copyFile(t, filepath.Join(root, cfg.DockersV2[0].Dockerfile), filepath.Join(ctxDir, "Dockerfile"), 0o644)
	for _, f := range cfg.DockersV2[0].ExtraFiles {
		copyFile(t, filepath.Join(root, f), filepath.Join(ctxDir, f), 0o644)
	}

	tag := "localhost/sf2loki-image-test:" + strings.NewReplacer("+", "-").Replace(meta.Version)
	podman(t, "build", "--platform", platform, "--format", "docker", "-t", tag, ctxDir)
	t.Cleanup(func() { _, _ = podmanRun("rmi", "-f", tag) })

	var inspect []struct {
		Architecture string
		Config       struct {
			User         string
			Entrypoint   []string
			Cmd          []string
			ExposedPorts map[string]any
			Healthcheck  *healthcheck
		}
		// podman reports a docker-format image's health check here.
		Healthcheck *healthcheck
		RootFS      struct{ Layers []string }
	}
	if err := json.Unmarshal([]byte(podman(t, "image", "inspect", tag)), &inspect); err != nil || len(inspect) != 1 {
		t.Fatalf("podman image inspect: %v", err)
	}
	c := inspect[0].Config
	if c.User != "10001:10001" || !slices.Equal(c.Entrypoint, []string{"/usr/local/bin/sf2loki"}) ||
		!slices.Equal(c.Cmd, []string{"run", "--config", "/etc/sf2loki/config.yaml"}) || c.ExposedPorts["8080/tcp"] == nil {
		t.Errorf("image configuration %+v: want uid 10001, the sf2loki entrypoint, run --config /etc/sf2loki/config.yaml, port 8080", c)
	}
	hc := c.Healthcheck
	if hc == nil {
		hc = inspect[0].Healthcheck
	}
	if hc == nil || !slices.Equal(hc.Test, []string{"CMD", "/usr/local/bin/sf2loki", "health"}) {
		t.Errorf("health check %+v, want CMD /usr/local/bin/sf2loki health", hc)
	}
	if inspect[0].Architecture != runtime.GOARCH {
		t.Errorf("image architecture %s, want %s", inspect[0].Architecture, runtime.GOARCH)
	}
	t.Logf("image %s: %d layers, user %s", tag, len(inspect[0].RootFS.Layers), c.User)

	out := podman(t, runArgs("--rm", tag, "version")...)
	if !strings.Contains(out, "sf2loki "+meta.Version+"\n") {
		t.Errorf("the image's `sf2loki version`:\n%s\nwant %s", out, meta.Version)
	}

	// The daemon from the image's default command: a file lease and the
	// checkpoint file in the image's state directory (uid 10001 must be
	// able to write there), the synthetic source, a Loki that does not
	// answer (pushes are retried; the replica still leads and is healthy).
	conf := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(conf, []byte(`coordinate:
  type: file_lease
  file_lease: {ttl: 6s, renew_interval: 2s}
sources:
  synthetic: {rate: 5}
sink:
  loki: {url: "http://127.0.0.1:9/loki/api/v1/push"}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("sf2loki-image-test-%d", time.Now().UnixNano())
	podman(t, runArgs("-d", "--name", name, "-v", conf+":/etc/sf2loki/config.yaml:ro", tag)...)
	t.Cleanup(func() {
		if t.Failed() {
			logs, _ := podmanRun("logs", name)
			t.Logf("container logs:\n%s", logs)
		}
		_, _ = podmanRun("rm", "-f", name)
	})
	var health string
	deadline := time.Now().Add(60 * time.Second)
	for {
		health, err = podmanRun("exec", name, "/usr/local/bin/sf2loki", "health", "--url", "http://127.0.0.1:8080/readyz")
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Second)
	}
	if err != nil {
		t.Fatalf("sf2loki health --url …/readyz in the container: %v\n%s", err, health)
	}
	ls, err := podmanRun("exec", name, "/usr/local/bin/sf2loki", "health")
	if err != nil {
		t.Fatalf("sf2loki health in the container: %v\n%s", err, ls)
	}
	t.Logf("the daemon in the image leads and is healthy: %s", strings.TrimSpace(health))
}

type healthcheck struct{ Test []string }

// runArgs is `podman run` with explicit resource limits (the runtime then
// sets what it was asked, never the host's own limits) and no network.
func runArgs(args ...string) []string {
	base := []string{"run", "--network", "none", "--ulimit", "nofile=4096:4096", "--ulimit", "nproc=4096:4096"}
	if rt := os.Getenv("PODMAN_RUNTIME"); rt != "" {
		base = append([]string{"--runtime", rt}, base...)
	}
	return append(base, args...)
}

func podman(t *testing.T, args ...string) string {
	t.Helper()
	out, err := podmanRun(args...)
	if err != nil {
		t.Fatalf("podman %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func podmanRun(args ...string) (string, error) {
	out, err := exec.Command("podman", append([]string{"--storage-driver", "vfs"}, args...)...).CombinedOutput()
	return string(out), err
}

func copyFile(t *testing.T, src, dst string, mode os.FileMode) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(dst, b, mode); err != nil {
		t.Fatal(err)
	}
}
