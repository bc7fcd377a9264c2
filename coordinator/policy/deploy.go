package policy

import (
	"bytes"
	"context"

	"oce.dev/oce/coordinator/admission"
	"oce.dev/oce/coordinator/credref"
	"oce.dev/oce/coordinator/iam"
	"oce.dev/oce/coordinator/state"
)

// Deploy is the input of one deploy decision.
type Deploy struct {
	Principal iam.Principal
	Namespace state.Namespace
	Agent     state.Agent
	// ServicePrincipalID and HarnessAuth are the references the deploy
	// uses: the Agent's when the API admits a revision, the frozen
	// revision's when the engine reauthorizes its work.
	ServicePrincipalID string
	HarnessAuth        *state.HarnessAuth
	// Admit runs admission once the principal may deploy the Agent with
	// its references: it returns the revision to deploy and admission's
	// output, whose facts the final decision reads. Its error refuses the
	// deploy as it is.
	Admit func() (state.Revision, admission.Output, error)
	// Quota judges the admitted revision against the Namespace's quota
	// (WithinQuota): the API's admission of a deploy. The engine's
	// reauthorization of admitted work does not judge it again.
	Quota bool
}

// Deploy decides whether in.Principal may deploy in.Agent, in five steps,
// each a refusal of its own:
//
//  1. DeployAgent on the Agent by the built-in roles alone, before
//     admission can tell the caller anything;
//  2. UseServicePrincipal on the Agent's ServicePrincipal (gone:
//     ErrServicePrincipalGone);
//  3. the credential source its harnessAuth names, which must be a source
//     of the Agent's own Namespace (a *ReferenceRefused otherwise), and
//     UseCredentialSource on it;
//  4. admission (in.Admit);
//  5. DeployAgent on the Agent with the admitted facts as context
//     (DeployContext), the Restrictions included;
//  6. with in.Quota, the Namespace's quota (WithinQuota: *OverQuota).
//
// It returns the admitted revision.
func (d Decider) Deploy(ctx context.Context, in Deploy) (state.Revision, error) {
	agentRes := AgentResource(d.State, in.Namespace, in.Agent)
	req := iam.Request{Principal: in.Principal, Action: iam.DeployAgent, Resource: agentRes, RolesOnly: true}
	if err := d.Allow(ctx, req); err != nil {
		return state.Revision{}, err
	}
	if err := d.references(ctx, in.Principal, in.Namespace, in.Agent, in.ServicePrincipalID, in.HarnessAuth); err != nil {
		return state.Revision{}, err
	}
	rev, out, err := in.Admit()
	if err != nil {
		return state.Revision{}, err
	}
	req.RolesOnly, req.Context = false, DeployContext(rev, out)
	if err := d.Allow(ctx, req); err != nil {
		return state.Revision{}, err
	}
	if in.Quota {
		if err := d.WithinQuota(in.Namespace, in.Agent, rev); err != nil {
			return state.Revision{}, err
		}
	}
	return rev, nil
}

// DeployContext is the context of a DeployAgent decision: the facts of the
// admitted revision a Restriction may read (iam's schema declares them).
func DeployContext(rev state.Revision, out admission.Output) map[string]any {
	ctx := map[string]any{"harness": rev.Harness.ID, "mode": rev.Mode, "computeId": rev.ComputeID,
		"harnessAuthMethod": "", "credentialKind": "", "credentialSource": "",
		"customEndpoint": !bytes.Equal(out.Rendered, out.Document), "provider": out.Primary.Provider,
		"model": out.Primary.Model, "plugins": append([]string{}, rev.Plugins...)}
	if h := rev.HarnessAuth; h != nil {
		ctx["harnessAuthMethod"], ctx["credentialKind"], ctx["credentialSource"] = h.Method, h.CredentialKind, credref.Canonical(h.SourceRef)
	}
	return ctx
}
