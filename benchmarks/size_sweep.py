"""TXL ``none`` model sizes trained for the same CPU-time budget on a study's data (JSON on stdout).

Each size is calibrated (CPU seconds per step), trained for ``--budget-minutes`` CPU-minutes worth of
steps and evaluated with the profile's evaluations (``structpe.study.sweep``): one study cell per
size under ``--output``, so a killed sweep resumes where it stopped. Run it on an otherwise idle
core, one thread, as the profile's cells will run:

  OMP_NUM_THREADS=1 python benchmarks/size_sweep.py --profile cpu-small \\
      --sizes 4x256 6x384 8x512 4x768 --budget-minutes 30 --output runs/size-sweep-cpu-small \\
      > benchmarks/results/size_sweep-cpu-small.json
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys

from structpe.errors import StructpeError
from structpe.study.spec import load_spec
from structpe.study.spec_checks import StudySpecError
from structpe.study.sweep import size_sweep


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--spec", default="sipe-txl", help="study spec (file or shipped name)")
    ap.add_argument("--profile", default="cpu-small")
    ap.add_argument("--sizes", nargs="+", default=["4x256", "6x384", "8x512", "4x768"], help="LAYERSxWIDTH")
    ap.add_argument("--budget-minutes", type=float, required=True, help="CPU-minutes of training per size")
    ap.add_argument("--calibrate-steps", type=int, default=20)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--output", required=True, help="sweep folder (data, calibration, one cell per size)")
    ap.add_argument("--data-dir", default=None, help="shared data root (default: $STRUCTPE_DATA)")
    args = ap.parse_args()
    try:
        spec = load_spec(args.spec, args.profile)
        result = size_sweep(
            spec,
            args.sizes,
            args.budget_minutes * 60,
            args.output,
            seed=args.seed,
            calibrate_steps=args.calibrate_steps,
            data_dir=args.data_dir,
        )
    except (StudySpecError, StructpeError, FileNotFoundError) as err:
        print(f"size_sweep: error: {err}", file=sys.stderr)
        return 2
    result["machine"] = {
        "cpu_count": os.cpu_count(),
        "omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
        "python": platform.python_version(),
        "load_average_end": [round(x, 2) for x in os.getloadavg()],
    }
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
