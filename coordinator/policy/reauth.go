package policy

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"oce.dev/oce/coordinator/admission"
	"oce.dev/oce/coordinator/iam"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/shared/codes"
)

// Reauthorizer rechecks claimed work before any compute effect
// (docs/design/seed-000.md: "Claim and reauthorize revision work";
// docs/design/seed-002.md: "Reauthorize original actor"): the original actor
// still exists and may still do the work, the revision still belongs to its
// Agent, Namespace, Configuration and frozen ServicePrincipal, and the actor
// may still deploy it — the API's deploy decision (Decider.Deploy) over the
// frozen revision. The activation engine calls it.
type Reauthorizer struct {
	Driver iam.Driver
	State  View
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

// refusal is the ReauthError of a refused decision of actor's work.
func refusal(actor string, err error) error {
	var d *Denied
	var u *Undecided
	var ref *ReferenceRefused
	switch {
	case errors.As(err, &ref):
		code := ref.Code
		if code == codes.CredentialReferenceInvalid {
			code = codes.InvalidAdmittedRevision
		}
		return &ReauthError{Code: code, Detail: fmt.Sprintf("the revision's credential reference: %s %s (%s)", ref.Code, ref.Resource, ref.Reason)}
	case errors.As(err, &d):
		return denied("%s may no longer %s %s (%s)", actor, d.Action, d.Resource, strings.Join(d.Reasons, ", "))
	case errors.As(err, &u):
		return denied("%s on %s: %v", u.Action, u.Resource, u.Err)
	case errors.Is(err, ErrServicePrincipalGone):
		return ownership("the revision's service principal no longer belongs to the Agent")
	}
	return err
}

// Reauthorize checks claimed work w; a refusal is a *ReauthError. Work
// whose Agent is gone is left to the engine's own validation. Work the
// engine itself requested (no actor: a rollback under the Agent's policy, a
// finalization still owed by an active revision) has its ownership
// rechecked and its revision readmitted; there is no caller to reauthorize.
func (ra *Reauthorizer) Reauthorize(ctx context.Context, w state.Work) error {
	v := ra.State
	gen := v.IdentityGeneration() // before the reads: a change during them moves it
	a, ok := v.Agent(w.AgentID)
	if !ok {
		return nil
	}
	inst := v.Installation()
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
	v := ra.State
	ns, ok := v.Namespace(a.NamespaceID)
	if !ok || w.NamespaceID != a.NamespaceID {
		return ownership("the work's Agent is not in the work's Namespace")
	}
	system := w.Actor == iam.SystemActor
	var p iam.Principal
	if !system {
		var err error
		if p, err = iam.PrincipalOf(v, w.Actor, w.ActorGroups); err != nil {
			return denied("original actor: %v", err)
		}
	}
	d := Decider{IAM: ra.Driver, State: v}
	switch w.Kind {
	case state.WorkStop, state.WorkDelete:
		if system || cached {
			return nil
		}
		act := iam.StopAgent
		if w.Kind == state.WorkDelete {
			act = iam.DeleteAgent
		}
		return refusal(w.Actor, d.OnAgent(ctx, p, act, ns, a))
	case state.WorkActivate:
	default:
		return nil
	}
	rev, err := ra.owned(a, w.RevisionID)
	if err != nil || cached {
		return err
	}
	admit := func() (state.Revision, admission.Output, error) {
		out, err := ra.readmit(a, rev, inst)
		if err != nil {
			return rev, out, &ReauthError{Code: codes.InvalidAdmittedRevision,
				Detail: "the frozen revision no longer admits: " + err.Error()}
		}
		if out.Harness != rev.Harness || out.Mode != rev.Mode {
			return rev, out, &ReauthError{Code: codes.HarnessDescriptorMismatch,
				Detail: "the frozen document no longer resolves to the frozen harness"}
		}
		return rev, out, nil
	}
	if system {
		_, _, err := admit()
		return err
	}
	_, err = d.Deploy(ctx, Deploy{Principal: p, Namespace: ns, Agent: a,
		ServicePrincipalID: rev.ServicePrincipalID, HarnessAuth: rev.HarnessAuth, Admit: admit})
	return refusal(w.Actor, err)
}

// owned returns activate work's revision once it still belongs to Agent a:
// its Namespace, its Configuration's Namespace and its frozen
// ServicePrincipal, which must still be the Agent's.
func (ra *Reauthorizer) owned(a state.Agent, revID string) (state.Revision, error) {
	v := ra.State
	rev, ok := v.Revision(revID)
	if !ok || rev.AgentID != a.ID || rev.NamespaceID != a.NamespaceID {
		return rev, ownership("the revision does not belong to the work's Agent")
	}
	cfg, ok := v.Configuration(rev.ConfigurationID)
	if !ok || cfg.NamespaceID != a.NamespaceID {
		return rev, ownership("the revision's Configuration no longer belongs to the Agent's Namespace")
	}
	if rev.ServicePrincipalID != a.ServicePrincipalID {
		return rev, ownership("the revision froze service principal %q, the Agent has %q", rev.ServicePrincipalID, a.ServicePrincipalID)
	}
	if rev.ServicePrincipalID != "" {
		sp, ok := v.ServicePrincipal(rev.ServicePrincipalID)
		if !ok || sp.NamespaceID != a.NamespaceID || (sp.AgentID != "" && sp.AgentID != a.ID) {
			return rev, ownership("the revision's service principal no longer belongs to the Agent")
		}
	}
	return rev, nil
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
