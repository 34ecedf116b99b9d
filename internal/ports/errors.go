package ports

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Sentinel errors. Adapters translate every backend error into one of these
// (wrapped with %w so that errors.Is finds them and the message keeps the
// backend's detail), into a *TransientError, or pass it through wrapped when it
// fits none of them.
var (
	// ErrNotFound means the object does not exist. Get returns it for an absent
	// object; Delete returns it when there is nothing to delete. It must never be
	// returned for a failure whose outcome is unknown (a timeout, a 5xx): the
	// domain treats ErrNotFound as "claimable", so a false ErrNotFound can
	// hand leadership to a second process.
	ErrNotFound = errors.New("object not found")

	// ErrPreconditionFailed means the store rejected a conditional write or
	// delete because its precondition did not hold: a create-only write found
	// the object present, or an if-version write or delete found a different
	// version. The write did not happen. Adapters return it only when the
	// backend said so (S3 412, GCS 412, Kubernetes 409 Conflict/AlreadyExists, a
	// file whose content hash differs); a backend's 409 "conflicting concurrent
	// operation" (S3 ConditionalRequestConflict) is transient, not this.
	//
	// An if-version write or delete against an absent object may return either
	// ErrNotFound or ErrPreconditionFailed (S3 answers 404, GCS 412). Callers
	// must treat both as "you do not hold this version"; the domain does.
	ErrPreconditionFailed = errors.New("precondition failed")

	// ErrPermissionDenied means the credentials are valid for the store but not
	// allowed to perform the operation, or are not valid at all (S3 403
	// AccessDenied, GCS 401/403, Kubernetes 401/403, EACCES/EPERM/EROFS). Not
	// transient: an operator must fix the policy.
	ErrPermissionDenied = errors.New("permission denied")

	// ErrNoCredentials means the client found no credentials at all where
	// its SDK looks for them (AWS: the environment, the shared config and
	// profile, a web identity, a container or instance role; GCS:
	// Application Default Credentials). Nothing was sent. It is a kind of
	// ErrPermissionDenied (errors.Is finds both): not transient, an operator
	// must provide credentials; but its message must not ask for a
	// permission, which would send them to fix the wrong thing.
	ErrNoCredentials error = &deniedKind{"no credentials found"}

	// ErrCredentialsRefused means the store does not accept the credentials
	// themselves: an unknown access key id, a wrong secret (S3
	// SignatureDoesNotMatch), an expired or invalid session token (S3
	// InvalidAccessKeyId, ExpiredToken, InvalidToken; GCS 401), or a
	// configured credential source that failed (a web identity the role does
	// not trust). A kind of ErrPermissionDenied (errors.Is finds both); the
	// fix is the credentials, not the policy.
	ErrCredentialsRefused error = &deniedKind{"credentials refused"}

	// ErrUnreachable means no answer came from an endpoint: its name does not
	// resolve, the connection was refused or could not be routed, TLS failed
	// (an untrusted or mismatched certificate, a plain-HTTP server), or it did
	// not answer in time. Adapters wrap it, with the cause NetworkCause
	// names, inside a *TransientError where the daemon should retry (a DNS
	// hiccup passes); a preflight check (sf2loki doctor) reports it as the
	// cause, not as a permission.
	ErrUnreachable = errors.New("endpoint unreachable")

	// ErrConditionalWriteUnsupported means the backend does not implement
	// the conditional writes this port promises (S3-compatible stores that
	// answer 501 to If-None-Match/If-Match). sf2loki cannot arbitrate
	// leadership or protect checkpoints on such a store. Stores that silently
	// ignore the headers can only be detected by probing (sf2loki doctor).
	ErrConditionalWriteUnsupported = errors.New("conditional writes are not supported by this store")

	// ErrBucketNotFound means the container that should hold the object does
	// not exist: an S3 or GCS bucket, a Kubernetes namespace. It is NOT
	// ErrNotFound: the object cannot be created there, so it must never be
	// taken for "absent, claimable". An operator must create the container or
	// fix the configuration.
	ErrBucketNotFound = errors.New("bucket not found")

	// ErrAlreadyRunning means another process holds the lifetime lock of a
	// resource that only one process may use at a time (a state file used
	// without a coordinator). Not transient: stop the other process or give
	// this one its own resource.
	ErrAlreadyRunning = errors.New("another process holds the lock")

	// ErrTooLarge means a stored object is larger than the adapter's size cap
	// (its constructor's MaxSize), so it was not read: Get returns it with
	// the object's Version and no Data, and the object must be treated as
	// corrupt (a caller may still replace it with an IfVersion write). Put
	// returns it for data over the cap, with nothing written. Not transient.
	ErrTooLarge = errors.New("object larger than the size cap")

	// ErrInvalidPrecondition is returned for a precondition that makes no sense
	// for the operation: Delete with CreateOnly, or IfVersion with an empty
	// Version. It is a programming error, never a backend answer.
	ErrInvalidPrecondition = errors.New("invalid precondition")
)

// TransientError marks a failure whose cause is expected to pass: HTTP 5xx,
// 429 and other throttling, S3's 409 ConditionalRequestConflict, request
// timeouts, connection resets, truncated bodies, lock timeouts, ESTALE/EIO.
//
// A transient failure of a write has an UNKNOWN outcome: the write may have
// been applied before the response was lost. Callers that retry a conditional
// write must therefore be ready for the retry to fail its precondition because
// of their own earlier attempt (the domain verifies by re-reading).
//
// Adapters never retry on their own; they return a *TransientError (usually
// via Transient or TransientAfter) and let the domain count attempts.
type TransientError struct {
	// Op names the operation that failed ("get", "put", "delete").
	Op string
	// RetryAfter is the backend's hint (Retry-After header) for when to try
	// again, or zero when it gave none.
	RetryAfter time.Duration
	// Err is the underlying error.
	Err error
}

// Error implements error.
func (e *TransientError) Error() string {
	if e.Op == "" {
		return fmt.Sprintf("transient: %v", e.Err)
	}
	return fmt.Sprintf("%s: transient: %v", e.Op, e.Err)
}

// Unwrap returns the underlying error.
func (e *TransientError) Unwrap() error { return e.Err }

// Transient wraps err as a *TransientError for operation op. A nil err
// returns nil.
func Transient(op string, err error) error {
	if err == nil {
		return nil
	}
	return &TransientError{Op: op, Err: err}
}

// TransientAfter is Transient with a retry-after hint from the backend.
func TransientAfter(op string, retryAfter time.Duration, err error) error {
	if err == nil {
		return nil
	}
	return &TransientError{Op: op, RetryAfter: retryAfter, Err: err}
}

// ParseRetryAfter reads a Retry-After header value given in seconds (the
// form object stores use); anything else is zero, "no hint".
func ParseRetryAfter(value string) time.Duration {
	n, err := strconv.Atoi(strings.TrimSpace(value))
	if err != nil || n <= 0 {
		return 0
	}
	return time.Duration(n) * time.Second
}

// IsTransient reports whether err (or anything it wraps) is a
// *TransientError: the operation may succeed if tried again. A context
// cancellation by the caller is never transient, even when wrapped in a
// TransientError, because retrying cannot help a caller who has given up.
func IsTransient(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, context.Canceled) {
		return false
	}
	var te *TransientError
	return errors.As(err, &te)
}

// RetryAfter returns the backend's retry-after hint carried by a transient
// error, if any.
func RetryAfter(err error) (time.Duration, bool) {
	var te *TransientError
	if errors.As(err, &te) && te.RetryAfter > 0 {
		return te.RetryAfter, true
	}
	return 0, false
}

// TooLarge is an adapter's ErrTooLarge for the object name of size bytes
// (at least) over the cap max.
func TooLarge(name string, size, max int64) error {
	return fmt.Errorf("get %s: %w: the document is %d bytes, the cap is %d; it is not a document sf2loki wrote: "+
		"move it aside (the daemon then starts from an absent document)", name, ErrTooLarge, size, max)
}

// deniedKind is a sentinel that is also ErrPermissionDenied for errors.Is,
// with its own text.
type deniedKind struct{ msg string }

func (e *deniedKind) Error() string { return e.msg }

// Is makes a deniedKind ErrPermissionDenied too.
func (e *deniedKind) Is(target error) bool { return target == ErrPermissionDenied }

// Unreachable wraps err, a failure to reach an endpoint, as ErrUnreachable
// with its cause in words ("the name s3.example.invalid does not resolve
// (DNS)") followed by fix, what to check. It returns nil when err holds no
// network failure (an HTTP answer, a cancellation): the caller keeps its
// own classification then.
func Unreachable(err error, fix string) error {
	cause, ok := NetworkCause(err)
	if !ok {
		return nil
	}
	if fix != "" {
		cause += ": " + fix
	}
	return fmt.Errorf("%w: %s: %w", ErrUnreachable, cause, err)
}

// NetworkCause names, in words, why an endpoint could not be reached: a
// name that does not resolve, a refused or unroutable connection, a TLS
// certificate that is not trusted or not for that host, a server that
// does not speak TLS, a proxy that cannot be reached, no answer in time.
// ok is false when err holds none of these: an HTTP answer, or the
// caller's own cancellation.
func NetworkCause(err error) (cause string, ok bool) {
	if err == nil || errors.Is(err, context.Canceled) {
		return "", false
	}
	host := ""
	var ue *url.Error
	if errors.As(err, &ue) {
		if u, perr := url.Parse(ue.URL); perr == nil {
			host = u.Host
		}
	}
	at := func(h string) string {
		if h == "" {
			h = host
		}
		if h == "" {
			return ""
		}
		return " " + h
	}
	var (
		dnsErr    *net.DNSError
		unknownCA x509.UnknownAuthorityError
		hostErr   x509.HostnameError
		invalid   x509.CertificateInvalidError
		record    tls.RecordHeaderError
		opErr     *net.OpError
	)
	isDNS, isOp := errors.As(err, &dnsErr), errors.As(err, &opErr)
	switch {
	case isDNS && dnsErr.IsNotFound:
		return fmt.Sprintf("the name %s does not resolve (DNS: no such host)", dnsErr.Name), true
	case isDNS && dnsErr.IsTimeout:
		return fmt.Sprintf("the DNS lookup of %s timed out", dnsErr.Name), true
	case isDNS:
		return fmt.Sprintf("the DNS lookup of %s failed (%s)", dnsErr.Name, dnsErr.Err), true
	case errors.As(err, &unknownCA):
		return fmt.Sprintf("the TLS certificate of%s is signed by an authority this host does not trust "+
			"(a TLS-inspecting proxy? add its CA certificate to the system's trust store, or point SSL_CERT_FILE at a bundle that holds it)", at("")), true
	case errors.As(err, &hostErr):
		return fmt.Sprintf("the TLS certificate of%s is not valid for that name (%v)", at(""), hostErr), true
	case errors.As(err, &invalid):
		return fmt.Sprintf("the TLS certificate of%s is not valid (%v)", at(""), invalid), true
	case errors.As(err, &record):
		return fmt.Sprintf("%s does not answer TLS (an http:// server given as https://?)", strings.TrimSpace(at(""))), true
	case isOp && opErr.Op == "proxyconnect":
		return fmt.Sprintf("the proxy%s cannot be reached (%v): check HTTPS_PROXY / HTTP_PROXY", at(addr(opErr)), opErr.Err), true
	case errors.Is(err, syscall.ECONNREFUSED):
		return fmt.Sprintf("the connection to%s was refused (nothing listens there)", at(addr(opErr))), true
	case errors.Is(err, syscall.ENETUNREACH) || errors.Is(err, syscall.EHOSTUNREACH):
		return fmt.Sprintf("there is no route to%s (network unreachable)", at(addr(opErr))), true
	case isOp && opErr.Timeout():
		return fmt.Sprintf("connecting to%s timed out (a firewall, or a proxy this host must use?)", at(addr(opErr))), true
	case errors.Is(err, context.DeadlineExceeded):
		if h := at(""); h != "" {
			return fmt.Sprintf("no answer from%s before the timeout", h), true
		}
		return "no answer before the timeout", true
	case isOp && opErr.Op == "dial":
		return fmt.Sprintf("cannot connect to%s (%v)", at(addr(opErr)), opErr.Err), true
	}
	return "", false
}

// addr is the remote address of a dial error, if it has one.
func addr(op *net.OpError) string {
	if op == nil || op.Addr == nil {
		return ""
	}
	return op.Addr.String()
}
