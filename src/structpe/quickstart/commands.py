"""``structpe quickstart``: its options (the sizes of ``structpe.quickstart.config.QuickstartConfig``)."""

from __future__ import annotations

from typing import Any

from structpe.hardware import PRECISIONS
from structpe.io import output_folder
from structpe.quickstart.config import QuickstartConfig

# ``structpe quickstart --help``: what the command does, in the order structpe.quickstart.run does it
DESCRIPTION = """\
`structpe quickstart`: the whole SiPE loop as a small experiment whose numbers can be read against
chance and against other seeds (SiPE section 4 on a laptop).

It runs the `quickstart` profile of the `sipe-txl` study (configs/studies/sipe-txl.yaml) at one
seed (--seed) with the study harness, the same code as `structpe study run`; the options below
are that profile's sizes, and every stage's output in --out is reused by a rerun:

1. data       a byte-level BPE on Brown train, all text in raw form (detokenized, the form BLiMP,
              SyntaxGym and Hugging Face LMs use); Brown hexatagged by --parser and packed
              (--out/data)
2. cells      one small Transformer-XL per variant, `none` and `position` (PP-SiPE), with the
              same seed, data and budget; each one pre-trained, then scored: perplexity on Brown
              test, a BLiMP subset and SyntaxGym, `position` in the conditional p(x | T), joint
              p(x, T) and marginal (k-best lower bound on p(x)) likelihoods; the leakage audit of
              `position` against `none` (--out/cells/<variant>/seed-<seed>/)
3. chance     what a model without information scores: BLiMP 0.5, SyntaxGym by Monte Carlo
              (independent random region surprisals)
4. reference  this run among the profile's seeds 1-5 (--reference; default the study folder
              docs/studies/sipe-txl-quickstart of this checkout): per score the seeds' mean +- sd,
              min-max and whether this run lies inside, and the paired position - none difference;
              only when the reference ran the same settings (a changed size or budget says which
              setting differs instead)
5. report     report.md, report.json, val_loss.png and syntaxgym_circuits.png in --out

The default sizes fit the whole run in about 20 minutes on 2 idle CPU cores
(benchmarks/train_throughput.py, docs/quickstart.md); every size is an option.
"""


def register(subparsers: Any) -> None:
    """``structpe quickstart``: the README's first command."""
    import argparse

    p = subparsers.add_parser(
        "quickstart",
        help="tag Brown (spaCy or the hexatagger), train small TXL none/position, "
        "evaluate PPL, BLiMP, SyntaxGym against chance and the profile's seeds",
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    d = QuickstartConfig()
    p.add_argument("--out", "--output", dest="out", default=d.out,
                   help="report folder (default: %(default)s)")
    p.add_argument(
        "--data-dir", default=None, help="shared data root (default: $STRUCTPE_DATA or ../shared/data)"
    )
    p.add_argument("--parser", choices=("spacy", "hexatagger"), default=d.parser,
                   help="tags Brown and the evaluated sentences (hexatagger: the packaged model)")
    p.add_argument("--max-steps", type=int, default=d.max_steps, help="training steps per variant")
    p.add_argument("--train-sentences", type=int, default=d.train_sentences)
    p.add_argument("--valid-sentences", type=int, default=d.valid_sentences)
    p.add_argument("--d-model", type=int, default=d.d_model)
    p.add_argument("--n-layers", type=int, default=d.n_layers)
    p.add_argument("--n-heads", type=int, default=d.n_heads)
    p.add_argument("--d-ff", type=int, default=d.d_ff, help="feed-forward width")
    p.add_argument("--dropout", type=float, default=d.dropout, help="dropout and attention dropout")
    p.add_argument("--lr", type=float, default=d.lr, help="peak learning rate (cosine, 100 warm-up steps)")
    p.add_argument("--batch-size", type=int, default=d.batch_size, help="sequences per step")
    p.add_argument("--precision", choices=tuple(PRECISIONS), default="auto",
                   help="auto: bf16 autocast only on hardware with native bf16 (else float32)")
    p.add_argument("--compile", choices=("on", "off"), default="off",
                   help="torch.compile the training step (slower than bf16 eager here: docs/pretraining.md)")
    p.add_argument("--ppl-sentences", type=int, default=d.ppl_sentences, help="Brown test sentences for PPL")
    p.add_argument("--blimp-limit", type=int, default=d.blimp_limit, help="pairs per BLiMP paradigm")
    p.add_argument("--blimp-paradigms", nargs="+", default=list(d.blimp_paradigms))
    p.add_argument("--syntaxgym-suites", nargs="+", default=None, help="default: every stored suite")
    p.add_argument("--variants", nargs="+", default=list(d.variants), help="TXL injection sites to train")
    p.add_argument(
        "--likelihoods", nargs="+", default=list(d.likelihoods), choices=("conditional", "joint", "marginal")
    )
    p.add_argument("--k", type=int, default=d.marginal_k, help="beam width of the marginal likelihood")
    p.add_argument("--leakage-sentences", type=int, default=d.leakage_sentences,
                   help="Brown test sentences for the leakage audit (0: skip)")
    p.add_argument("--chance-draws", type=int, default=d.chance_draws,
                   help="Monte Carlo draws per SyntaxGym item for the chance row")
    p.add_argument("--vocab-size", type=int, default=d.vocab_size)
    p.add_argument("--seed", type=int, default=d.seed)
    p.add_argument("--reference", default=None, metavar="DIR",
                   help="study folder of `structpe study run sipe-txl --profile quickstart` to place this "
                   "run in (default: docs/studies/sipe-txl-quickstart of this checkout, if present)")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("overrides", nargs="*", help="extra recipe overrides (key=value) for every variant")
    p.set_defaults(func=_cli)


def _cli(args: Any) -> int:
    cfg = QuickstartConfig(
        out=str(output_folder(args.out, "--out")),
        data_dir=args.data_dir,
        parser=args.parser,
        max_steps=args.max_steps,
        train_sentences=args.train_sentences,
        valid_sentences=args.valid_sentences,
        d_model=args.d_model,
        n_layers=args.n_layers,
        n_heads=args.n_heads,
        d_ff=args.d_ff,
        dropout=args.dropout,
        lr=args.lr,
        batch_size=args.batch_size,
        bf16=PRECISIONS[args.precision],
        compile=args.compile == "on",
        ppl_sentences=args.ppl_sentences,
        blimp_limit=args.blimp_limit,
        blimp_paradigms=tuple(args.blimp_paradigms),
        syntaxgym_suites=tuple(args.syntaxgym_suites) if args.syntaxgym_suites else None,
        variants=tuple(args.variants),
        likelihoods=tuple(args.likelihoods),
        marginal_k=args.k,
        leakage_sentences=args.leakage_sentences,
        chance_draws=args.chance_draws,
        vocab_size=args.vocab_size,
        seed=args.seed,
        progress=not args.no_progress,
        extra_overrides=list(args.overrides),
        reference=args.reference,
    )
    from structpe.quickstart.run import run_quickstart

    run_quickstart(cfg)
    return 0
