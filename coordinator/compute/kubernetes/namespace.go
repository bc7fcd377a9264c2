package kubernetes

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	apimeta "k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"

	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
)

// Pod Security Standards labels every managed namespace carries.
var pssLabels = map[string]string{
	"pod-security.kubernetes.io/enforce":         "restricted",
	"pod-security.kubernetes.io/enforce-version": "latest",
	"pod-security.kubernetes.io/audit":           "restricted",
	"pod-security.kubernetes.io/warn":            "restricted",
}

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

// physicalNamespace is the logical Namespace's data-plane (gateway=false)
// or Gateway namespace.
func physicalNamespace(namespaceID string, gateway bool) string {
	if gateway {
		return GatewayNamespace(namespaceID)
	}
	return DataPlaneNamespace(namespaceID)
}

// EnsureNamespace implements compute.Driver: the data-plane namespace and
// the distinct managed Gateway namespace, both PSS restricted and exactly
// owned, each with the driver's RoleBinding (Config.Subject), default-deny
// and allow-dns policies and, when the Namespace has a quota, its
// ResourceQuota and LimitRange.
func (d *Driver) EnsureNamespace(ctx context.Context, ns state.Namespace) error {
	if err := validNamespaceID(ns.ID); err != nil {
		return err
	}
	fp := quotaFingerprint(ns.Quota)
	if d.nsIsReady(ns.ID, fp) {
		// Ensured by this process already (with this quota); preparation
		// re-checks the exact owner of both namespaces and forgets this
		// when one is missing.
		return nil
	}
	ann := map[string]string{AnnotationNamespaceID: ns.ID}
	for _, gw := range []bool{false, true} {
		name := physicalNamespace(ns.ID, gw)
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
		pl := nsObjectLabels(ns.ID, gw)
		if err := d.bindNamespaceRole(ctx, name, pl, ann); err != nil {
			return err
		}
		err = d.untilGranted(ctx, func() error {
			if err := d.ensureNSPolicy(ctx, name, defaultDeny(name, pl, ann), ns.ID, gw); err != nil {
				return err
			}
			if err := d.ensureNSPolicy(ctx, name, allowDNS(name, pl, ann), ns.ID, gw); err != nil {
				return err
			}
			return d.ensureQuota(ctx, name, ns, gw, pl, ann)
		})
		if err != nil {
			return err
		}
	}
	d.setNSReady(ns.ID, fp)
	return nil
}

// nsObjectLabels are the labels of the objects a namespace's owner (not an
// Agent) holds there.
func nsObjectLabels(id string, gw bool) map[string]string {
	pl := map[string]string{LabelManagedBy: ManagedBy}
	if gw {
		pl[LabelGatewayNamespace] = id
	} else {
		pl[LabelNamespace] = id
	}
	return pl
}

// bindNamespaceRole binds the ClusterRole NamespaceRole to the driver's own
// identity inside a namespace it manages (nothing without Config.Subject).
// An existing binding of that name is left as it is: the namespace is
// exactly the driver's, and a RoleBinding's role cannot change.
func (d *Driver) bindNamespaceRole(ctx context.Context, ns string, l, a map[string]string) error {
	if d.cfg.Subject.Name == "" {
		return nil
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: NamespaceRoleBinding, Namespace: ns, Labels: l, Annotations: a},
		RoleRef:    rbacv1.RoleRef{APIGroup: groupRBAC, Kind: "ClusterRole", Name: NamespaceRole},
		Subjects:   []rbacv1.Subject{d.cfg.Subject},
	}
	if _, err := d.c.RbacV1().RoleBindings(ns).Create(ctx, rb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return transient(fmt.Errorf("bind %s in %s: %w", NamespaceRole, ns, err))
	}
	return nil
}

// untilGranted runs fn, again while it is refused Forbidden within
// Config.RBACWait: the API server's authorizer learns of a RoleBinding
// just created asynchronously (milliseconds, as a rule).
func (d *Driver) untilGranted(ctx context.Context, fn func() error) error {
	deadline := time.Now().Add(d.cfg.RBACWait)
	for {
		err := fn()
		if err == nil || !apierrors.IsForbidden(err) || time.Now().After(deadline) {
			return err
		}
		select {
		case <-ctx.Done():
			return transient(ctx.Err())
		case <-time.After(rbacRetryInterval):
		}
	}
}

// rbacRetryInterval spaces untilGranted's attempts.
const rbacRetryInterval = 50 * time.Millisecond

func (d *Driver) setNSReady(id, fingerprint string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.nsReady[id] = fingerprint
}

func (d *Driver) forgetNS(id string) {
	d.mu.Lock()
	delete(d.nsReady, id)
	d.mu.Unlock()
	d.dropCache(physicalNamespace(id, false))
	d.dropCache(physicalNamespace(id, true))
}

func (d *Driver) nsIsReady(id, fingerprint string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	fp, ok := d.nsReady[id]
	return ok && fp == fingerprint
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

func defaultDeny(ns string, l, a map[string]string) *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "default-deny", Namespace: ns, Labels: l, Annotations: a},
		Spec: networkingv1.NetworkPolicySpec{PodSelector: metav1.LabelSelector{},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress}},
	}
}

func allowDNS(ns string, l, a map[string]string) *networkingv1.NetworkPolicy {
	var ports []networkingv1.NetworkPolicyPort
	for _, port := range []int{53, 5353} {
		for _, proto := range []corev1.Protocol{corev1.ProtocolUDP, corev1.ProtocolTCP} {
			ports = append(ports, networkingv1.NetworkPolicyPort{Protocol: ptr(proto), Port: ptr(intstr.FromInt(port))})
		}
	}
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "allow-dns", Namespace: ns, Labels: l, Annotations: a},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{LabelNetworkProfile: NetworkProfileOrdinary}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress:      []networkingv1.NetworkPolicyEgressRule{{Ports: ports}},
		},
	}
}

// requireNamespace verifies the data-plane (gateway=false) or Gateway
// namespace exists and carries exactly the logical Namespace's owner before
// anything is placed there.
func (d *Driver) requireNamespace(ctx context.Context, namespaceID string, gateway bool) error {
	name, kind := physicalNamespace(namespaceID, gateway), "data-plane"
	if gateway {
		kind = "gateway"
	}
	cur, err := d.c.CoreV1().Namespaces().Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		d.forgetNS(namespaceID)
		return transient(fmt.Errorf("%s namespace %s is missing", kind, name))
	}
	if err != nil {
		return transient(err)
	}
	if !nsOwned(cur, namespaceID, gateway) {
		return compute.Permanent(codes.ForeignWorkload, fmt.Errorf("%w: %s", ErrForeignNS, name))
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
	d.forgetNS(ns.ID)
	for _, gw := range []bool{false, true} {
		name := physicalNamespace(ns.ID, gw)
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
