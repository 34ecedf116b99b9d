package deploy

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/sf2loki/sf2loki/internal/testenv"
)

// releaseImage is the one image name releases publish (.goreleaser.yaml) and
// every manifest, the chart and the docs run.
const releaseImage = "ghcr.io/sf2loki/sf2loki"

// imageRef finds references to an sf2loki image in text: a registry host
// (a dotted name or localhost, with an optional port), a path ending in the
// repository sf2loki, and its tag or digest.
var imageRef = regexp.MustCompile(`(?i)(?:^|[\s"'\x60(=])((?:[a-z0-9-]+(?:\.[a-z0-9-]+)+|localhost)(?::\d+)?(?:/[a-z0-9._-]+)*/sf2loki(?:[:@][A-Za-z0-9._{}$<>-]+)?)(?:[\s"'\x60),]|$)`)

// imageValue finds what a manifest runs: the value of an image key (YAML or
// JSON) or of a Helm values repository.
var imageValue = regexp.MustCompile(`(?m)^[ \t]*-?[ \t]*"?(?:image|repository)"?[ \t]*:[ \t]*"?([^\s"',]*)`)

// artifactRegistryMirror is the only other form allowed: Cloud Run pulls
// from Artifact Registry (or Docker Hub), so its example names a remote
// repository "ghcr" whose upstream is ghcr.io.
var artifactRegistryMirror = regexp.MustCompile(`^[a-z0-9-]+-docker\.pkg\.dev/[a-z0-9-]+/ghcr/sf2loki/sf2loki(:|$)`)

// releaseRef says whether ref is the release image, with a tag or digest,
// or its Artifact Registry mirror.
func releaseRef(ref string) bool {
	name := ref
	if i := strings.IndexAny(ref, "@"); i >= 0 {
		name = ref[:i]
	}
	if i := strings.LastIndex(name, ":"); i > strings.LastIndex(name, "/") {
		name = name[:i]
	}
	return name == releaseImage || artifactRegistryMirror.MatchString(ref)
}

// TestOneImageName checks that the manifests, the chart, the docs, the
// release configuration and its workflow all name the image releases
// publish, and that the chart's default tag is one a release pushes.
func TestOneImageName(t *testing.T) {
	root := testenv.RepoRoot(t)
	seen := map[string]int{}
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		if d.IsDir() {
			if slices.Contains([]string{".git", ".bin", "bin", "dist", "third_party", "node_modules"}, rel) {
				return filepath.SkipDir
			}
			return nil
		}
		switch filepath.Ext(path) {
		case ".yaml", ".yml", ".json", ".md", ".tpl", ".sh", ".tf", "":
		default:
			return nil
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		for _, m := range imageRef.FindAllStringSubmatch(string(b), -1) {
			ref := m[1]
			if host, _, _ := strings.Cut(ref, "/"); host == "github.com" || strings.HasSuffix(host, ".githubusercontent.com") {
				continue // the source repository, not an image
			}
			seen[rel]++
			if !releaseRef(ref) {
				t.Errorf("%s names the image %s; releases publish %s", rel, ref, releaseImage)
			}
		}
		if rel == ".goreleaser.yaml" || strings.HasPrefix(rel, ".github/") {
			return nil // the release configuration's keys are not images to run
		}
		for _, m := range imageValue.FindAllStringSubmatch(string(b), -1) {
			ref := m[1]
			if strings.Contains(ref, "{{") || strings.HasPrefix(ref, "$") || strings.HasPrefix(ref, "<") || ref == "" {
				continue // a template, a variable or a placeholder
			}
			if strings.HasPrefix(ref, "{") {
				continue // a section (the chart's schema of its image value), not a name
			}
			seen[rel]++
			if !releaseRef(ref) {
				t.Errorf("%s runs the image %s; releases publish %s", rel, ref, releaseImage)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		".goreleaser.yaml", "deploy/kubernetes/deployment.yaml",
		"deploy/ecs-fargate/task-definition.json", "deploy/cloud-run/service.yaml",
		"deploy/helm/sf2loki/values.yaml", "deploy/README.md",
	} {
		if seen[want] == 0 {
			t.Errorf("%s names no sf2loki image; want %s", want, releaseImage)
		}
	}

	var chart struct {
		AppVersion string `yaml:"appVersion"`
	}
	readYAML(t, filepath.Join(root, "deploy/helm/sf2loki/Chart.yaml"), &chart)
	// goreleaser tags the image with .Version, the git tag without its "v".
	if !regexp.MustCompile(`^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`).MatchString(chart.AppVersion) {
		t.Errorf("Chart.yaml appVersion %q is not a tag a release pushes (vX.Y.Z is tagged X.Y.Z)", chart.AppVersion)
	}
}

// TestReleaseDockerfile checks the release image's recipe against the
// source build's: the same user, port, health check and command, FROM
// scratch, the binary from goreleaser's per-platform context, and every
// other file it copies listed in the release configuration's extra_files.
func TestReleaseDockerfile(t *testing.T) {
	root := testenv.RepoRoot(t)
	var cfg struct {
		DockersV2 []struct {
			Dockerfile string   `yaml:"dockerfile"`
			ExtraFiles []string `yaml:"extra_files"`
			Images     []string `yaml:"images"`
			Platforms  []string `yaml:"platforms"`
		} `yaml:"dockers_v2"`
	}
	readYAML(t, filepath.Join(root, ".goreleaser.yaml"), &cfg)
	if len(cfg.DockersV2) != 1 {
		t.Fatalf("dockers_v2: %d images, want 1", len(cfg.DockersV2))
	}
	img := cfg.DockersV2[0]
	if !slices.Equal(img.Images, []string{releaseImage}) || !slices.Equal(img.Platforms, []string{"linux/amd64", "linux/arm64"}) {
		t.Errorf("dockers_v2 images %v platforms %v, want [%s] on linux/amd64 and linux/arm64", img.Images, img.Platforms, releaseImage)
	}
	release := readLines(t, filepath.Join(root, img.Dockerfile))
	source := readLines(t, filepath.Join(root, "Dockerfile"))
	if !slices.Contains(release, "FROM scratch") || !slices.Contains(release, "COPY $TARGETPLATFORM/sf2loki /usr/local/bin/sf2loki") {
		t.Errorf("%s: want FROM scratch and the binary from $TARGETPLATFORM/sf2loki", img.Dockerfile)
	}
	for _, prefix := range []string{"USER ", "EXPOSE ", "HEALTHCHECK ", "ENTRYPOINT ", "CMD "} {
		if a, b := withPrefix(release, prefix), withPrefix(source, prefix); !slices.Equal(a, b) || len(a) == 0 {
			t.Errorf("%s %q, Dockerfile %q: the release image and the source build must run alike", img.Dockerfile, a, b)
		}
	}
	for _, line := range withPrefix(release, "COPY ") {
		fields := strings.Fields(line)
		src := fields[len(fields)-2]
		if strings.HasPrefix(src, "$TARGETPLATFORM/") {
			continue
		}
		listed := false
		for _, f := range img.ExtraFiles {
			dir := strings.TrimSuffix(src, "/")
			listed = listed || f == dir || strings.HasPrefix(f, dir+"/")
		}
		if !listed {
			t.Errorf("%s copies %s, which dockers_v2.extra_files does not put in the build context", img.Dockerfile, src)
		}
	}
}

func readYAML(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func readLines(t *testing.T, path string) []string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(string(b), "\n")
}

func withPrefix(lines []string, prefix string) []string {
	var out []string
	for _, l := range lines {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return out
}
