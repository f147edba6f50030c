"""CLI for pre-training: ``structpe tokenizer train``, ``structpe prepare``, ``structpe pretrain``.

Thin wrappers: each parses its arguments and calls the library function of the same name
(``train_tokenizer``, ``prepare``, ``pretrain``), so everything here is also scriptable.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from structpe import text_formats
from structpe.errors import StructpeError, check_choice, check_positive
from structpe.io import output_folder, refuse_overwrite_input
from structpe.parser.base import QUANTIZE_HELP, QUANTIZE_MODES
from structpe.parser.tag_controls import TAG_SOURCES
from structpe.train.corpus import PREPARE_NAMES, guess_format


def register(subparsers: Any) -> None:
    # -- structpe tokenizer train ---------------------------------------------------------------
    tok = subparsers.add_parser(
        "tokenizer", help="train a subword tokenizer for pre-training",
        description="Tokenizer tools. `structpe tokenizer train` fits a byte-level BPE (decoders) "
                    "or WordPiece (encoders) on corpus files and saves a Hugging Face fast tokenizer.",
    )
    tsub = tok.add_subparsers(dest="tokenizer_command", metavar="ACTION", required=True)
    tt = tsub.add_parser(
        "train", help="train a BPE / WordPiece tokenizer",
        description="Train a tokenizer with Hugging Face `tokenizers` and save it as a fast-tokenizer "
                    "folder (tokenizer.json, tokenizer_config.json). Inputs: .txt/.txt.gz (one text per "
                    "line) or .conllu/.conllu.gz (the words of each sentence).",
    )
    tt.add_argument("inputs", nargs="*", help="corpus files (or use --corpus)")
    tt.add_argument("--corpus", help="a corpus of the shared data folder: brown | gutenberg | "
                                     "gutenberg-pd-10m | ud-ewt (its train split)")
    tt.add_argument("--data-dir", help="data root for --corpus (default $STRUCTPE_DATA or ../shared/data)")
    tt.add_argument("-o", "--output", required=True, help="output folder")
    tt.add_argument("--kind", choices=("bpe", "wordpiece"), help="default: from --family (bpe for txl)")
    tt.add_argument("--family", default="txl", help="model family the tokenizer is for (default txl)")
    tt.add_argument("--vocab-size", type=int, default=8192, help="target vocabulary size (default 8192)")
    tt.add_argument("--min-frequency", type=int, default=2, help="minimum pair frequency (default 2)")
    tt.add_argument("--input-format", choices=("lines", "text", "conllu"), help="override the guess by name")
    tt.add_argument("--lowercase", action="store_true", help="lowercase before training (default: cased)")
    tt.add_argument("--text-form", choices=("raw", "tokenized"), default="raw",
                    help="raw: detokenize pre-tokenized sentences (Brown, CoNLL-U) into the form benchmarks "
                         "are written in (default); tokenized: words joined with spaces")
    tt.set_defaults(func=_tokenizer_train)

    # -- structpe prepare -----------------------------------------------------------------------
    pp = subparsers.add_parser(
        "prepare", help="parse, hexatag, tokenize and pack a corpus for pre-training",
        description="Sentence-split and parse a corpus (spaCy, the trained hexatagger, or gold CoNLL-U), "
                    "put each word's hexatags on its first subword, pack sentences into sequences of "
                    "--seq-len tokens and save a `datasets` folder (train/validation). Cached by a "
                    "fingerprint of the input contents, tokenizer and settings; deterministic.",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    pp.add_argument("--corpus", help="brown | gutenberg | gutenberg-pd-10m | ud-ewt (shared data folder)")
    pp.add_argument("--data-dir", help="data root for --corpus (default $STRUCTPE_DATA or ../shared/data)")
    pp.add_argument("--train", nargs="+", default=[], help="training files (instead of --corpus)")
    pp.add_argument("--validation", nargs="+", default=[], help="validation files")
    pp.add_argument("--test", nargs="+", default=[], help="optional test files")
    pp.add_argument("--with-test", action="store_true", help="with --corpus: also prepare its test split")
    pp.add_argument("--tokenizer", required=True, help="tokenizer folder (structpe tokenizer train)")
    pp.add_argument("-o", "--output", help="output folder (default: a cache folder named by the fingerprint)")
    pp.add_argument("--parser", default="spacy", choices=("spacy", "hexatagger", "gold"))
    pp.add_argument("--parser-model", help="spaCy package or trained hexatagger folder")
    pp.add_argument("--parser-quantize", choices=QUANTIZE_MODES, default="none", help=QUANTIZE_HELP)
    pp.add_argument("--input-format", choices=text_formats.INPUT_FORMATS,
                    help="raw-lines: one raw sentence per line; raw-text: running prose, paragraphs at "
                         "blank lines (Gutenberg); tokenized-lines: one tokenized sentence per line "
                         "(Brown); conllu. Default: the corpus's format, else by file name "
                         "(.conllu -> conllu, else raw-lines; docs/data.md)")
    pp.add_argument("--seq-len", type=int, default=128, help="tokens per packed sequence")
    pp.add_argument("--bos", choices=("sequence", "sentence"), default="sequence",
                    help="one BOS per packed sequence, or one per sentence")
    pp.add_argument("--max-sentences", type=int, help="use only the first N sentences (paragraphs for "
                                                      "text input) of each split")
    pp.add_argument("--nonprojective", choices=("lift", "skip", "error"), default="lift")
    pp.add_argument("--text-form", choices=("raw", "tokenized"),
                    help="text the model is trained on (default: the form the tokenizer was trained on)")
    pp.add_argument("--tags", choices=TAG_SOURCES, default="parse",
                    help="tag source: the parse (default), word-prefix parses (causal over words) or "
                         "the parse of another sentence of the same length (structpe.parser.tag_controls)")
    pp.add_argument("--num-proc", type=int, default=1, help="processes for parsing and tokenizing")
    pp.add_argument("--shard-units", type=int, default=None,
                    help="parse N units at a time, keeping finished shards: a killed run resumes there")
    pp.add_argument("--force", action="store_true", help="rebuild even if the cache matches")
    pp.set_defaults(func=_prepare)

    # -- structpe pretrain ----------------------------------------------------------------------
    pt = subparsers.add_parser(
        "pretrain", help="pre-train a SiPE model from a YAML recipe",
        description="Pre-train with the Hugging Face Trainer from a recipe (a YAML path or a name such as "
                    "txl/position-tiny) and key=value overrides (train.lr=1e-3, model.d_model=64, or a "
                    "bare key). Multi-GPU / multi-node: launch with torchrun -m structpe.cli pretrain ...",
    )
    pt.add_argument("--config", help="recipe file or name (see --list)")
    pt.add_argument("overrides", nargs="*", help="key=value overrides, e.g. train.dataset=DIR max_steps=200")
    pt.add_argument("--resume", action="store_true",
                    help="continue the run folder from its newest complete checkpoint")
    pt.add_argument("--resume-from", metavar="CHECKPOINT", help="continue from this checkpoint folder")
    pt.add_argument("--allow-changed-recipe", action="store_true",
                    help="resume although training settings (lr, seed, batch size, ...) differ from the "
                         "run's config.yaml (the change is saved as config-resumed-<step>.yaml)")
    pt.add_argument("--list", action="store_true", help="list the packaged recipes and exit")
    pt.set_defaults(func=_pretrain)


def _tokenizer_train(args: argparse.Namespace) -> int:
    from structpe.models.config import FAMILIES
    from structpe.train.prepare_settings import KNOWN_CORPORA, corpus_splits
    from structpe.train.tokenizer import default_kind, train_tokenizer

    check_choice("--family", args.family, FAMILIES)
    if args.corpus:
        check_choice("--corpus", args.corpus, KNOWN_CORPORA)
    check_positive("--vocab-size", args.vocab_size)
    check_positive("--min-frequency", args.min_frequency)
    for path in args.inputs:
        if not Path(path).is_file():
            what = "not a file" if Path(path).exists() else "no such file"
            raise StructpeError(f"tokenizer input {path}: {what}")
    output_folder(args.output, "-o/--output")
    refuse_overwrite_input(args.output, list(args.inputs), "-o/--output")
    inputs, fmt = list(args.inputs), args.input_format
    if args.corpus:
        splits, corpus_fmt = corpus_splits(args.corpus, args.data_dir, ("train",))
        inputs += splits["train"]
        fmt = fmt or ("conllu" if corpus_fmt == "conllu" else "lines")
    if not inputs:
        print("structpe tokenizer train: give input files or --corpus", file=sys.stderr)
        return 2
    tok = train_tokenizer(
        inputs, args.output, kind=args.kind or default_kind(args.family), vocab_size=args.vocab_size,
        min_frequency=args.min_frequency, input_format=fmt, lowercase=args.lowercase,
        text_form=args.text_form,
    )
    print(f"tokenizer: {len(tok)} tokens -> {args.output}")
    return 0


def _prepare(args: argparse.Namespace) -> int:
    from structpe.train.prepare import prepare
    from structpe.train.prepare_settings import KNOWN_CORPORA, PrepareSettings, corpus_splits

    if args.corpus:
        check_choice("--corpus", args.corpus, KNOWN_CORPORA)
    check_positive("--seq-len", args.seq_len)
    check_positive("--max-sentences", args.max_sentences)
    check_positive("--num-proc", args.num_proc)
    check_positive("--shard-units", args.shard_units)
    splits: dict[str, list] = {}
    fmt = None
    if args.corpus:
        wanted = ("train", "validation") + (("test",) if args.with_test else ())
        splits, fmt = corpus_splits(args.corpus, args.data_dir, wanted)
    for name in ("train", "validation", "test"):
        files = getattr(args, name)
        if files:
            splits[name] = files
    if "train" not in splits or "validation" not in splits:
        print("structpe prepare: give --corpus or both --train and --validation files", file=sys.stderr)
        return 2
    if args.input_format or not args.corpus:  # a --corpus knows its format
        first = splits["train"][0]
        fmt = PREPARE_NAMES[text_formats.resolve("prepare", args.input_format, first, tuple(PREPARE_NAMES))]
        if not args.input_format and fmt == guess_format(first):
            fmt = None  # as before the shared names: the prepared data's fingerprint stays the same
    kwargs = {"model": args.parser_model} if args.parser_model else {}
    if args.parser_quantize != "none":
        if args.parser != "hexatagger":
            print("structpe prepare: --parser-quantize applies to --parser hexatagger", file=sys.stderr)
            return 2
        kwargs["quantize"] = args.parser_quantize  # part of parser_kwargs, so of the fingerprint
    settings = PrepareSettings(
        parser=args.parser, parser_kwargs=kwargs, input_format=fmt, seq_len=args.seq_len, bos=args.bos,
        max_units=args.max_sentences, nonprojective=args.nonprojective, text_form=args.text_form,
        tags=args.tags,
    )
    try:
        out = prepare(splits, args.tokenizer, args.output, settings=settings, num_proc=args.num_proc,
                      force=args.force, shard_units=args.shard_units)
    except ValueError as err:  # prepare's checks of its inputs raise plain ValueErrors
        raise StructpeError(str(err)) from err
    print(out)
    return 0


def _pretrain(args: argparse.Namespace) -> int:
    from structpe.train.recipe import list_recipes, recipe_table

    if args.list:
        print("\n".join(recipe_table()) if list_recipes() else "(no recipes packaged)")
        return 0
    if not args.config:
        print("structpe pretrain: --config is required (a YAML file or a recipe name; see --list)",
              file=sys.stderr)
        return 2
    from structpe.train.pretrain import pretrain
    from structpe.train.trainer import NonFiniteLossError

    try:  # input errors (RecipeError, PreparedDataError, ...) go to the CLI's error boundary
        pretrain(args.config, args.overrides, resume=args.resume_from or args.resume,
                 allow_changed_recipe=args.allow_changed_recipe)
    except NonFiniteLossError as err:
        print(f"structpe pretrain: stopped: {err}", file=sys.stderr)
        return 3
    return 0
