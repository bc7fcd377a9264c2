package imagestest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"oce.dev/oce/shared/runtimes"
)

// Smoke checks: scripts/images.sh runs them on every image it builds, so an
// image that would not start fails the build with the name of what it is
// missing, instead of a held failure in a test an hour later. Each check
// starts the image the way the Pod the driver renders starts it (its own
// uid 1000, a read-only root, no capabilities, no new privileges, a fresh
// /tmp and home) in the caller's network namespace — loopback only: the
// smoke command runs under shared/netns — and requires an exit status and
// a piece of output.

// ErrSmoke reports an image that failed a smoke check.
var ErrSmoke = errors.New("imagestest: image smoke check failed")

// SmokeTimeout bounds one check (an OpenClaw CLI start is ~3-11 s here).
const SmokeTimeout = 3 * time.Minute

// CodexPluginPackage is the gateway's codex plugin in the image's offline
// npm cache (gatewayd.CodexPluginSpec without its "npm:" prefix).
const CodexPluginPackage = "@openclaw/codex@2026.9.5"

// SmokeCheck is one command run in a fresh container of the image.
type SmokeCheck struct {
	Name string
	// What names what the image lacks when the check fails.
	What string
	// Command replaces the image's entrypoint (nil: the entrypoint itself,
	// as the Pod runs it); Args its arguments.
	Command []string
	Args    []string
	Env     []string
	Code    int    // the exit status required
	Want    string // output that must appear
}

// gatewayShell runs script under /bin/sh with the gateway image's runtime
// locations.
func gatewayShell(script string) []string { return []string{"/bin/sh", "-c", script} }

// openclawEnv is what the probe and gatewayd give the OpenClaw CLI: a home
// and state of its own, network-calling features off.
var openclawEnv = []string{"HOME=/tmp/home", "OPENCLAW_STATE_DIR=/tmp/state", "OPENCLAW_CONFIG_PATH=/tmp/openclaw.json",
	"TMPDIR=/tmp", "OPENCLAW_DISABLE_BONJOUR=1", "OPENCLAW_NO_AUTO_UPDATE=1", "OPENCLAW_SKIP_CHANNELS=1"}

// smokeConfig is a minimal embedded configuration (what admission admits):
// one model, no network-calling features.
const smokeConfig = `{"agents":{"defaults":{"model":{"primary":"openai/gpt-smoke-1","fallbacks":[]}}},` +
	`"update":{"checkOnStart":false},"discovery":{"mdns":{"mode":"off"}},"models":{"catalogRefresh":{"enabled":false}}}`

// SmokeChecks lists the checks of image name (coordinator, gateway,
// harness).
func SmokeChecks(name string) []SmokeCheck {
	switch name {
	case Gateway:
		// no environment: the supervisor refuses to start, saying so
		entry := SmokeCheck{Name: "entrypoint", What: "tini and gatewayd, the entrypoint", Code: 2, Want: "NOT_CONFIGURED"}
		prep := "mkdir -p /tmp/home /tmp/state && printf '%s' '" + smokeConfig + "' >/tmp/openclaw.json && "
		return []SmokeCheck{
			entry,
			{Name: "node", What: "Node " + runtimes.NodeVersion + " at $OCE_NODE (and its shared libraries, e.g. libatomic1)",
				Command: gatewayShell(`exec "$OCE_NODE" --version`), Want: "v" + runtimes.NodeVersion},
			{Name: "openclaw", What: "openclaw " + runtimes.OpenClawVersion + " at $OCE_OPENCLAW_MJS, readable by uid 1000",
				Command: gatewayShell(prep + `exec "$OCE_NODE" "$OCE_OPENCLAW_MJS" --version`), Env: openclawEnv,
				Want: runtimes.OpenClawVersion},
			{Name: "openclaw-models", What: "what `openclaw models status` (the model probe's command) loads: config, plugins, model catalog",
				Command: gatewayShell(prep + `exec "$OCE_NODE" "$OCE_OPENCLAW_MJS" models status --json`), Env: openclawEnv,
				Want: "gpt-smoke-1"},
			{Name: "codex-plugin-cache", What: "the offline npm cache holding " + CodexPluginPackage + " and its dependencies, and npm on PATH",
				Command: gatewayShell(`cp -r "$OCE_NPM_CACHE" /tmp/npm-cache && mkdir -p /tmp/p && cd /tmp/p && ` +
					`exec npm install --offline --dry-run --no-audit --no-fund --ignore-scripts --cache /tmp/npm-cache ` + CodexPluginPackage),
				Env: []string{"HOME=/tmp/home", "TMPDIR=/tmp"}, Want: "@openclaw/codex"},
		}
	case Harness:
		// harnessd holds a bad environment (it stays up, unready): ask it
		// something it refuses at once instead
		entry := SmokeCheck{Name: "entrypoint", What: "tini and harnessd, the entrypoint", Args: []string{"smoke"},
			Code: 2, Want: "usage: harnessd"}
		return []SmokeCheck{
			entry,
			{Name: "codex", What: "Codex " + runtimes.CodexVersion + " at $OCE_CODEX_BIN",
				Command: gatewayShell(`exec "$OCE_CODEX_BIN" --version`), Env: []string{"HOME=/tmp/home", "CODEX_HOME=/tmp/codex"},
				Want: runtimes.CodexVersion},
			{Name: "nodehost", What: "nodehost, the companion workspace node",
				Command: gatewayShell(`exec "$OCE_NODEHOST_BIN" identity --json --state-dir /tmp/node`), Code: 1, Want: ""},
		}
	case Coordinator:
		return []SmokeCheck{
			{Name: "coordinator", What: "the coordinator binary", Command: []string{"/usr/local/bin/coordinator", "--help"}, Want: "--driver"},
			{Name: "occ", What: "occ", Command: []string{"/usr/local/bin/occ", "--help"}, Want: "Usage"},
		}
	}
	return nil
}

// Smoke runs the checks of img (unpacked as u) in containers under dir, a
// private directory, and returns every failure in one error.
func Smoke(ctx context.Context, img Image, u *Unpacked, dir string) error {
	var failed []string
	for i, c := range SmokeChecks(img.Name) {
		out, code, err := smokeRun(ctx, img, u, fmt.Sprintf("%s/%d", dir, i), c)
		switch {
		case err != nil:
			failed = append(failed, fmt.Sprintf("%s: %v", c.Name, err))
		case code != c.Code || !strings.Contains(out, c.Want):
			failed = append(failed, fmt.Sprintf("%s: the image lacks %s: exit %d (want %d), output wanted %q:\n%s",
				c.Name, c.What, code, c.Code, c.Want, tail(out, 1500)))
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("%w: %s (%s):\n%s", ErrSmoke, img.Name, img.Ref, strings.Join(failed, "\n"))
	}
	return nil
}

func smokeRun(ctx context.Context, img Image, u *Unpacked, dir string, c SmokeCheck) (string, int, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", 0, err
	}
	ctx, cancel := context.WithTimeout(ctx, SmokeTimeout)
	defer cancel()
	uid, no, yes := int64(1000), false, true
	ctr := corev1.Container{Name: "smoke", Image: img.Ref, Command: c.Command, Args: c.Args,
		SecurityContext: &corev1.SecurityContext{RunAsUser: &uid, RunAsGroup: &uid, RunAsNonRoot: &yes,
			ReadOnlyRootFilesystem: &yes, AllowPrivilegeEscalation: &no,
			Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}}},
		VolumeMounts: []corev1.VolumeMount{{Name: "tmp", MountPath: "/tmp"}}}
	for _, kv := range c.Env {
		k, v, _ := strings.Cut(kv, "=")
		ctr.Env = append(ctr.Env, corev1.EnvVar{Name: k, Value: v})
	}
	var log bytes.Buffer
	p, err := NewPod(PodConfig{Dir: dir, Name: "smoke-" + img.Name, Images: map[string]*Unpacked{img.Ref: u}, Log: &log},
		corev1.PodSpec{Containers: []corev1.Container{ctr},
			Volumes: []corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}})
	if err != nil {
		return "", 0, err
	}
	ct, err := p.Start(ctx, "smoke")
	if err != nil {
		return "", 0, err
	}
	defer ct.Delete()
	code, err := ct.Wait(ctx)
	if err != nil {
		return log.String(), code, fmt.Errorf("the container did not end: %w\n%s", err, tail(log.String(), 1500))
	}
	return log.String(), code, nil
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
