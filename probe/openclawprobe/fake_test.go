package openclawprobe

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// The unit tests run this test binary itself as a fake `openclaw` CLI:
// argv is <test binary> fakeArg <scenario> <report file> <cgroup root>
// followed by what the probe appends (models status --json --probe …).
// The fake prints the real CLI's output shape (testdata, captured from
// openclaw 2026.9.6 against the fake provider), exits 0 like the real CLI
// for every probe status, and writes a report of what it was given.
const fakeArg = "oce-fake-openclaw"

//go:embed testdata/models-status-probe-ok.json
var realStatusOK []byte

// fakeReport is what the fake saw.
type fakeReport struct {
	Args      []string `json:"args"`
	Env       []string `json:"env"`
	Cmdline   string   `json:"cmdline"`
	Cwd       string   `json:"cwd"`
	Config    string   `json:"config"`
	ConfigErr string   `json:"configErr,omitempty"`
	ConfigMod uint32   `json:"configMode"`
	Pid       int      `json:"pid"`
	Pgid      int      `json:"pgid"`
	ChildPid  int      `json:"childPid,omitempty"`
}

// withStatus returns the captured real output with the probe result's
// status (and provider) replaced.
func withStatus(provider, status string) []byte {
	var doc map[string]any
	if err := json.Unmarshal(realStatusOK, &doc); err != nil {
		panic(err)
	}
	probes := doc["auth"].(map[string]any)["probes"].(map[string]any)
	row := probes["results"].([]any)[0].(map[string]any)
	row["status"], row["provider"] = status, provider
	if status != "ok" {
		row["error"] = "provider said no (sk-planted would be redacted by openclaw)"
	}
	b, _ := json.MarshalIndent(doc, "", "  ")
	return b
}

func fakeOpenClaw(args []string) int {
	if len(args) < 3 {
		fmt.Fprintln(os.Stderr, "fake openclaw: want scenario report cgroup")
		return 64
	}
	scenario, reportPath, cgroup := args[0], args[1], args[2]
	rep := fakeReport{Args: args[3:], Env: os.Environ(), Pid: os.Getpid()}
	rep.Pgid, _ = syscall.Getpgid(0)
	rep.Cwd, _ = os.Getwd()
	if b, err := os.ReadFile("/proc/self/cmdline"); err == nil {
		rep.Cmdline = strings.ReplaceAll(string(b), "\x00", " ")
	}
	if p := os.Getenv("OPENCLAW_CONFIG_PATH"); p != "" {
		if b, err := os.ReadFile(p); err == nil {
			rep.Config = string(b)
		} else {
			rep.ConfigErr = err.Error()
		}
		if st, err := os.Stat(p); err == nil {
			rep.ConfigMod = uint32(st.Mode().Perm())
		}
	}
	// Spawned before the report is written, so the test can find the pid.
	if scenario == "grandchild" {
		c := exec.Command("sleep", "300")
		c.Stdout = os.Stdout // holds the probe's stdout pipe open
		if err := c.Start(); err == nil {
			rep.ChildPid = c.Process.Pid
		}
	}
	b, _ := json.Marshal(rep)
	_ = os.WriteFile(reportPath, b, 0o600)

	out := os.Stdout
	switch scenario {
	case "ok", "grandchild":
		_, _ = out.Write(withStatus("openai", "ok"))
	case "anthropic-ok":
		_, _ = out.Write(withStatus("anthropic", "ok"))
	case "auth", "timeout", "format", "rate_limit", "billing", "unknown", "no_model", "weird":
		_, _ = out.Write(withStatus("openai", scenario))
	case "other-provider":
		_, _ = out.Write(withStatus("anthropic", "ok"))
	case "no-results":
		_, _ = out.Write([]byte(`{"auth":{"probes":{"results":[]}}}`))
	case "no-probes":
		_, _ = out.Write([]byte(`{"auth":{"providers":[]}}`))
	case "status-number":
		_, _ = out.Write([]byte(`{"auth":{"probes":{"results":[{"provider":"openai","status":1}]}}}`))
	case "not-json":
		_, _ = out.Write([]byte("Probing auth profiles…\n"))
	case "two-docs":
		_, _ = out.Write([]byte(`{"auth":{}} {"auth":{}}`))
	case "array":
		_, _ = out.Write([]byte(`[1,2,3]`))
	case "exit3":
		_, _ = out.Write(withStatus("openai", "ok"))
		return 3
	case "sigterm":
		_ = syscall.Kill(os.Getpid(), syscall.SIGTERM)
		time.Sleep(time.Minute)
	case "flood":
		chunk := []byte(strings.Repeat("x", 4096))
		for range 200 { // 800 KiB, past the 256 KiB limit
			if _, err := out.Write(chunk); err != nil {
				return 1
			}
		}
		time.Sleep(time.Minute)
	case "hang":
		time.Sleep(10 * time.Minute)
	case "starve":
		// The cgroup's CPU wait counter races ahead of the wall clock.
		_ = os.WriteFile(filepath.Join(cgroup, "cpu.pressure"),
			[]byte("some avg10=90.00 avg60=50.00 avg300=10.00 total=900000000\nfull avg10=0 avg60=0 avg300=0 total=0\n"), 0o644)
		time.Sleep(10 * time.Minute)
	default:
		fmt.Fprintln(os.Stderr, "fake openclaw: unknown scenario", scenario)
		return 65
	}
	return 0
}
