package policy

import (
	"context"
	"fmt"
	"strings"

	"oce.dev/oce/coordinator/iam"
	"oce.dev/oce/coordinator/state"
)

// Decider decides with an IAM driver over a view of the state.
type Decider struct {
	IAM   iam.Driver
	State View
}

// Denied is a refused decision: the principal may not take the action on
// the resource. Reasons name the policies that decided.
type Denied struct {
	Action   iam.Action
	Resource iam.Resource
	Reasons  []string
}

func (e *Denied) Error() string {
	msg := fmt.Sprintf("%s is not allowed on %s", e.Action, e.Resource)
	if len(e.Reasons) > 0 {
		msg += " (" + strings.Join(e.Reasons, ", ") + ")"
	}
	return msg
}

// Undecided is a decision the IAM driver failed to make.
type Undecided struct {
	Action   iam.Action
	Resource iam.Resource
	Err      error
}

func (e *Undecided) Error() string { return fmt.Sprintf("%s on %s: %v", e.Action, e.Resource, e.Err) }

// Unwrap returns the driver's error.
func (e *Undecided) Unwrap() error { return e.Err }

// Allow decides one request: nil when it is allowed, a *Denied or an
// *Undecided otherwise.
func (d Decider) Allow(ctx context.Context, req iam.Request) error {
	dec, err := d.IAM.Authorize(ctx, req)
	if err != nil {
		return &Undecided{Action: req.Action, Resource: req.Resource, Err: err}
	}
	if !dec.Allowed {
		return &Denied{Action: req.Action, Resource: req.Resource, Reasons: dec.Reasons}
	}
	return nil
}

// AgentResource is Agent a of Namespace ns with the attributes policies
// read, its Configuration's and ServicePrincipal's names among them.
func AgentResource(v View, ns state.Namespace, a state.Agent) iam.Resource {
	cfgName, spName := "", ""
	if c, ok := v.Configuration(a.ConfigurationID); ok {
		cfgName = c.Name
	}
	if sp, ok := v.ServicePrincipal(a.ServicePrincipalID); ok {
		spName = sp.Name
	}
	return iam.AgentResource(ns.Name, a, cfgName, spName)
}

// OnAgent decides act (stop, delete, update, view …) on Agent a of ns, by
// its current attributes.
func (d Decider) OnAgent(ctx context.Context, p iam.Principal, act iam.Action, ns state.Namespace, a state.Agent) error {
	return d.Allow(ctx, iam.Request{Principal: p, Action: act, Resource: AgentResource(d.State, ns, a)})
}
