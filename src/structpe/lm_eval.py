"""structpe models in lm-evaluation-harness: the model type ``structpe`` (docs/evaluation.md).

    python -m structpe.lm_eval --model structpe \\
        --model_args pretrained=DIR,parser=spacy,likelihood=conditional,k=10,particles=8 --tasks ...

runs lm-eval's own command line (every option of ``lm_eval``) with ``structpe`` registered: lm-eval
0.4 finds model types only in its own registry (no plugin entry point), so its ``lm_eval`` script
cannot see a model type defined elsewhere; this module registers it and hands over. From Python,
``import structpe.lm_eval`` and pass ``model="structpe"`` to ``lm_eval.simple_evaluate``.

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
from typing import Any

from lm_eval.api.model import LM
from lm_eval.api.registry import register_model

from structpe.choices import DEFAULT_PARTICLES, LIKELIHOODS

log = logging.getLogger(__name__)


@register_model("structpe")
class StructpeLM(LM):
    """lm-eval's ``LM`` over a structpe (or Hugging Face causal) model folder."""

    def __init__(
        self,
        pretrained: str,
        parser: str | None = None,
        likelihood: str = "conditional",
        k: int = 10,
        particles: int = DEFAULT_PARTICLES,
        tokenizer: str | None = None,
        parser_model: str | None = None,
        batch_size: int | str | None = 16,
        device: str | None = None,
        **_: Any,  # lm-eval's generic options (max_batch_size ...) that do not apply here
    ) -> None:
        super().__init__()
        from structpe.errors import StructpeError
        from structpe.eval.command_common import load_model_and_tokenizer, make_parser
        from structpe.eval.scoring.scorer import ScoringSpec, make_scorer

        if likelihood not in LIKELIHOODS:
            raise StructpeError(f"model_args likelihood={likelihood!r}: expected one of {LIKELIHOODS}")
        size = 16 if batch_size in (None, "auto") or str(batch_size).startswith("auto") else int(batch_size)
        import torch

        device = device or "cpu"
        if device.startswith("cuda") and not torch.cuda.is_available():  # lm_eval's CLI default is cuda
            log.warning("structpe: --device %s but no CUDA device here; running on cpu", device)
            device = "cpu"
        model, tok = load_model_and_tokenizer(pretrained, tokenizer, device=device)
        # marginal sums over the tag sequences itself: the parser only segments the words
        the_parser = make_parser(parser, model, parser_model)
        if int(particles) < 1:
            raise StructpeError(f"model_args particles={particles}: expected a whole number >= 1")
        spec = ScoringSpec(
            kind="causal",
            likelihood=likelihood,
            k=int(k),
            particles=int(particles),
            batch_size=size,
            progress=False,
        )
        self.scorer = make_scorer(model, tok, the_parser, spec)
        self.settings = {
            "pretrained": pretrained,
            "parser": parser,
            "likelihood": likelihood,
            "k": int(k),
            "particles": int(particles),
        }
        self._warned = False

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
                model=self.settings["pretrained"],
                parser=parser_record(self.settings["parser"]),
                likelihood=self.settings["likelihood"],
                k=self.settings["k"] if self.settings["likelihood"] == "marginal" else None,
                **({"particles": self.settings["particles"]} if self.settings["likelihood"] == "smc" else {}),
            ),
        }


def main() -> None:
    """lm-eval's command line, with the ``structpe`` model type registered (this module's import)."""
    from lm_eval.__main__ import cli_evaluate

    cli_evaluate()


if __name__ == "__main__":
    main()
