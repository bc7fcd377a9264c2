package api

import (
	"net/http"
	"strings"

	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/iam"
	"oce.dev/oce/shared/codes"
)

// What the caller may do (GET …/access): the console shows the actions a
// principal may take by asking here, with the user's own credentials, so a
// page offers exactly what the API would accept. Each decision is made by
// the code that decides the request itself, on the same resources with the
// same attributes: a deploy runs admitDeploy (its permission, its
// references, admission and the Restrictions on the admitted facts) without
// committing; an update, a stop and a delete decide on the Agent as agentFor
// does. These are reads: a denial here is an answer, not an audited attempt.

func (s *server) accessRoutes(ns, agent string) {
	s.read("GET "+ns+"/access", s.namespaceAccess)
	s.read("GET "+agent+"/access", s.agentAccess)
}

// namespaceAccess decides what the caller may create in the Namespace.
// Without a draft to read, only the roles decide (as a deploy's first
// decision does); the Restrictions decide the create itself, on its facts.
func (s *server) namespaceAccess(w http.ResponseWriter, r *http.Request) error {
	ns, err := s.namespace(r)
	if err != nil {
		return err
	}
	out := wire.Access{Resource: iam.NamespaceRes(ns.Name).String(), Actions: map[string]wire.AccessDecision{}}
	for act, res := range map[iam.Action]iam.Resource{
		iam.CreateAgent:         iam.Scoped(iam.TypeAgent, ns.Name, "", nil),
		iam.CreateConfiguration: cfgRes(ns, ""),
		// the credential sources page's forms
		iam.CreateCredentialSource:   credRes(ns, ""),
		iam.RotateCredentialSource:   credRes(ns, ""),
		iam.WithdrawCredentialSource: credRes(ns, ""),
	} {
		d, err := s.decide(r.Context(), principal(r), act, res, nil, true)
		if err != nil {
			return err
		}
		out.Actions[string(act)] = wire.AccessDecision{Allowed: d.Allowed, Reasons: denialReasons(d)}
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// agentAccess decides the Agent's actions for a caller who may view it.
func (s *server) agentAccess(w http.ResponseWriter, r *http.Request) error {
	ns, a, err := s.agentFor(r, iam.ViewAgent)
	if err != nil {
		return err
	}
	res := s.agentRes(ns, a)
	out := wire.Access{Resource: res.String(), Actions: map[string]wire.AccessDecision{}}
	for _, act := range []iam.Action{iam.UpdateAgent, iam.DeleteAgent, iam.StopAgent} {
		d, err := s.decide(r.Context(), principal(r), act, res, nil, false)
		if err != nil {
			return err
		}
		out.Actions[string(act)] = wire.AccessDecision{Allowed: d.Allowed, Reasons: denialReasons(d)}
	}
	_, err = s.admitDeploy(r, ns, a, "")
	dec, err := accessOf(err)
	if err != nil {
		return err
	}
	out.Actions[string(iam.DeployAgent)] = dec
	writeJSON(w, http.StatusOK, out)
	return nil
}

// accessOf turns the outcome of a request's decision into an access
// decision: a 403 denies; anything else that refused it (an admission
// error, a conflict) is the request's to report, not a denial — the caller
// may ask and will be told why it cannot be done. An internal failure is
// the answer's.
func accessOf(err error) (wire.AccessDecision, error) {
	if err == nil {
		return wire.AccessDecision{Allowed: true}, nil
	}
	e := toError(err)
	switch {
	case e.Code == codes.Forbidden:
		dec := wire.AccessDecision{}
		if p, _ := e.Details["policies"].(string); p != "" {
			dec.Reasons = strings.Split(p, ", ")
		} else if reason, _ := e.Details["reason"].(string); reason != "" {
			dec.Reasons = []string{reason} // e.g. CROSS_NAMESPACE_REFERENCE
		}
		return dec, nil
	case e.Status >= 500:
		return wire.AccessDecision{}, err
	}
	return wire.AccessDecision{Allowed: true}, nil
}

func denialReasons(d iam.Decision) []string {
	if d.Allowed {
		return nil
	}
	return d.Reasons
}
