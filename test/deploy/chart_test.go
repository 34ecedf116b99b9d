package deploy

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sf2loki/sf2loki/internal/chartschema"
	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/testenv"
)

const (
	chartDir         = "deploy/helm/sf2loki"
	chartSchemaFile  = "deploy/helm/sf2loki/values.schema.json"
	chartReadme      = "deploy/helm/sf2loki/README.md"
	configSchemaFile = "configs/sf2loki.schema.json"
)

// helm runs the helm of .bin with args, in the repository root, with
// empty helm homes.
func helm(t *testing.T, args ...string) ([]byte, error) {
	t.Helper()
	cmd := exec.Command(testenv.Binary(t, "helm"), args...)
	cmd.Dir = testenv.RepoRoot(t)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	return cmd.CombinedOutput()
}

// writeValues writes a values file and returns its path.
func writeValues(t *testing.T, values string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(p, []byte(values), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// renderRelease renders the chart as release name in namespace ns.
func renderRelease(t *testing.T, name, ns string, args ...string) []map[string]any {
	t.Helper()
	out, err := helm(t, append([]string{"template", name, chartDir, "--namespace", ns}, args...)...)
	if err != nil {
		t.Fatalf("helm template %s %v: %v\n%s", name, args, err, out)
	}
	return decodeAll(t, "helm template "+name, out)
}

// objectsNamed returns "Kind/name" of every rendered object.
func objectsNamed(objs []map[string]any) []string {
	var out []string
	for _, o := range objs {
		out = append(out, toString(o["kind"])+"/"+toString(get(o, "metadata", "name")))
	}
	return out
}

// storeNames loads a rendered configuration as sf2loki run does and returns
// every Lease and object it uses (each org's and the membership's):
// "lease <namespace>/<name>" for a Kubernetes Lease, "s3://bucket/key" or
// "gs://bucket/name" for an object. env is the pods' environment.
func storeNames(t *testing.T, cfg string, env []string) []string {
	t.Helper()
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	c, _, err := config.Load(path)
	if err != nil {
		t.Fatalf("load the rendered configuration: %v\n%s", err, cfg)
	}
	shards := c.Shards()
	if m := c.MembersConfig(); m != nil {
		shards = append(shards, m)
	}
	var names []string
	for _, s := range shards {
		switch s.Coordinate.Type {
		case config.CoordinateK8sLease:
			names = append(names, "lease "+s.Coordinate.K8sLease.Namespace+"/"+s.Coordinate.K8sLease.Name)
		case config.CoordinateS3Lease:
			names = append(names, "s3://"+s.Coordinate.S3Lease.Bucket+"/"+s.Coordinate.S3Lease.Key)
		case config.CoordinateGCSLease:
			names = append(names, "gs://"+s.Coordinate.GCSLease.Bucket+"/"+s.Coordinate.GCSLease.ObjectName)
		}
		if s.ShardName == "" && len(shards) > 1 {
			continue // the membership document has no checkpoints
		}
		switch s.State.Store {
		case config.StoreS3:
			names = append(names, "s3://"+s.State.S3.Bucket+"/"+s.State.S3.Key)
		case config.StoreGCS:
			names = append(names, "gs://"+s.State.GCS.Bucket+"/"+s.State.GCS.ObjectName)
		}
	}
	return names
}

// releaseNames renders one release and returns its objects' names, the
// Leases and objects its configuration uses, and the Leases its Role
// allows.
func releaseNames(t *testing.T, name, ns string, args ...string) (objects, store, role []string) {
	t.Helper()
	objs := renderRelease(t, name, ns, args...)
	k := kinds(objs)
	cfg, _ := get(k["ConfigMap"], "data", "config.yaml").(string)
	c := get(k["Deployment"], "spec", "template", "spec", "containers", 0)
	store = storeNames(t, cfg, append(envOf(get(c, "env")), secretEnvOf(get(c, "env"))...))
	if r, ok := k["Role"]; ok {
		for _, l := range roleLeases(r) {
			role = append(role, "lease "+ns+"/"+l)
		}
	}
	return objectsNamed(objs), store, role
}

// TestHelmTwoReleasesShareNothing renders two releases of the chart into
// one namespace with the same values, for each lease type and for several
// orgs: no object, Lease or state object is shared. The release named
// sf2loki keeps the names chart 0.1.0 gave every release.
func TestHelmTwoReleasesShareNothing(t *testing.T) {
	const ns = "sf2loki-two"
	for _, values := range []string{"k8s-lease-values.yaml", "s3-lease-values.yaml", "gcs-lease-values.yaml", "multi-org-values.yaml"} {
		t.Run(values, func(t *testing.T) {
			f := filepath.Join(chartDir, "ci", values)
			// The ci files set the lease object's key themselves; blank it
			// to get the chart's name.
			var unset []string
			switch values {
			case "s3-lease-values.yaml", "monitoring-values.yaml":
				unset = []string{"--set", "config.coordinate.s3_lease.key="}
			case "gcs-lease-values.yaml":
				unset = []string{"--set", "config.coordinate.gcs_lease.object_name=", "--set", "config.state.gcs.object_name="}
			}
			objA, storeA, roleA := releaseNames(t, "sf2loki-prod", ns, append([]string{"-f", f}, unset...)...)
			objB, storeB, roleB := releaseNames(t, "sf2loki-uat", ns, append([]string{"-f", f}, unset...)...)
			if len(storeA) < 2 || len(storeA) != len(storeB) {
				t.Fatalf("stores %q and %q: want a lease and a state object each", storeA, storeB)
			}
			for _, pair := range []struct {
				what string
				a, b []string
			}{{"objects", objA, objB}, {"Leases and state objects", storeA, storeB}} {
				for _, n := range pair.a {
					if slices.Contains(pair.b, n) {
						t.Errorf("both releases use %s (%s)", n, pair.what)
					}
				}
			}
			// Each release's Role allows its own Leases.
			for _, r := range []struct{ store, role []string }{{storeA, roleA}, {storeB, roleB}} {
				for _, n := range r.store {
					if strings.HasPrefix(n, "lease ") && !slices.Contains(r.role, n) {
						t.Errorf("the Role allows %q, not the Lease %s the configuration uses", r.role, n)
					}
				}
			}
			t.Logf("sf2loki-prod: %q; sf2loki-uat: %q", storeA, storeB)
		})
	}
	t.Run("the release sf2loki keeps chart 0.1.0's names", func(t *testing.T) {
		_, store, _ := releaseNames(t, "sf2loki", ns, "-f", filepath.Join(chartDir, "ci", "k8s-lease-values.yaml"))
		want := []string{"lease " + ns + "/sf2loki-leader", "s3://my-sf2loki-state/sf2loki/state.json"}
		if !slices.Equal(store, want) {
			t.Errorf("the release sf2loki uses %q, want %q (chart 0.1.0's)", store, want)
		}
		_, store, _ = releaseNames(t, "sf2loki", ns, "-f", filepath.Join(chartDir, "ci", "s3-lease-values.yaml"), "--set", "config.coordinate.s3_lease.key=")
		want = []string{"s3://my-sf2loki-state/sf2loki/leader.lease", "s3://my-sf2loki-state/sf2loki/state.json"}
		if !slices.Equal(store, want) {
			t.Errorf("the release sf2loki on s3_lease uses %q, want %q (sf2loki's defaults)", store, want)
		}
	})
	t.Run("names set in values are kept", func(t *testing.T) {
		_, store, role := releaseNames(t, "logs", ns, "-f", filepath.Join(chartDir, "ci", "k8s-lease-values.yaml"),
			"--set", "config.coordinate.k8s_lease.name=sf2loki-leader", "--set", "config.state.s3.key=sf2loki/state.json")
		want := []string{"lease " + ns + "/sf2loki-leader", "s3://my-sf2loki-state/sf2loki/state.json"}
		if !slices.Equal(store, want) || !slices.Equal(role, want[:1]) {
			t.Errorf("with the names set, the release uses %q (Role %q), want %q", store, role, want)
		}
		// Chart 0.1.0 put sf2loki-leader in the configuration whatever
		// k8s_lease.name said, and the name in the Role.
		_, store, role = releaseNames(t, "logs", ns, "-f", filepath.Join(chartDir, "ci", "k8s-lease-values.yaml"),
			"--set", "config.coordinate.k8s_lease.name=logs-lease")
		want = []string{"lease " + ns + "/logs-lease", "s3://my-sf2loki-state/logs/state.json"}
		if !slices.Equal(store, want) || !slices.Equal(role, want[:1]) {
			t.Errorf("with k8s_lease.name logs-lease, the release uses %q (Role %q), want %q", store, role, want)
		}
	})
}

// TestHelmLintWithSchema: helm lint passes for the defaults completed with
// a bucket and for every values file in ci/, and the chart has a schema
// for it to check.
func TestHelmLintWithSchema(t *testing.T) {
	if _, err := os.Stat(filepath.Join(testenv.RepoRoot(t), chartSchemaFile)); err != nil {
		t.Fatalf("the chart has no values schema: %v", err)
	}
	files, err := filepath.Glob(filepath.Join(testenv.RepoRoot(t), chartDir, "ci", "*-values.yaml"))
	if err != nil || len(files) < 4 {
		t.Fatalf("ci values files: %v %v", files, err)
	}
	runs := [][]string{{"--set", "config.state.s3.bucket=my-sf2loki-state"}}
	for _, f := range files {
		runs = append(runs, []string{"-f", f})
	}
	for _, args := range runs {
		out, err := helm(t, append([]string{"lint", "--strict", chartDir, "--namespace", "sf2loki"}, args...)...)
		if err != nil || !strings.Contains(string(out), "0 chart(s) failed") {
			t.Errorf("helm lint %v: %v\n%s", args, err, out)
		}
	}
}

// TestHelmSchemaRefusesTypos: a misspelt value, at the top, in a chart
// section or in the sf2loki configuration, is refused with its name by
// helm template (and so by install, upgrade and lint); a value of the
// wrong type too.
func TestHelmSchemaRefusesTypos(t *testing.T) {
	for _, tc := range []struct{ set, want string }{
		{"replicaCont=3", "replicaCont"},
		{"podAnotations.a=b", "podAnotations"},
		{"image.tagg=1.0.0", "tagg"},
		{"serviceAccount.annotation.a=b", "annotation"},
		{"extraVolume[0].name=jwt", "extraVolume"},
		{"config.salesfroce.client_id=x", "salesfroce"},
		{"config.sources.evenlogfile.event_types={Login}", "evenlogfile"},
		{"config.state.s3.bukcet=x", "bukcet"},
		{"replicaCount=two", "replicaCount"},
		{"image.pullPolicy=Sometimes", "pullPolicy"},
		{"config.sources.synthetic.rate=fast", "rate"},
	} {
		t.Run(tc.set, func(t *testing.T) {
			out, err := helm(t, "template", "sf2loki", chartDir, "--namespace", "sf2loki",
				"--set", "config.state.s3.bucket=my-sf2loki-state", "--set", tc.set)
			if err == nil {
				t.Fatalf("helm template accepted --set %s", tc.set)
			}
			if !strings.Contains(string(out), "schema") || !strings.Contains(string(out), tc.want) {
				t.Errorf("--set %s: the error does not name %q as a schema violation:\n%s", tc.set, tc.want, out)
			}
		})
	}
}

// TestHelmSchemaAcceptsWhatSf2lokiAccepts: values sf2loki check accepts
// (a numeric tenant and user, a ${VAR} for a number or a boolean) pass the
// chart's schema too, so a values file of chart 0.1.0 still upgrades.
func TestHelmSchemaAcceptsWhatSf2lokiAccepts(t *testing.T) {
	values := writeValues(t, `config:
  state: {store: s3, s3: {bucket: my-sf2loki-state}}
  sources:
    synthetic: {rate: "${RATE}"}
  sink:
    loki: {url: "https://logs.example.com/loki/api/v1/push", tenant_id: 12345, basic_auth_user: 987}
  service:
    telemetry: {enabled: "${TELEMETRY}"}
`)
	if out, err := helm(t, "template", "sf2loki", chartDir, "--namespace", "sf2loki", "-f", values); err != nil {
		t.Errorf("helm template refused values sf2loki accepts: %v\n%s", err, out)
	}
}

// TestChartSchemaInSync: the config part of the chart's values schema is
// configs/sf2loki.schema.json converted (make chart-files writes it).
func TestChartSchemaInSync(t *testing.T) {
	root := testenv.RepoRoot(t)
	cfg, err := os.ReadFile(filepath.Join(root, configSchemaFile))
	if err != nil {
		t.Fatal(err)
	}
	chart, err := os.ReadFile(filepath.Join(root, chartSchemaFile))
	if err != nil {
		t.Fatal(err)
	}
	want, err := chartschema.Merge(cfg, chart)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(want, chart) {
		t.Errorf("%s does not hold %s as make chart-files writes it: run make chart-files", chartSchemaFile, configSchemaFile)
	}
}

// chartValue is one value the chart README must list: a leaf of
// values.yaml (a map the schema closes is descended into).
type chartValue struct {
	key, typ, def string
}

func schemaType(s map[string]any) string {
	switch t := s["type"].(type) {
	case string:
		return t
	case []any:
		var parts []string
		for _, p := range t {
			parts = append(parts, toString(p))
		}
		return strings.Join(parts, " or ")
	}
	return "any"
}

func chartValues(t *testing.T) []chartValue {
	t.Helper()
	root := testenv.RepoRoot(t)
	var values yaml.Node
	data, err := os.ReadFile(filepath.Join(root, chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if err := yaml.Unmarshal(data, &values); err != nil {
		t.Fatal(err)
	}
	var schema map[string]any
	data, err = os.ReadFile(filepath.Join(root, chartSchemaFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(data, &schema); err != nil {
		t.Fatal(err)
	}
	var out []chartValue
	var walk func(prefix string, n *yaml.Node, s map[string]any)
	walk = func(prefix string, n *yaml.Node, s map[string]any) {
		props, _ := s["properties"].(map[string]any)
		if n.Kind == yaml.MappingNode && s["additionalProperties"] == false && props != nil {
			for i := 0; i+1 < len(n.Content); i += 2 {
				k := n.Content[i].Value
				sub, _ := props[k].(map[string]any)
				key := k
				if prefix != "" {
					key = prefix + "." + k
				}
				walk(key, n.Content[i+1], sub)
			}
			return
		}
		var v any
		if err := n.Decode(&v); err != nil {
			t.Fatal(err)
		}
		def, _ := json.Marshal(v)
		out = append(out, chartValue{prefix, schemaType(s), string(def)})
	}
	walk("", values.Content[0], schema)
	// Every value the schema knows outside config is in values.yaml.
	var top map[string]any
	if err := values.Decode(&top); err != nil {
		t.Fatal(err)
	}
	props, _ := schema["properties"].(map[string]any)
	for k := range props {
		if _, ok := top[k]; !ok && k != "global" {
			t.Errorf("values.yaml has no %s, which the schema allows: give it its default there", k)
		}
	}
	return out
}

var readmeRow = regexp.MustCompile("^\\| `([^`]+)` \\| ([^|]+) \\| `([^`]*)` \\| (.+) \\|$")

// TestChartReadmeListsEveryValue: the chart README's values table has one
// row for every value of values.yaml (the config keys it sets included),
// with the schema's type and the default values.yaml gives, and a
// description; and no row for a value that does not exist.
func TestChartReadmeListsEveryValue(t *testing.T) {
	values := chartValues(t)
	if len(values) < 40 {
		t.Fatalf("found only %d values in values.yaml", len(values))
	}
	rows := map[string][]string{}
	for _, line := range strings.Split(readFile(t, chartReadme), "\n") {
		if m := readmeRow.FindStringSubmatch(line); m != nil && !strings.Contains(m[2], "`") {
			rows[m[1]] = m[2:]
		}
	}
	known := map[string]bool{}
	for _, v := range values {
		known[v.key] = true
		r, ok := rows[v.key]
		switch {
		case !ok:
			t.Errorf("%s does not list the value %s (type %s, default %s)", chartReadme, v.key, v.typ, v.def)
		case strings.TrimSpace(r[0]) != v.typ:
			t.Errorf("%s: %s has the type %q, the schema says %q", chartReadme, v.key, r[0], v.typ)
		case r[1] != v.def:
			t.Errorf("%s: %s defaults to `%s`, values.yaml says `%s`", chartReadme, v.key, r[1], v.def)
		case len(strings.TrimSpace(r[2])) < 10:
			t.Errorf("%s: %s has no description", chartReadme, v.key)
		}
	}
	for k := range rows {
		if !known[k] {
			t.Errorf("%s lists %s, which values.yaml does not have", chartReadme, k)
		}
	}
}

func readFile(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(testenv.RepoRoot(t), rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestHelmPodValues renders extraVolumes, extraVolumeMounts,
// imagePullSecrets, podLabels, nameOverride and fullnameOverride.
func TestHelmPodValues(t *testing.T) {
	values := writeValues(t, `
config:
  state:
    s3: {bucket: my-sf2loki-state}
nameOverride: salesforce-logs
fullnameOverride: sf-logs
imagePullSecrets: [{name: my-registry}]
podLabels: {team: security, app.kubernetes.io/name: not-the-selector}
extraVolumes:
  - name: jwt
    secret: {secretName: sf2loki-jwt, defaultMode: 0440}
extraVolumeMounts:
  - {name: jwt, mountPath: /etc/sf2loki-jwt, readOnly: true}
`)
	objs := renderRelease(t, "sf2loki", "sf2loki", "-f", values)
	k := kinds(objs)
	dep := k["Deployment"]
	pod := get(dep, "spec", "template", "spec")
	for _, o := range objs {
		if name := toString(get(o, "metadata", "name")); !strings.HasPrefix(name, "sf-logs") {
			t.Errorf("%s %s is not named after fullnameOverride sf-logs", o["kind"], name)
		}
	}
	if got := toString(get(pod, "imagePullSecrets")); got != `[{"name":"my-registry"}]` {
		t.Errorf("imagePullSecrets %s", got)
	}
	if got := toString(get(pod, "volumes")); got != `[{"configMap":{"name":"sf-logs"},"name":"config"},{"name":"jwt","secret":{"defaultMode":288,"secretName":"sf2loki-jwt"}}]` {
		t.Errorf("volumes %s", got)
	}
	if got := toString(get(pod, "containers", 0, "volumeMounts")); got != `[{"mountPath":"/etc/sf2loki","name":"config","readOnly":true},{"mountPath":"/etc/sf2loki-jwt","name":"jwt","readOnly":true}]` {
		t.Errorf("volumeMounts %s", got)
	}
	selector := toString(get(dep, "spec", "selector", "matchLabels"))
	if selector != `{"app.kubernetes.io/instance":"sf2loki","app.kubernetes.io/name":"salesforce-logs"}` {
		t.Errorf("selector %s: want nameOverride as app.kubernetes.io/name", selector)
	}
	labels := get(dep, "spec", "template", "metadata", "labels").(map[string]any)
	if labels["team"] != "security" || labels["app.kubernetes.io/name"] != "salesforce-logs" {
		t.Errorf("pod labels %v: want podLabels, and the selector's labels where they clash", labels)
	}
	if got := toString(get(k["Service"], "spec", "selector")); got != selector {
		t.Errorf("the Service selects %s, the Deployment %s", got, selector)
	}
	if got := toString(get(k["RoleBinding"], "subjects", 0, "name")); got != "sf-logs" {
		t.Errorf("the RoleBinding binds %s, want the ServiceAccount sf-logs", got)
	}
}

// TestChartReadmeJWTSecret renders the chart README's JWT example (its
// yaml block with extraVolumes) and runs sf2loki check on the rendered
// configuration with a key where the Secret is mounted: the configuration
// names the mounted file.
func TestChartReadmeJWTSecret(t *testing.T) {
	var block string
	for _, b := range testenv.CodeBlocks(t, chartReadme, "yaml") {
		if strings.Contains(b, "extraVolumes:") {
			block = b
		}
	}
	if block == "" {
		t.Fatalf("%s has no yaml block with extraVolumes", chartReadme)
	}
	var secret, file string
	for _, b := range testenv.CodeBlocks(t, chartReadme, "sh") {
		for _, w := range shellWords(t, b) {
			if kv, ok := strings.CutPrefix(w, "--from-file="); ok {
				file, _, _ = strings.Cut(kv, "=")
			}
		}
		if words := shellWords(t, b); slices.Contains(words, "secret") {
			secret = words[slices.Index(words, "generic")+1]
		}
	}
	objs := renderRelease(t, "sf2loki", "sf2loki", "-f", writeValues(t, block))
	k := kinds(objs)
	pod := get(k["Deployment"], "spec", "template", "spec")
	cfg, _ := get(k["ConfigMap"], "data", "config.yaml").(string)
	var parsed struct {
		Salesforce struct {
			PrivateKeyFile string `yaml:"private_key_file"`
		} `yaml:"salesforce"`
	}
	if err := yaml.Unmarshal([]byte(cfg), &parsed); err != nil {
		t.Fatal(err)
	}
	var mountPath string
	for _, m := range get(pod, "containers", 0, "volumeMounts").([]any) {
		vol := toString(get(m, "name"))
		for _, v := range get(pod, "volumes").([]any) {
			if toString(get(v, "name")) == vol && toString(get(v, "secret", "secretName")) == secret {
				mountPath = toString(get(m, "mountPath"))
			}
		}
	}
	if secret == "" || file == "" || mountPath == "" {
		t.Fatalf("the README's Secret %q (key %q) is not mounted by its values (mount %q)", secret, file, mountPath)
	}
	if want := mountPath + "/" + file; parsed.Salesforce.PrivateKeyFile != want {
		t.Errorf("private_key_file is %q; the Secret's key %s is mounted at %s", parsed.Salesforce.PrivateKeyFile, file, want)
	}
	// sf2loki check with a real key at the place the README names.
	dir := t.TempDir()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	keyPath := filepath.Join(dir, file)
	if err := os.WriteFile(keyPath, pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)}), 0o400); err != nil {
		t.Fatal(err)
	}
	check(t, chartReadme+" JWT example", strings.ReplaceAll(cfg, parsed.Salesforce.PrivateKeyFile, keyPath), envOf(get(pod, "containers", 0, "env")))
}

// releaseTag is a version a release pushes (vX.Y.Z is tagged X.Y.Z).
var releaseTag = regexp.MustCompile(`^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$`)

// TestManifestsPinARelease: every image the plain manifests run (Kubernetes,
// ECS, Cloud Run) has a release tag (no latest, no bare name), the one of
// the chart's appVersion.
func TestManifestsPinARelease(t *testing.T) {
	var chart struct {
		AppVersion string `yaml:"appVersion"`
	}
	readYAML(t, filepath.Join(testenv.RepoRoot(t), chartDir, "Chart.yaml"), &chart)
	n := 0
	for _, dir := range []string{"deploy/kubernetes", "deploy/ecs-fargate", "deploy/cloud-run"} {
		files, err := filepath.Glob(filepath.Join(testenv.RepoRoot(t), dir, "*"))
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range files {
			if ext := filepath.Ext(f); ext != ".yaml" && ext != ".json" {
				continue
			}
			rel, _ := filepath.Rel(testenv.RepoRoot(t), f)
			for _, m := range imageValue.FindAllStringSubmatch(readFile(t, rel), -1) {
				ref := m[1]
				n++
				name, tag := ref, ""
				if i := strings.LastIndex(ref, ":"); i > strings.LastIndex(ref, "/") {
					name, tag = ref[:i], ref[i+1:]
				}
				switch {
				case strings.Contains(ref, "@sha256:"):
				case tag == "":
					t.Errorf("%s runs %s without a tag: pin the release, %s:%s", rel, ref, name, chart.AppVersion)
				case !releaseTag.MatchString(tag):
					t.Errorf("%s runs %s: pin a release, not %q (%s:%s)", rel, ref, tag, name, chart.AppVersion)
				case tag != chart.AppVersion:
					t.Errorf("%s runs %s, the chart %s: keep them on one release", rel, ref, chart.AppVersion)
				}
			}
		}
	}
	if n < 3 {
		t.Fatalf("found only %d images in the manifests", n)
	}
}

// TestHelmUpgradeKeepsNames installs nothing: it puts in a real
// kube-apiserver the ConfigMap chart 0.1.0 rendered for a release, then
// renders the chart for that release with the cluster's view (as helm
// upgrade does). A release not named sf2loki would move to new Lease and
// state names: the chart refuses and names the values to set; with them
// set, or for the release sf2loki, it renders the old names.
func TestHelmUpgradeKeepsNames(t *testing.T) {
	testenv.Long(t, "the upgrade against kube-apiserver")
	kube := testenv.StartKube(t)
	t.Cleanup(kube.Stop)
	kubeconfig := kube.Kubeconfig(t, testenv.KubeAdminToken)
	ns := kube.NewNamespace(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	// What chart 0.1.0 rendered, whatever the release's name.
	old := func(release string) {
		t.Helper()
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: release, Namespace: ns,
			Annotations: map[string]string{"meta.helm.sh/release-name": release, "meta.helm.sh/release-namespace": ns}},
			Data: map[string]string{"config.yaml": fmt.Sprintf(`coordinate:
  k8s_lease:
    lease_duration: 30s
    name: sf2loki-leader
    namespace: %s
    renew_interval: 10s
  type: k8s_lease
service:
  health_addr: :8080
  shutdown_grace: 25s
sink:
  loki:
    url: http://loki-gateway.loki.svc/loki/api/v1/push
state:
  s3:
    bucket: my-sf2loki-state
    key: sf2loki/state.json
    region: ""
  store: s3
`, ns)}}
		if _, err := kube.Admin(t).CoreV1().ConfigMaps(ns).Create(ctx, cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	upgrade := func(release string, set ...string) ([]byte, error) {
		args := []string{"template", release, chartDir, "--namespace", ns, "--kubeconfig", kubeconfig, "--dry-run=server",
			"--set", "config.state.s3.bucket=my-sf2loki-state"}
		for _, s := range set {
			args = append(args, "--set", s)
		}
		return helm(t, args...)
	}
	names := func(out []byte) []string {
		objs := kinds(decodeAll(t, "helm template", out))
		cfg, _ := get(objs["ConfigMap"], "data", "config.yaml").(string)
		return storeNames(t, cfg, nil)
	}
	oldNames := []string{"lease " + ns + "/sf2loki-leader", "s3://my-sf2loki-state/sf2loki/state.json"}

	old("logs")
	out, err := upgrade("logs")
	if err == nil {
		t.Fatalf("the chart moved the release logs to %q without a word", names(out))
	}
	for _, want := range []string{
		`config.coordinate.k8s_lease.name from "sf2loki-leader" to "logs-leader" and config.state.s3.key from "sf2loki/state.json" to "logs/state.json"`,
		"set config.coordinate.k8s_lease.name=sf2loki-leader and config.state.s3.key=sf2loki/state.json",
	} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the refusal does not say %q:\n%s", want, out)
		}
	}
	t.Logf("helm template logs --dry-run=server: %s", out)
	out, err = upgrade("logs", "config.coordinate.k8s_lease.name=sf2loki-leader")
	if err == nil || !strings.Contains(string(out), "set config.state.s3.key=sf2loki/state.json (") {
		t.Errorf("with the Lease kept, the chart does not name the state key to keep (%v):\n%s", err, out)
	}
	out, err = upgrade("logs", "config.coordinate.k8s_lease.name=sf2loki-leader", "config.state.s3.key=sf2loki/state.json")
	if err != nil {
		t.Fatalf("with both names set: %v\n%s", err, out)
	}
	if got := names(out); !slices.Equal(got, oldNames) {
		t.Errorf("with both names set the release logs uses %q, want %q", got, oldNames)
	}

	old("sf2loki")
	out, err = upgrade("sf2loki")
	if err != nil {
		t.Fatalf("the release sf2loki: %v\n%s", err, out)
	}
	if got := names(out); !slices.Equal(got, oldNames) {
		t.Errorf("the release sf2loki uses %q, want %q", got, oldNames)
	}

	// A new fullnameOverride renames the ConfigMap and would derive new
	// names: the release's old ConfigMap is found by Helm's annotation.
	out, err = upgrade("sf2loki", "fullnameOverride=audit")
	if err == nil || !strings.Contains(string(out), `config.coordinate.k8s_lease.name from "sf2loki-leader" to "audit-leader"`) {
		t.Errorf("a new fullnameOverride moved the names without a word (%v):\n%s", err, out)
	}

	// A new release (no ConfigMap yet) takes the derived names.
	out, err = upgrade("fresh")
	if err != nil {
		t.Fatalf("a new release: %v\n%s", err, out)
	}
	want := []string{"lease " + ns + "/fresh-leader", "s3://my-sf2loki-state/fresh/state.json"}
	if got := names(out); !slices.Equal(got, want) {
		t.Errorf("a new release uses %q, want %q", got, want)
	}
}
