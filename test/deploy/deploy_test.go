// Package deploy checks the deployment artefacts: every YAML and JSON file
// under deploy/ and configs/ parses, every sf2loki configuration they embed
// passes `sf2loki check`, the Helm chart renders and its configuration
// passes too, the Kubernetes manifests and the chart's output apply to a
// real kube-apiserver (server-side dry run), and the Dockerfile builds a
// static binary.
package deploy

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/testenv"
)

// helmTemplates holds Go templates, not YAML.
const helmTemplates = "deploy/helm/sf2loki/templates"

// artefacts returns the YAML and JSON files under deploy/ and configs/,
// relative to the repository root.
func artefacts(t *testing.T) []string {
	t.Helper()
	root := testenv.RepoRoot(t)
	var files []string
	for _, dir := range []string{"deploy", "configs"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, _ := filepath.Rel(root, path)
			if d.IsDir() && rel == helmTemplates {
				return filepath.SkipDir
			}
			switch filepath.Ext(path) {
			case ".yaml", ".yml", ".json":
				files = append(files, rel)
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return files
}

// docs decodes every YAML document of a file (JSON is YAML).
func docs(t *testing.T, rel string) []map[string]any {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(t), rel))
	if err != nil {
		t.Fatal(err)
	}
	return decodeAll(t, rel, data)
}

func decodeAll(t *testing.T, name string, data []byte) []map[string]any {
	t.Helper()
	var out []map[string]any
	dec := yaml.NewDecoder(bytes.NewReader(data))
	for {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if doc != nil {
			out = append(out, doc)
		}
	}
	return out
}

func TestEveryArtefactParses(t *testing.T) {
	files := artefacts(t)
	if len(files) < 15 {
		t.Fatalf("found only %d YAML/JSON files under deploy/ and configs/: %v", len(files), files)
	}
	for _, rel := range files {
		if filepath.Ext(rel) == ".json" {
			data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(t), rel))
			if err != nil {
				t.Fatal(err)
			}
			var v any
			if err := json.Unmarshal(data, &v); err != nil {
				t.Errorf("%s: not valid JSON: %v", rel, err)
			}
			continue
		}
		if len(docs(t, rel)) == 0 {
			t.Errorf("%s: no YAML document", rel)
		}
	}
	t.Logf("%d files parse: %s", len(files), strings.Join(files, ", "))
}

// check runs `sf2loki check` on cfg (YAML; "" for none) with exactly env.
func check(t *testing.T, what, cfg string, env []string) {
	t.Helper()
	args := []string{"check"}
	if cfg != "" {
		path := filepath.Join(t.TempDir(), "config.yaml")
		if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		args = append(args, "--config", path)
	}
	cmd := exec.Command(testenv.Sf2loki(t), args...)
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH"), "HOME=" + t.TempDir()}, env...)
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "configuration is valid") {
		t.Errorf("%s: sf2loki check failed (%v):\n%s\nconfig:\n%s\nenv: %v", what, err, out, cfg, env)
	}
}

// get walks a decoded document by keys and list indexes.
func get(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			l, ok := v.([]any)
			if !ok || k >= len(l) {
				return nil
			}
			v = l[k]
		}
	}
	return v
}

// envOf turns a container's env list ({name, value}, or ECS's
// {name, value} objects) into NAME=value pairs; valueFrom entries (set by
// the platform at run time) are left out.
func envOf(list any) []string {
	var env []string
	items, _ := list.([]any)
	for _, it := range items {
		m, _ := it.(map[string]any)
		name, _ := m["name"].(string)
		value, ok := m["value"]
		if name == "" || !ok {
			continue
		}
		env = append(env, name+"="+toString(value))
	}
	return env
}

// secretEnvOf gives every env entry read from a Secret (valueFrom:
// secretKeyRef) a placeholder value, as the kubelet would set it from the
// Secret: a configuration's ${NAME} then resolves where the pod gets NAME.
func secretEnvOf(list any) []string {
	var env []string
	items, _ := list.([]any)
	for _, it := range items {
		name, _ := get(it, "name").(string)
		if name != "" && get(it, "valueFrom", "secretKeyRef", "key") != nil {
			env = append(env, name+"=placeholder-"+strings.ToLower(name))
		}
	}
	return env
}

func toString(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	b, _ := json.Marshal(v)
	return string(b)
}

// serviceLinks returns the variables kubelet gives every pod for a
// Service (unless the pod sets enableServiceLinks: false), as
// pkg/kubelet/envvars builds them, with clusterIP ip.
func serviceLinks(svc map[string]any, ip string) []string {
	name := strings.ToUpper(strings.ReplaceAll(toString(get(svc, "metadata", "name")), "-", "_"))
	ports, _ := get(svc, "spec", "ports").([]any)
	var env []string
	for i, p := range ports {
		port := toString(get(p, "port"))
		proto := "TCP"
		if pr, ok := get(p, "protocol").(string); ok && pr != "" {
			proto = pr
		}
		if i == 0 {
			env = append(env, name+"_SERVICE_HOST="+ip, name+"_SERVICE_PORT="+port,
				name+"_PORT="+strings.ToLower(proto)+"://"+ip+":"+port)
		}
		if pn, ok := get(p, "name").(string); ok && pn != "" {
			env = append(env, name+"_SERVICE_PORT_"+strings.ToUpper(strings.ReplaceAll(pn, "-", "_"))+"="+port)
		}
		prefix := name + "_PORT_" + port + "_" + proto
		env = append(env, prefix+"="+strings.ToLower(proto)+"://"+ip+":"+port, prefix+"_PROTO="+strings.ToLower(proto),
			prefix+"_PORT="+port, prefix+"_ADDR="+ip)
	}
	return env
}

func TestKubernetesConfigPassesCheck(t *testing.T) {
	var cfg string
	var env, links []string
	var pod any
	for _, rel := range []string{"deploy/kubernetes/configmap.yaml", "deploy/kubernetes/deployment.yaml", "deploy/kubernetes/service.yaml"} {
		for _, d := range docs(t, rel) {
			switch d["kind"] {
			case "ConfigMap":
				cfg, _ = get(d, "data", "config.yaml").(string)
			case "Deployment":
				pod = get(d, "spec", "template", "spec")
				env = envOf(get(pod, "containers", 0, "env"))
			case "Service":
				links = serviceLinks(d, "10.96.0.10")
			}
		}
	}
	if cfg == "" {
		t.Fatal("deploy/kubernetes/configmap.yaml holds no config.yaml")
	}
	if len(links) < 8 || !slices.Contains(links, "SF2LOKI_SERVICE_HOST=10.96.0.10") {
		t.Fatalf("the Service sf2loki gives no SF2LOKI_ service links: %v", links)
	}
	if get(pod, "enableServiceLinks") != false {
		t.Errorf("the Deployment's pods get service-link variables: set enableServiceLinks: false")
	}
	check(t, "deploy/kubernetes", cfg, env)
	// Where service links are on anyway (a copy of the manifests without
	// enableServiceLinks), the variables of the Service sf2loki are not
	// configuration.
	check(t, "deploy/kubernetes with service links", cfg, append(env, links...))
}

func TestECSTaskDefinitionConfigPassesCheck(t *testing.T) {
	d := docs(t, "deploy/ecs-fargate/task-definition.json")[0]
	c := get(d, "containerDefinitions", 0)
	env := envOf(get(c, "environment"))
	if len(env) < 5 || !slices.Contains(env, "SF2LOKI_COORDINATE__TYPE=s3_lease") || !slices.Contains(env, "SF2LOKI_STATE__STORE=s3") {
		t.Fatalf("the task definition does not configure s3_lease with s3 state: %v", env)
	}
	if cmd := toString(get(c, "command")); cmd != `["run"]` {
		t.Fatalf("command %s, want [\"run\"] (configuration from the environment)", cmd)
	}
	if hc := toString(get(c, "healthCheck", "command")); !strings.Contains(hc, "sf2loki") || !strings.Contains(hc, "health") {
		t.Errorf("the container health check %s does not run sf2loki health (/healthz)", hc)
	}
	tg := docs(t, "deploy/ecs-fargate/target-group.json")[0]
	if tg["HealthCheckPath"] != "/readyz" {
		t.Errorf("the ALB target group checks %v, want /readyz (the leader only)", tg["HealthCheckPath"])
	}
	check(t, "deploy/ecs-fargate/task-definition.json", "", env)
}

func TestCloudRunServiceConfigPassesCheck(t *testing.T) {
	d := docs(t, "deploy/cloud-run/service.yaml")[0]
	spec := get(d, "spec", "template")
	if get(spec, "metadata", "annotations", "autoscaling.knative.dev/minScale") != "2" ||
		get(spec, "metadata", "annotations", "run.googleapis.com/cpu-throttling") != "false" {
		t.Errorf("the Cloud Run service must keep 2 instances with CPU always allocated: %v", get(spec, "metadata", "annotations"))
	}
	c := get(spec, "spec", "containers", 0)
	env := envOf(get(c, "env"))
	if !slices.Contains(env, "SF2LOKI_COORDINATE__TYPE=gcs_lease") || !slices.Contains(env, "SF2LOKI_STATE__STORE=gcs") {
		t.Fatalf("the service does not configure gcs_lease with gcs state: %v", env)
	}
	check(t, "deploy/cloud-run/service.yaml", "", env)
}

func TestExampleConfigPassesCheck(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(t), "configs", "sf2loki.example.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	check(t, "configs/sf2loki.example.yaml", string(data), nil)
}

// helmTemplate renders the chart with the values files, or fails the test.
func helmTemplate(t *testing.T, ns string, values ...string) []map[string]any {
	t.Helper()
	out, err := helmRun(t, ns, values...)
	if err != nil {
		t.Fatalf("helm template %v: %v\n%s", values, err, out)
	}
	return decodeAll(t, "helm template", out)
}

func helmRun(t *testing.T, ns string, values ...string) ([]byte, error) {
	t.Helper()
	helm := testenv.Binary(t, "helm")
	chart := filepath.Join(testenv.RepoRoot(t), "deploy", "helm", "sf2loki")
	// As users run it: no --kube-version, so helm checks the chart against
	// the version it assumes offline (1.20 for a helm built from source, as
	// make tools builds it).
	args := []string{"template", "sf2loki", chart, "--namespace", ns}
	for _, v := range values {
		args = append(args, "-f", filepath.Join(chart, "ci", v))
	}
	cmd := exec.Command(helm, args...)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	return cmd.CombinedOutput()
}

func kinds(docs []map[string]any) map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, d := range docs {
		out[toString(d["kind"])] = d
	}
	return out
}

// multiOrgLeases are the Leases of deploy/helm/sf2loki/ci/multi-org-values.yaml
// (six orgs): the first org's is the configured one, every other org's is
// <lease>-<org>, and the membership Lease is <lease>-members.
var multiOrgLeases = []string{"sf2loki-leader", "sf2loki-leader-prod-realtime", "sf2loki-leader-uat",
	"sf2loki-leader-emea", "sf2loki-leader-apac", "sf2loki-leader-partners", "sf2loki-leader-members"}

// roleLeases returns the Lease names the rendered Role's get/patch/watch rule
// (its first rule) allows.
func roleLeases(role map[string]any) []string {
	var names []string
	list, _ := get(role, "rules", 0, "resourceNames").([]any)
	for _, n := range list {
		names = append(names, toString(n))
	}
	return names
}

// configLeases loads cfg as sf2loki run does (with env set) and returns the
// Kubernetes Leases it uses: each shard's, then the membership Lease.
func configLeases(t *testing.T, cfg string, env []string) []string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, kv := range env {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	c, _, err := config.Load(path)
	if err != nil {
		t.Fatalf("load the rendered configuration: %v", err)
	}
	var names []string
	for _, s := range c.Shards() {
		names = append(names, s.Coordinate.K8sLease.Name)
	}
	if m := c.MembersConfig(); m != nil {
		names = append(names, m.Coordinate.K8sLease.Name)
	}
	return names
}

// TestHelmChart renders the chart for each lease type and for several orgs
// (the values files in deploy/helm/sf2loki/ci) and checks the rendered
// configuration with sf2loki check, the probes and pod security, that the
// ServiceAccount token and the Lease Role exist only for k8s_lease, and
// that the Role names every Lease the configuration uses (each org's and
// the membership Lease).
func TestHelmChart(t *testing.T) {
	for _, tc := range []struct {
		values   string
		k8sLease bool
		replicas int
		leases   []string // the Role's get/patch names (k8s_lease)
	}{
		{"k8s-lease-values.yaml", true, 2, []string{"sf2loki-leader"}},
		{"s3-lease-values.yaml", false, 2, nil},
		{"gcs-lease-values.yaml", false, 2, nil},
		{"multi-org-values.yaml", true, 3, multiOrgLeases},
	} {
		t.Run(tc.values, func(t *testing.T) {
			objs := kinds(helmTemplate(t, "sf2loki-helm", tc.values))
			cfg, _ := get(objs["ConfigMap"], "data", "config.yaml").(string)
			pod := get(objs["Deployment"], "spec", "template", "spec")
			c := get(pod, "containers", 0)
			env := append(envOf(get(c, "env")), secretEnvOf(get(c, "env"))...)
			check(t, "helm "+tc.values, cfg, env)
			if get(pod, "enableServiceLinks") != false {
				t.Errorf("the pods get service-link variables: set enableServiceLinks: false")
			}
			check(t, "helm "+tc.values+" with service links", cfg, append(env, serviceLinks(objs["Service"], "10.96.0.10")...))
			if got := get(objs["Deployment"], "spec", "replicas"); got != tc.replicas {
				t.Errorf("replicas %v, want %d", got, tc.replicas)
			}
			if got := get(pod, "automountServiceAccountToken"); got != tc.k8sLease {
				t.Errorf("automountServiceAccountToken %v, want %v (the token is mounted only for k8s_lease)", got, tc.k8sLease)
			}
			if _, ok := objs["Role"]; ok != tc.k8sLease {
				t.Errorf("Role rendered: %v, want %v", ok, tc.k8sLease)
			}
			if tc.k8sLease {
				if got := roleLeases(objs["Role"]); !slices.Equal(got, tc.leases) {
					t.Errorf("the Role's get/patch rule names %q, want %q", got, tc.leases)
				}
				if got := toString(get(objs["Role"], "rules", 0, "verbs")); got != `["get","patch","watch"]` {
					t.Errorf("the Role's named rule allows %s, want get, patch and watch", got)
				}
				// The names sf2loki derives from the rendered configuration
				// are the ones the Role allows.
				if got := configLeases(t, cfg, env); !slices.Equal(got, tc.leases) {
					t.Errorf("sf2loki uses the Leases %q, the Role allows %q", got, tc.leases)
				}
				if !strings.Contains(cfg, "namespace: sf2loki-helm") {
					t.Errorf("the k8s_lease namespace is not the release namespace:\n%s", cfg)
				}
			}
			for probe, want := range map[string]string{"readinessProbe": "/readyz?standby=ok", "livenessProbe": "/healthz"} {
				if got := get(c, probe, "httpGet", "path"); got != want {
					t.Errorf("%s %v, want %s", probe, got, want)
				}
			}
			if get(pod, "securityContext", "runAsUser") != 10001 || get(c, "securityContext", "readOnlyRootFilesystem") != true {
				t.Errorf("pod security: %v / %v", get(pod, "securityContext"), get(c, "securityContext"))
			}
			if objs["PodDisruptionBudget"] == nil {
				t.Error("no PodDisruptionBudget")
			}
		})
	}
	t.Run("refuses incomplete values", func(t *testing.T) {
		out, err := helmRun(t, "sf2loki-helm")
		if err == nil || !strings.Contains(string(out), "config.state.s3.bucket is required") {
			t.Fatalf("the default values rendered without a state bucket (%v):\n%s", err, out)
		}
	})
}

// TestReadmeConfigsPassCheck: every ```yaml block in the README is a valid
// configuration. The quick start's reads a key and a token from
// /etc/sf2loki/ and its consumer key from the environment:
// TestReadmeQuickStartPassesCheck (internal/app) checks it with those in
// place.
func TestReadmeConfigsPassCheck(t *testing.T) {
	blocks := testenv.CodeBlocks(t, "README.md", "yaml")
	for _, block := range blocks {
		if strings.Contains(block, "private_key_file: /etc/sf2loki/") {
			continue
		}
		check(t, "README.md yaml block", block, nil)
	}
	if len(blocks) == 0 {
		t.Fatal("the README has no yaml block")
	}
}

// TestKubernetesReadmeHelmInstall renders the helm install command of
// deploy/kubernetes/README.md as written (helm template with its
// arguments) and runs sf2loki check on the configuration, in the
// environment the pods get: the chart's env and the keys of the Secret the
// README creates (envFrom). The configuration must enable a source.
func TestKubernetesReadmeHelmInstall(t *testing.T) {
	const readme = "deploy/kubernetes/README.md"
	var install []string
	var env []string
	for _, block := range testenv.CodeBlocks(t, readme, "sh") {
		for _, line := range strings.Split(strings.ReplaceAll(block, "\\\n", " "), "\n") {
			words := shellWords(t, line)
			switch {
			case len(words) > 3 && words[0] == "helm" && words[1] == "install":
				install = words[2:]
			case len(words) > 3 && words[0] == "kubectl" && slices.Contains(words, "secret"):
				for _, w := range words {
					if kv, ok := strings.CutPrefix(w, "--from-literal="); ok {
						name, _, _ := strings.Cut(kv, "=")
						env = append(env, name+"=placeholder-"+strings.ToLower(name))
					}
				}
			}
		}
	}
	if install == nil {
		t.Fatalf("%s has no helm install command in a sh block", readme)
	}
	cmd := exec.Command(testenv.Binary(t, "helm"), append([]string{"template"}, install...)...)
	cmd.Dir = testenv.RepoRoot(t)
	cmd.Env = append(os.Environ(), "HELM_CACHE_HOME="+t.TempDir(), "HELM_CONFIG_HOME="+t.TempDir(), "HELM_DATA_HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: helm template %q: %v\n%s", readme, install, err, out)
	}
	objs := kinds(decodeAll(t, "helm template", out))
	cfg, _ := get(objs["ConfigMap"], "data", "config.yaml").(string)
	c := get(objs["Deployment"], "spec", "template", "spec", "containers", 0)
	env = append(append(env, envOf(get(c, "env"))...), secretEnvOf(get(c, "env"))...)
	check(t, readme+" helm install", cfg, env)
	var parsed map[string]any
	if err := yaml.Unmarshal([]byte(cfg), &parsed); err != nil {
		t.Fatal(err)
	}
	if sources, _ := parsed["sources"].(map[string]any); len(sources) == 0 {
		t.Errorf("%s: the helm install command enables no source: the release would ingest nothing\n%s", readme, cfg)
	}
}

// shellWords splits one line of a sh block into words as sh would: blanks
// separate words, quotes group them, and a backslash escapes the next
// character outside single quotes.
func shellWords(t *testing.T, line string) []string {
	t.Helper()
	var words []string
	var cur strings.Builder
	inWord := false
	var quote rune
	escaped := false
	for _, r := range line {
		switch {
		case escaped:
			cur.WriteRune(r)
			escaped = false
		case quote == '\'':
			if r == '\'' {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\\':
			escaped, inWord = true, true
		case quote == '"':
			if r == '"' {
				quote = 0
			} else {
				cur.WriteRune(r)
			}
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words = append(words, cur.String())
				cur.Reset()
				inWord = false
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		t.Fatalf("unterminated quote in %q", line)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}
