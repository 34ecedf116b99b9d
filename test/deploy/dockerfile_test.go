package deploy

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/testenv"
)

// TestDockerfile checks the image recipe without a container engine: a
// multi-stage build onto distroless or scratch, non-root uid 10001, the
// /healthz health check through `sf2loki health`, the run command; then it
// runs the Dockerfile's own go build line and proves the result is a static
// binary that reports the version it was given.
func TestDockerfile(t *testing.T) {
	root := testenv.RepoRoot(t)
	data, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	df := string(data)
	froms := regexp.MustCompile(`(?m)^FROM (\S+)`).FindAllStringSubmatch(df, -1)
	if len(froms) < 2 {
		t.Fatalf("not a multi-stage build: %v", froms)
	}
	if final := froms[len(froms)-1][1]; !strings.HasPrefix(final, "gcr.io/distroless/static") && final != "scratch" {
		t.Errorf("the final stage is %s, want distroless static or scratch", final)
	}
	for _, want := range []string{
		"\nUSER 10001:10001\n",
		`CMD ["/usr/local/bin/sf2loki", "health"]`,
		`CMD ["run", "--config", "/etc/sf2loki/config.yaml"]`,
		"EXPOSE 8080",
	} {
		if !strings.Contains(df, want) {
			t.Errorf("the Dockerfile lacks %q", want)
		}
	}
	// The default state.file.path works in the image: its directory is made
	// in the build stage and copied in owned by uid 10001 (distroless has no
	// shell, and 10001 cannot create it), and the example mounts a volume there.
	defaults, _, err := config.Load("")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Dir(defaults.State.File.Path)
	for _, want := range []string{
		"\nRUN mkdir -p /out/state/" + filepath.Base(dir) + "\n",
		"\nCOPY --from=build --chown=10001:10001 /out/state/ " + filepath.Dir(dir) + "/\n",
		"-v sf2loki-state:" + dir + " ",
	} {
		if !strings.Contains(df, want) {
			t.Errorf("the Dockerfile lacks %q: the default state.file.path %s would not be writable by uid 10001", want, defaults.State.File.Path)
		}
	}
	build := regexp.MustCompile(`(?m)^RUN (CGO_ENABLED=0 go build .*)$`).FindStringSubmatch(df)
	if build == nil {
		t.Fatal("no `RUN CGO_ENABLED=0 go build` line")
	}
	out := t.TempDir()
	line := strings.ReplaceAll(build[1], "/out/", out+"/")
	cmd := exec.Command("sh", "-c", line)
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "VERSION=v9.9.9-test", "COMMIT=0123abc")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s: %v\n%s", line, err, b)
	}
	bin := filepath.Join(out, "sf2loki")
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Fatal("the binary has a dynamic loader (PT_INTERP): not static")
		}
	}
	if libs, _ := f.ImportedLibraries(); len(libs) > 0 {
		t.Fatalf("the binary links %v: not static", libs)
	}
	v, err := exec.Command(bin, "version").CombinedOutput()
	if err != nil || !strings.Contains(string(v), "v9.9.9-test") || !strings.Contains(string(v), "0123abc") {
		t.Fatalf("version: %v\n%s", err, v)
	}
}
