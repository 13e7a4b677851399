"""The simulated OpenAI-compatible LLM server behind ``loadknee sim`` (asyncio + aiohttp).

Layers, each its own module: :mod:`.params` (parameters and presets), :mod:`.tokenizer`
(deterministic token counts), :mod:`.batching` (the pure continuous-batching scheduler),
:mod:`.engine` (the asyncio driver that paces steps in real time), :mod:`.telemetry` (simulated GPU
memory/utilisation), :mod:`.metrics` (Prometheus exposition), :mod:`.protocol` (OpenAI request
parsing and response shapes), :mod:`.server` (HTTP), :mod:`.saturation` (the analytic model of
where it saturates) and :mod:`.cli`.

This package never imports locust or gevent: it runs in its own plain-asyncio process.
"""

from __future__ import annotations
