// Package browser drives headless Chromium (Debian package chromium) for the
// console's tests with github.com/chromedp/chromedp. Ensure installs the
// package when it is missing (CI is a fresh Debian, as root); Start runs one
// browser with a fresh profile and every network-calling feature off. Tests
// run it inside their loopback-only network namespace.
package browser

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"time"

	"github.com/chromedp/chromedp"
)

// Package is the Debian package providing the browser.
const Package = "chromium"

// InstallTimeout bounds an apt-get install of the package.
const InstallTimeout = 15 * time.Minute

// Window is the viewport the tests use: a laptop screen.
const (
	WindowWidth  = 1366
	WindowHeight = 900
)

// ErrNoBrowser: Chromium is missing and cannot be installed here.
var ErrNoBrowser = errors.New("browser: chromium is not installed and cannot be installed")

var ensureOnce struct {
	sync.Once
	path string
	err  error
}

// candidates are where Debian puts the binary.
var candidates = []string{"chromium", "chromium-browser", "/usr/bin/chromium"}

func find() string {
	for _, c := range candidates {
		if p, err := exec.LookPath(c); err == nil {
			return p
		}
	}
	return ""
}

// Ensure returns the Chromium binary, installing the Debian package with
// apt-get when it is missing (only as root; otherwise it fails loudly).
func Ensure(ctx context.Context) (string, error) {
	ensureOnce.Do(func() {
		if p := find(); p != "" {
			ensureOnce.path = p
			return
		}
		if os.Geteuid() != 0 {
			ensureOnce.err = fmt.Errorf("%w: run as root or `apt-get install %s`", ErrNoBrowser, Package)
			return
		}
		ctx, cancel := context.WithTimeout(ctx, InstallTimeout)
		defer cancel()
		env := append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		for _, args := range [][]string{{"update", "-qq"}, {"install", "-y", "-qq", "--no-install-recommends", Package}} {
			cmd := exec.CommandContext(ctx, "apt-get", args...)
			cmd.Env = env
			if out, err := cmd.CombinedOutput(); err != nil {
				ensureOnce.err = fmt.Errorf("%w: apt-get %v: %v\n%s", ErrNoBrowser, args, err, out)
				return
			}
		}
		if ensureOnce.path = find(); ensureOnce.path == "" {
			ensureOnce.err = fmt.Errorf("%w: installed, but no chromium binary on PATH", ErrNoBrowser)
		}
	})
	return ensureOnce.path, ensureOnce.err
}

// Flags are the browser's flags: headless, as root (no sandbox), nothing
// that reaches the network on its own, a fresh profile per run.
func Flags(userDataDir string) []chromedp.ExecAllocatorOption {
	return []chromedp.ExecAllocatorOption{
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("no-default-browser-check", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("metrics-recording-only", true),
		chromedp.Flag("safebrowsing-disable-auto-update", true),
		chromedp.Flag("password-store", "basic"),
		chromedp.UserDataDir(userDataDir),
		chromedp.WindowSize(WindowWidth, WindowHeight),
	}
}

// Browser is one running Chromium.
type Browser struct {
	Ctx    context.Context // a tab's context for chromedp.Run
	cancel []context.CancelFunc
	dir    string
}

// Start launches Chromium (Ensure first) with a fresh profile in a
// temporary directory and opens one tab; extra options follow Flags.
func Start(ctx context.Context, extra ...chromedp.ExecAllocatorOption) (*Browser, error) {
	bin, err := Ensure(ctx)
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "oce-chromium-")
	if err != nil {
		return nil, err
	}
	opts := append([]chromedp.ExecAllocatorOption{chromedp.ExecPath(bin)}, Flags(filepath.Join(dir, "profile"))...)
	opts = append(opts, extra...)
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	tctx, tcancel := chromedp.NewContext(actx)
	b := &Browser{Ctx: tctx, cancel: []context.CancelFunc{tcancel, acancel}, dir: dir}
	if err := chromedp.Do(tctx); err != nil { // starts the browser
		b.Close()
		return nil, fmt.Errorf("browser: start chromium: %w", err)
	}
	return b, nil
}

// Close ends the browser and removes its profile.
func (b *Browser) Close() {
	for _, c := range b.cancel {
		c()
	}
	_ = os.RemoveAll(b.dir)
}
