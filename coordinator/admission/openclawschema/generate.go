package openclawschema

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"oce.dev/oce/shared/netns"
	"oce.dev/oce/shared/runtimes"
)

// FileName is the embedded schema's file in this package.
const FileName = "openclaw.schema.json.gz"

// Generate derives the schema from the installed runtime: it runs the
// pinned `openclaw config schema` inside a loopback-only network namespace
// with a private /tmp and throwaway state, and returns the canonical
// (compact, key-sorted) JSON, gzipped.
func Generate(ctx context.Context, p runtimes.Paths) ([]byte, error) {
	raw, err := run(ctx, p.OpenClawCommand("config", "schema"))
	if err != nil {
		return nil, err
	}
	return Canonical(raw)
}

// Canonical renders a schema document compact with sorted keys, gzipped,
// so a regeneration from the same runtime yields the same bytes.
func Canonical(raw []byte) ([]byte, error) {
	var v any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&v); err != nil {
		return nil, fmt.Errorf("openclawschema: the runtime printed no JSON schema: %w", err)
	}
	scopeDefs(v, "")
	js, err := json.Marshal(v) // maps marshal with sorted keys
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	zw, _ := gzip.NewWriterLevel(&b, gzip.BestCompression)
	if _, err := zw.Write(js); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// RuntimeValidate runs the pinned `openclaw config validate` on doc (the gateway's
// own check without starting it) and reports whether the runtime accepts
// it, with its output.
func RuntimeValidate(ctx context.Context, p runtimes.Paths, doc []byte) (bool, string, error) {
	dir, err := os.MkdirTemp("", "oce-schema-validate-")
	if err != nil {
		return false, "", err
	}
	defer os.RemoveAll(dir)
	cfg := filepath.Join(dir, "openclaw.json")
	if err := os.WriteFile(cfg, doc, 0o600); err != nil {
		return false, "", err
	}
	out, err := runIn(ctx, p, dir, cfg, "config", "validate")
	if err != nil {
		if _, ok := err.(*runError); ok {
			return false, string(out), nil
		}
		return false, "", err
	}
	return true, string(out), nil
}

type runError struct {
	err error
	out []byte
}

func (e *runError) Error() string {
	return fmt.Sprintf("openclaw: %v: %s", e.err, bytes.TrimSpace(e.out))
}

// run runs argv isolated in a throwaway directory.
func run(ctx context.Context, argv []string) ([]byte, error) {
	dir, err := os.MkdirTemp("", "oce-schema-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	out, err := runArgv(ctx, dir, filepath.Join(dir, "openclaw.json"), argv)
	if err != nil {
		return nil, err
	}
	return out, nil
}

// runIn runs the openclaw CLI isolated, with HOME, state and config in dir.
func runIn(ctx context.Context, p runtimes.Paths, dir, cfg string, args ...string) ([]byte, error) {
	return runArgv(ctx, dir, cfg, p.OpenClawCommand(args...))
}

// runArgv runs argv (the pinned Node and its arguments) isolated, with
// HOME, state and config in dir.
func runArgv(ctx context.Context, dir, cfg string, argv []string) ([]byte, error) {
	var cmdArgs []string
	name := argv[0]
	if len(argv) > 1 {
		cmdArgs = argv[1:]
	}
	var stdout, stderr bytes.Buffer
	cmd, err := isolated(name, cmdArgs...)
	if err != nil {
		return nil, err
	}
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + filepath.Join(dir, "home"),
		"OPENCLAW_STATE_DIR=" + filepath.Join(dir, "state"), "OPENCLAW_CONFIG_PATH=" + cfg,
		"OPENCLAW_DISABLE_BONJOUR=1", "OPENCLAW_NO_AUTO_UPDATE=1", "TMPDIR=" + dir}
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := startWait(ctx, cmd); err != nil {
		return stdout.Bytes(), &runError{err: err, out: append(stdout.Bytes(), stderr.Bytes()...)}
	}
	return stdout.Bytes(), nil
}

// isolated runs the CLI in this process's namespace when it already is a
// loopback-only one, else in a fresh one.
var isolated = func(name string, args ...string) (*execCmd, error) {
	if netns.Isolated() == nil {
		return plainCommand(name, args...), nil
	}
	return netns.Command(netns.Options{PrivateTmp: true}, name, args...)
}

// scopeDefs gives every nested schema that carries its own $defs (the
// plugins' config schemas the runtime embeds whole) an $id, so their
// "#/$defs/…" references resolve inside them, as in the plugin's own
// document, instead of against the root.
func scopeDefs(v any, path string) {
	switch t := v.(type) {
	case map[string]any:
		if _, ok := t["$defs"]; ok && path != "" {
			if _, has := t["$id"]; !has {
				t["$id"] = "urn:oce:openclaw-schema" + strings.ReplaceAll(path, "/", ":")
			}
		}
		for k, c := range t {
			scopeDefs(c, path+"/"+k)
		}
	case []any:
		for i, c := range t {
			scopeDefs(c, fmt.Sprintf("%s/%d", path, i))
		}
	}
}
