// Package k8s is the ports.ObjectCAS adapter for one coordination.k8s.io/v1
// Lease. The Version is the Lease's resourceVersion. The document is kept in
// an annotation, and when it is a lease record its fields are mirrored into
// the Lease's spec (holderIdentity, leaseTransitions = epoch,
// leaseDurationSeconds, renewTime, acquireTime) so that
// `kubectl get lease -o yaml` tells the truth.
//
// The store is a ports.Watcher: Watch GETs the Lease, then watches it (the
// verb watch on leases, one request a few minutes long, resumed from the
// last resourceVersion when the server ends it), and reports each state as
// Get would. A watch that fails (the API server unreachable or restarting, a
// 5xx, the watch verb not granted) is reported once as a Change with Err and
// retried with a capped exponential backoff; once it is up again the Lease is
// read and its current state reported. A watch whose resourceVersion expired
// (410 Gone) reads the Lease again and goes on from there.
//
// Imports: internal/ports, internal/domain (the lease record),
// internal/buildinfo (the User-Agent) and client-go.
package k8s

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
	"unicode/utf8"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/sf2loki/sf2loki/internal/buildinfo"
	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/ports"
)

// Annotations that hold the document: as text when it is valid UTF-8,
// base64 otherwise.
const (
	AnnotationDocument       = "sf2loki.io/document"
	AnnotationDocumentBase64 = "sf2loki.io/document-base64"
)

// MaxDocumentSize is the largest document a Lease holds: annotations are
// limited to 256 KiB in total, and a binary document is stored as base64.
const MaxDocumentSize = 128 << 10

// DefaultRequestTimeout bounds each request unless Config says otherwise.
const DefaultRequestTimeout = 5 * time.Second

// Config names one Lease and how to reach the API server.
type Config struct {
	// Namespace and Name name the Lease (both required).
	Namespace string
	Name      string
	// Kubeconfig is a kubeconfig file; empty uses the in-cluster service
	// account.
	Kubeconfig string
	// REST overrides Kubeconfig and in-cluster configuration when non-nil.
	REST *rest.Config
	// RequestTimeout bounds each request (default DefaultRequestTimeout).
	RequestTimeout time.Duration
	// MaxSize caps the document (default and most MaxDocumentSize): Get
	// returns ports.ErrTooLarge for a larger one and Put refuses it. The
	// Lease object itself is bounded by the API server (annotations 256 KiB
	// in total, an object about 1.5 MiB).
	MaxSize int
}

// Store is one Lease with compare-and-swap.
type Store struct {
	cfg       Config
	namespace string
	name      string
	timeout   time.Duration
	maxSize   int

	once    sync.Once
	client  rest.Interface
	initErr error
}

var _ ports.ObjectCAS = (*Store)(nil)

// New validates cfg and returns the store. It makes no request and loads
// no client configuration until the first call.
func New(cfg Config) (*Store, error) {
	if cfg.Namespace == "" || cfg.Name == "" {
		return nil, fmt.Errorf("k8s: namespace and name are required (got %q/%q)", cfg.Namespace, cfg.Name)
	}
	timeout := cfg.RequestTimeout
	if timeout <= 0 {
		timeout = DefaultRequestTimeout
	}
	maxSize := cfg.MaxSize
	if maxSize <= 0 || maxSize > MaxDocumentSize {
		maxSize = MaxDocumentSize
	}
	return &Store{cfg: cfg, namespace: cfg.Namespace, name: cfg.Name, timeout: timeout, maxSize: maxSize}, nil
}

// rest returns the API client, loading the kubeconfig or the in-cluster
// configuration on first use: building a store (sf2loki check) never needs
// a cluster.
func (s *Store) rest() (rest.Interface, error) {
	s.once.Do(func() {
		rc := s.cfg.REST
		if rc == nil {
			var err error
			if s.cfg.Kubeconfig != "" {
				rc, err = clientcmd.BuildConfigFromFlags("", s.cfg.Kubeconfig)
			} else {
				rc, err = rest.InClusterConfig()
			}
			if err != nil {
				s.initErr = fmt.Errorf("k8s: load configuration for lease %s/%s (set kubeconfig, or run in a pod with a service account): %w",
					s.namespace, s.name, err)
				return
			}
		}
		client, err := leaseClient(rc)
		if err != nil {
			s.initErr = fmt.Errorf("k8s: client for lease %s/%s: %w", s.namespace, s.name, err)
			return
		}
		s.client = client
	})
	return s.client, s.initErr
}

// leaseClient is a REST client for coordination.k8s.io/v1 alone, set up as
// client-go's generated clientset sets up its CoordinationV1 client, but
// over a scheme that knows the Lease and the API's Status only: the
// clientset's scheme registers every built-in API group, which would link
// all of k8s.io/api into the daemon for one Lease.
func leaseClient(rc *rest.Config) (*rest.RESTClient, error) {
	cfg := rest.CopyConfig(rc)
	gv := coordinationv1.SchemeGroupVersion
	cfg.GroupVersion = &gv
	cfg.APIPath = "/apis"
	cfg.NegotiatedSerializer = serializer.NewCodecFactory(leaseScheme).WithoutConversion()
	if cfg.UserAgent == "" {
		cfg.UserAgent = buildinfo.UserAgent()
	}
	return rest.RESTClientFor(cfg)
}

// leaseScheme knows coordination.k8s.io/v1 and the unversioned meta types
// (Status, which carries the API server's errors).
var leaseScheme = func() *runtime.Scheme {
	sch := runtime.NewScheme()
	if err := coordinationv1.AddToScheme(sch); err != nil {
		panic(err) // registering known types into a fresh scheme cannot fail
	}
	metav1.AddToGroupVersion(sch, schema.GroupVersion{Version: "v1"})
	return sch
}()

// String implements ports.ObjectCAS.
func (s *Store) String() string { return "k8s://" + s.namespace + "/" + s.name }

// Get implements ports.ObjectCAS. A Lease without our annotation (created by
// someone else, or edited by someone else since) reads as a lease record
// built from its spec; one with no holder, renew time or duration reads as
// unheld, so it can be claimed.
func (s *Store) Get(ctx context.Context) (ports.Object, error) {
	client, err := s.rest()
	if err != nil {
		return ports.Object{}, err
	}
	var lease coordinationv1.Lease
	err = client.Get().Namespace(s.namespace).Resource("leases").Name(s.name).
		MaxRetries(0).Timeout(s.timeout).Do(ctx).Into(&lease)
	if err != nil {
		return ports.Object{}, s.classify(ctx, "get", err, ports.Precondition{})
	}
	return s.object("get", &lease)
}

// object is the document a Lease holds and its Version, as Get and the watch
// report it: a document over the cap is ports.ErrTooLarge with the Version.
func (s *Store) object(op string, lease *coordinationv1.Lease) (ports.Object, error) {
	data, err := document(lease)
	if err != nil {
		return ports.Object{}, fmt.Errorf("%s %s: %w", op, s, err)
	}
	v := ports.Version(lease.ResourceVersion)
	if len(data) > s.maxSize {
		return ports.Object{Version: v}, fmt.Errorf("%s %s: %w: the document is %d bytes, the cap is %d; it is not a document sf2loki wrote: "+
			"delete the Lease (the daemon then starts from an absent lease)", op, s, ports.ErrTooLarge, len(data), s.maxSize)
	}
	return ports.Object{Data: data, Version: v}, nil
}

// document returns the document a Lease holds.
func document(l *coordinationv1.Lease) ([]byte, error) {
	var data []byte
	if b64, ok := l.Annotations[AnnotationDocumentBase64]; ok {
		d, err := base64.StdEncoding.DecodeString(b64)
		if err != nil {
			return nil, fmt.Errorf("annotation %s is not base64: %w", AnnotationDocumentBase64, err)
		}
		data = d
	} else if text, ok := l.Annotations[AnnotationDocument]; ok {
		data = []byte(text)
	} else {
		return fromSpec(l), nil
	}
	// A lease record must agree with the spec it was mirrored into; if
	// someone else changed the holder since, the spec is the truth.
	if rec, err := domain.DecodeLeaseRecord(data); err == nil && rec.Holder != holderOf(l) {
		return fromSpec(l), nil
	}
	return data, nil
}

func holderOf(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// fromSpec builds a lease record from a Lease's spec.
func fromSpec(l *coordinationv1.Lease) []byte {
	rec := domain.LeaseRecord{}
	if l.Spec.LeaseTransitions != nil && *l.Spec.LeaseTransitions > 0 {
		rec.Epoch = uint64(*l.Spec.LeaseTransitions)
	}
	if holder := holderOf(l); holder != "" && l.Spec.RenewTime != nil && l.Spec.LeaseDurationSeconds != nil {
		rec.Holder = holder
		rec.Instance = "k8s:" + holder
		rec.TTL = (time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second).String()
		rec.RenewedAt = l.Spec.RenewTime.Time
	}
	return rec.Encode()
}

// Put implements ports.ObjectCAS: create-only is a Create; if-version is a
// merge patch carrying the resourceVersion, so the API server rejects a
// stale version and labels and annotations set by others survive.
func (s *Store) Put(ctx context.Context, data []byte, pre ports.Precondition) (ports.Version, error) {
	if err := pre.Validate(false); err != nil {
		return "", err
	}
	client, err := s.rest()
	if err != nil {
		return "", err
	}
	if len(data) > s.maxSize {
		return "", fmt.Errorf("put %s: %w: the document is %d bytes; this Lease holds at most %d", s, ports.ErrTooLarge, len(data), s.maxSize)
	}
	annotations, spec := encode(data)
	var out coordinationv1.Lease
	if v, ok := pre.Version(); ok {
		patch := map[string]any{
			"metadata": map[string]any{"resourceVersion": string(v), "annotations": annotations},
			"spec":     spec,
		}
		body, merr := json.Marshal(patch)
		if merr != nil {
			return "", fmt.Errorf("put %s: %w", s, merr)
		}
		err = client.Patch(types.MergePatchType).Namespace(s.namespace).Resource("leases").Name(s.name).
			Body(body).MaxRetries(0).Timeout(s.timeout).Do(ctx).Into(&out)
	} else {
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: s.name, Namespace: s.namespace, Annotations: map[string]string{}}}
		for k, v := range annotations {
			if v != nil {
				lease.Annotations[k] = *v
			}
		}
		applySpec(&lease.Spec, data)
		err = client.Post().Namespace(s.namespace).Resource("leases").
			Body(lease).MaxRetries(0).Timeout(s.timeout).Do(ctx).Into(&out)
	}
	if err != nil {
		return "", s.classify(ctx, "put", err, pre)
	}
	return ports.Version(out.ResourceVersion), nil
}

// encode returns the annotation values (nil removes a key in a merge
// patch) and the spec patch for data.
func encode(data []byte) (map[string]*string, map[string]any) {
	ann := map[string]*string{AnnotationDocument: nil, AnnotationDocumentBase64: nil}
	if utf8.Valid(data) {
		text := string(data)
		ann[AnnotationDocument] = &text
	} else {
		b64 := base64.StdEncoding.EncodeToString(data)
		ann[AnnotationDocumentBase64] = &b64
	}
	var spec coordinationv1.LeaseSpec
	applySpec(&spec, data)
	patch := map[string]any{
		"holderIdentity": spec.HolderIdentity, "leaseTransitions": spec.LeaseTransitions,
		"leaseDurationSeconds": spec.LeaseDurationSeconds, "renewTime": spec.RenewTime, "acquireTime": spec.AcquireTime,
	}
	return ann, patch
}

// applySpec mirrors a lease record into spec; other documents leave it
// empty.
func applySpec(spec *coordinationv1.LeaseSpec, data []byte) {
	rec, err := domain.DecodeLeaseRecord(data)
	if err != nil {
		return
	}
	if rec.Holder != "" {
		h := rec.Holder
		spec.HolderIdentity = &h
	}
	epoch := int32(min(rec.Epoch, 1<<31-1))
	spec.LeaseTransitions = &epoch
	if d, err := time.ParseDuration(rec.TTL); err == nil && d > 0 {
		secs := int32(max(1, (d+time.Second-1)/time.Second))
		spec.LeaseDurationSeconds = &secs
	}
	if !rec.RenewedAt.IsZero() {
		spec.RenewTime = &metav1.MicroTime{Time: rec.RenewedAt}
	}
	if !rec.AcquiredAt.IsZero() {
		spec.AcquireTime = &metav1.MicroTime{Time: rec.AcquiredAt}
	}
}

// Delete implements ports.ObjectCAS with a resourceVersion precondition.
func (s *Store) Delete(ctx context.Context, pre ports.Precondition) error {
	if err := pre.Validate(true); err != nil {
		return err
	}
	client, err := s.rest()
	if err != nil {
		return err
	}
	v, _ := pre.Version()
	rv := string(v)
	err = client.Delete().Namespace(s.namespace).Resource("leases").Name(s.name).
		Body(&metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &rv}}).
		MaxRetries(0).Timeout(s.timeout).Do(ctx).Error()
	if err != nil {
		return s.classify(ctx, "delete", err, pre)
	}
	return nil
}

// classify translates an API error into the ports' vocabulary.
func (s *Store) classify(parent context.Context, op string, err error, pre ports.Precondition) error {
	wrap := func(sentinel error) error { return fmt.Errorf("%s %s: %w: %w", op, s, sentinel, err) }
	if perr := parent.Err(); perr != nil {
		return fmt.Errorf("%s %s: %w", op, s, perr)
	}
	var status apierrors.APIStatus
	isStatus := errors.As(err, &status)
	switch {
	case apierrors.IsNotFound(err) && isStatus && status.Status().Details != nil && status.Status().Details.Kind == "namespaces":
		return fmt.Errorf("%s %s: %w: namespace %q does not exist: %w", op, s, ports.ErrBucketNotFound, s.namespace, err)
	case apierrors.IsNotFound(err):
		return wrap(ports.ErrNotFound)
	case apierrors.IsAlreadyExists(err) && pre.IsCreateOnly():
		return wrap(ports.ErrPreconditionFailed)
	case apierrors.IsConflict(err):
		return wrap(ports.ErrPreconditionFailed)
	case apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err):
		return fmt.Errorf("%s %s: %w: grant get, create and patch on leases in namespace %q: %w",
			op, s, ports.ErrPermissionDenied, s.namespace, err)
	case apierrors.IsTooManyRequests(err) || apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) || apierrors.IsUnexpectedServerError(err):
		delay, _ := apierrors.SuggestsClientDelay(err)
		return ports.TransientAfter(op, time.Duration(delay)*time.Second, fmt.Errorf("%s: %w", s, err))
	case isStatus && status.Status().Code >= 500:
		return ports.Transient(op, fmt.Errorf("%s: %w", s, err))
	case isStatus:
		return fmt.Errorf("%s %s: %w", op, s, err)
	}
	var netErr net.Error
	if errors.As(err, &netErr) || errors.Is(err, context.DeadlineExceeded) || apierrors.IsUnexpectedObjectError(err) {
		return ports.Transient(op, fmt.Errorf("%s: %w", s, err))
	}
	// Transport-level failures without an API status (resets, EOFs).
	return ports.Transient(op, fmt.Errorf("%s: %w", s, err))
}

// DryRun checks, without changing anything, that this identity may read the
// Lease and write it: a server-side dry-run create when it is absent, or a
// dry-run merge patch (the daemon's renewal) of what was read when it exists. It returns the
// verb that was checked last.
func (s *Store) DryRun(ctx context.Context) (string, error) {
	client, err := s.rest()
	if err != nil {
		return "", err
	}
	var lease coordinationv1.Lease
	err = client.Get().Namespace(s.namespace).Resource("leases").Name(s.name).
		MaxRetries(0).Timeout(s.timeout).Do(ctx).Into(&lease)
	switch {
	case apierrors.IsNotFound(err):
		fresh := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: s.name, Namespace: s.namespace}}
		err = client.Post().Namespace(s.namespace).Resource("leases").Param("dryRun", "All").
			Body(fresh).MaxRetries(0).Timeout(s.timeout).Do(ctx).Error()
		if err != nil {
			return "create", s.classify(ctx, "create (dry run)", err, ports.CreateOnly())
		}
		return "create", nil
	case err != nil:
		return "get", s.classify(ctx, "get", err, ports.Precondition{})
	}
	// The daemon renews with a merge patch: check exactly that verb.
	body := fmt.Sprintf(`{"metadata":{"resourceVersion":%q}}`, lease.ResourceVersion)
	err = client.Patch(types.MergePatchType).Namespace(s.namespace).Resource("leases").Name(s.name).Param("dryRun", "All").
		Body([]byte(body)).MaxRetries(0).Timeout(s.timeout).Do(ctx).Error()
	if err != nil {
		return "patch", s.classify(ctx, "patch (dry run)", err, ports.IfVersion(ports.Version(lease.ResourceVersion)))
	}
	return "patch", nil
}
