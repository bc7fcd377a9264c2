// Command fakeopenclaw stands in for the openclaw CLI in gatewayd's unit
// tests. Like the real one (docs/design/openclaw.md#s1-4, docs/design/openclaw.md#s1-5) `gateway run --port P`
// serves GET /readyz 200 on 127.0.0.1:P and exits 0 on SIGTERM; `doctor
// --fix --non-interactive` migrates and exits 0. Every call appends one line
// to $FAKEOC_RECORD. Knobs: FAKEOC_DOCTOR_EXIT (exit code), FAKEOC_DOCTOR_BLOCK=1
// (run until SIGTERM), FAKEOC_READY_DELAY (duration before /readyz is 200),
// FAKEOC_NEVER_READY_FILE (while it exists, newly started gateways never get ready).
// `plugins install npm:@openclaw/codex@V --force`, like the real one, installs
// under $OPENCLAW_STATE_DIR/npm/projects/ and rewrites the config with a
// `meta` object; it records npm_config_offline and whether the config already
// named the codex plugin. FAKEOC_INSTALL_EXIT fails it. `models status --json
// --probe --probe-provider P` prints the real CLI's result shape with status
// "ok" for P, or <S> when the probed primary model ends in "-probe-<S>"
// (the probe's own environment passes no FAKEOC_ variable).
package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func record(line string) {
	p := os.Getenv("FAKEOC_RECORD")
	if p == "" {
		return
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return
	}
	fmt.Fprintln(f, line)
	f.Close()
}

func main() {
	args := os.Args[1:]
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	switch {
	case len(args) >= 1 && args[0] == "doctor":
		record("doctor " + strings.Join(args[1:], " ") + " ro=" + os.Getenv("OPENCLAW_CONFIG_READONLY"))
		if os.Getenv("FAKEOC_DOCTOR_BLOCK") == "1" {
			<-sig
			record("doctor-sigterm")
			os.Exit(0)
		}
		code, _ := strconv.Atoi(os.Getenv("FAKEOC_DOCTOR_EXIT"))
		os.Exit(code)
	case len(args) >= 2 && args[0] == "gateway" && args[1] == "run":
		port := ""
		for i, a := range args {
			if a == "--port" && i+1 < len(args) {
				port = args[i+1]
			}
		}
		_, hasPw := os.LookupEnv("OPENCLAW_GATEWAY_PASSWORD")
		record(fmt.Sprintf("gateway pid=%d args=%s password=%v npm_config_offline=%s", os.Getpid(), strings.Join(args, " "),
			hasPw, os.Getenv("npm_config_offline")))
		// FAKEOC_GATEWAY_EXIT: the gateway exits at once with this code
		// (78: the real one's exit for a configuration it refuses).
		if c, err := strconv.Atoi(os.Getenv("FAKEOC_GATEWAY_EXIT")); err == nil {
			os.Exit(c)
		}
		delay, _ := time.ParseDuration(os.Getenv("FAKEOC_READY_DELAY"))
		readyAt := time.Now().Add(delay)
		// FAKEOC_NEVER_READY_FILE: a gateway started while that file exists
		// never answers /readyz 200 (a respawn attempt that cannot get ready).
		if f := os.Getenv("FAKEOC_NEVER_READY_FILE"); f != "" {
			if _, err := os.Stat(f); err == nil {
				readyAt = time.Now().Add(100 * 365 * 24 * time.Hour)
			}
		}
		ln, err := net.Listen("tcp", "127.0.0.1:"+port)
		if err != nil {
			os.Exit(1)
		}
		go func() {
			_ = http.Serve(ln, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.URL.Path == "/readyz" && time.Now().After(readyAt) {
					w.WriteHeader(200)
					_, _ = w.Write([]byte(`{"ready":true}`))
					return
				}
				w.WriteHeader(503)
			}))
		}()
		<-sig
		record(fmt.Sprintf("gateway-sigterm pid=%d", os.Getpid()))
		os.Exit(0)
	case len(args) >= 2 && args[0] == "plugins" && args[1] == "install":
		cfgPath := os.Getenv("OPENCLAW_CONFIG_PATH")
		var cfg map[string]any
		b, _ := os.ReadFile(cfgPath)
		_ = json.Unmarshal(b, &cfg)
		plugins, _ := cfg["plugins"].(map[string]any)
		entries, _ := plugins["entries"].(map[string]any)
		_, named := entries["codex"]
		record(fmt.Sprintf("plugins-install %s offline=%s cache=%v named=%v", strings.Join(args[2:], " "),
			os.Getenv("npm_config_offline"), os.Getenv("npm_config_cache") != "", named))
		if code, _ := strconv.Atoi(os.Getenv("FAKEOC_INSTALL_EXIT")); code != 0 {
			os.Exit(code)
		}
		pkg := filepath.Join(os.Getenv("OPENCLAW_STATE_DIR"), "npm", "projects", "openclaw-codex-fake", "node_modules", "@openclaw", "codex")
		if os.MkdirAll(pkg, 0o700) != nil || os.WriteFile(filepath.Join(pkg, "package.json"), []byte(`{"name":"@openclaw/codex"}`), 0o600) != nil {
			os.Exit(1)
		}
		if cfg == nil {
			cfg = map[string]any{}
		}
		cfg["meta"] = map[string]any{"lastTouchedVersion": "fake"}
		out, _ := json.Marshal(cfg)
		if os.WriteFile(cfgPath, out, 0o600) != nil {
			os.Exit(1)
		}
		os.Exit(0)
	case len(args) >= 2 && args[0] == "models" && args[1] == "status":
		provider := ""
		for i, a := range args {
			if a == "--probe-provider" && i+1 < len(args) {
				provider = args[i+1]
			}
		}
		st := "ok"
		var pc struct {
			Agents struct {
				Defaults struct {
					Model struct {
						Primary string `json:"primary"`
					} `json:"model"`
				} `json:"defaults"`
			} `json:"agents"`
		}
		if b, err := os.ReadFile(os.Getenv("OPENCLAW_CONFIG_PATH")); err == nil && json.Unmarshal(b, &pc) == nil {
			if _, s, ok := strings.Cut(pc.Agents.Defaults.Model.Primary, "-probe-"); ok {
				st = s
			}
		}
		out, _ := json.Marshal(map[string]any{"auth": map[string]any{"probes": map[string]any{"results": []any{
			map[string]any{"provider": provider, "model": provider + "/fake", "status": st}}}}})
		fmt.Println(string(out))
		os.Exit(0)
	default:
		fmt.Fprintln(os.Stderr, "fakeopenclaw: unsupported command")
		os.Exit(2)
	}
}
