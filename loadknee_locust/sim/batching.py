"""The continuous-batching scheduler: pure, synchronous, clock-free (one call = one engine step).

Each :meth:`Scheduler.step` models one iteration of a vLLM-like engine:

1. **Preempt** (recompute): while the running sequences' KV tokens plus one new token each would
   exceed ``kv_cache_tokens``, the newest running sequence gives back its KV cache and goes to the
   *front* of the waiting queue (vLLM's policy). It keeps the tokens it has already emitted; when
   readmitted it prefills prompt + those tokens again.
2. **Token budget** (chunked prefill, as vLLM V1): a step computes at most
   ``max_num_batched_tokens`` tokens. Decoding sequences take one each; prefills already under
   way continue with what is left; then new sequences are admitted.
3. **Admit** FIFO from the waiting queue while a slot is free (``max_num_seqs``), budget is
   left, and the head's context + 1 fits in the KV budget (its whole context is reserved at
   admission) — with ``kv_reserve_max_tokens``, its prompt + max_tokens beside the running
   sequences' (TGI/SGLang-style, so it never needs preempting); the head that does not fit
   blocks the rest (no skipping). A prompt longer than the budget left is prefilled in chunks
   over several steps. With ``enable_prefix_caching`` the head's leading cached blocks skip
   prefill (:mod:`.prefixcache`); its blocks are cached once its prefill completes. Those
   blocks are shared: each counts once in the KV budget however many running sequences hold
   it (vLLM's reference-counted paged KV), so a shared system prompt raises the KV limit.
4. **Cost**: ``decode_base_ms + decode_per_seq_ms × sequences computed + prefill_ms_per_token ×
   prefilled tokens`` — the step slows as the batch grows, so throughput saturates.
5. **Emit**: every decoding sequence, and every sequence whose prefill completes in this step
   (prefill yields the first token), produces one token; those reaching their stop point finish
   and free their KV.

The async driver (:mod:`.engine`) sleeps for the returned duration, then delivers the tokens.
"""

from __future__ import annotations

from collections import Counter, deque
from dataclasses import dataclass, field
from typing import Any, Literal

from loadknee_locust.sim.params import SimParams
from loadknee_locust.sim.prefixcache import PrefixCache

FinishReason = Literal["length", "stop"]


@dataclass(eq=False)
class Sequence:
    """One prompt being served (a batch request holds several). Mutable engine state."""

    seq_id: int
    prompt_tokens: int
    stop_at: int  # completion tokens at which it finishes (EOS or max_tokens)
    finish_reason: FinishReason
    owner: Any = None  # the driver's request object
    reserve: int = 0  # KV tokens it holds a claim on with kv_reserve_max_tokens (prompt + max)
    index: int = 0  # choice index within its request
    generated: int = 0
    kv_tokens: int = 0  # tokens held in the KV cache; 0 while waiting
    pending_prefill: int = 0  # context tokens not yet prefilled in this admission
    preemptions: int = 0
    admissions: int = 0
    last_token_s: float = 0.0  # when its last token was delivered (the driver's clock)
    block_hashes: tuple[int, ...] = ()  # the prompt's full blocks (prefix caching on)
    cached_tokens: int = 0  # prompt tokens its first admission found in the prefix cache
    held_blocks: tuple[int, ...] = ()  # shared KV blocks it holds by reference (caching on)

    @property
    def context(self) -> int:
        return self.prompt_tokens + self.generated


@dataclass(frozen=True)
class StepResult:
    """What one engine step did; ``emitted`` is in running order."""

    duration_s: float
    batch: int
    prefill_tokens: int
    emitted: tuple[Sequence, ...]
    finished: tuple[Sequence, ...]
    admitted: tuple[Sequence, ...]
    preempted: tuple[Sequence, ...]
    peak_kv_tokens: int


@dataclass
class Scheduler:
    """Waiting queue + running batch + KV accounting for one simulated engine."""

    params: SimParams
    waiting: deque[Sequence] = field(default_factory=deque)
    running: list[Sequence] = field(default_factory=list)
    kv_used: int = 0
    preemptions_total: int = 0
    prefix_cache: PrefixCache | None = None
    #: shared KV blocks held by running sequences → how many hold each (each counts once)
    shared_refs: Counter[int] = field(default_factory=Counter)
    #: sequences emitting their last token in the step now computing: already out of
    #: ``running`` (their KV is released), still in the batch until the step ends
    finishing: int = 0

    def __post_init__(self) -> None:
        if self.prefix_cache is None:  # off: it holds nothing, but still counts the queries
            p = self.params
            blocks = p.kv_cache_tokens // p.block_size if p.enable_prefix_caching else 0
            self.prefix_cache = PrefixCache(blocks, p.block_size)

    @property
    def in_batch(self) -> int:
        """Sequences in the batch the engine is computing now: what vLLM's running gauge counts.
        A sequence that finishes at the end of this step still runs until then, so a scrape
        taken during the step counts it (``len(running)`` alone read one low at every step where
        a sequence finished, so the gauge sat below the slots a saturated server filled)."""
        return len(self.running) + self.finishing

    @property
    def has_work(self) -> bool:
        return bool(self.running or self.waiting)

    @property
    def kv_usage(self) -> float:
        """KV-cache usage, 0–1 (vLLM's ``kv_cache_usage_perc``)."""
        return self.kv_used / self.params.kv_cache_tokens

    @property
    def reserved(self) -> int:
        """KV tokens the running sequences claim (prompt + max_tokens each, with reservation);
        a shared block counts once."""
        own = sum(seq.reserve - self._held_tokens(seq) for seq in self.running)
        return own + self.params.block_size * len(self.shared_refs)

    def can_accept(self, n: int) -> bool:
        """Whether ``n`` more sequences may enter: at most ``max_num_seqs + max_waiting`` in all.

        So ``max_waiting`` = 0 means "no queue": a request is taken only if a slot is free.
        """
        in_system = len(self.running) + len(self.waiting) + n
        return in_system <= self.params.max_num_seqs + self.params.max_waiting

    def add(self, seqs: list[Sequence]) -> None:
        self.waiting.extend(seqs)

    def remove(self, seqs: list[Sequence]) -> None:
        """Drop sequences whose client went away, freeing their slots and KV."""
        gone = set(map(id, seqs))
        for seq in self.running:
            if id(seq) in gone:
                self._release(seq)
        self.running = [s for s in self.running if id(s) not in gone]
        self.waiting = deque(s for s in self.waiting if id(s) not in gone)

    def clear(self) -> list[Sequence]:
        """Drop everything (a crash); returns what was in flight."""
        lost = [*self.running, *self.waiting]
        self.running, self.waiting, self.kv_used = [], deque(), 0
        self.shared_refs.clear()
        if self.prefix_cache is not None:
            self.prefix_cache.clear()
        for seq in lost:
            seq.kv_tokens, seq.held_blocks = 0, ()
        return lost

    def step(self) -> StepResult | None:
        """Run one engine step (see the module docstring); None when there is nothing to do."""
        p = self.params
        self.finishing = 0
        preempted = self._preempt()
        decoding = [s for s in self.running if s.pending_prefill == 0]
        emitting = list(decoding)
        tokens_left = p.max_num_batched_tokens - len(decoding)
        computed = len(decoding)
        prefill = 0
        for seq in self.running:  # chunked prefills already under way continue first
            if seq.pending_prefill and tokens_left > 0:
                chunk = min(seq.pending_prefill, tokens_left)
                seq.pending_prefill -= chunk
                tokens_left -= chunk
                prefill += chunk
                computed += 1
                if seq.pending_prefill == 0:
                    emitting.append(seq)
                    self._cache_blocks(seq)
        admitted: list[Sequence] = []
        while self.waiting and len(self.running) < p.max_num_seqs and tokens_left > 0:
            head = self.waiting[0]
            hit, held = self._reusable(head)
            # KV tokens it adds: its own context, plus the held blocks no running one holds yet
            spared = p.block_size * sum(1 for h in held if self.shared_refs[h])
            if self.kv_used + len(self.running) + head.context - spared + 1 > p.kv_cache_tokens:
                break
            if p.kv_reserve_max_tokens and (
                self.reserved + head.reserve - spared > p.kv_cache_tokens
            ):
                break  # its prompt + max_tokens would not fit beside the running ones' claims
            self.waiting.popleft()
            head.kv_tokens = head.context
            head.admissions += 1
            self.kv_used += head.kv_tokens - spared
            self._hold(head, held)
            to_compute = head.context - self._cached_prefix(head, hit)
            chunk = min(to_compute, tokens_left)
            head.pending_prefill = to_compute - chunk
            tokens_left -= chunk
            prefill += chunk
            computed += 1
            self.running.append(head)
            admitted.append(head)
            if head.pending_prefill == 0:
                emitting.append(head)
                self._cache_blocks(head)

        if computed == 0:
            return None
        duration_ms = (
            p.decode_base_ms + p.decode_per_seq_ms * computed + p.prefill_ms_per_token * prefill
        )
        for seq in emitting:
            seq.generated += 1
            seq.kv_tokens += 1
        self.kv_used += len(emitting)
        peak = self.kv_used
        finished = tuple(s for s in emitting if s.generated >= s.stop_at)
        if finished:
            for seq in finished:
                self._release(seq)
            self.running = [s for s in self.running if s.generated < s.stop_at]
            self.finishing = len(finished)
        return StepResult(
            duration_s=duration_ms / 1000.0,
            batch=computed,
            prefill_tokens=prefill,
            emitted=tuple(emitting),
            finished=finished,
            admitted=tuple(admitted),
            preempted=tuple(preempted),
            peak_kv_tokens=peak,
        )

    def _reusable(self, seq: Sequence) -> tuple[int, tuple[int, ...]]:
        """Admitting ``seq`` now: the tokens the prefix cache spares (at least one token is left
        to compute, as in vLLM) and the cached full blocks it would hold; changes nothing."""
        cache = self.prefix_cache
        if cache is None or not seq.block_hashes:
            return 0, ()
        hit = max(0, min(cache.peek(seq.block_hashes) * cache.block_size, seq.context - 1))
        return hit, seq.block_hashes[: hit // cache.block_size]

    def _cached_prefix(self, seq: Sequence, hit: int) -> int:
        """Touch ``seq``'s cached blocks and count the query on a first admission; ``hit``."""
        cache = self.prefix_cache
        if cache is None:
            return 0
        cache.match(seq.block_hashes)
        if seq.admissions == 1:
            seq.cached_tokens = hit
            cache.count(seq.prompt_tokens, hit)
        return hit

    def _held_tokens(self, seq: Sequence) -> int:
        return self.params.block_size * len(seq.held_blocks)

    def _hold(self, seq: Sequence, blocks: tuple[int, ...]) -> None:
        """``seq`` holds ``blocks`` too (by reference)."""
        seq.held_blocks += blocks
        self.shared_refs.update(blocks)

    def _release(self, seq: Sequence) -> None:
        """Free ``seq``'s KV: its own tokens, and each shared block no other running one holds."""
        self.kv_used -= seq.kv_tokens - self._held_tokens(seq)
        for h in seq.held_blocks:
            self.shared_refs[h] -= 1
            if self.shared_refs[h] <= 0:
                del self.shared_refs[h]
                self.kv_used -= self.params.block_size
        seq.kv_tokens, seq.held_blocks = 0, ()

    def _cache_blocks(self, seq: Sequence) -> None:
        """``seq``'s prefill is done: its blocks enter the prefix cache, and (caching on) its own
        full prompt blocks join the shared KV pool, unless another sequence holds one already."""
        cache = self.prefix_cache
        if cache is None or not seq.block_hashes:
            return
        if self.params.enable_prefix_caching:
            held = set(seq.held_blocks)
            own = tuple(h for h in seq.block_hashes if h not in held and not self.shared_refs[h])
            self._hold(seq, own)  # its own tokens become shared blocks: KV use unchanged
        cache.insert(seq.block_hashes, pinned=self.shared_refs)

    def _preempt(self) -> list[Sequence]:
        """Free KV for this step's new tokens: newest running sequences back to the queue front."""
        preempted: list[Sequence] = []
        while self.running and self.kv_used + len(self.running) > self.params.kv_cache_tokens:
            victim = self.running.pop()
            self._release(victim)
            victim.pending_prefill = 0
            victim.preemptions += 1
            self.waiting.appendleft(victim)
            preempted.append(victim)
        self.preemptions_total += len(preempted)
        return preempted
