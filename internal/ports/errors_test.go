package ports_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/sf2loki/sf2loki/internal/ports"
)

func TestIsTransient(t *testing.T) {
	base := errors.New("503")
	cases := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"plain", base, false},
		{"transient", ports.Transient("put", base), true},
		{"wrapped transient", fmt.Errorf("commit: %w", ports.Transient("put", base)), true},
		{"not found", ports.ErrNotFound, false},
		{"precondition", fmt.Errorf("x: %w", ports.ErrPreconditionFailed), false},
		{"cancelled inside transient", ports.Transient("get", context.Canceled), false},
		{"deadline inside transient", ports.Transient("get", context.DeadlineExceeded), true},
	}
	for _, c := range cases {
		if got := ports.IsTransient(c.err); got != c.want {
			t.Errorf("%s: IsTransient(%v) = %v, want %v", c.name, c.err, got, c.want)
		}
	}
	if ports.Transient("x", nil) != nil || ports.TransientAfter("x", time.Second, nil) != nil {
		t.Error("Transient(nil) must be nil")
	}
}

func TestRetryAfterAndMessages(t *testing.T) {
	err := fmt.Errorf("put: %w", ports.TransientAfter("put", 2*time.Second, errors.New("429")))
	if d, ok := ports.RetryAfter(err); !ok || d != 2*time.Second {
		t.Fatalf("RetryAfter = %v, %v", d, ok)
	}
	if _, ok := ports.RetryAfter(ports.Transient("put", errors.New("500"))); ok {
		t.Fatal("RetryAfter without a hint reported one")
	}
	if got := ports.Transient("put", errors.New("500")).Error(); got != "put: transient: 500" {
		t.Fatalf("message %q", got)
	}
	if !errors.Is(ports.Transient("", ports.ErrNotFound), ports.ErrNotFound) {
		t.Fatal("TransientError does not unwrap")
	}
}

func TestPrecondition(t *testing.T) {
	if !ports.CreateOnly().IsCreateOnly() {
		t.Fatal("CreateOnly not create-only")
	}
	if v, ok := ports.IfVersion("7").Version(); !ok || v != "7" {
		t.Fatalf("IfVersion(7).Version() = %q, %v", v, ok)
	}
	if _, ok := ports.CreateOnly().Version(); ok {
		t.Fatal("CreateOnly has a version")
	}
	if err := ports.CreateOnly().Validate(true); !errors.Is(err, ports.ErrInvalidPrecondition) {
		t.Fatalf("delete with CreateOnly validated: %v", err)
	}
	if err := ports.IfVersion("").Validate(false); !errors.Is(err, ports.ErrInvalidPrecondition) {
		t.Fatalf("empty IfVersion validated: %v", err)
	}
	if err := ports.IfVersion("1").Validate(true); err != nil {
		t.Fatal(err)
	}
	if ports.CreateOnly().String() != "create-only" || ports.IfVersion("3").String() != `if-version "3"` {
		t.Fatal("String()")
	}
}

func TestParseRetryAfter(t *testing.T) {
	for in, want := range map[string]time.Duration{"3": 3 * time.Second, " 10 ": 10 * time.Second, "": 0, "0": 0, "-1": 0,
		"Wed, 21 Oct 2015 07:28:00 GMT": 0} {
		if got := ports.ParseRetryAfter(in); got != want {
			t.Errorf("ParseRetryAfter(%q) = %v, want %v", in, got, want)
		}
	}
}
