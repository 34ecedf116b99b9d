package e2e

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/testenv/faultproxy"
)

// FaultCase is one injected fault and the classification it must get.
type FaultCase struct {
	Name string
	Rule faultproxy.Rule
	// Write injects the fault on a conditional write; otherwise on a read.
	Write bool
	// Landed says whether the write reaches the store despite the fault.
	Landed bool
	// RetryAfter is the hint the error must carry, if any.
	RetryAfter time.Duration
}

// FaultTimeout is the request timeout of the store behind the proxy: short,
// so a Delay fault exceeds it.
const FaultTimeout = 500 * time.Millisecond

// RunFaults checks, for each case, that the adapter reports the fault as
// transient (with its retry hint) and that the write landed or not.
func RunFaults(t *testing.T, h Harness, cases []FaultCase) {
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			p := faultproxy.New(t, h.Endpoint)
			name := Name("fault")
			direct := h.Open(t, h.Endpoint, name, 0)
			v, err := direct.Put(t.Context(), []byte(`{"seed":true}`), ports.CreateOnly())
			if err != nil {
				t.Fatal(err)
			}
			rule := tc.Rule
			rule.Name, rule.Times = tc.Name, 1
			if tc.Write {
				rule.Match = func(r *http.Request) bool { return h.IsConditionalPut(faultproxy.FromHTTP(r)) }
			} else {
				rule.Match = func(r *http.Request) bool { return h.IsRead(faultproxy.FromHTTP(r)) }
			}
			p.Add(rule)
			s := h.Open(t, p.URL, name, FaultTimeout)
			payload := []byte(`{"written":"` + tc.Name + `"}`)
			if tc.Write {
				_, err = s.Put(t.Context(), payload, ports.IfVersion(v))
			} else {
				_, err = s.Get(t.Context())
			}
			if !ports.IsTransient(err) {
				t.Fatalf("%s: got %v, want a transient error", tc.Name, err)
			}
			if d, ok := ports.RetryAfter(err); d != tc.RetryAfter {
				t.Fatalf("retry-after %v (%v), want %v", d, ok, tc.RetryAfter)
			}
			obj, err := direct.Get(t.Context())
			if err != nil {
				t.Fatal(err)
			}
			if landed := string(obj.Data) == string(payload); landed != tc.Landed {
				t.Fatalf("write landed = %v, want %v", landed, tc.Landed)
			}
			if n := p.Fired(tc.Name); n != 1 {
				t.Fatalf("the fault fired %d times", n)
			}
		})
	}
}

// CallerCancellation checks that the caller's own deadline surfaces as
// such, never as a transient error to be retried.
func CallerCancellation(t *testing.T, h Harness) {
	p := faultproxy.New(t, h.Endpoint)
	p.Add(faultproxy.Rule{Action: faultproxy.Delay, Delay: 5 * time.Second})
	s := h.Open(t, p.URL, Name("cancel"), 0)
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if _, err := s.Get(ctx); !errors.Is(err, context.DeadlineExceeded) || ports.IsTransient(err) {
		t.Fatalf("got %v, want the caller's deadline, not transient", err)
	}
}
