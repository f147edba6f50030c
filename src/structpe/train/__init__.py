"""Pre-training: raw text -> hexatagged packed sequences -> trained SiPE checkpoints (docs/design.md §2, §6).

* ``tokenizer``  -- ``train_tokenizer``: byte-level BPE (decoders) / WordPiece (encoders)
* ``prepare``    -- ``prepare``: parse, align tags to first subwords, pack, save (fingerprint cache)
* ``collators``  -- ``CausalCollator`` and ``MLMCollator`` (15%, 80/10/10, prior zeroed via labels)
* ``recipe``     -- ``TrainConfig``, ``load_recipe`` (YAML + ``key=value`` overrides, typo errors)
* ``pretrain``   -- ``pretrain``: the Hugging Face Trainer with SiPE loss logging, perplexity,
  NaN stop, exact resume and a run folder
* ``commands``   -- ``structpe tokenizer train`` / ``structpe prepare`` / ``structpe pretrain``

Heavy modules are not imported here, so ``import structpe.train`` stays cheap.
"""
