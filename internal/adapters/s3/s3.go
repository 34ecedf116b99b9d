// Package s3 is the ports.ObjectCAS adapter for Amazon S3 and S3-compatible
// stores that implement conditional writes (If-None-Match: * and If-Match on
// PutObject, If-Match on DeleteObject).
//
// Imports: internal/ports, internal/buildinfo (the User-Agent) and the AWS
// SDK for Go v2.
package s3

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/smithy-go"

	"github.com/sf2loki/sf2loki/internal/buildinfo"
	"github.com/sf2loki/sf2loki/internal/ports"
)

// DefaultRequestTimeout bounds each request unless Config says otherwise:
// below the smallest sensible lease renew interval.
const DefaultRequestTimeout = 5 * time.Second

// Config names one S3 object and how to reach it.
type Config struct {
	// Bucket and Key name the object (both required).
	Bucket string
	Key    string
	// Region is the bucket's region; empty uses the AWS default chain
	// (AWS_REGION, shared config), and "us-east-1" when EndpointURL is set.
	Region string
	// EndpointURL points at an S3-compatible store (path-style addressing is
	// used when it is set).
	EndpointURL string
	// RequestTimeout bounds each request (default DefaultRequestTimeout).
	RequestTimeout time.Duration
	// Credentials overrides the AWS default credential chain (environment,
	// shared config, web identity, ECS task role, IMDS) when non-nil.
	Credentials aws.CredentialsProvider
	// HTTPClient overrides the SDK's HTTP client when non-nil.
	HTTPClient *http.Client
	// Logger receives the AWS SDK's own log lines (its warnings at Warn);
	// nil uses slog.Default() when a line is written.
	Logger *slog.Logger
	// MaxSize caps the document: Get does not read a larger object (it
	// returns ports.ErrTooLarge) and Put refuses larger data (default
	// DefaultMaxSize).
	MaxSize int64
}

// DefaultMaxSize is the cap on a document when Config.MaxSize is 0: the
// checkpoint document's cap, far above any lease record.
const DefaultMaxSize int64 = 16 << 20

// Store is one S3 object with compare-and-swap.
type Store struct {
	client  *s3.Client
	bucket  string
	key     string
	timeout time.Duration
	maxSize int64
}

var _ ports.ObjectCAS = (*Store)(nil)

// New validates cfg, resolves credentials lazily through the AWS default
// chain, and returns the store. It makes no request.
func New(ctx context.Context, cfg Config) (*Store, error) {
	if cfg.Bucket == "" || cfg.Key == "" {
		return nil, fmt.Errorf("s3: bucket and key are required (got bucket %q, key %q)", cfg.Bucket, cfg.Key)
	}
	opts := []func(*config.LoadOptions) error{config.WithRetryMaxAttempts(1), config.WithLogger(sdkLogger{log: cfg.Logger})}
	if cfg.Region != "" {
		opts = append(opts, config.WithRegion(cfg.Region))
	}
	if cfg.Credentials != nil {
		opts = append(opts, config.WithCredentialsProvider(cfg.Credentials))
	}
	if cfg.HTTPClient != nil {
		opts = append(opts, config.WithHTTPClient(cfg.HTTPClient))
	}
	awsCfg, err := config.LoadDefaultConfig(ctx, opts...)
	if err != nil {
		return nil, fmt.Errorf("s3: load AWS configuration: %w", err)
	}
	if awsCfg.Region == "" {
		if cfg.EndpointURL == "" {
			return nil, fmt.Errorf("s3://%s/%s: no region: set region in the configuration or AWS_REGION", cfg.Bucket, cfg.Key)
		}
		awsCfg.Region = "us-east-1"
	}
	client := s3.NewFromConfig(awsCfg, func(o *s3.Options) {
		// sf2loki/<version> joins the SDK's own User-Agent.
		o.APIOptions = append(o.APIOptions, awsmiddleware.AddUserAgentKeyValue(buildinfo.Product, buildinfo.Version()))
		// The domain counts attempts: a retried conditional write changes
		// meaning, so the SDK must not retry behind its back.
		o.Retryer = aws.NopRetryer{}
		// Many S3-compatible stores reject the newer default checksums.
		o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired
		o.ResponseChecksumValidation = aws.ResponseChecksumValidationWhenRequired
		if cfg.EndpointURL != "" {
			o.BaseEndpoint = aws.String(cfg.EndpointURL)
			o.UsePathStyle = true
		}
	})
	timeout := cfg.RequestTimeout
	if timeout <= 0 {
		timeout = DefaultRequestTimeout
	}
	maxSize := cfg.MaxSize
	if maxSize <= 0 {
		maxSize = DefaultMaxSize
	}
	return &Store{client: client, bucket: cfg.Bucket, key: cfg.Key, timeout: timeout, maxSize: maxSize}, nil
}

// String implements ports.ObjectCAS.
func (s *Store) String() string { return "s3://" + s.bucket + "/" + s.key }

// Get implements ports.ObjectCAS: one GetObject returns the body and its
// ETag. An object over the size cap is not read (its Content-Length says
// so): the error wraps ports.ErrTooLarge and the Object carries the ETag.
func (s *Store) Get(ctx context.Context) (ports.Object, error) {
	rctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	out, err := s.client.GetObject(rctx, &s3.GetObjectInput{Bucket: &s.bucket, Key: &s.key})
	if err != nil {
		return ports.Object{}, s.classify(ctx, "get", err)
	}
	defer out.Body.Close()
	if out.ETag == nil || *out.ETag == "" {
		return ports.Object{}, fmt.Errorf("get %s: the store returned no ETag; sf2loki needs ETags for compare-and-swap", s)
	}
	v := ports.Version(*out.ETag)
	if n := aws.ToInt64(out.ContentLength); n > s.maxSize {
		return ports.Object{Version: v}, s.tooLarge(n)
	}
	data, err := io.ReadAll(io.LimitReader(out.Body, s.maxSize+1))
	if err != nil {
		return ports.Object{}, s.classify(ctx, "get", fmt.Errorf("read body: %w", err))
	}
	if int64(len(data)) > s.maxSize {
		return ports.Object{Version: v}, s.tooLarge(int64(len(data)))
	}
	return ports.Object{Data: data, Version: v}, nil
}

// tooLarge is the error for a document of size bytes (at least) over the cap.
func (s *Store) tooLarge(size int64) error { return ports.TooLarge(s.String(), size, s.maxSize) }

// Put implements ports.ObjectCAS with If-None-Match: * (create-only) or
// If-Match: <etag>.
func (s *Store) Put(ctx context.Context, data []byte, pre ports.Precondition) (ports.Version, error) {
	if err := pre.Validate(false); err != nil {
		return "", err
	}
	if int64(len(data)) > s.maxSize {
		return "", fmt.Errorf("put %s: %w: the document is %d bytes, the cap is %d; nothing was written", s, ports.ErrTooLarge, len(data), s.maxSize)
	}
	in := &s3.PutObjectInput{Bucket: &s.bucket, Key: &s.key, Body: bytes.NewReader(data),
		ContentLength: aws.Int64(int64(len(data)))}
	if v, ok := pre.Version(); ok {
		in.IfMatch = aws.String(string(v))
	} else {
		in.IfNoneMatch = aws.String("*")
	}
	rctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	out, err := s.client.PutObject(rctx, in)
	if err != nil {
		return "", s.classify(ctx, "put", err)
	}
	if out.ETag == nil || *out.ETag == "" {
		return "", fmt.Errorf("put %s: the store returned no ETag; sf2loki needs ETags for compare-and-swap", s)
	}
	return ports.Version(*out.ETag), nil
}

// Delete implements ports.ObjectCAS with If-Match: <etag>.
func (s *Store) Delete(ctx context.Context, pre ports.Precondition) error {
	if err := pre.Validate(true); err != nil {
		return err
	}
	v, _ := pre.Version()
	rctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	_, err := s.client.DeleteObject(rctx, &s3.DeleteObjectInput{Bucket: &s.bucket, Key: &s.key, IfMatch: aws.String(string(v))})
	if err != nil {
		return s.classify(ctx, "delete", err)
	}
	return nil
}

// Error codes S3 and compatible stores use for a failure that may pass.
var transientCodes = map[string]bool{
	"SlowDown": true, "InternalError": true, "InternalFailure": true, "ServiceUnavailable": true,
	"RequestTimeout": true, "Throttling": true, "ThrottlingException": true, "RequestLimitExceeded": true,
	"ConditionalRequestConflict": true, "OperationAborted": true, "RequestTimeTooSkewed": true,
}

// Error codes that mean the credentials may not do this: the policy (or
// the account) is the fix.
var deniedCodes = map[string]bool{"AccessDenied": true, "AllAccessDisabled": true, "AccountProblem": true}

// Error codes that mean S3 does not accept the credentials themselves, and
// what to do about each
// (https://docs.aws.amazon.com/AmazonS3/latest/API/ErrorResponses.html).
var refusedCodes = map[string]string{
	"InvalidAccessKeyId": "the access key id is unknown to this store: fix AWS_ACCESS_KEY_ID (or the profile's key), " +
		"or endpoint_url when the key belongs to another S3-compatible store",
	"SignatureDoesNotMatch": "the secret access key does not match the access key id: fix AWS_SECRET_ACCESS_KEY (or the profile's secret)",
	"ExpiredToken":          "the session token has expired: renew the temporary credentials, or use a role the SDK refreshes (web identity, task or instance role)",
	"TokenRefreshRequired":  "the session token must be refreshed: renew the temporary credentials, or use a role the SDK refreshes (web identity, task or instance role)",
	"InvalidToken":          "the session token is malformed or invalid: fix or unset AWS_SESSION_TOKEN",
}

// noCredentialsFix is what to do when the AWS default chain found nothing.
const noCredentialsFix = "set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, AWS_PROFILE, a web identity (IRSA or EKS Pod Identity) " +
	"or an instance or task role"

// unreachableFix is what to check when S3 cannot be reached.
const unreachableFix = "check the region, endpoint_url and bucket name, the host's DNS, and the proxy (HTTPS_PROXY, NO_PROXY)"

// classify translates an SDK error into the ports' vocabulary. parent is the
// caller's context: a timeout of our own request context is transient, the
// caller's cancellation is not.
func (s *Store) classify(parent context.Context, op string, err error) error {
	wrap := func(sentinel error) error { return fmt.Errorf("%s %s: %w: %w", op, s, sentinel, err) }
	if perr := parent.Err(); perr != nil {
		return fmt.Errorf("%s %s: %w", op, s, perr)
	}
	var (
		code   string
		status int
		header http.Header
	)
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		code = apiErr.ErrorCode()
	}
	var respErr *awshttp.ResponseError
	if errors.As(err, &respErr) {
		status = respErr.HTTPStatusCode()
		if respErr.Response != nil {
			header = respErr.Response.Header
		}
	}
	switch {
	case code == "NoSuchBucket":
		return fmt.Errorf("%s %s: %w: create the bucket or fix the bucket name: %w", op, s, ports.ErrBucketNotFound, err)
	case code == "NoSuchKey" || code == "NotFound" || status == http.StatusNotFound:
		return wrap(ports.ErrNotFound)
	case code == "PreconditionFailed" || status == http.StatusPreconditionFailed:
		return wrap(ports.ErrPreconditionFailed)
	case refusedCodes[code] != "":
		return fmt.Errorf("%s %s: %w: S3 does not accept the AWS credentials (%s): %s: %w", op, s, ports.ErrCredentialsRefused, code, refusedCodes[code], err)
	case deniedCodes[code] || status == http.StatusForbidden || status == http.StatusUnauthorized:
		return wrap(ports.ErrPermissionDenied)
	case code == "NotImplemented" || status == http.StatusNotImplemented:
		return fmt.Errorf("%s %s: %w (the endpoint rejected If-Match/If-None-Match; sf2loki cannot arbitrate leadership or protect checkpoints on it): %w",
			op, s, ports.ErrConditionalWriteUnsupported, err)
	case transientCodes[code] || status == http.StatusConflict || status == http.StatusTooManyRequests || status >= 500:
		return ports.TransientAfter(op, ports.ParseRetryAfter(header.Get("Retry-After")), fmt.Errorf("%s: %w", s, err))
	case isCredentialsError(err):
		return s.credentialsError(op, err)
	case status == 0:
		// No HTTP answer: timeouts, resets, truncated bodies, refused
		// connections. The outcome of a write is unknown.
		if u := ports.Unreachable(err, unreachableFix); u != nil {
			return ports.Transient(op, fmt.Errorf("%s: %w", s, u))
		}
		return ports.Transient(op, fmt.Errorf("%s: %w", s, err))
	}
	return fmt.Errorf("%s %s: %w", op, s, err)
}

// isCredentialsError reports a failure to obtain credentials: nothing was
// sent to S3. The SDK gives these no type, only its messages.
func isCredentialsError(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "get identity:") || strings.Contains(msg, "failed to retrieve credentials") ||
		strings.Contains(msg, "failed to refresh cached credentials")
}

// credentialsError classifies a failure of the AWS default credential
// chain. The chain ends with the EC2 instance metadata service (IMDS): when
// that is what failed ("no EC2 IMDS role found"), nothing before it was
// configured, so there are no credentials at all (ports.ErrNoCredentials).
// Any other failure is a configured source that did not deliver (a web
// identity the role does not trust, a profile's SSO session that expired):
// ports.ErrCredentialsRefused. A network failure on the way (IMDS or the
// container agent not answering) stays transient, as they may be busy, but
// its message says the same.
func (s *Store) credentialsError(op string, err error) error {
	var netErr net.Error
	network := errors.As(err, &netErr)
	if strings.Contains(err.Error(), "no EC2 IMDS role found") {
		if network {
			return ports.Transient(op, fmt.Errorf("%s: no AWS credentials found: the instance metadata service, the last place the AWS SDK looks, "+
				"did not answer (not on EC2, or no role attached): %s: %w", s, noCredentialsFix, err))
		}
		return fmt.Errorf("%s %s: %w: the AWS SDK found no AWS credentials in the environment, the shared config files, a web identity, "+
			"the container or the instance role: %s: %w", op, s, ports.ErrNoCredentials, noCredentialsFix, err)
	}
	if network {
		return ports.Transient(op, fmt.Errorf("%s: the configured AWS credential source did not answer: %w", s, err))
	}
	return fmt.Errorf("%s %s: %w: the configured AWS credential source failed (a web identity the role does not trust, "+
		"an expired SSO session, a profile without keys?): fix it, or %s: %w", op, s, ports.ErrCredentialsRefused, noCredentialsFix, err)
}
