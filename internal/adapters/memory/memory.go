// Package memory is a ports.ObjectCAS held in the process's memory: the
// checkpoint document of a dry run, which must never reach the configured
// store. Nothing survives the process.
//
// Imports: internal/ports and the standard library.
package memory

import (
	"bytes"
	"context"
	"fmt"
	"strconv"
	"sync"

	"github.com/sf2loki/sf2loki/internal/ports"
)

// Store is one object in memory.
type Store struct {
	name    string
	mu      sync.Mutex
	data    []byte
	version uint64 // 0: absent
	writes  uint64
}

var _ ports.ObjectCAS = (*Store)(nil)

// New returns an absent object named mem://name.
func New(name string) *Store { return &Store{name: name} }

// String names the object.
func (s *Store) String() string { return "mem://" + s.name }

// Get implements ports.ObjectCAS.
func (s *Store) Get(ctx context.Context) (ports.Object, error) {
	if err := ctx.Err(); err != nil {
		return ports.Object{}, fmt.Errorf("get %s: %w", s, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.version == 0 {
		return ports.Object{}, fmt.Errorf("get %s: %w", s, ports.ErrNotFound)
	}
	return ports.Object{Data: bytes.Clone(s.data), Version: s.ver()}, nil
}

// Put implements ports.ObjectCAS.
func (s *Store) Put(ctx context.Context, data []byte, pre ports.Precondition) (ports.Version, error) {
	if err := pre.Validate(false); err != nil {
		return "", err
	}
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("put %s: %w", s, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	want, ifVersion := pre.Version()
	switch {
	case pre.IsCreateOnly() && s.version != 0:
		return "", fmt.Errorf("put %s (create-only): %w", s, ports.ErrPreconditionFailed)
	case ifVersion && s.version == 0:
		return "", fmt.Errorf("put %s (%s): %w", s, pre, ports.ErrNotFound)
	case ifVersion && want != s.ver():
		return "", fmt.Errorf("put %s (%s): %w", s, pre, ports.ErrPreconditionFailed)
	}
	s.writes++
	s.data, s.version = bytes.Clone(data), s.writes
	return s.ver(), nil
}

// Delete implements ports.ObjectCAS.
func (s *Store) Delete(ctx context.Context, pre ports.Precondition) error {
	if err := pre.Validate(true); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete %s: %w", s, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	want, _ := pre.Version()
	switch {
	case s.version == 0:
		return fmt.Errorf("delete %s: %w", s, ports.ErrNotFound)
	case want != s.ver():
		return fmt.Errorf("delete %s (%s): %w", s, pre, ports.ErrPreconditionFailed)
	}
	s.data, s.version = nil, 0
	return nil
}

// Writes is how many writes the object took.
func (s *Store) Writes() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return int(s.writes)
}

// ver is the current version; s.mu is held. Versions never repeat (a
// counter of writes), so an object deleted and written again is new.
func (s *Store) ver() ports.Version { return ports.Version(strconv.FormatUint(s.version, 10)) }
