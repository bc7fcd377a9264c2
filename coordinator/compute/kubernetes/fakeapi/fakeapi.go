// Package fakeapi is client-go's fake clientset made to behave like the API
// server where the Kubernetes driver depends on it, for render and ordering
// tests that run without a control plane.
package fakeapi

import (
	"fmt"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// NewClientset is a fake clientset that, like the API server, gives every
// ClusterIP Service a cluster IP at creation (the driver names a dedicated
// Gateway's node route by it).
func NewClientset() *fake.Clientset {
	cs := fake.NewClientset()
	var n atomic.Int32
	cs.PrependReactor("create", "services", func(a k8stesting.Action) (bool, runtime.Object, error) {
		svc := a.(k8stesting.CreateAction).GetObject().(*corev1.Service)
		if svc.Spec.ClusterIP == "" {
			svc.Spec.ClusterIP = fmt.Sprintf("10.96.0.%d", n.Add(1))
		}
		return false, nil, nil
	})
	return cs
}
