package file

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"syscall"
	"testing"

	"github.com/sf2loki/sf2loki/internal/ports"
)

// The OS errors a shared filesystem can return and how they are classified
// (the ones a test cannot provoke on a local disk: ESTALE, EIO, ETIMEDOUT,
// EROFS).
func TestClassifyErrno(t *testing.T) {
	s := &Store{path: "/shared/lease.json"}
	for _, tc := range []struct {
		err       error
		transient bool
		sentinel  error
	}{
		{&fs.PathError{Op: "open", Path: s.path, Err: syscall.ENOENT}, false, ports.ErrNotFound},
		{&fs.PathError{Op: "open", Path: s.path, Err: syscall.EACCES}, false, ports.ErrPermissionDenied},
		{&fs.PathError{Op: "open", Path: s.path, Err: syscall.EPERM}, false, ports.ErrPermissionDenied},
		{&fs.PathError{Op: "open", Path: s.path, Err: syscall.EROFS}, false, ports.ErrPermissionDenied},
		{&fs.PathError{Op: "read", Path: s.path, Err: syscall.EIO}, true, nil},
		{&fs.PathError{Op: "read", Path: s.path, Err: syscall.ESTALE}, true, nil},
		{&fs.PathError{Op: "read", Path: s.path, Err: syscall.ETIMEDOUT}, true, nil},
		{&fs.PathError{Op: "read", Path: s.path, Err: syscall.EISDIR}, false, nil},
	} {
		got := s.classify("get", tc.err)
		if ports.IsTransient(got) != tc.transient {
			t.Errorf("%v: transient = %v, want %v (%v)", tc.err, !tc.transient, tc.transient, got)
		}
		if tc.sentinel != nil && !errors.Is(got, tc.sentinel) {
			t.Errorf("%v: got %v, want %v", tc.err, got, tc.sentinel)
		}
		var pe *fs.PathError
		if !errors.As(tc.err, &pe) || !errors.Is(got, pe.Err) {
			t.Errorf("%v: the OS error is not wrapped: %v", tc.err, got)
		}
	}
	if got := s.classify("put", &fs.PathError{Op: "open", Path: s.path, Err: syscall.EROFS}); !strings.Contains(got.Error(), "read-only filesystem") ||
		strings.Contains(got.Error(), "ownership and mode") {
		t.Errorf("EROFS message: %v", got)
	}
	if got := s.classify("get", fmt.Errorf("x: %w", syscall.EISDIR)); got == nil || !strings.Contains(got.Error(), "is a directory") {
		t.Errorf("EISDIR message: %v", got)
	}
}
