"""CLI: ``structpe eval ppl|blimp|syntaxgym|attention|glue`` and ``structpe finetune glue``.

Thin wrappers (see cli.py): parse arguments, load model/tokenizer/parser, call the library
function, write JSON + Markdown (+ PNG) with :mod:`structpe.eval.report`. The shared loading and
argument checks live in ``structpe.eval.command_common`` and the GLUE commands in
``structpe.eval.glue.commands``.
"""

from __future__ import annotations

import argparse
import sys
import time

from structpe import text_formats
from structpe.choices import EXACT_MAX_WORDS, LEAKAGE_DEFAULT, LEAKAGE_VARIANTS
from structpe.errors import StructpeError
from structpe.eval.command_common import (
    add_area,
    add_budget_arg,
    add_scoring_args,
    budget_notes,
    check_args,
    check_names,
    common_options,
    eval_out_dir,
    eval_provenance,
    load_model_and_tokenizer,
    make_parser,
    print_table,
    read_lines,
    scoring_spec,
)
from structpe.eval.glue.commands import add_glue_args

# ----------------------------------------------------------------------------------------------
# commands


def cmd_ppl(args: argparse.Namespace) -> int:
    from structpe.eval import ppl, report

    started = time.time()
    check_args(args)
    # tagged input is read (and checked) before the model loads: a bad line costs nothing
    sents = ppl.read_tagged_jsonl(args.data, args.limit) if args.data else []
    lines: list[str] = []
    if args.text:
        from structpe.parser.tagging import text_items

        fmt = text_formats.resolve("eval ppl", args.input_format, args.text, ("raw-lines", "raw-text"))
        lines = [text for _, text in text_items(fmt, read_lines(args.text), args.text)][: args.limit]
        if not lines:
            raise StructpeError(f"--text {args.text}: no text to score (the file is empty or blank)")
    model, tok = load_model_and_tokenizer(args.model, args.tokenizer, kind=args.kind, device=args.device)
    if args.text:
        parser = make_parser(args.parser or "spacy", model, args.parser_model)
        from structpe.eval.scoring.inputs import parse_texts

        sents = parse_texts(parser, lines) or []
        for s, text in zip(sents, lines, strict=True):
            s.meta["text"] = text
    res = ppl.evaluate_ppl(model, tok, sents, spec=scoring_spec(args, max_length=args.max_length))
    res["model"] = args.model
    rows, cols = ppl.format_results(res)
    out = eval_out_dir(args, "ppl")
    notes = [f"model: `{args.model}`", f"scoring: {res['scoring']}"]
    if res["texts_detokenized"]:
        note = (f"{res['texts_detokenized']} sentences had no raw `text`: their words were detokenized "
                "by the training rule (sacremoses)")
        notes.append(note)
        print(f"structpe eval ppl: note: {note}", file=sys.stderr)
    if res["pseudo_perplexity"]:
        notes.append("masked LM: these are pseudo-perplexities (PLL), not comparable with causal perplexity")
    prov = eval_provenance(args, started, parser if args.text else None, [args.data or args.text])
    print_table(
        report.write_report(out, "ppl", res, rows, cols, title="Perplexity", notes=notes, provenance=prov)
    )
    return 0


def check_exact(args: argparse.Namespace) -> None:
    """``--exact-max-words``: a word limit the enumeration affords, in place of a likelihood mode."""
    n = args.exact_max_words
    if not 1 <= n <= EXACT_MAX_WORDS:
        raise StructpeError(
            f"--exact-max-words {n}: 1 to {EXACT_MAX_WORDS} (every tree of a sentence is scored: "
            "8,448 at 7 words, 54,912 at 8)"
        )
    if args.likelihood != "conditional" or args.kind == "masked":
        raise StructpeError(
            f"--exact-max-words {n}: the exact p(x) of a causal model replaces the likelihood mode; "
            f"drop --likelihood {args.likelihood}" + (" and --kind masked" if args.kind == "masked" else "")
        )


def cmd_blimp(args: argparse.Namespace) -> int:
    from structpe.eval import blimp, report

    started = time.time()
    check_args(args)
    check_names("--paradigms", args.paradigms, blimp.list_paradigms(args.data_dir))
    if args.exact_max_words is not None:
        check_exact(args)
    model, tok = load_model_and_tokenizer(args.model, args.tokenizer, kind=args.kind, device=args.device)
    # the exact mode counts words with a parser for every model (a baseline keeps the same pairs)
    name = args.parser or ("spacy" if args.exact_max_words is not None else None)
    parser = make_parser(name, model, args.parser_model)
    res = blimp.evaluate_blimp(
        model, tok, parser, args.data_dir, args.paradigms, limit=args.limit, fields=args.fields,
        phenomena=args.phenomena, spec=scoring_spec(args), keep_pairs=args.keep_pairs,
        exact_max_words=args.exact_max_words,
    )
    res["model"] = args.model
    res["chance"] = blimp.CHANCE
    rows, cols = blimp.format_results(res)
    out = eval_out_dir(args, "blimp")
    plots = [
        report.bar_plot(
            out / "blimp_paradigms.png",
            list(res["per_paradigm"]),
            {"accuracy": list(res["per_paradigm"].values())},
            title=f"BLiMP accuracy per paradigm (overall {res['overall']:.3f}; dashed: chance "
            f"{blimp.CHANCE})",
            ylabel="accuracy",
            hline=blimp.CHANCE,
        )
    ]
    notes = [f"model: `{args.model}`", f"scoring: {res['scoring']}", f"pairs: {res['n_pairs']}"]
    notes += budget_notes(res, "pair")
    files = [blimp.blimp_dir(args.data_dir) / f"{p}.jsonl.gz" for p in res["per_paradigm"]]
    prov = eval_provenance(args, started, parser, files)
    if args.exact_max_words is not None:
        prov["likelihood"] = "exact"
    print_table(
        report.write_report(
            out, "blimp", res, rows, cols, title="BLiMP", notes=notes, plots=plots, provenance=prov
        )
    )
    return 0


def cmd_syntaxgym(args: argparse.Namespace) -> int:
    from structpe.eval import report
    from structpe.eval.syntaxgym import evaluate as syntaxgym

    started = time.time()
    check_args(args)
    suites = sorted(p.stem for p in syntaxgym.suites_dir(args.data_dir).glob("*.json"))
    check_names("--suites", args.suites, suites)
    model, tok = load_model_and_tokenizer(args.model, args.tokenizer, kind=args.kind, device=args.device)
    parser = make_parser(args.parser, model, args.parser_model)
    res = syntaxgym.evaluate_syntaxgym(
        model, tok, parser, args.data_dir, args.suites, spec=scoring_spec(args), protocol=args.protocol,
        max_items=args.max_items,
    )
    res["model"] = args.model
    names = list(res["suite_accuracy"])
    res["chance"] = syntaxgym.chance_row(args.data_dir, names, args.protocol, args.max_items)
    rows, cols = syntaxgym.format_results(res)
    out = eval_out_dir(args, "syntaxgym")
    plots = [
        report.bar_plot(
            out / "syntaxgym_suites.png",
            names,
            {
                "model": list(res["suite_accuracy"].values()),
                "chance": [res["chance"]["suite_accuracy"][s] for s in names],
            },
            title=f"SyntaxGym suite accuracy (SG score {res['sg_score']:.3f}, chance "
            f"{res['chance']['sg_score']:.3f}, {res['n_suites']} suites)",
            ylabel="accuracy",
        )
    ]
    notes = [
        f"model: `{args.model}`",
        f"scoring: {res['scoring']}",
        f"protocol: {res['protocol']} (paper: prediction 0); SG score = unweighted mean over suites",
    ]
    notes += budget_notes(res, "item")
    if not res["complete_31"]:
        notes.append(f"only {res['n_suites']} of the paper's 31 suites were run: not the paper's SG score")
    files = [syntaxgym.suites_dir(args.data_dir) / f"{s}.json" for s in res["suite_accuracy"]]
    paths = report.write_report(
        out, "syntaxgym", res, rows, cols, title="SyntaxGym", notes=notes, plots=plots,
        provenance=eval_provenance(args, started, parser, files),
    )
    print_table(paths)
    return 0


def cmd_attention(args: argparse.Namespace) -> int:
    from structpe.eval import attention, report
    from structpe.eval.blimp import blimp_dir
    from structpe.provenance import model_record

    started = time.time()
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
    out = eval_out_dir(args, "attention")
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
        provenance=eval_provenance(
            args, started, parser, [blimp_dir(args.data_dir) / "causative.jsonl.gz"],
            model=args.sipe, base_model=model_record(args.base),
        ),
    )
    print_table(paths)
    return 0


# ----------------------------------------------------------------------------------------------
# registration


def cmd_leakage(args: argparse.Namespace) -> int:
    """The leakage audit: how much of the conditional-perplexity gain needs future tag information."""
    from structpe.eval import leakage, ppl, report

    started = time.time()
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
    prov = eval_provenance(args, started, parser, [args.data or args.text])
    paths = report.write_report(
        eval_out_dir(args, "leakage"), "leakage", res, rows, cols, title=title, notes=notes, provenance=prov
    )
    print_table(paths)
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    ev = add_area(
        sub, "eval", "Evaluate a model: perplexity, BLiMP, SyntaxGym, attention, GLUE (docs/design.md §4)."
    )

    p = ev.add_parser("ppl", help="token/word perplexity on tagged text, conditioned on its parse")
    common_options(p)
    add_scoring_args(p)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--data", help="tagged JSON lines (from `structpe tag`)")
    src.add_argument("--text", help="plain text, one sentence per line (tagged with --parser, default spacy)")
    p.add_argument(
        "--input-format", choices=text_formats.INPUT_FORMATS,
        help="of --text: raw-lines (one text per line, the default) or raw-text (paragraphs at blank "
        "lines); the names tag and prepare use (docs/data.md)",
    )
    p.add_argument("--limit", type=int, help="first N sentences")
    p.add_argument("--append-eos", action="store_true", help="also score an end-of-sentence token")
    p.add_argument("--max-length", type=int, help="skip sentences longer than this many tokens")
    p.set_defaults(func=cmd_ppl)

    p = ev.add_parser("leakage", help="how much of a conditional-perplexity gain is future tag leakage")
    common_options(p)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--data", help="JSON lines (from `structpe tag`): their text is re-parsed with --parser")
    src.add_argument("--text", help="plain text, one sentence per line")
    p.add_argument("--limit", type=int, help="first N sentences")
    p.add_argument("--baseline", help="a model reading no tags, trained on the same data (reference p(x))")
    p.add_argument("--variants", nargs="+", default=list(LEAKAGE_DEFAULT), choices=LEAKAGE_VARIANTS)
    p.set_defaults(func=cmd_leakage)

    p = ev.add_parser("blimp", help="BLiMP minimal pairs: accuracy per paradigm, field, phenomenon, overall")
    common_options(p)
    add_scoring_args(p)
    p.add_argument("--paradigms", nargs="+", help="subset of the 67 paradigms (default: all)")
    p.add_argument("--fields", nargs="+", help="only paradigms of these fields (syntax, morphology, ...)")
    p.add_argument("--phenomena", nargs="+", help="only paradigms of these phenomena (the paper's 12)")
    p.add_argument("--limit", type=int, help="first N pairs of each paradigm")
    p.add_argument("--keep-pairs", action="store_true", help="store per-pair log-probs in the JSON")
    add_budget_arg(p, "pair")
    p.add_argument(
        "--exact-max-words",
        type=int,
        help=f"causal models: score only the pairs whose two sentences have at most this many words "
        f"(1-{EXACT_MAX_WORDS}), by the exact p(x), every tree summed, in place of --likelihood "
        "(docs/likelihoods.md)",
    )
    p.set_defaults(func=cmd_blimp)

    p = ev.add_parser(
        "syntaxgym", help="SyntaxGym suites: region surprisal, suite accuracy, circuits, SG score"
    )
    common_options(p)
    add_scoring_args(p)
    p.add_argument(
        "--suites", nargs="+", help="suite names (default: all 34; the SG score uses the paper's 31)"
    )
    p.add_argument("--protocol", choices=("prediction0", "conjunction"), default="prediction0")
    p.add_argument(
        "--append-eos", action="store_true", help="score an EOS into the last region (LM-Zoo GPT-2)"
    )
    p.add_argument("--max-items", type=int, help="first N items of each suite")
    add_budget_arg(p, "item")
    p.set_defaults(func=cmd_syntaxgym)

    p = ev.add_parser("attention", help="verb/object attention on BLiMP causative, base vs SiPE")
    common_options(p, model=False)
    p.add_argument("--base", required=True, help="base model folder")
    p.add_argument("--sipe", required=True, help="SiPE model folder")
    p.add_argument("--tokenizer", help="base tokenizer folder (default: next to the model)")
    p.add_argument("--sipe-tokenizer", help="SiPE tokenizer folder (default: next to the model)")
    p.add_argument("--limit", type=int, help="first N sentences")
    p.add_argument("--direction", choices=("auto", "verb_to_object", "object_to_verb"), default="auto")
    p.set_defaults(func=cmd_attention)

    add_glue_args(
        ev.add_parser("glue", help="fine-tune and evaluate on GLUE (same as `structpe finetune glue`)")
    )
    ft = add_area(sub, "finetune", "Fine-tune a model on a downstream task.")
    add_glue_args(
        ft.add_parser("glue", help="GLUE fine-tuning with per-sentence tags, several seeds, macro average")
    )


