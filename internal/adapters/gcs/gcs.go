// Package gcs is the ports.ObjectCAS adapter for Google Cloud Storage, using
// object generations as versions and generation preconditions for
// compare-and-swap.
//
// Imports: internal/ports, internal/buildinfo (the User-Agent) and
// cloud.google.com/go/storage.
package gcs

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"cloud.google.com/go/storage"
	"google.golang.org/api/googleapi"
	"google.golang.org/api/option"

	"github.com/sf2loki/sf2loki/internal/buildinfo"
	"github.com/sf2loki/sf2loki/internal/ports"
)

// DefaultRequestTimeout bounds each request unless Config says otherwise.
const DefaultRequestTimeout = 5 * time.Second

// Config names one GCS object and how to reach it.
type Config struct {
	// Bucket and ObjectName name the object (both required).
	Bucket     string
	ObjectName string
	// ServiceFile is a service-account key file; empty uses Application
	// Default Credentials. STORAGE_EMULATOR_HOST, when set, points the client
	// at an emulator without authentication.
	ServiceFile string
	// Endpoint overrides the JSON API endpoint (an emulator or a test proxy,
	// e.g. http://127.0.0.1:4443/storage/v1/); requests to it are not
	// authenticated.
	Endpoint string
	// RequestTimeout bounds each request (default DefaultRequestTimeout).
	RequestTimeout time.Duration
	// MaxSize caps the document: Get does not read a larger object (it
	// returns ports.ErrTooLarge) and Put refuses larger data (default
	// DefaultMaxSize).
	MaxSize int64
}

// DefaultMaxSize is the cap on a document when Config.MaxSize is 0: the
// checkpoint document's cap, far above any lease record.
const DefaultMaxSize int64 = 16 << 20

// Store is one GCS object with compare-and-swap. The client is created on
// first use, so building a Store never touches the network (credential
// discovery may probe the metadata server).
type Store struct {
	cfg     Config
	name    string
	timeout time.Duration
	maxSize int64

	once    sync.Once
	client  *storage.Client
	obj     *storage.ObjectHandle
	initErr error
}

var _ ports.ObjectCAS = (*Store)(nil)

// New validates cfg and returns the store. It makes no request.
func New(_ context.Context, cfg Config) (*Store, error) {
	if cfg.Bucket == "" || cfg.ObjectName == "" {
		return nil, fmt.Errorf("gcs: bucket and object_name are required (got bucket %q, object_name %q)", cfg.Bucket, cfg.ObjectName)
	}
	timeout := cfg.RequestTimeout
	if timeout <= 0 {
		timeout = DefaultRequestTimeout
	}
	maxSize := cfg.MaxSize
	if maxSize <= 0 {
		maxSize = DefaultMaxSize
	}
	return &Store{cfg: cfg, name: "gs://" + cfg.Bucket + "/" + cfg.ObjectName, timeout: timeout, maxSize: maxSize}, nil
}

// handle returns the object handle, creating the client on first use.
func (s *Store) handle(ctx context.Context) (*storage.ObjectHandle, error) {
	s.once.Do(func() {
		opts := []option.ClientOption{storage.WithJSONReads(), option.WithUserAgent(buildinfo.UserAgent())}
		switch {
		case s.cfg.Endpoint != "":
			opts = append(opts, option.WithEndpoint(s.cfg.Endpoint), option.WithoutAuthentication())
		case s.cfg.ServiceFile != "":
			opts = append(opts, option.WithAuthCredentialsFile(option.ServiceAccount, s.cfg.ServiceFile))
		}
		client, err := storage.NewClient(context.WithoutCancel(ctx), opts...)
		if err != nil {
			s.initErr = credentialsError(s.name, err)
			return
		}
		s.client = client
		// The domain counts attempts: a retried conditional write changes
		// meaning, so the library must not retry behind its back.
		s.obj = client.Bucket(s.cfg.Bucket).Object(s.cfg.ObjectName).Retryer(storage.WithPolicy(storage.RetryNever))
	})
	return s.obj, s.initErr
}

// Close releases the client, if one was created.
func (s *Store) Close() error {
	if s.client == nil {
		return nil
	}
	return s.client.Close()
}

// String implements ports.ObjectCAS.
func (s *Store) String() string { return s.name }

// Get implements ports.ObjectCAS. One reader returns the bytes and the
// generation they belong to. An object over the size cap is not read: the
// error wraps ports.ErrTooLarge and the Object carries the generation.
func (s *Store) Get(ctx context.Context) (ports.Object, error) {
	obj, err := s.handle(ctx)
	if err != nil {
		return ports.Object{}, err
	}
	rctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	r, err := obj.NewReader(rctx)
	if err != nil {
		return ports.Object{}, s.classify(ctx, "get", err, ports.Precondition{})
	}
	defer r.Close()
	v := version(r.Attrs.Generation)
	if r.Attrs.Size > s.maxSize {
		return ports.Object{Version: v}, s.tooLarge(r.Attrs.Size)
	}
	data, err := io.ReadAll(io.LimitReader(r, s.maxSize+1))
	if err != nil {
		return ports.Object{}, s.classify(ctx, "get", fmt.Errorf("read body: %w", err), ports.Precondition{})
	}
	if int64(len(data)) > s.maxSize {
		return ports.Object{Version: v}, s.tooLarge(int64(len(data)))
	}
	return ports.Object{Data: data, Version: v}, nil
}

// tooLarge is the error for a document of size bytes (at least) over the cap.
func (s *Store) tooLarge(size int64) error { return ports.TooLarge(s.String(), size, s.maxSize) }

func version(gen int64) ports.Version { return ports.Version(strconv.FormatInt(gen, 10)) }

func generation(v ports.Version) (int64, error) {
	g, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil || g <= 0 {
		return 0, fmt.Errorf("%w: %q is not a GCS generation", ports.ErrInvalidPrecondition, v)
	}
	return g, nil
}

// Put implements ports.ObjectCAS with ifGenerationMatch=0 (create-only) or
// ifGenerationMatch=<generation>.
func (s *Store) Put(ctx context.Context, data []byte, pre ports.Precondition) (ports.Version, error) {
	if err := pre.Validate(false); err != nil {
		return "", err
	}
	if int64(len(data)) > s.maxSize {
		return "", fmt.Errorf("put %s: %w: the document is %d bytes, the cap is %d; nothing was written", s, ports.ErrTooLarge, len(data), s.maxSize)
	}
	cond := storage.Conditions{DoesNotExist: true}
	if v, ok := pre.Version(); ok {
		g, err := generation(v)
		if err != nil {
			return "", err
		}
		cond = storage.Conditions{GenerationMatch: g}
	}
	obj, err := s.handle(ctx)
	if err != nil {
		return "", err
	}
	rctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	w := obj.If(cond).NewWriter(rctx)
	w.ChunkSize = 0 // one request, no resumable upload
	w.ContentType = "application/octet-stream"
	if _, err := w.Write(data); err != nil {
		_ = w.Close()
		return "", s.classify(ctx, "put", err, pre)
	}
	if err := w.Close(); err != nil {
		return "", s.classify(ctx, "put", err, pre)
	}
	return version(w.Attrs().Generation), nil
}

// Delete implements ports.ObjectCAS by deleting the given generation with a
// generation-match precondition: on real GCS and the emulator alike a stale
// generation leaves the object in place.
func (s *Store) Delete(ctx context.Context, pre ports.Precondition) error {
	if err := pre.Validate(true); err != nil {
		return err
	}
	v, _ := pre.Version()
	g, err := generation(v)
	if err != nil {
		return err
	}
	obj, err := s.handle(ctx)
	if err != nil {
		return err
	}
	rctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	err = obj.Generation(g).If(storage.Conditions{GenerationMatch: g}).Delete(rctx)
	if err != nil {
		return s.classify(ctx, "delete", err, pre)
	}
	return nil
}

// classify translates a client error into the ports' vocabulary.
func (s *Store) classify(parent context.Context, op string, err error, pre ports.Precondition) error {
	wrap := func(sentinel error) error { return fmt.Errorf("%s %s: %w: %w", op, s, sentinel, err) }
	if perr := parent.Err(); perr != nil {
		return fmt.Errorf("%s %s: %w", op, s, perr)
	}
	if errors.Is(err, storage.ErrBucketNotExist) {
		return fmt.Errorf("%s %s: %w: create the bucket or fix the bucket name: %w", op, s, ports.ErrBucketNotFound, err)
	}
	code := 0
	var header http.Header
	var gerr *googleapi.Error
	if errors.As(err, &gerr) {
		code, header = gerr.Code, gerr.Header
	}
	_, ifVersion := pre.Version()
	notFound := code == http.StatusNotFound || errors.Is(err, storage.ErrObjectNotExist)
	switch {
	case notFound && op == "delete":
		// The generation named is not live: stale or absent.
		return wrap(ports.ErrPreconditionFailed)
	case notFound && op == "get", errors.Is(err, storage.ErrObjectNotExist):
		return wrap(ports.ErrNotFound)
	case code == http.StatusNotFound && ifVersion:
		return wrap(ports.ErrNotFound)
	case code == http.StatusNotFound:
		return fmt.Errorf("%s %s: %w: create the bucket or fix the bucket name: %w", op, s, ports.ErrBucketNotFound, err)
	case code == http.StatusPreconditionFailed:
		return wrap(ports.ErrPreconditionFailed)
	case code == http.StatusUnauthorized:
		// 401: the credentials themselves are not accepted; 403 is the
		// policy (https://cloud.google.com/storage/docs/json_api/v1/status-codes).
		return fmt.Errorf("%s %s: %w: GCS does not accept the credentials (401): the service-account key was deleted or disabled, "+
			"or the token is invalid; fix service_file or the Application Default Credentials: %w", op, s, ports.ErrCredentialsRefused, err)
	case code == http.StatusForbidden:
		return wrap(ports.ErrPermissionDenied)
	case code == http.StatusNotImplemented:
		return fmt.Errorf("%s %s: %w (the endpoint rejected generation preconditions): %w", op, s, ports.ErrConditionalWriteUnsupported, err)
	case code == http.StatusTooManyRequests || code == http.StatusRequestTimeout || code >= 500:
		return ports.TransientAfter(op, ports.ParseRetryAfter(header.Get("Retry-After")), fmt.Errorf("%s: %w", s, err))
	case code != 0:
		return fmt.Errorf("%s %s: %w", op, s, err)
	}
	if cause, ok := ports.NetworkCause(err); ok {
		return ports.Transient(op, fmt.Errorf("%s: %w: %s: %s: %v", s, ports.ErrUnreachable, cause, unreachableFix, err)) //nolint:errorlint // as below
	}
	var netErr net.Error
	if errors.As(err, &netErr) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, io.EOF) || errors.Is(err, context.Canceled) {
		return ports.Transient(op, fmt.Errorf("%s: %v", s, err)) //nolint:errorlint // our own timeout's cancellation must not read as the caller's
	}
	return fmt.Errorf("%s %s: %w", op, s, err)
}

// noCredentialsFix is what to do when Application Default Credentials
// found nothing (https://cloud.google.com/docs/authentication/application-default-credentials).
const noCredentialsFix = "set service_file to a service-account key file, or GOOGLE_APPLICATION_CREDENTIALS, " +
	"or run gcloud auth application-default login, or attach a service account (GKE Workload Identity, Cloud Run, GCE)"

// unreachableFix is what to check when GCS cannot be reached.
const unreachableFix = "check the host's DNS and the proxy (HTTPS_PROXY, NO_PROXY), or STORAGE_EMULATOR_HOST"

// credentialsError classifies a failure to create the client, which is a
// failure to find or load its credentials: none found is
// ports.ErrNoCredentials, a service_file or GOOGLE_APPLICATION_CREDENTIALS
// that cannot be used is ports.ErrCredentialsRefused.
func credentialsError(name string, err error) error {
	if strings.Contains(err.Error(), "could not find default credentials") {
		return fmt.Errorf("%s: %w: Application Default Credentials found none: %s: %w", name, ports.ErrNoCredentials, noCredentialsFix, err)
	}
	return fmt.Errorf("%s: %w: the configured Google credentials cannot be used (service_file or GOOGLE_APPLICATION_CREDENTIALS: "+
		"a missing file, or not a service-account key?): %w", name, ports.ErrCredentialsRefused, err)
}
