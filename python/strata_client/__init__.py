"""strata_client: the Python client of strata, a distributed KV-cache store.

Installed with ``pip install ./python`` (the ``strata-client`` package; its
version is ``__version__`` below, read by python/pyproject.toml).

    from strata_client import Client, Descriptor

    with Client("127.0.0.1:7070") as c:
        ns = c.open(Descriptor(tenant="acme", model="meta-llama/Llama-3.1-8B",
                               dtype="bf16", page_tokens=16, num_layers=32,
                               num_kv_heads=8, head_dim=128))
        keys = ns.page_keys(tokens)
        ns.put_chain(keys, pages)
        hit, present, lease = ns.lookup(keys, lease=True)
        bufs = ns.get(keys[:hit], lease=lease)

Engine adapters: strata_client.sglang (HiCacheStorage backend) and
strata_client.lmcache (LMCache remote connector), strata_client.vllm (vLLM
KV connector); prefill–decode transfer rooms: Client.open_room and the
other room calls (strata_client.transfer); non-blocking calls: strata_client.futures; descriptor helpers from
engine settings: strata_client.engines.
"""

from .buffers import ScatterBuffer
from .client import Client, Cluster, EventInfo, Lease, LookupResult, Member, Page, PutResult, chain_pages
from .namespace import Namespace
from .indexer import NodePrefix, PrefixQuery, Snapshot
from .descriptor import (
    ComputeProfile,
    Descriptor,
    DescriptorError,
    PageFormat,
    PageSegment,
    key_from_engine_hash,
    page_format_string,
    page_keys,
    parse_page_format,
    sglang_page_hash,
    sglang_page_hashes,
    vllm_block_hash,
    vllm_block_hashes,
    vllm_none_hash,
)
from .errors import (
    DeadlineError,
    InvalidArgumentError,
    LeaseExpiredError,
    NamespaceMismatchError,
    NamespaceNotFoundError,
    NoRoomError,
    PageNotPresentError,
    PinQuotaError,
    RoomBusyError,
    StaleAttemptError,
    StrataError,
    TenantDeniedError,
    TooManyRoomsError,
    TransferAbortedError,
    TransferExpiredError,
    TransferStateError,
    UnauthenticatedError,
    UnavailableError,
    VersionMismatchError,
)
from .placement import View
from .transfer import Grant, Room, RoomInfo

__version__ = "0.1.0"

__all__ = [
    "Client", "Cluster", "EventInfo", "Lease", "NodePrefix", "PrefixQuery", "Snapshot", "LookupResult", "Member", "Namespace", "Page", "PutResult", "ScatterBuffer",
    "chain_pages", "ComputeProfile", "Descriptor", "DescriptorError", "PageFormat", "PageSegment",
    "key_from_engine_hash", "page_format_string", "page_keys", "parse_page_format",
    "sglang_page_hash", "sglang_page_hashes", "vllm_block_hash", "vllm_block_hashes", "vllm_none_hash",
    "InvalidArgumentError", "LeaseExpiredError", "NamespaceNotFoundError", "StrataError", "TenantDeniedError",
    "UnauthenticatedError", "UnavailableError", "VersionMismatchError", "View",
    "Grant", "Room", "RoomInfo", "DeadlineError", "NamespaceMismatchError", "NoRoomError", "PageNotPresentError",
    "PinQuotaError", "RoomBusyError", "StaleAttemptError", "TooManyRoomsError", "TransferAbortedError",
    "TransferExpiredError", "TransferStateError",
]
