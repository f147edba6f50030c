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

# each module -> the public names it defines, imported when first asked for
__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "ppl": ("evaluate_ppl",), "blimp": ("evaluate_blimp",), "syntaxgym.evaluate": ("evaluate_syntaxgym",),
    "glue.finetune": ("finetune_glue",), "attention": ("evaluate_attention",),
    "scoring.scorer": ("ScoringSpec", "make_scorer"),
})
