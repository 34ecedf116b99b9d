package deploy

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"github.com/sf2loki/sf2loki/internal/testenv"
)

// TestManifestsApplyToARealAPIServer applies deploy/kubernetes and the Helm
// chart's output (each lease type, and several orgs) to a real
// kube-apiserver with a server-side dry run: the API server validates every
// object against its schema (unknown fields are errors) without creating
// it. The namespaces themselves are created for real. The multi-org
// chart's ServiceAccount, Role and RoleBinding are then created for real,
// and that ServiceAccount creates, reads, patches and watches every Lease the
// configuration uses (each org's and the membership Lease) and is refused
// any other.
func TestManifestsApplyToARealAPIServer(t *testing.T) {
	testenv.Long(t, "the dry run against kube-apiserver")
	kube := testenv.StartKube(t)
	t.Cleanup(kube.Stop)
	rc := kube.REST(testenv.KubeAdminToken)
	dyn, err := dynamic.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	dc, err := discovery.NewDiscoveryClientForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for _, ns := range []string{"sf2loki", "sf2loki-helm", "sf2loki-orgs"} {
		_, err := kube.Admin(t).CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	dryRun := func(doc map[string]any) error {
		obj := &unstructured.Unstructured{Object: doc}
		if obj.GetKind() == "Namespace" {
			return nil // created above
		}
		gvk := obj.GroupVersionKind()
		m, err := mapper.RESTMapping(schema.GroupKind{Group: gvk.Group, Kind: gvk.Kind}, gvk.Version)
		if err != nil {
			return err
		}
		var ri dynamic.ResourceInterface = dyn.Resource(m.Resource)
		if m.Scope.Name() == meta.RESTScopeNameNamespace {
			ri = dyn.Resource(m.Resource).Namespace(obj.GetNamespace())
		}
		_, err = ri.Apply(ctx, obj.GetName(), obj, metav1.ApplyOptions{FieldManager: "sf2loki-deploy-test", DryRun: []string{metav1.DryRunAll}, Force: true})
		return err
	}
	apply := func(t *testing.T, source string, doc map[string]any) {
		t.Helper()
		if err := dryRun(doc); err != nil {
			t.Errorf("%s: %v %v: %v", source, doc["kind"], get(doc, "metadata", "name"), err)
		}
	}
	t.Run("an invalid object is refused", func(t *testing.T) {
		bad := docs(t, "deploy/kubernetes/pdb.yaml")[0]
		bad["spec"].(map[string]any)["maxUnavailible"] = 1
		if err := dryRun(bad); err == nil {
			t.Fatal("the API server accepted a PodDisruptionBudget with an unknown field: the dry run proves nothing")
		}
	})
	t.Run("deploy/kubernetes", func(t *testing.T) {
		dir := filepath.Join(testenv.RepoRoot(t), "deploy", "kubernetes")
		entries, err := os.ReadDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, e := range entries {
			if !strings.HasSuffix(e.Name(), ".yaml") {
				continue
			}
			for _, d := range docs(t, filepath.Join("deploy", "kubernetes", e.Name())) {
				apply(t, e.Name(), d)
				n++
			}
		}
		if n < 8 {
			t.Fatalf("applied only %d objects", n)
		}
		t.Logf("%d objects accepted", n)
	})
	for _, values := range []string{"k8s-lease-values.yaml", "s3-lease-values.yaml", "gcs-lease-values.yaml", "multi-org-values.yaml", "pod-values.yaml"} {
		t.Run("helm "+values, func(t *testing.T) {
			objs := helmTemplate(t, "sf2loki-helm", values)
			for _, d := range objs {
				apply(t, "helm "+values, d)
			}
			t.Logf("%d objects accepted", len(objs))
		})
	}
	t.Run("helm multi-org-values.yaml RBAC", func(t *testing.T) {
		const ns = "sf2loki-orgs"
		var sa string
		for _, d := range helmTemplate(t, ns, "multi-org-values.yaml") {
			obj := &unstructured.Unstructured{Object: d}
			switch obj.GetKind() {
			case "ServiceAccount", "Role", "RoleBinding":
			default:
				continue
			}
			if obj.GetKind() == "ServiceAccount" {
				sa = obj.GetName()
			}
			gvk := obj.GroupVersionKind()
			m, err := mapper.RESTMapping(schema.GroupKind{Group: gvk.Group, Kind: gvk.Kind}, gvk.Version)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := dyn.Resource(m.Resource).Namespace(ns).Apply(ctx, obj.GetName(), obj,
				metav1.ApplyOptions{FieldManager: "sf2loki-deploy-test", Force: true}); err != nil {
				t.Fatalf("apply %s %s: %v", obj.GetKind(), obj.GetName(), err)
			}
		}
		if sa == "" {
			t.Fatal("the chart rendered no ServiceAccount")
		}
		// The pods' identity, as the API server sees their token.
		src := kube.REST(testenv.KubeAdminToken)
		src.Impersonate = rest.ImpersonationConfig{UserName: "system:serviceaccount:" + ns + ":" + sa}
		as, err := kubernetes.NewForConfig(src)
		if err != nil {
			t.Fatal(err)
		}
		leases := as.CoordinationV1().Leases(ns)
		// The authorizer learns of the new binding through its informers.
		for {
			_, err := leases.Get(ctx, multiOrgLeases[0], metav1.GetOptions{})
			if apierrors.IsNotFound(err) {
				break
			}
			if ctx.Err() != nil {
				t.Fatalf("the chart's Role did not take effect: %v", err)
			}
			time.Sleep(20 * time.Millisecond)
		}
		for _, name := range multiOrgLeases {
			holder := "sf2loki-0"
			if _, err := leases.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: name},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder}}, metav1.CreateOptions{}); err != nil {
				t.Errorf("create Lease %s as %s: %v", name, sa, err)
				continue
			}
			l, err := leases.Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Errorf("get Lease %s as %s: %v", name, sa, err)
				continue
			}
			// sf2loki renews with a JSON merge patch carrying the resourceVersion.
			patch := fmt.Sprintf(`{"metadata":{"resourceVersion":%q},"spec":{"holderIdentity":"sf2loki-1"}}`, l.ResourceVersion)
			if _, err := leases.Patch(ctx, name, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
				t.Errorf("patch Lease %s as %s: %v", name, sa, err)
			}
			// A standby watches its Lease by name (RBAC matches the field
			// selector against resourceNames).
			w, err := leases.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + name, ResourceVersion: l.ResourceVersion})
			if err != nil {
				t.Errorf("watch Lease %s as %s: %v", name, sa, err)
				continue
			}
			w.Stop()
		}
		// Another Lease in the namespace stays out of reach.
		other := "sf2loki-leader-not-an-org"
		if _, err := kube.Admin(t).CoordinationV1().Leases(ns).Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: other}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := leases.Get(ctx, other, metav1.GetOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("get Lease %s as %s: %v, want forbidden", other, sa, err)
		}
		if _, err := leases.Patch(ctx, other, types.MergePatchType, []byte(`{"spec":{"holderIdentity":"x"}}`), metav1.PatchOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("patch Lease %s as %s: %v, want forbidden", other, sa, err)
		}
		if w, err := leases.Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + other}); !apierrors.IsForbidden(err) {
			if err == nil {
				w.Stop()
			}
			t.Errorf("watch Lease %s as %s: %v, want forbidden", other, sa, err)
		}
		if !t.Failed() {
			t.Logf("%s creates, reads, patches and watches %d Leases: %v", sa, len(multiOrgLeases), multiOrgLeases)
		}
	})
}
