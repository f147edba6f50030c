"""``structpe lis <diagnostic>``: the LIS paper's diagnostics from the command line (docs/design.md §6).

  structpe lis shakespeare --profile tiny --out runs/lis_shakespeare
  structpe lis kg          --profile tiny --out runs/lis_kg

Each writes results.json, results.md (Markdown tables) and a PNG plot into ``--out``; options on
the command line override the YAML profile (src/structpe/configs/lis/<diagnostic>_<profile>.yaml).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

from structpe.errors import StructpeError, check_choice, check_device, check_positive, closest
from structpe.io import output_folder
from structpe.names import check_name
from structpe.yamlio import load_yaml

PROFILE_DIR = Path(__file__).resolve().parent.parent / "configs" / "lis"


def load_profile(diagnostic: str, profile: str | None, config_path: str | None) -> dict:
    """YAML profile as a dict: an explicit ``--config`` file wins over the named ``--profile``."""
    if config_path:
        path = Path(config_path)
        if not path.is_file():
            raise FileNotFoundError(f"config file {path} does not exist")
        return load_yaml(path) or {}
    name = f"{diagnostic}_{check_name('--profile', profile)}.yaml"
    path = PROFILE_DIR / name
    if not path.is_file():
        have = sorted(p.name for p in PROFILE_DIR.glob(f"{diagnostic}_*.yaml"))
        raise FileNotFoundError(f"no LIS profile {name!r} in {PROFILE_DIR} (have: {have})")
    return load_yaml(path) or {}


def build_config(cls, diagnostic: str, args: argparse.Namespace):
    values = load_profile(diagnostic, args.profile, args.config)
    if not isinstance(values, dict):
        raise StructpeError(
            f"{args.config or args.profile}: expected a mapping of config keys, "
            f"got a YAML {type(values).__name__}"
        )
    fields = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - fields)
    if unknown:
        raise StructpeError(
            f"unknown {diagnostic} config key {unknown[0]!r}{closest(unknown[0], fields)} "
            f"(all unknown: {unknown})"
        )
    for key in ("models", "iters", "batch_size", "seed", "threads", "device", "dropout", "eval_every"):
        val = getattr(args, key, None)
        if val is not None and key in fields:
            values[key] = val
    check_args(values, VALID_MODELS[diagnostic]())
    try:
        return cls(**values)
    except ValueError as err:  # a value the config class refuses: one line naming the source
        raise StructpeError(f"{args.config or f'--profile {args.profile}'}: {err}") from None


def _shakespeare_models() -> list[str]:
    from structpe.lis.shakespeare_report import MODEL_LABELS

    return list(MODEL_LABELS)


def _kg_models() -> list[str]:
    from structpe.lis.kg import MODELS

    return list(MODELS)


def _kg_roles_models() -> list[str]:
    from structpe.lis.kg_roles_data import MODELS

    return list(MODELS)


VALID_MODELS = {
    "shakespeare": _shakespeare_models,
    "kg": _kg_models,
    **{f"kg_{setting}": _kg_roles_models for setting in ("transfer", "kg2text", "bidirectional")},
}


def check_args(values: dict, valid_models: list[str]) -> None:
    """Refuse unknown models, impossible sizes and devices before any training starts (a bad
    name at the end of ``--models`` must not cost the runs before it)."""
    for name in values.get("models") or []:
        check_choice("--models", name, valid_models)
    if not values.get("models", True):
        raise StructpeError("--models: give at least one model")
    for key in ("iters", "batch_size"):
        if key in values:
            check_positive(f"--{key.replace('_', '-')}", values[key])
    dropout = values.get("dropout")
    if dropout is not None and not (isinstance(dropout, (int, float)) and 0 <= dropout < 1):
        raise StructpeError(f"--dropout must be in [0, 1), got {dropout}")
    if values.get("eval_every") is not None and values["eval_every"] < 0:
        raise StructpeError(f"--eval-every must be >= 0 (0: no learning curve), got {values['eval_every']}")
    if values.get("threads") is not None and values["threads"] < 0:
        raise StructpeError(f"--threads must be >= 0, got {values['threads']}")
    if values.get("device") is not None:
        check_device(values["device"])


def _common(p: argparse.ArgumentParser, default_out: str) -> None:
    p.add_argument("--profile", default="tiny", help="named YAML profile: tiny / cpu (CPU) or gpu / paper")
    p.add_argument("--config", default=None, help="a YAML file instead of a named profile")
    p.add_argument("--out", default=default_out, help="output folder (JSON, Markdown, PNG, checkpoints)")
    p.add_argument("--data", default=None, help="data root (default: $STRUCTPE_DATA or ../shared/data)")
    p.add_argument(
        "--models",
        nargs="+",
        default=None,
        help="models to train (shakespeare: lis rope alibi random; the extension lis-alibi; the ablations "
        "lis-qprev random-qprev; kg: B Bl J)",
    )
    p.add_argument("--iters", type=int, default=None, help="training iterations per model")
    p.add_argument("--batch-size", dest="batch_size", type=int, default=None)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument(
        "--dropout",
        type=float,
        default=None,
        help="dropout of embeddings, attention and residuals (default: the profile's)",
    )
    p.add_argument("--threads", type=int, default=None, help="torch.set_num_threads (0: default)")
    p.add_argument(
        "--eval-every",
        dest="eval_every",
        type=int,
        default=None,
        help="score validation every N updates (a learning curve in results.json, results.md and the "
        "plot; 0: off). shakespeare: PPL at the training context; kg: the role settings only",
    )
    p.add_argument(
        "--require-clean",
        dest="require_clean",
        action="store_true",
        help="refuse to train from a checkout with uncommitted changes to structpe (results record "
        "the git revision, with +dirty when it has them)",
    )
    p.add_argument("--device", default=None, help="auto | cpu | cuda")
    p.add_argument(
        "--eval-only",
        dest="eval_only",
        action="store_true",
        help="evaluate the safetensors checkpoints in --out/checkpoints instead of training",
    )
    p.add_argument(
        "--merge",
        nargs="+",
        default=None,
        metavar="DIR",
        help="combine results.json of runs (e.g. one model per process) into --out",
    )


def _check_merge(folders: list[str]) -> None:
    for folder in folders:
        if not (Path(folder) / "results.json").is_file():
            raise StructpeError(f"--merge {folder}: no results.json there")


def check_clean(args: argparse.Namespace) -> None:
    """``--require-clean``: a run whose revision is ``+dirty`` cannot be traced to committed code."""
    from structpe.provenance import git_revision

    rev = git_revision()
    if args.require_clean and not args.merge and (rev is None or rev.endswith("+dirty")):
        raise StructpeError(
            f"--require-clean: structpe runs from {'no git checkout' if rev is None else rev}; "
            "commit the changes (or drop --require-clean, and the results record the +dirty revision)"
        )


def cmd_shakespeare(args: argparse.Namespace) -> int:
    from structpe.lis.shakespeare import ShakespeareConfig, run
    from structpe.lis.shakespeare_report import merge

    check_clean(args)
    args.out = str(output_folder(args.out, "--out"))
    if args.merge:
        _check_merge(args.merge)
        merge(args.merge, args.out)
    else:
        cfg = build_config(ShakespeareConfig, "shakespeare", args)
        results = run(cfg, args.out, args.data, eval_only=args.eval_only)
        print(json.dumps({k: v["ppl"] for k, v in results["models"].items()}, indent=1))
    print((Path(args.out) / "results.md").read_text())
    return 0


def cmd_kg(args: argparse.Namespace) -> int:
    from structpe.lis.kg import KGConfig, run
    from structpe.lis.kg_report import merge

    check_clean(args)
    args.out = str(output_folder(args.out, "--out"))
    if args.setting != "template":
        return cmd_kg_roles(args)
    if args.eval_every is not None:
        raise StructpeError(
            "--eval-every: only --setting transfer | kg2text | bidirectional record a learning curve"
        )
    if args.merge:
        _check_merge(args.merge)
        merge(args.merge, args.out)
    else:
        run(build_config(KGConfig, "kg", args), args.out, eval_only=args.eval_only)
    print((Path(args.out) / "results.md").read_text())
    return 0


def cmd_kg_roles(args: argparse.Namespace) -> int:
    """The role-addressing settings of App. F.3 (Tables 5-7); profiles kg_<setting>_<profile>."""
    from structpe.lis.kg_report import merge
    from structpe.lis.kg_roles import RoleKGConfig, markdown_table, plot_curve, run

    if args.merge:
        merge(args.merge, args.out, render=markdown_table, draw=plot_curve, figure="curve.png")
        print((Path(args.out) / "results.md").read_text())
        return 0
    if args.profile == "tiny" and not args.config:
        args.profile = "cpu"  # these settings have cpu / paper profiles
    cfg = build_config(RoleKGConfig, f"kg_{args.setting}", args)
    if cfg.setting != args.setting:
        raise ValueError(f"--setting {args.setting} but the profile says setting: {cfg.setting}")
    run(cfg, args.out, eval_only=args.eval_only)
    print((Path(args.out) / "results.md").read_text())
    return 0


def register(subparsers) -> None:
    lis = subparsers.add_parser(
        "lis",
        help="LIS diagnostics (labeled incidence structures)",
        description="Diagnostics of the LIS paper: Tiny Shakespeare context growth and KG/text transfer.",
    )
    sub = lis.add_subparsers(dest="diagnostic", metavar="DIAGNOSTIC", required=True)
    p = sub.add_parser(
        "shakespeare",
        help="train at context 256, evaluate 256..4096 (LISformer vs RoPE, ALiBi, random addresses)",
        description="Tiny Shakespeare context-growth diagnostic (LIS App. F.1).",
    )
    _common(p, "runs/lis_shakespeare")
    p.set_defaults(func=cmd_shakespeare)
    p = sub.add_parser(
        "kg",
        help="template-diverse KG->text: serialized B, content-addressed B_l, LIS J; hit@1/5, PPL",
        description="KG/text diagnostic: role/slot and content-derived fact addresses (LIS App. F.3-F.4).",
    )
    _common(p, "runs/lis_kg")
    p.add_argument(
        "--setting",
        choices=["template", "transfer", "kg2text", "bidirectional"],
        default="template",
        help="template: template-diverse KG->text (F.4); transfer: independent KG/text tiers (Table 5); "
        "kg2text: zero-shot KG->text (Table 6); bidirectional: KG<->text (Table 7). "
        "Profiles of the last three: cpu (default) and paper",
    )
    p.set_defaults(func=cmd_kg)
