package config_test

import (
	"strings"
	"testing"

	"github.com/sf2loki/sf2loki/internal/config"
)

// lokiWarnings returns the warnings of a configuration whose sink.loki is
// loki (a YAML flow mapping's inside).
func lokiWarnings(t *testing.T, loki string) []string {
	t.Helper()
	_, warnings, err := config.Load(write(t, "sink: {loki: {"+loki+"}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	return warnings
}

// TestLokiURLWithoutPushPathWarns: the url is posted to as it is (nothing
// is appended), so a path other than Loki's push path is a warning naming
// the url it likely meant; the push path, under any gateway prefix, is not.
func TestLokiURLWithoutPushPathWarns(t *testing.T) {
	for url, want := range map[string]string{
		"https://logs.example.com": "sink.loki.url https://logs.example.com has no /loki/api/v1/push path: sf2loki posts to the URL as it is, " +
			"and Loki serves pushes at /loki/api/v1/push; did you mean https://logs.example.com/loki/api/v1/push?",
		"https://logs.example.com/":                        "has no /loki/api/v1/push path",
		"http://loki:3100/loki":                            "sink.loki.url http://loki:3100/loki does not end in /loki/api/v1/push: sf2loki posts to the URL as it is, and Loki serves pushes at /loki/api/v1/push; did you mean http://loki:3100/loki/api/v1/push?",
		"http://loki:3100/loki/api/v1":                     "did you mean http://loki:3100/loki/api/v1/push?",
		"http://loki:3100/loki/api/v1/push/":               "did you mean http://loki:3100/loki/api/v1/push?",
		"http://loki:3100/loki/api/v1/query_range":         "did you mean http://loki:3100/loki/api/v1/push?",
		"https://gw.example.com/logs":                      "did you mean https://gw.example.com/logs/loki/api/v1/push?",
		"https://u:pw-s3cr3t@gw.example.com":               "did you mean the path /loki/api/v1/push?",
		"http://loki:3100/loki/api/v1/push":                "",
		"https://gw.example.com/tenant-a/loki/api/v1/push": "",
		"http://victorialogs:9428/insert/loki/api/v1/push": "",
	} {
		t.Run(url, func(t *testing.T) {
			var got []string
			for _, w := range lokiWarnings(t, "url: '"+url+"'") {
				if strings.HasPrefix(w, "sink.loki.url") && strings.Contains(w, "/loki/api/v1/push") {
					got = append(got, w)
				}
			}
			switch {
			case want == "" && len(got) != 0:
				t.Fatalf("warned: %q", got)
			case want != "" && (len(got) != 1 || !strings.Contains(got[0], want)):
				t.Fatalf("warnings %q\nwant one holding %q", got, want)
			case strings.Contains(strings.Join(got, ""), "s3cr3t"):
				t.Fatalf("the password is quoted: %q", got)
			}
		})
	}
}

// TestLokiCredentialsThatAreNotSentWarn: a user in the url is replaced by
// a token's Authorization header, and on Grafana Cloud a tenant that is not
// the basic-auth user would be sent beside it.
func TestLokiCredentialsThatAreNotSentWarn(t *testing.T) {
	w := lokiWarnings(t, "url: 'https://u:pw-s3cr3t@loki.example.com/loki/api/v1/push', auth_token_file: /run/t")
	if len(w) != 1 || !strings.Contains(w[0], "holds a user, but a token is set") || strings.Contains(w[0], "s3cr3t") {
		t.Fatalf("user in the url: %q", w)
	}
	const gc = "url: https://logs-prod-012.grafana.net/loki/api/v1/push, auth_token_file: /run/t, "
	w = lokiWarnings(t, gc+`basic_auth_user: "123456", tenant_id: team-a`)
	if len(w) != 1 || !strings.HasPrefix(w[0], `sink.loki.tenant_id "team-a" differs from sink.loki.basic_auth_user "123456" on Grafana Cloud`) {
		t.Fatalf("Grafana Cloud: %q", w)
	}
	for _, ok := range []string{`tenant_id: "123456"`, `basic_auth_user: "123456", tenant_id: "123456"`, `basic_auth_user: "123456"`} {
		if w := lokiWarnings(t, gc+ok); len(w) != 0 {
			t.Fatalf("%s: %q", ok, w)
		}
	}
}
