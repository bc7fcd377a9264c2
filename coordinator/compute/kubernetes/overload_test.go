package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/shared/codes"
)

// TestTransientMarksOverload: the API server's own overload answers are
// marked compute.ErrOverloaded (the engine slows its admission on them);
// every other failure stays a plain transient one. All stay retryable with
// TRANSIENT_DEPENDENCY.
func TestTransientMarksOverload(t *testing.T) {
	gr := schema.GroupResource{Group: "apps", Resource: "deployments"}
	for _, tc := range []struct {
		name       string
		err        error
		overloaded bool
	}{
		{"429", apierrors.NewTooManyRequests("slow down", 1), true},
		{"504 did not complete", apierrors.NewTimeoutError("request did not complete within requested timeout - context deadline exceeded", 0), true},
		{"server timeout", apierrors.NewServerTimeout(gr, "create", 2), true},
		{"503", apierrors.NewServiceUnavailable("etcd unavailable"), true},
		{"wrapped 429", fmt.Errorf("create: %w", apierrors.NewTooManyRequests("slow down", 1)), true},
		{"not found", apierrors.NewNotFound(gr, "x"), false},
		{"conflict", apierrors.NewConflict(gr, "x", errors.New("changed")), false},
		{"500", apierrors.NewInternalError(errors.New("boom")), false},
		{"client deadline", context.DeadlineExceeded, false},
		{"connection refused", errors.New("dial tcp 127.0.0.1:6443: connect: connection refused"), false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := transient(tc.err)
			require.Equal(t, tc.overloaded, errors.Is(err, compute.ErrOverloaded))
			require.ErrorIs(t, err, tc.err, "the cause stays reachable")
			code, permanent := compute.ErrorCode(err, "")
			require.Equal(t, codes.TransientDependency, code)
			require.False(t, permanent)
		})
	}
}
