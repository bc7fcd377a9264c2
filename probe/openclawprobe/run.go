package openclawprobe

import (
	"context"
	"fmt"
	"log/slog"
	"oce.dev/oce/shared/runtimes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"oce.dev/oce/shared/cgroupcpu"
	"oce.dev/oce/shared/codes"
	"oce.dev/oce/shared/modelref"
)

// Stages of the openclaw.model_probe_stage records, in order.
const (
	StagePrepare   = "prepare"
	StagePreflight = "preflight"
	StageSpawn     = "spawn"
	StageReturned  = "returned"
	StageCleanup   = "cleanup"
	StageComplete  = "complete"
)

// Log events.
const (
	EventStage  = "openclaw.model_probe_stage"
	EventResult = "openclaw.model_probe"
)

// defaultPath is the child's PATH when the caller has none.
const defaultPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

type run struct {
	o   Options
	log *slog.Logger
}

func newRun(o Options) *run {
	l := o.Logger
	if l == nil {
		l = slog.New(slog.DiscardHandler)
	}
	if o.CgroupRoot == "" {
		o.CgroupRoot = cgroupcpu.DefaultRoot
	}
	return &run{o: o, log: l}
}

func (p *run) stage(s string) {
	p.log.Info(EventStage, "event", EventStage, "stage", s)
}

// logResult writes the one result record: elapsedMs, capMs, cpuWaitMs
// (null when unknown) and code, plus causeKind/causeDetail for
// MODEL_PROBE_FAILED. No provider, model, credential or path.
func (p *run) logResult(r Result) {
	attrs := []any{"event", EventResult,
		"elapsedMs", r.Elapsed.Milliseconds(), "capMs", r.Cap.Milliseconds()}
	if r.CPUWaitMs != nil {
		attrs = append(attrs, "cpuWaitMs", *r.CPUWaitMs)
	} else {
		attrs = append(attrs, slog.Any("cpuWaitMs", nil))
	}
	attrs = append(attrs, "code", string(r.Code))
	if r.Cause != nil {
		attrs = append(attrs, "causeKind", string(r.Cause.Kind), "causeDetail", r.Cause.Detail)
	}
	level := slog.LevelInfo
	if r.Code != codes.Ready {
		level = slog.LevelError
	}
	p.log.Log(context.Background(), level, EventResult, attrs...)
}

func unavailable(capDur time.Duration, err error) Result {
	return Result{Code: codes.Unavailable, Cap: capDur, Err: err}
}

func (p *run) run(ctx context.Context) (res Result) {
	defer func() {
		// A bug here must still end in a code, never in a crash of the
		// supervisor that holds the failure.
		if r := recover(); r != nil {
			res = Result{Code: codes.ModelProbeFailed, Cap: res.Cap,
				Cause: &codes.Cause{Kind: codes.CauseWrapperError, Detail: "panic"},
				Err:   fmt.Errorf("openclawprobe: panic: %v", r)}
		}
	}()

	p.stage(StagePrepare)
	capDur := p.o.Cap
	if capDur <= 0 {
		capDur = CapFor(p.o.CgroupRoot)
	}
	dir, env, argv, err := p.prepare()
	if dir != "" {
		defer func() {
			p.stage(StageCleanup)
			if rmErr := os.RemoveAll(dir); rmErr != nil && res.Err == nil {
				res.Err = fmt.Errorf("openclawprobe: remove temp dir: %w", rmErr)
			}
			p.stage(StageComplete)
		}()
	} else {
		defer p.stage(StageComplete)
	}
	if err != nil {
		return unavailable(capDur, err)
	}

	p.stage(StagePreflight)
	if _, err := exec.LookPath(argv[0]); err != nil {
		return unavailable(capDur, fmt.Errorf("openclawprobe: runtime: %w", err))
	}
	for _, a := range argv[1:2] {
		if _, err := os.Stat(a); err != nil && filepath.IsAbs(a) {
			return unavailable(capDur, fmt.Errorf("openclawprobe: runtime: %w", err))
		}
	}
	if err := ctx.Err(); err != nil {
		return unavailable(capDur, err)
	}

	p.stage(StageSpawn)
	out := execute(ctx, execSpec{argv: argv, dir: dir, env: env, cap: capDur,
		cgroupRoot: p.o.CgroupRoot, limit: OutputLimit})
	p.stage(StageReturned)

	ref, _ := modelref.Parse(p.o.Model) // validated in prepare
	r := classify(out, ref.Provider)
	r.Cap = capDur
	return r
}

// prepare validates the options and writes the private temp dir: home,
// tmp and state subdirectories and the 0600 probe config. It returns the dir
// (to clean up) even on a later error.
func (p *run) prepare() (dir string, env, argv []string, err error) {
	o := p.o
	if len(o.Command) == 0 || o.Command[0] == "" {
		return "", nil, nil, ErrNoCommand
	}
	ref, err := modelref.Parse(o.Model)
	if err != nil {
		return "", nil, nil, fmt.Errorf("%w: %v", ErrModel, err)
	}
	credVar := o.CredentialEnv
	if credVar == "" {
		credVar = credentialEnv[ref.Provider]
	}
	if credVar == "" {
		return "", nil, nil, fmt.Errorf("%w: provider %q", ErrProvider, ref.Provider)
	}
	if o.Credential == "" || strings.ContainsRune(o.Credential, 0) {
		return "", nil, nil, ErrNoCredential
	}
	parent := o.TempDir
	if parent == "" {
		parent = os.TempDir()
	}
	dir, err = os.MkdirTemp(parent, "openclaw-probe-")
	if err != nil {
		return "", nil, nil, fmt.Errorf("openclawprobe: temp dir: %w", err)
	}
	sub := func(n string) string { return filepath.Join(dir, n) }
	for _, n := range []string{"home", "tmp", "state", "logs"} {
		if err := os.Mkdir(sub(n), 0o700); err != nil {
			return dir, nil, nil, fmt.Errorf("openclawprobe: temp dir: %w", err)
		}
	}
	if o.CompileCacheBase != "" {
		if err := os.Symlink(o.CompileCacheBase, filepath.Join(sub("tmp"), runtimes.CompileCacheDirName)); err != nil {
			return dir, nil, nil, fmt.Errorf("openclawprobe: compile cache: %w", err)
		}
	}
	cfg, err := probeConfig(o.Model, o.ProviderSettings, filepath.Join(sub("logs"), "openclaw.log"))
	if err != nil {
		return dir, nil, nil, err
	}
	cfgPath := sub("openclaw.json")
	if err := os.WriteFile(cfgPath, cfg, 0o600); err != nil {
		return dir, nil, nil, fmt.Errorf("openclawprobe: write config: %w", err)
	}
	path := o.Path
	if path == "" {
		path = os.Getenv("PATH")
	}
	if path == "" {
		path = defaultPath
	}
	env = []string{
		"PATH=" + path,
		"HOME=" + sub("home"),
		"TMPDIR=" + sub("tmp"),
		"OPENCLAW_STATE_DIR=" + sub("state"),
		"OPENCLAW_CONFIG_PATH=" + cfgPath,
		// Network-calling features off (docs/design/openclaw.md#s1-1).
		"OPENCLAW_DISABLE_BONJOUR=1",
		"OPENCLAW_NO_AUTO_UPDATE=1",
		"OPENCLAW_SKIP_CHANNELS=1",
	}
	if o.CompileCacheDir != "" {
		env = append(env, "NODE_COMPILE_CACHE="+o.CompileCacheDir)
	}
	if o.NodeExtraCACerts != "" {
		env = append(env, "NODE_EXTRA_CA_CERTS="+o.NodeExtraCACerts)
	}
	if o.SSLCertFile != "" {
		env = append(env, "SSL_CERT_FILE="+o.SSLCertFile)
	}
	env = append(env, credVar+"="+o.Credential)
	argv = append(append([]string{}, o.Command...), "models", "status", "--json", "--probe",
		"--probe-provider", ref.Provider,
		"--probe-concurrency", "1",
		"--probe-timeout", fmt.Sprint(ProbeTimeoutMs),
		"--probe-max-tokens", fmt.Sprint(ProbeMaxTokens))
	return dir, env, argv, nil
}
