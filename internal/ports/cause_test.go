package ports_test

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"syscall"
	"testing"

	"github.com/sf2loki/sf2loki/internal/ports"
)

// NetworkCause names why an endpoint could not be reached, from the error
// chain Go's HTTP client returns, and nothing for an answer or a
// cancellation.
func TestNetworkCause(t *testing.T) {
	get := func(err error) error {
		return &url.Error{Op: "Get", URL: "https://acme.my.salesforce.com/services/data/v60.0/limits", Err: err}
	}
	dial := func(err error) error { return &net.OpError{Op: "dial", Net: "tcp", Err: err} }
	cases := []struct {
		name string
		err  error
		want string // "" for no network cause
	}{
		{"dns", get(dial(&net.DNSError{Err: "no such host", Name: "nonexistent.invalid", IsNotFound: true})), "nonexistent.invalid does not resolve (DNS"},
		{"dns timeout", get(dial(&net.DNSError{Err: "i/o timeout", Name: "acme.my.salesforce.com", IsTimeout: true})), "DNS lookup of acme.my.salesforce.com timed out"},
		{"refused", get(&net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9},
			Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}), "connection to 127.0.0.1:9 was refused"},
		{"untrusted certificate", get(x509.UnknownAuthorityError{}), "acme.my.salesforce.com is signed by an authority this host does not trust"},
		{"proxy", get(&net.OpError{Op: "proxyconnect", Net: "tcp", Err: errors.New("connection refused")}), "the proxy"},
		{"deadline", get(context.DeadlineExceeded), "no answer from acme.my.salesforce.com before the timeout"},
		{"wrapped in transient", ports.Transient("get", fmt.Errorf("x: %w", get(dial(&net.DNSError{Err: "no such host", Name: "a.invalid", IsNotFound: true})))), "a.invalid does not resolve"},
		{"cancelled", get(context.Canceled), ""},
		{"an answer", errors.New("salesforce: /limits answered 403"), ""},
		{"nil", nil, ""},
	}
	for _, c := range cases {
		got, ok := ports.NetworkCause(c.err)
		if ok != (c.want != "") || !strings.Contains(got, c.want) {
			t.Errorf("%s: NetworkCause = %q, %v; want %q", c.name, got, ok, c.want)
		}
	}
	u := ports.Unreachable(get(dial(&net.DNSError{Err: "no such host", Name: "nonexistent.invalid", IsNotFound: true})), "check the URL")
	if !errors.Is(u, ports.ErrUnreachable) || !strings.Contains(u.Error(), "does not resolve (DNS: no such host): check the URL") {
		t.Fatalf("Unreachable: %v", u)
	}
	if ports.Unreachable(errors.New("403"), "x") != nil {
		t.Fatal("Unreachable of an answer")
	}
}

// The credentials sentinels are kinds of ErrPermissionDenied (callers that
// stop on a permission stop on them) but are not each other.
func TestCredentialsSentinels(t *testing.T) {
	no := fmt.Errorf("put: %w: set AWS_PROFILE", ports.ErrNoCredentials)
	refused := fmt.Errorf("put: %w", ports.ErrCredentialsRefused)
	if !errors.Is(no, ports.ErrPermissionDenied) || !errors.Is(refused, ports.ErrPermissionDenied) {
		t.Fatal("not ErrPermissionDenied")
	}
	if errors.Is(no, ports.ErrCredentialsRefused) || errors.Is(refused, ports.ErrNoCredentials) ||
		errors.Is(fmt.Errorf("x: %w", ports.ErrPermissionDenied), ports.ErrNoCredentials) {
		t.Fatal("the sentinels are confused with each other")
	}
	if strings.Contains(no.Error(), "permission") {
		t.Fatalf("the text of ErrNoCredentials speaks of a permission: %v", no)
	}
}
