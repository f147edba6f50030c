"""structpe models in lm-evaluation-harness: the model type ``structpe`` (docs/evaluation.md).

    python -m structpe.lm_eval --model structpe \\
        --model_args pretrained=DIR,parser=spacy,likelihood=conditional,k=10,particles=8 --tasks ...

runs lm-eval's own command line (every option of ``lm_eval``) with ``structpe`` registered: lm-eval
0.4 finds model types only in its own registry (no plugin entry point), so its ``lm_eval`` script
cannot see a model type defined elsewhere; this module registers it (after lm-eval's own types, so
``--model hf`` & co. still work), puts structpe's offline tasks (``structpe_blimp_<paradigm>``,
resources/lm_eval_tasks) on the include path and hands over. From Python, ``import
structpe.lm_eval`` and pass ``model="structpe"`` to ``lm_eval.simple_evaluate``. ``model_args`` are
checked against :data:`MODEL_ARGS` before anything loads.

A loglikelihood request ``(context, continuation)`` is scored as one text, ``context +
continuation``, by structpe's scorer (``structpe.eval.scoring.make_scorer``), exactly as ``structpe
eval`` scores a sentence: the parser tags the whole text (``conditional``: log p(x | T); ``joint``:
log p(x, T)); ``marginal`` (the k-best lower bound on log p(x)) and ``smc`` (the particle estimate
of log p(x), ``particles`` per system; the pooled 4N estimate) sum over the tag sequences
themselves and use the parser only to find the words. The
continuation's log-probability is the sum over the tokens whose first character lies in the
continuation. Hugging Face causal LMs pass through (``pretrained=<HF folder>``, no tags).

``is_greedy`` is not computed (it would need the argmax under the same tags): it is reported as
False, so metrics built on it (e.g. LAMBADA's ``acc``) are not meaningful for this model type;
multiple-choice tasks (BLiMP, ...) and perplexities do not use it. ``generate_until`` is refused.
"""

from __future__ import annotations

import logging
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lm_eval.models  # noqa: F401  (lm-eval's own model types first: `hf` & co. stay registered)
from lm_eval.api.model import LM
from lm_eval.api.registry import register_model

from structpe.choices import DEFAULT_PARTICLES, DEFAULT_PROPOSAL, LIKELIHOODS, PROPOSALS
from structpe.errors import StructpeError, check_device, closest
from structpe.parser.registry import available_parsers

log = logging.getLogger(__name__)

REQUIRED = object()  # a model_arg without a default


@dataclass(frozen=True)
class ModelArg:
    """One ``--model_args`` key: its type, default and allowed values (checked before loading)."""

    kind: type  # str or int
    default: Any = None
    # a tuple of structpe.choices itself (the CLI's modes), or a function of the names known now
    choices: Sequence[str] | Callable[[], Sequence[str]] | None = None
    minimum: int | None = None
    auto: bool = False  # lm-eval's batch sizes also take "auto" / "auto:N"


# Every key the ``structpe`` type takes: its own, and those lm-eval passes to every model type
# (batch_size, max_batch_size, device from its CLI; trust_remote_code with --trust_remote_code).
MODEL_ARGS: dict[str, ModelArg] = {
    "pretrained": ModelArg(str, REQUIRED),
    "parser": ModelArg(str, choices=lambda: [*available_parsers(), "none"]),
    "likelihood": ModelArg(str, "conditional", choices=LIKELIHOODS),
    "k": ModelArg(int, 10, minimum=1),
    "particles": ModelArg(int, DEFAULT_PARTICLES, minimum=1),
    "proposal": ModelArg(str, DEFAULT_PROPOSAL, choices=PROPOSALS),
    "tokenizer": ModelArg(str),
    "parser_model": ModelArg(str),
    "batch_size": ModelArg(int, 16, minimum=1, auto=True),
    "max_batch_size": ModelArg(int, minimum=1),
    "device": ModelArg(str),
    "trust_remote_code": ModelArg(bool, False),  # accepted: structpe's folders run no remote code
}


def check_model_args(given: dict[str, Any]) -> dict[str, Any]:
    """``given`` checked against :data:`MODEL_ARGS` (unknown key with its close match, type, range,
    choices) and completed with the defaults; a StructpeError naming the key otherwise."""
    unknown = [key for key in given if key not in MODEL_ARGS]
    if unknown:
        key = unknown[0]
        raise StructpeError(
            f"model_args: unknown key {key!r}{closest(key, MODEL_ARGS)}; known: {', '.join(MODEL_ARGS)}"
        )
    out = {}
    for key, arg in MODEL_ARGS.items():
        value = given.get(key)
        if value is None:
            if arg.default is REQUIRED:
                raise StructpeError(f"model_args: {key}=... is required")
            out[key] = arg.default
            continue
        out[key] = _checked(key, value, arg)
    return out


def _checked(key: str, value: Any, arg: ModelArg) -> Any:
    if arg.auto and isinstance(value, str) and (value == "auto" or value.startswith("auto:")):
        return "auto"
    if arg.kind is bool:
        if isinstance(value, bool):
            return value
        raise StructpeError(f"model_args {key}={value!r}: expected true or false")
    if arg.kind is int:
        text = str(value).strip()
        if isinstance(value, bool) or not (text.isdigit() or text[:1] in "+-" and text[1:].isdigit()):
            what = "an integer or auto" if arg.auto else "an integer"
            raise StructpeError(f"model_args {key}={value!r}: expected {what}")
        value = int(text)
        if arg.minimum is not None and value < arg.minimum:
            raise StructpeError(f"model_args {key}={value}: must be >= {arg.minimum}")
        return value
    if isinstance(value, bool):  # lm-eval reads "true"/"false" as booleans
        raise StructpeError(f"model_args {key}={value!r}: expected a {arg.kind.__name__}")
    value = str(value)  # lm-eval reads a folder named "2024" as an int
    choices = arg.choices() if callable(arg.choices) else arg.choices
    if choices is not None and value not in choices:
        hint = closest(value, choices)
        raise StructpeError(f"model_args {key}={value!r}: expected one of {list(choices)}{hint}")
    return value


@register_model("structpe")
class StructpeLM(LM):
    """lm-eval's ``LM`` over a structpe (or Hugging Face causal) model folder."""

    def __init__(self, **model_args: Any) -> None:
        super().__init__()
        self._started = time.time()  # wall_s in the provenance: loading + scoring
        from structpe.eval.command_common import load_model_and_tokenizer, make_parser
        from structpe.eval.scoring.scorer import ScoringSpec, make_scorer

        args = check_model_args(model_args)
        size = args["batch_size"]
        if size == "auto":  # no probing: structpe's scorer batches by sentences, 16 fit any CPU
            size = min(16, args["max_batch_size"] or 16)
        import torch

        device = args["device"] or "cpu"
        if device.startswith("cuda") and not torch.cuda.is_available():  # lm_eval's CLI default is cuda
            log.warning("structpe: --device %s but no CUDA device here; running on cpu", device)
            device = "cpu"
        check_device(device, "model_args device")
        model, tok = load_model_and_tokenizer(args["pretrained"], args["tokenizer"], device=device)
        # marginal sums over the tag sequences itself: the parser only segments the words
        the_parser = make_parser(args["parser"], model, args["parser_model"])
        spec = ScoringSpec(
            kind="causal",
            likelihood=args["likelihood"],
            k=args["k"],
            particles=args["particles"],
            proposal=args["proposal"],
            batch_size=size,
            progress=False,
        )
        self.scorer = make_scorer(model, tok, the_parser, spec)
        self.settings = {
            key: args[key] for key in ("pretrained", "parser", "likelihood", "k", "particles", "proposal")
        }
        self._warned = False

    @classmethod
    def create_from_arg_obj(
        cls, arg_dict: dict[str, Any], additional_config: dict[str, Any] | None = None
    ) -> StructpeLM:
        """lm-eval's generic options (``--batch_size``, ``--device``, ...) fill what ``model_args``
        leaves out: the base class passes both as keywords, a TypeError when a key is in both."""
        generic = {k: v for k, v in (additional_config or {}).items() if v is not None}
        return cls(**{**generic, **arg_dict})

    @classmethod
    def create_from_arg_string(
        cls, arg_string: str, additional_config: dict[str, Any] | None = None
    ) -> StructpeLM:
        from lm_eval.utils import simple_parse_args_string

        return cls.create_from_arg_obj(simple_parse_args_string(arg_string), additional_config)

    def _scores(self, texts: list[str]) -> list[Any]:
        return self.scorer.score(texts)

    # the continuation's log-probability: the text's total (which, for the marginal, also holds the
    # tree's closing and the parser's parse; docs/likelihoods.md) less the context's own score, the
    # tokens whose first character lies before the continuation (for the marginal, the open prefix
    # bound of the context)

    def loglikelihood(self, requests: list[Any]) -> list[tuple[float, bool]]:
        pairs = [req.args for req in requests]
        scores = self._scores([ctx + cont for ctx, cont in pairs])
        if not self._warned:
            log.warning("structpe: is_greedy is reported as False (not computed); see structpe.lm_eval")
            self._warned = True
        out = []
        for (ctx, _cont), sc in zip(pairs, scores, strict=True):
            context = sum(
                lp for (start, _end), lp in zip(sc.offsets, sc.logprobs, strict=True) if start < len(ctx)
            )
            out.append((float(sc.total - context), False))
        return out

    def loglikelihood_rolling(self, requests: list[Any]) -> list[float]:
        return [sc.total for sc in self._scores([req.args[0] for req in requests])]

    def generate_until(self, requests: list[Any]) -> list[str]:
        raise NotImplementedError(
            "structpe's lm-eval model scores text (loglikelihood tasks); generate with `structpe generate`"
        )

    def get_model_info(self) -> dict[str, Any]:
        """What lm-eval records in its results' config (with structpe's provenance block)."""
        from structpe.provenance import provenance
        from structpe.train.prepare_settings import parser_record

        return {
            "structpe": self.settings,
            "provenance": provenance(
                started=self._started,
                model=self.settings["pretrained"],
                parser=parser_record(self.settings["parser"]),
                likelihood=self.settings["likelihood"],
                k=self.settings["k"] if self.settings["likelihood"] == "marginal" else None,
                **(
                    {"particles": self.settings["particles"], "proposal": self.settings["proposal"]}
                    if self.settings["likelihood"] == "smc"
                    else {}
                ),
            ),
        }


TASKS = Path(__file__).parent / "resources" / "lm_eval_tasks"


def main() -> int:
    """lm-eval's command line with the ``structpe`` model type registered (this module's import) and
    structpe's offline tasks on the include path; bad input ends in one line and exit status 2."""
    from lm_eval.__main__ import cli_evaluate

    from structpe.errors import is_input_error
    from structpe.provenance import record_command

    record_command([Path(sys.executable).name, "-m", "structpe.lm_eval", *sys.argv[1:]])
    if "--include_path" not in sys.argv:
        sys.argv += ["--include_path", str(TASKS)]
    try:
        cli_evaluate()
    except Exception as err:
        if not is_input_error(err):
            raise
        print(f"structpe.lm_eval: error: {' '.join(str(err).split())}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
