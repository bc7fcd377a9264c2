// Package openclawprobe runs OpenClaw's native model probe before an embedded
// or native OpenClaw runtime serves (docs/design/seed-001.md): one `openclaw models status
// --json --probe` call against the configured primary model, inside the
// process that owns model access, with temporary state under its TMPDIR, a
// cap of 20 s plus 45 CPU-seconds at the CPU limit and 256 output tokens. The
// outcome is one closed probe code (docs/design/reference.md#s2-1).
//
// The probe child is the one process that sees the provider credential: it
// receives OPENAI_API_KEY or ANTHROPIC_API_KEY in its environment (never in
// argv, the config file or a log record) because it is the process that calls
// the model. Nothing else the probe spawns inherits it.
package openclawprobe

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"oce.dev/oce/shared/cgroupcpu"
	"oce.dev/oce/shared/codes"
)

// Probe flags of the reference command line (docs/design/reference.md#s2-1).
const (
	// ProbeTimeoutMs is OpenClaw's own per-probe timeout (--probe-timeout).
	ProbeTimeoutMs = 15000
	// ProbeMaxTokens is the output-token limit of the probe turn (docs/design/seed-001.md).
	ProbeMaxTokens = 256
	// OutputLimit caps what is read of the probe's stdout.
	OutputLimit = 256 << 10
)

// Sentinel errors of a probe that could not run (code UNAVAILABLE).
var (
	ErrNoCommand        = errors.New("openclawprobe: no openclaw command")
	ErrModel            = errors.New("openclawprobe: model is not provider/model")
	ErrProvider         = errors.New("openclawprobe: provider has no supported credential variable")
	ErrNoCredential     = errors.New("openclawprobe: no credential")
	ErrProviderSettings = errors.New("openclawprobe: provider settings are not literal metadata")
)

// Options configure one probe. Command and Model are required.
type Options struct {
	// Command is the argv prefix that runs the openclaw CLI:
	// <node> <openclaw.mjs> (runtimes.Paths.OpenClawCommand()).
	Command []string
	// Model is the primary model reference, provider/model.
	Model string
	// ProviderSettings is the admitted models.providers entry of the model's
	// provider (baseUrl, api, models, headers …), literal metadata only; nil
	// for a built-in endpoint. Its apiKey, if any, is dropped: the credential
	// travels only in the credential variable.
	ProviderSettings map[string]any
	// CredentialEnv names the variable the credential is passed in; empty
	// selects OPENAI_API_KEY or ANTHROPIC_API_KEY by the model's provider.
	CredentialEnv string
	// Credential is the provider key.
	Credential string

	// TempDir is the parent of the probe's private temp dir; empty uses
	// os.TempDir() (the caller's TMPDIR).
	TempDir string
	// Path is PATH for the child; empty keeps the caller's PATH.
	Path string
	// CompileCacheDir, when set, becomes NODE_COMPILE_CACHE (a dedicated
	// directory, never a shared base dir: openclaw.mjs files its cache
	// under <dir>/openclaw/<version>/).
	CompileCacheDir string
	// CompileCacheBase, when set, is linked as the probe's
	// $TMPDIR/node-compile-cache, the launcher's default base: the probe
	// then shares the caller's compile cache (gatewayd's, seeded from the
	// image's prebuilt one) instead of compiling every module afresh.
	CompileCacheBase string
	// NodeExtraCACerts and SSLCertFile are passed through when set (TLS trust
	// for an inspecting egress proxy).
	NodeExtraCACerts string
	SSLCertFile      string

	// CgroupRoot is the cgroup v2 directory for the quota and the CPU wait
	// counter; empty uses cgroupcpu.DefaultRoot.
	CgroupRoot string
	// Cap overrides cgroupcpu.ProbeCap(quota) (tests inject short caps).
	Cap time.Duration
	// Logger receives the stage and result records; nil discards them.
	Logger *slog.Logger
}

// Result is the outcome of one probe.
type Result struct {
	Code codes.Code
	// Cause qualifies MODEL_PROBE_FAILED; nil otherwise.
	Cause *codes.Cause
	// Elapsed runs from spawn to exit (or kill); zero when nothing ran.
	Elapsed time.Duration
	// Cap is the wall-clock cap the probe ran under.
	Cap time.Duration
	// CPUWaitMs is the cgroup CPU wait during the probe; nil when unknown.
	CPUWaitMs *int64
	// Err explains UNAVAILABLE and WRAPPER_ERROR for the caller; it is never
	// logged by this package and carries no credential.
	Err error
}

// Run executes the probe and logs its stage records and one
// openclaw.model_probe record. It always returns a result with a probe code.
func Run(ctx context.Context, o Options) Result {
	p := newRun(o)
	res := p.run(ctx)
	p.logResult(res)
	return res
}

// CapFor returns the cap a probe gets under the cgroup at root: the
// seed's formula for the quota in cpu.max (one core when unreadable).
func CapFor(root string) time.Duration {
	share, ok := cgroupcpu.QuotaAt(root)
	if !ok {
		share = 1
	}
	return cgroupcpu.ProbeCap(share)
}
