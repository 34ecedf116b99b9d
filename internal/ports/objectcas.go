package ports

import (
	"context"
	"fmt"
)

// Version identifies one stored state of an object: an S3 ETag, a GCS
// generation, a Kubernetes resourceVersion, a content hash for files. It is
// opaque: compare it only for equality and pass it back in a Precondition.
//
// A Version may REPEAT for identical bytes: S3 ETags and file versions are
// content hashes, so writing the same bytes twice yields the same Version and
// an if-version write prepared against the first state would still succeed
// against the second (ABA). Callers that rely on "the version changed" must
// make the bytes of every write unique; the lease and checkpoint documents do
// (the lease carries a renewal counter and timestamps, the checkpoint carries
// its positions and epoch).
type Version string

// Object is the stored document and the version it was read at.
type Object struct {
	Data    []byte
	Version Version
}

// Precondition is the condition a write or delete must meet. Every write
// through ObjectCAS is conditional: there is no blind overwrite.
type Precondition struct {
	createOnly bool
	version    Version
}

// CreateOnly is the precondition "the object does not exist" (S3
// If-None-Match: *, GCS ifGenerationMatch=0, Kubernetes Create).
func CreateOnly() Precondition { return Precondition{createOnly: true} }

// IfVersion is the precondition "the object exists at version v" (S3
// If-Match, GCS ifGenerationMatch, Kubernetes resourceVersion).
func IfVersion(v Version) Precondition { return Precondition{version: v} }

// IsCreateOnly reports whether p is CreateOnly.
func (p Precondition) IsCreateOnly() bool { return p.createOnly }

// Version returns the version an IfVersion precondition requires, and false
// for CreateOnly (or the zero Precondition).
func (p Precondition) Version() (Version, bool) {
	if p.createOnly || p.version == "" {
		return "", false
	}
	return p.version, true
}

// Validate reports ErrInvalidPrecondition for the zero Precondition or an
// IfVersion with an empty version. forDelete also rejects CreateOnly.
func (p Precondition) Validate(forDelete bool) error {
	switch {
	case p.createOnly && forDelete:
		return fmt.Errorf("%w: delete needs IfVersion, not CreateOnly", ErrInvalidPrecondition)
	case p.createOnly:
		return nil
	case p.version == "":
		return fmt.Errorf("%w: IfVersion with an empty version (use CreateOnly for an absent object)", ErrInvalidPrecondition)
	}
	return nil
}

// String renders the precondition for logs and messages.
func (p Precondition) String() string {
	if p.createOnly {
		return "create-only"
	}
	return fmt.Sprintf("if-version %q", string(p.version))
}

// ObjectCAS is one small document with compare-and-swap, bound to one object
// at construction (bucket+key, file path, namespace/name).
//
// Contract every adapter must honour (checked by porttest.RunObjectCAS
// against its real server):
//   - Get returns the whole document and its Version in one atomic read, or
//     ErrNotFound when the object is absent. Never ErrNotFound for an unknown
//     outcome.
//   - Put writes data only if pre holds and returns the new Version, which
//     differs from the previous Version whenever the bytes differ. CreateOnly on
//     a present object and IfVersion with a stale Version return
//     ErrPreconditionFailed and leave the object unchanged. IfVersion on an
//     absent object returns ErrNotFound or ErrPreconditionFailed.
//   - Delete removes the object only if pre (IfVersion) holds; a stale
//     version returns ErrPreconditionFailed and keeps the object. Deleting an
//     absent object returns nil, ErrNotFound or ErrPreconditionFailed (S3
//     answers a conditional delete of an absent key with 204): it is absent
//     afterwards either way.
//   - Among N concurrent conditional writers from the same precondition,
//     exactly one succeeds.
//   - Errors are one of the sentinels in this package, a *TransientError
//     (see IsTransient), or another error wrapped with context. Adapters do
//     not retry; they turn SDK retries off for these calls and give every
//     request a timeout.
//   - A cancelled or expired ctx makes every call return promptly with an
//     error that wraps ctx.Err().
//   - Safe for concurrent use.
type ObjectCAS interface {
	// Get reads the object.
	Get(ctx context.Context) (Object, error)
	// Put writes data if pre holds and returns the new version.
	Put(ctx context.Context, data []byte, pre Precondition) (Version, error)
	// Delete removes the object if pre (an IfVersion) holds.
	Delete(ctx context.Context, pre Precondition) error
	// String names the object for humans: s3://bucket/key, gs://bucket/object,
	// file:///path, k8s://namespace/name, mem://name.
	String() string
}
