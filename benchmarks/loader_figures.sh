#!/usr/bin/env bash
# Every published loader figure of docs/training.md and benchmarks/README.md, measured again:
# benchmarks/loaders.py, mixing.py, data_cache.py and lengths_cache.py at the published sizes,
# one after the other, each writing its JSON under benchmarks/results/ and its blocks of the
# documents (the text between their markers; the prose around them is kept); lengths_cache.py
# also writes its blocks of docs/scale-out.md and docs/tables.md.
#
#     flock /tmp/bench.lock benchmarks/loader_figures.sh
#
# Run it on a quiet machine (``flock`` on a shared one) with the Python of the project's venv
# first on PATH (or PYTHON=...); the lodarrow measured is this checkout's (built in place).
# The peers run in their own interpreters: PEERS_PYTHON (Hugging Face datasets, transformers,
# Grain, litdata; default /work/venv-peers/bin/python) and MDS_PYTHON (MosaicML streaming;
# default /work/venv-mds/bin/python); one that does not exist is left out and its rows say
# "not run".  WORKDIR keeps the corpora and the peers' conversions between runs.  About an
# hour on 2 cores: loaders.py alone (98 cells x 3 rounds at --seconds 2, and the blocks timed
# from scratch after each round) took 40 minutes; then mixing.py (every loader in 3 rounds)
# and the cache scripts (benchmarks/README.md, "Every published loader figure: one command").
set -euo pipefail
cd "$(dirname "$0")/.."
PYTHON=${PYTHON:-python}
PEERS_PYTHON=${PEERS_PYTHON:-/work/venv-peers/bin/python}
MDS_PYTHON=${MDS_PYTHON:-/work/venv-mds/bin/python}
WORKDIR=${WORKDIR:-/tmp/lodarrow-loader-figures}
# loaders.py and mixing.py: lodarrow on its defaults (kernel threads by the machine's load),
# each script's prefetch=0 column or row on one thread (the script sets LODARROW_NUM_THREADS=1
# for that child only); data_cache.py and lengths_cache.py hold every lodarrow row to one
# thread
unset LODARROW_NUM_THREADS
one=(env LODARROW_NUM_THREADS=1)
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"   # the checkout's lodarrow is measured
mkdir -p benchmarks/results "$WORKDIR"

peers=()
if [ -x "$PEERS_PYTHON" ]; then
    peers+=(--peer-python "hf=$PEERS_PYTHON" --peer-python "grain=$PEERS_PYTHON"
            --peer-python "litdata=$PEERS_PYTHON")
else
    echo "loader_figures.sh: no $PEERS_PYTHON: HF runs in $PYTHON, Grain and litdata not run" >&2
fi
if [ -x "$MDS_PYTHON" ]; then
    peers+=(--peer-python "streaming=$MDS_PYTHON")
else
    echo "loader_figures.sh: no $MDS_PYTHON: MosaicML streaming not run" >&2
fi
# mixing.py's loaders: lodarrow (defaults), lodarrow on one thread, HF, and MosaicML where
# installed; 3 rounds, the order rotated, tokens/s the median
mix_list=lodarrow,lodarrow-1thread,lodarrow-arrow,hf
mix_python=()
for p in "${peers[@]}"; do
    case $p in
        hf=*) mix_python+=(--peer-python "$p") ;;
        streaming=*) mix_list+=,streaming; mix_python+=(--peer-python "$p") ;;
    esac
done

"$PYTHON" benchmarks/loaders.py --sequences 100000 --workers 2 --seconds 2 --repeat 3 \
    --workdir "$WORKDIR/loaders" "${peers[@]}" \
    --json benchmarks/results/loaders.json --docs docs/training.md \
    --readme benchmarks/README.md >/dev/null
"$PYTHON" benchmarks/mixing.py --workdir "$WORKDIR/mixing" --epochs 12 --repeat 3 \
    --peers "$mix_list" "${mix_python[@]}" \
    --json benchmarks/results/mixing.json --docs docs/training.md \
    --readme benchmarks/README.md >/dev/null
"${one[@]}" "$PYTHON" benchmarks/data_cache.py --sequences 100000 --files 4 --repeat 7 \
    --json benchmarks/results/data_cache.json --docs docs/training.md >/dev/null
"${one[@]}" "$PYTHON" benchmarks/lengths_cache.py --sequences 1000000 --files 4 --repeat 5 --s3 \
    --json benchmarks/results/lengths_cache.json --docs docs/training.md \
    --s3-docs docs/scale-out.md --footer-docs docs/tables.md >/dev/null
