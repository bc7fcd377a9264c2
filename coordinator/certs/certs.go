// Package certs is the coordinator's transport security: a local CA and
// member certificates for the dev setup (made in the data dir like the
// token), certificate files reloaded when they change, and the TLS
// configurations of the API (server TLS) and of the members among
// themselves (mutual TLS by the cluster CA: Raft, write forwarding, join).
package certs

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"time"

	"oce.dev/oce/shared/atomicfile"
)

// Files of a member's TLS material.
type Files struct {
	CA   string // PEM bundle of the cluster CA
	Cert string // the member's certificate (PEM, leaf first)
	Key  string // its private key (PEM, mode 0600)
}

// The dev setup's files, in <data-dir>/tls.
const (
	DevDir     = "tls"
	CAFile     = "ca.crt"
	caKeyFile  = "ca.key"
	CertFile   = "node.crt"
	KeyFile    = "node.key"
	caValidity = 10 * 365 * 24 * time.Hour
	// LeafValidity is how long a dev member certificate is valid; it is
	// issued again once less than RenewBefore remains.
	LeafValidity = 365 * 24 * time.Hour
	RenewBefore  = 30 * 24 * time.Hour
	// ReloadCheck bounds how often the certificate files are looked at.
	ReloadCheck = time.Second
)

// ErrNoCertificate: a PEM file holds no usable certificate or key.
var ErrNoCertificate = errors.New("certs: no certificate")

// NewCA makes a self-signed CA (ECDSA P-256).
func NewCA(cn string, now time.Time) (certPEM, keyPEM []byte, err error) {
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: cn, Organization: []string{"oce"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(caValidity), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	return sign(tmpl, nil, nil)
}

// Issue makes a member certificate signed by the CA, valid for TLS server
// and client use, naming hosts (IPs or DNS names) as its SANs.
func Issue(caCertPEM, caKeyPEM []byte, cn string, hosts []string, now time.Time, validFor time.Duration) (certPEM, keyPEM []byte, err error) {
	caCert, caKey, err := parsePair(caCertPEM, caKeyPEM)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: cn, Organization: []string{"oce"}},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(validFor),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	return sign(tmpl, caCert, caKey)
}

// sign makes a new P-256 key and its certificate from tmpl, signed by
// parent (self-signed when parent is nil), both PEM.
func sign(tmpl, parent *x509.Certificate, parentKey crypto.Signer) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	if parent == nil {
		parent, parentKey = tmpl, key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, &key.PublicKey, parentKey)
	if err != nil {
		return nil, nil, err
	}
	kpem, err := keyToPEM(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), kpem, nil
}

// DevHosts are the names every dev certificate carries.
var DevHosts = []string{"127.0.0.1", "::1", "localhost"}

// EnsureDev makes (once) a local CA in dir and a member certificate for
// hosts (plus DevHosts), issuing the certificate again when it lacks a host
// or nears its end. The CA key stays in dir (mode 0600) so later starts can
// issue again; the CA certificate is what clients trust.
func EnsureDev(dir string, hosts []string, now time.Time) (Files, error) {
	f := Files{CA: filepath.Join(dir, CAFile), Cert: filepath.Join(dir, CertFile), Key: filepath.Join(dir, KeyFile)}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return f, fmt.Errorf("certs: %w", err)
	}
	caPEM, err := os.ReadFile(f.CA)
	caKeyPEM, kerr := os.ReadFile(filepath.Join(dir, caKeyFile))
	switch {
	case errors.Is(err, fs.ErrNotExist) && errors.Is(kerr, fs.ErrNotExist):
		if caPEM, caKeyPEM, err = NewCA("oce local CA", now); err != nil {
			return f, fmt.Errorf("certs: make the local CA: %w", err)
		}
		if err := atomicfile.Write(filepath.Join(dir, caKeyFile), caKeyPEM, 0o600); err != nil {
			return f, err
		}
		if err := atomicfile.Write(f.CA, caPEM, 0o644); err != nil {
			return f, err
		}
	case err != nil || kerr != nil:
		return f, fmt.Errorf("certs: the local CA in %s is incomplete: %w", dir, errors.Join(err, kerr))
	}
	want := append(slices.Clone(DevHosts), hosts...)
	if leafCovers(f.Cert, f.Key, caPEM, want, now) {
		return f, nil
	}
	certPEM, keyPEM, err := Issue(caPEM, caKeyPEM, "oce member", want, now, LeafValidity)
	if err != nil {
		return f, fmt.Errorf("certs: issue the member certificate: %w", err)
	}
	if err := atomicfile.Write(f.Key, keyPEM, 0o600); err != nil {
		return f, err
	}
	return f, atomicfile.Write(f.Cert, certPEM, 0o644)
}

// leafCovers reports whether the existing member certificate chains to the
// CA, names every host and stays valid beyond RenewBefore.
func leafCovers(certFile, keyFile string, caPEM []byte, hosts []string, now time.Time) bool {
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil || pair.Leaf == nil {
		return false
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		return false
	}
	if _, err := pair.Leaf.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: now}); err != nil {
		return false
	}
	if pair.Leaf.NotAfter.Sub(now) < RenewBefore {
		return false
	}
	for _, h := range hosts {
		if h != "" && pair.Leaf.VerifyHostname(h) != nil {
			return false
		}
	}
	return true
}

// LoadPool reads a PEM bundle of CA certificates.
func LoadPool(file string) (*x509.CertPool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("certs: CA file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("%w: %s holds no PEM certificate", ErrNoCertificate, file)
	}
	return pool, nil
}

// Reloader serves a certificate and key from files, reading them again
// when either file changes (a rotated Secret, a renewed dev certificate).
// A change that does not load keeps the previous pair.
type Reloader struct {
	certFile, keyFile string

	mu        sync.Mutex
	pair      *tls.Certificate
	stamp     [2]fileStamp
	checkedAt time.Time
	// OnError, when set, hears of a changed pair that failed to load.
	OnError func(error)
	// CheckEvery bounds how often the files are looked at (default
	// ReloadCheck; tests set 0).
	CheckEvery time.Duration
}

type fileStamp struct {
	mod  time.Time
	size int64
}

func stampOf(path string) fileStamp {
	st, err := os.Stat(path)
	if err != nil {
		return fileStamp{}
	}
	return fileStamp{mod: st.ModTime(), size: st.Size()}
}

// NewReloader loads the pair once; a bad pair is an error.
func NewReloader(certFile, keyFile string) (*Reloader, error) {
	r := &Reloader{certFile: certFile, keyFile: keyFile, CheckEvery: ReloadCheck}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("certs: load %s: %w", certFile, err)
	}
	r.pair = &pair
	r.stamp = [2]fileStamp{stampOf(certFile), stampOf(keyFile)}
	r.checkedAt = time.Now()
	return r, nil
}

// Certificate returns the current pair, reloading it when the files changed.
func (r *Reloader) Certificate() *tls.Certificate {
	r.mu.Lock()
	defer r.mu.Unlock()
	if time.Since(r.checkedAt) < r.CheckEvery {
		return r.pair
	}
	r.checkedAt = time.Now()
	now := [2]fileStamp{stampOf(r.certFile), stampOf(r.keyFile)}
	if now == r.stamp {
		return r.pair
	}
	pair, err := tls.LoadX509KeyPair(r.certFile, r.keyFile)
	if err != nil {
		// Often a half-written rotation: keep serving, look again later.
		if r.OnError != nil {
			r.OnError(err)
		}
		return r.pair
	}
	r.pair, r.stamp = &pair, now
	return r.pair
}

// GetCertificate implements tls.Config.GetCertificate.
func (r *Reloader) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	return r.Certificate(), nil
}

// GetClientCertificate implements tls.Config.GetClientCertificate.
func (r *Reloader) GetClientCertificate(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
	return r.Certificate(), nil
}

// ServerTLS is the API's TLS: the member certificate, TLS 1.2 or later.
func ServerTLS(r *Reloader) *tls.Config {
	return &tls.Config{GetCertificate: r.GetCertificate, MinVersion: tls.VersionTLS12}
}

// PeerServerTLS is a member's listener for other members (Raft): a client
// certificate from the cluster CA is required.
func PeerServerTLS(r *Reloader, ca *x509.CertPool) *tls.Config {
	return &tls.Config{GetCertificate: r.GetCertificate, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: ca,
		MinVersion: tls.VersionTLS13}
}

// PeerClientTLS is a member calling another member (Raft, a forwarded
// write, a join): it presents its certificate and accepts any certificate
// the cluster CA issued. Names are not checked: membership is proven by
// the CA, so one certificate may serve every member.
func PeerClientTLS(r *Reloader, ca *x509.CertPool) *tls.Config {
	return &tls.Config{
		GetClientCertificate: r.GetClientCertificate, MinVersion: tls.VersionTLS12,
		InsecureSkipVerify: true, // replaced by VerifyPeerCertificate: chain to the cluster CA, no name
		VerifyPeerCertificate: func(raw [][]byte, _ [][]*x509.Certificate) error {
			return VerifyChain(raw, ca, x509.ExtKeyUsageServerAuth)
		},
	}
}

// VerifyChain checks that raw (leaf first) chains to ca for usage.
func VerifyChain(raw [][]byte, ca *x509.CertPool, usage x509.ExtKeyUsage) error {
	if len(raw) == 0 {
		return fmt.Errorf("%w: the peer presented none", ErrNoCertificate)
	}
	certs := make([]*x509.Certificate, len(raw))
	for i, b := range raw {
		c, err := x509.ParseCertificate(b)
		if err != nil {
			return err
		}
		certs[i] = c
	}
	inter := x509.NewCertPool()
	for _, c := range certs[1:] {
		inter.AddCert(c)
	}
	_, err := certs[0].Verify(x509.VerifyOptions{Roots: ca, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}})
	return err
}

func keyToPEM(k *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func parsePair(certPEM, keyPEM []byte) (*x509.Certificate, crypto.Signer, error) {
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, nil, fmt.Errorf("certs: CA pair: %w", err)
	}
	signer, ok := pair.PrivateKey.(crypto.Signer)
	if !ok || pair.Leaf == nil {
		return nil, nil, fmt.Errorf("%w: the CA key cannot sign", ErrNoCertificate)
	}
	return pair.Leaf, signer, nil
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 126))
	return n
}
