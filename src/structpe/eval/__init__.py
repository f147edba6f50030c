"""Evaluations that judge SiPE (docs/design.md §4): perplexity, BLiMP, SyntaxGym, GLUE, attention analysis.

Every evaluation is a plain function that works for our models (with tags from a parser) and for
any Hugging Face causal or masked LM (without tags):

- ``structpe.eval.ppl.evaluate_ppl(model, tokenizer, sentences, ...)``
- ``structpe.eval.blimp.evaluate_blimp(model, tokenizer, parser, data_dir, paradigms, ...)``
- ``structpe.eval.syntaxgym.evaluate.evaluate_syntaxgym(model, tokenizer, parser, data_dir, suites, ...)``
- ``structpe.eval.glue.finetune.finetune_glue(model_path, task, ...)``
- ``structpe.eval.attention.evaluate_attention(base, sipe, tokenizer, parser, ...)``

They share one scorer layer (``structpe.eval.scoring.scorer``) and one report writer
(``structpe.eval.report``); the CLI wrappers live in ``structpe.eval.commands``.
"""

from structpe.exports import lazy_exports

_WHERE = {  # public name -> the module that defines it
    "evaluate_ppl": "ppl",
    "evaluate_blimp": "blimp",
    "evaluate_syntaxgym": "syntaxgym.evaluate",
    "finetune_glue": "glue.finetune",
    "evaluate_attention": "attention",
    "ScoringSpec": "scoring.scorer",
    "make_scorer": "scoring.scorer",
}
__all__ = list(_WHERE)
__getattr__, __dir__ = lazy_exports(__name__, _WHERE)
