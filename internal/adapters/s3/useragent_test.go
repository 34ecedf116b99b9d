package s3_test

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/aws/aws-sdk-go-v2/credentials"

	"github.com/sf2loki/sf2loki/internal/adapters/s3"
	"github.com/sf2loki/sf2loki/internal/buildinfo"
	"github.com/sf2loki/sf2loki/internal/ports"
)

// Requests to S3 carry sf2loki/<version> among the SDK's User-Agent
// tokens, so that CloudTrail and server access logs name the client.
func TestRequestsCarryTheUserAgent(t *testing.T) {
	var mu sync.Mutex
	var agents []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		agents = append(agents, r.UserAgent())
		mu.Unlock()
		// S3's answer to a GET of a missing key (ErrorResponses.html).
		w.Header().Set("Content-Type", "application/xml")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`<?xml version="1.0" encoding="UTF-8"?>` + "\n<Error><Code>NoSuchKey</Code><Message>The specified key does not exist.</Message>" +
			"<Key>k</Key><RequestId>4442587FB7D0A2F9</RequestId></Error>"))
	}))
	defer srv.Close()
	s, err := s3.New(t.Context(), s3.Config{Bucket: "b", Key: "k", Region: "eu-west-1", EndpointURL: srv.URL,
		Credentials: credentials.NewStaticCredentialsProvider("AKIAIOSFODNN7EXAMPLE", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY", "")})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(t.Context()); !errors.Is(err, ports.ErrNotFound) {
		t.Fatalf("Get: %v, want ErrNotFound", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(agents) == 0 || !strings.Contains(" "+agents[0]+" ", " "+buildinfo.UserAgent()+" ") {
		t.Errorf("User-Agents %q, want one holding %q", agents, buildinfo.UserAgent())
	}
}
