package integration

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"
	"google.golang.org/protobuf/encoding/protowire"
)

// countingPeer is a Loki push peer that discards the bodies but counts
// their entries (snappy, then the PushRequest's streams' entries), with
// when it accepted its first and its latest push. A benchmark waits on it
// instead of scraping the daemon's /metrics every 20 ms: those scrapes
// cost a Pub/Sub daemon, which exports series per topic, about 4% of its
// CPU and an EventLogFile one 2%, and the benchmark's process as much to
// parse them.
type countingPeer struct {
	srv         *httptest.Server
	mu          sync.Mutex
	entries     int
	first, last time.Time
}

func startCountingPeer(b *testing.B) *countingPeer {
	p := &countingPeer{}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err == nil {
			body, err = s2.Decode(nil, body)
		}
		var n int
		if err == nil {
			n, err = countEntries(body)
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		now := time.Now()
		p.mu.Lock()
		if p.entries == 0 {
			p.first = now
		}
		p.entries += n
		p.last = now
		p.mu.Unlock()
		w.WriteHeader(http.StatusNoContent)
	}))
	b.Cleanup(p.srv.Close)
	return p
}

// URL is the peer's push URL.
func (p *countingPeer) URL() string { return p.srv.URL + "/loki/api/v1/push" }

// reset forgets what the peer counted, for the next daemon's run.
func (p *countingPeer) reset() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.entries, p.first, p.last = 0, time.Time{}, time.Time{}
}

// counted returns the entries accepted since reset, and when the first and
// the latest push were accepted.
func (p *countingPeer) counted() (entries int, first, last time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.entries, p.first, p.last
}

var errPushRequest = errors.New("not a PushRequest")

// countEntries counts the entries of a marshalled logproto.PushRequest:
// field 2 of each stream (field 1).
func countEntries(b []byte) (int, error) {
	n := 0
	for len(b) > 0 {
		num, typ, l := protowire.ConsumeTag(b)
		if l < 0 {
			return 0, errPushRequest
		}
		b = b[l:]
		if num != 1 || typ != protowire.BytesType {
			if l = protowire.ConsumeFieldValue(num, typ, b); l < 0 {
				return 0, errPushRequest
			}
			b = b[l:]
			continue
		}
		stream, l := protowire.ConsumeBytes(b)
		if l < 0 {
			return 0, errPushRequest
		}
		b = b[l:]
		for len(stream) > 0 {
			num, typ, l := protowire.ConsumeTag(stream)
			if l < 0 {
				return 0, errPushRequest
			}
			stream = stream[l:]
			if l = protowire.ConsumeFieldValue(num, typ, stream); l < 0 {
				return 0, errPushRequest
			}
			stream = stream[l:]
			if num == 2 && typ == protowire.BytesType {
				n++
			}
		}
	}
	return n, nil
}
