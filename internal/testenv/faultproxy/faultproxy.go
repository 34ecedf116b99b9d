// Package faultproxy is a fault-injecting HTTP reverse proxy for tests: it
// sits between an adapter and a real server, forwards requests, counts them,
// and on chosen requests answers with an error, loses the answer after the
// server applied the request, resets the connection mid-body, or delays.
//
// Test support only: production code must not import it.
// Imports: the standard library only.
package faultproxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"
)

// Request is what the proxy saw of one request.
type Request struct {
	Method string
	Path   string
	Query  url.Values
	Header http.Header
	// Status is what the client was answered (0 for a reset connection).
	Status int
	// Fault names the fault applied, "" for a plain pass-through.
	Fault string
	// Upstream is the server's status when the request was forwarded (0 when
	// it never reached the server), UpstreamHeader its headers: a lost
	// acknowledgement shows the server's 200 here and the injected 500 in
	// Status.
	Upstream       int
	UpstreamHeader http.Header
	// Body is the request body, kept only for requests Capture selects.
	Body []byte
	// Received is when the request reached the proxy: the server cannot
	// have applied it earlier. At is when the proxy recorded it: before its
	// answer reached the client.
	Received, At time.Time
}

// FromHTTP describes an incoming request (for Rule.Match predicates that
// share a classifier with the request log).
func FromHTTP(r *http.Request) Request {
	return Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(), Header: r.Header}
}

// Conditional reports whether the request carried a write precondition
// (S3 If-Match/If-None-Match, GCS ifGenerationMatch).
func (r Request) Conditional() bool {
	return r.Header.Get("If-Match") != "" || r.Header.Get("If-None-Match") != "" || r.Query.Has("ifGenerationMatch")
}

// Action is what a rule does with a matching request.
type Action int

// Actions.
const (
	// Respond answers Status/Body/Header without forwarding.
	Respond Action = iota
	// ApplyThenRespond forwards the request (the server applies it), drops the
	// server's answer and answers Status/Body/Header instead: a lost
	// acknowledgement.
	ApplyThenRespond
	// ApplyThenReset forwards the request, then closes the connection
	// without an answer.
	ApplyThenReset
	// ResetMidBody forwards the request and sends the server's status line
	// and headers with half the body, then closes the connection.
	ResetMidBody
	// Delay waits Delay, then forwards.
	Delay
)

// Rule is an injected fault.
type Rule struct {
	// Name labels the fault in the request log.
	Name string
	// Match selects requests (nil matches all).
	Match func(*http.Request) bool
	// Every applies the rule to every Nth matching request (0 or 1: all).
	Every int
	// Times bounds how often the rule fires (0: unlimited).
	Times  int
	Action Action
	Status int
	Body   string
	Header http.Header
	Delay  time.Duration

	seen, fired int
}

// Proxy is a running fault proxy.
type Proxy struct {
	// URL is the proxy's base URL.
	URL string

	target    *url.URL
	rp        *httputil.ReverseProxy
	transport http.RoundTripper
	srv       *httptest.Server

	mu       sync.Mutex
	rules    []*Rule
	requests []Request
	capture  func(*http.Request) bool
	closing  chan struct{} // closed first when the proxy stops: delays end
	// detached ends when the proxy stops: the writes that outlive their
	// clients (onward) end with it, so a hung server cannot hold the stop.
	detached context.Context
	stop     context.CancelFunc
}

// New starts a proxy in front of target and closes it when t ends.
func New(t testing.TB, target string) *Proxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{target: u, transport: http.DefaultTransport}
	p.rp = &httputil.ReverseProxy{Rewrite: func(r *httputil.ProxyRequest) {
		r.SetURL(u)
		if u.Scheme != "https" {
			// Keep the client's Host header: signed requests (SigV4) cover it.
			r.Out.Host = r.In.Host
		}
	}}
	if u.Scheme == "https" {
		// Test servers (the Kubernetes API server) use self-signed certificates.
		p.transport = &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}} //nolint:gosec // test servers only
		p.rp.Transport = p.transport
	}
	// Record a pass-through before its answer reaches the client, so a test
	// that has seen the answer also sees the record.
	p.rp.ModifyResponse = func(resp *http.Response) error {
		p.record(resp.Request, resp.StatusCode, faultOf(resp.Request), resp.StatusCode, resp.Header)
		return nil
	}
	p.rp.ErrorHandler = func(w http.ResponseWriter, r *http.Request, err error) {
		p.record(r, http.StatusBadGateway, faultOf(r), 0, nil)
		http.Error(w, err.Error(), http.StatusBadGateway)
	}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	p.URL = p.srv.URL
	p.closing = make(chan struct{})
	p.detached, p.stop = context.WithCancel(context.Background())
	t.Cleanup(func() {
		close(p.closing)
		p.stop()
		p.srv.Close()
	})
	return p
}

// Add installs a rule; rules are consulted in order, the first that fires wins.
func (p *Proxy) Add(r Rule) {
	p.mu.Lock()
	defer p.mu.Unlock()
	rc := r
	p.rules = append(p.rules, &rc)
}

// Capture makes the proxy keep the bodies of the requests sel selects
// (Request.Body).
func (p *Proxy) Capture(sel func(*http.Request) bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.capture = sel
}

// Clear removes every rule.
func (p *Proxy) Clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = nil
}

// Requests returns the requests seen so far.
func (p *Proxy) Requests() []Request {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]Request(nil), p.requests...)
}

// Reset forgets the requests seen so far.
func (p *Proxy) Reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.requests = nil
}

// Count returns how many requests seen so far satisfy pred.
func (p *Proxy) Count(pred func(Request) bool) int {
	n := 0
	for _, r := range p.Requests() {
		if pred(r) {
			n++
		}
	}
	return n
}

// Fired returns how often the rule named name has fired. A rule counts when
// the proxy picks it, before the client sees anything, so unlike the request
// log (which records a delayed request only when the client hangs up) it is
// exact the moment the client's call returns.
func (p *Proxy) Fired(name string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, rule := range p.rules {
		if rule.Name == name {
			n += rule.fired
		}
	}
	return n
}

func (p *Proxy) pick(r *http.Request) *Rule {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, rule := range p.rules {
		if rule.Match != nil && !rule.Match(r) {
			continue
		}
		if rule.Times > 0 && rule.fired >= rule.Times {
			continue
		}
		rule.seen++
		if rule.Every > 1 && rule.seen%rule.Every != 0 {
			continue
		}
		rule.fired++
		return rule
	}
	return nil
}

// record logs a request: status is the client's answer, upstream and
// header the server's (0 and nil when it was not forwarded).
func (p *Proxy) record(r *http.Request, status int, fault string, upstream int, header http.Header) {
	body, _ := r.Context().Value(bodyKey{}).([]byte)
	received, _ := r.Context().Value(receivedKey{}).(time.Time)
	p.mu.Lock()
	defer p.mu.Unlock()
	p.requests = append(p.requests, Request{Method: r.Method, Path: r.URL.Path, Query: r.URL.Query(),
		Header: r.Header.Clone(), Status: status, Fault: fault, Upstream: upstream, UpstreamHeader: header.Clone(),
		Body: body, Received: received, At: time.Now()})
}

type (
	faultKey    struct{}
	bodyKey     struct{}
	receivedKey struct{}
)

// keepBody reads the whole request body first (so the server notices a
// client that hangs up during a delay, and the request's context ends), keeps
// it for requests Capture selects, and hands the server an identical copy.
func (p *Proxy) keepBody(r *http.Request) *http.Request {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return r
	}
	r.Body = io.NopCloser(bytes.NewReader(body))
	p.mu.Lock()
	sel := p.capture
	p.mu.Unlock()
	if sel != nil && sel(r) {
		r = r.WithContext(context.WithValue(r.Context(), bodyKey{}, body))
	}
	return r
}

// faultOf returns the fault name a pass-through request carries ("" for none).
func faultOf(r *http.Request) string {
	name, _ := r.Context().Value(faultKey{}).(string)
	return name
}

// serve applies the first rule that fires. Every request is recorded before
// its answer (or reset) reaches the client.
func (p *Proxy) serve(w http.ResponseWriter, r *http.Request) {
	r = p.keepBody(r.WithContext(context.WithValue(r.Context(), receivedKey{}, time.Now())))
	rule := p.pick(r)
	if rule == nil {
		p.rp.ServeHTTP(p.onward(w, r))
		return
	}
	name := rule.Name
	if name == "" {
		name = fmt.Sprintf("action-%d", rule.Action)
	}
	switch rule.Action {
	case Respond:
		p.record(r, rule.Status, name, 0, nil)
		p.respond(w, rule)
	case ApplyThenRespond:
		resp, err := p.forward(r)
		if err != nil {
			p.record(r, http.StatusBadGateway, name, 0, nil)
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		p.record(r, rule.Status, name, resp.status, resp.header)
		p.respond(w, rule)
	case ApplyThenReset:
		resp, err := p.forward(r)
		if err != nil {
			resp = &forwardedResponse{}
		}
		p.record(r, 0, name, resp.status, resp.header)
		p.reset(w, nil)
	case ResetMidBody:
		resp, err := p.forward(r)
		if err != nil {
			p.record(r, http.StatusBadGateway, name, 0, nil)
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		p.record(r, 0, name, resp.status, resp.header)
		p.reset(w, resp)
	case Delay:
		select {
		case <-time.After(rule.Delay):
		case <-r.Context().Done():
			p.record(r, 0, name, 0, nil)
			return
		case <-p.closing:
			p.record(r, 0, name, 0, nil)
			p.reset(w, nil)
			return
		}
		p.rp.ServeHTTP(p.onward(w, r.WithContext(context.WithValue(r.Context(), faultKey{}, name))))
	}
}

// onward is a request as the proxy forwards it. A write carries on to the
// server when its client hangs up mid-flight (a killed replica): the server
// may apply it all the same, as a real one would, and the request log must
// then show what the server answered, or a test that rebuilds a document's
// history from the log misses an applied write. Reads follow their client,
// so a watch ends with it. A detached write still ends when the proxy stops.
func (p *Proxy) onward(w http.ResponseWriter, r *http.Request) (http.ResponseWriter, *http.Request) {
	if r.Method == http.MethodGet || r.Method == http.MethodHead {
		return w, r
	}
	ctx, cancel := context.WithCancel(context.WithoutCancel(r.Context()))
	context.AfterFunc(p.detached, cancel)
	// The plain writer hides http.CloseNotifier, which the reverse proxy
	// consults when the request's context cannot end.
	return plainWriter{w}, r.WithContext(ctx)
}

// plainWriter is an http.ResponseWriter and nothing else.
type plainWriter struct{ http.ResponseWriter }

func (p *Proxy) respond(w http.ResponseWriter, rule *Rule) {
	for k, vs := range rule.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	if rule.Body != "" && w.Header().Get("Content-Type") == "" {
		ct := "application/xml"
		if strings.HasPrefix(strings.TrimSpace(rule.Body), "{") {
			ct = "application/json"
		}
		w.Header().Set("Content-Type", ct)
	}
	w.WriteHeader(rule.Status)
	_, _ = io.WriteString(w, rule.Body)
}

// forwardedResponse is a fully read answer from the target.
type forwardedResponse struct {
	status int
	header http.Header
	body   []byte
}

// forward sends r to the target and reads the whole answer.
func (p *Proxy) forward(r *http.Request) (*forwardedResponse, error) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		return nil, err
	}
	_, r = p.onward(nil, r)
	out := r.Clone(r.Context())
	out.RequestURI = ""
	// Keep the client's Host header: signed requests (SigV4) cover it.
	out.URL.Scheme, out.URL.Host = p.target.Scheme, p.target.Host
	out.Body = io.NopCloser(bytes.NewReader(body))
	out.ContentLength = int64(len(body))
	if p.target.Scheme == "https" {
		out.Host = p.target.Host
	}
	resp, err := p.transport.RoundTrip(out)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	return &forwardedResponse{status: resp.StatusCode, header: resp.Header, body: b}, nil
}

// reset hijacks the connection; with resp it first writes the status line,
// the headers (announcing the full length) and half the body.
func (p *Proxy) reset(w http.ResponseWriter, resp *forwardedResponse) {
	hj, ok := w.(http.Hijacker)
	if !ok {
		panic("faultproxy: the response writer cannot be hijacked")
	}
	conn, buf, err := hj.Hijack()
	if err != nil {
		return
	}
	defer conn.Close()
	if resp != nil {
		writePartial(buf, resp)
	}
}

func writePartial(buf *bufio.ReadWriter, resp *forwardedResponse) {
	body := resp.body
	if len(body) < 2 {
		body = append(body, make([]byte, 2-len(body))...)
	}
	fmt.Fprintf(buf, "HTTP/1.1 %d %s\r\n", resp.status, http.StatusText(resp.status))
	for k, vs := range resp.header {
		if strings.EqualFold(k, "Content-Length") || strings.EqualFold(k, "Transfer-Encoding") {
			continue
		}
		for _, v := range vs {
			fmt.Fprintf(buf, "%s: %s\r\n", k, v)
		}
	}
	fmt.Fprintf(buf, "Content-Length: %d\r\n\r\n", len(body))
	_, _ = buf.Write(body[:len(body)/2])
	_ = buf.Flush()
}
