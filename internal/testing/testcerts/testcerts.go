// Package testcerts makes a CA and certificates at run time, written as
// PEM files into a directory: no key material is committed. Tests use New;
// the load generator (benchmarks/load) uses Make for its TLS systems.
package testcerts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a certificate authority whose certificate is in CAFile.
type CA struct {
	dir    string
	name   string
	cert   *x509.Certificate
	key    *ecdsa.PrivateKey
	t      testing.TB // set by New: Issue fails the test on error
	CAFile string
}

// Pair names a certificate and key written as PEM.
type Pair struct{ Cert, Key string }

// New makes a CA called name in a temporary directory of t, failing t on
// error.
func New(t testing.TB, name string) *CA {
	t.Helper()
	ca, err := Make(t.TempDir(), name)
	if err != nil {
		t.Fatal(err)
	}
	ca.t = t
	return ca
}

// Make makes a CA called name, its certificate written into dir.
func Make(dir, name string) (*CA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	ca := &CA{dir: dir, name: name, cert: cert, key: key, CAFile: filepath.Join(dir, name+"-ca.pem")}
	return ca, writePEM(ca.CAFile, "CERTIFICATE", der)
}

// Issue makes a certificate for 127.0.0.1, ::1 and localhost, good for
// both server and client authentication, called name. Of a CA from New it
// fails the test on error (and returns a zero Pair).
func (ca *CA) Issue(name string) Pair {
	p, err := ca.IssueErr(name)
	if err != nil && ca.t != nil {
		ca.t.Helper()
		ca.t.Fatal(err)
	}
	return p
}

// IssueErr is Issue returning its error.
func (ca *CA) IssueErr(name string) (Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, err
	}
	tmpl := &x509.Certificate{SerialNumber: serial(), Subject: pkix.Name{CommonName: name},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		KeyUsage:    x509.KeyUsageDigitalSignature,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, DNSNames: []string{"localhost"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return Pair{}, err
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return Pair{}, err
	}
	p := Pair{Cert: filepath.Join(ca.dir, ca.name+"-"+name+".pem"), Key: filepath.Join(ca.dir, ca.name+"-"+name+"-key.pem")}
	if err := writePEM(p.Cert, "CERTIFICATE", der); err != nil {
		return Pair{}, err
	}
	return p, writePEM(p.Key, "PRIVATE KEY", kder)
}

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62)) // crypto/rand never fails
	return n
}

func writePEM(path, typ string, der []byte) error {
	if err := os.WriteFile(path, pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der}), 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
