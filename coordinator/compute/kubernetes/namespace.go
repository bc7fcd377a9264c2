package kubernetes

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
)

func nsOwnerLabels(id string, gateway bool) map[string]string {
	l := merge(pssLabels, map[string]string{LabelManagedBy: ManagedBy})
	if gateway {
		// The Gateway namespace belongs to the control plane: it deliberately
		// has no openclaw.dev/namespace label (docs/design/reference.md#s8-1).
		l[LabelGatewayNamespace] = id
	} else {
		l[LabelNamespace] = id
	}
	return l
}

// nsOwned reports whether a Namespace object is exactly id's data-plane
// (gateway=false) or Gateway namespace.
func nsOwned(ns *corev1.Namespace, id string, gateway bool) bool {
	l, a := ns.Labels, ns.Annotations
	if l[LabelManagedBy] != ManagedBy || a[AnnotationNamespaceID] != id {
		return false
	}
	if gateway {
		_, hasNS := l[LabelNamespace]
		return l[LabelGatewayNamespace] == id && !hasNS
	}
	_, hasGW := l[LabelGatewayNamespace]
	return l[LabelNamespace] == id && !hasGW
}

func validNamespaceID(id string) error {
	if id == "" || len(validation.IsValidLabelValue(id)) > 0 {
		return compute.Permanent(codes.InvalidTarget, fmt.Errorf("%w: namespace id %q", ErrInvalidTarget, id))
	}
	return nil
}

// EnsureNamespace implements compute.Driver: the data-plane namespace and
// the distinct managed Gateway namespace, both PSS restricted and exactly
// owned, each with default-deny and allow-dns policies.
func (d *Driver) EnsureNamespace(ctx context.Context, ns state.Namespace) error {
	if err := validNamespaceID(ns.ID); err != nil {
		return err
	}
	if d.nsIsReady(ns.ID) {
		// Ensured by this process already; preparation re-checks the exact
		// owner of both namespaces and forgets this when one is missing.
		return nil
	}
	ann := map[string]string{AnnotationNamespaceID: ns.ID}
	for _, gw := range []bool{false, true} {
		name := DataPlaneNamespace(ns.ID)
		if gw {
			name = GatewayNamespace(ns.ID)
		}
		want := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: nsOwnerLabels(ns.ID, gw), Annotations: ann}}
		cur, err := d.c.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err):
			if _, err := d.c.CoreV1().Namespaces().Create(ctx, want, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return transient(err)
			}
		case err != nil:
			return transient(err)
		case !nsOwned(cur, ns.ID, gw):
			return compute.Permanent(codes.ForeignWorkload, fmt.Errorf("%w: %s", ErrForeignNS, name))
		case cur.DeletionTimestamp != nil:
			return transient(fmt.Errorf("namespace %s is terminating", name))
		}
		pl := map[string]string{LabelManagedBy: ManagedBy}
		if gw {
			pl[LabelGatewayNamespace] = ns.ID
		} else {
			pl[LabelNamespace] = ns.ID
		}
		if err := d.ensureNSPolicy(ctx, name, defaultDeny(name, pl, ann), ns.ID, gw); err != nil {
			return err
		}
		if err := d.ensureNSPolicy(ctx, name, allowDNS(name, pl, ann), ns.ID, gw); err != nil {
			return err
		}
	}
	d.setNSReady(ns.ID, true)
	return nil
}

// requireGatewayNamespace verifies the Gateway namespace exists and carries
// exactly the logical Namespace's owner before anything is placed there.
func (d *Driver) requireGatewayNamespace(ctx context.Context, namespaceID string) error {
	name := GatewayNamespace(namespaceID)
	cur, err := d.c.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		d.setNSReady(namespaceID, false)
		return transient(fmt.Errorf("gateway namespace %s is missing", name))
	}
	if err != nil {
		return transient(err)
	}
	if !nsOwned(cur, namespaceID, true) {
		return compute.Permanent(codes.ForeignWorkload, fmt.Errorf("%w: %s", ErrForeignNS, name))
	}
	return nil
}

// requireDataPlaneNamespace is the same check for the data-plane namespace.
func (d *Driver) requireDataPlaneNamespace(ctx context.Context, namespaceID string) error {
	name := DataPlaneNamespace(namespaceID)
	cur, err := d.c.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		d.setNSReady(namespaceID, false)
		return transient(fmt.Errorf("data-plane namespace %s is missing", name))
	}
	if err != nil {
		return transient(err)
	}
	if !nsOwned(cur, namespaceID, false) {
		return compute.Permanent(codes.ForeignWorkload, fmt.Errorf("%w: %s", ErrForeignNS, name))
	}
	return nil
}

func nsPolicyOwned(l, a map[string]string, id string, gw bool) bool {
	if l[LabelManagedBy] != ManagedBy || a[AnnotationNamespaceID] != id || l[LabelAgent] != "" {
		return false
	}
	if gw {
		return l[LabelGatewayNamespace] == id
	}
	return l[LabelNamespace] == id
}

func (d *Driver) ensureNSPolicy(ctx context.Context, ns string, np *networkingv1.NetworkPolicy, id string, gw bool) error {
	c := d.c.NetworkingV1().NetworkPolicies(ns)
	cur, err := c.Get(ctx, np.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		if _, err := c.Create(ctx, np, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
			return transient(err)
		}
		return nil
	case err != nil:
		return transient(err)
	case !nsPolicyOwned(cur.Labels, cur.Annotations, id, gw):
		return foreign(ns, np.Name)
	}
	return nil
}

// DeleteNamespace implements compute.Driver: once neither physical
// namespace holds any Agent-owned object, it deletes the two namespaces it
// exactly owns (UID precondition). It does not wait for finalization.
func (d *Driver) DeleteNamespace(ctx context.Context, ns state.Namespace) error {
	if err := validNamespaceID(ns.ID); err != nil {
		return err
	}
	d.setNSReady(ns.ID, false)
	for _, gw := range []bool{false, true} {
		name := DataPlaneNamespace(ns.ID)
		if gw {
			name = GatewayNamespace(ns.ID)
		}
		cur, err := d.c.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return transient(err)
		}
		if !nsOwned(cur, ns.ID, gw) {
			continue // never ours: leave it
		}
		for _, k := range d.kinds(name, true) {
			if k.name == "networkpolicies" {
				continue
			}
			n, err := liveCount(ctx, k)
			if err != nil {
				return transient(err)
			}
			if n > 0 {
				return compute.Transient(codes.NamespaceNotEmpty, fmt.Errorf("%w: %s holds Agent %s", ErrNotEmpty, name, k.name))
			}
		}
		pods, err := d.c.CoreV1().Pods(name).List(ctx, metav1.ListOptions{LabelSelector: LabelAgent})
		if err != nil {
			return transient(err)
		}
		if len(pods.Items) > 0 {
			return compute.Transient(codes.NamespaceNotEmpty, fmt.Errorf("%w: %s holds Agent pods", ErrNotEmpty, name))
		}
		if cur.DeletionTimestamp != nil {
			continue
		}
		if err := deleteExact(ctx, d.c.CoreV1().Namespaces(), name, cur.UID, ""); err != nil {
			return err
		}
	}
	return nil
}

// liveCount counts the non-terminating Agent-labelled objects of one kind.
func liveCount(ctx context.Context, k kindOps) (int, error) {
	obj, err := k.list(ctx, metav1.ListOptions{LabelSelector: LabelAgent})
	if err != nil {
		return 0, err
	}
	items, err := apimeta.ExtractList(obj)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, it := range items {
		m, err := apimeta.Accessor(it)
		if err != nil {
			return 0, err
		}
		if m.GetDeletionTimestamp() == nil {
			n++
		}
	}
	return n, nil
}
