package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"

	"github.com/sf2loki/sf2loki/internal/sfrules"
)

// pathKeys are the keys whose value names a file, as the schema spells
// them at the top level; an orgs entry's salesforce and sources keys are
// the same keys under orgs[].
var pathKeys = map[string]bool{
	"coordinate.file_lease.path":              true,
	"coordinate.k8s_lease.kubeconfig":         true,
	"coordinate.gcs_lease.service_file":       true,
	"state.file.path":                         true,
	"state.gcs.service_file":                  true,
	"salesforce.private_key_file":             true,
	"salesforce.client_secret_file":           true,
	"sources.transform_salt_file":             true,
	"sink.loki.auth_token_file":               true,
	"sink.loki.tls.ca_file":                   true,
	"sink.loki.tls.cert_file":                 true,
	"sink.loki.tls.key_file":                  true,
	"service.telemetry.basic_auth_token_file": true,
}

// IsPathKey reports whether the key at a schema path (orgs[]. included)
// names a file.
func IsPathKey(schemaPath string) bool {
	return pathKeys[strings.TrimPrefix(schemaPath, "orgs[].")]
}

// resolvePaths makes every relative file path the configuration file at
// configPath sets absolute, against that file's directory (as Prometheus
// resolves the files its configuration names). A value an environment
// variable sets stays relative to the working directory, as a command-line
// flag would. Without a configuration file nothing changes.
//
// Older releases read a relative path from the working directory. So that
// a configuration written for them keeps its files (a checkpoint file
// found again, not a new one started), a path whose file, or else whose
// directory, exists only relative to the working directory is still read
// from there, with a warning naming the fix.
func (c *Config) resolvePaths(configPath string) (warnings []string) {
	if configPath == "" {
		return nil
	}
	absConfig, err := filepath.Abs(configPath)
	if err != nil {
		return nil
	}
	dir := filepath.Dir(absConfig)
	c.eachLeaf(func(f Field, v reflect.Value, path string) {
		if !IsPathKey(f.Path) || v.Kind() != reflect.String || !v.CanSet() {
			return
		}
		val := v.String()
		if val == "" || filepath.IsAbs(val) {
			return
		}
		if !f.Item && os.Getenv(envName(f.Path)) != "" {
			return // from the environment: relative to the working directory
		}
		resolved, w := resolvePath(dir, val)
		v.SetString(resolved)
		if w != "" {
			warnings = append(warnings, path+": "+w)
		}
	})
	return warnings
}

// resolvePath resolves the relative path p against dir, or against the
// working directory when only there its file, or else its directory,
// exists (with a warning saying so and what to write instead).
func resolvePath(dir, p string) (resolved, warning string) {
	inDir := filepath.Join(dir, p)
	inCwd, err := filepath.Abs(p)
	if err != nil || inCwd == inDir {
		return inDir, ""
	}
	useCwd := false
	switch {
	case exists(inDir):
	case exists(inCwd):
		useCwd = true
	case exists(filepath.Dir(inDir)):
	case exists(filepath.Dir(inCwd)):
		useCwd = true
	}
	if !useCwd {
		return inDir, ""
	}
	fix := inCwd
	if rel, err := filepath.Rel(dir, inCwd); err == nil {
		fix = rel
	}
	return inCwd, fmt.Sprintf("%s is read from the working directory (%s), as older releases did: a relative path in the configuration file "+
		"is now resolved against the file's directory (%s), where it does not exist; write %s (relative to the configuration file) "+
		"or the absolute path %s. Working-directory paths are deprecated", p, inCwd, inDir, fix, inCwd)
}

func exists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// CheckFiles makes Load also read the files the configuration names and
// will read at start (private keys, secrets, tokens, TLS files, a
// kubeconfig, a service-account key), reporting a missing, unreadable or
// empty file, and a JWT key that is not an RSA private key, with every
// other problem. check and run use it; commands that need no file (state,
// config) do not.
func CheckFiles() Option {
	return func(c *Config) { c.checkFiles = true }
}

// CheckFilesOf is CheckFiles for a command that works on one org
// (backfill --org): it reads that org's files, the sink's and the state
// store's, not the other orgs', the coordinator's or the telemetry's,
// which such a command never opens.
func CheckFilesOf(org string) Option {
	return func(c *Config) { c.checkFiles, c.filesOf = true, &org }
}

// fileProblems reads each file c names that the daemon reads at start.
func (c *Config) fileProblems() []Problem {
	if !c.checkFiles {
		return nil
	}
	var problems []Problem
	add := func(path, format string, args ...any) {
		problems = append(problems, Problem{Path: path, Message: fmt.Sprintf(format, args...)})
	}
	// read reports a file that cannot be read or (unless blankOK) is
	// blank, and returns its content.
	read := func(key, file string, blankOK bool) ([]byte, bool) {
		if file == "" {
			return nil, false
		}
		b, err := os.ReadFile(file)
		switch {
		case err != nil:
			shown, problem := file, sfrules.FileProblem(err)
			if abs, aerr := filepath.Abs(file); aerr == nil && !filepath.IsAbs(file) {
				// Still relative: set by an SF2LOKI_* variable (or without a
				// configuration file), so read from the working directory.
				shown = fmt.Sprintf("%s (%s: a path from an SF2LOKI_* variable is read from the working directory)", file, abs)
				if errors.Is(err, fs.ErrNotExist) {
					problem = "does not exist: correct the path, or put the file there"
				}
			}
			add(key, "%s %s (%v)", shown, problem, bareErr(err))
			return nil, false
		case !blankOK && strings.TrimSpace(string(b)) == "":
			add(key, "%s is empty: a blank secret is a missing secret; write the value into the file", file)
			return nil, false
		}
		return b, true
	}
	for i, o := range c.orgSections() {
		if c.filesOf != nil && i > 0 && c.Orgs[i-1].Name != *c.filesOf {
			continue // another org's: this command does not read it
		}
		p, sf := o.prefix, o.sf
		switch sf.AuthMode {
		case sfrules.JWTBearer:
			if strings.TrimSpace(sf.PrivateKey) != "" {
				if _, err := sfrules.ParsePrivateKey([]byte(strings.TrimSpace(sf.PrivateKey))); err != nil {
					add(p+"salesforce.private_key", "the value %v", err)
				}
			} else if b, ok := read(p+"salesforce.private_key_file", sf.PrivateKeyFile, false); ok {
				if _, err := sfrules.ParsePrivateKey(b); err != nil {
					add(p+"salesforce.private_key_file", "%s %v", sf.PrivateKeyFile, err)
				}
			}
		case sfrules.ClientCredentials:
			if strings.TrimSpace(sf.ClientSecret) == "" {
				read(p+"salesforce.client_secret_file", sf.ClientSecretFile, false)
			}
		}
		if strings.TrimSpace(o.src.TransformSalt) == "" && o.src.HashRule() != "" {
			read(p+"sources.transform_salt_file", o.src.TransformSaltFile, false)
		}
	}
	if l := c.Sink.Loki; l.URL != "" {
		if strings.TrimSpace(l.AuthToken) == "" {
			read("sink.loki.auth_token_file", l.AuthTokenFile, false)
		}
		read("sink.loki.tls.ca_file", l.TLS.CAFile, true)
		read("sink.loki.tls.cert_file", l.TLS.CertFile, true)
		read("sink.loki.tls.key_file", l.TLS.KeyFile, true)
	}
	if c.filesOf != nil {
		if c.State.Store == StoreGCS {
			read("state.gcs.service_file", c.State.GCS.ServiceFile, true)
		}
		return problems
	}
	if t := c.Service.Telemetry; t.Enabled && t.Auth == "basic" && strings.TrimSpace(t.BasicAuthToken) == "" {
		read("service.telemetry.basic_auth_token_file", t.BasicAuthTokenFile, false)
	}
	switch c.Coordinate.Type {
	case CoordinateK8sLease:
		read("coordinate.k8s_lease.kubeconfig", c.Coordinate.K8sLease.Kubeconfig, true)
	case CoordinateGCSLease:
		read("coordinate.gcs_lease.service_file", c.Coordinate.GCSLease.ServiceFile, true)
	}
	if c.State.Store == StoreGCS {
		read("state.gcs.service_file", c.State.GCS.ServiceFile, true)
	}
	return problems
}

// bareErr is a *os.PathError's cause, without the operation and path the
// problem already gives.
func bareErr(err error) error {
	var pe *os.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}
