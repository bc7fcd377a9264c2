package k8stest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// pki holds the file paths of the control plane's certificates and keys,
// and the CA to issue more (the real node's) with.
type pki struct {
	CACert, ServerCert, ServerKey, AdminCert, AdminKey, SAPub, SAKey string

	dir    string
	ca     *x509.Certificate
	caKey  *ecdsa.PrivateKey
	serial int64
}

// makePKI writes a CA, an apiserver serving certificate (for 127.0.0.1,
// 10.0.0.1 and serverIPs), an admin client certificate in system:masters and
// a service-account RSA key pair under dir (Go crypto: no openssl
// dependency).
func makePKI(dir string, serverIPs ...net.IP) (*pki, error) {
	p := &pki{dir: dir, serial: 10,
		CACert: filepath.Join(dir, "ca.crt"), ServerCert: filepath.Join(dir, "apiserver.crt"), ServerKey: filepath.Join(dir, "apiserver.key"),
		AdminCert: filepath.Join(dir, "admin.crt"), AdminKey: filepath.Join(dir, "admin.key"),
		SAPub: filepath.Join(dir, "sa.pub"), SAKey: filepath.Join(dir, "sa.key"),
	}
	now := time.Now().Add(-time.Hour)
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "oce-k8stest-ca"},
		NotBefore: now, NotAfter: now.Add(48 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature | x509.KeyUsageCRLSign}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, &caKey.PublicKey, caKey)
	if err != nil {
		return nil, err
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	if err := writePEM(p.CACert, "CERTIFICATE", caDER); err != nil {
		return nil, err
	}
	p.ca, p.caKey = ca, caKey
	if _, _, err := p.issueTo(p.ServerCert, p.ServerKey, pkix.Name{CommonName: "kube-apiserver"}, x509.ExtKeyUsageServerAuth,
		[]string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		append([]net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1")}, serverIPs...)); err != nil {
		return nil, err
	}
	if _, _, err := p.issueTo(p.AdminCert, p.AdminKey, pkix.Name{CommonName: "admin", Organization: []string{"system:masters"}},
		x509.ExtKeyUsageClientAuth, nil, nil); err != nil {
		return nil, err
	}
	sa, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	pub, err := x509.MarshalPKIXPublicKey(&sa.PublicKey)
	if err != nil {
		return nil, err
	}
	if err := writePEM(p.SAPub, "PUBLIC KEY", pub); err != nil {
		return nil, err
	}
	if err := writePEM(p.SAKey, "RSA PRIVATE KEY", x509.MarshalPKCS1PrivateKey(sa)); err != nil {
		return nil, err
	}
	return p, nil
}

// issue writes a certificate and key named name.crt/name.key under the
// PKI directory and returns their paths.
func (p *pki) issue(name string, subj pkix.Name, usage x509.ExtKeyUsage, dns []string, ips []net.IP) (certPath, keyPath string, err error) {
	return p.issueTo(filepath.Join(p.dir, name+".crt"), filepath.Join(p.dir, name+".key"), subj, usage, dns, ips)
}

func (p *pki) issueTo(certPath, keyPath string, subj pkix.Name, usage x509.ExtKeyUsage, dns []string, ips []net.IP) (string, string, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return "", "", err
	}
	p.serial++
	now := time.Now().Add(-time.Hour)
	t := &x509.Certificate{SerialNumber: big.NewInt(p.serial), Subject: subj, NotBefore: now, NotAfter: now.Add(48 * time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment, ExtKeyUsage: []x509.ExtKeyUsage{usage},
		DNSNames: dns, IPAddresses: ips}
	der, err := x509.CreateCertificate(rand.Reader, t, p.ca, &k.PublicKey, p.caKey)
	if err != nil {
		return "", "", err
	}
	kb, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		return "", "", err
	}
	if err := writePEM(certPath, "CERTIFICATE", der); err != nil {
		return "", "", err
	}
	return certPath, keyPath, writePEM(keyPath, "EC PRIVATE KEY", kb)
}

func writePEM(path, typ string, der []byte) error {
	return os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600)
}
