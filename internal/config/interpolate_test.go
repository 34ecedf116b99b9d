package config_test

import (
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/sf2loki/sf2loki/internal/config"
	"github.com/sf2loki/sf2loki/internal/domain/shape"
)

// setOrUnset sets the environment variable name to value for the test, or
// unsets it when value is "" (either way restored after the test).
func setOrUnset(t *testing.T, name, value string) {
	t.Helper()
	t.Setenv(name, value)
	if value == "" {
		if err := os.Unsetenv(name); err != nil {
			t.Fatal(err)
		}
	}
}

// groupRule is a regex_replace rule whose replacement names a group with
// the ${name} the documentation gives, a group that shares its name with
// an environment variable.
const groupRule = `
      - action: regex_replace
        fields: [Username]
        pattern: '^(?P<local>[^@]+)@.*$'
        replacement: '${local}@redacted'
`

// A transform's pattern and replacement are taken as written, whether or
// not an environment variable of a group's name is set: the replacement's
// ${local} is the group, and the row ships the group's text, never the
// variable's value; the configuration loads the same either way. In the
// top-level sources and in an org's.
func TestRegexReplaceGroupIsNeverAnEnvironmentVariable(t *testing.T) {
	topLevel := orgsSink + "sources:\n  synthetic:\n    rate: 1\n    transforms:" + groupRule
	inOrg := orgsSink + "orgs:\n  - name: prod\n    sources:\n      synthetic:\n        rate: 1\n        transforms:" +
		strings.ReplaceAll(groupRule, "\n      ", "\n          ")
	for _, env := range []string{"FROM-THE-ENV", ""} {
		setOrUnset(t, "local", env)
		for name, yaml := range map[string]string{"sources": topLevel, "orgs": inOrg} {
			cfg, _, err := config.Load(write(t, yaml))
			if err != nil {
				t.Fatalf("%s, local=%q: %v", name, env, err)
			}
			src := cfg.Sources
			if name == "orgs" {
				src = cfg.Orgs[0].Sources
			}
			rule := src.Synthetic.Transforms[0]
			if rule.Replacement != "${local}@redacted" || rule.Pattern != "^(?P<local>[^@]+)@.*$" {
				t.Fatalf("%s, local=%q: the loader changed the rule: %+v", name, env, rule)
			}
			sh, err := shape.New("sources.synthetic", src.Shape("synthetic"))
			if err != nil {
				t.Fatal(err)
			}
			row := map[string]any{"Username": "user7@example.com"}
			sh.For("LoginEvent").Values(row)
			if row["Username"] != "user7@redacted" {
				t.Fatalf("%s, local=%q: shipped %q, want the group's text user7@redacted", name, env, row["Username"])
			}
		}
	}
}

// A replacement's ${NAME} that names no group of the pattern (written for
// an environment variable, which a replacement never reads) is refused,
// with the same problem whether the variable is set or not; so is a
// pattern's ${NAME}.
func TestRegexReplaceEnvironmentReferenceIsRefusedWhateverTheEnvironment(t *testing.T) {
	yaml := orgsSink + `
sources:
  synthetic:
    rate: 1
    transforms:
      - {action: regex_replace, fields: [Username], pattern: '@.*$', replacement: '@${REDACT_DOMAIN}'}
      - {action: regex_replace, fields: [Username], pattern: '${SECRET_TOKEN}', replacement: '***'}
`
	var first string
	for _, env := range []string{"", "example.invalid"} {
		setOrUnset(t, "REDACT_DOMAIN", env)
		setOrUnset(t, "SECRET_TOKEN", env)
		msg := problems(t, yaml)
		_, msg, _ = strings.Cut(msg, "\n") // past the line naming the file
		for _, want := range []string{
			"sources.synthetic.transforms[0].replacement: rule regex_replace#1: ${REDACT_DOMAIN} names no group of pattern (it has no group: only $0, the whole match); " +
				"a replacement is read as written, never from the environment",
			"sources.synthetic.transforms[1].pattern: rule regex_replace#2: ${SECRET_TOKEN} matches nothing",
		} {
			if !strings.Contains(msg, want) {
				t.Errorf("REDACT_DOMAIN=%q: the problems do not say %q:\n%s", env, want, msg)
			}
		}
		if strings.Contains(msg, "not set in the environment") {
			t.Errorf("the loader read the environment for a transform:\n%s", msg)
		}
		if first == "" {
			first = msg
		} else if msg != first {
			t.Errorf("the verdict depends on the environment:\nunset:\n%s\nset:\n%s", first, msg)
		}
	}
}

// $${NAME} in a value is the text ${NAME}, whether NAME is set or not; in
// a run of $ before {NAME} each pair is one literal $ (an odd one left
// starts a placeholder); every other $ and $$ is left as written. Ordinary
// ${NAME} placeholders are still replaced, in lists, maps and list items.
func TestDollarDollarBraceIsTheLiteralText(t *testing.T) {
	t.Setenv("SF2LOKI_TEST_LOKI_URL", "http://loki:3100/loki/api/v1/push")
	t.Setenv("SF2LOKI_TEST_FIELD", "UserId")
	yaml := `
sink: {loki: {url: '${SF2LOKI_TEST_LOKI_URL}', labels: {job: '$${TOKEN}', service_name: 'pa$$word$'}}}
sources:
  transform_salt: pepper
  synthetic:
    rate: 1
    transforms:
      - action: hash
        name: 'rule-$${TOKEN}'
        fields: ['${SF2LOKI_TEST_FIELD}', '$${TOKEN}', '$$$${TOKEN}', 'a$$b', '$$', '${']
`
	for _, token := range []string{"", "FROM-THE-ENV"} {
		setOrUnset(t, "TOKEN", token)
		cfg, _, err := config.Load(write(t, yaml))
		if err != nil {
			t.Fatalf("TOKEN=%q: %v", token, err)
		}
		rule := cfg.Sources.Synthetic.Transforms[0]
		if cfg.Sink.Loki.URL != "http://loki:3100/loki/api/v1/push" || cfg.Sink.Loki.Labels["job"] != "${TOKEN}" ||
			cfg.Sink.Loki.Labels["service_name"] != "pa$$word$" || rule.Name != "rule-${TOKEN}" ||
			strings.Join(rule.Fields, " ") != "UserId ${TOKEN} $${TOKEN} a$$b $$ ${" {
			t.Fatalf("TOKEN=%q: url %q, labels %v, rule %+v", token, cfg.Sink.Loki.URL, cfg.Sink.Loki.Labels, rule)
		}
	}
	// An odd run: a $ then the variable's value.
	t.Setenv("TOKEN", "v")
	cfg, _, err := config.Load(write(t, orgsSink+"sources: {synthetic: {rate: 1, transforms: [{action: hash, fields: ['$$${TOKEN}', '$$$$${TOKEN}', '$$$$$${TOKEN}']}]}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if got := strings.Join(cfg.Sources.Synthetic.Transforms[0].Fields, " "); got != "$v $$v $$${TOKEN}" {
		t.Fatalf("odd runs of $: %q", got)
	}
	// Unset, a placeholder is a problem that names the escape.
	if err := os.Unsetenv("TOKEN"); err != nil {
		t.Fatal(err)
	}
	_, _, err = config.Load(write(t, "sink: {loki: {labels: {job: 'x-${TOKEN}'}}}\n"))
	var ce *config.Error
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "sink.loki.labels.job: ${TOKEN} is not set in the environment (write $${TOKEN} for the text ${TOKEN})") {
		t.Fatalf("an unset variable: %v", err)
	}
}

// Only a transform's pattern and replacement are taken as written.
func TestVerbatimKeysAreTheRegexKeys(t *testing.T) {
	n := 0
	for _, f := range config.Schema() {
		if !f.Verbatim {
			continue
		}
		n++
		if !strings.HasSuffix(f.Path, ".transforms[].pattern") && !strings.HasSuffix(f.Path, ".transforms[].replacement") {
			t.Errorf("%s is taken as written", f.Path)
		}
	}
	if want := 2 * 2 * len(config.ShapeSources); n != want { // pattern and replacement, top level and orgs
		t.Errorf("%d keys are taken as written, want %d", n, want)
	}
}
