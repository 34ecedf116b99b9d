package config_test

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/testenv"
)

// writeIn writes yaml as dir/sf2loki.yaml.
func writeIn(t *testing.T, dir, yaml string) string {
	t.Helper()
	p := filepath.Join(dir, "sf2loki.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// problemsIn is problems for a configuration file in dir.
func problemsIn(t *testing.T, dir, yaml string, opts ...config.Option) string {
	t.Helper()
	_, _, err := config.Load(writeIn(t, dir, yaml), opts...)
	var ce *config.Error
	if !errors.As(err, &ce) || !errors.Is(err, domain.ErrInvalidConfig) {
		t.Fatalf("loaded a bad configuration: %v", err)
	}
	return err.Error()
}

func mkfile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestRelativePathsAreTheConfigurationFilesDirectory: every key naming a
// file, list entries included, is resolved against the configuration
// file's directory, whatever the working directory; a value from the
// environment stays relative to the working directory, like a flag.
func TestRelativePathsAreTheConfigurationFilesDirectory(t *testing.T) {
	root := t.TempDir()
	conf := filepath.Join(root, "etc", "sf2loki")
	t.Chdir(t.TempDir()) // elsewhere
	_, key := testenv.RSAKey(t)
	mkfile(t, filepath.Join(conf, "keys", "prod.key"), string(key))
	mkfile(t, filepath.Join(conf, "loki-token"), "t0ken")
	cfg, warnings, err := config.Load(writeIn(t, conf, `
coordinate: {type: file_lease, file_lease: {path: state/leader.lease}}
state: {file: {path: state/state.json}}
sink: {loki: {url: https://loki.example/loki/api/v1/push, auth_token_file: loki-token, tls: {ca_file: ./tls/../tls/ca.pem}}}
orgs:
  - {name: prod, salesforce: {auth_mode: jwt_bearer, client_id: ck, username: u, private_key_file: keys/prod.key}}
  - {name: uat, salesforce: {auth_mode: client_credentials, login_url: https://acme--uat.sandbox.my.salesforce.com, client_id: ck, client_secret_file: /abs/secret}}
`))
	if err != nil || len(warnings) != 0 {
		t.Fatalf("%v %v", err, warnings)
	}
	for _, c := range []struct{ got, want string }{
		{cfg.Coordinate.FileLease.Path, filepath.Join(conf, "state", "leader.lease")},
		{cfg.State.File.Path, filepath.Join(conf, "state", "state.json")},
		{cfg.Sink.Loki.AuthTokenFile, filepath.Join(conf, "loki-token")},
		{cfg.Sink.Loki.TLS.CAFile, filepath.Join(conf, "tls", "ca.pem")},
		{cfg.Orgs[0].Salesforce.PrivateKeyFile, filepath.Join(conf, "keys", "prod.key")},
		{cfg.Orgs[1].Salesforce.ClientSecretFile, "/abs/secret"},
		{cfg.Sink.Loki.TLS.CertFile, ""},
	} {
		if c.got != c.want {
			t.Errorf("got %s, want %s", c.got, c.want)
		}
	}

	t.Setenv("SF2LOKI_STATE__FILE__PATH", "from-env/state.json")
	cfg, _, err = config.Load(writeIn(t, conf, "state: {file: {path: ignored.json}}\n"))
	if err != nil || cfg.State.File.Path != "from-env/state.json" {
		t.Fatalf("an environment override: %v, %q", err, cfg.State.File.Path)
	}
}

// TestOlderRelativePathsKeepTheirFiles: a configuration written when
// relative paths were the working directory's keeps reading and writing
// the same files (the README's HA pair: --config ha/sf2loki.yaml with
// path ha/leader.lease, run from the directory holding ha/), with a
// warning that names what to write instead.
func TestOlderRelativePathsKeepTheirFiles(t *testing.T) {
	root := t.TempDir()
	t.Chdir(root)
	if err := os.Mkdir("ha", 0o750); err != nil {
		t.Fatal(err)
	}
	_, key := testenv.RSAKey(t)
	mkfile(t, filepath.Join(root, "secrets", "sf.key"), string(key))
	yaml := "coordinate: {type: file_lease, file_lease: {path: ha/leader.lease}}\nstate: {file: {path: ha/state.json}}\n" +
		"salesforce: {auth_mode: jwt_bearer, client_id: ck, username: u, private_key_file: secrets/sf.key}\n"
	cfg, warnings, err := config.Load(writeIn(t, filepath.Join(root, "ha"), yaml), config.CheckFiles())
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Coordinate.FileLease.Path != filepath.Join(root, "ha", "leader.lease") || cfg.State.File.Path != filepath.Join(root, "ha", "state.json") ||
		cfg.Salesforce.PrivateKeyFile != filepath.Join(root, "secrets", "sf.key") {
		t.Fatalf("paths moved: %s %s %s", cfg.Coordinate.FileLease.Path, cfg.State.File.Path, cfg.Salesforce.PrivateKeyFile)
	}
	all := strings.Join(warnings, "\n")
	for _, want := range []string{
		"coordinate.file_lease.path: ha/leader.lease is read from the working directory (" + filepath.Join(root, "ha", "leader.lease") +
			"), as older releases did: a relative path in the configuration file is now resolved against the file's directory (" +
			filepath.Join(root, "ha", "ha", "leader.lease") + "), where it does not exist; write leader.lease (relative to the configuration file)",
		"state.file.path: ha/state.json is read from the working directory",
		"salesforce.private_key_file: secrets/sf.key is read from the working directory (" + filepath.Join(root, "secrets", "sf.key") +
			"), as older releases did",
		"write ../secrets/sf.key (relative to the configuration file)",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("want %q in:\n%s", want, all)
		}
	}
	if len(warnings) != 3 {
		t.Errorf("%d warnings: %s", len(warnings), all)
	}

	// Written as the new rule reads it, the same files and no warning.
	yaml = "coordinate: {type: file_lease, file_lease: {path: leader.lease}}\nstate: {file: {path: state.json}}\n" +
		"salesforce: {auth_mode: jwt_bearer, client_id: ck, username: u, private_key_file: ../secrets/sf.key}\n"
	cfg, warnings, err = config.Load(writeIn(t, filepath.Join(root, "ha"), yaml), config.CheckFiles())
	if err != nil || len(warnings) != 0 || cfg.State.File.Path != filepath.Join(root, "ha", "state.json") {
		t.Fatalf("%v %v %s", err, warnings, cfg.State.File.Path)
	}
}

// TestCheckFilesReportsMissingFilesWithEveryOtherProblem: a key file that
// is missing is in the first list, beside the other problems; what it
// holds when it is not an RSA private key is said in one sentence.
func TestCheckFilesReportsMissingFilesWithEveryOtherProblem(t *testing.T) {
	dir := t.TempDir()
	sf := func(key string) string {
		return "salesforce: {auth_mode: jwt_bearer, client_id: ck, username: u, private_key_file: " + key + ", api_version: v60}\n" +
			"sink: {loki: {url: http://loki:3100/loki/api/v1/push, auth_token_file: absent-token}}\n"
	}
	msg := problemsIn(t, dir, sf("sf2loki.key"), config.CheckFiles())
	for _, want := range []string{
		`salesforce.api_version: "v60" is not a version like 60.0`,
		"salesforce.private_key_file: " + filepath.Join(dir, "sf2loki.key") + " does not exist: correct the path, or put the file there " +
			"(a relative path in the configuration file is read from that file's directory) (no such file or directory)",
		"sink.loki.auth_token_file: " + filepath.Join(dir, "absent-token") + " does not exist",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("want %q in:\n%s", want, msg)
		}
	}
	// Without CheckFiles (state and config commands read no key) only
	// the rest.
	if msg := problemsIn(t, dir, sf("sf2loki.key")); strings.Contains(msg, "does not exist") {
		t.Errorf("files read without CheckFiles:\n%s", msg)
	}

	ec, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	der, _ := x509.MarshalECPrivateKey(ec)
	mkfile(t, filepath.Join(dir, "ec.key"), string(pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})))
	mkfile(t, filepath.Join(dir, "blank.key"), " \n")
	for key, want := range map[string]string{
		"ec.key":    "salesforce.private_key_file: " + filepath.Join(dir, "ec.key") + " is an EC (ECDSA) key; Salesforce's JWT bearer flow signs with RS256, which needs an RSA key",
		"blank.key": "salesforce.private_key_file: " + filepath.Join(dir, "blank.key") + " is empty",
		".":         "salesforce.private_key_file: " + dir + " is a directory, not a file",
	} {
		if msg := problemsIn(t, dir, sf(key), config.CheckFiles()); !strings.Contains(msg, want) {
			t.Errorf("want %q in:\n%s", want, msg)
		}
	}
	if msg := problemsIn(t, dir, "salesforce: {auth_mode: jwt_bearer, client_id: ck, username: u, private_key: 'not a key', api_version: v60}\n",
		config.CheckFiles()); !strings.Contains(msg, "salesforce.private_key: the value is not a PEM private key") || strings.Contains(msg, "not a key'") {
		t.Errorf("inline key:\n%s", msg)
	}
}

// A relative path from an SF2LOKI_* variable is read from the working
// directory: a missing one is shown with the absolute path tried, not
// with the configuration file's rule.
func TestAMissingFileFromTheEnvironmentShowsThePathTried(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("SF2LOKI_SINK__LOKI__AUTH_TOKEN_FILE", "no-such-token")
	got := problemsIn(t, dir, "sink: {loki: {url: http://127.0.0.1:3100/loki/api/v1/push}}\n", config.CheckFiles())
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	want := "sink.loki.auth_token_file: no-such-token (" + filepath.Join(cwd, "no-such-token") +
		": a path from an SF2LOKI_* variable is read from the working directory) does not exist: correct the path, or put the file there"
	if !strings.Contains(got, want) || strings.Contains(got, "configuration file is read") {
		t.Errorf("problems:\n%s\nwant %q", got, want)
	}
}

// TestCheckFilesOfReadsOnlyWhatTheOrgsCommandReads: backfill --org uat
// reads uat's key, the sink's and the state's files; prod's key and the
// coordinator's kubeconfig (absent on a workstation) are not its concern.
func TestCheckFilesOfReadsOnlyWhatTheOrgsCommandReads(t *testing.T) {
	dir := t.TempDir()
	mkfile(t, filepath.Join(dir, "uat-secret"), "s3cret\n")
	yaml := "coordinate: {type: k8s_lease, k8s_lease: {name: l, namespace: n, kubeconfig: /in-cluster-only/kubeconfig}}\n" +
		"state: {store: s3, s3: {bucket: b, region: r}}\n" +
		"sink: {loki: {url: http://loki:3100/loki/api/v1/push}}\n" +
		"orgs:\n" +
		"  - {name: prod, salesforce: {auth_mode: client_credentials, login_url: 'https://p.my.salesforce.com', client_id: c, client_secret_file: /run/secrets/prod}, sources: {synthetic: {rate: 1}}}\n" +
		"  - {name: uat, salesforce: {auth_mode: client_credentials, login_url: 'https://u.my.salesforce.com', client_id: c, client_secret_file: uat-secret}, sources: {synthetic: {rate: 1}}}\n"
	path := writeIn(t, dir, yaml)
	if _, _, err := config.Load(path, config.CheckFilesOf("uat")); err != nil {
		t.Fatalf("backfill --org uat: %v", err)
	}
	msg := problemsIn(t, dir, yaml, config.CheckFilesOf("prod"))
	if !strings.Contains(msg, "orgs[0].salesforce.client_secret_file: /run/secrets/prod does not exist") || strings.Contains(msg, "kubeconfig") {
		t.Errorf("backfill --org prod:\n%s", msg)
	}
	msg = problemsIn(t, dir, yaml, config.CheckFiles())
	if !strings.Contains(msg, "/run/secrets/prod") || !strings.Contains(msg, "kubeconfig") {
		t.Errorf("run reads every file:\n%s", msg)
	}
}
