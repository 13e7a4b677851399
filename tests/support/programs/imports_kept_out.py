"""Import some modules and report which forbidden top-level packages came with them.

Usage: ``python imports_kept_out.py MODULE[,MODULE...] FORBIDDEN[,FORBIDDEN...]``. Run in a fresh
child process (the test process has long imported everything): prints the JSON list of forbidden
packages found in ``sys.modules`` and exits 1 when it is not empty. A forbidden name is a package
(``matplotlib``: it and its submodules) or a dotted module (``analysis.cluster.emit``).
"""

from __future__ import annotations

import importlib
import json
import sys


def main(modules: str, forbidden: str) -> int:
    for name in modules.split(","):
        importlib.import_module(name)
    banned = set(forbidden.split(","))
    found = sorted(b for b in banned if any(m == b or m.startswith(b + ".") for m in sys.modules))
    print(json.dumps(found))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2]))
