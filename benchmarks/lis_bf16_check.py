"""Is bf16 autocast accurate for a LIS diagnostic's models? fp32 against bf16, same init and batches.

    python benchmarks/lis_bf16_check.py --model lis --updates 100 --threads 1 > out.json
    python benchmarks/lis_bf16_check.py --diagnostic transfer --model J --updates 100 > out.json

Trains one model twice from the same initial weights on the same batches through the training loop
every diagnostic uses (``structpe.lis.training.train_steps``), once in float32 and once under bf16
autocast, and prints JSON: the largest relative gap between the two loss curves (means over
windows of ``--window`` updates), a held-out score after training, and CPU seconds per update of
each. The models are the paper's sizes:

* ``shakespeare`` (LIS App. F.1): 4 layers, 4 heads, d 128, batch 64 x 256, AdamW 3e-4, weight
  decay 0.1, clip 1.0; held-out score: validation PPL at 256 characters;
* ``transfer`` / ``kg2text`` / ``bidirectional`` (App. F.3, Tables 5-7): the role-addressing
  models B / J of ``structpe.lis.kg_roles`` (d 500 for Table 5, d 60 for Tables 6-7, 3 single-head
  layers, batch 32, AdamW 5e-4, clip 1.0); held-out score: entity-character PPL over every
  evaluation set (``--n-eval`` entities each).

docs/lis.md reports the runs; a profile's ``autocast_bf16: auto`` rests on them.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
import types
from collections.abc import Callable

import torch

from structpe.lis import kg_roles
from structpe.lis.kg import score
from structpe.lis.kg_encode import collate
from structpe.lis.lisformer import LISformer, LISformerConfig
from structpe.lis.shakespeare import MODEL_SCHEMES, CharData, evaluate_ppl, load_corpus
from structpe.lis.training import configure_optimizer, train_steps

# a freshly initialised model and its optimizer, the next-batch function, the held-out score
Setup = tuple[LISformer, torch.optim.Optimizer, Callable, Callable[[LISformer], float]]
SHAKESPEARE_LR = 3e-4  # LIS App. F.1
KG_ROLES_LR = 5e-4  # LIS App. F.3


def shakespeare_setup(args: argparse.Namespace) -> Callable[[], Setup]:
    data = CharData(load_corpus(args.data), 1_000_000, 0.9)
    scheme = MODEL_SCHEMES[args.model]

    def setup() -> Setup:
        model = LISformer(LISformerConfig(vocab_size=data.vocab_size, **scheme), newline_id=data.newline_id)
        opt = torch.optim.AdamW(model.parameters(), lr=SHAKESPEARE_LR, weight_decay=0.1)
        gen = torch.Generator().manual_seed(0)
        return (
            model,
            opt,
            lambda: (*data.batch(256, 64, gen), None),
            lambda m: evaluate_ppl(m, data.val, 256, 16384, 8),
        )

    return setup


def kg_roles_setup(args: argparse.Namespace) -> Callable[[], Setup]:
    transfer = args.diagnostic == "transfer"
    cfg = kg_roles.RoleKGConfig(
        setting=args.diagnostic,
        n_train_names=3000 if transfer else 1000,
        d_model=500 if transfer else 60,
        n_eval=args.n_eval,
        lr=KG_ROLES_LR,
    )
    data = (
        kg_roles.transfer_data(cfg.n_train_names, cfg.seed)
        if transfer
        else kg_roles.zero_shot_data(cfg.n_train_names, cfg.n_test_names, cfg.seed)
    )
    vocab = kg_roles.Vocab()
    sets = kg_roles.evaluation_sets(cfg, data)

    def held_out(model: LISformer) -> float:
        nll = chars = 0.0
        for key, items in sets.items():
            examples = kg_roles.eval_examples(args.model, cfg, vocab, key, items)
            r = score(model, examples, vocab.pad, cfg.eval_batch)["all"]
            n = sum(z - a for e in examples for a, z in e.targets)
            nll, chars = nll + math.log(r["ppl"]) * n, chars + n
        return math.exp(nll / chars)

    def setup() -> Setup:
        model = kg_roles.build_model(args.model, cfg, vocab)
        sample = kg_roles.training_sampler(args.model, cfg, vocab, data, random.Random(cfg.seed + 1))
        return (
            model,
            configure_optimizer(model, cfg.lr, cfg.weight_decay),
            lambda: collate(sample(), vocab.pad),
            held_out,
        )

    return setup


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--diagnostic", default="shakespeare", choices=["shakespeare", *kg_roles.SETTINGS])
    ap.add_argument(
        "--model",
        default="lis",
        help=f"shakespeare: {' '.join(MODEL_SCHEMES)}; KG roles: {' '.join(kg_roles.MODELS)}",
    )
    ap.add_argument("--updates", type=int, default=100)
    ap.add_argument("--window", type=int, default=10)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--n-eval", type=int, default=50, help="KG roles: entities per evaluation set")
    ap.add_argument("--data", default=None, help="data root (default $STRUCTPE_DATA / shared/data)")
    args = ap.parse_args()
    valid = MODEL_SCHEMES if args.diagnostic == "shakespeare" else kg_roles.MODELS
    if args.model not in valid:
        ap.error(f"--model {args.model!r} is not a {args.diagnostic} model; choose from {list(valid)}")
    torch.set_num_threads(args.threads)
    setup = (shakespeare_setup if args.diagnostic == "shakespeare" else kg_roles_setup)(args)
    lr = SHAKESPEARE_LR if args.diagnostic == "shakespeare" else KG_ROLES_LR
    cfg = types.SimpleNamespace(iters=args.updates, lr=lr, warmup=0, grad_clip=1.0)
    runs = {}
    for bf16 in (False, True):
        torch.manual_seed(0)
        model, opt, batches, held_out = setup()
        c0 = time.process_time()
        losses = train_steps(model, opt, cfg, batches, autocast_bf16=bf16)
        cpu = time.process_time() - c0
        model.eval()
        with torch.no_grad():
            runs["bf16" if bf16 else "fp32"] = {
                "losses": losses,
                "cpu_s_per_update": cpu / args.updates,
                "held_out": held_out(model),
            }
    a, b, w = runs["fp32"]["losses"], runs["bf16"]["losses"], args.window
    gaps = [
        abs(sum(b[i : i + w]) - sum(a[i : i + w])) / sum(a[i : i + w]) for i in range(0, len(a) - w + 1, w)
    ]
    print(
        json.dumps(
            {
                "diagnostic": args.diagnostic,
                "model": args.model,
                "updates": args.updates,
                "threads": args.threads,
                "max_window_relative_gap": max(gaps),
                "final_window_loss": {k: sum(r["losses"][-w:]) / w for k, r in runs.items()},
                "held_out": ("val_ppl_256" if args.diagnostic == "shakespeare" else "entity_char_ppl"),
                "held_out_score": {k: r["held_out"] for k, r in runs.items()},
                "cpu_s_per_update": {k: r["cpu_s_per_update"] for k, r in runs.items()},
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
