"""What a cache-aware router asks the cluster besides the nodes' KV event
streams (docs/design.md §15): how much of a prompt the cluster holds, per
tier (``Namespace.query_prefix``), and a namespace's pages on one node at a
point of its stream (``Namespace.snapshot``), for a consumer that joins
late: apply the dump, then the stream from ``next_seq``."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Dict, List, Optional, Sequence, Tuple

from . import errors as E
from ._proto import strata_pb2 as pb
from .client import _Deadline

if TYPE_CHECKING:  # pragma: no cover
    from .namespace import Namespace

__all__ = ["NodePrefix", "PrefixQuery", "Snapshot"]

# A Tier number's name (pb.Tier), as the answers name tiers.
TIER_NAMES = {pb.TIER_GPU: "gpu", pb.TIER_HOST: "host", pb.TIER_SSD: "ssd"}


def _tiers(tps) -> Dict[str, int]:
    return {TIER_NAMES.get(t.tier, str(t.tier)): int(t.pages) for t in tps}


@dataclass
class NodePrefix:
    """One member's own part of a cluster answer."""

    node_id: str
    longest: int  # pages from the first the member holds
    tiers: Dict[str, int]  # per tier: pages from the first all in it
    held: int  # pages of the prompt the member holds, anywhere in it
    error: str = ""  # why it did not answer ("" it did): its pages count as not held


@dataclass
class PrefixQuery:
    """The cluster's answer to a prefix query: how many pages from the
    first some member holds (``longest``), per tier how many from the first
    some member holds in it, and each member's own answer."""

    longest: int
    tiers: Dict[str, int]
    pages: int  # pages asked about
    page_tokens: int
    nodes: List[NodePrefix] = field(default_factory=list)
    # With per_key: each key's fastest tier ("gpu", "host", "ssd"), None
    # where no member holds it.
    key_tiers: Optional[List[Optional[str]]] = None

    @property
    def longest_tokens(self) -> int:
        return self.longest * self.page_tokens


@dataclass
class Snapshot:
    """A namespace's pages on one node at one point of its tenant's KV
    event stream: every change of the batches before ``next_seq`` is in
    ``pages``, none of those from it on."""

    node_id: str
    next_seq: int
    incarnation: int
    topic: str
    pages: List[Tuple[bytes, Optional[bytes], str]]  # (key, parent or None, tier)


def query_prefix(ns: "Namespace", keys: Optional[Sequence[bytes]], tokens: Optional[Sequence[int]],
                 per_key: bool, timeout: Optional[float]) -> PrefixQuery:
    c = ns.client
    r = c._routing()
    dl = _Deadline(timeout)
    req = pb.QueryPrefixRequest(namespace_id=ns.id, keys=[bytes(k) for k in keys or ()],
                                token_ids=[int(t) for t in tokens or ()], cluster=True, per_key=per_key)
    last: Optional[Exception] = None
    for i, nid in enumerate(r.view.ids):
        if nid in r.down:
            continue
        try:
            # The node asks the others within its own bound (5 s).
            resp = c._node(r, i).admin.QueryPrefix(req, timeout=dl.node(c.node_timeout + 5.0), metadata=c._md)
        except Exception as e:
            err = E.from_rpc("query prefix", e, nid)
            if not E.node_failed(err):
                raise err from None
            c._suspect(nid)
            last = err
            continue
        q = PrefixQuery(longest=int(resp.longest), tiers=_tiers(resp.tiers), pages=int(resp.pages),
                        page_tokens=int(resp.page_tokens),
                        nodes=[NodePrefix(node_id=n.node_id, longest=int(n.longest), tiers=_tiers(n.tiers),
                                          held=int(n.held), error=n.error) for n in resp.nodes])
        if per_key:
            q.key_tiers = [TIER_NAMES.get(t) for t in bytes(resp.key_tiers)]
        return q
    raise last or E.UnavailableError("query prefix: no node to ask")


def snapshot(ns: "Namespace", node_id: Optional[str], page_size: int, timeout: Optional[float]) -> Snapshot:
    c = ns.client
    r = c._routing()
    ids = list(r.view.ids)
    if node_id is None:
        alive = [nid for nid in ids if nid not in r.down]
        if not alive:
            raise E.UnavailableError("snapshot: no node to ask")
        node_id = alive[0]
    if node_id not in ids:
        raise E.InvalidArgumentError(f"snapshot: node {node_id} is not in the view")
    node = c._node(r, ids.index(node_id))
    snap = Snapshot(node_id=node_id, next_seq=0, incarnation=0, topic="", pages=[])
    try:
        for resp in node.admin.SnapshotKeys(pb.SnapshotKeysRequest(namespace_id=ns.id, page_size=page_size),
                                            timeout=timeout, metadata=c._md):
            snap.next_seq, snap.incarnation, snap.topic = int(resp.next_seq), int(resp.incarnation), resp.topic
            snap.pages.extend((bytes(k.key), bytes(k.parent_key) or None, TIER_NAMES.get(k.tier, str(k.tier)))
                              for k in resp.keys)
    except Exception as e:
        raise E.from_rpc("snapshot", e, node_id) from None
    return snap
