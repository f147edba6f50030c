"""The sizes of ``structpe quickstart``: one dataclass, the defaults being the 2-core / 20-minute profile.

The default sizes were chosen from ``benchmarks/train_throughput.py`` so that the whole run fits in
about 20 minutes on 2 idle CPU cores (see docs/quickstart.md); every size is a parameter. Kept on
its own because every stage (``structpe.quickstart_data``, ``structpe.quickstart``,
``structpe.quickstart_report``) reads it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_BLIMP = (
    "determiner_noun_agreement_1",
    "regular_plural_subject_verb_agreement_1",
    "anaphor_number_agreement",
    "irregular_past_participle_verbs",
    "wh_questions_object_gap",
    "causative",
)


@dataclass
class QuickstartConfig:
    """Sizes of every stage; the defaults are the 2-core / 20-minute profile."""

    out: str = "quickstart"
    data_dir: str | None = None
    variants: tuple[str, ...] = ("none", "position")
    # who tags Brown (and every evaluated sentence): spaCy sm, or the packaged hexatagger, which is
    # 30 UAS points more accurate on EWT in UD's convention (docs/hexatagger.md)
    parser: str = "spacy"
    vocab_size: int = 4096  # vs 8192: 1.4x the tokens/s at about the same loss per text (docs/quickstart.md)
    train_sentences: int = 48040  # all of Brown train
    valid_sentences: int = 2000
    seq_len: int = 128
    # 4 x 256 over 3 x 128: lower validation loss per CPU-second on native bf16 (docs/quickstart.md)
    d_model: int = 256
    n_layers: int = 4
    n_heads: int = 4
    d_ff: int = 1024
    # no dropout: one or two epochs do not overfit, and dropout's masks take ~12% of a CPU step
    dropout: float = 0.0
    max_steps: int = 2000  # ~7 min per variant at 4 x 256 (bf16, 2 cores): the 20-minute budget
    batch_size: int = 16
    lr: float = 2e-3  # 1e-3 left a 3 x 128 model near unigram statistics at this budget (docs/quickstart.md)
    eval_every: int = 250
    bf16: bool | None = None  # None: bf16 autocast only where it is native (pretrain.native_bf16)
    compile: bool = False  # torch.compile: slower than bf16 eager on real batches here (docs/pretraining.md)
    seed: int = 42
    ppl_sentences: int = 500
    blimp_paradigms: tuple[str, ...] = DEFAULT_BLIMP
    blimp_limit: int = 200
    syntaxgym_suites: tuple[str, ...] | None = None  # None = all stored suites (the 31 + 3 extra)
    likelihoods: tuple[str, ...] = ("conditional", "joint", "marginal")
    marginal_k: int = 2
    leakage_sentences: int = 40
    chance_draws: int = 100
    progress: bool = True
    extra_overrides: list[str] = field(default_factory=list)

    def use_bf16(self) -> bool:
        from structpe.train.pretrain import resolve_bf16

        return resolve_bf16(self.bf16)

    def overrides(self, dataset: Path, run_dir: Path) -> list[str]:
        """Recipe overrides shared by every variant: same data, size, budget and seed."""
        return [
            f"train.dataset={dataset}",
            f"train.output_dir={run_dir}",
            f"model.d_model={self.d_model}",
            f"model.n_layers={self.n_layers}",
            f"model.n_heads={self.n_heads}",
            f"model.d_ff={self.d_ff}",
            f"model.dropout={self.dropout}",
            f"model.attention_dropout={self.dropout}",
            f"train.max_steps={self.max_steps}",
            f"train.batch_size={self.batch_size}",
            f"train.lr={self.lr}",
            f"train.seq_len={self.seq_len}",
            f"train.eval_every={self.eval_every}",
            f"train.bf16={str(self.use_bf16()).lower()}",
            f"train.compile={str(self.compile).lower()}",
            f"train.seed={self.seed}",
            f"train.progress={str(self.progress).lower()}",
            # a smoke run shorter than the recipes' 100 warm-up steps warms up over a tenth of it
            # (a recipe refuses max_steps below warmup: the lr would never reach its value)
            *([f"train.warmup={self.max_steps // 10}"] if self.max_steps < 100 else []),
            *self.extra_overrides,
        ]
