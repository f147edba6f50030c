"""Honest likelihoods for syntax-conditioned decoders: joint p(x, T) and k-best marginal p(x).

A SiPE decoder reads the hexatags of its input; a word's tags are computed from the whole
sentence, so conditioning on them, p(x | T(x)) (the paper's convention, ``conditional`` in
:class:`~structpe.eval.scoring.scorer.CausalScorer`), lets information about later words leak into each
prediction. The two modes here make the tags pay for themselves (docs/design.md §2, §4):

``joint``  p(x, T), factorised left to right in the model's own generative order. The causal tag
    head at position p predicts the tags of the next tagged position (``causal_tag_targets``:
    BOS predicts the first word's pair), so with tags tau_i, nu_i on the first subword pos_i of
    word i and pos_0 = 0 (BOS)::

        log p(x, T) = sum_t log p(x_t | x_<t, T_{words starting before t})
                      + sum_i [log p_T(tau_i | h_{pos_(i-1)}) + log p_N(nu_i | h_{pos_(i-1)})]

    Token terms are exactly the conditional ones (a token only sees tags at earlier positions);
    the tag terms come from the same forward pass. Word i's tag cost is added to the log-prob of
    its *first token*, so per-token scores still sum to the total and SyntaxGym regions stay
    meaningful (a region pays for the tags of the words that start in it).

``marginal``  a lower bound on p(x) = sum_T p(x, T): log-sum-exp of p(x, T) over the tag sequences
    kept by a left-to-right beam over well-formed hexatag prefixes — a *prefix marginal*. The beam
    ranks a prefix by its exact joint prefix score log p(x_<=pos_i, T_<=i); its moves
    (``prefix_pairs``) never look ahead: no move depends on how many words follow, and the tree
    stays open until the text ends. At the last word the beam also takes the closing moves (eos,
    depth 1), and the sentence bound sums those closed sequences and the parser's own parse when
    the beam did not find it (distinct sequences: still a lower bound, never below the parse's
    joint). Every beam step runs the model on each kept prefix (the beams of all sentences of a
    batch in one forward) to get the next-tag distribution and the log-probs of the tokens that
    the new tags condition.

    Beams are *nested*: the width-w beam is the width-(w-1) beam plus the best remaining child of
    the width-w beam's parents. So one run at width k gives the bound for every w <= k, the width-w
    result does not depend on k, and the bound never decreases as w grows (a plain top-k beam can
    lose mass when widened). Width 1 is greedy decoding under the joint.

    Per-token marginal scores are differences of *open* prefix bounds, log p^(x_<=t) - log p^(x_<t)
    with log p^(x_<=t) the log-sum-exp of the open beam's prefix joints at t (word-synchronous beam
    surprisal, as for RNNGs and Transformer Grammars); the open bound at t depends on x_<=t and
    the word starts up to t alone. ``TokenScores.close_logprob`` takes their sum to the sentence
    bound. Beam pruning and tag mass at word i land on word i's first token, as in ``joint``.
    ``prefix_bounds`` gives the bound of a text's prefix at any character cut as a function of
    that prefix alone (its own tokens and word segmentation): SyntaxGym's leak-free regions.

Models that read no tags (injection ``none``, Hugging Face LMs) give their plain p(x) in every
mode: the tags do not enter their likelihood, so there is nothing to pay for or marginalise.

Word positions are those of the parse given to the scorer (a word's first subword), exactly as in
``conditional``; only ``marginal`` ignores the parse's tag values (except to add the parse to the
final sum). The positions are a function of the whole text; ``prefix_bounds`` re-segments every
prefix from its own text, so the prefix bounds it returns carry no such dependence
(docs/likelihoods.md).

The row records (``structpe.eval.scoring.rows``) and the well-formed prefixes with the beam's
state (``structpe.eval.scoring.prefixes``) live in sibling modules; this one holds the model
runs and the modes.
"""

from __future__ import annotations

import heapq

import torch

from structpe.eval.scoring.prefixes import BeamHyp, BeamSentence, log_sum_exp, prefix_pairs
from structpe.eval.scoring.rows import Row, run_rows
from structpe.eval.scoring.types import CausalScoring, Encoded, TokenScores, model_device
from structpe.models.txl import TransfoXLSiPEForCausalLM
from structpe.syntax.hexatags import DEFAULT_MAX_DEPTH
from structpe.syntax.hexatags import IGNORE_INDEX as IGNORE

# widths whose bounds a marginal run also records (meta["bound_by_k"]): the paper's Figure 1 axis
MARGINAL_LADDER = (1, 10, 100)


def full_row(scorer: CausalScoring, e: Encoded, terminals: list[int], nonterminals: list[int]) -> Row:
    """BOS + text (+ EOS) with the given per-token tags (BOS and EOS untagged)."""
    eos = [scorer.eos_id] if scorer.append_eos else []
    pad = [IGNORE] if scorer.append_eos else []
    return Row([scorer.bos_id, *e.ids, *eos], [IGNORE, *terminals, *pad], [IGNORE, *nonterminals, *pad])


def score_tokens(
    scorer: CausalScoring, e: Encoded, lps: list[float], likelihood: str, meta: dict | None = None
) -> TokenScores:
    """Split a BOS-relative log-prob list into the text's tokens and the optional EOS."""
    n_tok = len(e.ids)
    return TokenScores(
        text=e.text,
        token_ids=e.ids,
        offsets=e.offsets,
        logprobs=list(lps[:n_tok]),
        eos_logprob=float(lps[n_tok]) if scorer.append_eos else None,
        likelihood=likelihood,
        tagged=scorer.tagged,
        unaligned_words=e.unaligned,
        meta=meta or {},
    )


def tagged_positions(e: Encoded) -> list[int]:
    """Positions (BOS = 0) of the tokens that carry a word's tags, left to right."""
    return [j + 1 for j, t in enumerate(e.terminals) if t != IGNORE]


# ----------------------------------------------------------------------------------------------
# plain and joint


def plain_scores(scorer: CausalScoring, batch: list[Encoded]) -> list[TokenScores]:
    """p(x) of a model that reads no tags (every mode reduces to it)."""
    rows = [full_row(scorer, e, [IGNORE] * len(e.ids), [IGNORE] * len(e.ids)) for e in batch]
    outs = run_rows(scorer, rows, tagged=False)
    return [score_tokens(scorer, e, o.token_lp, "plain") for e, o in zip(batch, outs, strict=True)]


def joint_scores(scorer: CausalScoring, batch: list[Encoded]) -> list[TokenScores]:
    """log p(x, T): conditional token log-probs plus each word's tag log-prob on its first token.

    ``meta``: ``tag_logprob`` (sum of the tag terms), ``token_logprob`` (sum of the token terms)
    and ``tag_logprobs`` (one per tagged word, left to right).
    """
    if not scorer.tagged:
        return plain_scores(scorer, batch)
    rows = [full_row(scorer, e, e.terminals, e.nonterminals) for e in batch]
    outs = run_rows(scorer, rows)
    res = []
    for e, o in zip(batch, outs, strict=True):
        lps = list(o.token_lp)
        token_total = float(sum(lps))
        tag_lps = []
        src = 0  # BOS predicts the first word's tags (causal_tag_targets)
        for pos in tagged_positions(e):
            t, n = e.terminals[pos - 1], e.nonterminals[pos - 1]
            lp = float(o.terminal_lp[src, t]) + float(o.nonterminal_lp[src, n])
            tag_lps.append(lp)
            lps[pos - 1] += lp  # the word's tag cost on its first token
            src = pos
        meta = {"tag_logprob": float(sum(tag_lps)), "token_logprob": token_total, "tag_logprobs": tag_lps}
        res.append(score_tokens(scorer, e, lps, "joint", meta))
    return res


# ----------------------------------------------------------------------------------------------
# marginal: nested beam over well-formed tag prefixes


def _select(parents: list[BeamHyp], close: bool, k: int, max_depth: int) -> list[BeamHyp]:
    """Nested top-k: width w adds the best not-yet-chosen child of parents with tier <= w.

    ``close``: the children end the tree (the sentence's last word); else they keep it open
    (``prefix_pairs``: no move depends on later words).
    """
    moves: dict[int, list[tuple[int, int, int]]] = {}  # allowed pairs per stack depth
    by_tier: dict[int, list[tuple[float, int, int, int, int, int]]] = {}
    for pi, h in enumerate(parents):
        assert h.next_t is not None and h.next_n is not None
        if h.depth not in moves:
            moves[h.depth] = prefix_pairs(h.depth, close, max_depth)
        # Python floats of the float32 log-probs: the same sums as tensor indexing, ~20x cheaper
        t_lp, n_lp = h.next_t.tolist(), h.next_n.tolist()
        for t, nt, d in moves[h.depth]:
            s = h.score + t_lp[t] + n_lp[nt]
            by_tier.setdefault(h.tier, []).append((-s, h.tier, pi, t, nt, d))
    heap: list[tuple[float, int, int, int, int, int]] = []
    chosen = []
    for w in range(1, k + 1):
        for c in by_tier.get(w, ()):
            heapq.heappush(heap, c)
        if not heap:
            continue
        neg, _, pi, t, nt, d = heapq.heappop(heap)
        p = parents[pi]
        chosen.append(BeamHyp([*p.terminals, t], [*p.nonterminals, nt], d, -neg, w, parent=pi))
    return chosen


def _choose(s: BeamSentence, word: int, k: int, max_depth: int) -> None:
    """Tags of word ``word`` (0-based): the open beam, and at the last word also the closing one."""
    parents = s.hyps
    if word + 1 == len(s.positions):
        s.closed = _select(parents, True, k, max_depth)
    s.hyps = _select(parents, False, k, max_depth)
    if not s.hyps:  # cannot happen: tr + nl (or tl at the root) is always allowed
        raise RuntimeError(f"beam emptied at word {word + 1}: {s.enc.text[:60]!r}")
    s.bound[s.positions[word] - 1] = log_sum_exp([h.score for h in s.hyps])


def _segment_rows(scorer: CausalScoring, s: BeamSentence, step: int) -> list[Row]:
    """Rows for step ``step`` (words 1..step tagged): the prefix up to the next tagged position."""
    e = s.enc
    full = full_row(scorer, e, [IGNORE] * len(e.ids), [IGNORE] * len(e.ids))
    stop = s.positions[step] if step < len(s.positions) else s.end  # last position to predict
    rows = []
    for h in (*s.hyps, *s.closed):
        t = [IGNORE] * (stop + 1)
        n = [IGNORE] * (stop + 1)
        for pos, tt, nn in zip(s.positions, h.terminals, h.nonterminals, strict=False):
            t[pos], n[pos] = tt, nn
        src = s.positions[step - 1] if step > 0 else 0  # logits needed from here on
        rows.append(Row(full.ids[: stop + 1], t[: stop + 1], n[: stop + 1], logits_from=src))
    return rows


def marginal_scores(
    scorer: CausalScoring,
    batch: list[Encoded],
    k: int | None = None,
    max_depth: int = DEFAULT_MAX_DEPTH,
    use_cache: bool | None = None,
) -> list[TokenScores]:
    """k-best lower bound on log p(x) (module docstring); ``k`` defaults to ``scorer.k``.

    ``use_cache`` (default: whenever the model has a key/value cache, i.e. our TXL) runs the beam
    token by token on cached states (``_beam_cached``); ``False`` re-runs every kept prefix at
    every word (``_beam_uncached``, the reference). Both give the same bounds.

    Per-token scores are differences of the open prefix bounds; ``close_logprob`` takes the total
    to the sentence bound (the closed beam plus the parser's parse). ``meta``: ``k``;
    ``n_sequences`` (closed tag sequences in the final beam); ``bound_by_k`` (the sentence bound at
    each width of ``MARGINAL_LADDER`` up to k, and at k); ``open_bound`` (log p^ of the text as a
    prefix); ``parse_joint`` and ``parse_in_beam`` (the parser's parse: its joint, and whether the
    width-k beam found it); ``best_terminals`` / ``best_nonterminals`` / ``best_joint`` (the
    highest-scoring closed sequence found, per tagged word); ``n_words`` (tagged words).
    """
    k = int(k if k is not None else getattr(scorer, "k", 10))
    if k < 1:
        raise ValueError(f"marginal likelihood needs k >= 1, got {k}")
    if not scorer.tagged:
        return plain_scores(scorer, batch)
    sents = []
    for e in batch:
        end = len(e.ids) + int(scorer.append_eos)
        root = BeamHyp([], [], 0, 0.0, 1)
        sents.append(BeamSentence(e, tagged_positions(e), end, [root], [0.0] * end))
    if use_cache is None:
        use_cache = isinstance(scorer.model, TransfoXLSiPEForCausalLM)
    if use_cache:
        group = max(1, CACHED_BEAM_ROWS // k)
        for i in range(0, len(sents), group):
            _beam_cached(scorer, sents[i : i + group], k, max_depth)
    else:
        _beam_uncached(scorer, sents, k, max_depth)
    parsed = joint_scores(scorer, batch)  # the parser's own parse joins every final sum
    return [_marginal_result(scorer, s, k, j) for s, j in zip(sents, parsed, strict=True)]


def _beam_uncached(scorer: CausalScoring, sents: list[BeamSentence], k: int, max_depth: int) -> None:
    """Word-synchronous beam: at each word, run every kept prefix up to the next word's first token."""
    max_words = max(len(s.positions) for s in sents)
    for step in range(0, max_words + 1):
        active = [s for s in sents if len(s.positions) >= step]
        if step > 0:  # choose word `step`'s tags for every active sentence
            for s in active:
                _choose(s, step - 1, k, max_depth)
        rows: list[Row] = []
        owners: list[tuple[BeamSentence, BeamHyp]] = []
        for s in active:
            seg = _segment_rows(scorer, s, step)
            rows.extend(seg)
            owners.extend((s, h) for h in (*s.hyps, *s.closed))
        outs = run_rows(scorer, rows)
        for (s, h), o in zip(owners, outs, strict=True):
            first = s.positions[step - 1] + 1 if step > 0 else 1  # first position whose token is new here
            stop = s.positions[step] if step < len(s.positions) else s.end
            h.cum = []
            score = h.score
            for t in range(first, stop + 1):
                score += o.token_lp[t - 1]
                h.cum.append(score)
            h.score = score  # now includes tokens up to `stop` (next word's first token included)
            src = s.positions[step - 1] if step > 0 else 0
            h.next_t, h.next_n = o.terminal_lp[src], o.nonterminal_lp[src]
        for s in active:
            first = s.positions[step - 1] + 1 if step > 0 else 1
            stop = s.positions[step] if step < len(s.positions) else s.end
            # positions before the next tagged one: no pruning in between, bound = lse of the beam
            for j, t in enumerate(range(first, stop + 1)):
                if step < len(s.positions) and t == stop:
                    continue  # the next word's first token: set after its tags are chosen
                s.bound[t - 1] = log_sum_exp([h.cum[j] for h in s.hyps])


def _marginal_result(scorer: CausalScoring, s: BeamSentence, k: int, parsed: TokenScores) -> TokenScores:
    """Per-token scores (differences of open prefix bounds), the closing and the ``meta`` of a beam.

    The sentence bound at width w sums the closed sequences of tier <= w and the parser's parse
    when they do not hold it: distinct tag sequences, so still a lower bound on p(x), and never
    below the parse's own joint.
    """
    prev = 0.0
    lps = []
    for b in s.bound:
        lps.append(b - prev)
        prev = b
    closed = s.closed if s.positions else s.hyps  # no tagged word: the untagged text is the sentence
    parse = ([s.enc.terminals[p - 1] for p in s.positions], [s.enc.nonterminals[p - 1] for p in s.positions])

    def bound(w: int) -> tuple[float, bool]:
        kept = [h for h in closed if h.tier <= w]
        found = any((h.terminals, h.nonterminals) == parse for h in kept)
        return log_sum_exp([h.score for h in kept] + ([] if found else [parsed.total])), found

    total, found = bound(k)
    by_k = {w: bound(w)[0] for w in (*MARGINAL_LADDER, k) if w <= k}
    best = max(closed, key=lambda h: h.score, default=None)
    meta = {
        "k": k,
        "n_sequences": len(closed),
        "bound_by_k": {str(w): v for w, v in sorted(by_k.items())},
        "open_bound": prev,
        "parse_joint": parsed.total,
        "parse_in_beam": found,
        "best_terminals": best.terminals if best else parse[0],
        "best_nonterminals": best.nonterminals if best else parse[1],
        "best_joint": best.score if best else parsed.total,
        "n_words": len(s.positions),
    }
    out = score_tokens(scorer, s.enc, lps, "marginal", meta)
    out.close_logprob = total - prev
    return out


# rows (kept prefixes, over the sentences of a group) per cached beam forward: the cache holds
# rows x length x layers x 2 d_model floats, and the output projection rows x vocabulary
CACHED_BEAM_ROWS = 1024


@torch.no_grad()
def _beam_cached(scorer: CausalScoring, sents: list[BeamSentence], k: int, max_depth: int) -> None:
    """The same nested beam, token-synchronous on a key/value cache (copy-on-branch).

    Every kept prefix of every sentence is one row of one ``SiPECache``; all rows have fed the
    same number of tokens, so one forward of one new position per row advances the whole group
    (no padding). Before a word's first token is fed, its sentence's beam is re-selected
    (``_select``) and the rows are gathered to the new hypotheses' parents
    (``batch_select_indices``: children that share a parent get copies of its cached states,
    which never change afterwards because a position's tags are fixed before it is fed). Then the
    token goes in with the hypothesis' tags: the tag head at a word's first token (or BOS) gives
    the next word's tag distribution, and the LM head the next token's log-prob. Cost per token:
    one position per kept prefix, against the whole prefix per word without the cache.
    """
    model = scorer.model
    device = model_device(model)
    full = {
        id(s): full_row(scorer, s.enc, [IGNORE] * len(s.enc.ids), [IGNORE] * len(s.enc.ids)).ids
        for s in sents
    }
    word_at = {id(s): {pos: w for w, pos in enumerate(s.positions)} for s in sents}
    rows: list[tuple[BeamSentence, BeamHyp]] = [(s, s.hyps[0]) for s in sents]
    cache = None
    for t in range(max(s.end for s in sents) + 1):
        # 1. word starts at t: choose the word's tags, gather rows to the new beam's parents
        index: list[int] = []
        new_rows: list[tuple[BeamSentence, BeamHyp]] = []
        i = 0
        while i < len(rows):
            s = rows[i][0]
            width = len(s.hyps) + len(s.closed)
            w = word_at[id(s)].get(t)
            if w is not None:
                _choose(s, w, k, max_depth)
            if t < s.end:  # tokens left to feed
                live = [*s.hyps, *s.closed]
                new_rows.extend((s, h) for h in live)
                index.extend(i + h.parent if w is not None else i + j for j, h in enumerate(live))
            i += width
        if not new_rows:
            break
        if cache is not None and index != list(range(len(rows))):
            cache.batch_select_indices(torch.tensor(index, device=device))
        rows = new_rows
        # 2. feed position t of every row, with the hypothesis' tags on a word's first token
        ids, term, nonterm = [], [], []
        for s, h in rows:
            ids.append(full[id(s)][t])
            w = word_at[id(s)].get(t)
            term.append(h.terminals[w] if w is not None else IGNORE)
            nonterm.append(h.nonterminals[w] if w is not None else IGNORE)
        col = lambda v: torch.tensor(v, device=device)[:, None]  # noqa: E731
        tags = {"terminal_ids": col(term), "nonterminal_ids": col(nonterm)}
        out = model(col(ids), cache=cache, use_cache=True, **tags)
        cache = out.cache
        logp = torch.log_softmax(out.logits[:, -1].float(), dim=-1)
        target = torch.tensor([full[id(s)][t + 1] for s, _ in rows], device=logp.device)
        tok_lp = logp.gather(-1, target[:, None]).squeeze(-1).tolist()
        tag_rows = [j for j, (s, _) in enumerate(rows) if t == 0 or t in word_at[id(s)]]
        if tag_rows:
            sel = torch.tensor(tag_rows, device=logp.device)
            t_lp = torch.log_softmax(out.terminal_logits[sel, -1].float(), dim=-1).cpu()
            n_lp = torch.log_softmax(out.nonterminal_logits[sel, -1].float(), dim=-1).cpu()
            for r, j in enumerate(tag_rows):
                rows[j][1].next_t, rows[j][1].next_n = t_lp[r], n_lp[r]
        for (_, h), lp in zip(rows, tok_lp, strict=True):
            h.score += lp
        # 3. the bound at token t + 1, unless a word starts there (set after its tags are chosen)
        done: set[int] = set()
        for s, _ in rows:
            if id(s) not in done and (t + 1) not in word_at[id(s)]:
                s.bound[t] = log_sum_exp([h.score for h in s.hyps])
            done.add(id(s))
