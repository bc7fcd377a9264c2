package certs

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"oce.dev/oce/shared/atomicfile"
	"oce.dev/oce/shared/codes"
)

// The deploy bundle's names (images/deploy): its namespace and the two
// Services every client and member dials.
const (
	DefaultNamespace = "oce-system"
	// MembersService is the StatefulSet's headless Service: member N is
	// oce-coordinator-N.oce-coordinator (its Raft and HTTP advertise name).
	MembersService = "oce-coordinator"
	// APIService is the Service occ and operators' tooling dial.
	APIService = "oce-coordinator-api"
	// ClusterDomain is the cluster DNS domain the fully qualified API name
	// assumes (kubelet's default).
	ClusterDomain = "cluster.local"
)

// The files of an installation's TLS material: cert-manager's Secret layout
// (ca.crt, tls.crt, tls.key) and the CA key that issued them.
const (
	InstallCAFile    = "ca.crt"
	InstallCAKeyFile = "ca.key"
	InstallCertFile  = "tls.crt"
	InstallKeyFile   = "tls.key"
)

// Errors of an installation's certificates that callers branch on.
var (
	// ErrInvalidInput: a namespace or extra host that cannot be a
	// certificate's name.
	ErrInvalidInput = errors.New("certs: invalid input")
	// ErrExists: an output file exists and overwriting was not asked for.
	ErrExists = errors.New("certs: file exists")
)

// Code is the closed-set code of an error from NewInstall or WriteInstall:
// INVALID_REQUEST for bad input, RESOURCE_CONFLICT for a file in the way,
// INTERNAL otherwise.
func Code(err error) codes.Code {
	switch {
	case errors.Is(err, ErrInvalidInput):
		return codes.InvalidRequest
	case errors.Is(err, ErrExists):
		return codes.ResourceConflict
	}
	return codes.Internal
}

var (
	dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$`)
	dnsName  = regexp.MustCompile(`^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`)
)

// InstallHosts lists every name a user or member dials for the deploy
// bundle installed in namespace: the members' stable names (one wildcard
// covers oce-coordinator-N.oce-coordinator, short and in-namespace .svc),
// the headless Service itself, the API Service in each form a client may
// write, and the loopback names a `kubectl port-forward` is dialed by. It
// is the one source of the names: `coordinator certs`, the openssl recipe
// in docs/OPERATIONS.md and images/deploy/cert-manager are checked against
// it.
func InstallHosts(namespace string) ([]string, error) {
	if !dnsLabel.MatchString(namespace) {
		return nil, fmt.Errorf("%w: namespace %q is not a Kubernetes namespace name (lower-case letters, digits and '-', at most 63)",
			ErrInvalidInput, namespace)
	}
	svc := "." + namespace + ".svc"
	return []string{
		"*." + MembersService, MembersService,
		"*." + MembersService + svc, MembersService + svc,
		APIService, APIService + "." + namespace, APIService + svc, APIService + svc + "." + ClusterDomain,
		"localhost", "127.0.0.1", "::1",
	}, nil
}

// Install is an installation's TLS material, PEM: a new CA and the one
// serving certificate every member presents (server and client auth).
type Install struct {
	CACert, CAKey []byte
	Cert, Key     []byte
	// Hosts are the names the certificate carries.
	Hosts []string
}

// NewInstall makes a CA and a certificate naming InstallHosts(namespace)
// and extra (more names users dial: an ingress or load balancer name, an
// address), valid LeafValidity from now.
func NewInstall(namespace string, extra []string, now time.Time) (Install, error) {
	hosts, err := InstallHosts(namespace)
	if err != nil {
		return Install{}, err
	}
	for _, h := range extra {
		h = strings.ToLower(strings.TrimSpace(h))
		if net.ParseIP(h) == nil && (len(h) > 253 || !dnsName.MatchString(h)) {
			return Install{}, fmt.Errorf("%w: extra host %q is neither a DNS name nor an IP address", ErrInvalidInput, h)
		}
		if !slices.Contains(hosts, h) {
			hosts = append(hosts, h)
		}
	}
	in := Install{Hosts: hosts}
	if in.CACert, in.CAKey, err = NewCA("oce cluster CA ("+namespace+")", now); err != nil {
		return Install{}, fmt.Errorf("certs: make the CA: %w", err)
	}
	if in.Cert, in.Key, err = Issue(in.CACert, in.CAKey, MembersService, hosts, now, LeafValidity); err != nil {
		return Install{}, fmt.Errorf("certs: issue the serving certificate: %w", err)
	}
	return in, nil
}

// InstallFiles are the paths WriteInstall wrote.
type InstallFiles struct {
	CA, CAKey, Cert, Key string
}

// Paths is the four files in dir.
func (f InstallFiles) Paths() []string { return []string{f.CA, f.CAKey, f.Cert, f.Key} }

// WriteInstall writes in to dir (created 0700 when missing), every file
// mode 0600. A file already there is refused with ErrExists, and nothing is
// written, unless force: keys are never replaced by accident.
func WriteInstall(dir string, in Install, force bool) (InstallFiles, error) {
	f := InstallFiles{CA: filepath.Join(dir, InstallCAFile), CAKey: filepath.Join(dir, InstallCAKeyFile),
		Cert: filepath.Join(dir, InstallCertFile), Key: filepath.Join(dir, InstallKeyFile)}
	if !force {
		var there []string
		for _, p := range f.Paths() {
			if _, err := os.Lstat(p); err == nil {
				there = append(there, filepath.Base(p))
			} else if !errors.Is(err, fs.ErrNotExist) {
				return f, fmt.Errorf("certs: %w", err)
			}
		}
		if len(there) > 0 {
			return f, fmt.Errorf("%w: %s already holds %s (--force replaces them)", ErrExists, dir, strings.Join(there, ", "))
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return f, fmt.Errorf("certs: %w", err)
	}
	// Keys first: a certificate on disk always has its key beside it.
	for _, w := range []struct {
		path string
		data []byte
	}{{f.CAKey, in.CAKey}, {f.CA, in.CACert}, {f.Key, in.Key}, {f.Cert, in.Cert}} {
		if err := atomicfile.Write(w.path, w.data, 0o600); err != nil {
			return f, fmt.Errorf("certs: %w", err)
		}
	}
	return f, nil
}
