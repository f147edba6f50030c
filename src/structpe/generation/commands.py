"""``structpe generate``: sentences with their dependency trees from a SiPE decoder (JSON lines out).

Thin wrapper over :func:`structpe.generation.decoding.generate` (docs/generation.md): load the model, the
tokenizer and, when asked, a parser for the prompt or the trees to fill; write one JSON object per
sentence with the fields of ``structpe tag`` (words, heads, terminals, nonterminals) and ``meta``
(text, logprob, prompt_words, strategy).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from structpe.choices import STRATEGIES
from structpe.errors import StructpeError, check_device, check_positive
from structpe.hardware import THREADS_HELP, set_cpu_threads
from structpe.io import open_output
from structpe.parser.tagging import CONLLU_SUFFIXES, OUTPUT_FORMATS, sentence_writer


def register(subparsers: Any) -> None:
    p = subparsers.add_parser(
        "generate",
        help="generate text with its dependency tree (JSON lines or CoNLL-U out)",
        description=(
            "Generate sentences and their trees with a SiPE Transformer-XL decoder: tokens from the LM "
            "head, each new word's hexatags from the causal tag head under the well-formedness rules. "
            "With --tags, fill given trees (tree-controlled generation)."
        ),
    )
    p.add_argument("--model", required=True, help="saved structpe TXL model folder (with tag heads)")
    p.add_argument("--tokenizer", help="tokenizer folder (default: next to the model)")
    p.add_argument("--prompt", default="", help="text the sentence starts with")
    p.add_argument(
        "--prompt-parser",
        help="parse the prompt with this parser (spacy | hexatagger); default: "
        "the model tags the prompt's words (structpe tag's word rule) itself",
    )
    p.add_argument("--parser-model", help="parser model (spaCy package or hexatagger folder)")
    p.add_argument(
        "--prompt-tags", help="the prompt's parse as one JSON object (words, terminals, nonterminals)"
    )
    p.add_argument(
        "--tags",
        help="trees to fill: JSON lines from `structpe tag` or a CoNLL-U file (one sentence per tree)",
    )
    p.add_argument("--limit", type=int, help="at most this many trees from --tags")
    p.add_argument("-n", "--num", type=int, default=1, help="sentences per prompt or tree (default 1)")
    p.add_argument("--strategy", choices=STRATEGIES, default="sample", help="token choice (default sample)")
    p.add_argument("--temperature", type=float, default=1.0, help="sampling temperature (default 1.0)")
    p.add_argument("--top-k", type=int, help="sample among the k most likely tokens")
    p.add_argument("--top-p", type=float, help="sample from the smallest set with this much mass (nucleus)")
    p.add_argument("--num-beams", type=int, default=4, help="beam width for --strategy beam (default 4)")
    p.add_argument("--max-words", type=int, default=30, help="longest sentence in words (default 30)")
    p.add_argument("--max-tokens-per-word", type=int, default=8, help="longest word in tokens (default 8)")
    p.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    p.add_argument("-o", "--output", default="-", help="output file (default: stdout)")
    p.add_argument(
        "--output-format", choices=OUTPUT_FORMATS, default="jsonl",
        help="jsonl: one JSON object per sentence (default); conllu: CoNLL-U, hexatags in MISC",
    )
    p.add_argument("--svg", help="also draw every sentence's tree with spaCy's displaCy (one SVG file)")
    p.add_argument("--device", default="cpu")
    p.add_argument("--threads", type=int, default=None, help=THREADS_HELP)
    p.set_defaults(func=run_generate)


def run_generate(args: argparse.Namespace) -> int:
    try:
        return _run(args)
    except StructpeError:
        raise
    except ValueError as err:
        # Bad tags, prompts or options surface as ValueError from the library: one line, exit 2.
        raise StructpeError(str(err)) from None


def _trees(path: str, limit: int | None) -> list[Any]:
    """Tag sequences to fill: TaggedSentences from a JSON-lines file or encoded CoNLL-U trees."""
    from structpe.parser.registry import get_parser
    from structpe.syntax.tagged import TaggedSentence

    if not Path(path).is_file():
        raise FileNotFoundError(f"--tags file not found: {path}")
    if path.lower().endswith(CONLLU_SUFFIXES):
        from structpe.syntax.conllu_io import read_conllu

        sents = list(read_conllu(path))[:limit]
        return get_parser("gold").parse_conllu_sentences(sents)
    trees = []
    with open(path, encoding="utf-8") as fh:
        for i, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                trees.append(TaggedSentence.from_json(line))
            except (ValueError, KeyError) as err:
                raise ValueError(f"{path}, line {i}: {err}") from None
            if limit is not None and len(trees) >= limit:
                break
    if not trees:
        raise ValueError(f"{path}: no trees")
    return trees


def _check_length(model: Any, tok: Any, args: argparse.Namespace, trees: list[Any]) -> None:
    """Refuse a sentence length the model cannot reach: every word takes at least one token, and
    BOS, prompt and words must fit the model's positions. Without it a huge ``--max-words`` with
    greedy decoding runs on past every position the model was trained on."""
    from structpe.models.validate import position_limit

    limit = position_limit(model)
    if limit is None:
        return
    prompt = len(tok(args.prompt, add_special_tokens=False)["input_ids"]) if args.prompt else 0
    most = limit - prompt - 2  # BOS and the token that ends the sentence
    if trees[0] is not None and max(len(t.words) for t in trees) > most:
        longest = max(len(t.words) for t in trees)
        raise StructpeError(f"--tags {args.tags}: a tree of {longest:,} words, over the {most:,} words the "
                            f"model's {limit} positions allow; give shorter trees")
    if trees[0] is None and args.max_words > most:
        raise StructpeError(f"--max-words {args.max_words:,}: over the {most:,} words the model's {limit} "
                            f"positions allow (a word takes one token or more); use at most {most}")


def _run(args: argparse.Namespace) -> int:
    from structpe.eval.command_common import load_model_and_tokenizer
    from structpe.generation.decoding import generate
    from structpe.syntax.tagged import TaggedSentence

    if args.num < 1 or (args.limit is not None and args.limit < 1):
        raise ValueError("-n/--num and --limit must be >= 1")
    if args.prompt_tags and args.prompt_parser:
        raise ValueError("give --prompt-tags or --prompt-parser, not both")
    if (args.prompt_tags or args.prompt_parser) and not args.prompt:
        raise ValueError("--prompt-tags / --prompt-parser need --prompt")
    from structpe.generation.options import check_options

    check_options(args.strategy, args.num, args.temperature, args.top_k, args.top_p, args.num_beams,
                  args.max_words, args.max_tokens_per_word)
    check_device(args.device)
    check_positive("--threads", args.threads)
    set_cpu_threads(args.threads)
    trees = _trees(args.tags, args.limit) if args.tags else [None]  # bad input fails before loading
    model, tok = load_model_and_tokenizer(args.model, args.tokenizer, device=args.device)
    _check_length(model, tok, args, trees)
    prompt_parse = None
    if args.prompt_tags:
        try:
            prompt_parse = TaggedSentence.from_dict(json.loads(args.prompt_tags))
        except (ValueError, KeyError) as err:
            raise ValueError(f"--prompt-tags: {err}") from None
    parser = None
    if args.prompt_parser:
        from structpe.parser.registry import get_parser

        parser = get_parser(args.prompt_parser, **({"model": args.parser_model} if args.parser_model else {}))
    kw = dict(
        n=args.num,
        strategy=args.strategy,
        temperature=args.temperature,
        top_k=args.top_k,
        top_p=args.top_p,
        num_beams=args.num_beams,
        max_words=args.max_words,
        max_tokens_per_word=args.max_tokens_per_word,
        parser=parser,
        prompt_parse=prompt_parse,
    )
    render = sentence_writer(args.output_format)
    lines, sentences = [], []
    for i, tree in enumerate(trees):
        for s in generate(model, tok, args.prompt, tags=tree, seed=args.seed + i, **kw):
            if tree is not None and tree.sent_id is not None:
                s.sent_id = f"{tree.sent_id}-generated"
            sentences.append(s)
            lines.append(render(s, len(sentences)))
    _write(args.output, "".join(lines))
    if args.svg:
        _write(args.svg, trees_svg(sentences))
    dest = "stdout" if args.output == "-" else args.output
    print(f"structpe generate: wrote {len(lines)} sentences to {dest}", file=sys.stderr)
    return 0


def trees_svg(sentences: list[Any]) -> str:
    """Every sentence's tree (:func:`tree_svg`) stacked top to bottom in one SVG document."""
    import re

    parts, y, width = [], 0, 0
    for sent in sentences:
        svg = tree_svg(sent)
        w, h = (float(re.search(rf'{k}="([0-9.]+)"', svg).group(1)) for k in ("width", "height"))
        parts.append(f'<g transform="translate(0,{y:g})">{svg}</g>')
        y, width = y + h, max(width, w)
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width:g}" height="{y:g}" '
        f'viewBox="0 0 {width:g} {y:g}">' + "".join(parts) + "</svg>\n"
    )


def tree_svg(sent: Any) -> str:
    """The dependency tree as displaCy draws it (manual mode): words, their hexatags, arcs."""
    from spacy import displacy

    words = [
        {"text": w, "tag": f"{t} {nt}"}
        for w, t, nt in zip(sent.words, sent.terminal_names, sent.nonterminal_names, strict=True)
    ]
    arcs = []
    for dep, head in enumerate(sent.heads, 1):
        if head:
            lo, hi = sorted((head - 1, dep - 1))
            arcs.append({"start": lo, "end": hi, "label": "", "dir": "left" if dep < head else "right"})
    return displacy.render(
        {"words": words, "arcs": arcs},
        style="dep",
        manual=True,
        jupyter=False,
        options={"compact": True, "distance": 110},
    )


def _write(path: str, text: str) -> None:
    """stdout, or atomically (a temporary file in the same folder, then a rename)."""
    with open_output(path) as fh:
        fh.write(text)
