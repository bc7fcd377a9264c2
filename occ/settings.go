package occ

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"oce.dev/oce/coordinator/client"
)

// DefaultNamespace is used when neither -n, OCC_NAMESPACE nor occ.yaml names one.
const DefaultNamespace = "default"

// defaultTokenFile is the token a local coordinator writes beside its data.
const defaultTokenFile = ".oce/coordinator/token"

// maxTokenBytes bounds a token file.
const maxTokenBytes = 4096

// FileConfig is ~/.config/oce/occ.yaml.
type FileConfig struct {
	Server    string `json:"server,omitempty"`
	TokenFile string `json:"tokenFile,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	Output    string `json:"output,omitempty"`
}

// settings are the resolved global options.
type settings struct {
	Server, Token, Namespace, Output string
}

func defaultConfigFile() string {
	if dir, err := os.UserConfigDir(); err == nil {
		return filepath.Join(dir, "oce", "occ.yaml")
	}
	return ""
}

func loadFileConfig(path string) (FileConfig, error) {
	var fc FileConfig
	if path == "" {
		return fc, nil
	}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return fc, nil
	}
	if err != nil {
		return fc, fmt.Errorf("read %s: %w", path, err)
	}
	if err := yaml.UnmarshalStrict(data, &fc); err != nil {
		return fc, fmt.Errorf("parse %s: %w", path, err)
	}
	return fc, nil
}

// resolve applies flags over the environment over occ.yaml over defaults.
func (a *app) resolve(cmd *cobra.Command) (settings, error) {
	cfgPath := a.opts.ConfigFile
	if cfgPath == "" {
		cfgPath = defaultConfigFile()
	}
	fc, err := loadFileConfig(cfgPath)
	if err != nil {
		return settings{}, err
	}
	env := a.opts.Getenv
	s := settings{
		Server:    first(a.server, env("OCC_SERVER"), fc.Server, client.DefaultServer),
		Namespace: first(a.namespace, env("OCC_NAMESPACE"), fc.Namespace, DefaultNamespace),
		Output:    first(a.output, fc.Output, "table"),
	}
	switch s.Output {
	case "table", "json", "yaml":
	default:
		return s, usageError(fmt.Errorf("unknown output format %q (table, json, yaml)", s.Output))
	}
	switch {
	case a.token != "":
		s.Token = a.token
	case a.tokenFile != "":
		s.Token, err = a.readToken(a.tokenFile)
	case env("OCC_TOKEN") != "":
		s.Token = env("OCC_TOKEN")
	case fc.TokenFile != "":
		s.Token, err = a.readToken(fc.TokenFile)
	default:
		p := filepath.Join(a.opts.WorkDir, defaultTokenFile)
		if _, statErr := os.Stat(p); statErr == nil {
			s.Token, err = a.readToken(p)
		}
	}
	return s, err
}

func (a *app) readToken(path string) (string, error) {
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(io.LimitReader(a.opts.Stdin, maxTokenBytes+1))
	} else {
		var f *os.File
		f, err = os.Open(path)
		if err == nil {
			data, err = io.ReadAll(io.LimitReader(f, maxTokenBytes+1))
			f.Close()
		}
	}
	if err != nil {
		return "", fmt.Errorf("read token: %w", err)
	}
	if len(data) > maxTokenBytes {
		return "", fmt.Errorf("token file %s is larger than %d bytes", path, maxTokenBytes)
	}
	tok := strings.TrimSpace(string(data))
	if tok == "" {
		return "", fmt.Errorf("token file %s is empty", path)
	}
	return tok, nil
}

func first(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

type usageErr struct{ error }

func usageError(err error) error { return usageErr{err} }

func (u usageErr) Unwrap() error { return u.error }

func isUsage(err error) bool {
	var u usageErr
	if errors.As(err, &u) {
		return true
	}
	msg := err.Error()
	return strings.HasPrefix(msg, "unknown command") || strings.HasPrefix(msg, "unknown flag") ||
		strings.HasPrefix(msg, "unknown shorthand flag") || strings.HasPrefix(msg, "invalid argument") || strings.Contains(msg, "accepts ") ||
		strings.Contains(msg, "requires at least") || strings.Contains(msg, "required flag")
}
