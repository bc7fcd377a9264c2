package gatewayd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"oce.dev/oce/probe/openclawprobe"
	"oce.dev/oce/probe/upfront"
	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/modelref"
	"oce.dev/oce/shared/phase"
)

// CheckModelProbe is the check name a failed model probe holds.
const CheckModelProbe = "model-probe"

// errNoModel: the admitted document names no primary model to probe.
var errNoModel = errors.New("gatewayd: no primary model configured")

// modelProbe is the embedded gateway's startup model check: the upfront 401
// check against the default endpoint, then one real OpenClaw probe. It runs
// in gatewayd, the process that owns model access.
func (g *Gatewayd) modelProbe(ctx context.Context, r Rendered) error {
	if r.Model == "" {
		return phase.FailCheck(CheckModelProbe, codes.NotConfigured, errNoModel)
	}
	ref, err := modelref.Parse(r.Model)
	if err != nil {
		return phase.FailCheck(CheckModelProbe, codes.NotConfigured, err)
	}
	if g.probeVouched() {
		// The candidate's own probe passed before cutover (probeonly.go).
		g.log.Info("model probe passed before cutover; not repeated",
			"passedAgoMs", time.Since(g.cfg.ProbePassedAt).Milliseconds())
		return nil
	}
	pc := upfront.ProviderConfig{Provider: ref.Provider, Key: g.cfg.ModelKey}
	if !r.ProviderOverride && r.ProviderSettings != nil {
		pc.BaseURL, _ = r.ProviderSettings["baseUrl"].(string)
		pc.API, _ = r.ProviderSettings["api"].(string)
		if h, ok := r.ProviderSettings["headers"].(map[string]any); ok && len(h) > 0 {
			pc.Headers = map[string]string{}
			for k := range h {
				pc.Headers[k] = ""
			}
		}
		_, pc.HasRequestOptions = r.ProviderSettings["request"]
	}
	res, err := upfront.Check(ctx, pc, upfront.Options{OpenAIBase: g.cfg.OpenAIBase, AnthropicBase: g.cfg.AnthropicBase})
	if err != nil {
		return err
	}
	upfront.Log(ctx, g.log, res)
	if res.Failed() {
		return phase.FailCheck(CheckModelProbe, codes.AuthenticationFailed, errors.New("upfront check rejected the credential"))
	}
	pr := openclawprobe.Run(ctx, openclawprobe.Options{
		Command:          g.cfg.OpenClawCommand,
		Model:            r.Model,
		ProviderSettings: r.ProviderSettings,
		Credential:       g.cfg.ModelKey,
		TempDir:          os.TempDir(),
		CompileCacheBase: g.compileCacheBase,
		CgroupRoot:       g.cfg.CgroupRoot,
		Cap:              g.cfg.ProbeCap,
		Logger:           g.log,
	})
	if ctx.Err() != nil {
		return ctx.Err()
	}
	if pr.Code == codes.Ready {
		return nil
	}
	err = fmt.Errorf("openclaw probe: %s", pr.Code)
	if pr.Cause != nil {
		return &phase.CodedError{Code: pr.Code, Cause: pr.Cause, Check: CheckModelProbe, Err: err}
	}
	return phase.FailCheck(CheckModelProbe, pr.Code, err)
}
