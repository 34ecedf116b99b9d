package s3_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/sf2loki/sf2loki/internal/adapters/s3"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/ports/porttest"
	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/internal/testenv/e2e"
	"github.com/sf2loki/sf2loki/internal/testenv/faultproxy"
)

func open(t *testing.T, endpoint, bucket, key string, mutate ...func(*s3.Config)) *s3.Store {
	t.Helper()
	cfg := s3.Config{Bucket: bucket, Key: key, Region: testenv.S3Region, EndpointURL: endpoint,
		Credentials: credentials.NewStaticCredentialsProvider(testenv.S3AccessKey, testenv.S3SecretKey, "")}
	for _, m := range mutate {
		m(&cfg)
	}
	s, err := s3.New(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestContract(t *testing.T) {
	srv := testenv.StartS3(t)
	bucket := srv.NewBucket(t)
	porttest.RunObjectCAS(t, func(t *testing.T) porttest.Opener {
		key := e2e.Name("contract/" + strings.ReplaceAll(t.Name(), "/", "-"))
		return func(t *testing.T) ports.ObjectCAS { return open(t, srv.Endpoint, bucket, key) }
	})
}

// s3Error is an S3 XML error body.
func s3Error(code string) string {
	return fmt.Sprintf(`<?xml version="1.0" encoding="UTF-8"?><Error><Code>%s</Code><Message>injected</Message><RequestId>x</RequestId></Error>`, code)
}

func isConditionalPut(r faultproxy.Request) bool {
	return r.Method == http.MethodPut && r.Conditional()
}

func isRead(r faultproxy.Request) bool {
	return r.Method == http.MethodGet || r.Method == http.MethodHead
}

func harness(t *testing.T, srv *testenv.S3Server) e2e.Harness {
	bucket := srv.NewBucket(t)
	return e2e.Harness{
		Endpoint: srv.Endpoint,
		Open: func(t *testing.T, endpoint, name string, timeout time.Duration) ports.ObjectCAS {
			return open(t, endpoint, bucket, name, func(c *s3.Config) { c.RequestTimeout = timeout })
		},
		LostAck:          faultproxy.Rule{Status: 500, Body: s3Error("InternalError")},
		IsConditionalPut: isConditionalPut,
		IsRead:           isRead,
	}
}

func TestFaultClassification(t *testing.T) {
	h := harness(t, testenv.StartS3(t))
	e2e.RunFaults(t, h, []e2e.FaultCase{
		{Name: "LostAckAfterApply500", Write: true, Landed: true,
			Rule: faultproxy.Rule{Action: faultproxy.ApplyThenRespond, Status: 500, Body: s3Error("InternalError")}},
		{Name: "LostAckConnectionReset", Write: true, Landed: true,
			Rule: faultproxy.Rule{Action: faultproxy.ApplyThenReset}},
		{Name: "ServiceUnavailable503", Write: true,
			Rule: faultproxy.Rule{Action: faultproxy.Respond, Status: 503, Body: s3Error("ServiceUnavailable")}},
		{Name: "SlowDown503",
			Rule: faultproxy.Rule{Action: faultproxy.Respond, Status: 503, Body: s3Error("SlowDown")}},
		{Name: "Throttled429RetryAfter", Write: true, RetryAfter: 3 * time.Second,
			Rule: faultproxy.Rule{Action: faultproxy.Respond, Status: 429, Body: s3Error("TooManyRequests"),
				Header: http.Header{"Retry-After": {"3"}}}},
		{Name: "ConditionalRequestConflict409", Write: true,
			Rule: faultproxy.Rule{Action: faultproxy.Respond, Status: 409, Body: s3Error("ConditionalRequestConflict")}},
		{Name: "ResetMidBody",
			Rule: faultproxy.Rule{Action: faultproxy.ResetMidBody}},
		{Name: "RequestTimeout",
			Rule: faultproxy.Rule{Action: faultproxy.Delay, Delay: 3 * time.Second}},
	})
}

func TestWrongCredentialsArePermissionDenied(t *testing.T) {
	srv := testenv.StartS3(t)
	bucket := srv.NewBucket(t)
	s := open(t, srv.Endpoint, bucket, "k", func(c *s3.Config) {
		c.Credentials = credentials.NewStaticCredentialsProvider("test", "wrong-secret", "")
	})
	_, err := s.Get(t.Context())
	if !errors.Is(err, ports.ErrPermissionDenied) || ports.IsTransient(err) {
		t.Fatalf("Get with a wrong secret: %v, want ErrPermissionDenied", err)
	}
	_, err = s.Put(t.Context(), []byte("x"), ports.CreateOnly())
	if !errors.Is(err, ports.ErrPermissionDenied) {
		t.Fatalf("Put with a wrong secret: %v, want ErrPermissionDenied", err)
	}
}

func TestNotImplementedConditionalIsUnsupported(t *testing.T) {
	srv := testenv.StartS3(t)
	bucket := srv.NewBucket(t)
	p := faultproxy.New(t, srv.Endpoint)
	p.Add(faultproxy.Rule{Name: "501", Action: faultproxy.Respond, Status: 501, Body: s3Error("NotImplemented"),
		Match: func(r *http.Request) bool { return isConditionalPut(faultproxy.FromHTTP(r)) }})
	s := open(t, p.URL, bucket, "k")
	_, err := s.Put(t.Context(), []byte("x"), ports.CreateOnly())
	if !errors.Is(err, ports.ErrConditionalWriteUnsupported) || !strings.Contains(err.Error(), "If-Match") {
		t.Fatalf("got %v, want ErrConditionalWriteUnsupported naming the headers", err)
	}
}

func TestMissingBucketIsNotAbsentObject(t *testing.T) {
	srv := testenv.StartS3(t)
	s := open(t, srv.Endpoint, "no-such-bucket-here", "k")
	_, err := s.Get(t.Context())
	if !errors.Is(err, ports.ErrBucketNotFound) || errors.Is(err, ports.ErrNotFound) {
		t.Fatalf("Get in a missing bucket: %v, want ErrBucketNotFound and not ErrNotFound", err)
	}
	_, err = s.Put(t.Context(), []byte("x"), ports.CreateOnly())
	if !errors.Is(err, ports.ErrBucketNotFound) {
		t.Fatalf("Put in a missing bucket: %v", err)
	}
}

func TestCallerCancellationIsNotTransient(t *testing.T) {
	e2e.CallerCancellation(t, harness(t, testenv.StartS3(t)))
}

func TestConfigValidation(t *testing.T) {
	t.Setenv("AWS_REGION", "")
	t.Setenv("AWS_DEFAULT_REGION", "")
	t.Setenv("AWS_CONFIG_FILE", t.TempDir()+"/none")
	t.Setenv("AWS_PROFILE", "")
	for name, cfg := range map[string]s3.Config{
		"no bucket": {Key: "k", Region: "us-east-1"},
		"no key":    {Bucket: "b", Region: "us-east-1"},
		"no region": {Bucket: "b", Key: "k"},
	} {
		if _, err := s3.New(t.Context(), cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	s, err := s3.New(t.Context(), s3.Config{Bucket: "b", Key: "a/k", EndpointURL: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatalf("endpoint without region: %v", err)
	}
	if s.String() != "s3://b/a/k" {
		t.Fatal(s.String())
	}
}

func TestEndToEnd(t *testing.T) {
	e2e.Run(t, harness(t, testenv.StartS3(t)))
}

func TestGetRefusesAnObjectOverTheCap(t *testing.T) {
	srv := testenv.StartS3(t)
	bucket := srv.NewBucket(t)
	big := []byte(strings.Repeat("x", 4096))
	full := open(t, srv.Endpoint, bucket, "big.lease")
	v, err := full.Put(t.Context(), big, ports.CreateOnly())
	if err != nil {
		t.Fatal(err)
	}
	capped := open(t, srv.Endpoint, bucket, "big.lease", func(c *s3.Config) { c.MaxSize = 1024 })
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
