package iam

import (
	"fmt"
	"strings"

	"oce.dev/oce/coordinator/credref"
	"oce.dev/oce/coordinator/state"
)

// Resources of state entities, as requests and audit records name them.

// AgentResource is an Agent with the attributes policies read.
func AgentResource(nsName string, a state.Agent, cfgName, spName string) Resource {
	attrs := map[string]any{"executionMode": a.ExecutionMode, "computeId": a.ComputeID, "configuration": cfgName,
		"servicePrincipal": spName, "harnessAuthMethod": "", "credentialKind": "", "credentialSource": ""}
	if h := a.HarnessAuth; h != nil {
		attrs["harnessAuthMethod"], attrs["credentialKind"], attrs["credentialSource"] = h.Method, h.CredentialKind, credref.Canonical(h.SourceRef)
	}
	return Scoped(TypeAgent, nsName, a.Name, attrs)
}

// ServicePrincipalResource is a service principal.
func ServicePrincipalResource(nsName string, sp state.ServicePrincipal, agentName string) Resource {
	return Scoped(TypeServicePrincipal, nsName, sp.Name, map[string]any{"agent": agentName})
}

// CredentialSourceResource is credential source name of a Namespace; a
// deploy's use of it carries the binding's method and credential kind.
func CredentialSourceResource(nsName, name, method, kind string) Resource {
	return Scoped(TypeCredentialSource, nsName, name, map[string]any{"method": method, "kind": kind})
}

// Identities is what PrincipalOf reads of the state; *state.Machine
// implements it.
type Identities interface {
	NamespaceByName(name string) (state.Namespace, bool)
	ServicePrincipalByName(nsID, name string) (state.ServicePrincipal, bool)
	UserByName(name string) (state.User, bool)
}

// PrincipalOf rebuilds the principal an actor string names from the current
// state: a deleted user or service principal no longer exists (an error).
// External users carry the groups frozen with their work.
func PrincipalOf(m Identities, actor string, externalGroups []string) (Principal, error) {
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
