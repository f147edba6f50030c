"""The sizes of ``structpe quickstart`` and the study spec they make.

The defaults are the ``quickstart`` profile of the ``sipe-txl`` study (its model, data, budget and
evaluations; a test keeps the two equal), chosen from ``benchmarks/train_throughput.py`` so that one
seed fits in about 20 minutes on 2 idle CPU cores (see docs/quickstart.md); every size is a
parameter. :func:`study_spec` turns a config into that profile at one seed, which the study harness
runs (``structpe.quickstart.run``).
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the study harness is torch-heavy: `structpe quickstart --help` must stay fast
    from structpe.study.spec import StudySpec

STUDY = "sipe-txl"
PROFILE = "quickstart"
# the profile's five seeds as committed in this checkout (structpe.quickstart.reference): the
# spread a single run sits in; absent in an installed package without the repository's docs/
REFERENCE_DIR = Path(__file__).resolve().parents[3] / "docs" / "studies" / "sipe-txl-quickstart"

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
    bf16: bool | None = None  # None: bf16 autocast only where it is native (structpe.hardware.native_bf16)
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
    # a study folder of the profile to place this run in (None: REFERENCE_DIR, if it is there)
    reference: str | None = None

    def use_bf16(self) -> bool:
        from structpe.hardware import resolve_bf16

        return resolve_bf16(self.bf16)

    def overrides(self) -> list[str]:
        """Recipe overrides shared by every variant: same size, budget and precision (the study
        runner adds the data, the run folder and the seed)."""
        return [
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
            f"train.bf16={'auto' if self.bf16 is None else str(self.bf16).lower()}",
            f"train.compile={str(self.compile).lower()}",
            # a smoke run shorter than the recipes' 100 warm-up steps warms up over a tenth of it
            # (a recipe refuses max_steps below warmup: the lr would never reach its value)
            *([f"train.warmup={self.max_steps // 10}"] if self.max_steps < 100 else []),
            *self.extra_overrides,
        ]


def study_spec(cfg: QuickstartConfig) -> StudySpec:
    """The ``quickstart`` profile of the ``sipe-txl`` study with ``cfg``'s sizes, variants and one seed."""
    from structpe.study.spec import (
        BlimpSpec,
        DatasetSpec,
        EvaluationsSpec,
        LeakageSpec,
        PplSpec,
        RecipeSpec,
        SyntaxGymSpec,
        load_spec,
    )

    spec = copy.deepcopy(load_spec(STUDY, PROFILE))
    known = {r.label: r for r in spec.recipes}
    spec.recipes = [known.get(v, RecipeSpec(v, f"txl/{v}")) for v in cfg.variants]
    spec.baseline = "none" if "none" in cfg.variants else cfg.variants[0]
    spec.claims = [c for c in spec.claims if {c.recipe, c.against} <= set(cfg.variants)]
    spec.seeds = [cfg.seed]
    spec.profile_overrides = cfg.overrides()
    spec.dataset = DatasetSpec(
        corpus="brown",
        parser=cfg.parser,
        tokenizer="bpe",
        vocab_size=cfg.vocab_size,
        train_sentences=cfg.train_sentences,
        valid_sentences=cfg.valid_sentences,
        test_sentences=cfg.ppl_sentences,
        seq_len=cfg.seq_len,
    )
    modes = list(cfg.likelihoods)
    leakage = None
    if "none" in cfg.variants and cfg.leakage_sentences > 0:
        leakage = LeakageSpec(
            conditions=["full", "untagged", "no_eos", "prefix", "prefix_drop_last"],
            sentences=cfg.leakage_sentences,
            full_parse="text",
        )
    spec.evaluations = EvaluationsSpec(
        ppl=PplSpec(likelihoods=modes, k=cfg.marginal_k),
        leakage=leakage,
        blimp=BlimpSpec(
            paradigms=list(cfg.blimp_paradigms), limit=cfg.blimp_limit, likelihoods=modes, k=cfg.marginal_k
        ),
        syntaxgym=SyntaxGymSpec(
            suites=list(cfg.syntaxgym_suites) if cfg.syntaxgym_suites else "all",
            likelihoods=modes,
            k=cfg.marginal_k,
        ),
    )
    return spec
