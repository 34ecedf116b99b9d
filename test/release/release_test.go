//go:build release

// Package release checks what `make release-snapshot` (goreleaser with
// .goreleaser.yaml) left in dist/, and with `make image-test` the release
// image built from it. It is behind the release build tag: goreleaser is a
// large build, so `make test` does not run it.
package release

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"debug/buildinfo"
	"debug/elf"
	"debug/macho"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/sf2loki/sf2loki/internal/testenv"
)

// artifact is one entry of goreleaser's dist/artifacts.json.
type artifact struct {
	Name   string         `json:"name"`
	Path   string         `json:"path"`
	Goos   string         `json:"goos"`
	Goarch string         `json:"goarch"`
	Type   string         `json:"type"`
	Extra  map[string]any `json:"extra"`
}

// metadata is dist/metadata.json.
type metadata struct {
	ProjectName string `json:"project_name"`
	Version     string `json:"version"`
	Commit      string `json:"commit"`
}

// platforms are the archives a release carries.
var platforms = []struct{ goos, goarch string }{
	{"linux", "amd64"}, {"linux", "arm64"}, {"darwin", "amd64"}, {"darwin", "arm64"},
}

// inArchive are the files every archive holds beside the binary.
var inArchive = []string{"README.md", "configs/sf2loki.example.yaml", "configs/sf2loki.schema.json",
	"docs/operations.md", "deploy/prometheus/sf2loki-rules.yaml", "deploy/grafana/sf2loki-health.json"}

func dist(t *testing.T) (root string, meta metadata, arts []artifact) {
	t.Helper()
	root = testenv.RepoRoot(t)
	readJSON(t, filepath.Join(root, "dist", "metadata.json"), &meta)
	readJSON(t, filepath.Join(root, "dist", "artifacts.json"), &arts)
	for i := range arts {
		if !filepath.IsAbs(arts[i].Path) {
			arts[i].Path = filepath.Join(root, arts[i].Path)
		}
	}
	return root, meta, arts
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v: run `make release-snapshot` first", err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func find(arts []artifact, typ, goos, goarch string) *artifact {
	for i := range arts {
		a := &arts[i]
		if a.Type == typ && a.Goos == goos && a.Goarch == goarch {
			return a
		}
	}
	return nil
}

// TestReleaseSnapshot checks the snapshot's archives, checksums and SBOMs,
// and runs the binary built for this machine.
func TestReleaseSnapshot(t *testing.T) {
	root, meta, arts := dist(t)
	if meta.ProjectName != "sf2loki" || !strings.Contains(meta.Version, "snapshot") {
		t.Fatalf("metadata.json: %+v, want a sf2loki snapshot", meta)
	}
	head, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	if meta.Commit != strings.TrimSpace(string(head)) {
		t.Fatalf("the snapshot is of commit %q, the checkout is at %s: goreleaser reads no commit where the "+
			"checkout has no git remote (add one, or build in a clone)", meta.Commit, head)
	}
	sums := checksums(t, arts)
	for _, p := range platforms {
		t.Run(p.goos+"_"+p.goarch, func(t *testing.T) {
			archive := find(arts, "Archive", p.goos, p.goarch)
			if archive == nil {
				t.Fatalf("no archive for %s/%s", p.goos, p.goarch)
			}
			if want := "sf2loki_" + meta.Version + "_" + p.goos + "_" + p.goarch + ".tar.gz"; archive.Name != want {
				t.Errorf("archive %s, want %s", archive.Name, want)
			}
			if got, want := sums[archive.Name], fileSHA256(t, archive.Path); got != want {
				t.Errorf("checksums.txt has %q for %s, the file hashes to %s", got, archive.Name, want)
			}
			files := untar(t, archive.Path)
			bin, ok := files["sf2loki"]
			if !ok {
				t.Fatalf("%s holds no sf2loki binary: %v", archive.Name, keys(files))
			}
			for _, f := range inArchive {
				if _, ok := files[f]; !ok {
					t.Errorf("%s lacks %s", archive.Name, f)
				}
			}
			path := filepath.Join(t.TempDir(), "sf2loki")
			if err := os.WriteFile(path, bin, 0o755); err != nil {
				t.Fatal(err)
			}
			checkBinary(t, path, p.goos, p.goarch)
			checkSBOM(t, arts, meta, p.goos, p.goarch)
			if p.goos == runtime.GOOS && p.goarch == runtime.GOARCH {
				out, err := exec.Command(path, "version").CombinedOutput()
				if err != nil {
					t.Fatalf("sf2loki version: %v\n%s", err, out)
				}
				if !strings.Contains(string(out), "sf2loki "+meta.Version+"\n") || !strings.Contains(string(out), "commit: "+meta.Commit+"\n") {
					t.Errorf("sf2loki version printed\n%s\nwant version %s and commit %s", out, meta.Version, meta.Commit)
				}
				t.Logf("%s/%s: sf2loki version:\n%s", p.goos, p.goarch, out)
			}
		})
	}
}

// checksums reads dist/checksums.txt and checks every line's file.
func checksums(t *testing.T, arts []artifact) map[string]string {
	t.Helper()
	var sumsPath string
	for _, a := range arts {
		if a.Type == "Checksum" {
			sumsPath = a.Path
		}
	}
	if sumsPath == "" {
		t.Fatal("no checksum file among the artifacts")
	}
	b, err := os.ReadFile(sumsPath)
	if err != nil {
		t.Fatal(err)
	}
	sums := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		sum, name, ok := strings.Cut(line, "  ")
		if !ok || len(sum) != 64 {
			t.Fatalf("checksums.txt: malformed line %q", line)
		}
		sums[name] = sum
	}
	for _, a := range arts {
		if a.Type == "SBOM" {
			if got, want := sums[a.Name], fileSHA256(t, a.Path); got != want {
				t.Errorf("checksums.txt has %q for %s, the file hashes to %s", got, a.Name, want)
			}
		}
	}
	return sums
}

// checkBinary checks the executable's format and architecture and the
// build the Go toolchain recorded in it.
func checkBinary(t *testing.T, path, goos, goarch string) {
	t.Helper()
	switch goos {
	case "linux":
		f, err := elf.Open(path)
		if err != nil {
			t.Fatalf("not an ELF executable: %v", err)
		}
		defer f.Close()
		want := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}[goarch]
		if f.Machine != want {
			t.Errorf("ELF machine %v, want %v", f.Machine, want)
		}
		for _, p := range f.Progs {
			if p.Type == elf.PT_INTERP {
				t.Error("the linux binary is dynamically linked (PT_INTERP); want static")
			}
		}
	case "darwin":
		f, err := macho.Open(path)
		if err != nil {
			t.Fatalf("not a Mach-O executable: %v", err)
		}
		defer f.Close()
		want := map[string]macho.Cpu{"amd64": macho.CpuAmd64, "arm64": macho.CpuArm64}[goarch]
		if f.Cpu != want {
			t.Errorf("Mach-O CPU %v, want %v", f.Cpu, want)
		}
	}
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		t.Fatalf("no Go build information: %v", err)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	for k, v := range map[string]string{"GOOS": goos, "GOARCH": goarch, "CGO_ENABLED": "0", "-trimpath": "true"} {
		if settings[k] != v {
			t.Errorf("build setting %s=%q, want %q", k, settings[k], v)
		}
	}
	if info.Path != "github.com/sf2loki/sf2loki/cmd/sf2loki" {
		t.Errorf("main package %s", info.Path)
	}
	roots := false
	for _, d := range info.Deps {
		roots = roots || d.Path == "golang.org/x/crypto/x509roots/fallback"
	}
	if !roots {
		t.Error("the binary lacks golang.org/x/crypto/x509roots/fallback: the scratch image would have no root certificates")
	}
}

// checkSBOM checks the platform's CycloneDX document: it names the release
// and lists the modules linked into the binary.
func checkSBOM(t *testing.T, arts []artifact, meta metadata, goos, goarch string) {
	t.Helper()
	// goreleaser records an SBOM without its platform: find it by name.
	var a *artifact
	name := "sf2loki_" + meta.Version + "_" + goos + "_" + goarch + ".cdx.json"
	for i := range arts {
		if arts[i].Type == "SBOM" && arts[i].Name == name {
			a = &arts[i]
		}
	}
	if a == nil {
		t.Fatalf("no SBOM %s among the artifacts", name)
	}
	var bom struct {
		BOMFormat string `json:"bomFormat"`
		Metadata  struct {
			Component struct {
				Name    string `json:"name"`
				Version string `json:"version"`
			} `json:"component"`
		} `json:"metadata"`
		Components []struct {
			Name    string `json:"name"`
			Version string `json:"version"`
			PURL    string `json:"purl"`
		} `json:"components"`
	}
	readJSON(t, a.Path, &bom)
	if bom.BOMFormat != "CycloneDX" || bom.Metadata.Component.Version != meta.Version {
		t.Errorf("%s: format %q, component %+v; want CycloneDX of version %s", a.Name, bom.BOMFormat, bom.Metadata.Component, meta.Version)
	}
	names := map[string]bool{}
	for _, c := range bom.Components {
		names[c.Name] = true
	}
	for _, want := range []string{"github.com/hamba/avro/v2", "golang.org/x/crypto/x509roots/fallback", "google.golang.org/grpc"} {
		if !names[want] {
			t.Errorf("%s does not list %s (%d components)", a.Name, want, len(bom.Components))
		}
	}
}

func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(h.Sum(nil))
}

func untar(t *testing.T, path string) map[string][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string][]byte{}
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return files
		}
		if err != nil {
			t.Fatal(err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			t.Fatal(err)
		}
		if h.Name == "sf2loki" && h.Mode&0o111 == 0 {
			t.Errorf("the binary's mode is %o, not executable", h.Mode)
		}
		files[h.Name] = b
	}
}

func keys(m map[string][]byte) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	return ks
}

// TestReadmeInstall runs the README's install commands on the snapshot's
// files, as a user runs them on a release's: the checksum check, the
// archive for this machine, the binary's version. The image's line is
// checked for what TestImage runs: the configuration at
// /etc/sf2loki/config.yaml, the state in /var/lib/sf2loki, port 8080, the
// release image.
func TestReadmeInstall(t *testing.T) {
	_, meta, arts := dist(t)
	var block string
	for _, b := range testenv.CodeBlocks(t, "README.md", "sh") {
		if strings.Contains(b, "checksums.txt") {
			block = b
		}
	}
	if block == "" {
		t.Fatal("README.md has no install block (one naming checksums.txt)")
	}
	dir := t.TempDir()
	for _, a := range arts {
		if a.Type == "Archive" || a.Type == "Checksum" {
			copyFile(t, a.Path, filepath.Join(dir, a.Name), 0o644)
		}
	}
	ran := 0
	for _, line := range strings.Split(strings.ReplaceAll(block, "\\\n", " "), "\n") {
		cmd, _, _ := strings.Cut(line, " #")
		cmd = strings.TrimSpace(cmd)
		if cmd == "" {
			continue
		}
		if strings.HasPrefix(cmd, "docker run ") {
			for _, want := range []string{":/etc/sf2loki/config.yaml:ro", " -v sf2loki-state:/var/lib/sf2loki ", " -p 8080:8080 ", " ghcr.io/sf2loki/sf2loki:<version>"} {
				if !strings.Contains(cmd+" ", want) {
					t.Errorf("the README's %q lacks %q, which the image (TestImage) needs", cmd, want)
				}
			}
			continue
		}
		cmd = strings.ReplaceAll(cmd, "<version>", meta.Version)
		cmd = strings.ReplaceAll(cmd, "linux_amd64", "linux_"+runtime.GOARCH)
		c := exec.Command("sh", "-c", cmd)
		c.Dir = dir
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("README: %s: %v\n%s", cmd, err, out)
		}
		if strings.HasSuffix(cmd, " version") && !strings.Contains(string(out), "sf2loki "+meta.Version+"\n") {
			t.Errorf("README: %s printed\n%s\nwant version %s", cmd, out, meta.Version)
		}
		t.Logf("$ %s\n%s", cmd, out)
		ran++
	}
	if ran < 3 {
		t.Fatalf("ran %d README install commands, want the checksum check, the unpacking and the version", ran)
	}
}
