package gcs_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/sf2loki/sf2loki/internal/adapters/gcs"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/internal/testenv/faultproxy"
)

// GCS answers 401 when it does not accept the credentials themselves and
// 403 when they lack a permission
// (https://cloud.google.com/storage/docs/json_api/v1/status-codes): only
// the 403 asks for a permission.
func TestUnauthorizedIsRefusedCredentials(t *testing.T) {
	srv := testenv.StartGCS(t)
	bucket := srv.NewBucket(t)
	for _, c := range []struct {
		status  int
		reason  string
		refused bool
	}{{401, "authError", true}, {403, "forbidden", false}} {
		p := faultproxy.New(t, srv.URL)
		p.Add(faultproxy.Rule{Name: "answer", Action: faultproxy.Respond, Status: c.status, Body: gcsError(c.status, c.reason)})
		s := open(t, p.URL, bucket, "k")
		_, err := s.Put(t.Context(), []byte("x"), ports.CreateOnly())
		if !errors.Is(err, ports.ErrPermissionDenied) || errors.Is(err, ports.ErrCredentialsRefused) != c.refused || ports.IsTransient(err) {
			t.Fatalf("Put answered %d: %v (want credentials refused: %v)", c.status, err, c.refused)
		}
		if c.refused && !strings.Contains(err.Error(), "service_file") {
			t.Fatalf("a 401 does not say what to fix: %v", err)
		}
	}
}

// A key file that cannot be read is a credentials problem, not a
// permission to grant.
func TestUnreadableKeyFileIsRefusedCredentials(t *testing.T) {
	t.Setenv("STORAGE_EMULATOR_HOST", "")
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", t.TempDir()+"/no-such-key.json")
	s, err := gcs.New(t.Context(), gcs.Config{Bucket: "b", ObjectName: "o"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Get(t.Context())
	if !errors.Is(err, ports.ErrCredentialsRefused) || errors.Is(err, ports.ErrNoCredentials) || strings.Contains(err.Error(), "grant") {
		t.Fatalf("Get with a missing key file: %v, want ErrCredentialsRefused", err)
	}
}
