package server

import (
	"encoding/hex"
	"encoding/json"
	"net/http"
	"strings"

	"google.golang.org/grpc/codes"

	"github.com/stratakv/strata/namespace"
	pb "github.com/stratakv/strata/proto/strata/v1"
	"github.com/stratakv/strata/store"
	"github.com/stratakv/strata/tiers"
)

// The prefix query over HTTP in the shape of Mooncake's Conductor Indexer
// API (its docs/source/design/conductor/indexer-api-design.md), so that a
// router that reads that API can use a node as its indexer: POST /query
// (token ids) and POST /query_by_hash (page keys), answered
//
//	{"<tenant>": {"<node>": {"longest_matched": T, "GPU": T, "CPU": T, "DISK": T}}}
//
// in tokens (pages times the namespace's page tokens). Where strata
// differs (docs/design.md §15): the caller is authenticated by its bearer
// token, as on gRPC, and sees its own tenant alone; the namespace is
// named by "namespace_id" (hex) or found among the tenant's by "model",
// "block_size" and "lora_name" (exactly one must match: "cache_salt" is
// not a strata dimension); "seq_hashes" (or "block_hash") are hex
// strings, strata page keys, or with "engine_hashes": true the engine's
// own hash bytes (namespace.KeyFromEngineHash); there is no "DP". With
// "cluster": true the node asks every other live member (query.go) and
// answers the cluster's prefix under instance "cluster", each member's own
// under its node ID.

// indexerRequest is a /query or /query_by_hash body.
type indexerRequest struct {
	Model        string   `json:"model"`
	LoraName     string   `json:"lora_name"`
	BlockSize    uint32   `json:"block_size"`
	TenantID     string   `json:"tenant_id"`
	InstanceID   string   `json:"instance_id"`
	TokenIDs     []uint32 `json:"token_ids"`
	SeqHashes    []string `json:"seq_hashes"`
	BlockHash    []string `json:"block_hash"`
	NamespaceID  string   `json:"namespace_id"`
	EngineHashes bool     `json:"engine_hashes"`
	// Cluster asks for the cluster's answer (QueryPrefixRequest.cluster):
	// under instance "cluster", besides each member's own.
	Cluster bool `json:"cluster"`
}

// clusterInstance is the instance a cluster answer is given under.
const clusterInstance = "cluster"

// mooncakeMedium is the Indexer API's name of each kind of tier.
var mooncakeMedium = map[tiers.Kind]string{tiers.KindGPU: "GPU", tiers.KindHost: "CPU", tiers.KindSSD: "DISK"}

// IndexerHandler serves /query and /query_by_hash.
func (s *Server) IndexerHandler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("POST /query", func(w http.ResponseWriter, r *http.Request) { s.serveIndexer(w, r, false) })
	mux.HandleFunc("POST /query_by_hash", func(w http.ResponseWriter, r *http.Request) { s.serveIndexer(w, r, true) })
	return mux
}

func (s *Server) serveIndexer(w http.ResponseWriter, r *http.Request, byHash bool) {
	out, err := s.indexerQuery(r, byHash)
	w.Header().Set("Content-Type", "application/json")
	if err != nil {
		w.WriteHeader(httpStatus(err))
		_ = json.NewEncoder(w).Encode(map[string]string{"error": err.Error()})
		return
	}
	_ = json.NewEncoder(w).Encode(out)
}

func (s *Server) indexerQuery(r *http.Request, byHash bool) (map[string]map[string]map[string]int, error) {
	tok, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	c, err := s.authenticate(tok)
	if err != nil {
		return nil, err
	}
	var req indexerRequest
	if err := json.NewDecoder(http.MaxBytesReader(nil, r.Body, 16<<20)).Decode(&req); err != nil {
		return nil, badRequest("body: %v", err)
	}
	n, err := s.indexerNamespace(r, c, &req)
	if err != nil {
		return nil, err
	}
	out := map[string]map[string]map[string]int{n.Tenant: {}}
	if req.InstanceID != "" && req.InstanceID != s.cfg.NodeID {
		return out, nil // another instance: nothing of it here
	}
	var keys []namespace.Key
	if byHash {
		keys, err = indexerKeys(n.ID, append(req.SeqHashes, req.BlockHash...), req.EngineHashes)
	} else {
		keys, err = s.tokenKeys(n, req.TokenIDs)
	}
	if err != nil {
		return nil, err
	}
	pt := int(n.PageTokens)
	if req.Cluster {
		resp, err := s.queryCluster(r.Context(), n, keys, tok, false)
		if err != nil {
			return nil, err
		}
		out[n.Tenant][clusterInstance] = indexerHit(resp.GetLongest(), resp.GetTiers(), pt)
		for _, np := range resp.GetNodes() {
			if np.GetError() == "" {
				out[n.Tenant][np.GetNodeId()] = indexerHit(np.GetLongest(), np.GetTiers(), pt)
			}
		}
		return out, nil
	}
	p, err := s.queryPrefix(n, keys)
	if err != nil {
		return nil, err
	}
	out[n.Tenant][s.cfg.NodeID] = indexerHit(uint32(p.longest), p.proto(), pt)
	return out, nil
}

// indexerHit is a prefix in the Indexer API's terms: tokens, per medium.
func indexerHit(longest uint32, tiersOf []*pb.TierPrefix, pageTokens int) map[string]int {
	hit := map[string]int{"longest_matched": int(longest) * pageTokens}
	for _, t := range tiersOf {
		for k, w := range tierWire {
			if w == t.GetTier() && mooncakeMedium[k] != "" {
				hit[mooncakeMedium[k]] = int(t.GetPages()) * pageTokens
			}
		}
	}
	return hit
}

// indexerNamespace is the namespace a request names: by namespace_id, or
// the one of the caller's tenant (tenant_id, for an admin) whose model,
// page tokens and adapter match.
func (s *Server) indexerNamespace(r *http.Request, c caller, req *indexerRequest) (store.Namespace, error) {
	if req.NamespaceID != "" {
		id, err := namespace.ParseID(req.NamespaceID)
		if err != nil {
			return store.Namespace{}, badRequest("namespace_id: %v", err)
		}
		return s.resolve(r.Context(), c, id)
	}
	tenant := req.TenantID
	if !c.admin {
		if tenant != "" && tenant != "default" && tenant != c.tenant {
			return store.Namespace{}, c.mayUse(tenant)
		}
		tenant = c.tenant
	}
	var match []store.Namespace
	for _, st := range s.namespaces(c, tenant) {
		d, ok := s.descriptor(st.ID)
		if ok && d.Model == req.Model && d.PageTokens == req.BlockSize && d.Adapter == req.LoraName {
			match = append(match, st.Namespace)
		}
	}
	switch len(match) {
	case 0:
		return store.Namespace{}, errorf(store.ErrNamespaceNotFound, "no namespace of model %q, block size %d, LoRA %q",
			req.Model, req.BlockSize, req.LoraName)
	case 1:
		return match[0], nil
	}
	return store.Namespace{}, badRequest("%d namespaces match model %q, block size %d, LoRA %q: name one by namespace_id",
		len(match), req.Model, req.BlockSize, req.LoraName)
}

// indexerKeys decodes hex hashes: page keys, or the engine's hashes scoped
// to namespace id.
func indexerKeys(id namespace.ID, hashes []string, engine bool) ([]namespace.Key, error) {
	keys := make([]namespace.Key, len(hashes))
	for i, h := range hashes {
		b, err := hex.DecodeString(h)
		if err != nil {
			return nil, badRequest("hash %d: %v", i, err)
		}
		if engine {
			keys[i] = namespace.KeyFromEngineHash(id, b)
		} else if keys[i], err = namespace.KeyFromBytes(b); err != nil {
			return nil, badRequest("hash %d: %v", i, err)
		}
	}
	return keys, nil
}

// httpStatus is the HTTP status of an error, by its gRPC code.
func httpStatus(err error) int {
	code, _ := grpcCode(err)
	switch code {
	case codes.InvalidArgument:
		return http.StatusBadRequest
	case codes.Unauthenticated:
		return http.StatusUnauthorized
	case codes.PermissionDenied:
		return http.StatusForbidden
	case codes.NotFound:
		return http.StatusNotFound
	case codes.ResourceExhausted:
		return http.StatusRequestEntityTooLarge
	case codes.Unavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}
