#!/usr/bin/env bash
# The Tiny Shakespeare deciding runs of docs/lis.md ("Three questions are open at d 128 and 5,000
# updates"), all eight at once on one GPU, then their merged tables:
#   the LISformer with training dropout 0.1 and 0.2 (seeds 0 and 1 each), the LISformer without
#   dropout (seeds 0 and 1: the validation curve its earlier runs lack), plain ALiBi and random line
#   addresses (seed 0), each with the `paper` profile's validation curve every 250 updates.
# On an H200 four such processes sharing the GPU took 118-182 s of training each (docs/lis.md); eight
# share it here, one CPU thread each. A CPU run of the same work is ~46 CPU-hours
# (benchmarks/results/lis_shakespeare_cost-epyc-avx2.json), so this script is for a GPU.
#
#   scripts/lis_shakespeare_deciding.sh OUT [DATA]
#     OUT   folder for runs/<name>/ (each a resumable `structpe lis shakespeare --out`), logs/ and
#           the merged tables merged-dropout0.1/, merged-dropout0.2/, merged-curves/
#     DATA  data root holding tinyshakespeare/ (default: $STRUCTPE_DATA)
#   environment: DEVICE (default cuda), PROFILE (default paper), ITERS (default: the profile's),
#                STRUCTPE (the command; default `structpe`, e.g. `python3 -m structpe.cli`)
#   A CPU smoke check of the script itself: DEVICE=cpu PROFILE=tiny ITERS=4 scripts/lis_shakespeare_deciding.sh /tmp/x
#
# Provenance: each run records its git revision; from a checkout with uncommitted changes to
# structpe the runs refuse to start (--require-clean). A copy without git (no revision to record)
# gets source.sha256 in OUT instead: `sha256sum -c OUT/source.sha256` in a checkout of a commit
# names the code that trained them.
set -euo pipefail

if [[ $# -lt 1 || $# -gt 2 ]]; then
    echo "usage: $0 OUT [DATA]" >&2
    exit 2
fi
out=$1
data=${2:-${STRUCTPE_DATA:-}}
if [[ -z $data || ! -d $data/tinyshakespeare ]]; then
    echo "$0: no tinyshakespeare/ under the data root '${data}' (give DATA or set STRUCTPE_DATA)" >&2
    exit 2
fi
device=${DEVICE:-cuda}
profile=${PROFILE:-paper}
read -r -a structpe <<<"${STRUCTPE:-structpe}"
here=$(cd "$(dirname "$0")/.." && pwd)

clean=()
if git -C "$here" rev-parse HEAD >/dev/null 2>&1; then
    clean=(--require-clean)
else
    (cd "$here" && find src -name '*.py' -o -name '*.yaml' | sort | xargs sha256sum) >"$out.source.sha256.tmp"
fi
mkdir -p "$out/runs" "$out/logs"
[[ -f $out.source.sha256.tmp ]] && mv "$out.source.sha256.tmp" "$out/source.sha256"

common=(--profile "$profile" --device "$device" --data "$data" --threads 1 "${clean[@]}")
[[ -n ${ITERS:-} ]] && common+=(--iters "$ITERS")

run() {  # NAME ARGS...: one model per process, its log in logs/NAME.log
    local name=$1
    shift
    "${structpe[@]}" lis shakespeare "${common[@]}" "$@" --out "$out/runs/$name" >"$out/logs/$name.log" 2>&1
}

names=(lis_do01_s0 lis_do01_s1 lis_do02_s0 lis_do02_s1 lis_s0 lis_s1 alibi_s0 random_s0)
run lis_do01_s0 --models lis --dropout 0.1 --seed 0 &
run lis_do01_s1 --models lis --dropout 0.1 --seed 1 &
run lis_do02_s0 --models lis --dropout 0.2 --seed 0 &
run lis_do02_s1 --models lis --dropout 0.2 --seed 1 &
run lis_s0 --models lis --dropout 0.0 --seed 0 &
run lis_s1 --models lis --dropout 0.0 --seed 1 &
run alibi_s0 --models alibi --dropout 0.0 --seed 0 &
run random_s0 --models random --dropout 0.0 --seed 0 &

failed=0
for job in $(jobs -p); do
    wait "$job" || failed=1
done
for name in "${names[@]}"; do
    if [[ ! -f $out/runs/$name/results.json ]]; then
        echo "$0: run $name did not finish (see $out/logs/$name.log); rerunning the script resumes it" >&2
        failed=1
    fi
done
((failed == 0)) || exit 1

r=$out/runs
"${structpe[@]}" lis shakespeare --merge "$r/lis_do01_s0" "$r/lis_do01_s1" --out "$out/merged-dropout0.1"
"${structpe[@]}" lis shakespeare --merge "$r/lis_do02_s0" "$r/lis_do02_s1" --out "$out/merged-dropout0.2"
"${structpe[@]}" lis shakespeare --merge "$r/lis_s0" "$r/lis_s1" "$r/alibi_s0" "$r/random_s0" --out "$out/merged-curves"
echo "$0: done; tables in $out/merged-*/results.md"
