package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/stratakv/strata/registry"
)

// localCopyFile is the name, in DataDir, of the node's copy of what it
// needs from etcd to start without it.
const localCopyFile = "registry-copy.json"

// localCopy is the node's own copy of what it read from and wrote to etcd:
// its last registration, the namespaces it served and the gossip addresses
// of the peers it last knew. A node whose etcd is unreachable at start
// (node/degraded.go) starts from it: it restores the namespaces (so clients
// that had them open keep being served) and joins the peers. The file is
// rewritten whole (a temporary file renamed over it) after every change;
// a copy that does not decode is ignored, with a log line, never fatal.
type localCopy struct {
	path string

	// mu guards data and serialises writes of the file.
	mu   sync.Mutex
	data localCopyData
}

// localCopyData is the file's JSON.
type localCopyData struct {
	Node       registry.Node              `json:"node"`
	Namespaces []registry.NamespaceRecord `json:"namespaces"`
	Peers      []string                   `json:"peers"` // gossip addresses
}

// loadLocalCopy reads dir's copy; a missing file is an empty copy, and so
// is one that does not decode (returned with the error, for a log line).
func loadLocalCopy(dir string) (*localCopy, error) {
	c := &localCopy{path: filepath.Join(dir, localCopyFile)}
	b, err := os.ReadFile(c.path)
	if errors.Is(err, os.ErrNotExist) {
		return c, nil
	}
	if err != nil {
		return c, fmt.Errorf("reading the local copy of the registry: %w", err)
	}
	if err := json.Unmarshal(b, &c.data); err != nil {
		c.data = localCopyData{}
		return c, fmt.Errorf("decoding the local copy of the registry %s: %w", c.path, err)
	}
	return c, nil
}

// namespaces returns the namespaces in the copy.
func (c *localCopy) namespaces() []registry.NamespaceRecord {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.data.Namespaces)
}

// peers returns the gossip addresses in the copy.
func (c *localCopy) peers() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.data.Peers)
}

// addNamespace records a namespace (if new) and writes the file.
func (c *localCopy) addNamespace(rec registry.NamespaceRecord) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if slices.ContainsFunc(c.data.Namespaces, func(r registry.NamespaceRecord) bool { return r.ID == rec.ID }) {
		return nil
	}
	c.data.Namespaces = append(c.data.Namespaces, rec)
	return c.saveLocked()
}

// reset replaces the copy with what etcd holds now and writes the file.
// Namespaces only in the copy are kept: a node that served one while etcd
// was down still has its pages.
func (c *localCopy) reset(self registry.Node, nss []registry.NamespaceRecord, peers []string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, r := range c.data.Namespaces {
		if !slices.ContainsFunc(nss, func(n registry.NamespaceRecord) bool { return n.ID == r.ID }) {
			nss = append(nss, r)
		}
	}
	c.data = localCopyData{Node: self, Namespaces: nss, Peers: peers}
	return c.saveLocked()
}

func (c *localCopy) saveLocked() error {
	b, err := json.MarshalIndent(c.data, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the local copy of the registry: %w", err)
	}
	tmp := c.path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("writing the local copy of the registry: %w", err)
	}
	if err := os.Rename(tmp, c.path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing the local copy of the registry: %w", err)
	}
	return nil
}
