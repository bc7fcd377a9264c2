package server

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"slices"
	"time"

	"oce.dev/oce/coordinator/admission"
	"oce.dev/oce/coordinator/api/wire"
	"oce.dev/oce/coordinator/authn"
	"oce.dev/oce/coordinator/certs"
	"oce.dev/oce/coordinator/compute"
	"oce.dev/oce/coordinator/iam"
	"oce.dev/oce/coordinator/policy"
	"oce.dev/oce/coordinator/state"
	"oce.dev/oce/coordinator/store"
)

// Authorization modes (--authorization).
const (
	AuthorizationCedar = "cedar"
	// AuthorizationOff lets every authenticated caller do everything and
	// skips reauthorization. Only with Insecure: it exists to measure what
	// authorization costs (docs/PERFORMANCE.md).
	AuthorizationOff = "off"
)

// ErrNeedCertificates: a member joining a cluster has no certificates of
// the cluster CA (a dev CA of its own could never join).
var ErrNeedCertificates = errors.New("server: a member joining a cluster needs the cluster CA's certificates (--tls-cert, --tls-key, --tls-ca) or --insecure")

// transportSecurity is the TLS a node serves and dials with.
type transportSecurity struct {
	files   certs.Files
	certs   *certs.Reloader
	ca      *x509.CertPool
	devMade bool // the files are the dev CA's, made in the data dir
}

// api is the API listeners' TLS.
func (t *transportSecurity) api() *tls.Config { return certs.ServerTLS(t.certs) }

// peerClient is the TLS of calls to other members.
func (t *transportSecurity) peerClient() *tls.Config { return certs.PeerClientTLS(t.certs, t.ca) }

// raft is the Raft transport's mutual TLS.
func (t *transportSecurity) raft() *store.RaftTLS {
	return &store.RaftTLS{Server: certs.PeerServerTLS(t.certs, t.ca), Client: t.peerClient()}
}

// security prepares TLS: the configured files, or — on a node that
// bootstraps without them — a local CA and member certificate in
// <data-dir>/tls (the dev setup, like the token). --insecure turns TLS off
// with a warning.
func (n *node) security() error {
	c := n.cfg
	if c.Authorization == "" {
		c.Authorization = AuthorizationCedar
		n.cfg.Authorization = AuthorizationCedar
	}
	switch c.Authorization {
	case AuthorizationCedar:
	case AuthorizationOff:
		if !c.Insecure {
			return errors.New("server: --authorization off needs --insecure (it is for measuring, never for serving)")
		}
		n.log.Warn("AUTHORIZATION IS OFF: every authenticated caller may do everything (--authorization off)")
	default:
		return fmt.Errorf("server: unknown --authorization %q (cedar, off)", c.Authorization)
	}
	given := c.TLSCert != "" || c.TLSKey != "" || c.TLSCA != ""
	if c.Insecure {
		if given {
			return errors.New("server: --insecure and TLS files exclude each other")
		}
		n.log.Warn("INSECURE: the API serves plain HTTP and Raft runs over plain TCP (--insecure); bearer tokens cross the network in the clear")
		return nil
	}
	var files certs.Files
	devMade := false
	switch {
	case given:
		if c.TLSCert == "" || c.TLSKey == "" || c.TLSCA == "" {
			return errors.New("server: TLS needs all of --tls-cert, --tls-key and --tls-ca")
		}
		files = certs.Files{CA: c.TLSCA, Cert: c.TLSCert, Key: c.TLSKey}
	case c.Join != "":
		return ErrNeedCertificates
	default:
		var err error
		files, err = certs.EnsureDev(filepath.Join(c.DataDir, certs.DevDir), n.certHosts(), time.Now())
		if err != nil {
			return err
		}
		devMade = true
		n.log.Info("serving TLS with the local CA in the data dir; clients trust its CA file", "caFile", files.CA)
	}
	rl, err := certs.NewReloader(files.Cert, files.Key)
	if err != nil {
		return err
	}
	rl.OnError = func(err error) {
		n.log.Warn("certificate reload failed; serving the previous one", "error", err.Error())
	}
	pool, err := certs.LoadPool(files.CA)
	if err != nil {
		return err
	}
	n.tls = &transportSecurity{files: files, certs: rl, ca: pool, devMade: devMade}
	return nil
}

// certHosts are the names a dev certificate must carry: the advertised
// HTTP and Raft hosts.
func (n *node) certHosts() []string {
	var out []string
	for _, a := range []string{n.httpAdv, n.cfg.RaftAdvertise, n.cfg.RaftAddr} {
		host, _, err := net.SplitHostPort(a)
		if err != nil || host == "" {
			continue
		}
		if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
			continue
		}
		if !slices.Contains(out, host) {
			out = append(out, host)
		}
	}
	return out
}

// wrapTLS serves TLS on a listener when TLS is on.
func (n *node) wrapTLS(ln net.Listener) net.Listener {
	if n.tls == nil {
		return ln
	}
	return tls.NewListener(ln, n.tls.api())
}

// authenticator builds the API's authentication over the store's state.
func (n *node) authenticator(m *state.Machine) (*authn.Authenticator, *wire.OIDCConfig, error) {
	cfg := authn.Config{Bootstrap: n.token, Machine: m}
	var announce *wire.OIDCConfig
	if n.cfg.OIDC.Issuer != "" {
		oc := n.cfg.OIDC
		if id := n.cfg.ConsoleSSO.ClientID; id != "" && id != oc.Audience {
			// the console's sessions call the API with the ID tokens the
			// provider issued to the console's client
			oc.ExtraAudiences = append(slices.Clone(oc.ExtraAudiences), id)
		}
		o, err := authn.NewOIDC(oc)
		if err != nil {
			return nil, nil, err
		}
		cfg.OIDC = o
		announce = &wire.OIDCConfig{Issuer: n.cfg.OIDC.Issuer, Audience: n.cfg.OIDC.Audience}
	}
	return authn.New(cfg), announce, nil
}

// iamDriver is the IAMDriver over the state.
func (n *node) iamDriver(m *state.Machine) iam.Driver {
	if n.cfg.Authorization == AuthorizationOff {
		return allowAll{}
	}
	return iam.NewCedar(m)
}

// reauthorizer is the engine's reauthorization, or nil with authorization off.
func reauthorizer(cfg Config, m *state.Machine, d compute.Driver) *policy.Reauthorizer {
	if cfg.Authorization == AuthorizationOff {
		return nil
	}
	auth := admission.AuthSupport{}
	for t, ms := range d.Capabilities().Topologies {
		auth[t] = slices.Clone(ms)
	}
	return &policy.Reauthorizer{Driver: iam.NewCedar(m), State: m, Auth: auth}
}

// allowAll is the driver of --authorization off.
type allowAll struct{}

func (allowAll) Authorize(_ context.Context, _ iam.Request) (iam.Decision, error) {
	return iam.Decision{Allowed: true}, nil
}

func (allowAll) ValidateRestriction(policy string) error {
	_, err := iam.ParseRestriction("restriction", policy)
	return err
}
