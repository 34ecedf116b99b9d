package porttest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/sf2loki/sf2loki/internal/ports"
)

// Op names an ObjectCAS operation, for counting calls and targeting faults.
type Op string

// The ObjectCAS operations.
const (
	OpGet    Op = "get"
	OpPut    Op = "put"
	OpDelete Op = "delete"
)

// Call describes one ObjectCAS call as a Fault predicate sees it.
type Call struct {
	Op Op
	// N is the 1-based number of this call among calls of the same Op.
	N int
	// Data is what a Put would write (nil for Get and Delete).
	Data []byte
	// Pre is the precondition of a Put or Delete.
	Pre ports.Precondition
}

// Fault is an injected misbehaviour. A fault matches a call when Op is empty
// or equal, Nth is zero or equal to Call.N, and When is nil or true; a
// matching fault with Times left fires once per call (the first matching fault
// in injection order wins).
type Fault struct {
	Op   Op
	Nth  int
	When func(Call) bool
	// Times is how often the fault may fire; 0 means every time.
	Times int
	// Delay waits this long (on the MemoryCAS clock, honouring ctx) before the
	// call proceeds: latency.
	Delay time.Duration
	// Before runs before the call is applied, outside the store's lock: a
	// test can let a competing writer in at exactly this moment.
	Before func()
	// ApplyFirst performs the operation and then returns Err instead of its
	// result: a lost acknowledgement. With a nil Err the caller sees
	// ErrLostAck, a transient error.
	ApplyFirst bool
	// Err is returned instead of performing the call (or after performing it,
	// with ApplyFirst). Nil without ApplyFirst means the call proceeds normally
	// after Delay/Before.
	Err error
}

// Errors for fault injection, shaped like what the real adapters return.
var (
	// ErrLostAck is the transient error a write returns when its response was
	// lost after the store applied it (a 500 or a connection reset).
	ErrLostAck = ports.Transient("put", errors.New("500 internal error: response lost after the write was applied"))
	// ErrUnavailable is a transient 503.
	ErrUnavailable = ports.Transient("", errors.New("503 service unavailable"))
	// ErrThrottled is a transient 429 carrying a one-second retry-after hint.
	ErrThrottled = ports.TransientAfter("", time.Second, errors.New("429 too many requests"))
)

// MemoryOption configures a MemoryCAS.
type MemoryOption func(*MemoryCAS)

// WithClock makes fault Delays wait on c instead of the real clock.
func WithClock(c ports.Clock) MemoryOption { return func(m *MemoryCAS) { m.clock = c } }

// WithContentVersions makes Versions content hashes, as S3 ETags and file
// versions are: identical bytes give an identical Version (the ABA hazard).
// By default Versions are a generation counter, as GCS generations are.
func WithContentVersions() MemoryOption { return func(m *MemoryCAS) { m.contentVersions = true } }

// MemoryCAS is an in-memory ports.ObjectCAS that passes RunObjectCAS, with
// fault injection and call counting for domain tests and simulation.
type MemoryCAS struct {
	name            string
	clock           ports.Clock
	contentVersions bool

	mu      sync.Mutex
	exists  bool
	data    []byte
	version ports.Version
	gen     uint64
	faults  []*Fault
	calls   map[Op]int
	// changed, if set, hears every change of the object, m.mu held.
	changed func(ports.Change)
}

var _ ports.ObjectCAS = (*MemoryCAS)(nil)

// NewMemoryCAS returns an empty in-memory object named mem://name.
func NewMemoryCAS(name string, opts ...MemoryOption) *MemoryCAS {
	m := &MemoryCAS{name: name, calls: map[Op]int{}}
	for _, o := range opts {
		o(m)
	}
	return m
}

// String implements ports.ObjectCAS.
func (m *MemoryCAS) String() string { return "mem://" + m.name }

// Inject adds a fault. Faults are consulted in the order injected.
func (m *MemoryCAS) Inject(f Fault) {
	m.mu.Lock()
	defer m.mu.Unlock()
	fc := f
	m.faults = append(m.faults, &fc)
}

// ClearFaults removes every injected fault.
func (m *MemoryCAS) ClearFaults() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.faults = nil
}

// Calls returns how many calls of op have been made (faulted ones included).
func (m *MemoryCAS) Calls(op Op) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls[op]
}

// ResetCalls zeroes the call counters.
func (m *MemoryCAS) ResetCalls() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls = map[Op]int{}
}

// Peek returns the stored object without counting a call or consulting
// faults; ok is false when the object is absent.
func (m *MemoryCAS) Peek() (obj ports.Object, ok bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if !m.exists {
		return ports.Object{}, false
	}
	return ports.Object{Data: bytes.Clone(m.data), Version: m.version}, true
}

// Store writes data unconditionally, bypassing faults and counters: a test's
// way to plant a document (another process's lease, a corrupt checkpoint).
func (m *MemoryCAS) Store(data []byte) ports.Version {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.apply(data)
}

// Remove deletes the object unconditionally, bypassing faults and counters.
func (m *MemoryCAS) Remove() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.exists, m.data, m.version = false, nil, ""
	m.notify()
}

// notify reports the current state to changed; m.mu held.
func (m *MemoryCAS) notify() {
	if m.changed == nil {
		return
	}
	if !m.exists {
		m.changed(ports.Change{Absent: true})
		return
	}
	m.changed(ports.Change{Object: ports.Object{Data: bytes.Clone(m.data), Version: m.version}})
}

// apply stores data and returns its new version; m.mu held.
func (m *MemoryCAS) apply(data []byte) ports.Version {
	m.gen++
	m.exists = true
	m.data = bytes.Clone(data)
	if m.contentVersions {
		sum := sha256.Sum256(data)
		m.version = ports.Version(hex.EncodeToString(sum[:16]))
	} else {
		m.version = ports.Version(strconv.FormatUint(m.gen, 10))
	}
	m.notify()
	return m.version
}

// begin counts the call and returns the fault that fires for it, if any.
func (m *MemoryCAS) begin(op Op, data []byte, pre ports.Precondition) *Fault {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.calls[op]++
	call := Call{Op: op, N: m.calls[op], Data: data, Pre: pre}
	for _, f := range m.faults {
		if f.Op != "" && f.Op != op {
			continue
		}
		if f.Nth != 0 && f.Nth != call.N {
			continue
		}
		if f.When != nil && !f.When(call) {
			continue
		}
		if f.Times < 0 {
			continue
		}
		if f.Times > 0 {
			f.Times--
			if f.Times == 0 {
				f.Times = -1
			}
		}
		return f
	}
	return nil
}

// intercept runs a fault's delay and hook. It returns (applyFirst, err): err
// non-nil without applyFirst means "return err without applying".
func (m *MemoryCAS) intercept(ctx context.Context, f *Fault) (bool, error) {
	if f == nil {
		return false, nil
	}
	if f.Delay > 0 {
		if err := m.wait(ctx, f.Delay); err != nil {
			return false, err
		}
	}
	if f.Before != nil {
		f.Before()
	}
	if f.ApplyFirst {
		if f.Err == nil {
			return true, ErrLostAck
		}
		return true, f.Err
	}
	return false, f.Err
}

func (m *MemoryCAS) wait(ctx context.Context, d time.Duration) error {
	var ch <-chan time.Time
	if m.clock != nil {
		ch = m.clock.After(d)
	} else {
		t := time.NewTimer(d)
		defer t.Stop()
		ch = t.C
	}
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%s: %w", m, ctx.Err())
	}
}

// Get implements ports.ObjectCAS.
func (m *MemoryCAS) Get(ctx context.Context) (ports.Object, error) {
	if err := ctx.Err(); err != nil {
		return ports.Object{}, fmt.Errorf("get %s: %w", m, err)
	}
	f := m.begin(OpGet, nil, ports.Precondition{})
	if _, err := m.intercept(ctx, f); err != nil {
		return ports.Object{}, err
	}
	obj, ok := m.Peek()
	if !ok {
		return ports.Object{}, fmt.Errorf("get %s: %w", m, ports.ErrNotFound)
	}
	return obj, nil
}

// Put implements ports.ObjectCAS.
func (m *MemoryCAS) Put(ctx context.Context, data []byte, pre ports.Precondition) (ports.Version, error) {
	if err := pre.Validate(false); err != nil {
		return "", err
	}
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("put %s: %w", m, err)
	}
	f := m.begin(OpPut, bytes.Clone(data), pre)
	applyFirst, ferr := m.intercept(ctx, f)
	if ferr != nil && !applyFirst {
		return "", ferr
	}
	m.mu.Lock()
	v, err := m.checkedPut(data, pre)
	m.mu.Unlock()
	if applyFirst {
		return "", ferr
	}
	return v, err
}

func (m *MemoryCAS) checkedPut(data []byte, pre ports.Precondition) (ports.Version, error) {
	if pre.IsCreateOnly() {
		if m.exists {
			return "", fmt.Errorf("put %s (create-only): %w", m, ports.ErrPreconditionFailed)
		}
		return m.apply(data), nil
	}
	want, _ := pre.Version()
	if !m.exists {
		return "", fmt.Errorf("put %s (%s): %w", m, pre, ports.ErrNotFound)
	}
	if m.version != want {
		return "", fmt.Errorf("put %s (%s, stored %q): %w", m, pre, m.version, ports.ErrPreconditionFailed)
	}
	return m.apply(data), nil
}

// Delete implements ports.ObjectCAS.
func (m *MemoryCAS) Delete(ctx context.Context, pre ports.Precondition) error {
	if err := pre.Validate(true); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("delete %s: %w", m, err)
	}
	f := m.begin(OpDelete, nil, pre)
	applyFirst, ferr := m.intercept(ctx, f)
	if ferr != nil && !applyFirst {
		return ferr
	}
	m.mu.Lock()
	err := m.checkedDelete(pre)
	m.mu.Unlock()
	if applyFirst {
		return ferr
	}
	return err
}

func (m *MemoryCAS) checkedDelete(pre ports.Precondition) error {
	want, _ := pre.Version()
	if !m.exists {
		return fmt.Errorf("delete %s: %w", m, ports.ErrNotFound)
	}
	if m.version != want {
		return fmt.Errorf("delete %s (%s, stored %q): %w", m, pre, m.version, ports.ErrPreconditionFailed)
	}
	m.exists, m.data, m.version = false, nil, ""
	m.notify()
	return nil
}
