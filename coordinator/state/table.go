package state

import (
	"context"
	"fmt"
)

// The command table: the one place each command of the log is declared —
// its name in the log (Command.Type), its payload type, its result type and
// the apply function that produces that result. The compiler checks the
// three against each other; callers propose through Propose and get the
// result's own type back, so no caller asserts on what Apply returned.
var (
	CmdCreateNamespace     = def[CreateNamespace, Namespace]("CreateNamespace", applyCreateNamespace)
	CmdDeleteNamespace     = def[DeleteNamespace, Namespace]("DeleteNamespace", applyDeleteNamespace)
	CmdSetNamespaceQuota   = def[SetNamespaceQuota, Namespace]("SetNamespaceQuota", applySetNamespaceQuota)
	CmdPutConfiguration    = def[PutConfiguration, Configuration]("PutConfiguration", applyPutConfiguration)
	CmdDeleteConfiguration = def[DeleteConfiguration, Configuration]("DeleteConfiguration", applyDeleteConfiguration)
	CmdCreateAgent         = def[CreateAgent, Agent]("CreateAgent", applyCreateAgent)
	CmdUpdateAgent         = def[UpdateAgent, Agent]("UpdateAgent", applyUpdateAgent)
	CmdAdmitRevision       = def[AdmitRevision, Admitted]("AdmitRevision", applyAdmitRevision)
	CmdRequestStop         = def[RequestStop, Work]("RequestStop", applyRequestStop)
	CmdRequestDelete       = def[RequestDelete, Work]("RequestDelete", applyRequestDelete)
	CmdSetInstallation     = def[SetInstallation, Installation]("SetInstallation", applySetInstallation)

	// Labels (labels.go).
	CmdSetNamespaceLabels     = def[SetLabels, Namespace]("SetNamespaceLabels", applySetNamespaceLabels)
	CmdSetConfigurationLabels = def[SetLabels, Configuration]("SetConfigurationLabels", applySetConfigurationLabels)
	CmdSetAgentLabels         = def[SetLabels, Agent]("SetAgentLabels", applySetAgentLabels)
	CmdSetRoleBindingLabels   = def[SetLabels, RoleBinding]("SetRoleBindingLabels", applySetRoleBindingLabels)

	// Work and its claims (apply_work.go).
	CmdClaimWork          = def[ClaimWork, *ClaimResult]("ClaimWork", applyClaimWork)
	CmdRenewClaim         = def[RenewClaim, Work]("RenewClaim", applyRenewClaim)
	CmdSetWorkPhase       = def[SetWorkPhase, Work]("SetWorkPhase", applySetWorkPhase)
	CmdRequeueWork        = def[RequeueWork, Work]("RequeueWork", applyRequeueWork)
	CmdFailWork           = def[FailWork, Work]("FailWork", applyFailWork)
	CmdExpireWork         = def[ExpireWork, Work]("ExpireWork", applyExpireWork)
	CmdSupersedeWork      = def[SupersedeWork, Work]("SupersedeWork", applySupersedeWork)
	CmdRecordPredecessor  = def[RecordPredecessorStop, PredecessorStop]("RecordPredecessorStop", applyRecordPredecessorStop)
	CmdDropPredecessor    = def[DropPredecessorStop, struct{}]("DropPredecessorStop", applyDropPredecessorStop)
	CmdActivateRevision   = def[ActivateRevision, Agent]("ActivateRevision", applyActivateRevision)
	CmdCompleteActivation = def[CompleteActivation, Work]("CompleteActivation", applyCompleteActivation)
	CmdSetRevisionStatus  = def[SetRevisionStatus, Revision]("SetRevisionStatus", applySetRevisionStatus)
	CmdCompleteStop       = def[CompleteStop, Work]("CompleteStop", applyCompleteStop)
	CmdCompleteDeletion   = def[CompleteDeletion, Work]("CompleteDeletion", applyCompleteDeletion)
	CmdReleaseClaims      = def[ReleaseClaims, []string]("ReleaseClaims", applyReleaseClaims)

	// Truthful activation (activation.go).
	CmdRecordRevisionRuntime = def[RecordRevisionRuntime, RevisionRuntime]("RecordRevisionRuntime", applyRecordRevisionRuntime)
	CmdObserveAgent          = def[ObserveAgent, AgentHealth]("ObserveAgent", applyObserveAgent)
	CmdCancelWork            = def[CancelWork, Work]("CancelWork", applyCancelWork)
	CmdRequeueFinalization   = def[RequeueFinalization, Work]("RequeueFinalization", applyRequeueFinalization)
	CmdRequestRollback       = def[RequestRollback, Work]("RequestRollback", applyRequestRollback)
	CmdSetRollbackPolicy     = def[SetRollbackPolicy, Agent]("SetRollbackPolicy", applySetRollbackPolicy)

	// Identities and authorization data (identities.go).
	CmdCreateUser             = def[CreateUser, User]("CreateUser", applyCreateUser)
	CmdDeleteUser             = def[DeleteUser, User]("DeleteUser", applyDeleteUser)
	CmdCreateServicePrincipal = def[CreateServicePrincipal, ServicePrincipal]("CreateServicePrincipal", applyCreateServicePrincipal)
	CmdDeleteServicePrincipal = def[DeleteServicePrincipal, ServicePrincipal]("DeleteServicePrincipal", applyDeleteServicePrincipal)
	CmdCreateToken            = def[CreateToken, Token]("CreateToken", applyCreateToken)
	CmdRevokeToken            = def[RevokeToken, Token]("RevokeToken", applyRevokeToken)
	CmdCreateRoleBinding      = def[CreateRoleBinding, RoleBinding]("CreateRoleBinding", applyCreateRoleBinding)
	CmdDeleteRoleBinding      = def[DeleteRoleBinding, RoleBinding]("DeleteRoleBinding", applyDeleteRoleBinding)
	CmdPutRestriction         = def[PutRestriction, Restriction]("PutRestriction", applyPutRestriction)
	CmdDeleteRestriction      = def[DeleteRestriction, Restriction]("DeleteRestriction", applyDeleteRestriction)
	CmdRecordAudit            = def[RecordAudit, AuditRecord]("RecordAudit", applyRecordAudit)
	CmdPruneAudit             = def[PruneAudit, AuditPruned]("PruneAudit", applyPruneAudit) // audit.go

	// Credential sources of Namespaces: metadata only (credentials.go).
	CmdCreateCredentialSource   = def[CreateCredentialSource, CredentialSource]("CreateCredentialSource", applyCreateCredentialSource)
	CmdRotateCredentialSource   = def[RotateCredentialSource, CredentialSource]("RotateCredentialSource", applyRotateCredentialSource)
	CmdWithdrawCredentialSource = def[WithdrawCredentialSource, CredentialSource]("WithdrawCredentialSource", applyWithdrawCredentialSource)
)

// Cmd is one command of the log: its name, and — as its type parameters —
// the payload P it carries and the result R Apply returns for it.
type Cmd[P, R any] struct{ name string }

// Name is the command's type in the log (Command.Type).
func (c Cmd[P, R]) Name() string { return c.name }

// String is the command's name.
func (c Cmd[P, R]) String() string { return c.name }

// Named is any command of the table, by its name: what code that handles
// every command alike (metrics, test fixtures) takes.
type Named interface{ Name() string }

// nameSet is the set of cmds' names.
func nameSet(cmds ...Named) map[string]bool {
	out := make(map[string]bool, len(cmds))
	for _, c := range cmds {
		out[c.Name()] = true
	}
	return out
}

// handlers holds every declared command's apply function, by name.
var handlers = map[string]handler{}

// def declares a command: Apply runs apply for entries named name.
func def[P, R any](name string, apply func(d *data, c Command, p P) (R, error)) Cmd[P, R] {
	if _, dup := handlers[name]; dup {
		panic("state: command " + name + " declared twice")
	}
	handlers[name] = typed(apply)
	return Cmd[P, R]{name: name}
}

// typed adapts a payload-specific apply function, decoding the payload
// strictly first.
func typed[P, R any](f func(d *data, c Command, p P) (R, error)) handler {
	return func(d *data, c Command) (any, error) {
		var p P
		if len(c.Payload) == 0 {
			return nil, fmt.Errorf("%w: missing payload", ErrInvalid)
		}
		if err := decodeStrict(c.Payload, &p); err != nil {
			return nil, fmt.Errorf("%w: payload: %w", ErrInvalid, err)
		}
		r, err := f(d, c, p)
		if err != nil {
			return nil, err
		}
		return r, nil
	}
}

// Proposer replicates one command given by name and returns what Apply
// returned: coordinator/store on the leader, in-process proposers in tests.
type Proposer interface {
	Propose(ctx context.Context, typ string, payload any) (any, error)
}

// Propose replicates payload as cmd through p and returns cmd's result.
func Propose[P, R any](ctx context.Context, p Proposer, cmd Cmd[P, R], payload P) (R, error) {
	r, replay, err := ProposeKeyed(ctx, p, cmd, payload)
	if err == nil && replay != nil {
		err = fmt.Errorf("state: %s answered a recorded result, but no idempotency key was expected", cmd)
	}
	return r, err
}

// ProposeKeyed is Propose for a context that may carry an idempotency stamp
// (WithIdempotency): a repeat of a recorded key changes nothing and returns
// the record instead of a result.
func ProposeKeyed[P, R any](ctx context.Context, p Proposer, cmd Cmd[P, R], payload P) (R, *Replay, error) {
	var zero R
	res, err := p.Propose(ctx, cmd.name, payload)
	if err != nil {
		return zero, nil, err
	}
	if rp, ok := res.(*Replay); ok {
		return zero, rp, nil
	}
	r, ok := res.(R)
	if !ok {
		return zero, nil, fmt.Errorf("state: %s returned %T, want %T", cmd, res, zero)
	}
	return r, nil, nil
}
