"""`python -m prism.model.kernels`: build the fused CPU kernels now (`make setup` does so), and say
which path CPU training takes."""

from __future__ import annotations

import sys
import time

from prism.model import kernels


def main() -> int:
    start = time.perf_counter()
    module = kernels.load()
    if module is None:
        print("prism: no fused CPU kernels; CPU training uses ATen ops (the warning above says why)", file=sys.stderr)
    else:
        seconds = time.perf_counter() - start
        print(f"prism: fused CPU kernels ready ({kernels.capability()}, {seconds:.1f} s): {module.__file__}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
