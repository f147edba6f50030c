"""The honest-likelihood table: perplexity in conditional / joint / marginal, BLiMP and SyntaxGym in
conditional / joint, and the leakage audit, for one trained Transformer-XL model.

    python benchmarks/honest_likelihoods.py --model RUN/final --label position \
        --ppl-data ewt_dev.jsonl --parser spacy --out OUT [--baseline NONE_RUN/final]

Writes OUT/<label>.json (every number) and OUT/<label>_syntaxgym_<mode>.json (inputs of
``structpe.eval.pareto.pareto_figure``). Perplexity uses the tags in --ppl-data (e.g. gold UD trees
from ``structpe tag --parser gold``); BLiMP, SyntaxGym and the leakage audit parse with --parser.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any

import torch


def ppl_from_scores(scores: list[Any], words: list[int], total_of=lambda s: s.total) -> dict[str, float]:
    nll = -sum(total_of(s) for s in scores)
    n_tok = sum(len(s.logprobs) for s in scores)
    n_words = sum(words)
    return {
        "nll_sum": nll,
        "n_tokens": n_tok,
        "n_words": n_words,
        "token_ppl": math.exp(nll / n_tok),
        "word_ppl": math.exp(nll / n_words),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True)
    ap.add_argument("--tokenizer", default=None, help="default: the model folder")
    ap.add_argument("--label", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--ppl-data", required=True, help="tagged JSON lines (structpe tag output)")
    ap.add_argument("--ppl-limit", type=int, default=None, help="first N sentences for conditional/joint")
    ap.add_argument("--marginal-limit", type=int, default=100, help="first N sentences for the marginal")
    ap.add_argument("--k", type=int, default=100, help="marginal beam width (bounds at 1, 10, k recorded)")
    ap.add_argument("--parser", default="spacy")
    ap.add_argument("--parser-model", default=None)
    ap.add_argument("--blimp-limit", type=int, default=50, help="pairs per paradigm")
    ap.add_argument("--sg-marginal-k", type=int, default=0, help="also SyntaxGym with marginal k (0: skip)")
    ap.add_argument("--leakage-limit", type=int, default=100)
    ap.add_argument("--baseline", default=None, help="a model reading no tags (for the leakage gains)")
    ap.add_argument("--only-leakage", action="store_true", help="run only the leakage audit")
    ap.add_argument("--batch-size", type=int, default=32)
    args = ap.parse_args()

    from transformers import AutoTokenizer

    from structpe.eval.blimp import evaluate_blimp
    from structpe.eval.leakage import leakage_audit
    from structpe.eval.ppl import read_tagged_jsonl, sentence_text
    from structpe.eval.report import write_json
    from structpe.eval.scoring.scorer import describe_scoring, make_scorer
    from structpe.eval.scoring.types import uses_tags
    from structpe.eval.syntaxgym.evaluate import evaluate_syntaxgym
    from structpe.models import load
    from structpe.parser.registry import get_parser

    torch.set_num_threads(1)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    model = load(args.model).eval()
    tok = AutoTokenizer.from_pretrained(args.tokenizer or args.model)
    tagged = uses_tags(model)
    modes = ["conditional", "joint"] if tagged else ["conditional"]  # a tagless model: all modes = p(x)
    pkw = {"model": args.parser_model} if args.parser_model else {}
    parser = get_parser(args.parser, **pkw)
    report: dict[str, Any] = {
        "label": args.label,
        "model": args.model,
        "injection": model.config.injection,
        "reads_tags": tagged,
        "commands": "python benchmarks/honest_likelihoods.py "
        + " ".join(f"{k}={v}" for k, v in vars(args).items()),
    }
    t0 = time.time()

    sents = read_tagged_jsonl(args.ppl_data, limit=args.ppl_limit)
    texts = [sentence_text(s) for s in sents]
    words = [len(s.words) for s in sents]
    if args.only_leakage:
        modes = []
        report["reads_tags"] = tagged
    report["ppl"] = {}
    for mode in modes:
        sc = make_scorer(model, tok, None, likelihood=mode, batch_size=args.batch_size)
        scores = sc.score(texts, sents)
        r = ppl_from_scores(scores, words)
        r["scoring"] = describe_scoring(sc)
        if mode == "joint":
            r["tag_nats_per_word"] = -sum(s.meta["tag_logprob"] for s in scores) / sum(words)
        report["ppl"][mode] = r
        print(f"[{time.time() - t0:.0f}s] ppl {mode}: {r['token_ppl']:.3f} tok / {r['word_ppl']:.3f} word")

    if args.only_leakage:
        args.marginal_limit, args.sg_marginal_k = 0, 0
    m = args.marginal_limit
    sub, sub_texts, sub_words = sents[:m], texts[:m], words[:m]
    report["ppl_subset"] = {"n_sentences": len(sub)}
    for mode in modes:
        sc = make_scorer(model, tok, None, likelihood=mode, batch_size=args.batch_size)
        report["ppl_subset"][mode] = ppl_from_scores(sc.score(sub_texts, sub), sub_words)
    if tagged and m:
        sc = make_scorer(model, tok, None, likelihood="marginal", k=args.k, batch_size=args.batch_size)
        t1 = time.time()
        marg = sc.score(sub_texts, sub)
        report["ppl_subset"]["marginal_seconds"] = time.time() - t1
        for w in sorted({int(w) for w in marg[0].meta["bound_by_k"]}):
            r = ppl_from_scores(marg, sub_words, total_of=lambda s, w=w: s.meta["bound_by_k"][str(w)])
            r["scoring"] = describe_scoring(sc).replace(f"k = {args.k}", f"k = {w}")
            report["ppl_subset"][f"marginal_k{w}"] = r
            print(f"[{time.time() - t0:.0f}s] subset ppl marginal k={w}: {r['word_ppl']:.3f} word")
    print(
        f"[{time.time() - t0:.0f}s] subset ppl: "
        + json.dumps({k: v["word_ppl"] for k, v in report["ppl_subset"].items() if isinstance(v, dict)})
    )

    report["syntaxgym"], report["blimp"] = {}, {}
    sg_modes = [*modes, *(["marginal"] if tagged and args.sg_marginal_k else [])]
    for mode in sg_modes:
        sc = make_scorer(
            model, tok, parser, likelihood=mode, k=args.sg_marginal_k or 10, batch_size=args.batch_size
        )
        r = evaluate_syntaxgym(model, tok, parser, scorer=sc, progress=False)
        r["model"] = args.label
        write_json(out / f"{args.label}_syntaxgym_{mode}.json", r)
        report["syntaxgym"][mode] = {
            "sg_score": r["sg_score"],
            "n_suites": r["n_suites"],
            "circuits": r["circuits"],
            "scoring": r["scoring"],
        }
        print(f"[{time.time() - t0:.0f}s] syntaxgym {mode}: {r['sg_score']:.4f} ({r['n_suites']} suites)")
    for mode in modes:
        sc = make_scorer(model, tok, parser, likelihood=mode, batch_size=args.batch_size)
        r = evaluate_blimp(model, tok, parser, limit=args.blimp_limit, scorer=sc, progress=False)
        keep = {k: r[k] for k in r if k in ("overall", "n_pairs", "per_field", "scoring", "likelihood")}
        report["blimp"][mode] = keep
        write_json(out / f"{args.label}_blimp_{mode}.json", r)
        print(f"[{time.time() - t0:.0f}s] blimp {mode}: {r.get('overall')}")

    if tagged and args.leakage_limit:
        base = load(args.baseline).eval() if args.baseline else None
        # keep the texts the parser reads as one sentence (the audit aligns one tree per text)
        lt = [t for t in texts[: args.leakage_limit] if len(parser.parse_text([t])) == 1]
        r = leakage_audit(model, tok, lt, parser, baseline=base, batch_size=args.batch_size)
        r["texts_dropped_as_multi_sentence"] = min(args.leakage_limit, len(texts)) - len(lt)
        report["leakage"] = r
        print(
            f"[{time.time() - t0:.0f}s] leakage: "
            + json.dumps({k: round(v["word_ppl"], 3) for k, v in r["variants"].items()})
        )
    report["seconds"] = time.time() - t0
    write_json(out / f"{args.label}{'_leakage' if args.only_leakage else ''}.json", report)
    print(f"wrote {out / (args.label + '.json')}")


def summarize(out_dir: str) -> None:
    """Print the closing table (Markdown) from OUT/<label>.json files and draw the Pareto figure."""
    from structpe.eval.pareto import pareto_figure

    out = Path(out_dir)
    loaded = [json.loads(p.read_text()) for p in sorted(out.glob("*.json")) if "_" not in p.stem]
    reports = [r for r in loaded if "ppl" in r and "label" in r]
    cols = ["model", "mode", "token PPL", "word PPL", "sentences", "BLiMP", "SyntaxGym"]
    print("| " + " | ".join(cols) + " |\n|" + "---|" * len(cols))
    for r in reports:
        rows = [(m, v, "all dev") for m, v in r["ppl"].items()]
        sub = r["ppl_subset"]
        rows += [(m, v, f"first {sub['n_sentences']}") for m, v in sub.items() if isinstance(v, dict)]
        for mode, v, which in rows:
            label = mode if r["reads_tags"] else "plain p(x) (all modes)"
            blimp = r["blimp"].get(mode, {}).get("overall", "") if which == "all dev" else ""
            sg = r["syntaxgym"].get(mode, {}).get("sg_score", "") if which == "all dev" else ""
            fmt = lambda x: f"{100 * x:.2f}" if isinstance(x, float) else x  # noqa: E731
            print(
                f"| {r['label']} | {label} | {v['token_ppl']:.3f} | {v['word_ppl']:.3f} | {which} "
                f"| {fmt(blimp)} | {fmt(sg)} |"
            )
    for r in reports:
        if "leakage" in r:
            lk = r["leakage"]
            print(f"\nleakage ({r['label']}, {lk['n_sentences']} sentences, word PPL):")
            for k, v in lk["variants"].items():
                gain = lk.get("gain_vs_baseline", {}).get(k, "n/a")
                print(f"  {k}: {v['word_ppl']:.3f}  gain vs baseline {gain}")
            if "baseline" in lk:
                print(
                    f"  baseline p(x): {lk['baseline']['word_ppl']:.3f}; "
                    f"leaked_share_upper {lk.get('leaked_share_upper')}"
                )
    sg_files = sorted(out.glob("*_syntaxgym_*.json"))
    labels = [p.stem.split("_syntaxgym_")[0] for p in sg_files]
    if sg_files:
        pareto_figure(sg_files, out / "pareto.png", labels=labels)
        print(f"\nwrote {out / 'pareto.png'} and {out / 'pareto.json'}")


if __name__ == "__main__":
    import sys

    if len(sys.argv) == 3 and sys.argv[1] == "--summarize":
        summarize(sys.argv[2])
    else:
        main()
