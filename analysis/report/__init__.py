"""Rendering an analysed run: record table, plots, ``knee.json``, HTML page, report folder.

- :mod:`.writer` — write every report file of one run into a folder, plus the terminal texts;
- :mod:`.table` — the record table as terminal text, markdown and CSV;
- :mod:`.plots` — matplotlib ``Figure`` objects (no pyplot state);
- :mod:`.knee_json` — ``knee.json`` as strict JSON;
- :mod:`.html` — the self-contained HTML report.

Nothing here computes a verdict: the judgement is in :mod:`analysis` itself.
"""
