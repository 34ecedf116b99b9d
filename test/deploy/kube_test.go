package deploy

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/restmapper"

	"github.com/sf2loki/sf2loki/internal/testenv"
)

// TestManifestsApplyToARealAPIServer applies deploy/kubernetes and the Helm
// chart's output (each lease type) to a real kube-apiserver with a
// server-side dry run: the API server validates every object against its
// schema (unknown fields are errors) without creating it. The namespaces
// themselves are created for real.
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
	for _, ns := range []string{"sf2loki", "sf2loki-helm"} {
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
	for _, values := range []string{"k8s-lease-values.yaml", "s3-lease-values.yaml", "gcs-lease-values.yaml"} {
		t.Run("helm "+values, func(t *testing.T) {
			objs := helmTemplate(t, "sf2loki-helm", values)
			for _, d := range objs {
				apply(t, "helm "+values, d)
			}
			t.Logf("%d objects accepted", len(objs))
		})
	}
}
