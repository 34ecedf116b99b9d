package k8s_test

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"

	"github.com/sf2loki/sf2loki/internal/adapters/k8s"
	"github.com/sf2loki/sf2loki/internal/domain"
	"github.com/sf2loki/sf2loki/internal/ports"
	"github.com/sf2loki/sf2loki/internal/ports/porttest"
	"github.com/sf2loki/sf2loki/internal/testenv"
	"github.com/sf2loki/sf2loki/internal/testenv/e2e"
	"github.com/sf2loki/sf2loki/internal/testenv/faultproxy"
)

// One API server serves every test in the package.
var (
	kubeOnce sync.Once
	kube     *testenv.KubeServer
)

func server(t *testing.T) *testenv.KubeServer {
	t.Helper()
	kubeOnce.Do(func() { kube = testenv.StartKube(t) })
	if kube == nil {
		t.Fatal("the API server failed to start in an earlier test")
	}
	return kube
}

func TestMain(m *testing.M) {
	code := m.Run()
	if kube != nil {
		kube.Stop()
	}
	os.Exit(code)
}

func open(t *testing.T, rc *rest.Config, ns, name string) *k8s.Store {
	t.Helper()
	s, err := k8s.New(k8s.Config{Namespace: ns, Name: name, REST: rc})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestContract(t *testing.T) {
	srv := server(t)
	ns := srv.NewNamespace(t)
	porttest.RunObjectCAS(t, func(*testing.T) porttest.Opener {
		name := e2e.Name("contract")
		return func(t *testing.T) ports.ObjectCAS { return open(t, srv.REST(testenv.KubeAdminToken), ns, name) }
	}, porttest.WithMaxSize(k8s.MaxDocumentSize))
}

func TestRoleWithoutUpdateIsPermissionDenied(t *testing.T) {
	srv := server(t)
	ns := srv.NewNamespace(t)
	srv.GrantLeases(t, ns, "get", "create")
	s := open(t, srv.REST(testenv.KubeLimitedToken), ns, "lease")
	v, err := s.Put(t.Context(), []byte(`{"holder":"a"}`), ports.CreateOnly())
	if err != nil {
		t.Fatalf("create with the create verb: %v", err)
	}
	_, err = s.Put(t.Context(), []byte(`{"holder":"a","renewals":1}`), ports.IfVersion(v))
	if !errors.Is(err, ports.ErrPermissionDenied) || ports.IsTransient(err) || !strings.Contains(err.Error(), "grant") {
		t.Fatalf("renewal without update/patch: %v, want ErrPermissionDenied saying what to grant", err)
	}
	other := open(t, srv.REST(testenv.KubeLimitedToken), srv.NewNamespace(t), "lease")
	if _, err := other.Get(t.Context()); !errors.Is(err, ports.ErrPermissionDenied) {
		t.Fatalf("read in a namespace without a role: %v", err)
	}
}

func TestKubeconfigAndMissingNamespace(t *testing.T) {
	srv := server(t)
	s, err := k8s.New(k8s.Config{Namespace: "no-such-namespace", Name: "lease", Kubeconfig: srv.Kubeconfig(t, testenv.KubeAdminToken)})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(t.Context()); !errors.Is(err, ports.ErrNotFound) {
		t.Fatalf("Get in a missing namespace: %v", err)
	}
	_, err = s.Put(t.Context(), []byte(`{}`), ports.CreateOnly())
	if !errors.Is(err, ports.ErrBucketNotFound) || errors.Is(err, ports.ErrNotFound) {
		t.Fatalf("create in a missing namespace: %v, want ErrBucketNotFound", err)
	}
	if s.String() != "k8s://no-such-namespace/lease" {
		t.Fatal(s.String())
	}
	for name, cfg := range map[string]k8s.Config{"no namespace": {Name: "x", REST: &rest.Config{}}, "no name": {Namespace: "x", REST: &rest.Config{}}} {
		if _, err := k8s.New(cfg); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

func newKeeper(t *testing.T, store ports.ObjectCAS, holder string, clk ports.Clock) *domain.LeaseKeeper {
	t.Helper()
	k, err := domain.NewLeaseKeeper(store, clk, domain.LeaseConfig{Holder: holder, TTL: 30 * time.Second, RenewInterval: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func getLease(t *testing.T, srv *testenv.KubeServer, ns, name string) *coordinationv1.Lease {
	t.Helper()
	l, err := srv.Admin(t).CoordinationV1().Leases(ns).Get(t.Context(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// TestInteropForeignLeases: Leases created by someone else, with some or
// all spec fields unset, read as unheld and are taken over; afterwards the
// spec shows our holder and epoch.
func TestInteropForeignLeases(t *testing.T) {
	srv := server(t)
	ns := srv.NewNamespace(t)
	admin := srv.Admin(t).CoordinationV1().Leases(ns)
	holder, secs := "someone", int32(15)
	now := metav1.NewMicroTime(time.Now())
	cases := map[string]coordinationv1.LeaseSpec{
		"empty spec":       {},
		"holder only":      {HolderIdentity: &holder},
		"no renew time":    {HolderIdentity: &holder, LeaseDurationSeconds: &secs},
		"no duration":      {HolderIdentity: &holder, RenewTime: &now},
		"empty holder set": {HolderIdentity: new(string), RenewTime: &now, LeaseDurationSeconds: &secs},
	}
	for name, spec := range cases {
		t.Run(name, func(t *testing.T) {
			lease := e2e.Name("foreign")
			if _, err := admin.Create(t.Context(), &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: lease}, Spec: spec}, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
			k := newKeeper(t, open(t, srv.REST(testenv.KubeAdminToken), ns, lease), "sf2loki-a", porttest.NewFakeClock(time.Now()))
			res := k.Step(t.Context())
			if res.Transition != domain.TransitionAcquired || res.Epoch != 1 {
				t.Fatalf("a Lease with %s: %+v, want it taken over at once at epoch 1", name, res)
			}
			l := getLease(t, srv, ns, lease)
			if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != "sf2loki-a" || l.Spec.LeaseTransitions == nil || *l.Spec.LeaseTransitions != 1 ||
				l.Spec.LeaseDurationSeconds == nil || *l.Spec.LeaseDurationSeconds != 30 || l.Spec.RenewTime == nil || l.Spec.AcquireTime == nil {
				t.Fatalf("spec after takeover: %+v", l.Spec)
			}
		})
	}
	t.Run("held by another client waits for ttl", func(t *testing.T) {
		lease := e2e.Name("foreign")
		spec := coordinationv1.LeaseSpec{HolderIdentity: &holder, RenewTime: &now, LeaseDurationSeconds: &secs}
		if _, err := admin.Create(t.Context(), &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: lease}, Spec: spec}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		clk := porttest.NewFakeClock(time.Now())
		k := newKeeper(t, open(t, srv.REST(testenv.KubeAdminToken), ns, lease), "sf2loki-a", clk)
		if res := k.Step(t.Context()); res.Role != domain.RoleStandby {
			t.Fatalf("a held Lease was taken at first sight: %+v", res)
		}
		clk.Advance(30 * time.Second)
		if res := k.Step(t.Context()); res.Transition != domain.TransitionAcquired {
			t.Fatalf("not taken over after ttl unchanged: %+v", res)
		}
	})
}

// TestSpecMirrorsTheLeaseAndOthersMetadataSurvives checks what kubectl shows
// and that labels and annotations set by others survive renewals.
func TestSpecMirrorsTheLeaseAndOthersMetadataSurvives(t *testing.T) {
	srv := server(t)
	ns := srv.NewNamespace(t)
	name := e2e.Name("mirror")
	clk := porttest.NewFakeClock(time.Now())
	k := newKeeper(t, open(t, srv.REST(testenv.KubeAdminToken), ns, name), "sf2loki-a", clk)
	if res := k.Step(t.Context()); res.Transition != domain.TransitionAcquired {
		t.Fatal(res)
	}
	admin := srv.Admin(t).CoordinationV1().Leases(ns)
	l := getLease(t, srv, ns, name)
	l.Labels = map[string]string{"team": "platform"}
	l.Annotations["example.com/owner"] = "ops"
	if _, err := admin.Update(t.Context(), l, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The keeper's cached version is now stale: this renewal loses, as any
	// foreign write must make it. Reacquire and renew again.
	clk.Advance(10 * time.Second)
	k.Step(t.Context())
	k.Step(t.Context())
	clk.Advance(10 * time.Second)
	if res := k.Step(t.Context()); res.Role != domain.RoleLeader || res.Err != nil {
		t.Fatalf("renewal: %+v", res)
	}
	l = getLease(t, srv, ns, name)
	if l.Labels["team"] != "platform" || l.Annotations["example.com/owner"] != "ops" {
		t.Fatalf("metadata set by others was lost: labels %v annotations %v", l.Labels, l.Annotations)
	}
	rec, err := domain.DecodeLeaseRecord([]byte(l.Annotations[k8s.AnnotationDocument]))
	if err != nil {
		t.Fatal(err)
	}
	if *l.Spec.HolderIdentity != rec.Holder || int64(*l.Spec.LeaseTransitions) != int64(rec.Epoch) || rec.Epoch != 2 ||
		!l.Spec.RenewTime.Time.Equal(rec.RenewedAt.Truncate(time.Microsecond)) {
		t.Fatalf("spec %+v does not mirror the document %+v", l.Spec, rec)
	}
}

func k8sStatus(code int, reason string) string {
	return fmt.Sprintf(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"injected","reason":%q,"code":%d}`, reason, code)
}

func harness(t *testing.T, srv *testenv.KubeServer) e2e.Harness {
	ns := srv.NewNamespace(t)
	return e2e.Harness{
		Endpoint: srv.URL,
		Open: func(t *testing.T, endpoint, name string, timeout time.Duration) ports.ObjectCAS {
			rc := srv.REST(testenv.KubeAdminToken)
			rc.Host = endpoint
			s, err := k8s.New(k8s.Config{Namespace: ns, Name: name, REST: rc, RequestTimeout: timeout})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		LostAck: faultproxy.Rule{Status: 500, Body: k8sStatus(500, "InternalError")},
		IsConditionalPut: func(r faultproxy.Request) bool {
			return strings.Contains(r.Path, "/leases") && (r.Method == http.MethodPatch || r.Method == http.MethodPost)
		},
		IsRead: func(r faultproxy.Request) bool { return r.Method == http.MethodGet },
	}
}

func TestFaultClassification(t *testing.T) {
	h := harness(t, server(t))
	e2e.RunFaults(t, h, []e2e.FaultCase{
		{Name: "LostAckAfterApply500", Write: true, Landed: true,
			Rule: faultproxy.Rule{Action: faultproxy.ApplyThenRespond, Status: 500, Body: k8sStatus(500, "InternalError")}},
		{Name: "LostAckConnectionReset", Write: true, Landed: true,
			Rule: faultproxy.Rule{Action: faultproxy.ApplyThenReset}},
		{Name: "ServiceUnavailable503", Write: true,
			Rule: faultproxy.Rule{Action: faultproxy.Respond, Status: 503, Body: k8sStatus(503, "ServiceUnavailable")}},
		{Name: "Throttled429RetryAfter", Write: true, RetryAfter: 2 * time.Second,
			// As the API server's priority and fairness answers: the hint in
			// the header and in the status details.
			Rule: faultproxy.Rule{Action: faultproxy.Respond, Status: 429,
				Body:   `{"kind":"Status","apiVersion":"v1","status":"Failure","message":"injected","reason":"TooManyRequests","details":{"retryAfterSeconds":2},"code":429}`,
				Header: http.Header{"Retry-After": {"2"}}}},
		{Name: "ResetMidBody",
			Rule: faultproxy.Rule{Action: faultproxy.ResetMidBody}},
		{Name: "RequestTimeout",
			Rule: faultproxy.Rule{Action: faultproxy.Delay, Delay: 3 * time.Second}},
	})
}

func TestCallerCancellationIsNotTransient(t *testing.T) {
	e2e.CallerCancellation(t, harness(t, server(t)))
}

func TestEndToEnd(t *testing.T) {
	e2e.Run(t, harness(t, server(t)))
}

// TestNewLoadsNoConfigurationUntilUsed: building the store (sf2loki check,
// outside any cluster) succeeds; the first request reports the missing
// configuration with what to do.
func TestNewLoadsNoConfigurationUntilUsed(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	s, err := k8s.New(k8s.Config{Namespace: "ns", Name: "lease"})
	if err != nil {
		t.Fatalf("New outside a cluster: %v", err)
	}
	if _, err := s.Get(t.Context()); err == nil || !strings.Contains(err.Error(), "set kubeconfig, or run in a pod with a service account") {
		t.Fatalf("Get outside a cluster: %v", err)
	}
}

func TestGetRefusesADocumentOverTheCap(t *testing.T) {
	srv := server(t)
	ns := srv.NewNamespace(t)
	rc := srv.REST(testenv.KubeAdminToken)
	big := []byte(strings.Repeat("x", 4096))
	v, err := open(t, rc, ns, "big").Put(t.Context(), big, ports.CreateOnly())
	if err != nil {
		t.Fatal(err)
	}
	capped, err := k8s.New(k8s.Config{Namespace: ns, Name: "big", REST: rc, MaxSize: 1024})
	if err != nil {
		t.Fatal(err)
	}
	obj, err := capped.Get(t.Context())
	if !errors.Is(err, ports.ErrTooLarge) || obj.Data != nil || obj.Version != v {
		t.Fatalf("Get of a 4096-byte document with a 1024-byte cap: %v (data %d bytes, version %q, want %q)", err, len(obj.Data), obj.Version, v)
	}
	if _, err := capped.Put(t.Context(), []byte(`{"holder":""}`), ports.IfVersion(obj.Version)); err != nil {
		t.Fatalf("replacing the oversized document: %v", err)
	}
	if _, err := capped.Put(t.Context(), big, ports.CreateOnly()); !errors.Is(err, ports.ErrTooLarge) {
		t.Fatalf("Put over the cap: %v", err)
	}
}
