package porttest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/ports"
)

// Opener opens a new, independent handle (its own client, file descriptor,
// connection) on the object that a Factory made for one subtest.
type Opener func(t *testing.T) ports.ObjectCAS

// Factory makes a fresh, absent object for one subtest (a unique key, path or
// name, cleaned up with t.Cleanup) and returns how to open handles on it.
type Factory func(t *testing.T) Opener

// Writers is how many concurrent writers the concurrency subtests race.
const Writers = 16

// callTimeout bounds every contract call so a hanging adapter fails the
// suite instead of hanging it.
const callTimeout = 30 * time.Second

// DefaultMaxSize is the object size every store must round-trip unless it
// declares a smaller limit with WithMaxSize.
const DefaultMaxSize = 1 << 20

// Option adjusts the contract for a store's documented limits.
type Option func(*suite)

type suite struct{ maxSize int }

// WithMaxSize declares that the store holds objects of at most n bytes (a
// Kubernetes Lease keeps its document in an annotation). The suite then
// round-trips an n-byte payload and requires a larger one to be refused with
// a non-transient error that leaves the object unchanged.
func WithMaxSize(n int) Option { return func(s *suite) { s.maxSize = n } }

// RunObjectCAS runs the ObjectCAS contract suite against the store that
// factory makes. Every adapter's tests call it against the adapter's real
// server, and MemoryCAS's tests call it too.
func RunObjectCAS(t *testing.T, factory Factory, opts ...Option) {
	t.Helper()
	s := suite{maxSize: DefaultMaxSize}
	for _, o := range opts {
		o(&s)
	}
	cases := append([]contractCase(nil), contractCases...)
	cases = append(cases, contractCase{fmt.Sprintf("RoundTrip%dBytes", s.maxSize), func(t *testing.T, o Opener) {
		testRoundTrip(t, o, bigPayload(s.maxSize-2)) // the round trip appends two bytes
	}})
	if s.maxSize < DefaultMaxSize {
		cases = append(cases, contractCase{"OversizeRefused", func(t *testing.T, o Opener) { testOversize(t, o, s.maxSize) }})
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			open := factory(t)
			tc.run(t, open)
		})
	}
}

type contractCase struct {
	name string
	run  func(t *testing.T, open Opener)
}

var contractCases = []contractCase{
	{"GetAbsentIsNotFound", testGetAbsent},
	{"StringNamesTheObject", testString},
	{"CreateOnlyOnAbsentSucceeds", testCreateOnlyAbsent},
	{"CreateOnlyOnPresentFailsAndKeepsObject", testCreateOnlyPresent},
	{"IfVersionCurrentSucceedsWithNewVersion", testIfVersionCurrent},
	{"IfVersionStaleFailsAndKeepsObject", testIfVersionStale},
	{"IfVersionOnAbsentIsNotHeld", testIfVersionAbsent},
	{"DeleteCurrentRemoves", testDeleteCurrent},
	{"DeleteStaleFailsAndKeepsObject", testDeleteStale},
	{"DeleteAbsentIsNotHeld", testDeleteAbsent},
	{"InvalidPreconditionsRejected", testInvalidPreconditions},
	{"CreateAfterDelete", testCreateAfterDelete},
	{"ConcurrentCreateOnlyOneWinner", testConcurrentCreate},
	{"ConcurrentIfVersionOneWinner", testConcurrentIfVersion},
	{"RoundTripEmpty", func(t *testing.T, o Opener) { testRoundTrip(t, o, []byte{}) }},
	{"RoundTripBinary", func(t *testing.T, o Opener) { testRoundTrip(t, o, binaryPayload()) }},
	{"CancelledContextReturnsPromptly", testCancelled},
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), callTimeout)
	t.Cleanup(cancel)
	return ctx
}

// mustPut writes with pre and fails the test on error.
func mustPut(t *testing.T, s ports.ObjectCAS, data []byte, pre ports.Precondition) ports.Version {
	t.Helper()
	v, err := s.Put(ctxT(t), data, pre)
	if err != nil {
		t.Fatalf("Put(%s) on %s: %v", pre, s, err)
	}
	if v == "" {
		t.Fatalf("Put(%s) on %s returned an empty Version", pre, s)
	}
	return v
}

// mustGet reads and fails the test on error.
func mustGet(t *testing.T, s ports.ObjectCAS) ports.Object {
	t.Helper()
	obj, err := s.Get(ctxT(t))
	if err != nil {
		t.Fatalf("Get on %s: %v", s, err)
	}
	return obj
}

// expectStored asserts the object holds data at version v.
func expectStored(t *testing.T, s ports.ObjectCAS, data []byte, v ports.Version) {
	t.Helper()
	obj := mustGet(t, s)
	if !bytes.Equal(obj.Data, data) {
		t.Fatalf("%s holds %q, want %q", s, clip(obj.Data), clip(data))
	}
	if obj.Version != v {
		t.Fatalf("%s is at version %q, want %q", s, obj.Version, v)
	}
}

func expectNotHeld(t *testing.T, what string, err error) {
	t.Helper()
	if !errors.Is(err, ports.ErrNotFound) && !errors.Is(err, ports.ErrPreconditionFailed) {
		t.Fatalf("%s: got %v, want ErrNotFound or ErrPreconditionFailed", what, err)
	}
}

func testGetAbsent(t *testing.T, open Opener) {
	_, err := open(t).Get(ctxT(t))
	if !errors.Is(err, ports.ErrNotFound) {
		t.Fatalf("Get of an absent object: got %v, want ErrNotFound", err)
	}
	if ports.IsTransient(err) {
		t.Fatalf("Get of an absent object is classified transient: %v", err)
	}
}

func testString(t *testing.T, open Opener) {
	if s := open(t).String(); s == "" {
		t.Fatal("String() is empty; it must name the object for humans")
	}
}

func testCreateOnlyAbsent(t *testing.T, open Opener) {
	s := open(t)
	v := mustPut(t, s, []byte("one"), ports.CreateOnly())
	expectStored(t, s, []byte("one"), v)
}

func testCreateOnlyPresent(t *testing.T, open Opener) {
	s := open(t)
	v := mustPut(t, s, []byte("first"), ports.CreateOnly())
	_, err := s.Put(ctxT(t), []byte("second"), ports.CreateOnly())
	if !errors.Is(err, ports.ErrPreconditionFailed) {
		t.Fatalf("create-only on a present object: got %v, want ErrPreconditionFailed", err)
	}
	expectStored(t, s, []byte("first"), v)
}

func testIfVersionCurrent(t *testing.T, open Opener) {
	s := open(t)
	v1 := mustPut(t, s, []byte("v1"), ports.CreateOnly())
	v2 := mustPut(t, s, []byte("v2"), ports.IfVersion(v1))
	if v2 == v1 {
		t.Fatalf("if-version write of different bytes kept version %q", v1)
	}
	expectStored(t, s, []byte("v2"), v2)
}

func testIfVersionStale(t *testing.T, open Opener) {
	s := open(t)
	v1 := mustPut(t, s, []byte("v1"), ports.CreateOnly())
	v2 := mustPut(t, s, []byte("v2"), ports.IfVersion(v1))
	_, err := s.Put(ctxT(t), []byte("v3"), ports.IfVersion(v1))
	if !errors.Is(err, ports.ErrPreconditionFailed) {
		t.Fatalf("if-version with a stale version: got %v, want ErrPreconditionFailed", err)
	}
	expectStored(t, s, []byte("v2"), v2)
}

func testIfVersionAbsent(t *testing.T, open Opener) {
	s := open(t)
	v := mustPut(t, s, []byte("x"), ports.CreateOnly())
	if err := s.Delete(ctxT(t), ports.IfVersion(v)); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	_, err := s.Put(ctxT(t), []byte("y"), ports.IfVersion(v))
	expectNotHeld(t, "if-version write on an absent object", err)
	if _, err := s.Get(ctxT(t)); !errors.Is(err, ports.ErrNotFound) {
		t.Fatalf("a failed if-version write created the object: Get = %v", err)
	}
}

func testDeleteCurrent(t *testing.T, open Opener) {
	s := open(t)
	v := mustPut(t, s, []byte("doomed"), ports.CreateOnly())
	if err := s.Delete(ctxT(t), ports.IfVersion(v)); err != nil {
		t.Fatalf("Delete with the current version: %v", err)
	}
	if _, err := s.Get(ctxT(t)); !errors.Is(err, ports.ErrNotFound) {
		t.Fatalf("Get after Delete: got %v, want ErrNotFound", err)
	}
}

func testDeleteStale(t *testing.T, open Opener) {
	s := open(t)
	v1 := mustPut(t, s, []byte("a"), ports.CreateOnly())
	v2 := mustPut(t, s, []byte("b"), ports.IfVersion(v1))
	err := s.Delete(ctxT(t), ports.IfVersion(v1))
	if !errors.Is(err, ports.ErrPreconditionFailed) {
		t.Fatalf("Delete with a stale version: got %v, want ErrPreconditionFailed", err)
	}
	expectStored(t, s, []byte("b"), v2)
}

func testDeleteAbsent(t *testing.T, open Opener) {
	s := open(t)
	v := mustPut(t, s, []byte("a"), ports.CreateOnly())
	if err := s.Delete(ctxT(t), ports.IfVersion(v)); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	if err := s.Delete(ctxT(t), ports.IfVersion(v)); err != nil {
		expectNotHeld(t, "Delete of an absent object", err)
	}
	if _, err := s.Get(ctxT(t)); !errors.Is(err, ports.ErrNotFound) {
		t.Fatalf("Get after deleting an absent object: got %v, want ErrNotFound", err)
	}
}

func testInvalidPreconditions(t *testing.T, open Opener) {
	s := open(t)
	if err := s.Delete(ctxT(t), ports.CreateOnly()); !errors.Is(err, ports.ErrInvalidPrecondition) {
		t.Fatalf("Delete(CreateOnly): got %v, want ErrInvalidPrecondition", err)
	}
	if _, err := s.Put(ctxT(t), []byte("x"), ports.IfVersion("")); !errors.Is(err, ports.ErrInvalidPrecondition) {
		t.Fatalf("Put(IfVersion(\"\")): got %v, want ErrInvalidPrecondition", err)
	}
	if _, err := s.Put(ctxT(t), []byte("x"), ports.Precondition{}); !errors.Is(err, ports.ErrInvalidPrecondition) {
		t.Fatalf("Put(zero Precondition): got %v, want ErrInvalidPrecondition", err)
	}
	if _, err := s.Get(ctxT(t)); !errors.Is(err, ports.ErrNotFound) {
		t.Fatalf("an invalid precondition wrote the object: Get = %v", err)
	}
}

func testCreateAfterDelete(t *testing.T, open Opener) {
	s := open(t)
	v := mustPut(t, s, []byte("first life"), ports.CreateOnly())
	if err := s.Delete(ctxT(t), ports.IfVersion(v)); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	v2 := mustPut(t, s, []byte("second life"), ports.CreateOnly())
	expectStored(t, s, []byte("second life"), v2)
}

// race runs Writers concurrent writes, each through its own handle, and
// returns the index of every winner and every loser's error.
func race(t *testing.T, open Opener, pre ports.Precondition) (winners []int, errs []error) {
	t.Helper()
	handles := make([]ports.ObjectCAS, Writers)
	for i := range handles {
		handles[i] = open(t)
	}
	ctx := ctxT(t)
	var (
		mu    sync.Mutex
		wg    sync.WaitGroup
		start = make(chan struct{})
	)
	for i, h := range handles {
		wg.Go(func() {
			<-start
			_, err := h.Put(ctx, fmt.Appendf(nil, "writer %d", i), pre)
			mu.Lock()
			defer mu.Unlock()
			if err == nil {
				winners = append(winners, i)
			} else {
				errs = append(errs, err)
			}
		})
	}
	close(start)
	wg.Wait()
	return winners, errs
}

func checkOneWinner(t *testing.T, open Opener, winners []int, errs []error) {
	t.Helper()
	if len(winners) != 1 {
		t.Fatalf("%d concurrent writers: %d winners %v, want exactly 1 (errors: %v)", Writers, len(winners), winners, errs)
	}
	for _, err := range errs {
		if !errors.Is(err, ports.ErrPreconditionFailed) && !ports.IsTransient(err) {
			t.Fatalf("a losing writer got %v, want ErrPreconditionFailed (or a transient error)", err)
		}
	}
	obj := mustGet(t, open(t))
	if want := fmt.Sprintf("writer %d", winners[0]); string(obj.Data) != want {
		t.Fatalf("stored %q, but the winner was %q", obj.Data, want)
	}
}

func testConcurrentCreate(t *testing.T, open Opener) {
	winners, errs := race(t, open, ports.CreateOnly())
	checkOneWinner(t, open, winners, errs)
}

func testConcurrentIfVersion(t *testing.T, open Opener) {
	v := mustPut(t, open(t), []byte("base"), ports.CreateOnly())
	winners, errs := race(t, open, ports.IfVersion(v))
	checkOneWinner(t, open, winners, errs)
}

func testRoundTrip(t *testing.T, open Opener, data []byte) {
	s := open(t)
	v := mustPut(t, s, data, ports.CreateOnly())
	expectStored(t, s, data, v)
	// The same payload again through if-version, from another handle.
	data2 := append(bytes.Clone(data), 0x00, 0xff)
	v2 := mustPut(t, open(t), data2, ports.IfVersion(v))
	expectStored(t, s, data2, v2)
}

func testOversize(t *testing.T, open Opener, limit int) {
	s := open(t)
	v := mustPut(t, s, []byte("small"), ports.CreateOnly())
	_, err := s.Put(ctxT(t), bigPayload(limit+1), ports.IfVersion(v))
	if err == nil || ports.IsTransient(err) {
		t.Fatalf("a %d-byte write to a store limited to %d bytes: got %v, want a non-transient error", limit+1, limit, err)
	}
	expectStored(t, s, []byte("small"), v)
}

func testCancelled(t *testing.T, open Opener) {
	s := open(t)
	v := mustPut(t, s, []byte("kept"), ports.CreateOnly())
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	done := make(chan error, 3)
	go func() {
		_, err := s.Get(ctx)
		done <- err
		_, err = s.Put(ctx, []byte("not written"), ports.IfVersion(v))
		done <- err
		done <- s.Delete(ctx, ports.IfVersion(v))
	}()
	for _, op := range []string{"Get", "Put", "Delete"} {
		select {
		case err := <-done:
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("%s with a cancelled context: got %v, want an error wrapping context.Canceled", op, err)
			}
		case <-time.After(callTimeout):
			t.Fatalf("%s with a cancelled context did not return within %s", op, callTimeout)
		}
	}
	expectStored(t, s, []byte("kept"), v)
}

func binaryPayload() []byte {
	b := make([]byte, 256)
	for i := range b {
		b[i] = byte(i)
	}
	return append(b, []byte("\x00\r\n\xff{\"not\":\"json\"")...)
}

func bigPayload(n int) []byte {
	b := make([]byte, n)
	x := uint32(2463534242)
	for i := range b {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		b[i] = byte(x)
	}
	return b
}

func clip(b []byte) []byte {
	if len(b) > 64 {
		return append(bytes.Clone(b[:64]), "..."...)
	}
	return b
}
