package gcs

import (
	"errors"
	"strings"
	"testing"

	"github.com/sf2loki/sf2loki/internal/ports"
)

// Application Default Credentials that find nothing fail the client with
// "credentials: could not find default credentials" (cloud.google.com/go/auth,
// credentials/detect.go; reproduced here because finding none for real
// probes the GCE metadata server): no credentials, said with what to set.
func TestNoDefaultCredentialsIsNoCredentials(t *testing.T) {
	lib := errors.New("dialing: credentials: could not find default credentials. See https://cloud.google.com/docs/authentication/external/set-up-adc for more information")
	err := credentialsError("gs://b/o", lib)
	if !errors.Is(err, ports.ErrNoCredentials) || !errors.Is(err, lib) {
		t.Fatalf("%v, want ErrNoCredentials wrapping the library's error", err)
	}
	for _, want := range []string{"service_file", "GOOGLE_APPLICATION_CREDENTIALS", "gcloud auth application-default login"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("%q does not say %q", err, want)
		}
	}
}
