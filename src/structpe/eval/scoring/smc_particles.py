"""The particles of ``smc`` (``structpe.eval.scoring.smc`` states the estimator): one system of N
weighted open tag prefixes (:class:`ParticleSystem`: the allowed moves, the draw, systematic
resampling, the running estimate) and one text's systems (:class:`TextSystems`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np
import torch

from structpe.eval.scoring.prefixes import prefix_pairs
from structpe.eval.scoring.types import Encoded
from structpe.syntax.hexatags import N_NONTERMINALS, N_TERMINALS

# resample when the effective sample size falls below this share of N
RESAMPLE_ESS = 0.5

PAIRS = N_TERMINALS * N_NONTERMINALS  # (terminal, non-terminal) flattened: t * N_NONTERMINALS + nt


def move_tables(max_depth: int, close: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """Per stack depth: which (t, nt) pairs are allowed [D+1, 10] and the depth after each [D+1, 10]."""
    allowed = torch.zeros(max_depth + 1, PAIRS, dtype=torch.bool)
    after = torch.zeros(max_depth + 1, PAIRS, dtype=torch.long)
    for d in range(max_depth + 1):
        for t, nt, d2 in prefix_pairs(d, close, max_depth):
            allowed[d, t * N_NONTERMINALS + nt] = True
            after[d, t * N_NONTERMINALS + nt] = d2
    return allowed, after


@dataclass
class ParticleSystem:
    """One particle system of one sentence: N particles, their rows in the cache, their weights."""

    seed: int
    n: int
    gen: torch.Generator = field(init=False)
    log_z: float = 0.0  # log of the product of the mean weights at past resamplings
    logw: torch.Tensor = field(init=False)  # [N] float64, log weights since the last resampling
    depth: torch.Tensor = field(init=False)  # [N] stack depth of each particle's prefix
    terminals: list[list[int]] = field(init=False)
    nonterminals: list[list[int]] = field(init=False)
    next_lp: torch.Tensor | None = None  # [N, 10] the tag heads' joint log-probs for the next word
    # the adapted proposal, while a word is in progress: log p(pair | history) [N, 10] (-inf where
    # not allowed), the log-prob of the tokens fed since the word started under each pair [N, 10],
    # and each pair's tag heads at the word's first token [N, 10, 10] (the next word's prior)
    prior: torch.Tensor | None = None
    look: torch.Tensor | None = None
    heads: torch.Tensor | None = None
    rows: list[int] = field(default_factory=list)  # cache row of each particle
    resamplings: int = 0

    def __post_init__(self) -> None:
        self.gen = torch.Generator().manual_seed(self.seed)
        self.logw = torch.zeros(self.n, dtype=torch.float64)
        self.depth = torch.zeros(self.n, dtype=torch.long)
        self.terminals = [[] for _ in range(self.n)]
        self.nonterminals = [[] for _ in range(self.n)]

    def estimate(self) -> float:
        """log of Z_res * mean_n w_n: the estimate of the prefix fed so far."""
        return self.log_z + float(torch.logsumexp(self.logw, 0)) - math.log(self.n)

    def resample(self) -> list[int] | None:
        """Systematic resampling when ESS < ``RESAMPLE_ESS`` N; returns each particle's parent (None:
        not resampled).

        A particle with offspring keeps its own index (its cache row) for the first of them; the
        extra offspring take the indices of particles without any, so only those rows change.
        """
        w = torch.exp(self.logw - self.logw.max())
        ess = float(w.sum() ** 2 / (w * w).sum())
        if ess >= RESAMPLE_ESS * self.n:
            return None
        u = (torch.rand(1, generator=self.gen, dtype=torch.float64) + torch.arange(self.n)) / self.n
        cdf = torch.cumsum(w / w.sum(), 0)
        cdf[-1] = 1.0
        picks = torch.searchsorted(cdf, u).clamp_max(self.n - 1)
        counts = torch.bincount(picks, minlength=self.n).tolist()
        extra = [p for p, c in enumerate(counts) for _ in range(c - 1)]
        parent = [p if c else extra.pop() for p, c in enumerate(counts)]
        self.log_z += float(torch.logsumexp(self.logw, 0)) - math.log(self.n)
        self.logw = torch.zeros(self.n, dtype=torch.float64)
        idx = torch.tensor(parent)
        self.depth = self.depth[idx]
        self.terminals = [list(self.terminals[p]) for p in parent]
        self.nonterminals = [list(self.nonterminals[p]) for p in parent]
        assert self.next_lp is not None
        self.next_lp = self.next_lp[idx]
        self.resamplings += 1
        return parent

    def allowed(
        self, tables: tuple[torch.Tensor, torch.Tensor], max_after: int | None = None
    ) -> torch.Tensor:
        """[N, 10]: the moves each particle may take next (and whose depth after is at most
        ``max_after``: the prefix can still close in time)."""
        allowed, after = tables
        ok = allowed[self.depth]
        if max_after is not None:
            ok = ok & (after[self.depth] <= max_after)
        return ok

    def draw(self, lp: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """One pair per particle from the normalised ``lp`` [N, 10] (-inf: not allowed; one uniform
        per particle). Returns the pairs [N] and the log mass normalised away [N] (-inf: no allowed
        move, a deep prefix that cannot close; its particle draws any pair at weight zero)."""
        log_mass = torch.logsumexp(lp, -1)
        stuck = ~torch.isfinite(log_mass)
        probs = torch.exp(lp - log_mass[:, None]).masked_fill(stuck[:, None], 1.0 / PAIRS)
        cdf = torch.cumsum(probs, -1)
        cdf[:, -1] = 1.0
        u = torch.rand(self.n, 1, generator=self.gen, dtype=torch.float64)
        pair = torch.searchsorted(cdf, u).squeeze(-1).clamp_max(PAIRS - 1)
        if not bool((torch.isfinite(lp[torch.arange(self.n), pair]) | stuck).all()):  # a zero bin
            raise RuntimeError("proposal drew a disallowed tag pair")
        return pair, log_mass

    def propose(
        self, tables: tuple[torch.Tensor, torch.Tensor], max_after: int | None = None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The ``prior`` proposal: one (t, nt) per particle from the tag heads restricted to the
        allowed moves. Returns the pair ids [N], the depths after them [N] and log Z, the allowed
        mass [N] (the weight's factor p / q)."""
        assert self.next_lp is not None
        pair, log_mass = self.draw(self.next_lp.masked_fill(~self.allowed(tables, max_after), -math.inf))
        return pair, tables[1][self.depth, pair], log_mass

    def propose_around(
        self, tables: tuple[torch.Tensor, torch.Tensor], max_after: int | None, target: int, mix: float
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The ``parse`` proposal: a defensive mixture (Hesterberg 1995) of the parser's pair for this
        word, ``target``, and the ``prior`` proposal, q = (1 - mix) [c = target] + mix q_prior(c);
        a particle that cannot take ``target`` (its depth forbids it) draws from q_prior alone.
        Returns the pair ids [N], the depths after them [N] and log p(c | h) - log q(c), the weight's
        factor [N]; q >= mix q_prior keeps that factor below Z / mix (-inf: no allowed move)."""
        assert self.next_lp is not None
        if not 0.0 < mix <= 1.0:
            raise ValueError(f"the parse proposal's prior share must be in (0, 1], got {mix}")
        lp = self.next_lp.masked_fill(~self.allowed(tables, max_after), -math.inf)
        log_mass = torch.logsumexp(lp, -1)
        stuck = ~torch.isfinite(log_mass)
        q = torch.exp(lp - log_mass.masked_fill(stuck, 0.0)[:, None])  # q_prior; 0 where stuck
        hit = torch.isfinite(lp[:, target])
        q = torch.where(hit[:, None], mix * q, q)
        q[hit, target] += 1.0 - mix
        log_q = torch.log(q)
        pair, _ = self.draw(log_q)
        rows = torch.arange(self.n)
        gain = (lp[rows, pair] - log_q[rows, pair]).masked_fill(stuck, -math.inf)
        return pair, tables[1][self.depth, pair], gain

    # the ``adapted`` proposal: a word's pair is drawn once its tokens are scored under every pair

    def open_word(self, ok: torch.Tensor) -> None:
        """Word i starts: every allowed pair becomes a child, none drawn yet."""
        assert self.next_lp is not None
        self.prior = self.next_lp.masked_fill(~ok, -math.inf)
        self.look = torch.zeros(self.n, PAIRS, dtype=torch.float64)

    def marginal(self) -> float:
        """The prefix estimate while a word is in progress: each particle's weight times the exact
        sum over the word's pairs of p(pair | history) p(tokens fed since | pair, history)."""
        assert self.prior is not None and self.look is not None
        lw = self.logw + torch.logsumexp(self.prior + self.look, -1)
        return self.log_z + float(torch.logsumexp(lw, 0)) - math.log(self.n)

    def close_word(
        self, after: torch.Tensor, following: tuple[tuple[torch.Tensor, torch.Tensor], int | None] | None
    ) -> tuple[list[int] | None, torch.Tensor]:
        """Word i's tokens are all scored: the weight takes the incremental marginal (it does not
        depend on the pair drawn), the particles resample on it, and each draws word i's pair from
        its parent's exact posterior. Returns the parents (None: not resampled) and the pairs.

        ``following`` (word i+1's move tables and depth limit; None at the last word): the mass
        Z_(i+1)(pair) that word i+1's allowed moves keep under each child's tag heads is a factor
        of p(x, T) that depends on word i's pair and is known now (the heads at pos_i read no later
        token), so it joins the sum, and word i+1's prior is renormalised by it."""
        assert self.prior is not None and self.look is not None
        joint = self.prior + self.look
        if self.heads is not None and following is not None:
            (allowed_n, after_n), max_after_n = following
            d = after[self.depth]  # [N, 10] the depth after each pair of word i
            ok = allowed_n[d]
            if max_after_n is not None:
                ok = ok & (after_n[d] <= max_after_n)
            log_next = torch.logsumexp(self.heads.masked_fill(~ok, -math.inf), -1)  # [N, 10]
            joint = joint + log_next
            self.heads = self.heads - log_next[..., None]
        self.logw = self.logw + torch.logsumexp(joint, -1)
        parent = self.resample()
        idx = torch.tensor(parent) if parent is not None else torch.arange(self.n)
        pair, _ = self.draw(joint[idx])
        self.depth = after[self.depth, pair]  # depth, tags: already the parents' after resampling
        for j, p in enumerate(pair.tolist()):
            self.terminals[j].append(p // N_NONTERMINALS)
            self.nonterminals[j].append(p % N_NONTERMINALS)
        if self.heads is not None:
            self.next_lp = self.heads[idx, pair]
        self.prior = self.look = self.heads = None
        return parent, pair


@dataclass
class TextSystems:
    """One text's systems: its open (prefix) systems and its length-aware (sentence) systems, with the
    running prefix estimate of each recorded system at every position."""

    enc: Encoded
    positions: list[int]
    end: int
    ids: list[int]  # BOS + text (+ EOS)
    systems: list[ParticleSystem]  # open: the prefix estimates
    sentences: list[ParticleSystem]  # length-aware: the sentence estimates
    open_est: list[list[float]]  # per recorded system: its estimate at positions 1..end
    # ``parse``: the parser's pair of each word (the sentence systems' proposal centre) and the
    # prior's share of the mixture; None: every system draws from the prior
    around: list[int] | None = None
    mix: float = 1.0

    @property
    def every_system(self) -> list[ParticleSystem]:
        return [*self.systems, *self.sentences]

    def is_sentence(self, s: ParticleSystem) -> bool:
        return any(s is q for q in self.sentences)  # identity: dataclass equality compares tensors

    @property
    def recorded(self) -> list[ParticleSystem]:
        """The systems whose running estimates become the per-token scores: the open ones, else
        (``parts="sentence"``) the sentence systems."""
        return self.systems or self.sentences


def joint_lp(t_lp: torch.Tensor, n_lp: torch.Tensor) -> torch.Tensor:
    """[R, 2] and [R, 5] log-softmaxes -> [R, 10] joint log-probs of (t, nt), float64."""
    return (t_lp.double()[:, :, None] + n_lp.double()[:, None, :]).reshape(t_lp.shape[0], PAIRS)


def system_seeds(seed: int, systems: int) -> list[int]:
    """One generator seed per system, from the scorer's seed alone (numpy's SeedSequence mixing)."""
    return [int(np.random.SeedSequence([seed, r]).generate_state(1)[0]) for r in range(systems)]
