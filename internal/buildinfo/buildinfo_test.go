package buildinfo

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

func TestUserAgentIsProductSlashVersion(t *testing.T) {
	defer func(v string) { version = v }(version)
	for v, want := range map[string]string{
		"dev":                    "sf2loki/dev",
		"v1.4.0":                 "sf2loki/v1.4.0",
		"v1.4.0-3-gabcdef-dirty": "sf2loki/v1.4.0-3-gabcdef-dirty",
		"1.4 (patched)":          "sf2loki/1.4--patched-",
		"":                       "sf2loki/unknown",
	} {
		version = v
		if got := UserAgent(); got != want {
			t.Errorf("version %q: UserAgent() = %q, want %q", v, got, want)
		}
	}
}

// TestEveryBuildStampsThisPackage: the -X flags of make build, the image
// and the release name this package's variables, so that a released
// binary's version (sf2loki version, the User-Agent) is not "dev".
func TestEveryBuildStampsThisPackage(t *testing.T) {
	re := regexp.MustCompile(`-X\s+(\S+)\.(\w+)=`)
	for _, f := range []string{"Makefile", "Dockerfile", ".goreleaser.yaml"} {
		b, err := os.ReadFile(filepath.Join("..", "..", f))
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, m := range re.FindAllStringSubmatch(string(b), -1) {
			pkg := strings.Replace(m[1], "$(PKG)", "github.com/sf2loki/sf2loki", 1)
			if !strings.HasPrefix(pkg, "github.com/sf2loki/sf2loki") {
				continue // a tool's own stamp
			}
			if pkg != "github.com/sf2loki/sf2loki/internal/buildinfo" || (m[2] != "version" && m[2] != "commit") {
				t.Errorf("%s stamps %s.%s, which is not this package's version or commit", f, pkg, m[2])
			}
			seen[m[2]] = true
		}
		if !seen["version"] || !seen["commit"] {
			t.Errorf("%s does not stamp both the version and the commit (saw %v)", f, seen)
		}
	}
}
