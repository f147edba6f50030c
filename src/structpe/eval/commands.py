"""CLI: ``structpe eval ppl|blimp|syntaxgym|attention|glue`` and ``structpe finetune glue``.

Thin wrappers (see cli.py): parse arguments, load model/tokenizer/parser, call the library
function, write JSON + Markdown (+ PNG) with :mod:`structpe.eval.report`.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from structpe.errors import StructpeError, check_choice, check_device, check_positive, closest, reading
from structpe.eval.scoring import PLL_METRICS, CausalScorer, ScoringSpec, uses_tags
from structpe.io import split_lines

# the causal scorer's registry: modes added there (joint, marginal) appear here too
LIKELIHOOD_CHOICES = tuple(CausalScorer.LIKELIHOODS)


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
    """A saved structpe model (any family) or a Hugging Face causal / masked LM, plus its tokenizer."""
    from transformers import AutoTokenizer

    path = Path(path)
    cfg_file = path / "config.json"
    if not cfg_file.is_file():
        raise FileNotFoundError(f"{path} has no config.json (expected a save_pretrained folder)")
    try:
        cfg = json.loads(cfg_file.read_text())
    except json.JSONDecodeError as err:
        raise StructpeError(f"{cfg_file}: not valid JSON ({err})") from None
    if cfg.get("model_type") == "structpe-sipe":
        from structpe.models import load

        model = load(path)
    elif cfg.get("model_type") == "structpe-sipe-adapter":  # a Hugging Face LM + SiPE adapter folder
        from structpe.adapters import load_adapted

        model = load_adapted(path)
    else:
        from transformers import AutoModelForCausalLM, AutoModelForMaskedLM

        archs = cfg.get("architectures") or []
        if kind is None:
            kind = "masked" if any("MaskedLM" in a for a in archs) else "causal"
        cls = AutoModelForCausalLM if kind == "causal" else AutoModelForMaskedLM
        kw = {"attn_implementation": "eager"} if eager_attention else {}
        model = cls.from_pretrained(path, **kw)
    tok = AutoTokenizer.from_pretrained(find_tokenizer_dir(path, tokenizer))
    from structpe.train.tokenizer import text_form_warning

    if warning := text_form_warning(tok):
        print(warning, file=sys.stderr)
    return model.to(device).eval(), tok


def read_lines(path: str | Path) -> list[str]:
    """The lines of a UTF-8 text file, split at newlines only (see ``split_lines``)."""
    with reading(path):
        return split_lines(Path(path).read_text(encoding="utf-8"))


def make_parser(name: str | None, model: Any, parser_model: str | None = None) -> Any:
    """``--parser`` (default: spacy when the model reads tags, none otherwise)."""
    if name is None:
        name = "spacy" if uses_tags(model) else "none"
    if name == "none":
        if uses_tags(model):
            raise StructpeError("--parser none: this model reads hexatags; choose a parser (e.g. spacy)")
        return None
    from structpe.syntax.parsers import get_parser

    kw = {"model": parser_model} if parser_model else {}
    return get_parser(name, **kw)


def _out_dir(args: argparse.Namespace, name: str) -> Path:
    out = Path(args.out) if args.out else Path("eval_reports") / f"{name}-{time.strftime('%Y%m%d-%H%M%S')}"
    out.mkdir(parents=True, exist_ok=True)
    return out


def _common(p: argparse.ArgumentParser, *, model: bool = True) -> None:
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


def _scoring_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--likelihood",
        choices=LIKELIHOOD_CHOICES,
        default="conditional",
        help="decoders with tags: conditional = p(x | T(x)) (the paper's convention), joint = p(x, T), "
        "marginal = k-best lower bound on p(x)",
    )
    p.add_argument("--k", type=int, default=10, help="beam width of the marginal likelihood")
    p.add_argument(
        "--pll-metric", choices=PLL_METRICS, default="within_word_l2r", help="encoders: PLL variant"
    )


def _print_table(paths: dict[str, Path]) -> None:
    print(paths["markdown"].read_text())
    print(f"wrote {', '.join(str(p) for p in paths.values())}", file=sys.stderr)


# ----------------------------------------------------------------------------------------------
# argument checks: before any model is loaded, so a typo costs nothing


def scoring_spec(args: argparse.Namespace, **extra) -> ScoringSpec:
    """An evaluation command's scoring options as one ScoringSpec (``extra``: command-specific fields)."""
    return ScoringSpec(
        kind=args.kind,
        likelihood=args.likelihood,
        k=args.k,
        pll_metric=args.pll_metric,
        batch_size=args.batch_size,
        append_eos=getattr(args, "append_eos", False),
        **extra,
    )


def check_args(args: argparse.Namespace) -> None:
    """Refuse impossible numbers, unknown names and missing inputs with one line naming the option."""
    from structpe.syntax.parsers import available_parsers

    for opt in ("limit", "k", "batch_size", "max_length", "max_items", "epochs", "max_train", "max_eval"):
        check_positive(f"--{opt.replace('_', '-')}", getattr(args, opt, None))
    if getattr(args, "parser", None) is not None:
        check_choice("--parser", args.parser, [*available_parsers(), "none"])
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
    if getattr(args, "out", None) and Path(args.out).exists() and not Path(args.out).is_dir():
        raise StructpeError(f"--out {args.out}: exists and is not a folder")
    check_device(getattr(args, "device", "cpu"))


def _check_names(option: str, names: list[str] | None, available: list[str]) -> None:
    for name in names or []:
        check_choice(option, name, available)


# ----------------------------------------------------------------------------------------------
# commands


def cmd_ppl(args: argparse.Namespace) -> int:
    from structpe.eval import ppl, report

    check_args(args)
    # tagged input is read (and checked) before the model loads: a bad line costs nothing
    sents = ppl.read_tagged_jsonl(args.data, args.limit) if args.data else []
    model, tok = load_model_and_tokenizer(args.model, args.tokenizer, kind=args.kind, device=args.device)
    if args.text:
        parser = make_parser(args.parser or "spacy", model, args.parser_model)
        lines = [ln.strip() for ln in read_lines(args.text) if ln.strip()]
        if args.limit:
            lines = lines[: args.limit]
        from structpe.eval.scoring import parse_texts

        sents = parse_texts(parser, lines) or []
        for s, text in zip(sents, lines, strict=True):
            s.meta["text"] = text
    res = ppl.evaluate_ppl(model, tok, sents, spec=scoring_spec(args, max_length=args.max_length))
    res["model"] = args.model
    rows, cols = ppl.format_results(res)
    out = _out_dir(args, "ppl")
    notes = [f"model: `{args.model}`", f"scoring: {res['scoring']}"]
    if res["pseudo_perplexity"]:
        notes.append("masked LM: these are pseudo-perplexities (PLL), not comparable with causal perplexity")
    _print_table(report.write_report(out, "ppl", res, rows, cols, title="Perplexity", notes=notes))
    return 0


def cmd_blimp(args: argparse.Namespace) -> int:
    from structpe.eval import blimp, report

    check_args(args)
    _check_names("--paradigms", args.paradigms, blimp.list_paradigms(args.data_dir))
    model, tok = load_model_and_tokenizer(args.model, args.tokenizer, kind=args.kind, device=args.device)
    parser = make_parser(args.parser, model, args.parser_model)
    res = blimp.evaluate_blimp(
        model,
        tok,
        parser,
        args.data_dir,
        args.paradigms,
        limit=args.limit,
        fields=args.fields,
        phenomena=args.phenomena,
        spec=scoring_spec(args),
        keep_pairs=args.keep_pairs,
    )
    res["model"] = args.model
    rows, cols = blimp.format_results(res)
    out = _out_dir(args, "blimp")
    plots = [
        report.bar_plot(
            out / "blimp_paradigms.png",
            list(res["per_paradigm"]),
            {"accuracy": list(res["per_paradigm"].values())},
            title=f"BLiMP accuracy per paradigm (overall {res['overall']:.3f})",
            ylabel="accuracy",
            hline=0.5,
        )
    ]
    notes = [f"model: `{args.model}`", f"scoring: {res['scoring']}", f"pairs: {res['n_pairs']}"]
    _print_table(report.write_report(out, "blimp", res, rows, cols, title="BLiMP", notes=notes, plots=plots))
    return 0


def cmd_syntaxgym(args: argparse.Namespace) -> int:
    from structpe.eval import report, syntaxgym

    check_args(args)
    suites = sorted(p.stem for p in syntaxgym.suites_dir(args.data_dir).glob("*.json"))
    _check_names("--suites", args.suites, suites)
    model, tok = load_model_and_tokenizer(args.model, args.tokenizer, kind=args.kind, device=args.device)
    parser = make_parser(args.parser, model, args.parser_model)
    res = syntaxgym.evaluate_syntaxgym(
        model,
        tok,
        parser,
        args.data_dir,
        args.suites,
        spec=scoring_spec(args),
        protocol=args.protocol,
        max_items=args.max_items,
    )
    res["model"] = args.model
    rows, cols = syntaxgym.format_results(res)
    out = _out_dir(args, "syntaxgym")
    plots = [
        report.bar_plot(
            out / "syntaxgym_suites.png",
            list(res["suite_accuracy"]),
            {"accuracy": list(res["suite_accuracy"].values())},
            title=f"SyntaxGym suite accuracy (SG score {res['sg_score']:.3f}, {res['n_suites']} suites)",
            ylabel="accuracy",
        )
    ]
    notes = [
        f"model: `{args.model}`",
        f"scoring: {res['scoring']}",
        f"protocol: {res['protocol']} (paper: prediction 0); SG score = unweighted mean over suites",
    ]
    if not res["complete_31"]:
        notes.append(f"only {res['n_suites']} of the paper's 31 suites were run: not the paper's SG score")
    paths = report.write_report(
        out, "syntaxgym", res, rows, cols, title="SyntaxGym", notes=notes, plots=plots
    )
    _print_table(paths)
    return 0


def cmd_attention(args: argparse.Namespace) -> int:
    from structpe.eval import attention, report

    check_args(args)
    base, tok = load_model_and_tokenizer(args.base, args.tokenizer, device=args.device, eager_attention=True)
    sipe, sipe_tok = load_model_and_tokenizer(
        args.sipe, args.sipe_tokenizer, device=args.device, eager_attention=True
    )
    parser = make_parser(args.parser or "spacy", sipe, args.parser_model)
    res = attention.evaluate_attention(
        base,
        sipe,
        tok,
        parser,
        args.data_dir,
        sipe_tokenizer=sipe_tok,
        limit=args.limit,
        direction=args.direction,
        batch_size=args.batch_size,
    )
    res.update(base_model=args.base, sipe_model=args.sipe)
    rows, cols = attention.format_results(res)
    out = _out_dir(args, "attention")
    plots = attention.plot(res, out)
    notes = [
        f"base: `{args.base}`; SiPE: `{args.sipe}`",
        f"direction: {res['direction']}; "
        f"{res['n_with_object']} of {res['n_sentences']} sentences have an object",
        f"share of sentences where SiPE attends more: {res['share_sipe_higher']:.3f}",
    ]
    paths = report.write_report(
        out,
        "attention",
        res,
        rows,
        cols,
        title="Verb/object attention (BLiMP causative)",
        notes=notes,
        plots=plots,
    )
    _print_table(paths)
    return 0


def cmd_glue(args: argparse.Namespace) -> int:
    from transformers import AutoTokenizer

    from structpe.eval import glue, report

    check_args(args)
    for task in args.tasks:
        try:
            if task.lower() != "all":
                glue.task_spec(task)
        except ValueError as err:
            raise StructpeError(f"--tasks: {err}{closest(task.lower(), glue.TASKS)}") from None
    model_path = Path(args.model)
    try:
        tasks = glue.resolve_tasks(args.tasks)
    except ValueError as err:
        raise StructpeError(f"--tasks: {err}") from None
    tok = AutoTokenizer.from_pretrained(find_tokenizer_dir(model_path, args.tokenizer))
    probe = glue.load_classifier(model_path, 2)
    parser, parser_note = _glue_parser(args, probe, model_path)
    del probe

    def model_fn(num_labels: int) -> Any:
        return glue.load_classifier(model_path, num_labels).to(args.device)

    res = glue.finetune_glue(
        model_fn,
        tok,
        tasks,
        parser,
        args.data_dir,
        seeds=args.seeds,
        epochs=args.epochs,
        lr=args.lr,
        batch_size=args.batch_size,
        max_length=args.max_length,
        max_train=args.max_train,
        max_eval=args.max_eval,
        weight_decay=args.weight_decay,
    )
    res["model"] = args.model
    res["parser"] = parser_note
    rows, cols = glue.format_results(res)
    out = _out_dir(args, "glue")
    plots = [
        report.bar_plot(
            out / "glue_tasks.png",
            list(res["tasks"]),
            {
                "best epoch": [r["summary"]["best"]["mean"]["main"] for r in res["tasks"].values()],
                "last epoch": [r["summary"]["last"]["mean"]["main"] for r in res["tasks"].values()],
            },
            title=f"GLUE dev (macro {100 * res['macro']:.2f}, best epoch)",
            ylabel="task metric",
        )
    ]
    notes = [
        f"model: `{args.model}`; seeds {list(args.seeds)}, {args.epochs} epochs, lr {args.lr}, "
        f"weight decay {args.weight_decay}",
        "one number per task, as the paper's tables (it does not name them; BERT's convention): MCC "
        "(CoLA), F1 (MRPC), Spearman (STS-B), accuracy (SST-2, RTE); dev split, in points; "
        "mean ± sample sd over seeds",
        "best epoch: per seed the dev epoch with the best task metric (selected on the reported dev "
        "split); last epoch: after the last epoch; macro: mean over the tasks run",
        f"tags: {parser_note['name']} ({parser_note['why']})",
    ]
    if args.max_train or args.max_eval:
        notes.append(f"subsampled: max_train={args.max_train}, max_eval={args.max_eval}")
    _print_table(
        report.write_report(out, "glue", res, rows, cols, title="GLUE fine-tuning", notes=notes, plots=plots)
    )
    return 0


# ----------------------------------------------------------------------------------------------
# registration


def _area(sub: argparse._SubParsersAction, name: str, help: str) -> argparse._SubParsersAction:
    """The sub-command group ``name`` (shared with other modules that register under it)."""
    if name in sub.choices:
        parent = sub.choices[name]
        for action in parent._actions:
            if isinstance(action, argparse._SubParsersAction):
                return action
        return parent.add_subparsers(dest=f"{name}_command", metavar="TARGET", required=True)
    parent = sub.add_parser(name, help=help, description=help)
    return parent.add_subparsers(dest=f"{name}_command", metavar="TARGET", required=True)


def _glue_parser(args: argparse.Namespace, model: Any, model_path: Path) -> tuple[Any, dict[str, str]]:
    """The parser for GLUE tags: ``--parser``, else the one that prepared the pre-training data."""
    from structpe.eval.glue import recorded_parser

    if args.parser is not None or not uses_tags(model):
        parser = make_parser(args.parser, model, args.parser_model)
        why = "--parser" if args.parser is not None else "the model reads no tags"
        return parser, {"name": args.parser or "none", "why": why}
    rec = recorded_parser(model_path)
    if rec is None or rec["parser"] in (None, "gold"):
        why = ("pre-training used gold trees, which GLUE text does not have" if rec else
               "no pre-training record (summary.json -> structpe_prepare.json) next to the model")
        print(f"structpe finetune glue: tagging with spaCy: {why}; pass --parser to choose", file=sys.stderr)
        return make_parser("spacy", model, args.parser_model), {"name": "spacy", "why": why}
    from structpe.syntax.parsers import get_parser

    kwargs = dict(rec["parser_kwargs"])
    if args.parser_model:
        kwargs["model"] = args.parser_model
    note = {"name": rec["parser"], "why": f"as pre-training, {rec['source']}"}
    return get_parser(rec["parser"], **kwargs), note


def _glue_args(p: argparse.ArgumentParser) -> None:
    from structpe.eval.glue import FINETUNE_TASKS

    _common(p)
    p.add_argument(
        "--tasks", "--task", nargs="+", default=["all"], dest="tasks",
        help=f"GLUE tasks ({', '.join(FINETUNE_TASKS)}) or all (default), run in one go with one table",
    )
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2],
                   help="fine-tuning seeds; scores are mean ± sd over them")
    p.add_argument("--epochs", type=int, default=3,
                   help="epochs per run (the paper: 20); the best and the last epoch are reported")
    p.add_argument("--lr", type=float, default=2e-5)
    p.add_argument("--weight-decay", type=float, default=0.01, help="AdamW weight decay (the paper: 0.1)")
    p.add_argument("--max-length", type=int, default=128)
    p.add_argument("--max-train", type=int, help="use only the first N training examples per task")
    p.add_argument("--max-eval", type=int, help="use only the first N dev examples per task")
    p.set_defaults(func=cmd_glue)


def cmd_leakage(args: argparse.Namespace) -> int:
    """The leakage audit: how much of the conditional-perplexity gain needs future tag information."""
    from structpe.eval import leakage, ppl, report

    check_args(args)
    model, tok = load_model_and_tokenizer(args.model, args.tokenizer, device=args.device)
    parser = make_parser(args.parser or "spacy", model, args.parser_model)
    if args.text:
        texts = [ln.strip() for ln in read_lines(args.text) if ln.strip()][: args.limit]
    else:
        texts = [ppl.sentence_text(s) for s in ppl.read_tagged_jsonl(args.data, args.limit)]
    baseline = None
    if args.baseline:
        baseline, _ = load_model_and_tokenizer(args.baseline, args.tokenizer, device=args.device)
    res = leakage.leakage_audit(
        model, tok, texts, parser, baseline=baseline, variants=args.variants, batch_size=args.batch_size
    )
    res["model"] = args.model
    rows, cols = leakage.format_results(res)
    notes = [f"model: `{args.model}`", f"scoring: {res['scoring']}", f"{len(texts)} texts re-parsed"]
    if "leaked_share_upper" in res:
        notes.append(f"at most {100 * res['leaked_share_upper']:.1f}% of the full-parse gain is leakage")
    title = "Leakage audit (conditional perplexity under tag conditions)"
    paths = report.write_report(
        _out_dir(args, "leakage"), "leakage", res, rows, cols, title=title, notes=notes
    )
    _print_table(paths)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    ev = _area(
        sub, "eval", "Evaluate a model: perplexity, BLiMP, SyntaxGym, attention, GLUE (docs/design.md §4)."
    )

    p = ev.add_parser("ppl", help="token/word perplexity on tagged text, conditioned on its parse")
    _common(p)
    _scoring_args(p)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--data", help="tagged JSON lines (from `structpe tag`)")
    src.add_argument("--text", help="plain text, one sentence per line (tagged with --parser, default spacy)")
    p.add_argument("--limit", type=int, help="first N sentences")
    p.add_argument("--append-eos", action="store_true", help="also score an end-of-sentence token")
    p.add_argument("--max-length", type=int, help="skip sentences longer than this many tokens")
    p.set_defaults(func=cmd_ppl)

    from structpe.eval.leakage import VARIANTS as LEAKAGE_VARIANTS

    p = ev.add_parser("leakage", help="how much of a conditional-perplexity gain is future tag leakage")
    _common(p)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--data", help="JSON lines (from `structpe tag`): their text is re-parsed with --parser")
    src.add_argument("--text", help="plain text, one sentence per line")
    p.add_argument("--limit", type=int, help="first N sentences")
    p.add_argument("--baseline", help="a model reading no tags, trained on the same data (reference p(x))")
    p.add_argument("--variants", nargs="+", default=list(LEAKAGE_VARIANTS), choices=LEAKAGE_VARIANTS)
    p.set_defaults(func=cmd_leakage)

    p = ev.add_parser("blimp", help="BLiMP minimal pairs: accuracy per paradigm, field, phenomenon, overall")
    _common(p)
    _scoring_args(p)
    p.add_argument("--paradigms", nargs="+", help="subset of the 67 paradigms (default: all)")
    p.add_argument("--fields", nargs="+", help="only paradigms of these fields (syntax, morphology, ...)")
    p.add_argument("--phenomena", nargs="+", help="only paradigms of these phenomena (the paper's 12)")
    p.add_argument("--limit", type=int, help="first N pairs of each paradigm")
    p.add_argument("--keep-pairs", action="store_true", help="store per-pair log-probs in the JSON")
    p.set_defaults(func=cmd_blimp)

    p = ev.add_parser(
        "syntaxgym", help="SyntaxGym suites: region surprisal, suite accuracy, circuits, SG score"
    )
    _common(p)
    _scoring_args(p)
    p.add_argument(
        "--suites", nargs="+", help="suite names (default: all 34; the SG score uses the paper's 31)"
    )
    p.add_argument("--protocol", choices=("prediction0", "conjunction"), default="prediction0")
    p.add_argument(
        "--append-eos", action="store_true", help="score an EOS into the last region (LM-Zoo GPT-2)"
    )
    p.add_argument("--max-items", type=int, help="first N items of each suite")
    p.set_defaults(func=cmd_syntaxgym)

    p = ev.add_parser("attention", help="verb/object attention on BLiMP causative, base vs SiPE")
    _common(p, model=False)
    p.add_argument("--base", required=True, help="base model folder")
    p.add_argument("--sipe", required=True, help="SiPE model folder")
    p.add_argument("--tokenizer", help="base tokenizer folder (default: next to the model)")
    p.add_argument("--sipe-tokenizer", help="SiPE tokenizer folder (default: next to the model)")
    p.add_argument("--limit", type=int, help="first N sentences")
    p.add_argument("--direction", choices=("auto", "verb_to_object", "object_to_verb"), default="auto")
    p.set_defaults(func=cmd_attention)

    _glue_args(
        ev.add_parser("glue", help="fine-tune and evaluate on GLUE (same as `structpe finetune glue`)")
    )
    ft = _area(sub, "finetune", "Fine-tune a model on a downstream task.")
    _glue_args(
        ft.add_parser("glue", help="GLUE fine-tuning with per-sentence tags, several seeds, macro average")
    )
