"""vLLM-style automatic prefix caching for the simulator: block hashes, an LRU of cached blocks.

A prompt's tokens are cut into blocks of ``block_size`` tokens; block ``i``'s hash chains the hash
of block ``i − 1`` with block ``i``'s own tokens, so two prompts share a cached block only when
everything before it is the same too (vLLM's rule). Only full blocks are hashed (a partial last
block is never cached).

At admission the scheduler asks :meth:`PrefixCache.match` how many leading blocks are cached:
those tokens skip prefill (at least one token is always computed, as in vLLM, so a full hit still
yields its first token from a step). When a sequence's prefill completes its blocks enter the cache
(:meth:`PrefixCache.insert`); the cache holds at most ``capacity_blocks`` blocks
(``kv_cache_tokens // block_size``: the KV budget) and evicts the least recently used.

Shared blocks count once in the KV budget, as in vLLM's paged KV cache: the scheduler
(:mod:`.batching`) keeps a reference count per block hash held by running sequences. A sequence
admitted with ``m`` cached leading blocks holds them by reference (a block no running sequence
holds yet is charged once, when it leaves the free pool); the rest of its context is its own. When
its prefill completes its own full prompt blocks join the shared pool (a block another sequence
computed at the same time stays a private copy, as in vLLM). So with a shared system prompt of
``S`` cached tokens, ``n`` sequences of context ``L`` hold ``S + n (L − S)`` KV tokens, not
``n L``. A block still held by a running sequence is never evicted from the cache.

Counters, in tokens as vLLM counts them (``vllm:prefix_cache_queries_total``,
``vllm:prefix_cache_hits_total``): every first admission queries its prompt tokens and hits its
cached ones. With the cache off the scheduler keeps an empty cache (capacity 0, no hashing), so
queries still count and hits stay 0: a measured 0 % rather than nothing.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Container, Sequence
from itertools import islice


def block_hashes(tokens: Sequence[str], block_size: int) -> tuple[int, ...]:
    """The chained hash of every full ``block_size``-token block of ``tokens`` (in order)."""
    hashes: list[int] = []
    parent = 0
    for start in range(0, len(tokens) - block_size + 1, block_size):
        parent = hash((parent, tuple(tokens[start : start + block_size])))
        hashes.append(parent)
    return tuple(hashes)


class PrefixCache:
    """An LRU of block hashes, plus the query/hit counters (tokens)."""

    def __init__(self, capacity_blocks: int, block_size: int) -> None:
        if capacity_blocks < 0 or block_size < 1:
            raise ValueError("capacity_blocks must be ≥ 0 and block_size ≥ 1")
        self.capacity_blocks = capacity_blocks
        self.block_size = block_size
        self._blocks: OrderedDict[int, None] = OrderedDict()
        self.queries_tokens = 0
        self.hits_tokens = 0
        self.evictions = 0

    def __len__(self) -> int:
        return len(self._blocks)

    def peek(self, hashes: Sequence[int]) -> int:
        """How many leading blocks of ``hashes`` are cached, touching none (an admission check)."""
        found = 0
        for h in hashes:
            if h not in self._blocks:
                break
            found += 1
        return found

    def match(self, hashes: Sequence[int]) -> int:
        """How many leading blocks of ``hashes`` are cached (each one found is touched)."""
        found = 0
        for h in hashes:
            if h not in self._blocks:
                break
            self._blocks.move_to_end(h)
            found += 1
        return found

    def count(self, prompt_tokens: int, cached_tokens: int) -> None:
        """Count one request's query (its prompt tokens) and hit (its cached tokens)."""
        self.queries_tokens += prompt_tokens
        self.hits_tokens += cached_tokens

    def insert(self, hashes: Sequence[int], pinned: Container[int] = ()) -> None:
        """Cache ``hashes`` (most recently used), evicting the least recently used past capacity;
        a block in ``pinned`` (held by a running sequence) is never evicted."""
        for h in hashes:
            if h in self._blocks:
                self._blocks.move_to_end(h)
            else:
                self._blocks[h] = None
        excess = len(self._blocks) - self.capacity_blocks
        if excess > 0:
            victims = list(islice((h for h in self._blocks if h not in pinned), excess))
            for h in victims:
                del self._blocks[h]
            self.evictions += len(victims)

    def clear(self) -> None:
        """Forget every block (a crash: the GPU memory is gone); the counters stay."""
        self._blocks.clear()
