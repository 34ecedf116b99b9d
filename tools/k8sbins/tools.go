//go:build tools

// Package k8sbins pins the Kubernetes API server that the k8s adapter's
// tests run against. `make tools` builds it into .bin/; it is not part of
// sf2loki.
package k8sbins

import _ "k8s.io/kubernetes/cmd/kube-apiserver"
