"""Shared pieces of the ``structpe eval`` / ``structpe finetune`` commands: loading and argument checks.

Loading a model folder with its tokenizer and a parser, reading input lines, the common options
and the argument checks that run before any model is loaded (so a typo costs nothing). Kept apart
from the command handlers (``structpe.eval.commands``, ``structpe.eval.glue.commands``) so every
handler stays a thin wrapper over the library (see cli.py).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from structpe.choices import DEFAULT_PARTICLES, DEFAULT_PROPOSAL, PLL_METRICS, PROPOSALS
from structpe.choices import LIKELIHOODS as LIKELIHOOD_CHOICES
from structpe.errors import StructpeError, check_choice, check_device, check_positive, reading
from structpe.hardware import THREADS_HELP, set_cpu_threads
from structpe.io import output_folder, read_json_object, split_lines

if TYPE_CHECKING:  # torch-heavy: imported where a command runs, so `structpe --help` stays fast
    from structpe.eval.scoring.scorer import ScoringSpec


# ----------------------------------------------------------------------------------------------
# loading


def find_tokenizer_dir(model_path: Path, tokenizer: str | None) -> Path:
    """The tokenizer folder: ``--tokenizer``, else the model folder, ``<model>/tokenizer``, or a
    ``tokenizer`` folder next to the model."""
    if tokenizer:
        return Path(tokenizer)
    for cand in (model_path, model_path / "tokenizer", model_path.parent / "tokenizer"):
        if (cand / "tokenizer.json").is_file() or (cand / "tokenizer_config.json").is_file():
            return cand
    raise FileNotFoundError(
        f"no tokenizer found in {model_path}, {model_path / 'tokenizer'} or "
        f"{model_path.parent / 'tokenizer'}; pass --tokenizer"
    )


def load_model_and_tokenizer(
    path: str | Path,
    tokenizer: str | None = None,
    *,
    kind: str | None = None,
    device: str = "cpu",
    eager_attention: bool = False,
) -> tuple[Any, Any]:
    """A saved structpe model (any family) or a Hugging Face causal / masked LM, plus its tokenizer.
    Checked on load: finite weights, a tokenizer that fits the embedding (one line otherwise)."""
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()  # a command's stderr is its own progress and one-line errors
    path = Path(path)
    cfg_file = path / "config.json"
    if not cfg_file.is_file():
        raise FileNotFoundError(f"{path} has no config.json (expected a save_pretrained folder)")
    from structpe.models.validate import check_weights, load_strictly

    cfg = read_json_object(cfg_file)
    archs = cfg.get("architectures") or []
    if any("ForSequenceClassification" in str(a) for a in archs):
        raise StructpeError(
            f"{path}: a sequence classifier ({archs[0]}, e.g. from `finetune glue`), not a language "
            "model; give the pre-trained model it was fine-tuned from"
        )
    if cfg.get("model_type") == "structpe-sipe":
        from structpe.models import load

        model = load(path)
    elif cfg.get("model_type") == "structpe-sipe-adapter":  # a Hugging Face LM + SiPE adapter folder
        from structpe.adapters.sipe import load_adapted

        model = load_adapted(path)
    else:
        from transformers import AutoModelForCausalLM, AutoModelForMaskedLM

        if kind is None:
            kind = "masked" if any("MaskedLM" in str(a) for a in archs) else "causal"
        cls = AutoModelForCausalLM if kind == "causal" else AutoModelForMaskedLM
        kw = {"attn_implementation": "eager"} if eager_attention else {}
        model, _ = load_strictly(cls.from_pretrained, path, **kw)
    check_weights(model, path)
    tok_dir = find_tokenizer_dir(path, tokenizer)
    from structpe.train.tokenizer import auto_tokenizer

    tok = auto_tokenizer(tok_dir)
    n_embed = model.get_input_embeddings().num_embeddings
    if len(tok) > n_embed:
        raise StructpeError(
            f"{tok_dir}: the tokenizer has {len(tok)} tokens but the model {path} embeds only {n_embed}; "
            "is it another model's tokenizer? (--tokenizer)"
        )
    from structpe.train.tokenizer import text_form_warning

    if warning := text_form_warning(tok):
        print(warning, file=sys.stderr)
    return model.to(device).eval(), tok


def read_lines(path: str | Path) -> list[str]:
    """The lines of a UTF-8 text file, split at newlines only (see ``split_lines``)."""
    from structpe.io import open_text

    with open_text(path) as fh, reading(path):
        return split_lines(fh.read())


def make_parser(name: str | None, model: Any, parser_model: str | None = None) -> Any:
    """``--parser`` (default: spacy when the model reads tags, none otherwise)."""
    from structpe.eval.scoring.types import uses_tags

    if name is None:
        name = "spacy" if uses_tags(model) else "none"
    if name == "none":
        if uses_tags(model):
            raise StructpeError("--parser none: this model reads hexatags; choose a parser (e.g. spacy)")
        return None
    from structpe.parser.registry import get_parser

    kw = {"model": parser_model} if parser_model else {}
    return get_parser(name, **kw)


def eval_out_dir(args: argparse.Namespace, name: str) -> Path:
    """An eval command's report folder: ``--out``, else a new timestamped one under ``eval_reports/``."""
    out = Path(args.out) if args.out else Path("eval_reports") / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"
    out.mkdir(parents=True, exist_ok=True)
    return out


def common_options(p: argparse.ArgumentParser, *, model: bool = True) -> None:
    """The options every ``structpe eval`` command shares (the model, its tokenizer, the output)."""
    if model:
        p.add_argument("--model", required=True, help="saved structpe model folder or HF checkpoint folder")
        p.add_argument("--tokenizer", help="tokenizer folder (default: next to the model)")
        p.add_argument(
            "--kind", choices=("causal", "masked"), help="HF models: override causal/masked detection"
        )
    p.add_argument(
        "--parser", help="spacy | hexatagger | gold | none (default: spacy if the model reads tags)"
    )
    p.add_argument("--parser-model", help="parser model (spaCy package or hexatagger folder)")
    p.add_argument("--data-dir", help="data root (default: $STRUCTPE_DATA or ../shared/data)")
    p.add_argument("--out", help="output folder (default: eval_reports/<name>-<time>)")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=None, help=THREADS_HELP)


def add_scoring_args(p: argparse.ArgumentParser) -> None:
    """The options that say how sentences are scored (a ScoringSpec's fields; ``scoring_spec`` reads them)."""
    p.add_argument(
        "--likelihood",
        choices=LIKELIHOOD_CHOICES,
        default="conditional",
        help="decoders with tags: conditional = p(x | T(x)) (the paper's convention), joint = p(x, T), "
        "marginal = k-best lower bound on p(x), smc = particle estimate of p(x) (docs/likelihoods.md)",
    )
    p.add_argument("--k", type=int, default=10, help="beam width of the marginal likelihood")
    p.add_argument(
        "--particles",
        type=int,
        default=DEFAULT_PARTICLES,
        help="particles N per system of the smc likelihood: the score pools 4 systems (4N), one more "
        "system of N checks which decisions flip",
    )
    p.add_argument(
        "--proposal",
        choices=PROPOSALS,
        default=DEFAULT_PROPOSAL,
        help="proposal of the smc likelihood: prior = the model's tag heads, adapted = every allowed "
        "tag pair of a word scored against the tokens it conditions (lower variance, up to 10x the "
        "rows), parse = the sentence estimates drawn around the text's own parse mixed with the tag "
        "heads (docs/likelihoods.md)",
    )
    p.add_argument(
        "--pll-metric", choices=PLL_METRICS, default="within_word_l2r", help="encoders: PLL variant"
    )


def add_budget_arg(p: argparse.ArgumentParser, decision: str) -> None:
    """``--particles-max``: per-decision particle budgets of smc (``structpe.eval.scoring.smc_budget``)."""
    p.add_argument(
        "--particles-max",
        type=int,
        help=f"smc: a {decision} whose margin is within a few standard errors of a tie is scored again "
        f"at 4x the particles, up to this N (default: every {decision} at --particles; "
        "docs/likelihoods.md)",
    )


def budget_notes(res: dict[str, Any], decision: str) -> list[str]:
    """The report's line on per-decision particle budgets (none without ``--particles-max``)."""
    if "particles_max" not in res:
        return []
    counts = ", ".join(f"{c} at N = {n}" for n, c in res["budgets"].items())
    return [
        f"per-{decision} budgets: N = {res['particles']:g} to {res['particles_max']:g}, scored again at 4N "
        f"while within {res['settle_z']:g} standard errors of a tie ({counts}; {res['unsettled']:g} still "
        "within at the largest N)"
    ]


def print_table(paths: dict[str, Path]) -> None:
    """Print a written report's Markdown table, and where the report files went on stderr."""
    print(paths["markdown"].read_text())
    print(f"wrote {', '.join(str(p) for p in paths.values())}", file=sys.stderr)


# options that narrow what an evaluation covers: recorded under provenance "limits"
LIMIT_OPTIONS = (
    "limit", "max_items", "max_length", "max_train", "max_eval", "paradigms", "fields", "phenomena", "suites",
    "tasks", "epochs", "protocol", "exact_max_words",
)


def smc_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The smc options of an evaluation command, as its provenance records them."""
    out = {"particles": args.particles, "proposal": args.proposal}
    if getattr(args, "particles_max", None) is not None:
        out["particles_max"] = args.particles_max
    return out


def eval_provenance(
    args: argparse.Namespace, started: float, parser: Any = None, data: list = (), **extra: Any
) -> dict:
    """The provenance block of an evaluation command's JSON (see ``structpe.provenance``); ``extra``
    overrides or adds fields (``model=`` for a command without ``--model``)."""
    from structpe.provenance import provenance
    from structpe.train.prepare_settings import parser_record

    likelihood = getattr(args, "likelihood", None)
    fields: dict[str, Any] = {"model": getattr(args, "model", None), **extra}
    # the name the user chose (--parser), else the one make_parser picked by default
    parser_name = None
    if parser is not None:
        parser_name = getattr(args, "parser", None) or getattr(parser, "name", None)
    return provenance(
        started=started,
        data=data,
        parser=parser_record(parser_name, getattr(args, "parser_model", None)),
        likelihood=likelihood,
        k=args.k if likelihood == "marginal" else None,
        **(smc_settings(args) if likelihood == "smc" else {}),
        limits={k: getattr(args, k) for k in LIMIT_OPTIONS if getattr(args, k, None) is not None},
        seed=getattr(args, "seeds", None),
        **fields,
    )


# ----------------------------------------------------------------------------------------------
# argument checks: before any model is loaded, so a typo costs nothing


def scoring_spec(args: argparse.Namespace, **extra) -> ScoringSpec:
    """An evaluation command's scoring options as one ScoringSpec (``extra``: command-specific fields)."""
    from structpe.eval.scoring.scorer import ScoringSpec

    return ScoringSpec(
        kind=args.kind,
        likelihood=args.likelihood,
        k=args.k,
        particles=args.particles,
        proposal=args.proposal,
        pll_metric=args.pll_metric,
        batch_size=args.batch_size,
        append_eos=getattr(args, "append_eos", False),
        particles_max=getattr(args, "particles_max", None),
        **extra,
    )


def check_args(args: argparse.Namespace) -> None:
    """Refuse impossible numbers, unknown names and missing inputs with one line naming the option;
    then set the CPU threads (``--threads``, else the idle share: ``structpe.hardware``)."""
    from structpe.parser.registry import available_parsers

    for opt in (
        "limit", "k", "particles", "batch_size", "max_length", "max_items", "epochs", "max_train", "max_eval",
        "threads", "particles_max",
    ):
        check_positive(f"--{opt.replace('_', '-')}", getattr(args, opt, None))
    particles_max = getattr(args, "particles_max", None)
    if particles_max is not None:
        if getattr(args, "likelihood", None) != "smc":
            raise StructpeError(
                f"--particles-max {particles_max}: a budget of the smc likelihood; add --likelihood smc"
            )
        if particles_max < args.particles:
            raise StructpeError(
                f"--particles-max {particles_max}: below --particles {args.particles} (budgets start there)"
            )
    if getattr(args, "parser", None) is not None:
        check_choice("--parser", args.parser, [*available_parsers(), "none"])
    proposal = getattr(args, "proposal", DEFAULT_PROPOSAL)
    if proposal != DEFAULT_PROPOSAL and getattr(args, "likelihood", None) != "smc":
        raise StructpeError(f"--proposal {proposal}: a proposal of the smc likelihood; add --likelihood smc")
    if getattr(args, "text", None) and args.parser == "none":
        raise StructpeError(
            "--text with --parser none: the words of plain text come from a parser (word perplexity "
            "counts them); keep a parser (e.g. the default spacy; a model reading no tags ignores "
            "the tags) or give --data with tagged JSON lines"
        )
    for opt in ("model", "base", "sipe", "baseline"):
        path = getattr(args, opt, None)
        if path is not None and not Path(path).is_dir():
            raise StructpeError(f"--{opt} {path}: not a model folder (no such directory)")
    for opt in ("data", "text"):
        path = getattr(args, opt, None)
        if path is not None and not Path(path).is_file():
            what = "no such file" if not Path(path).exists() else "not a file"
            raise StructpeError(f"--{opt} {path}: {what}")
    if getattr(args, "out", None):
        output_folder(args.out, "--out")  # a folder: "-" or an existing file is refused
    check_device(getattr(args, "device", "cpu"))
    set_cpu_threads(getattr(args, "threads", None))


def check_names(option: str, names: list[str] | None, available: list[str]) -> None:
    """Refuse in one line a name in ``option`` that is not ``available`` (with the closest one)."""
    for name in names or []:
        check_choice(option, name, available)


def add_area(sub: argparse._SubParsersAction, name: str, help: str) -> argparse._SubParsersAction:
    """The sub-command group ``name`` (shared with other modules that register under it)."""
    if name in sub.choices:
        parent = sub.choices[name]
        for action in parent._actions:
            if isinstance(action, argparse._SubParsersAction):
                return action
        return parent.add_subparsers(dest=f"{name}_command", metavar="TARGET", required=True)
    parent = sub.add_parser(name, help=help, description=help)
    return parent.add_subparsers(dest=f"{name}_command", metavar="TARGET", required=True)
