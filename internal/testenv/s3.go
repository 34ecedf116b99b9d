package testenv

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// S3 credentials the versitygw test server accepts (it enforces SigV4).
const (
	S3AccessKey = "test"
	S3SecretKey = "testtesttest"
	S3Region    = "us-east-1"
)

// S3Server is a running versitygw.
type S3Server struct {
	// Endpoint is the server's base URL, http://127.0.0.1:PORT.
	Endpoint string
	cmd      *exec.Cmd
}

// StartS3 starts versitygw (POSIX backend in a temp dir) on a random
// loopback port and stops it when t ends.
func StartS3(t testing.TB) *S3Server {
	t.Helper()
	bin := Binary(t, "versitygw")
	dir := t.TempDir()
	var lastErr error
	for range 5 {
		port := FreePort(t)
		cmd := exec.Command(bin, "--port", fmt.Sprintf("127.0.0.1:%d", port), "--quiet", "posix", dir)
		cmd.Env = append(os.Environ(), "ROOT_ACCESS_KEY_ID="+S3AccessKey, "ROOT_SECRET_ACCESS_KEY="+S3SecretKey)
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatalf("start versitygw: %v", err)
		}
		exited := make(chan struct{})
		go func() { _ = cmd.Wait(); close(exited) }()
		s := &S3Server{Endpoint: fmt.Sprintf("http://127.0.0.1:%d", port), cmd: cmd}
		if err := waitHTTP(s.Endpoint, exited, 15*time.Second); err != nil {
			_ = cmd.Process.Kill()
			<-exited
			lastErr = fmt.Errorf("%w; output: %s", err, out.String())
			continue // most likely the port was taken: try another
		}
		t.Cleanup(func() {
			_ = cmd.Process.Kill()
			<-exited
		})
		return s
	}
	t.Fatalf("versitygw did not start: %v", lastErr)
	return nil
}

// waitHTTP waits until url answers anything (an unsigned request gets 403).
func waitHTTP(url string, exited <-chan struct{}, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	client := &http.Client{Timeout: time.Second}
	for time.Now().Before(deadline) {
		select {
		case <-exited:
			return fmt.Errorf("server exited before answering on %s", url)
		default:
		}
		resp, err := client.Get(url)
		if err == nil {
			resp.Body.Close()
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("no answer on %s within %s", url, limit)
}

// Client returns an SDK client for the server with the test credentials.
func (s *S3Server) Client() *s3.Client {
	return s3.New(s3.Options{
		Region:       S3Region,
		BaseEndpoint: aws.String(s.Endpoint),
		UsePathStyle: true,
		Credentials:  credentials.NewStaticCredentialsProvider(S3AccessKey, S3SecretKey, ""),
	})
}

var bucketSeq atomic.Int64

// NewBucket creates a fresh bucket and returns its name.
func (s *S3Server) NewBucket(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("sf2loki-test-%d-%d", os.Getpid(), bucketSeq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := s.Client().CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(name)}); err != nil {
		t.Fatalf("create bucket %s: %v", name, err)
	}
	return name
}

// Credentials returns the provider for the test credentials.
func (s *S3Server) Credentials() aws.CredentialsProvider {
	return credentials.NewStaticCredentialsProvider(S3AccessKey, S3SecretKey, "")
}
