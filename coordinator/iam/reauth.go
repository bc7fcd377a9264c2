package iam

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"

	"oce.dev/oce/coordinator/admission"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
)

// Resources of state entities, as requests and audit records name them.

// AgentResource is an Agent with the attributes policies read.
func AgentResource(nsName string, a state.Agent, cfgName, spName string) Resource {
	attrs := map[string]any{"executionMode": a.ExecutionMode, "computeId": a.ComputeID, "configuration": cfgName,
		"servicePrincipal": spName, "harnessAuthMethod": "", "credentialKind": "", "credentialSource": ""}
	if h := a.HarnessAuth; h != nil {
		attrs["harnessAuthMethod"], attrs["credentialKind"], attrs["credentialSource"] = h.Method, h.CredentialKind, h.SourceRef
	}
	return Scoped(TypeAgent, nsName, a.Name, attrs)
}

// CredentialSourceResource is the credential source a harnessAuth binding
// references, or false when it references none.
func CredentialSourceResource(nsName string, h *state.HarnessAuth) (Resource, bool) {
	if h == nil || h.SourceRef == "" {
		return Resource{}, false
	}
	return Scoped(TypeCredentialSource, nsName, h.SourceRef, map[string]any{"method": h.Method, "kind": h.CredentialKind}), true
}

// ServicePrincipalResource is a service principal.
func ServicePrincipalResource(nsName string, sp state.ServicePrincipal, agentName string) Resource {
	return Scoped(TypeServicePrincipal, nsName, sp.Name, map[string]any{"agent": agentName})
}

// DeployContext is the context of a DeployAgent decision: the facts of the
// admitted revision a Restriction may read.
func DeployContext(rev state.Revision, out admission.Output) map[string]any {
	ctx := map[string]any{"harness": rev.Harness.ID, "mode": rev.Mode, "computeId": rev.ComputeID,
		"harnessAuthMethod": "", "credentialKind": "", "credentialSource": "",
		"customEndpoint": !bytes.Equal(out.Rendered, out.Document), "provider": out.Primary.Provider,
		"model": out.Primary.Model, "plugins": append([]string{}, rev.Plugins...)}
	if h := rev.HarnessAuth; h != nil {
		ctx["harnessAuthMethod"], ctx["credentialKind"], ctx["credentialSource"] = h.Method, h.CredentialKind, h.SourceRef
	}
	return ctx
}

// Reauthorizer rechecks claimed work before any compute effect (docs/design/seed-000.md:
// "Claim and reauthorize revision work"; docs/design/seed-002.md: "Reauthorize original
// actor"): the original actor still exists and may still do the work, the
// revision still belongs to its Agent, Namespace, Configuration and frozen
// ServicePrincipal, and the actor may still use the credential source and
// the ServicePrincipal. The activation engine calls it.
type Reauthorizer struct {
	Driver  Driver
	Machine *state.Machine
	// Auth is the compute driver's harnessAuth support, for revalidating the
	// frozen revision through admission (nil: admission's default).
	Auth admission.AuthSupport

	// passed remembers the decisions of work that passed, keyed by
	// everything they read: a later claim of the same work (the engine
	// claims a work once per pass) repeats the ownership checks but not the
	// decisions and the admission run while nothing they depend on changed.
	mu     sync.Mutex
	passed map[string]struct{}
}

// maxPassed bounds the remembered decisions.
const maxPassed = 4096

// decisionKey names what a work's decisions read: the work, its revision
// and actor, the identity data (any change of users, service principals,
// tokens, role bindings or Restrictions moves the generation), the Agent's
// attributes and the installation.
func decisionKey(w state.Work, a state.Agent, gen uint64, inst state.Installation) string {
	return fmt.Sprintf("%s\x00%s\x00%s\x00%s\x00%d\x00%d\x00%+v", w.ID, w.RevisionID, w.Actor,
		strings.Join(w.ActorGroups, ","), gen, a.UpdatedAt.UnixNano(), inst)
}

func (ra *Reauthorizer) seen(key string) bool {
	ra.mu.Lock()
	defer ra.mu.Unlock()
	_, ok := ra.passed[key]
	return ok
}

func (ra *Reauthorizer) remember(key string) {
	ra.mu.Lock()
	defer ra.mu.Unlock()
	if ra.passed == nil || len(ra.passed) >= maxPassed {
		ra.passed = map[string]struct{}{}
	}
	ra.passed[key] = struct{}{}
}

// ReauthError is a failed reauthorization: a closed work code and why.
type ReauthError struct {
	Code   codes.Code
	Detail string
}

func (e *ReauthError) Error() string { return string(e.Code) + ": " + e.Detail }

// WorkCode returns the closed code the work fails with.
func (e *ReauthError) WorkCode() codes.Code { return e.Code }

func denied(format string, a ...any) *ReauthError {
	return &ReauthError{Code: codes.ReauthorizationDenied, Detail: fmt.Sprintf(format, a...)}
}

func ownership(format string, a ...any) *ReauthError {
	return &ReauthError{Code: codes.InvalidRevisionOwner, Detail: fmt.Sprintf(format, a...)}
}

// PrincipalOf rebuilds the principal an actor string names from the current
// state: a deleted user or service principal no longer exists (an error).
// External users carry the groups frozen with their work.
func PrincipalOf(m *state.Machine, actor string, externalGroups []string) (Principal, error) {
	kind, nsName, name, err := ParseActor(actor)
	if err != nil {
		return Principal{}, err
	}
	switch kind {
	case KindBootstrap:
		return Principal{Kind: KindBootstrap, Name: BootstrapActor}, nil
	case KindServicePrincipal:
		ns, ok := m.NamespaceByName(nsName)
		if !ok {
			return Principal{}, fmt.Errorf("namespace %q of the actor no longer exists", nsName)
		}
		sp, ok := m.ServicePrincipalByName(ns.ID, name)
		if !ok {
			return Principal{}, fmt.Errorf("service principal %q no longer exists", actor)
		}
		return Principal{Kind: KindServicePrincipal, Name: sp.Name, ID: sp.ID, Namespace: ns.Name}, nil
	}
	if strings.HasPrefix(name, ExternalPrefix) {
		return Principal{Kind: KindUser, Name: name, Groups: externalGroups, External: true}, nil
	}
	u, ok := m.UserByName(name)
	if !ok {
		return Principal{}, fmt.Errorf("user %q no longer exists", name)
	}
	return Principal{Kind: KindUser, Name: u.Name, ID: u.ID, Groups: u.Groups}, nil
}

// Reauthorize checks claimed work w; a refusal is a *ReauthError. Work
// whose Agent is gone is left to the engine's own validation. Work the
// engine itself requested (no actor: a rollback under the Agent's policy, a
// finalization still owed by an active revision) has its ownership
// rechecked; there is no caller to reauthorize.
func (ra *Reauthorizer) Reauthorize(ctx context.Context, w state.Work) error {
	m := ra.Machine
	gen := m.IdentityGeneration() // before the reads: a change during them moves it
	a, ok := m.Agent(w.AgentID)
	if !ok {
		return nil
	}
	inst := m.Installation()
	key := decisionKey(w, a, gen, inst)
	cached := ra.seen(key)
	if err := ra.reauthorize(ctx, w, a, inst, cached); err != nil {
		return err
	}
	if !cached {
		ra.remember(key)
	}
	return nil
}

func (ra *Reauthorizer) reauthorize(ctx context.Context, w state.Work, a state.Agent, inst state.Installation, cached bool) error {
	m := ra.Machine
	ns, ok := m.Namespace(a.NamespaceID)
	if !ok || w.NamespaceID != a.NamespaceID {
		return ownership("the work's Agent is not in the work's Namespace")
	}
	system := w.Actor == SystemActor
	var p Principal
	if !system {
		var err error
		if p, err = PrincipalOf(m, w.Actor, w.ActorGroups); err != nil {
			return denied("original actor: %v", err)
		}
	}
	allow := func(act Action, res Resource, c map[string]any) error {
		if system || cached {
			return nil
		}
		d, err := ra.Driver.Authorize(ctx, Request{Principal: p, Action: act, Resource: res, Context: c})
		if err != nil {
			return denied("%s on %s: %v", act, res, err)
		}
		if !d.Allowed {
			return denied("%s may no longer %s %s (%s)", w.Actor, act, res, strings.Join(d.Reasons, ", "))
		}
		return nil
	}
	cfgName, spName := "", ""
	if c, ok := m.Configuration(a.ConfigurationID); ok {
		cfgName = c.Name
	}
	sp, hasSP := m.ServicePrincipal(a.ServicePrincipalID)
	if hasSP {
		spName = sp.Name
	}
	agentRes := AgentResource(ns.Name, a, cfgName, spName)
	switch w.Kind {
	case state.WorkStop:
		return allow(StopAgent, agentRes, nil)
	case state.WorkDelete:
		return allow(DeleteAgent, agentRes, nil)
	case state.WorkActivate:
	default:
		return nil
	}
	rev, ok := m.Revision(w.RevisionID)
	if !ok || rev.AgentID != a.ID || rev.NamespaceID != a.NamespaceID {
		return ownership("the revision does not belong to the work's Agent")
	}
	cfg, ok := m.Configuration(rev.ConfigurationID)
	if !ok || cfg.NamespaceID != a.NamespaceID {
		return ownership("the revision's Configuration no longer belongs to the Agent's Namespace")
	}
	if rev.ServicePrincipalID != a.ServicePrincipalID {
		return ownership("the revision froze service principal %q, the Agent has %q", rev.ServicePrincipalID, a.ServicePrincipalID)
	}
	if rev.ServicePrincipalID != "" {
		if !hasSP || sp.NamespaceID != a.NamespaceID || (sp.AgentID != "" && sp.AgentID != a.ID) {
			return ownership("the revision's service principal no longer belongs to the Agent")
		}
		if err := allow(UseServicePrincipal, ServicePrincipalResource(ns.Name, sp, a.Name), nil); err != nil {
			return err
		}
	}
	if res, ok := CredentialSourceResource(ns.Name, rev.HarnessAuth); ok {
		if err := allow(UseCredentialSource, res, nil); err != nil {
			return err
		}
	}
	if cached {
		return nil
	}
	out, err := ra.readmit(a, rev, inst)
	if err != nil {
		return &ReauthError{Code: codes.InvalidAdmittedRevision, Detail: "the frozen revision no longer admits: " + err.Error()}
	}
	if out.Harness != rev.Harness || out.Mode != rev.Mode {
		return &ReauthError{Code: codes.HarnessDescriptorMismatch, Detail: "the frozen document no longer resolves to the frozen harness"}
	}
	return allow(DeployAgent, agentRes, DeployContext(rev, out))
}

// readmit runs admission over the frozen revision, for the facts of its
// DeployAgent decision and to revalidate its frozen harness.
func (ra *Reauthorizer) readmit(a state.Agent, rev state.Revision, inst state.Installation) (admission.Output, error) {
	a.ExecutionMode = rev.Mode
	a.HarnessAuth = rev.HarnessAuth
	a.ConfigurationID = rev.ConfigurationID
	return admission.Admit(admission.Input{Agent: a, Installation: inst, Auth: ra.Auth,
		Configuration:   state.Configuration{ID: rev.ConfigurationID, NamespaceID: rev.NamespaceID, Document: rev.Document},
		HarnessVersions: map[string]string{rev.Harness.ID: rev.Harness.Version}})
}
