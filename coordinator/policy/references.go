package policy

import (
	"context"
	"errors"
	"fmt"

	"oce.dev/oce/coordinator/credref"
	"oce.dev/oce/coordinator/iam"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
)

// The references a deploy uses are protected separately
// (docs/design/seed-002.md: the Agent's ServicePrincipal and its credential
// source each get their own decision). This file is the one place that
// decides whether an actor may use them.

// ErrServicePrincipalGone: the ServicePrincipal a deploy names no longer
// exists in the Agent's Namespace.
var ErrServicePrincipalGone = errors.New("policy: the service principal is gone")

// UseServicePrincipal decides whether p may run Agent agentName of ns as
// ServicePrincipal sp.
func (d Decider) UseServicePrincipal(ctx context.Context, p iam.Principal, ns state.Namespace, sp state.ServicePrincipal, agentName string) error {
	return d.Allow(ctx, iam.Request{Principal: p, Action: iam.UseServicePrincipal,
		Resource: iam.ServicePrincipalResource(ns.Name, sp, agentName)})
}

// UseCredentialSource decides whether p may use the credential source a
// harnessAuth binding of ns references: the reference must name a source
// of ns itself that exists (Source; a *ReferenceRefused otherwise), and p
// must be allowed UseCredentialSource on exactly that source. A binding
// that references none needs no decision.
func (d Decider) UseCredentialSource(ctx context.Context, p iam.Principal, ns state.Namespace, h *state.HarnessAuth) error {
	if h == nil || h.SourceRef == "" {
		return nil
	}
	src, err := d.Source(ns, h.SourceRef)
	if err != nil {
		return err
	}
	return d.Allow(ctx, iam.Request{Principal: p, Action: iam.UseCredentialSource,
		Resource: iam.CredentialSourceResource(ns.Name, src.Name, h.Method, h.CredentialKind)})
}

// ReferenceRefused is a credential reference that cannot be used in its
// Agent's Namespace: it is malformed (codes.CredentialReferenceInvalid),
// qualified with another Namespace (codes.CrossNamespaceReference) or names
// a source — or a key of one — the Namespace does not hold
// (codes.CredentialSourceNotFound). The refusal is decided before any
// permission is asked; Resource is the source as the reference names it.
type ReferenceRefused struct {
	Code     codes.Code
	Resource iam.Resource
	Reason   string
}

func (e *ReferenceRefused) Error() string {
	return fmt.Sprintf("%s: %s (%s)", e.Code, e.Resource, e.Reason)
}

// InNamespace parses a reference of an Agent of ns: a *ReferenceRefused
// when it is malformed or qualified with another Namespace. The API asks it
// when an Agent is created or updated; Source asks it at every deploy.
func InNamespace(ns state.Namespace, ref string) (credref.Ref, error) {
	r, err := credref.Parse(ref)
	if err != nil {
		return r, &ReferenceRefused{Code: codes.CredentialReferenceInvalid,
			Resource: iam.Scoped(iam.TypeCredentialSource, ns.Name, "", nil), Reason: err.Error()}
	}
	if !r.In(ns.Name) {
		return r, &ReferenceRefused{Code: codes.CrossNamespaceReference,
			Resource: iam.Scoped(iam.TypeCredentialSource, r.Namespace, r.Name, nil),
			Reason:   fmt.Sprintf("a reference resolves only in its Agent's Namespace %q", ns.Name)}
	}
	return r, nil
}

// Source is the credential source of ns a reference of one of its Agents
// names, or a *ReferenceRefused. It looks in ns only: a reference
// qualified with another Namespace is refused without reading it, so the
// refusal tells nothing of what that Namespace holds.
func (d Decider) Source(ns state.Namespace, ref string) (state.CredentialSource, error) {
	r, err := InNamespace(ns, ref)
	if err != nil {
		return state.CredentialSource{}, err
	}
	res := iam.Scoped(iam.TypeCredentialSource, ns.Name, r.Name, nil)
	src, ok := d.State.CredentialSourceByName(ns.ID, r.Name)
	if !ok {
		return src, &ReferenceRefused{Code: codes.CredentialSourceNotFound, Resource: res,
			Reason: fmt.Sprintf("namespace %q holds no credential source %q", ns.Name, r.Name)}
	}
	if _, err := r.KeyIn(src.Keys); err != nil {
		return src, &ReferenceRefused{Code: codes.CredentialSourceNotFound, Resource: res, Reason: err.Error()}
	}
	return src, nil
}

// references decides the uses a deploy of Agent a makes: its
// ServicePrincipal spID (which must still be of a's Namespace) and the
// credential source h references.
func (d Decider) references(ctx context.Context, p iam.Principal, ns state.Namespace, a state.Agent, spID string, h *state.HarnessAuth) error {
	if spID != "" {
		sp, ok := d.State.ServicePrincipal(spID)
		if !ok || sp.NamespaceID != ns.ID {
			return fmt.Errorf("%w: %q of agent %q", ErrServicePrincipalGone, spID, a.Name)
		}
		if err := d.UseServicePrincipal(ctx, p, ns, sp, a.Name); err != nil {
			return err
		}
	}
	return d.UseCredentialSource(ctx, p, ns, h)
}
