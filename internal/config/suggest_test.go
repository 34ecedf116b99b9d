package config_test

import (
	"strings"
	"testing"
)

// TestMisspeltSectionsGetADidYouMean: an unknown key whose value is a
// mapping is matched against the sections (it was matched against leaf
// keys only, and got no suggestion).
func TestMisspeltSectionsGetADidYouMean(t *testing.T) {
	msg := problems(t, `
salesfroce: {client_id: x}
sources:
  evenlogfile: {event_types: [Login]}
sink:
  loki: {url: http://loki:3100/loki/api/v1/push, tenant_idd: x, tsl: {ca_file: /x}}
orgs:
  - name: a
    salesforse: {client_id: y}
`)
	for _, want := range []string{
		"salesfroce: unknown key; did you mean salesforce?",
		"sources.evenlogfile: unknown key; did you mean sources.eventlogfile?",
		"sink.loki.tenant_idd: unknown key; did you mean sink.loki.tenant_id?",
		"sink.loki.tsl: unknown key; did you mean sink.loki.tls?",
		"orgs[0].salesforse: unknown key; did you mean orgs[].salesforce?",
	} {
		if !strings.Contains(msg, want) {
			t.Errorf("the problems do not say %q:\n%s", want, msg)
		}
	}
}
