package occ

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"sigs.k8s.io/yaml"

	"oce.dev/oce/coordinator/client"
)

// DefaultNamespace is used when neither -n, OCC_NAMESPACE nor occ.yaml names one.
const DefaultNamespace = "default"

// defaultTokenFile is the token a local coordinator writes beside its data,
// defaultCAFile the CA of the TLS it serves by default.
const (
	defaultTokenFile = ".oce/coordinator/token"
	defaultCAFile    = ".oce/coordinator/tls/ca.crt"
)

// maxTokenBytes bounds a token file.
const maxTokenBytes = 4096

// FileConfig is ~/.config/oce/occ.yaml: named contexts (like a
// kubeconfig's) and the current one. The top-level server, tokenFile,
// caFile and namespace are the settings of occ.yaml files from before
// contexts and apply when no context is selected.
type FileConfig struct {
	CurrentContext string    `json:"currentContext,omitempty"`
	Contexts       []Context `json:"contexts,omitempty"`
	Server         string    `json:"server,omitempty"`
	TokenFile      string    `json:"tokenFile,omitempty"`
	CAFile         string    `json:"caFile,omitempty"`
	Namespace      string    `json:"namespace,omitempty"`
	Output         string    `json:"output,omitempty"`
}

// Context is one named coordinator: its URL, the CA that signed its
// certificate, the file holding the token, and a default Namespace.
type Context struct {
	Name      string `json:"name"`
	Server    string `json:"server,omitempty"`
	CAFile    string `json:"ca,omitempty"`
	TokenFile string `json:"tokenFile,omitempty"`
	Namespace string `json:"namespace,omitempty"`
	// TLSServerName is the name checked against the coordinator's
	// certificate instead of Server's host (a port-forward's 127.0.0.1).
	TLSServerName string `json:"tlsServerName,omitempty"`
}

// context returns the named context.
func (fc *FileConfig) context(name string) (*Context, bool) {
	for i := range fc.Contexts {
		if fc.Contexts[i].Name == name {
			return &fc.Contexts[i], true
		}
	}
	return nil, false
}

// settings are the resolved global options.
type settings struct {
	Server, Token, Namespace, Output string
	NoHeaders                        bool
	// CAFile is the CA bundle the client trusts ("" = the system roots).
	CAFile string
	// TLSServerName replaces the server's host in the certificate check.
	TLSServerName string
	// Context names the selected context ("" = none); ConfigPath is occ.yaml.
	Context, ConfigPath string
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

func (a *app) configPath() string {
	if a.opts.ConfigFile != "" {
		return a.opts.ConfigFile
	}
	return defaultConfigFile()
}

// resolve applies flags over the environment over the selected context of
// occ.yaml (or its top-level settings) over defaults.
func (a *app) resolve(cmd *cobra.Command) (settings, error) {
	cfgPath := a.configPath()
	fc, err := loadFileConfig(cfgPath)
	if err != nil {
		return settings{}, err
	}
	env := a.opts.Getenv
	ctx := Context{Server: fc.Server, CAFile: fc.CAFile, TokenFile: fc.TokenFile, Namespace: fc.Namespace}
	name := first(a.contextName, env("OCC_CONTEXT"), fc.CurrentContext)
	if name != "" {
		c, ok := fc.context(name)
		if !ok {
			return settings{}, usageError(fmt.Errorf("no context %q in %s (occ context list)", name, cfgPath))
		}
		ctx = *c
	}
	s := settings{
		Server:        first(a.server, env("OCC_SERVER"), ctx.Server, client.DefaultServer),
		Namespace:     first(a.namespace, env("OCC_NAMESPACE"), ctx.Namespace, DefaultNamespace),
		Output:        first(a.output, fc.Output, outTable),
		NoHeaders:     a.noHeaders,
		CAFile:        first(a.caFile, env("OCC_CA_FILE"), ctx.CAFile),
		Context:       name,
		ConfigPath:    cfgPath,
		TLSServerName: first(a.tlsServerName, env("OCC_TLS_SERVER_NAME"), ctx.TLSServerName),
	}
	if err := checkTLSServerName(s.TLSServerName, s.Server); err != nil {
		return s, usageError(err)
	}
	if s.CAFile == "" {
		if p := filepath.Join(a.opts.WorkDir, defaultCAFile); fileExists(p) {
			s.CAFile = p
		}
	}
	if err := checkOutput(s.Output); err != nil {
		return s, usageError(err)
	}
	switch {
	case a.token != "":
		s.Token = a.token
	case a.tokenFile != "":
		s.Token, err = a.readToken(a.tokenFile)
	case env("OCC_TOKEN") != "":
		s.Token = env("OCC_TOKEN")
	case ctx.TokenFile != "":
		s.Token, err = a.readToken(ctx.TokenFile)
	default:
		p := filepath.Join(a.opts.WorkDir, defaultTokenFile)
		if _, statErr := os.Stat(p); statErr == nil {
			s.Token, err = a.readToken(p)
		}
	}
	return s, err
}

// checkTLSServerName refuses a server name that cannot be a certificate's
// name (a URL, a port) or that a plain-HTTP server would silently ignore.
func checkTLSServerName(name, server string) error {
	if name == "" {
		return nil
	}
	if strings.ContainsAny(name, "/ \t@") || strings.Contains(name, ":") && net.ParseIP(name) == nil {
		return fmt.Errorf("--tls-server-name %q: want a host name or IP address as the certificate names it, without scheme or port "+
			"(e.g. oce-coordinator-api.oce-system.svc)", name)
	}
	if strings.HasPrefix(server, "http://") {
		return fmt.Errorf("--tls-server-name %s: the server %s is not dialed over TLS here; use an https:// server", name, server)
	}
	return nil
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
		strings.Contains(msg, "requires at least") || strings.Contains(msg, "required flag") ||
		strings.Contains(msg, "none of the others can be")
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// saveFileConfig writes occ.yaml (mode 0600: it names token files).
func saveFileConfig(path string, fc FileConfig) error {
	if path == "" {
		return errors.New("no occ.yaml path (set HOME or --config)")
	}
	b, err := yaml.Marshal(fc)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}
