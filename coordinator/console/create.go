package console

import (
	"context"
	"net/http"
	"slices"
	"strings"

	"oce.dev/oce/coordinator/api/wire"
)

// banner is a warning every page of a Namespace shows while the
// installation cannot do all it normally can (docs/design/seed-001.md: a Driver outage).
type banner struct {
	SandboxUnavailable bool
	NoCompute          bool
}

func (c *Console) banner(ctx context.Context, s *session) banner {
	inst, err := c.apiClient(s.token).Installation(ctx)
	if err != nil {
		return banner{}
	}
	return banner{SandboxUnavailable: inst.SandboxDriverUnavailable, NoCompute: inst.Compute == nil}
}

// runtimeChoice is one runtime and execution mode Create Agent offers.
type runtimeChoice struct {
	Value, Label, Note string
	Mode               string
}

// Runtime choices (value: harness/mode).
const (
	choiceOpenClawEmbedded  = "openclaw/embedded"
	choiceOpenClawDedicated = "openclaw/dedicated"
	choiceCodexDedicated    = "codex/dedicated"
)

// runtimeChoices offers what GET /v1/installation lists (docs/design/seed-001.md): OpenClaw
// in each listed execution mode — Dedicated OpenClaw is withheld unless
// listed — and dedicated Codex when the compute driver runs it.
func runtimeChoices(inst wire.Installation) []runtimeChoice {
	var out []runtimeChoice
	modes := inst.Capabilities.OpenClaw.ExecutionModes
	if slices.Contains(modes, wire.ModeEmbedded) {
		out = append(out, runtimeChoice{Value: choiceOpenClawEmbedded, Mode: wire.ModeEmbedded, Label: "OpenClaw — embedded",
			Note: "One gateway runs the built-in Harness."})
	}
	if slices.Contains(modes, wire.ModeDedicated) {
		out = append(out, runtimeChoice{Value: choiceOpenClawDedicated, Mode: wire.ModeDedicated, Label: "OpenClaw — dedicated",
			Note: "Experimental native worker; needs the Sandbox driver."})
	}
	out = append(out, runtimeChoice{Value: choiceCodexDedicated, Mode: wire.ModeDedicated, Label: "Codex — dedicated",
		Note: "A gateway connects to a separate Codex Harness."})
	return out
}

type createView struct {
	Namespace      string
	Choices        []runtimeChoice
	Configurations []string
	AuthMethods    []string
	Banner         banner
	Error, ErrCode string
	Form           createForm
}

type createForm struct {
	Name, Configuration, Runtime, AuthMethod, AuthKind, AuthRef string
}

func (c *Console) createPage(w http.ResponseWriter, r *http.Request, s *session) error {
	return c.showCreate(w, r, s, http.StatusOK, createForm{Runtime: choiceOpenClawEmbedded, AuthMethod: "api_key"}, "", "")
}

func (c *Console) showCreate(w http.ResponseWriter, r *http.Request, s *session, status int, f createForm, msg, code string) error {
	ctx, cancel := c.ctx(r)
	defer cancel()
	ns := r.PathValue("ns")
	if !c.can(ctx, s, ActionCreateAgent, Resource{Namespace: ns}) {
		return forbidden("create Agents in namespace " + ns)
	}
	cl := c.apiClient(s.token)
	inst, err := cl.Installation(ctx)
	if err != nil {
		return apiErr(err)
	}
	cfgs, err := cl.Configurations(ctx, ns)
	if err != nil {
		return apiErr(err)
	}
	v := createView{Namespace: ns, Choices: runtimeChoices(inst), Form: f, Error: msg, ErrCode: code,
		Banner: banner{SandboxUnavailable: inst.SandboxDriverUnavailable, NoCompute: inst.Compute == nil}}
	for _, cf := range cfgs {
		v.Configurations = append(v.Configurations, cf.Name)
	}
	slices.Sort(v.Configurations)
	if inst.Compute != nil {
		v.AuthMethods = inst.Compute.HarnessAuth
	}
	c.render(w, status, "create", s, v)
	return nil
}

// createAgent creates the Agent as the form says, refusing a runtime the
// installation does not list before any write.
func (c *Console) createAgent(w http.ResponseWriter, r *http.Request, s *session) error {
	ns := r.PathValue("ns")
	if c.refuses(r.Context(), s, ActionCreateAgent, Resource{Namespace: ns}) {
		return forbidden("create Agents in namespace " + ns)
	}
	f := createForm{Name: strings.TrimSpace(r.PostForm.Get("name")), Configuration: r.PostForm.Get("configuration"),
		Runtime: r.PostForm.Get("runtime"), AuthMethod: r.PostForm.Get("authMethod"), AuthKind: r.PostForm.Get("authKind"),
		AuthRef: strings.TrimSpace(r.PostForm.Get("authRef"))}
	ctx, cancel := c.ctx(r)
	defer cancel()
	cl := c.apiClient(s.token)
	inst, err := cl.Installation(ctx)
	if err != nil {
		return apiErr(err)
	}
	var mode string
	for _, ch := range runtimeChoices(inst) {
		if ch.Value == f.Runtime {
			mode = ch.Mode
		}
	}
	if mode == "" {
		return c.showCreate(w, r, s, http.StatusBadRequest, f,
			"This installation does not offer that runtime and execution mode.", "INVALID_REQUEST")
	}
	req := wire.CreateAgent{Name: f.Name, Configuration: f.Configuration, ExecutionMode: mode}
	if f.AuthMethod != "" {
		req.HarnessAuth = &wire.HarnessAuth{Method: f.AuthMethod, CredentialKind: f.AuthKind, SourceRef: f.AuthRef}
	}
	a, err := cl.CreateAgent(ctx, ns, req)
	if err != nil {
		pe, ok := apiErr(err).(*pageError)
		if ok && pe.status < 500 && pe.status != http.StatusForbidden {
			return c.showCreate(w, r, s, pe.status, f, pe.msg, pe.code)
		}
		return apiErr(err)
	}
	http.Redirect(w, r, agentPath(ns, a.Name)+"?notice=created", http.StatusSeeOther)
	return nil
}
