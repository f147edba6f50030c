"""Pre-training: raw text -> hexatagged packed sequences -> trained SiPE checkpoints (docs/design.md §2, §6).

* ``tokenizer``  -- ``train_tokenizer``: byte-level BPE (decoders) / WordPiece (encoders)
* ``prepare``    -- ``prepare``: parse, align tags to first subwords, pack, save (fingerprint cache)
  (its steps ``prepare_steps``, settings and cache identity ``prepare_settings``, ``prepare_deprels``)
* ``corpus``     -- reading pre-training corpora (text files, CoNLL-U treebanks)
* ``collators``  -- ``CausalCollator`` and ``MLMCollator`` (15%, 80/10/10, prior zeroed via labels)
* ``recipe``     -- ``TrainConfig``, ``load_recipe`` (YAML + ``key=value`` overrides, typo errors)
* ``pretrain``   -- ``pretrain``: the Hugging Face Trainer with SiPE loss logging, perplexity,
  NaN stop, exact resume and a run folder (``trainer``, ``checkpoints``, ``master_weights``, ``model_card``);
  ``adapter`` -- the same on an adapted Hugging Face model
* ``commands``   -- ``structpe tokenizer train`` / ``structpe prepare`` / ``structpe pretrain``

Heavy modules are imported when a name below is first asked for, so ``import structpe.train`` stays cheap.
"""

from structpe.exports import lazy_exports

# each module -> the public names it defines, imported when first asked for
__getattr__, __dir__, __all__ = lazy_exports(__name__, {
    "tokenizer": ("train_tokenizer", "load_tokenizer"), "recipe": ("load_recipe", "TrainConfig"),
    "collators": ("CausalCollator", "MLMCollator"),
})
