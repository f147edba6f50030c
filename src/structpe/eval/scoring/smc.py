"""``smc``: a particle estimate of p(x) = sum_T p(x, T) that converges as the particles grow.

The k-best ``marginal`` (``structpe.eval.scoring.likelihood``) is a lower bound on p(x) that stays
far below it at any affordable k. Here the sum over hexatag sequences is estimated by sequential
importance sampling with resampling, word-synchronous (a particle filter over the tags of words
1..i; docs/likelihoods.md states the estimator, its bias for log p and its standard error):

* a particle is a well-formed open tag prefix T_<=i (the moves of ``prefix_pairs``: none looks at
  later words) with an unnormalised weight w;
* at word i's first token (position pos_i) each particle draws word i's tags from the proposal
  q = the model's own tag heads at pos_(i-1) restricted to the allowed moves and renormalised, so
  the weight gains p(T_i | x_<=pos_i, T_<i) / q(T_i) = Z_i, the allowed mass; then every token
  after pos_i up to and including pos_(i+1) multiplies the weight by its probability given x_<t
  and T_<=i (word i+1's tags sit on pos_(i+1) and are drawn only after its first token is
  scored: no token sees the tags of a later word, as in ``joint`` and ``marginal``);
* before the draw, when the effective sample size (sum w)^2 / sum w^2 falls below N / 2, the
  particles are resampled systematically (Kitagawa 1996): each keeps its row with its first
  offspring, so the key/value cache copies only the rows of particles that died;
* the prefix estimate at token t is p^(x_<=t) = Z_res * mean_n w_n, with Z_res the product of
  the mean weights at the past resamplings: an unbiased estimate of the open prefix marginal
  sum_{T_<=i open} p(x_<=t, T_<=i) (offspring counts have mean N W_n, so every step preserves the
  expectation, whether or not it resamples).
* ``adapted`` (opt-in; ``prior`` above is the default) is the locally optimal, fully adapted
  proposal (Pitt and Shephard 1999's auxiliary particle filter): at word i each particle expands
  into one child per allowed pair c (as the k-best beam expands a hypothesis) and each child is
  scored on the same tokens, pos_i + 1 .. pos_(i+1); with g(c) = p(c | h) p(those tokens | c, h)
  Z_(i+1)(c), Z_(i+1)(c) the mass word i+1's allowed moves keep under the child's tag heads at
  pos_i (1 at the last word), the weight takes G = sum_c g(c), the particles resample on it and
  each draws c with probability g(c) / G; word i+1's prior is renormalised by Z_(i+1)(c). Along a
  sequence T, weight x proposal = prod_i g_i(c_i) = p(x, T) (each Z_(i+1) cancels against the
  next prior's normaliser), so E[weight] = p(x): unbiased, and the weight no longer depends on the
  pair drawn. Within word i the prefix estimate at t sums its children over the tokens up to t,
  so no estimate reads a later token, and the draws keep their order (resampling, one uniform).
* ``parse`` (opt-in) draws the sentence systems' pairs from a defensive mixture of the text's own
  parse and ``prior``, q = (1 - PARSE_MIX) [c = the parse's pair] + PARSE_MIX q_prior(c), weighted
  by p(c | h) / q(c): unbiased, each factor below Z / PARSE_MIX. The open systems keep ``prior``:
  the parse of the whole text reads words after any prefix. Measured against the exact p(x) of
  short sentences in docs/likelihoods.md (better on ``position`` models, worse on ``lis_tree2``).
* the sentence estimate p^(x) (BLiMP, perplexity, the closing of the last region) comes from
  systems of their own that know the text's word count: their proposal keeps only the moves after
  which the tree can still close in the words left (``allowed_pairs``: exactly the well-formed
  sequences), and the last word draws the closing move (eos). A prefix system's particles do not
  know where the text ends and would mostly be too deep to close at its last word; the sentence
  as a whole may use its own length, its prefixes may not.

Per-token scores are log-ratios of successive prefix estimates, so word and region surprisals come
from one particle system and depend on the text up to them alone (``prefix_sources`` re-segments a
prefix whose words differ from the whole text's, as for the marginal; every system is seeded from
the scorer's seed alone and draws its random numbers in the same order for the same prefix, so two
texts with the same prefix get the same estimates there).

Convergence is measured, not assumed: every text is scored by ``SMC_SYSTEMS`` independent
systems of N particles. System 0 alone is the budget-N estimate (the check); systems
1..``SMC_REPLICATES`` pooled (the mean of their estimates, itself an unbiased estimate: an
island particle system of 4N particles) give the reported score. ``views`` and ``convergence``
turn them into the share of decisions that flip between N and 4N (``flip_share``) and the
score's Monte Carlo standard error (``stderr``: the jackknife over the 4 replicates). A claim
gets an honest verdict only where ``flip_share <= FLIP_SHARE_MAX`` (``estimator_converged``).
"""

from __future__ import annotations

import torch

from structpe.choices import DEFAULT_PARTICLES, DEFAULT_PROPOSAL, PROPOSALS
from structpe.eval.scoring.rows import Row, run_rows
from structpe.eval.scoring.smc_particles import (
    PAIRS,
    ParticleSystem,
    TextSystems,
    joint_lp,
    move_tables,
    system_seeds,
)
from structpe.eval.scoring.smc_views import SMC_SYSTEMS, log_mean_exp, view_prefixes
from structpe.eval.scoring.types import CausalScoring, Encoded, TokenScores, model_device
from structpe.syntax.hexatags import DEFAULT_MAX_DEPTH, N_NONTERMINALS
from structpe.syntax.hexatags import IGNORE_INDEX as IGNORE

# which systems run: open (prefix estimates) and length-aware (sentence estimates), or one kind
SMC_PARTS = ("both", "sentence", "prefix")
# rows (particles over the sentences of a group) per cached forward, as the marginal's beam
CACHED_PARTICLE_ROWS = 1024
# ``parse``: the prior's share of the sentence systems' mixture proposal (docs/likelihoods.md,
# "The parse proposal", where it is measured)
PARSE_MIX = 0.3

def smc_scores(
    scorer: CausalScoring,
    batch: list[Encoded],
    particles: int | None = None,
    seed: int | None = None,
    systems: int = SMC_SYSTEMS,
    max_depth: int = DEFAULT_MAX_DEPTH,
    use_cache: bool | None = None,
    parts: str | None = None,
    proposal: str | None = None,
    parse_mix: float | None = None,
) -> list[TokenScores]:
    """Particle estimates of log p(x) (module docstring); ``particles`` / ``seed`` default to the
    scorer's.

    Per-token scores are differences of the pooled open prefix estimates (systems 1.., or system 0
    when ``systems`` is 1); ``close_logprob`` takes their sum to the pooled sentence estimate.
    ``meta``: ``particles``, ``systems``, ``open`` (per system, the log prefix estimate at each
    position after BOS), ``closed`` (per system, the log sentence estimate), ``resamplings``.
    ``use_cache`` (default: for our TXL) feeds the particles token by token on one key/value cache;
    ``False`` re-runs every particle's prefix at every word (any tag-reading causal LM; the
    reference). Both draw the same numbers and give the same estimates.

    ``parts`` (default: the scorer's ``smc_parts``, else ``both``) halves the cost where one kind
    of system is not needed: ``sentence`` runs the sentence systems alone (totals: BLiMP,
    perplexity; the per-token scores are then their running estimates, which know the text's
    length: not prefix estimates, ``meta["prefixes"]`` is False); ``prefix`` the open systems alone
    (SyntaxGym without an EOS; the total is then the open estimate of the whole text, with no
    closing, ``meta["sentence"]`` is False).

    ``proposal`` (default: the scorer's, else ``prior``): ``adapted`` draws each word's pair from
    its exact posterior given the tokens it conditions and weights by their exact sum (module
    docstring); it scores every allowed pair of every particle, up to 10 times the rows.
    ``parse`` draws the sentence systems' pairs around the text's own parse (``parse_mix``, default
    ``PARSE_MIX``: the prior's share of the mixture); the open systems keep ``prior``.
    """
    from structpe.eval.scoring.likelihood import full_row, plain_scores, score_tokens, tagged_positions

    n = int(particles if particles is not None else getattr(scorer, "particles", DEFAULT_PARTICLES))
    seed = int(seed if seed is not None else getattr(scorer, "seed", 0))
    if n < 1 or systems < 1:
        raise ValueError(f"smc likelihood needs particles >= 1 and systems >= 1, got {n}, {systems}")
    parts = parts or getattr(scorer, "smc_parts", "both")
    if parts not in SMC_PARTS:
        raise ValueError(f"smc parts must be one of {SMC_PARTS}, got {parts!r}")
    proposal = proposal or getattr(scorer, "proposal", DEFAULT_PROPOSAL)
    if proposal not in PROPOSALS:
        raise ValueError(f"smc proposal must be one of {PROPOSALS}, got {proposal!r}")
    adapted = proposal == "adapted"
    mix = PARSE_MIX if parse_mix is None else float(parse_mix)
    if not scorer.tagged:
        return plain_scores(scorer, batch)
    seeds = system_seeds(seed, 2 * systems)
    texts = []
    for e in batch:
        end = len(e.ids) + int(scorer.append_eos)
        ids = full_row(scorer, e, [IGNORE] * len(e.ids), [IGNORE] * len(e.ids)).ids
        opened = [ParticleSystem(s, n) for s in seeds[:systems]] if parts != "sentence" else []
        whole = [ParticleSystem(s, n) for s in seeds[systems:]] if parts != "prefix" else []
        positions = tagged_positions(e)
        around = None
        if proposal == "parse":
            around = [e.terminals[p - 1] * N_NONTERMINALS + e.nonterminals[p - 1] for p in positions]
        texts.append(
            TextSystems(
                e, positions, end, ids, opened, whole, [[0.0] * end for _ in range(systems)], around, mix
            )
        )
    if use_cache is None:
        from structpe.models.txl import TransfoXLSiPEForCausalLM

        use_cache = isinstance(scorer.model, TransfoXLSiPEForCausalLM)
    tables = (move_tables(max_depth, False), move_tables(max_depth, True))
    if use_cache:
        width = PAIRS if adapted else 1
        group = max(1, CACHED_PARTICLE_ROWS // (len(texts[0].every_system) * n * width)) if texts else 1
        for i in range(0, len(texts), group):
            _run_cached(scorer, texts[i : i + group], tables, adapted)
    else:
        for x in texts:
            _run_uncached(scorer, x, tables, adapted)
    out = []
    pool = list(range(1, systems)) if systems > 1 else [0]
    for x in texts:
        if x.sentences and x.positions:
            closed = [s.estimate() for s in x.sentences]
        else:  # no sentence systems (parts="prefix"), or no tagged word: the text's own estimate
            closed = [o[-1] for o in x.open_est]
        opened = view_prefixes(x.open_est, pool)
        lps, prev = [], 0.0
        for b in opened:
            lps.append(b - prev)
            prev = b
        meta = {
            "particles": n,
            "systems": systems,
            "seed": seed,
            "open": x.open_est,
            "closed": closed,
            "resamplings": [s.resamplings for s in x.every_system],
            "prefixes": bool(x.systems),
            "sentence": bool(x.sentences),
            "n_words": len(x.positions),
            "proposal": proposal,
            **({"parse_mix": mix} if proposal == "parse" else {}),
        }
        ts = score_tokens(scorer, x.enc, lps, "smc", meta)
        ts.close_logprob = log_mean_exp([closed[r] for r in pool]) - prev
        out.append(ts)
    return out


def _word_moves(
    x: TextSystems, s: ParticleSystem, w: int, tables
) -> tuple[tuple[torch.Tensor, torch.Tensor], int | None]:
    """The move tables and depth limit of word ``w`` (0-based) for system ``s``: a sentence system
    keeps only moves that can still close (the closing move at the last word), an open one any."""
    if x.is_sentence(s):
        last = w + 1 == len(x.positions)
        return tables[last], None if last else len(x.positions) - w - 1
    return tables[0], None


def _open_words(x: TextSystems, w: int, tables) -> None:
    """``adapted``: word ``w`` starts in every system; the open estimate at its first token sums its
    allowed pairs."""
    for s in x.every_system:
        s.open_word(s.allowed(*_word_moves(x, s, w, tables)))
    for r, s in enumerate(x.recorded):
        x.open_est[r][x.positions[w] - 1] = s.marginal()


def _close_words(
    x: TextSystems, w: int, tables
) -> list[tuple[ParticleSystem, list[int] | None, torch.Tensor]]:
    """``adapted``: word ``w``'s tokens are scored in every system: weigh, resample, draw its pair.
    Returns each system's parents and pairs (for the cache's rows)."""
    nxt = w + 1 < len(x.positions)
    return [
        (
            s,
            *s.close_word(
                _word_moves(x, s, w, tables)[0][1], _word_moves(x, s, w + 1, tables) if nxt else None
            ),
        )
        for s in x.every_system
    ]


def _word_start(x: TextSystems, w: int, tables) -> list[tuple[ParticleSystem, list[int] | None]]:
    """Word ``w`` (0-based) starts: every system resamples and draws the word's tags; an open system
    records its prefix estimate at the word's first token, a sentence system draws only moves that
    can still close (the closing move at the last word).

    Returns each system's resampling parents (None: not resampled) for the cache's rows.
    """
    out = []
    for s in x.every_system:
        parent = s.resample() if w > 0 else None
        out.append((s, parent))
        moves = _word_moves(x, s, w, tables)
        if x.around is not None and x.is_sentence(s):
            pair, depth, gain = s.propose_around(*moves, x.around[w], x.mix)
        else:
            pair, depth, gain = s.propose(*moves)
        s.logw = s.logw + gain
        s.depth = depth
        for j, p in enumerate(pair.tolist()):
            s.terminals[j].append(p // N_NONTERMINALS)
            s.nonterminals[j].append(p % N_NONTERMINALS)
    for r, s in enumerate(x.recorded):
        x.open_est[r][x.positions[w] - 1] = s.estimate()
    return out


def _run_uncached(scorer: CausalScoring, x: TextSystems, tables, adapted: bool = False) -> None:
    """Word-synchronous reference: each particle's prefix re-run up to the next word's first token
    (``adapted``: once per allowed pair of the word, its children, as the k-best beam expands)."""
    n_words = len(x.positions)
    for step in range(n_words + 1):
        child = adapted and step > 0  # word step - 1's pairs are scored before one is drawn
        if step > 0:
            (_open_words if child else _word_start)(x, step - 1, tables)
        stop = x.positions[step] if step < n_words else x.end  # last position predicted
        src = x.positions[step - 1] if step > 0 else 0  # logits needed from here on
        width = PAIRS if child else 1
        rows, owners = [], []
        for s in x.every_system:
            for j in range(s.n):
                for c in range(width):
                    t = [IGNORE] * (stop + 1)
                    nn = [IGNORE] * (stop + 1)
                    for pos, tt, n_ in zip(x.positions, s.terminals[j], s.nonterminals[j], strict=False):
                        t[pos], nn[pos] = tt, n_
                    if child:
                        t[src], nn[src] = c // N_NONTERMINALS, c % N_NONTERMINALS
                    rows.append(Row(x.ids[: stop + 1], t, nn, logits_from=src))
                    owners.append(s)
        outs = run_rows(scorer, rows)
        for s in x.every_system:
            mine = [o for o_s, o in zip(owners, outs, strict=True) if o_s is s]
            lp = torch.tensor([o.token_lp[src:stop] for o in mine], dtype=torch.float64)
            lp = lp.reshape(s.n, width, -1)  # [N, width, seg]
            r = next((q for q, o in enumerate(x.recorded) if o is s), None)
            for k, pos in enumerate(range(src + 1, stop + 1)):
                if child:
                    s.look = s.look + lp[:, :, k]
                else:
                    s.logw = s.logw + lp[:, 0, k]
                if r is not None and (step == n_words or pos < stop):  # a word start: once tagged
                    x.open_est[r][pos - 1] = s.marginal() if child else s.estimate()
            if step < n_words:
                heads = torch.cat(
                    [joint_lp(o.terminal_lp[src][None], o.nonterminal_lp[src][None]) for o in mine]
                ).reshape(s.n, width, PAIRS)
                if child:
                    s.heads = heads
                else:
                    s.next_lp = heads[:, 0]
        if child:
            _close_words(x, step - 1, tables)


@torch.no_grad()
def _run_cached(scorer: CausalScoring, texts: list[TextSystems], tables, adapted: bool = False) -> None:
    """The same particle systems, token-synchronous on one ``SiPECache``: every particle of every
    system of every text is a row, all rows have fed the same number of positions, and one forward
    of one new position per row advances the group. Resampling copies only the rows of particles
    that died (``SiPECache.copy_rows``), never the whole cache; rows of finished texts are dropped
    once they are half of the cache (one ``batch_select_indices``) and fed a pad token until then.

    ``adapted``: every particle holds one row per pair of the word in progress (its children, fed
    that pair at the word's first token); once the word's tokens are scored, every row of a particle
    becomes a copy of the child it drew (after resampling: of its parent's), one ``copy_rows``."""
    model = scorer.model
    device = model_device(model)
    width = PAIRS if adapted else 1
    word_at = {id(x): {pos: w for w, pos in enumerate(x.positions)} for x in texts}
    # the particle and child of each row
    owner: list[tuple[TextSystems, ParticleSystem, int, int] | None] = []
    for x in texts:
        for s in x.every_system:
            s.rows = list(range(len(owner), len(owner) + s.n * width))
            owner.extend((x, s, j, c) for j in range(s.n) for c in range(width))
    cache = None
    col = lambda v: torch.tensor(v, device=device)[:, None]  # noqa: E731
    for t in range(max(x.end for x in texts) + 1):  # a last word may start at the last token
        # 1. words that start at t: resample (copy the dead particles' rows), draw the tags;
        # adapted: the word before draws its pair (every row of a particle copies the child drawn)
        dst: list[int] = []
        src: list[int] = []
        for x in texts:
            w = word_at[id(x)].get(t)
            if adapted:
                done = ([w - 1] if w is not None and w > 0 else []) + [-1] * (w is not None)
                done += [len(x.positions) - 1] if t == x.end and x.positions else []
                for d in done:
                    if d < 0:
                        _open_words(x, w, tables)
                        continue
                    for s, parent, pair in _close_words(x, d, tables):
                        idx = parent if parent is not None else range(s.n)
                        for j, (p, c) in enumerate(zip(idx, pair.tolist(), strict=True)):
                            for k in range(width):
                                if s.rows[j * width + k] != s.rows[p * width + c]:
                                    dst.append(s.rows[j * width + k])
                                    src.append(s.rows[p * width + c])
                continue
            if w is None:
                continue
            for s, parent in _word_start(x, w, tables):
                if parent is not None:
                    moved = [(s.rows[j], s.rows[p]) for j, p in enumerate(parent) if p != j]
                    dst.extend(a for a, _ in moved)
                    src.extend(b for _, b in moved)
        if cache is not None and dst:
            cache.copy_rows(torch.tensor(dst, device=device), torch.tensor(src, device=device))
        # 2. texts done: their rows go once they are half of the cache
        owner = [o if o is not None and t < o[0].end else None for o in owner]
        dead = sum(o is None for o in owner)
        if dead == len(owner):
            break
        if cache is not None and 2 * dead >= len(owner):
            keep = [r for r, o in enumerate(owner) if o is not None]
            cache.batch_select_indices(torch.tensor(keep, device=device))
            owner = [owner[r] for r in keep]
            for r, o in enumerate(owner):
                assert o is not None
                o[1].rows[o[2] * width + o[3]] = r
        # 3. feed position t of every row: the particle's tags (adapted: the child's pair) on a
        # word's first token
        ids, term, nonterm = [], [], []
        for o in owner:
            w = word_at[id(o[0])].get(t) if o is not None else None
            ids.append(o[0].ids[t] if o is not None else scorer.pad_id)
            if o is None or w is None:
                term.append(IGNORE)
                nonterm.append(IGNORE)
            elif adapted:
                term.append(o[3] // N_NONTERMINALS)
                nonterm.append(o[3] % N_NONTERMINALS)
            else:
                term.append(o[1].terminals[o[2]][w])
                nonterm.append(o[1].nonterminals[o[2]][w])
        out = model(
            col(ids), cache=cache, use_cache=True, terminal_ids=col(term), nonterminal_ids=col(nonterm)
        )
        cache = out.cache
        logp = torch.log_softmax(out.logits[:, -1].float(), dim=-1)
        target = [o[0].ids[t + 1] if o is not None else scorer.pad_id for o in owner]
        tok_lp = logp.gather(-1, torch.tensor(target, device=logp.device)[:, None]).squeeze(-1).double().cpu()
        # 4. weights; the tag heads where a word starts (or BOS): the next word's proposal
        for x in texts:
            if t >= x.end:
                continue
            tagged_here = (t == 0 or t in word_at[id(x)]) and t < (x.positions[-1] if x.positions else -1)
            for s in x.every_system:
                lp = tok_lp[s.rows].reshape(s.n, width)
                if s.look is not None:  # adapted, a word in progress: each child its own tokens
                    s.look = s.look + lp
                else:  # before the first word every child of a particle is the same
                    s.logw = s.logw + lp[:, 0]
                if tagged_here:
                    rows = torch.tensor(s.rows, device=logp.device)
                    t_lp = torch.log_softmax(out.terminal_logits[rows, -1].float(), dim=-1).cpu()
                    n_lp = torch.log_softmax(out.nonterminal_logits[rows, -1].float(), dim=-1).cpu()
                    heads = joint_lp(t_lp, n_lp).reshape(s.n, width, PAIRS)
                    if s.look is not None:
                        s.heads = heads
                    else:
                        s.next_lp = heads[:, 0]
            if t + 1 not in word_at[id(x)]:  # else set once the next word's tags are drawn
                for r, s in enumerate(x.recorded):
                    x.open_est[r][t] = s.marginal() if s.look is not None else s.estimate()


