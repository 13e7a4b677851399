"""Reading what a run left behind, into validated frames on one clock.

- :mod:`.load` — a run directory → :class:`~analysis.inputs.load.Run`, or one clear error;
- :mod:`.server_metrics` — raw ``server_metrics.csv`` samples → canonical server gauges (vLLM,
  SGLang, TGI, llama.cpp names) and DCGM GPU rows;
- :mod:`.nvsmi` — an ``nvidia-smi`` CSV capture from the GPU host → ``gpu.csv`` rows.
"""
