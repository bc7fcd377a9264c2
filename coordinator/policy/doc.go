// Package policy is the one home of the decisions on the exact resources of
// the replicated state: whether a principal may deploy an Agent with its
// references (its ServicePrincipal, the credential source its harnessAuth
// names) and the admitted facts, use a ServicePrincipal or a credential
// source, stop or delete an Agent (docs/design/seed-002.md: "OCC authorizes
// deployment of the exact Agent and enforces applicable Restrictions through
// the authoritative IAMDriver").
//
// The API decides a request with it (coordinator/api) and the activation
// engine reauthorizes claimed work with it (Reauthorizer), so both ask the
// same questions, in the same order, over the same resources: a change to a
// decision — say, which credential sources an actor may use — is made here
// once. It reads the state through View, never writes it, and speaks no
// HTTP: a refusal is a *Denied (or an *Undecided when the IAM driver could
// not answer) that each caller turns into its own answer.
package policy
