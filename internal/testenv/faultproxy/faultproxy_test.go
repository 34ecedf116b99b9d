package faultproxy

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestAWriteWhoseClientHangsUpIsRecordedWithTheServersAnswer: a replica
// killed while its conditional write is at the server leaves a write the
// server applied; the log must show the server's answer (and ETag), or a
// soak that rebuilds the document's history from the log loses the link.
// A read whose client hangs up ends at the server too.
func TestAWriteWhoseClientHangsUpIsRecordedWithTheServersAnswer(t *testing.T) {
	arrived, release := make(chan string, 10), make(chan struct{})
	readEnded := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		arrived <- r.Method
		if r.Method == http.MethodGet {
			<-r.Context().Done() // a watch: ends when the proxy's request does
			close(readEnded)
			return
		}
		<-release // the server applies the write whatever the client does
		w.Header().Set("ETag", `"v2"`)
		w.WriteHeader(http.StatusOK)
	}))
	defer srv.Close()
	defer close(release)
	p := New(t, srv.URL)

	for _, method := range []string{http.MethodPut, http.MethodGet} {
		ctx, cancel := context.WithCancel(context.Background())
		var body io.Reader
		if method == http.MethodPut {
			body = strings.NewReader("{}")
		}
		req, err := http.NewRequestWithContext(ctx, method, p.URL+"/bucket/state.json", body)
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() {
			resp, err := http.DefaultClient.Do(req)
			if err == nil {
				resp.Body.Close()
			}
			done <- err
		}()
		if got := <-arrived; got != method {
			t.Fatalf("the server saw %s, want %s", got, method)
		}
		cancel()
		if err := <-done; !errors.Is(err, context.Canceled) {
			t.Fatalf("%s: the client's call ended with %v, want its cancellation", method, err)
		}
	}
	select {
	case <-readEnded:
	case <-time.After(time.Minute):
		t.Fatal("a read whose client hung up still runs at the server")
	}

	release <- struct{}{}
	deadline := time.Now().Add(time.Minute)
	for {
		for _, r := range p.Requests() {
			if r.Method != http.MethodPut {
				continue
			}
			if r.Upstream != http.StatusOK || r.UpstreamHeader.Get("ETag") != `"v2"` {
				t.Fatalf("the applied write is logged with upstream %d, ETag %q; want the server's 200 and \"v2\"", r.Upstream, r.UpstreamHeader.Get("ETag"))
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the write whose client hung up was never logged")
		}
		time.Sleep(10 * time.Millisecond)
	}
}
