package kubernetes

import (
	"context"
	"fmt"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
)

// Names of the Namespace-owned quota objects in each managed namespace.
const (
	QuotaName      = "oce-quota"
	LimitRangeName = "oce-limits"
)

// quotaFingerprint identifies what EnsureNamespace rendered for a quota.
func quotaFingerprint(q *state.NamespaceQuota) string {
	if q.Empty() {
		return ""
	}
	return fmt.Sprintf("%d/%s/%s/%s", q.Agents, q.CPU, q.Memory, q.Storage)
}

// quotaObjects renders an oce Namespace's quota into one of its Kubernetes
// namespaces: a ResourceQuota with the same bounds (the claims of an Agent
// are at most one per namespace, so the claim count bounds the Agents; CPU
// and memory bound the containers' limits; storage the claims' requests)
// — a backstop behind deploy admission, which judges the Namespace as a
// whole — and a LimitRange whose defaults give any container without
// limits some, so a limits quota never refuses a Pod for lacking them.
func quotaObjects(ns string, q *state.NamespaceQuota, l, a map[string]string) (*corev1.ResourceQuota, *corev1.LimitRange, error) {
	hard := corev1.ResourceList{}
	if q.Agents > 0 {
		hard[corev1.ResourcePersistentVolumeClaims] = *resource.NewQuantity(q.Agents, resource.DecimalSI)
	}
	for name, v := range map[corev1.ResourceName]string{corev1.ResourceLimitsCPU: q.CPU, corev1.ResourceLimitsMemory: q.Memory,
		corev1.ResourceRequestsStorage: q.Storage} {
		if v == "" {
			continue
		}
		qty, err := resource.ParseQuantity(v)
		if err != nil {
			return nil, nil, compute.Permanent(codes.InvalidTarget, fmt.Errorf("%w: quota %s %q: %w", ErrInvalidTarget, name, v, err))
		}
		hard[name] = qty
	}
	rq := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: QuotaName, Namespace: ns, Labels: l, Annotations: a},
		Spec: corev1.ResourceQuotaSpec{Hard: hard}}
	lr := &corev1.LimitRange{ObjectMeta: metav1.ObjectMeta{Name: LimitRangeName, Namespace: ns, Labels: l, Annotations: a},
		Spec: corev1.LimitRangeSpec{Limits: []corev1.LimitRangeItem{{Type: corev1.LimitTypeContainer,
			Default: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(limitRangeDefaultCPU),
				corev1.ResourceMemory: resource.MustParse(limitRangeDefaultMemory)},
			DefaultRequest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(initCPU),
				corev1.ResourceMemory: resource.MustParse(initMemory)}}}}}
	return rq, lr, nil
}

// The LimitRange's defaults for a container that names no limits (the
// driver's own containers all do).
const (
	limitRangeDefaultCPU    = "500m"
	limitRangeDefaultMemory = "512Mi"
)

// ensureQuota makes the namespace's ResourceQuota and LimitRange match the
// oce Namespace's quota: created or updated when it has one, deleted (by
// UID, exact owner only) when it has none.
func (d *Driver) ensureQuota(ctx context.Context, name string, ns state.Namespace, gw bool, l, a map[string]string) error {
	rqs, lrs := d.c.CoreV1().ResourceQuotas(name), d.c.CoreV1().LimitRanges(name)
	if ns.Quota.Empty() {
		if err := deleteNSObject(ctx, rqs, QuotaName, ns.ID, gw); err != nil {
			return err
		}
		return deleteNSObject(ctx, lrs, LimitRangeName, ns.ID, gw)
	}
	rq, lr, err := quotaObjects(name, ns.Quota, l, a)
	if err != nil {
		return err
	}
	if err := applyNSObject(ctx, rqs, rq, ns.ID, gw, func(cur, want *corev1.ResourceQuota) bool {
		if reflect.DeepEqual(cur.Spec, want.Spec) {
			return false
		}
		cur.Spec = want.Spec
		return true
	}); err != nil {
		return err
	}
	// The LimitRange's content is the same for every quota: created once.
	return applyNSObject(ctx, lrs, lr, ns.ID, gw, func(_, _ *corev1.LimitRange) bool { return false })
}

// nsObjectClient is the part of a typed client the Namespace-owned objects use.
type nsObjectClient[T metav1.Object] interface {
	getCreator[T]
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
	Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error
}

// applyNSObject creates want, or updates the existing object of its name
// (exactly the Namespace's, else FOREIGN_WORKLOAD) when merge changed it.
func applyNSObject[T metav1.Object](ctx context.Context, c nsObjectClient[T], want T, id string, gw bool, merge func(cur, want T) bool) error {
	cur, err := c.Get(ctx, want.GetName(), metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		if _, err := c.Create(ctx, want, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return transient(err)
		}
		return nil
	}
	if err != nil {
		return transient(err)
	}
	if !nsPolicyOwned(cur.GetLabels(), cur.GetAnnotations(), id, gw) {
		return foreign(want.GetNamespace(), want.GetName())
	}
	if merge(cur, want) {
		if _, err := c.Update(ctx, cur, metav1.UpdateOptions{}); err != nil {
			return transient(err)
		}
	}
	return nil
}

// deleteNSObject deletes the Namespace-owned object name when it exists and
// is exactly the Namespace's (UID precondition).
func deleteNSObject[T metav1.Object](ctx context.Context, c nsObjectClient[T], name, id string, gw bool) error {
	cur, err := c.Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return transient(err)
	}
	if !nsPolicyOwned(cur.GetLabels(), cur.GetAnnotations(), id, gw) {
		return nil // not ours: leave it
	}
	uid := cur.GetUID()
	if err := c.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil && !apierrors.IsNotFound(err) {
		return transient(err)
	}
	return nil
}
