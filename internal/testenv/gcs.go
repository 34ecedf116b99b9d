package testenv

import (
	"fmt"
	"os"
	"sync/atomic"
	"testing"

	"github.com/fsouza/fake-gcs-server/fakestorage"
)

// GCSServer is a running fake-gcs-server. It runs in the test process (the
// same server code as the fake-gcs-server binary) behind a real loopback
// HTTP listener, so the adapter's client speaks real HTTP to it; other
// processes can reach it through URL too.
type GCSServer struct {
	// URL is the server's base URL, http://127.0.0.1:PORT.
	URL string
	srv *fakestorage.Server
}

// StartGCS starts fake-gcs-server on a random loopback port and stops it
// when t ends.
func StartGCS(t testing.TB) *GCSServer {
	t.Helper()
	srv, err := fakestorage.NewServerWithOptions(fakestorage.Options{Scheme: "http", Host: "127.0.0.1",
		PublicHost: "127.0.0.1", NoListener: false})
	if err != nil {
		t.Fatalf("start fake-gcs-server: %v", err)
	}
	t.Cleanup(srv.Stop)
	return &GCSServer{URL: srv.URL(), srv: srv}
}

// JSONEndpoint returns the JSON API endpoint for a base URL (the server's
// or a proxy's), as the storage client's option.WithEndpoint wants it.
func JSONEndpoint(base string) string { return base + "/storage/v1/" }

var gcsBucketSeq atomic.Int64

// NewBucket creates a fresh bucket and returns its name.
func (s *GCSServer) NewBucket(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("sf2loki-test-%d-%d", os.Getpid(), gcsBucketSeq.Add(1))
	s.srv.CreateBucketWithOpts(fakestorage.CreateBucketOpts{Name: name})
	return name
}
