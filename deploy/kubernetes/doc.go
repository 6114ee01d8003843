// Package kubernetes holds Tandem's Kubernetes manifests (an Indexed Job of
// sharded replayers, its targets ConfigMap and volumes) and the test that
// decodes them strictly into the Kubernetes API types. See README.md.
package kubernetes
