package kubernetes

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/shared/codes"
)

// getCreator is the part of a typed client-go resource client ensure uses.
type getCreator[T metav1.Object] interface {
	Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error)
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
}

// deleter is the part of a typed client the exact-owner deletes use.
type deleter interface {
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// ensure creates obj unless an object of its name exists; an existing one
// must carry exactly obj's owner, or the call fails closed with
// FOREIGN_WORKLOAD. It returns the stored object.
func ensure[T metav1.Object](ctx context.Context, c getCreator[T], obj T, o owner) (T, error) {
	cur, err := c.Get(ctx, obj.GetName(), metav1.GetOptions{})
	if err == nil {
		if !o.owns(cur.GetLabels(), cur.GetAnnotations(), false) {
			return cur, foreign(obj.GetNamespace(), obj.GetName())
		}
		return cur, nil
	}
	if !apierrors.IsNotFound(err) {
		return cur, transient(err)
	}
	created, err := c.Create(ctx, obj, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return ensure(ctx, c, obj, o) // lost a race: verify the winner's owner
	}
	if err != nil {
		return created, transient(err)
	}
	return created, nil
}

// deleteExact deletes name when obj (already fetched) is exactly owned,
// with a UID (and, when rv is set, resourceVersion) precondition. A missing
// object is success; a foreign one is never touched.
func deleteExact(ctx context.Context, c deleter, name string, uid types.UID, rv string) error {
	pre := &metav1.Preconditions{UID: &uid}
	if rv != "" {
		pre.ResourceVersion = &rv
	}
	err := c.Delete(ctx, name, metav1.DeleteOptions{Preconditions: pre, PropagationPolicy: ptr(metav1.DeletePropagationBackground)})
	if err == nil || apierrors.IsNotFound(err) {
		return nil
	}
	return transient(err)
}

func foreign(ns, name string) error {
	return compute.Permanent(codes.ForeignWorkload, fmt.Errorf("%w: %s/%s", ErrForeignWorkload, ns, name))
}

func transient(err error) error { return compute.Transient(codes.TransientDependency, err) }

func randomToken() []byte {
	b := make([]byte, 32)
	_, _ = rand.Read(b)
	return []byte(hex.EncodeToString(b))
}
