"""Print the resolved versions of nbinfer's runtime dependencies (and torch, when installed).

scripts/check runs this first, so every CI log and every bug report says which releases the run
used: a silent upgrade (cloudpickle 3.1.3) shows up here beside the failure it causes.
"""

from __future__ import annotations

import re
import sys
from importlib.metadata import PackageNotFoundError, requires, version


def main() -> None:
    names = []
    for requirement in requires("nbinfer") or []:
        if "extra ==" in requirement:
            continue
        names.append(re.split(r"[\s<>=!~;\[]", requirement, maxsplit=1)[0])
    names.append("torch")  # an optional extra: which pass of .ci/run this is
    rows = []
    for name in names:
        try:
            rows.append(f"{name}=={version(name)}")
        except PackageNotFoundError:
            rows.append(f"{name} (not installed)")
    print(f"python {sys.version.split()[0]}: " + ", ".join(rows))


if __name__ == "__main__":
    main()
