// Package certs makes strata's TLS configurations from PEM files: the
// node's listeners (gRPC and the raw data plane), and every dialer (the Go
// client, the CLI, node-to-node hints) through internal/dial. The files
// are re-read at each handshake and parsed again when they changed, so a
// rotated certificate, key or CA bundle takes effect on the next
// connection without a restart; a file that no longer parses keeps the
// last good version and the handshake goes on with it.
//
// Verification is the standard library's: a server checks client
// certificates against the CA bundle when ClientAuth is on (mTLS); a
// client checks the server's chain against the CA bundle (the system roots
// when there is none) and its name against the host it dialed. Because the
// CA bundle can change between handshakes, a client verifies in
// VerifyConnection against the bundle of the moment, with the library's
// own verification turned off in its place (never without it).
package certs

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"sync"
)

// Files names the PEM files of one side of a connection. Zero fields are
// unused.
type Files struct {
	// CA is a bundle of CA certificates: what a client checks the server's
	// certificate against (default: the system roots), and what a server
	// checks client certificates against (required with ClientAuth).
	CA string
	// Cert and Key are this side's certificate chain and private key:
	// required on a server, and on a client of a node that verifies client
	// certificates.
	Cert, Key string
}

// Enabled reports whether any file is named: TLS is on.
func (f Files) Enabled() bool { return f.CA != "" || f.Cert != "" || f.Key != "" }

// ErrConfig is returned when the files named do not make a usable
// configuration (a key without a certificate, a server without either, a
// file that does not parse).
var ErrConfig = errors.New("certs: bad TLS configuration")

// source holds the parsed files and re-reads them when they change.
type source struct {
	files Files

	mu   sync.Mutex
	seen [3][]byte        // guarded by mu: CA, Cert and Key as last parsed
	cert *tls.Certificate // guarded by mu; nil without Cert
	pool *x509.CertPool   // guarded by mu; nil without CA
}

func newSource(f Files) (*source, error) {
	if (f.Cert == "") != (f.Key == "") {
		return nil, fmt.Errorf("%w: a certificate needs its key and a key its certificate", ErrConfig)
	}
	s := &source{files: f}
	if err := s.reload(); err != nil {
		return nil, err
	}
	return s, nil
}

// current is the certificate and CA pool as the files are now.
func (s *source) current() (*tls.Certificate, *x509.CertPool) {
	_ = s.reload() // a bad new version keeps the last good one
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cert, s.pool
}

// reload re-reads the files (a few kilobytes, once per handshake, which
// costs far more) and parses them again when any changed.
func (s *source) reload() error {
	var now [3][]byte
	for i, p := range []string{s.files.CA, s.files.Cert, s.files.Key} {
		if p == "" {
			continue
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("%w: %v", ErrConfig, err)
		}
		now[i] = b
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.seen[0] != nil || s.seen[1] != nil {
		if bytes.Equal(now[0], s.seen[0]) && bytes.Equal(now[1], s.seen[1]) && bytes.Equal(now[2], s.seen[2]) {
			return nil
		}
	}
	cert, pool, err := parse(s.files, now)
	if err != nil {
		return err
	}
	s.seen, s.cert, s.pool = now, cert, pool
	return nil
}

func parse(f Files, pems [3][]byte) (*tls.Certificate, *x509.CertPool, error) {
	var cert *tls.Certificate
	if f.Cert != "" {
		c, err := tls.X509KeyPair(pems[1], pems[2])
		if err != nil {
			return nil, nil, fmt.Errorf("%w: loading %s and %s: %v", ErrConfig, f.Cert, f.Key, err)
		}
		cert = &c
	}
	var pool *x509.CertPool
	if f.CA != "" {
		pool = x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pems[0]) {
			return nil, nil, fmt.Errorf("%w: %s holds no PEM certificate", ErrConfig, f.CA)
		}
	}
	return cert, pool, nil
}

// Server is the configuration of a TLS listener: f's certificate, and,
// with clientAuth, client certificates required and verified against f's
// CA bundle (mTLS). It offers ALPN "h2" (gRPC requires it; the raw data
// plane's clients offer none, which TLS allows).
func Server(f Files, clientAuth bool) (*tls.Config, error) {
	if f.Cert == "" {
		return nil, fmt.Errorf("%w: a TLS server needs a certificate and key", ErrConfig)
	}
	if clientAuth && f.CA == "" {
		return nil, fmt.Errorf("%w: verifying client certificates needs a CA bundle", ErrConfig)
	}
	s, err := newSource(f)
	if err != nil {
		return nil, err
	}
	c := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"h2"}}
	c.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
		cert, pool := s.current()
		now := &tls.Config{MinVersion: tls.VersionTLS12, NextProtos: []string{"h2"}, Certificates: []tls.Certificate{*cert}}
		if clientAuth {
			now.ClientAuth, now.ClientCAs = tls.RequireAndVerifyClientCert, pool
		}
		return now, nil
	}
	return c, nil
}

// Client is the configuration of a TLS dialer of serverName (a host name
// or IP address the server's certificate must name): the server verified
// against f's CA bundle (default the system roots), and f's certificate, if
// any, offered to servers that ask for one.
func Client(f Files, serverName string) (*tls.Config, error) {
	if serverName == "" {
		return nil, fmt.Errorf("%w: no server name to verify", ErrConfig)
	}
	s, err := newSource(f)
	if err != nil {
		return nil, err
	}
	// Verified in VerifyConnection, against the CA bundle of the moment.
	c := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: serverName, InsecureSkipVerify: true}
	c.VerifyConnection = func(cs tls.ConnectionState) error {
		_, pool := s.current()
		return verify(cs, pool, serverName)
	}
	c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
		if cert, _ := s.current(); cert != nil {
			return cert, nil
		}
		return &tls.Certificate{}, nil // none: the server decides
	}
	return c, nil
}

// verify checks the server's chain against roots (nil: the system's) and
// its name, as crypto/tls does when it verifies by itself.
func verify(cs tls.ConnectionState, roots *x509.CertPool, name string) error {
	if len(cs.PeerCertificates) == 0 {
		return errors.New("certs: the server sent no certificate")
	}
	inter := x509.NewCertPool()
	for _, c := range cs.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	_, err := cs.PeerCertificates[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter,
		DNSName: name, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}})
	if err != nil {
		return fmt.Errorf("certs: verifying the server's certificate for %s: %w", name, err)
	}
	return nil
}
