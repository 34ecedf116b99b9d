package s3_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/sf2loki/sf2loki/internal/adapters/s3"
	"github.com/sf2loki/sf2loki/internal/ports"
)

// s3Refusing is an S3 endpoint that answers every request that carries a
// SigV4 signature with status and the REST error body of code, as
// https://docs.aws.amazon.com/AmazonS3/latest/API/ErrorResponses.html
// documents it (Content-Type application/xml, <Error><Code>...). An
// unsigned request gets the 403 AccessDenied S3 gives anonymous callers.
func s3Refusing(t *testing.T, status int, code, message string) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		st, c, m := status, code, message
		if !strings.HasPrefix(r.Header.Get("Authorization"), "AWS4-HMAC-SHA256 ") {
			st, c, m = http.StatusForbidden, "AccessDenied", "Access Denied"
		}
		w.Header().Set("Content-Type", "application/xml")
		w.Header().Set("x-amz-request-id", "4442587FB7D0A2F9")
		w.WriteHeader(st)
		if r.Method != http.MethodHead {
			_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?>` + "\n<Error><Code>" + c + "</Code><Message>" + m +
				"</Message><Resource>/b/k</Resource><RequestId>4442587FB7D0A2F9</RequestId></Error>"))
		}
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func staticStore(t *testing.T, endpoint string) *s3.Store {
	t.Helper()
	s, err := s3.New(t.Context(), s3.Config{Bucket: "b", Key: "k", Region: "eu-west-1", EndpointURL: endpoint,
		Credentials: credentials.NewStaticCredentialsProvider("AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "")})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// S3's answers about the credentials name them, and the one about the
// policy names the policy: each error says what to fix.
func TestS3ErrorsNameTheirCause(t *testing.T) {
	cases := []struct {
		code, message string
		want          error
		names         string // what the message must tell the user to fix
	}{
		{"AccessDenied", "Access Denied", ports.ErrPermissionDenied, ""},
		{"InvalidAccessKeyId", "The AWS access key ID you provided does not exist in our records.", ports.ErrCredentialsRefused, "AWS_ACCESS_KEY_ID"},
		{"SignatureDoesNotMatch", "The request signature we calculated does not match the signature you provided.", ports.ErrCredentialsRefused, "AWS_SECRET_ACCESS_KEY"},
		{"ExpiredToken", "The provided token has expired.", ports.ErrCredentialsRefused, "renew the temporary credentials"},
	}
	for _, c := range cases {
		t.Run(c.code, func(t *testing.T) {
			srv, _ := s3Refusing(t, http.StatusForbidden, c.code, c.message)
			s := staticStore(t, srv.URL)
			_, getErr := s.Get(t.Context())
			_, putErr := s.Put(t.Context(), []byte("x"), ports.CreateOnly())
			for op, err := range map[string]error{"get": getErr, "put": putErr} {
				if !errors.Is(err, c.want) || !errors.Is(err, ports.ErrPermissionDenied) || ports.IsTransient(err) {
					t.Fatalf("%s: %v, want %v (and ErrPermissionDenied, not transient)", op, err, c.want)
				}
				if c.code == "AccessDenied" && (errors.Is(err, ports.ErrCredentialsRefused) || errors.Is(err, ports.ErrNoCredentials)) {
					t.Fatalf("%s: AccessDenied read as a credentials problem: %v", op, err)
				}
				if !strings.Contains(err.Error(), c.names) || !strings.Contains(err.Error(), c.code) {
					t.Fatalf("%s: %q does not name %s and %q", op, err, c.code, c.names)
				}
				if strings.Contains(err.Error(), "wJalrXUtnFEMI") {
					t.Fatalf("%s: the secret is in the error: %v", op, err)
				}
			}
		})
	}
}

// noAWSCredentials empties the AWS default chain: no environment keys, no
// shared files, no web identity, no container credentials; the instance
// metadata service is imds (or disabled when imds is "").
func noAWSCredentials(t *testing.T, imds string) {
	t.Helper()
	dir := t.TempDir()
	for _, k := range []string{"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_PROFILE", "AWS_DEFAULT_PROFILE",
		"AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_ROLE_ARN", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI", "AWS_CONTAINER_CREDENTIALS_FULL_URI",
		"AWS_CONTAINER_AUTHORIZATION_TOKEN", "AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE", "AWS_EC2_METADATA_SERVICE_ENDPOINT_MODE"} {
		t.Setenv(k, "")
	}
	t.Setenv("HOME", dir)
	t.Setenv("AWS_CONFIG_FILE", dir+"/config")
	t.Setenv("AWS_SHARED_CREDENTIALS_FILE", dir+"/credentials")
	if imds == "" {
		t.Setenv("AWS_EC2_METADATA_DISABLED", "true")
		t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", "")
		return
	}
	t.Setenv("AWS_EC2_METADATA_DISABLED", "false")
	t.Setenv("AWS_EC2_METADATA_SERVICE_ENDPOINT", imds)
}

// imdsTurnedOff is the instance metadata service of an instance whose IMDS
// is turned off: every request answers 403 ("The request is not allowed or
// the IMDS is turned off",
// https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/instancedata-data-retrieval.html).
func imdsTurnedOff(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.WriteHeader(http.StatusForbidden)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// imdsWithoutRole is the instance metadata service of an instance with no
// role attached: a session token for PUT /latest/api/token (with the TTL
// header), 401 without the token, 404 for the role list.
func imdsWithoutRole(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.Method == http.MethodPut && r.URL.Path == "/latest/api/token":
			if r.Header.Get("X-aws-ec2-metadata-token-ttl-seconds") == "" {
				w.WriteHeader(http.StatusBadRequest)
				return
			}
			w.Header().Set("X-aws-ec2-metadata-token-ttl-seconds", r.Header.Get("X-aws-ec2-metadata-token-ttl-seconds"))
			_, _ = w.Write([]byte("imds-session-token"))
		case r.Header.Get("X-aws-ec2-metadata-token") != "imds-session-token":
			w.WriteHeader(http.StatusUnauthorized)
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// With no AWS credentials anywhere nothing reaches S3, and the error says
// so and what to set: not a permission to grant.
func TestNoAWSCredentialsIsNotAPermission(t *testing.T) {
	for name, imds := range map[string]func(*testing.T) string{
		"imds disabled":         func(*testing.T) string { return "" },
		"imds turned off":       imdsTurnedOff,
		"instance without role": imdsWithoutRole,
	} {
		t.Run(name, func(t *testing.T) {
			noAWSCredentials(t, imds(t))
			srv, requests := s3Refusing(t, http.StatusForbidden, "AccessDenied", "Access Denied")
			s, err := s3.New(t.Context(), s3.Config{Bucket: "b", Key: "k", Region: "eu-west-1", EndpointURL: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			_, err = s.Put(t.Context(), []byte("x"), ports.CreateOnly())
			if !errors.Is(err, ports.ErrNoCredentials) || ports.IsTransient(err) {
				t.Fatalf("Put without credentials: %v, want ErrNoCredentials", err)
			}
			if !errors.Is(err, ports.ErrPermissionDenied) {
				t.Fatalf("ErrNoCredentials is not ErrPermissionDenied for the callers that stop on it: %v", err)
			}
			for _, want := range []string{"no credentials found", "AWS_ACCESS_KEY_ID", "AWS_PROFILE", "web identity", "role"} {
				if !strings.Contains(err.Error(), want) {
					t.Fatalf("%q does not say %q", err, want)
				}
			}
			if strings.Contains(err.Error(), "grant") || strings.Contains(err.Error(), "s3:PutObject") {
				t.Fatalf("no credentials read as a permission: %v", err)
			}
			if n := requests.Load(); n != 0 {
				t.Fatalf("%d requests reached S3 without credentials", n)
			}
		})
	}
}

// Where the metadata service does not answer at all (not on EC2), the
// error stays transient (IMDS may be busy on EC2) but says the same.
func TestNoAWSCredentialsWithoutMetadataService(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "http://" + ln.Addr().String()
	_ = ln.Close()
	noAWSCredentials(t, closed)
	s, err := s3.New(t.Context(), s3.Config{Bucket: "b", Key: "k", Region: "eu-west-1", EndpointURL: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Get(t.Context())
	if !ports.IsTransient(err) || errors.Is(err, ports.ErrPermissionDenied) {
		t.Fatalf("Get with the metadata service unreachable: %v, want transient and not a permission", err)
	}
	if !strings.Contains(err.Error(), "no AWS credentials found") || !strings.Contains(err.Error(), "AWS_ACCESS_KEY_ID") {
		t.Fatalf("%q does not say no credentials were found and what to set", err)
	}
}

// A configured web identity that cannot be used is a credentials problem,
// not a permission.
func TestBrokenWebIdentityIsRefusedCredentials(t *testing.T) {
	noAWSCredentials(t, "")
	t.Setenv("AWS_ROLE_ARN", "arn:aws:iam::123456789012:role/sf2loki")
	t.Setenv("AWS_WEB_IDENTITY_TOKEN_FILE", t.TempDir()+"/no-token")
	s, err := s3.New(t.Context(), s3.Config{Bucket: "b", Key: "k", Region: "eu-west-1", EndpointURL: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Get(t.Context())
	if !errors.Is(err, ports.ErrCredentialsRefused) || strings.Contains(err.Error(), "grant") {
		t.Fatalf("Get with a web identity token file that does not exist: %v, want ErrCredentialsRefused", err)
	}
}

// An endpoint whose name does not resolve is unreachable, transient, and
// the error names the name and what to check.
func TestUnresolvableEndpointIsUnreachable(t *testing.T) {
	// A dialer that fails as Go's does for a name that does not exist
	// (.invalid never resolves, RFC 6761), without asking any DNS server.
	dial := func(_ context.Context, network, addr string) (net.Conn, error) {
		host, _, _ := net.SplitHostPort(addr)
		return nil, &net.OpError{Op: "dial", Net: network, Err: &net.DNSError{Err: "no such host", Name: host, IsNotFound: true}}
	}
	t.Setenv("AWS_CA_BUNDLE", "") // the SDK cannot add a CA bundle to a custom *http.Client
	s, err := s3.New(t.Context(), s3.Config{Bucket: "b", Key: "k", Region: "eu-west-1", EndpointURL: "http://s3.nonexistent.invalid:9000",
		Credentials: credentials.NewStaticCredentialsProvider("AKIAIOSFODNN7EXAMPLE", "secret", ""),
		HTTPClient:  &http.Client{Transport: &http.Transport{DialContext: dial}}})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Put(t.Context(), []byte("x"), ports.CreateOnly())
	if !errors.Is(err, ports.ErrUnreachable) || !ports.IsTransient(err) || errors.Is(err, ports.ErrPermissionDenied) {
		t.Fatalf("Put to an endpoint that does not resolve: %v, want transient ErrUnreachable", err)
	}
	for _, want := range []string{"s3.nonexistent.invalid does not resolve", "DNS", "endpoint_url"} {
		if !strings.Contains(err.Error(), want) {
			t.Fatalf("%q does not say %q", err, want)
		}
	}
}

// The SDK's own warnings go to the configured slog logger at Warn, not to
// stderr: the IMDSv1 fallback on an instance whose IMDS is turned off.
func TestSDKWarningsGoToSlog(t *testing.T) {
	noAWSCredentials(t, imdsTurnedOff(t))
	var buf bytes.Buffer
	log := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	s, err := s3.New(t.Context(), s3.Config{Bucket: "b", Key: "k", Region: "eu-west-1", EndpointURL: "http://127.0.0.1:1", Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = s.Get(t.Context())
	out := buf.String()
	if !strings.Contains(out, `"level":"WARN"`) || !strings.Contains(out, `"component":"aws-sdk"`) || !strings.Contains(out, "IMDSv1") {
		t.Fatalf("the SDK's IMDSv1 warning is not in the slog output:\n%s", out)
	}
}
