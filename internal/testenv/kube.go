package testenv

import (
	"context"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Tokens the test API server accepts: an administrator (system:masters),
// and a user with no permissions until a test binds it to a Role.
const (
	KubeAdminToken   = "sf2loki-admin-token"
	KubeLimitedToken = "sf2loki-limited-token"
	KubeLimitedUser  = "limited"
)

// KubeServer is a running etcd and kube-apiserver.
type KubeServer struct {
	// URL is the API server's base URL.
	URL   string
	dir   string
	procs []*exec.Cmd
	args  [][]string      // procs[i]'s binary and arguments, to restart it
	done  []chan struct{} // closed when procs[i] has exited
	logs  []*Buffer
}

// StartKube starts etcd and kube-apiserver (RBAC on, token authentication)
// on random loopback ports and returns when the API server is ready. Stop
// it with Stop (a TestMain shares one server across a package's tests).
// opts (at most one) adds users and the audit log.
func StartKube(t testing.TB, opts ...KubeOptions) *KubeServer {
	t.Helper()
	var o KubeOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	var err error
	for attempt := 1; attempt <= 3; attempt++ {
		var k *KubeServer
		if k, err = startKube(t, o); err == nil {
			return k
		}
		t.Logf("kube-apiserver attempt %d: %v", attempt, err)
	}
	t.Fatalf("kube-apiserver not ready after 3 attempts: %v", err)
	return nil
}

// startKube is one attempt; a server that exits early (a port taken in the
// meantime) fails it at once.
func startKube(t testing.TB, o KubeOptions) (*KubeServer, error) {
	t.Helper()
	etcdBin, apiBin := Binary(t, "etcd"), Binary(t, "kube-apiserver")
	dir, err := os.MkdirTemp("", "sf2loki-kube-")
	if err != nil {
		t.Fatal(err)
	}
	k := &KubeServer{dir: dir}
	clientPort, peerPort, apiPort := FreePort(t), FreePort(t), FreePort(t)
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", clientPort)
	k.start(t, etcdBin,
		"--data-dir", filepath.Join(dir, "etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", peerPort),
		"--initial-advertise-peer-urls", fmt.Sprintf("http://127.0.0.1:%d", peerPort),
		"--initial-cluster", fmt.Sprintf("default=http://127.0.0.1:%d", peerPort),
		"--unsafe-no-fsync", "--log-level", "error")

	keyFile := filepath.Join(dir, "sa.key")
	writeRSAKey(t, keyFile)
	tokens := filepath.Join(dir, "tokens.csv")
	if err := os.WriteFile(tokens, []byte(fmt.Sprintf("%s,admin,1,system:masters\n%s,%s,2\n",
		KubeAdminToken, KubeLimitedToken, KubeLimitedUser)+o.tokens()), 0o600); err != nil {
		t.Fatal(err)
	}
	k.start(t, apiBin, append([]string{
		"--etcd-servers", etcdURL,
		"--bind-address", "127.0.0.1", "--secure-port", fmt.Sprint(apiPort),
		"--cert-dir", filepath.Join(dir, "certs"),
		"--token-auth-file", tokens,
		"--authorization-mode", "RBAC",
		"--service-account-key-file", keyFile, "--service-account-signing-key-file", keyFile,
		"--service-account-issuer", "https://sf2loki.test",
		"--disable-admission-plugins", "ServiceAccount",
		"--endpoint-reconciler-type", "none",
		"--service-cluster-ip-range", "10.0.0.0/24",
		"--v", "0"}, o.apiserverArgs(t, dir)...)...)
	k.URL = fmt.Sprintf("https://127.0.0.1:%d", apiPort)
	if err := k.waitReady(90 * time.Second); err != nil {
		out := k.output()
		k.Stop()
		return nil, fmt.Errorf("%w\n%s", err, out)
	}
	return k, nil
}

func (k *KubeServer) start(t testing.TB, bin string, args ...string) {
	t.Helper()
	k.procs = append(k.procs, nil)
	k.args = append(k.args, append([]string{bin}, args...))
	k.done = append(k.done, nil)
	k.logs = append(k.logs, &Buffer{})
	k.run(t, len(k.procs)-1)
}

// run starts process i from its recorded command line.
func (k *KubeServer) run(t testing.TB, i int) {
	t.Helper()
	cmd := exec.Command(k.args[i][0], k.args[i][1:]...)
	cmd.Stdout, cmd.Stderr = k.logs[i], k.logs[i]
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", k.args[i][0], err)
	}
	done := make(chan struct{})
	go func() {
		_ = cmd.Wait()
		close(done)
	}()
	k.procs[i], k.done[i] = cmd, done
}

// apiServer is the index of kube-apiserver in procs (etcd is 0).
const apiServer = 1

// StopAPIServer kills kube-apiserver (etcd and its data stay): clients see
// their connections drop and new ones refused until StartAPIServer.
func (k *KubeServer) StopAPIServer(t testing.TB) {
	t.Helper()
	_ = k.procs[apiServer].Process.Kill()
	<-k.done[apiServer]
}

// StartAPIServer starts kube-apiserver again on the same port, over the same
// etcd, and returns when it is ready.
func (k *KubeServer) StartAPIServer(t testing.TB) {
	t.Helper()
	var err error
	for attempt := 1; attempt <= 3; attempt++ {
		k.run(t, apiServer)
		if err = k.waitReady(90 * time.Second); err == nil {
			return
		}
		_ = k.procs[apiServer].Process.Kill()
		<-k.done[apiServer]
		t.Logf("kube-apiserver restart attempt %d: %v", attempt, err)
	}
	t.Fatalf("kube-apiserver not ready again after 3 attempts: %v\n%s", err, k.output())
}

func (k *KubeServer) output() string {
	var b strings.Builder
	for i, l := range k.logs {
		s := l.String()
		if len(s) > 4000 {
			s = s[len(s)-4000:]
		}
		fmt.Fprintf(&b, "--- %s ---\n%s\n", k.procs[i].Path, s)
	}
	return b.String()
}

func (k *KubeServer) waitReady(limit time.Duration) error {
	client := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // a throwaway test server's self-signed certificate
	deadline := time.Now().Add(limit)
	var last string
	for time.Now().Before(deadline) {
		for i, d := range k.done {
			select {
			case <-d:
				return fmt.Errorf("%s exited", k.procs[i].Path)
			default:
			}
		}
		req, _ := http.NewRequest(http.MethodGet, k.URL+"/readyz", nil)
		req.Header.Set("Authorization", "Bearer "+KubeAdminToken)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
			last = resp.Status
		} else {
			last = err.Error()
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("no 200 from /readyz within %s (last: %s)", limit, last)
}

// Stop kills the servers and removes their data.
func (k *KubeServer) Stop() {
	for i := len(k.procs) - 1; i >= 0; i-- {
		_ = k.procs[i].Process.Kill()
		<-k.done[i]
	}
	_ = os.RemoveAll(k.dir)
}

// REST returns a client configuration authenticating with token.
func (k *KubeServer) REST(token string) *rest.Config {
	return &rest.Config{Host: k.URL, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{Insecure: true},
		QPS: 1000, Burst: 1000}
}

// Kubeconfig writes a kubeconfig file for token and returns its path.
func (k *KubeServer) Kubeconfig(t testing.TB, token string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters:
- name: test
  cluster: {server: %q, insecure-skip-tls-verify: true}
users:
- name: test
  user: {token: %q}
contexts:
- name: test
  context: {cluster: test, user: test}
current-context: test
`, k.URL, token)
	if err := os.WriteFile(p, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Admin returns a clientset with administrator rights.
func (k *KubeServer) Admin(t testing.TB) kubernetes.Interface {
	t.Helper()
	cs, err := kubernetes.NewForConfig(k.REST(KubeAdminToken))
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

var nsSeq atomic.Int64

// NewNamespace creates a fresh namespace.
func (k *KubeServer) NewNamespace(t testing.TB) string {
	t.Helper()
	name := fmt.Sprintf("sf2loki-test-%d", nsSeq.Add(1))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := k.Admin(t).CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create namespace %s: %v", name, err)
	}
	return name
}

// GrantLeases binds the limited user to a Role with verbs on leases in ns.
func (k *KubeServer) GrantLeases(t testing.TB, ns string, verbs ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs := k.Admin(t)
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "sf2loki-leases", Namespace: ns},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: verbs}}}
	if _, err := cs.RbacV1().Roles(ns).Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "sf2loki-leases", Namespace: ns},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: KubeLimitedUser}}}
	if _, err := cs.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The authorizer learns of new bindings through its informers: wait
	// until the grant is in effect, or a test's first request may be refused.
	for _, verb := range verbs {
		for {
			sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{User: KubeLimitedUser,
				ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: ns, Verb: verb, Group: "coordination.k8s.io", Resource: "leases"}}}
			res, err := cs.AuthorizationV1().SubjectAccessReviews().Create(ctx, sar, metav1.CreateOptions{})
			if err == nil && res.Status.Allowed {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("the %s grant on leases in %s did not take effect: %v", verb, ns, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

func writeRSAKey(t testing.TB, path string) {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	b := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(key)})
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}
