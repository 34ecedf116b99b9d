package s3_test

import (
	"context"
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

func TestFaultClassification(t *testing.T) {
	srv := testenv.StartS3(t)
	bucket := srv.NewBucket(t)
	cases := []struct {
		name      string
		rule      faultproxy.Rule
		op        string // get or put
		check     func(t *testing.T, err error)
		landed    bool // the write reached the store
		retryHint time.Duration
	}{
		{name: "LostAckAfterApply500", op: "put", landed: true,
			rule: faultproxy.Rule{Action: faultproxy.ApplyThenRespond, Status: 500, Body: s3Error("InternalError")}},
		{name: "LostAckConnectionReset", op: "put", landed: true,
			rule: faultproxy.Rule{Action: faultproxy.ApplyThenReset}},
		{name: "ServiceUnavailable503", op: "put",
			rule: faultproxy.Rule{Action: faultproxy.Respond, Status: 503, Body: s3Error("ServiceUnavailable")}},
		{name: "SlowDown503", op: "get",
			rule: faultproxy.Rule{Action: faultproxy.Respond, Status: 503, Body: s3Error("SlowDown")}},
		{name: "Throttled429RetryAfter", op: "put", retryHint: 3 * time.Second,
			rule: faultproxy.Rule{Action: faultproxy.Respond, Status: 429, Body: s3Error("TooManyRequests"),
				Header: http.Header{"Retry-After": {"3"}}}},
		{name: "ConditionalRequestConflict409", op: "put",
			rule: faultproxy.Rule{Action: faultproxy.Respond, Status: 409, Body: s3Error("ConditionalRequestConflict")}},
		{name: "ResetMidBody", op: "get",
			rule: faultproxy.Rule{Action: faultproxy.ResetMidBody}},
		{name: "RequestTimeout", op: "get",
			rule: faultproxy.Rule{Action: faultproxy.Delay, Delay: 3 * time.Second}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := faultproxy.New(t, srv.Endpoint)
			key := e2e.Name("fault")
			direct := open(t, srv.Endpoint, bucket, key)
			v, err := direct.Put(t.Context(), []byte(`{"seed":true}`), ports.CreateOnly())
			if err != nil {
				t.Fatal(err)
			}
			rule := tc.rule
			rule.Name, rule.Times = tc.name, 1
			p.Add(rule)
			s := open(t, p.URL, bucket, key, func(c *s3.Config) { c.RequestTimeout = 500 * time.Millisecond })
			payload := []byte(`{"written":"` + tc.name + `"}`)
			if tc.op == "put" {
				_, err = s.Put(t.Context(), payload, ports.IfVersion(v))
			} else {
				_, err = s.Get(t.Context())
			}
			if !ports.IsTransient(err) {
				t.Fatalf("%s: got %v, want a transient error", tc.name, err)
			}
			if tc.retryHint > 0 {
				if d, ok := ports.RetryAfter(err); !ok || d != tc.retryHint {
					t.Fatalf("retry-after %v (%v), want %v", d, ok, tc.retryHint)
				}
			}
			obj, gerr := direct.Get(t.Context())
			if gerr != nil {
				t.Fatal(gerr)
			}
			if landed := string(obj.Data) == string(payload); landed != tc.landed {
				t.Fatalf("write landed = %v, want %v", landed, tc.landed)
			}
			if n := p.Count(func(r faultproxy.Request) bool { return r.Fault == tc.name }); n != 1 {
				t.Fatalf("the fault fired %d times", n)
			}
		})
	}
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
	srv := testenv.StartS3(t)
	bucket := srv.NewBucket(t)
	p := faultproxy.New(t, srv.Endpoint)
	p.Add(faultproxy.Rule{Action: faultproxy.Delay, Delay: 5 * time.Second})
	s := open(t, p.URL, bucket, "k")
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	_, err := s.Get(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || ports.IsTransient(err) {
		t.Fatalf("got %v, want the caller's deadline, not transient", err)
	}
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
	srv := testenv.StartS3(t)
	bucket := srv.NewBucket(t)
	e2e.Run(t, e2e.Harness{
		Endpoint: srv.Endpoint,
		Open: func(t *testing.T, endpoint, name string) ports.ObjectCAS {
			return open(t, endpoint, bucket, name)
		},
		LostAck:          faultproxy.Rule{Status: 500, Body: s3Error("InternalError")},
		IsConditionalPut: isConditionalPut,
		IsRead:           isRead,
	})
}
