"""The shared scorer layer: per-token log-probabilities with character offsets (docs/design.md §4).

Every evaluation (perplexity, BLiMP, SyntaxGym, attention) goes through one of two scorers, so the
conventions live in exactly one place:

- :class:`CausalScorer` — decoders (our Transformer-XL family or any Hugging Face causal LM).
  The text is tokenized *as written* (fast tokenizer, ``return_offsets_mapping``), a BOS token is
  prepended (``tokenizer.bos_token``, else EOS, as lm-eval-harness does) and token t is scored by
  log softmax(logits[t-1])[x_t]. The BOS itself is never scored.
- :class:`MaskedScorer` — encoders: pseudo-log-likelihood (Salazar et al. 2020), either
  ``original`` (mask only the target token) or ``within_word_l2r`` (Kauf & Ivanova 2023: mask the
  target and every later subword of the same word), following minicons' ``MaskedLMScorer``.

The masked scorer lives in :mod:`structpe.eval.scoring.masked` and the tag alignment below in
:mod:`structpe.eval.scoring.inputs`.

Tags. A SiPE model is conditioned on the hexatags of its input. The scorers take the parse of each
text (a :class:`TaggedSentence`-like object: ``words``, ``terminals``, ``nonterminals``) and put a
word's tags on the *first token that overlaps the word's characters* (docs/design.md §1: first subword
only; -100 elsewhere). Words are located in the text by character search, so the text is scored
exactly as written (this is what SyntaxGym's region offsets need) and any tokenizer works.

Likelihood modes (docs/likelihoods.md). ``CausalScorer(likelihood=...)`` picks how tags enter the score:
``conditional`` = p(x | T(x)), the tags of the whole sentence are given to the model — the
paper's convention, which every report that uses it must name. The modes are a registry
(:data:`CausalScorer.LIKELIHOODS`): ``joint`` p(x, T) and ``marginal`` (a k-best lower bound on
p(x), beam width ``k``) live in :mod:`structpe.eval.scoring.likelihood`, ``smc`` (a particle
estimate of p(x), ``particles`` per system) in :mod:`structpe.eval.scoring.smc`; callers only ever
read :class:`TokenScores`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from structpe import choices
from structpe.choices import DEFAULT_PROPOSAL, PROPOSALS
from structpe.eval.scoring.inputs import batched, padded_batch, parse_texts, progress_bar
from structpe.eval.scoring.likelihood import joint_scores, marginal_scores
from structpe.eval.scoring.masked import MaskedScorer
from structpe.eval.scoring.smc import DEFAULT_PARTICLES, smc_scores
from structpe.eval.scoring.smc_views import SMC_REPLICATES
from structpe.eval.scoring.types import (
    Encoded,
    Parser,
    TokenScores,
    forward_logits,
    model_device,
    model_kind,
    uses_tags,
)
from structpe.syntax.alignment import align_tags_by_offsets
from structpe.syntax.hexatags import IGNORE_INDEX as IGNORE

# ----------------------------------------------------------------------------------------------
# causal scorer


class CausalScorer:
    """Token log-probs for decoders, BOS-conditioned (docs/design.md §4, §7).

    ``parser`` is used only for models that read tags (``uses_tags``); give ``parses`` to
    :meth:`score` to reuse parses you already have. ``append_eos`` also scores an EOS after the
    text (LM-Zoo's GPT-2 convention; off by default).
    """

    def __init__(
        self, model: Any, tokenizer: Any, parser: Parser | None = None, *, likelihood: str = "conditional",
        k: int = 10, particles: int = DEFAULT_PARTICLES, seed: int = 0, smc_parts: str = "both",
        proposal: str = DEFAULT_PROPOSAL, batch_size: int = 32, append_eos: bool = False,
        max_length: int | None = None, progress: bool = False,
    ) -> None:
        if likelihood not in self.LIKELIHOODS:
            raise ValueError(
                f"likelihood {likelihood!r} is not available; implemented: {sorted(self.LIKELIHOODS)}"
            )
        if likelihood == "marginal" and k < 1:
            raise ValueError(f"marginal likelihood needs a beam width k >= 1, got {k}")
        if likelihood == "smc" and particles < 1:
            raise ValueError(f"smc likelihood needs particles >= 1, got {particles}")
        if proposal not in PROPOSALS:
            raise ValueError(f"smc proposal must be one of {PROPOSALS}, got {proposal!r}")
        self.k = k  # beam width of the marginal mode
        self.particles = particles  # particles per system of the smc mode
        self.seed = seed  # the smc mode's random numbers
        self.smc_parts = smc_parts  # which of its systems run (structpe.eval.scoring.smc.smc_scores)
        self.proposal = proposal  # the smc mode's proposal: the tag heads, or the locally optimal one
        self.model = model
        self.tokenizer = tokenizer
        self.parser = parser
        self.likelihood = likelihood
        self.batch_size = batch_size
        self.append_eos = append_eos
        self.max_length = max_length
        self.progress = progress
        self.tagged = uses_tags(model)  # without a parser, score() needs parses=
        bos = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
        if bos is None:
            raise ValueError("tokenizer has neither a BOS nor an EOS token to condition the first word on")
        self.bos_id = int(bos)
        self.eos_id = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else self.bos_id
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else self.bos_id

    def encode(self, texts: list[str], parses: list[Any] | None) -> list[Encoded]:
        enc = self.tokenizer(list(texts), add_special_tokens=False, return_offsets_mapping=True)
        out = []
        for k, text in enumerate(texts):
            ids = list(enc["input_ids"][k])
            offs = [tuple(o) for o in enc["offset_mapping"][k]]
            if not ids:
                raise ValueError(f"text {k} tokenizes to nothing: {text!r}")
            if parses is not None:
                t, n, missed = align_tags_by_offsets(text, offs, parses[k])
            else:
                t, n, missed = [IGNORE] * len(ids), [IGNORE] * len(ids), 0
            total = len(ids) + 1 + int(self.append_eos)
            if self.max_length is not None and total > self.max_length:
                raise ValueError(
                    f"text {k} needs {total} tokens > max_length {self.max_length}: {text[:60]!r}"
                )
            out.append(Encoded(text, ids, offs, t, n, missed))
        return out

    def score(self, texts: Sequence[str], parses: list[Any] | None = None) -> list[TokenScores]:
        """Score texts; ``parses`` (one per text) override the scorer's parser."""
        texts = list(texts)
        if self.tagged and parses is None:
            if self.parser is None:
                raise ValueError(
                    "this model reads hexatags: give the scorer a parser (e.g. get_parser('spacy')) or parses"
                )
            parses = parse_texts(self.parser, texts)
        return self.score_encoded(self.encode(texts, parses if self.tagged else None))

    def score_encoded(self, encoded: list[Encoded]) -> list[TokenScores]:
        """Score texts already encoded (``encode``), in input order."""
        # longest first keeps padding low; results are put back in input order
        order = sorted(range(len(encoded)), key=lambda i: -len(encoded[i].ids))
        results: list[TokenScores | None] = [None] * len(encoded)
        fn = self.LIKELIHOODS[self.likelihood]
        batches = list(batched(order, self.batch_size))
        for idx in progress_bar(batches, self.progress, "scoring", len(batches)):
            for i, ts in zip(idx, fn(self, [encoded[i] for i in idx]), strict=True):
                results[i] = ts
        return results  # type: ignore[return-value]

    @torch.no_grad()
    def _conditional(self, batch: list[Encoded]) -> list[TokenScores]:
        """p(x | T(x)): every position sees the tags of the whole parse (the paper's convention)."""
        device = model_device(self.model)
        rows = []
        for e in batch:
            ids = [self.bos_id, *e.ids] + ([self.eos_id] if self.append_eos else [])
            t = [IGNORE, *e.terminals] + ([IGNORE] if self.append_eos else [])
            n = [IGNORE, *e.nonterminals] + ([IGNORE] if self.append_eos else [])
            rows.append((ids, t, n))
        input_ids, mask, term, nonterm = padded_batch(rows, self.pad_id)
        out = forward_logits(
            self.model, input_ids.to(device), mask.to(device), term.to(device) if self.tagged else None,
            nonterm.to(device) if self.tagged else None,
        )
        logp = torch.log_softmax(out.logits[:, :-1].float(), dim=-1)
        target = input_ids[:, 1:].to(logp.device)
        tok_lp = logp.gather(-1, target.unsqueeze(-1)).squeeze(-1).cpu()
        res = []
        for b, e in enumerate(batch):
            n_tok = len(e.ids)
            lps = tok_lp[b, :n_tok].tolist()
            eos = float(tok_lp[b, n_tok]) if self.append_eos else None
            res.append(
                TokenScores(
                    text=e.text,
                    token_ids=e.ids,
                    offsets=e.offsets,
                    logprobs=lps,
                    eos_logprob=eos,
                    likelihood="conditional" if self.tagged else "plain",
                    tagged=self.tagged,
                    unaligned_words=e.unaligned,
                )
            )
        return res

    def _joint(self, batch: list[Encoded]) -> list[TokenScores]:
        """p(x, T): tags predicted by the causal tag head and paid for (structpe.eval.scoring.likelihood)."""
        return joint_scores(self, batch)

    def _marginal(self, batch: list[Encoded]) -> list[TokenScores]:
        """k-best lower bound on p(x) over well-formed tag sequences (structpe.eval.scoring.likelihood)."""
        return marginal_scores(self, batch, self.k)

    def _smc(self, batch: list[Encoded]) -> list[TokenScores]:
        """Particle estimate of p(x), converging as particles grow (structpe.eval.scoring.smc)."""
        return smc_scores(self, batch, self.particles, self.seed)

    # each maps a batch of Encoded to TokenScores
    LIKELIHOODS: dict[str, Callable[[CausalScorer, list[Encoded]], list[TokenScores]]] = {
        "conditional": _conditional,
        "joint": _joint,
        "marginal": _marginal,
        "smc": _smc,
    }
    assert tuple(LIKELIHOODS) == choices.LIKELIHOODS, "structpe.choices names the modes the CLI offers"


@dataclass(frozen=True)
class ScoringSpec:
    """How texts are scored: the one set of options that flows from the CLI to every ``evaluate_*``.

    ``kind`` causal | masked (None: from the model); ``likelihood`` conditional | joint | marginal |
    smc (causal models, docs/likelihoods.md) with beam width ``k`` (marginal) or ``particles`` per
    system, ``seed``, ``smc_parts`` (smc: which kinds of system run, see ``smc_scores``) and
    ``proposal`` (smc: ``prior``, the tag heads, or ``adapted``, the locally optimal one);
    ``particles_max`` (smc, evaluations with decisions: an unsettled decision is scored again at 4N
    particles per system, up to this N; ``structpe.eval.scoring.smc_budget``);
    ``pll_metric`` for masked models; ``append_eos`` scores an EOS after each text (causal only);
    ``max_length`` caps a text's tokens.
    """

    kind: str | None = None
    likelihood: str = "conditional"
    k: int = 10
    particles: int = DEFAULT_PARTICLES
    seed: int = 0
    smc_parts: str | None = None  # None: both kinds of system; evaluations that need one set it
    proposal: str = DEFAULT_PROPOSAL
    particles_max: int | None = None  # smc: per-decision budgets up to this N (smc_budget); None: N alone
    pll_metric: str = "within_word_l2r"
    batch_size: int = 32
    append_eos: bool = False
    max_length: int | None = None
    progress: bool = False


def spec_with(spec: ScoringSpec | None, **options: Any) -> ScoringSpec:
    """``spec`` (default ``ScoringSpec()``) with the ``options`` that are not None replacing its fields:
    :func:`make_scorer` and the evaluate_* functions take ScoringSpec's fields as keywords too
    (docs/evaluation.md), and None means "the spec's value"."""
    return dataclasses.replace(spec or ScoringSpec(), **{k: v for k, v in options.items() if v is not None})


def make_scorer(
    model: Any,
    tokenizer: Any,
    parser: Parser | None = None,
    spec: ScoringSpec | None = None,
    **options: Any,
) -> CausalScorer | MaskedScorer:
    """The right scorer for a model: causal -> :class:`CausalScorer`, masked -> PLL.

    ``spec`` (default ``ScoringSpec()``) says how; keyword ``options`` (ScoringSpec's fields)
    override it.
    """
    spec = spec_with(spec, **options)
    kind = spec.kind or model_kind(model)
    if kind == "causal":
        return CausalScorer(
            model, tokenizer, parser, likelihood=spec.likelihood, k=spec.k, particles=spec.particles,
            seed=spec.seed, smc_parts=spec.smc_parts or "both", proposal=spec.proposal,
            batch_size=spec.batch_size, append_eos=spec.append_eos, max_length=spec.max_length,
            progress=spec.progress,
        )
    if kind == "masked":
        if spec.append_eos:
            raise ValueError("append_eos applies to causal models only")
        return MaskedScorer(
            model, tokenizer, parser, metric=spec.pll_metric, batch_size=spec.batch_size,
            max_length=spec.max_length, progress=spec.progress,
        )
    raise ValueError(f"kind must be 'causal' or 'masked', got {kind!r}")


# how a report names the smc proposal (choices.PROPOSALS)
_PROPOSAL_WORDS = {
    "prior": "the model's tag heads",
    "adapted": "the locally optimal (fully adapted) draw from each word's exact posterior",
    "parse": "a mixture of the parser's tags and the model's tag heads (sentence estimates; prefix "
    "estimates: the tag heads)",
}


def describe_scoring(scorer: CausalScorer | MaskedScorer) -> str:
    """One line for reports naming the likelihood convention (every report says which it used)."""
    if isinstance(scorer, MaskedScorer):
        cond = " conditioned on the parse's tags" if scorer.tagged else ""
        return f"pseudo-log-likelihood ({scorer.metric}){cond}"
    if scorer.tagged and scorer.likelihood == "joint":
        return "joint log-likelihood p(x, T(x)): every tag predicted by the model's tag head, BOS-conditioned"
    if scorer.tagged and scorer.likelihood == "marginal":
        return (
            f"marginal log-likelihood lower bound on p(x): log-sum-exp of p(x, T) over the k = {scorer.k} "
            "best well-formed tag sequences of a prefix beam that never looks ahead, plus the parser's "
            "parse; regions from prefix bounds, BOS-conditioned"
        )
    if scorer.tagged and scorer.likelihood == "smc":
        return (
            f"particle estimate of p(x) (smc): sequential importance sampling with resampling over "
            f"well-formed tag sequences, {_PROPOSAL_WORDS[scorer.proposal]} as proposal; "
            f"{SMC_REPLICATES} independent systems of N = {scorer.particles} particles pooled (4N), "
            "one more alone for the check at N; "
            "regions from prefix estimates, BOS-conditioned"
        )
    if scorer.tagged:
        return "conditional log-likelihood p(x | T(x)): conditioned on one fixed parse, BOS-conditioned"
    return "log-likelihood p(x), BOS-conditioned (model reads no tags)"
