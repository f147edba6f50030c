"""The prefix-marginal leak check on every stored SyntaxGym suite (the test runs a sample).

    python benchmarks/identical_prefixes.py > benchmarks/results/identical_prefixes-cpu.json

``tests/eval/test_prefix_marginal.py`` checks on four suites that two conditions sharing the text
up to a region's end get the same surprisal there under the `marginal` likelihood (and that the
`conditional` one leaks, so the check can fail). This runs that same check, the test's own
function, on all of them (a float64 k = 4 beam: about 300 s of one core) and prints JSON: the pair
count, the leaking pairs of `conditional`, the largest `marginal` difference (bits), whether the
property holds and the CPU seconds it took.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import torch

# the check itself lives with the test, so that test and benchmark cannot drift apart
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "eval"))
from test_prefix_marginal import identical_prefix_check  # noqa: E402

from structpe.data.paths import data_root  # noqa: E402


def main() -> None:
    torch.set_num_threads(1)
    t0 = time.process_time()
    found = identical_prefix_check(data_root(None, sub="syntaxgym"), None)
    found["holds"] = found["marginal_max_diff_bits"] < 1e-4 and found["conditional_leaking_pairs"] > 100
    found["cpu_s"] = round(time.process_time() - t0, 1)
    found["loadavg"] = [round(x, 2) for x in os.getloadavg()]
    print(json.dumps(found, indent=2))
    if not found["holds"]:
        sys.exit(1)


if __name__ == "__main__":
    main()
