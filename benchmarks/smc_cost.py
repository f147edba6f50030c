"""What the honest likelihoods cost per sentence: the particle estimate (``smc``) at N = 8 / 32 / 128
with each proposal (``prior``: the tag heads; ``adapted``: every allowed pair of a word scored, up to
10 times the rows) and the k-best marginal at k = 10 / 100, against a conditional pass (JSON on
stdout).

A randomly initialised ``txl/position-tiny`` model at the ``cpu-mini`` profile's size (3 layers x
d_model 128, a 4,096-token byte-level BPE trained here on the sentences themselves; the cost of
scoring does not depend on the weights, except through how often the particles resample) scores
a sample of BLiMP sentences (whole-sentence estimates: the sentence systems alone, as
``evaluate_blimp`` runs them), of SyntaxGym items (region estimates through ``prefix_sources``,
the open systems alone, re-scored prefixes included) and of Brown test sentences (perplexity).
Each is timed in CPU seconds of this process (one thread) and projected to a ``cpu-mini`` cell's
honest evaluation: BLiMP 67 paradigms x 100 pairs, SyntaxGym's 31 paper suites, 500 Brown test
sentences, each at N and 4N (the smc mode scores ``SMC_SYSTEMS`` = 5 systems of N: the check
at N and the 4N score together).

  OMP_NUM_THREADS=1 python benchmarks/smc_cost.py --sentences 8 > benchmarks/results/smc_cost-cpu.json
  OMP_NUM_THREADS=1 python benchmarks/smc_cost.py --sentences 4 --particles 4 8 16 --k \
      --proposals prior adapted --benches blimp
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import random
import re
import sys
import time
import zlib

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import PreTrainedTokenizerFast

from structpe.choices import DEFAULT_PROPOSAL, PROPOSALS
from structpe.data.paths import data_root
from structpe.eval.blimp import load_blimp
from structpe.eval.scoring.prefix_marginal import prefix_sources
from structpe.eval.scoring.prefixes import prefix_pairs
from structpe.eval.scoring.scorer import CausalScorer
from structpe.eval.syntaxgym.evaluate import paper_suites
from structpe.eval.syntaxgym.suites import load_suites, sentence_and_spans
from structpe.models import SiPEConfig, build_model
from structpe.provenance import hardware
from structpe.syntax.hexatags import decode
from structpe.syntax.tagged import TaggedSentence

WORD = re.compile(r"\w+|[^\w\s]")


class RegexParser:
    """Words by a regex, a random well-formed tree seeded by the text (the parser's cost is not timed
    apart: spaCy's would be the same in every mode)."""

    def parse_text(self, texts: list[str]) -> list[TaggedSentence]:
        out = []
        for text in texts:
            words = WORD.findall(text)
            rng = random.Random(zlib.crc32(text.encode()))
            terms, nts, depth = [], [], 0
            for i in range(len(words)):
                last = i + 1 == len(words)
                moves = [m for m in prefix_pairs(depth, last) if last or m[2] <= len(words) - i - 1]
                t, nt, depth = rng.choice(moves)
                terms.append(t)
                nts.append(nt)
            out.append(TaggedSentence(words, decode(terms, nts), terms, nts))
        return out


def tokenizer(texts: list[str]) -> PreTrainedTokenizerFast:
    t = Tokenizer(models.BPE(unk_token=None))
    t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    t.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=4096,
        special_tokens=["<pad>", "<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    t.train_from_iterator(texts, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=t, bos_token="<s>", eos_token="</s>", pad_token="<pad>")


def cpu(fn) -> float:
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sentences", type=int, default=8, help="sentences (items) per sample")
    ap.add_argument("--particles", type=int, nargs="+", default=[8, 32, 128])
    ap.add_argument("--k", type=int, nargs="*", default=[10, 100], help="marginal widths (none: skip)")
    ap.add_argument("--proposals", nargs="+", choices=PROPOSALS, default=[DEFAULT_PROPOSAL])
    ap.add_argument("--benches", nargs="+", choices=["blimp", "syntaxgym", "ppl"], default=None)
    args = ap.parse_args()
    torch.set_num_threads(1)
    n = args.sentences
    blimp = load_blimp(data_root(None, sub="blimp"), limit=100)
    blimp_texts = [" " + p.good for p in random.Random(0).sample(blimp, n)]
    sg_root = data_root(None, sub="syntaxgym")
    suites = load_suites(sg_root, paper_suites(sg_root))
    sg_items = [(s, it) for s in suites for it in s.items]
    sg_texts, sg_cuts = [], []
    for _, item in random.Random(1).sample(sg_items, n):
        for contents in item.conditions.values():
            text, spans = sentence_and_spans(contents, "raw")
            sg_texts.append(text)
            sg_cuts.append([b for _, b in (x for x in spans if x is not None)])
    with gzip.open(data_root(None, sub="corpus") / "brown" / "brown.test.txt.gz", "rt") as f:
        brown = [line.strip() for line in f if 5 <= len(line.split()) <= 60]
    ppl_texts = random.Random(2).sample(brown, n)
    tok = tokenizer([p.good for p in blimp] + sg_texts + brown[:20000])
    torch.manual_seed(0)
    cfg = SiPEConfig(
        family="txl", injection="position", vocab_size=len(tok), d_model=128, n_layers=3, n_heads=4, d_ff=512,
        dropout=0.0, attention_dropout=0.0,
    )  # fmt: skip
    model = build_model(cfg).eval()
    parser = RegexParser()
    sg_conditions = sum(len(it.conditions) for _, it in sg_items)
    units = {"blimp": 67 * 100 * 2, "syntaxgym": sg_conditions, "ppl": 500}
    samples = {"blimp": blimp_texts, "syntaxgym": sg_texts, "ppl": ppl_texts}
    samples = {b: v for b, v in samples.items() if args.benches is None or b in args.benches}
    tokens = {k: sum(len(tok(t)["input_ids"]) for t in v) / len(v) for k, v in samples.items()}

    def run(bench: str, **opts) -> float:
        sc = CausalScorer(model, tok, parser, batch_size=32, **opts)
        texts = samples[bench]
        if bench == "syntaxgym" and opts.get("likelihood") in ("marginal", "smc"):
            return cpu(lambda: prefix_sources(sc, texts, sg_cuts)) / len(texts)
        return cpu(lambda: sc.score(texts)) / len(texts)

    per: dict = {}
    for bench in samples:
        parts = {"syntaxgym": "prefix"}.get(bench, "sentence")
        per[bench] = {"conditional": run(bench, likelihood="conditional")}
        for k in args.k:
            per[bench][f"marginal_k{k}"] = run(bench, likelihood="marginal", k=k)
        for proposal in args.proposals:
            tag = "" if proposal == DEFAULT_PROPOSAL else f"_{proposal}"
            for p in args.particles:
                per[bench][f"smc{tag}_N{p}"] = run(
                    bench, likelihood="smc", particles=p, smc_parts=parts, proposal=proposal
                )
        print(bench, {m: round(v, 4) for m, v in per[bench].items()}, file=sys.stderr, flush=True)
    first = next(iter(per.values()))
    projected = {mode: round(sum(per[b][mode] * units[b] for b in samples) / 60, 1) for mode in first}
    print(
        json.dumps(
            {
                "model": "txl/position-tiny size (3 x 128, 4,096 BPE), random weights",
                "threads": 1,
                "hardware": hardware(),
                "load_average": os.getloadavg(),
                "sample_sentences": {b: len(v) for b, v in samples.items()},
                "mean_tokens": {b: round(v, 1) for b, v in tokens.items()},
                "cpu_s_per_sentence": {b: {m: round(v, 4) for m, v in d.items()} for b, d in per.items()},
                "cpu_mini_units": units,
                "projected_cpu_min_cpu_mini": projected,
                "note": "smc_N<n>: 5 systems of n particles (the check at N and the 4N score together); "
                "smc_adapted_N<n>: the same with the adapted proposal; the projection sums the benches run",
            },
            indent=1,
        )
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
