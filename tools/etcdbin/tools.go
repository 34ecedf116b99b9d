//go:build tools

// Package etcdbin pins the etcd server that the Kubernetes API server in the
// k8s adapter's tests stores its data in. `make tools` builds it into .bin/;
// it is not part of sf2loki.
package etcdbin

import _ "go.etcd.io/etcd/server/v3"
