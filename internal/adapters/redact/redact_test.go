package redact_test

import (
	"strings"
	"sync"
	"testing"

	"github.com/sf2loki/sf2loki/internal/adapters/redact"
)

func TestRedactsEveryForm(t *testing.T) {
	r := redact.New("s3cr3t+/=&<v> x", "short", "")
	for _, in := range []string{
		"s3cr3t+/=&<v> x",
		"client_secret=s3cr3t%2B%2F%3D%26%3Cv%3E+x&grant_type=client_credentials",
		"/path/s3cr3t+%2F=&%3Cv%3E%20x",
		`{"d":"s3cr3t+/=\u0026\u003cv\u003e x"}`,
		`{"d":"s3cr3t+/=&<v> x"}`,
	} {
		if out := r.String(in); strings.Contains(out, "s3cr3t") || !strings.Contains(out, redact.Mask) {
			t.Errorf("%q -> %q", in, out)
		}
	}
	if out := r.String("a short word"); out != "a short word" {
		t.Errorf("a secret under %d characters was redacted: %q", redact.MinLen, out)
	}
	// The longer secret wins over one it contains.
	r2 := redact.New("abcdef", "abcdefghij")
	if out := r2.String("xabcdefghijx"); out != "x"+redact.Mask+"x" {
		t.Errorf("overlapping secrets: %q", out)
	}
	var zero *redact.Redactor
	if zero.String("abc") != "abc" || !zero.Empty() || !(&redact.Redactor{}).Empty() {
		t.Error("a nil or zero Redactor must redact nothing")
	}
}

func TestAddAndReplaceWhileRedacting(t *testing.T) {
	r := redact.New()
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			for j := range 100 {
				r.Add(strings.Repeat("k", 6+i*100+j))
				_ = r.String("kkkkkkkk")
			}
		})
	}
	wg.Wait()
	r.Replace("newsecret")
	if out := r.String("kkkkkk newsecret"); out != "kkkkkk "+redact.Mask {
		t.Fatalf("after Replace: %q", out)
	}
}
