package gcs_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/adapters/gcs"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/ports/porttest"
	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/internal/testenv/e2e"
	"github.com/sf2loki/sf2loki/internal/testenv/faultproxy"
)

func open(t *testing.T, base, bucket, name string, mutate ...func(*gcs.Config)) *gcs.Store {
	t.Helper()
	cfg := gcs.Config{Bucket: bucket, ObjectName: name, Endpoint: testenv.JSONEndpoint(base)}
	for _, m := range mutate {
		m(&cfg)
	}
	s, err := gcs.New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestContract(t *testing.T) {
	srv := testenv.StartGCS(t)
	bucket := srv.NewBucket(t)
	porttest.RunObjectCAS(t, func(t *testing.T) porttest.Opener {
		name := e2e.Name("contract/" + strings.ReplaceAll(t.Name(), "/", "-"))
		return func(t *testing.T) ports.ObjectCAS { return open(t, srv.URL, bucket, name) }
	})
}

func gcsError(code int, reason string) string {
	return fmt.Sprintf(`{"error":{"code":%d,"message":"injected","errors":[{"reason":%q,"message":"injected"}]}}`, code, reason)
}

// isConditionalPut matches an upload carrying a generation precondition.
func isConditionalPut(r faultproxy.Request) bool {
	return (r.Method == http.MethodPost || r.Method == http.MethodPut) && strings.Contains(r.Path, "/upload/") && r.Conditional()
}

func isRead(r faultproxy.Request) bool { return r.Method == http.MethodGet }

func harness(t *testing.T, srv *testenv.GCSServer) e2e.Harness {
	bucket := srv.NewBucket(t)
	return e2e.Harness{
		Endpoint: srv.URL,
		Open: func(t *testing.T, base, name string, timeout time.Duration) ports.ObjectCAS {
			return open(t, base, bucket, name, func(c *gcs.Config) { c.RequestTimeout = timeout })
		},
		LostAck:          faultproxy.Rule{Status: 500, Body: gcsError(500, "backendError")},
		IsConditionalPut: isConditionalPut,
		IsRead:           isRead,
	}
}

func TestFaultClassification(t *testing.T) {
	h := harness(t, testenv.StartGCS(t))
	e2e.RunFaults(t, h, []e2e.FaultCase{
		{Name: "LostAckAfterApply500", Write: true, Landed: true,
			Rule: faultproxy.Rule{Action: faultproxy.ApplyThenRespond, Status: 500, Body: gcsError(500, "backendError")}},
		{Name: "LostAckConnectionReset", Write: true, Landed: true,
			Rule: faultproxy.Rule{Action: faultproxy.ApplyThenReset}},
		{Name: "ResetMidBodyOnWrite", Write: true, Landed: true,
			Rule: faultproxy.Rule{Action: faultproxy.ResetMidBody}},
		{Name: "ServiceUnavailable503", Write: true,
			Rule: faultproxy.Rule{Action: faultproxy.Respond, Status: 503, Body: gcsError(503, "backendError")}},
		{Name: "Throttled429RetryAfter", Write: true, RetryAfter: 2 * time.Second,
			Rule: faultproxy.Rule{Action: faultproxy.Respond, Status: 429, Body: gcsError(429, "rateLimitExceeded"),
				Header: http.Header{"Retry-After": {"2"}}}},
		{Name: "Unavailable503OnRead",
			Rule: faultproxy.Rule{Action: faultproxy.Respond, Status: 503, Body: gcsError(503, "backendError")}},
		{Name: "RequestTimeout",
			Rule: faultproxy.Rule{Action: faultproxy.Delay, Delay: 3 * time.Second}},
	})
}

// The storage library resumes a read cut mid-body with a ranged read pinned
// to the generation it started with, so the caller gets the whole document of
// one generation (never a mix), not an error.
func TestResetMidBodyOnReadResumesSameGeneration(t *testing.T) {
	srv := testenv.StartGCS(t)
	bucket := srv.NewBucket(t)
	p := faultproxy.New(t, srv.URL)
	name := e2e.Name("reset")
	direct := open(t, srv.URL, bucket, name)
	payload := []byte(`{"a":"` + strings.Repeat("x", 4096) + `"}`)
	v, err := direct.Put(t.Context(), payload, ports.CreateOnly())
	if err != nil {
		t.Fatal(err)
	}
	p.Add(faultproxy.Rule{Name: "reset", Action: faultproxy.ResetMidBody, Times: 1})
	obj, err := open(t, p.URL, bucket, name).Get(t.Context())
	if err != nil {
		if !ports.IsTransient(err) {
			t.Fatalf("a read cut mid-body: %v, want the document or a transient error", err)
		}
		return
	}
	if string(obj.Data) != string(payload) || obj.Version != v {
		t.Fatalf("resumed read returned %d bytes at %q, want %d bytes at %q", len(obj.Data), obj.Version, len(payload), v)
	}
	if n := p.Count(func(r faultproxy.Request) bool { return r.Method == http.MethodGet }); n != 2 {
		t.Fatalf("%d reads through the proxy, want the cut one and its resumption", n)
	}
}

func TestForbiddenIsPermissionDenied(t *testing.T) {
	srv := testenv.StartGCS(t)
	bucket := srv.NewBucket(t)
	p := faultproxy.New(t, srv.URL)
	p.Add(faultproxy.Rule{Name: "403", Action: faultproxy.Respond, Status: 403, Body: gcsError(403, "forbidden")})
	s := open(t, p.URL, bucket, "k")
	if _, err := s.Get(t.Context()); !errors.Is(err, ports.ErrPermissionDenied) || ports.IsTransient(err) {
		t.Fatalf("Get answered 403: %v, want ErrPermissionDenied", err)
	}
	if _, err := s.Put(t.Context(), []byte("x"), ports.CreateOnly()); !errors.Is(err, ports.ErrPermissionDenied) {
		t.Fatalf("Put answered 403: %v, want ErrPermissionDenied", err)
	}
}

func TestMissingBucketIsNotAbsentObject(t *testing.T) {
	srv := testenv.StartGCS(t)
	s := open(t, srv.URL, "no-such-bucket-here", "k")
	_, err := s.Put(t.Context(), []byte("x"), ports.CreateOnly())
	if !errors.Is(err, ports.ErrBucketNotFound) || errors.Is(err, ports.ErrNotFound) {
		t.Fatalf("Put in a missing bucket: %v, want ErrBucketNotFound", err)
	}
}

func TestCallerCancellationIsNotTransient(t *testing.T) {
	e2e.CallerCancellation(t, harness(t, testenv.StartGCS(t)))
}

func TestConfigValidation(t *testing.T) {
	for name, cfg := range map[string]gcs.Config{
		"no bucket": {ObjectName: "k"},
		"no object": {Bucket: "b"},
	} {
		if _, err := gcs.New(t.Context(), cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	s := open(t, "http://127.0.0.1:1", "b", "a/k")
	if s.String() != "gs://b/a/k" {
		t.Fatal(s.String())
	}
	if _, err := s.Put(t.Context(), []byte("x"), ports.IfVersion("not-a-generation")); !errors.Is(err, ports.ErrInvalidPrecondition) {
		t.Fatalf("non-numeric generation: %v", err)
	}
}

func TestEndToEnd(t *testing.T) {
	e2e.Run(t, harness(t, testenv.StartGCS(t)))
}

func TestHonoursStorageEmulatorHost(t *testing.T) {
	srv := testenv.StartGCS(t)
	bucket := srv.NewBucket(t)
	t.Setenv("STORAGE_EMULATOR_HOST", strings.TrimPrefix(srv.URL, "http://"))
	s, err := gcs.New(t.Context(), gcs.Config{Bucket: bucket, ObjectName: "emulated"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	v, err := s.Put(t.Context(), []byte("via the emulator"), ports.CreateOnly())
	if err != nil {
		t.Fatalf("Put through STORAGE_EMULATOR_HOST: %v", err)
	}
	obj, err := open(t, srv.URL, bucket, "emulated").Get(t.Context())
	if err != nil || string(obj.Data) != "via the emulator" || obj.Version != v {
		t.Fatalf("the write did not reach the emulator: %q %q %v", obj.Data, obj.Version, err)
	}
}

func TestMissingCredentialsArePermissionDeniedOnFirstUse(t *testing.T) {
	t.Setenv("STORAGE_EMULATOR_HOST", "")
	t.Setenv("GOOGLE_APPLICATION_CREDENTIALS", t.TempDir()+"/no-such-key.json")
	s, err := gcs.New(t.Context(), gcs.Config{Bucket: "b", ObjectName: "o"})
	if err != nil {
		t.Fatalf("New must not need credentials: %v", err)
	}
	if _, err := s.Get(t.Context()); !errors.Is(err, ports.ErrPermissionDenied) || !strings.Contains(err.Error(), "service_file") {
		t.Fatalf("Get without credentials: %v, want ErrPermissionDenied saying what to set", err)
	}
}

func TestGetRefusesAnObjectOverTheCap(t *testing.T) {
	srv := testenv.StartGCS(t)
	bucket := srv.NewBucket(t)
	big := []byte(strings.Repeat("x", 4096))
	full := open(t, srv.URL, bucket, "big.lease")
	v, err := full.Put(t.Context(), big, ports.CreateOnly())
	if err != nil {
		t.Fatal(err)
	}
	capped := open(t, srv.URL, bucket, "big.lease", func(c *gcs.Config) { c.MaxSize = 1024 })
	obj, err := capped.Get(t.Context())
	if !errors.Is(err, ports.ErrTooLarge) || obj.Data != nil || obj.Version != v || !strings.Contains(err.Error(), "4096 bytes") {
		t.Fatalf("Get of a 4096-byte object with a 1024-byte cap: %v (data %d bytes, version %q, want %q)", err, len(obj.Data), obj.Version, v)
	}
	if _, err := capped.Put(t.Context(), []byte("{}"), ports.IfVersion(obj.Version)); err != nil {
		t.Fatalf("replacing the oversized object: %v", err)
	}
	if _, err := capped.Put(t.Context(), big, ports.CreateOnly()); !errors.Is(err, ports.ErrTooLarge) {
		t.Fatalf("Put over the cap: %v", err)
	}
	if got, err := full.Get(t.Context()); err != nil || string(got.Data) != "{}" {
		t.Fatalf("after a refused write: %q, %v", got.Data, err)
	}
}
