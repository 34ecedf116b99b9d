package k8s

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/sf2loki/sf2loki/internal/ports"
)

// The watch follows the API's "efficient detection of changes"
// (https://kubernetes.io/docs/reference/using-api/api-concepts/#efficient-detection-of-changes):
// a GET gives the state and its resourceVersion, and a watch from that
// resourceVersion delivers every change after it, in order. The server ends a
// watch after timeoutSeconds, and a watch resumed from the last
// resourceVersion seen misses nothing. Bookmarks
// (https://kubernetes.io/docs/reference/using-api/api-concepts/#watch-bookmarks)
// advance that resourceVersion while the Lease does not change, so that a
// resume stays within the history the server keeps (etcd's, about five
// minutes by default). A resume from a resourceVersion older than that
// history is answered 410 Gone, as the request's status or as an ERROR event
// in the stream: the client must GET again and watch from the new
// resourceVersion
// (https://kubernetes.io/docs/reference/using-api/api-concepts/#410-gone-responses).
const (
	// watchTimeout is the server-side lifetime asked of one watch request,
	// jittered up to twice as long so that replicas do not reconnect in step.
	watchTimeout = 3 * time.Minute
	// watchGrace is how long past its timeoutSeconds a watch may stay
	// silent before it is taken for a dead connection.
	watchGrace = 30 * time.Second
	// A failed watch is retried after a capped exponential backoff with
	// jitter; a watch that lived at least watchHealthy resets it.
	watchBackoffMin = 500 * time.Millisecond
	watchBackoffMax = 30 * time.Second
	watchHealthy    = 10 * time.Second
)

var _ ports.Watcher = (*Store)(nil)

// Watch implements ports.Watcher with a GET of the Lease and a watch on it
// (the verb watch on leases). See the package documentation.
func (s *Store) Watch(ctx context.Context) <-chan ports.Change {
	return s.watchFrom(ctx, "")
}

// watchFrom starts the watch; a non-empty rv resumes from it with no initial
// GET (tests use it to start from an expired resourceVersion).
func (s *Store) watchFrom(ctx context.Context, rv string) <-chan ports.Change {
	out := make(chan ports.Change, 1)
	w := &watchLoop{s: s, out: out, rv: rv, relist: rv == ""}
	go w.run(ctx)
	return out
}

// watchLoop is one Watch's state; only its goroutine touches it.
type watchLoop struct {
	s   *Store
	out chan ports.Change
	// rv is where the next watch request starts; relist says it must be
	// read again first (at the start, after a failure, after 410 Gone).
	rv     string
	relist bool
	// broken: a Change with Err was sent and no state since.
	broken   bool
	failures int
}

// offer puts c in the channel's one slot (ports.Offer): only the loop's
// goroutine sends.
func (w *watchLoop) offer(c ports.Change) { ports.Offer(w.out, c) }

func (w *watchLoop) run(ctx context.Context) {
	defer close(w.out)
	for ctx.Err() == nil {
		var first *ports.Change
		if w.relist {
			c, rv, err := w.s.read(ctx)
			if err != nil {
				w.fail(ctx, err)
				continue
			}
			first, w.rv = &c, rv
		}
		st, err := w.s.openWatch(ctx, w.rv)
		if err != nil {
			if isGone(err) && !w.relist {
				w.relist = true
				continue
			}
			w.fail(ctx, w.s.classifyWatch(ctx, err))
			continue
		}
		// The watch is up from w.rv: the state read at w.rv is the current
		// one, and every change after it will follow.
		w.relist = false
		if first != nil {
			w.offer(*first)
			w.broken = false
		}
		started := time.Now()
		err = w.consume(ctx, st)
		st.stop()
		lived := time.Since(started)
		if lived >= watchHealthy {
			w.failures = 0
		}
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, errGone) && first == nil:
			// The history ran out: read the current state and watch on from
			// there at once. Nothing is lost for the reader, who gets that
			// state next (the states in between are skipped, as coalescing
			// skips them).
			w.relist = true
		case errors.Is(err, errGone):
			// Gone again from a resourceVersion just read: back off.
			w.fail(ctx, ports.Transient("watch", fmt.Errorf("%s: %w, right after reading it", w.s, err)))
		case err != nil:
			w.fail(ctx, err)
		case lived < watchHealthy:
			// A watch that ends at once, again and again, must not spin.
			if !w.sleep(ctx) {
				return
			}
		}
	}
}

// fail reports a broken watch once (the reader polls until the next state),
// then waits out the backoff; the next attempt reads the state again.
func (w *watchLoop) fail(ctx context.Context, err error) {
	if ctx.Err() != nil {
		return
	}
	if !w.broken {
		w.offer(ports.Change{Err: err})
		w.broken = true
	}
	w.relist = true
	w.sleep(ctx)
}

// sleep waits out the next backoff, a random time between half of and the
// whole of min(watchBackoffMin·2ⁿ, watchBackoffMax); false if ctx ended.
func (w *watchLoop) sleep(ctx context.Context) bool {
	d := watchBackoffMax
	if w.failures < 16 {
		d = min(watchBackoffMax, watchBackoffMin<<w.failures)
	}
	w.failures++
	d = d/2 + rand.N(d/2+1) //nolint:gosec // jitter, not a secret
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// read is the watch's GET: the Change Get's result makes, and the
// resourceVersion to watch from ("" for an absent Lease: a watch from no
// resourceVersion starts with the state at the most recent one, so a Lease
// created between the GET and the watch is reported).
func (s *Store) read(ctx context.Context) (ports.Change, string, error) {
	client, err := s.rest()
	if err != nil {
		return ports.Change{}, "", err
	}
	var lease coordinationv1.Lease
	err = client.Get().Namespace(s.namespace).Resource("leases").Name(s.name).
		MaxRetries(0).Timeout(s.timeout).Do(ctx).Into(&lease)
	if apierrors.IsNotFound(err) {
		return ports.Change{Absent: true}, "", nil
	}
	if err != nil {
		return ports.Change{}, "", s.classify(ctx, "get", err, ports.Precondition{})
	}
	return s.change(&lease), lease.ResourceVersion, nil
}

// change is the Change for a Lease's state: what Get returns for it, an
// oversized document included (its Version and ports.ErrTooLarge, so that
// the reader judges it as Get's caller would).
func (s *Store) change(lease *coordinationv1.Lease) ports.Change {
	obj, err := s.object("watch", lease)
	return ports.Change{Object: obj, Err: err}
}

// stream is one watch request's response.
type stream struct {
	ctx  context.Context // ends with the stream
	body io.ReadCloser
	stop func()
}

// openWatch starts a watch from rv. The request is bounded by the store's
// timeout until the server answers, and the stream by its timeoutSeconds
// plus watchGrace.
func (s *Store) openWatch(ctx context.Context, rv string) (*stream, error) {
	client, err := s.rest()
	if err != nil {
		return nil, err
	}
	life := watchTimeout + rand.N(watchTimeout) //nolint:gosec // jitter, not a secret
	sctx, cancel := context.WithTimeoutCause(ctx, life+watchGrace,
		fmt.Errorf("the watch of %s sent nothing and did not end within %s", s, life+watchGrace))
	req := client.Get().Namespace(s.namespace).Resource("leases").
		Param("watch", "true").
		Param("fieldSelector", "metadata.name="+s.name).
		Param("allowWatchBookmarks", "true").
		Param("timeoutSeconds", strconv.Itoa(int(life/time.Second))).
		SetHeader("Accept", "application/json").
		MaxRetries(0)
	if rv != "" {
		req = req.Param("resourceVersion", rv)
	}
	answered := time.AfterFunc(s.timeout, cancel)
	body, err := req.Stream(sctx)
	if !answered.Stop() && err != nil {
		err = fmt.Errorf("no answer within %s: %w", s.timeout, err)
	}
	if err != nil {
		cancel()
		return nil, err
	}
	return &stream{ctx: sctx, body: body, stop: func() { cancel(); body.Close() }}, nil
}

// errGone ends a watch whose resourceVersion is too old (410 Gone).
var errGone = errors.New("the watch's resourceVersion is too old")

// watchEvent is one event of a watch stream.
type watchEvent struct {
	Type   string          `json:"type"`
	Object json.RawMessage `json:"object"`
}

// consume reads events until the stream ends: nil when the server ended it
// (its timeoutSeconds), errGone on 410 Gone, otherwise why it broke.
func (w *watchLoop) consume(ctx context.Context, st *stream) error {
	dec := json.NewDecoder(st.body)
	for {
		var ev watchEvent
		if err := dec.Decode(&ev); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			if ctx.Err() != nil {
				return ctx.Err()
			}
			if cause := context.Cause(st.ctx); cause != nil {
				return ports.Transient("watch", cause)
			}
			return ports.Transient("watch", fmt.Errorf("%s: the watch stream broke: %w", w.s, err))
		}
		switch ev.Type {
		case "ADDED", "MODIFIED", "DELETED", "BOOKMARK":
			var lease coordinationv1.Lease
			if err := json.Unmarshal(ev.Object, &lease); err != nil {
				return fmt.Errorf("watch %s: a %s event does not hold a Lease: %w", w.s, ev.Type, err)
			}
			if lease.ResourceVersion != "" {
				w.rv = lease.ResourceVersion
			}
			switch {
			case ev.Type == "BOOKMARK" || lease.Name != w.s.name:
			case ev.Type == "DELETED":
				w.offer(ports.Change{Absent: true})
			default:
				w.offer(w.s.change(&lease))
			}
		case "ERROR":
			var status metav1.Status
			if err := json.Unmarshal(ev.Object, &status); err != nil {
				return fmt.Errorf("watch %s: an ERROR event without a Status: %w", w.s, err)
			}
			err := &apierrors.StatusError{ErrStatus: status}
			if isGone(err) {
				return errGone
			}
			return w.s.classifyWatch(ctx, err)
		default:
			return fmt.Errorf("watch %s: unknown event type %q", w.s, ev.Type)
		}
	}
}

// isGone reports 410 Gone: reason Expired ("too old resource version") or
// Gone, or the bare code.
func isGone(err error) bool {
	var status apierrors.APIStatus
	return apierrors.IsResourceExpired(err) || apierrors.IsGone(err) ||
		errors.As(err, &status) && status.Status().Code == http.StatusGone
}

// classifyWatch is classify for the watch request: a refusal names the verb
// to grant, and says that the daemon works without it.
func (s *Store) classifyWatch(ctx context.Context, err error) error {
	if ctx.Err() == nil && (apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err)) {
		return fmt.Errorf("watch %s: %w: grant the watch verb on leases in namespace %q (until then standbys poll the Lease every renew_interval): %w",
			s, ports.ErrPermissionDenied, s.namespace, err)
	}
	return s.classify(ctx, "watch", err, ports.Precondition{})
}

// CanWatch checks that this identity may watch the Lease: it opens Watch's
// request and ends it at once. Without the verb the daemon still works; its
// standbys poll the Lease instead.
func (s *Store) CanWatch(ctx context.Context) error {
	st, err := s.openWatch(ctx, "")
	if err != nil {
		return s.classifyWatch(ctx, err)
	}
	st.stop()
	return nil
}
