package config_test

import (
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/config"
)

func TestApexLogAndLimitsConfig(t *testing.T) {
	cfg, _, err := config.Load("")
	if err != nil {
		t.Fatal(err)
	}
	if a, l := cfg.Sources.ApexLog, cfg.Salesforce.Limits; a.Enabled || a.PollInterval != time.Minute || a.Lookback != time.Hour ||
		len(a.Users) != 0 || a.MaxBodyBytes != 5<<20 || !l.Enabled || l.PollInterval != 5*time.Minute {
		t.Fatalf("defaults: apexlog %+v, limits %+v", a, l)
	}
	base := "salesforce: {auth_mode: jwt_bearer, client_id: ck, username: u, private_key_file: /k}\nsink: {loki: {url: http://loki/push}}\n"
	cfg, _, err = config.Load(write(t, base+"sources: {apexlog: {enabled: true, users: [ops@acme.com, first.last+ci@acme.co.uk], max_body_bytes: 1048576}}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if a := cfg.Sources.ApexLog; !a.Enabled || len(a.Users) != 2 || a.MaxBodyBytes != 1<<20 {
		t.Fatalf("apexlog %+v", a)
	}
	for name, tc := range map[string]struct{ yaml, want string }{
		"quote in a username": {base + "sources: {apexlog: {enabled: true, users: [ok@acme.com, \"o'brien@acme.com\"]}}\n",
			`sources.apexlog.users[1]: "o'brien@acme.com" is not a username sf2loki puts in a query`},
		"not a username":  {base + "sources: {apexlog: {users: [ops]}}\n", `sources.apexlog.users[0]: "ops" is not a username`},
		"no auth":         {"sink: {loki: {url: http://l}}\nsources: {apexlog: {enabled: true}}\n", "salesforce.auth_mode: required when sources.apexlog.enabled is set"},
		"no sink":         {"salesforce: {auth_mode: jwt_bearer, client_id: ck, username: u, private_key_file: /k}\nsources: {apexlog: {enabled: true}}\n", "sink.loki.url: required when a source is enabled (sources.apexlog.enabled is set)"},
		"tiny body":       {base + "sources: {apexlog: {enabled: true, max_body_bytes: 10}}\n", "sources.apexlog.max_body_bytes: must be at least 1024"},
		"fast polling":    {base + "sources: {apexlog: {enabled: true, poll_interval: 1s}}\n", "sources.apexlog.poll_interval: must be at least 10s, got 1s"},
		"limits too fast": {"salesforce: {auth_mode: jwt_bearer, client_id: ck, username: u, private_key_file: /k, limits: {poll_interval: 10s}}\n", "salesforce.limits.poll_interval: must be at least 1m, got 10s"},
		"per org": {"sink: {loki: {url: http://l}}\norgs:\n  - {name: a, salesforce: {auth_mode: client_credentials, login_url: 'https://a.my.salesforce.com', client_id: c, client_secret: s}, sources: {apexlog: {enabled: true, users: ['x y@acme.com']}}}\n",
			`orgs[0].sources.apexlog.users[0]: "x y@acme.com" is not a username`},
	} {
		_, _, err := config.Load(write(t, tc.yaml))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: got %v, want %q", name, err, tc.want)
		}
	}
}
