package policy

import (
	"oce.dev/oce/coordinator/iam"
	"oce.dev/oce/coordinator/state"
)

// View is what the decisions read of the replicated state; *state.Machine
// implements it.
type View interface {
	iam.Identities
	Namespace(id string) (state.Namespace, bool)
	Agent(id string) (state.Agent, bool)
	Configuration(id string) (state.Configuration, bool)
	ServicePrincipal(id string) (state.ServicePrincipal, bool)
	Revision(id string) (state.Revision, bool)
	// CredentialSourceByName is the credential source named name of a
	// Namespace (references resolve in their Agent's Namespace only).
	CredentialSourceByName(nsID, name string) (state.CredentialSource, bool)
	// Agents and LatestRevision are what a Namespace quota counts.
	Agents(nsID string) []state.Agent
	LatestRevision(agentID string) (state.Revision, bool)
	Installation() state.Installation
	// IdentityGeneration moves with every change of the identity data the
	// decisions depend on (users, service principals, tokens, role
	// bindings, Restrictions).
	IdentityGeneration() uint64
}

var _ View = (*state.Machine)(nil)
