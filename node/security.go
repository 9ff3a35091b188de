package node

import (
	"bytes"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/stratakv/strata/internal/certs"
	"github.com/stratakv/strata/internal/dial"
)

// The node's transport security: the TLS configuration of its listeners,
// how it dials its peers, and the gossip keys.

// serverTLS is the listeners' TLS configuration, nil without
// Config.TLSCert (plaintext).
func (n *Node) serverTLS() (*tls.Config, error) {
	c := n.cfg
	if c.TLSCert == "" && c.TLSKey == "" {
		if c.TLSClientAuth {
			return nil, fmt.Errorf("verifying client certificates needs the node's own certificate and key: %w", certs.ErrConfig)
		}
		return nil, nil
	}
	return certs.Server(certs.Files{CA: c.TLSCA, Cert: c.TLSCert, Key: c.TLSKey}, c.TLSClientAuth)
}

// peerDial is how the node dials its peers: the admin token, and with TLS
// the node's certificate, checked against TLSCA.
func (c Config) peerDial() dial.Options {
	o := dial.Options{Token: c.AdminToken}
	if c.TLSCert != "" {
		o.CA, o.Cert, o.Key = c.TLSCA, c.TLSCert, c.TLSKey
	}
	return o
}

// ReadGossipKeys reads a gossip key file: base64 keys, one per line, blank
// lines and lines starting with '#' skipped; the first key encrypts.
func ReadGossipKeys(path string) ([][]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading gossip keys: %w", err)
	}
	var keys [][]byte
	for i, line := range strings.Split(string(b), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, err := base64.StdEncoding.DecodeString(line)
		if err != nil {
			return nil, fmt.Errorf("gossip key file %s line %d: %w", path, i+1, err)
		}
		if l := len(k); l != 16 && l != 24 && l != 32 {
			return nil, fmt.Errorf("gossip key file %s line %d: %d bytes, not 16, 24 or 32", path, i+1, l)
		}
		keys = append(keys, k)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("gossip key file %s holds no key", path)
	}
	return keys, nil
}

// gossipKeys are Config.GossipKeyFile's keys, none without one.
func (c Config) gossipKeys() ([][]byte, error) {
	if c.GossipKeyFile == "" {
		return nil, nil
	}
	return ReadGossipKeys(c.GossipKeyFile)
}

// watchGossipKeys re-reads the gossip key file every keyCheckEvery until
// Close and hands the keys to gossip when they changed. A file that does
// not read keeps the keys in force (logged).
func (n *Node) watchGossipKeys(keys [][]byte) {
	n.every(keyCheckEvery, func() {
		now, err := ReadGossipKeys(n.cfg.GossipKeyFile)
		if err == nil && !sameKeys(now, keys) {
			err = n.members.SetKeys(now)
			if err == nil {
				keys = now
				n.log.Info("gossip keys rotated", "keys", len(keys))
			}
		}
		if err != nil {
			n.log.Warn("gossip keys: keeping the keys in force", "err", err)
		}
	})
}

// keyCheckEvery is how often the gossip key file is re-read.
const keyCheckEvery = 2 * time.Second

func sameKeys(a, b [][]byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}
