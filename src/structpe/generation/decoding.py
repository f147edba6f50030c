"""Joint generation of text and its dependency tree with a SiPE decoder (docs/generation.md).

A decoder with a causal tag head defines p(x, T) left to right (docs/likelihoods.md): the tags of
word i come from the tag head at the first token of word i-1 (BOS for the first word), and the
tokens after that see them. Generating in that order commits each word's hexatags once, *before*
its first token's keys and values are computed, so the key/value cache (``SiPECache``) never goes
stale -- unlike re-parsing the text generated so far, where a parser may revise earlier tags.

Each step samples (or takes the best) next token from the LM head. When the token starts a new
word, the word's tags are drawn from the tag head restricted to the well-formed moves of
``allowed_pairs`` (stack depth, finishable within ``max_words``); ``eos`` marks the last word,
and the sentence ends when the next token would start another word (or is the EOS token). The
tags decode to a projective tree (``hexatags.decode``), written like ``structpe tag`` output.

Tree-controlled generation fixes the tags instead: the model only chooses the words that fill
them. The prompt's words are those of ``structpe tag``'s word rule (``split_words``) or of its
parse; in generated text, word starts follow the tokenizer: a token whose text begins with
whitespace, a token made of punctuation only, and the token after one, start a word (UD keeps
punctuation apart).
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

import torch

from structpe.eval.scoring.prefixes import allowed_pairs
from structpe.eval.scoring.types import model_device
from structpe.generation.options import check_options, filter_logits
from structpe.syntax.alignment import align_tags_by_offsets, rule_word_starts
from structpe.syntax.hexatags import DEFAULT_MAX_DEPTH, EOS, IGNORE_INDEX, NR_L, NR_R, TL, decode
from structpe.syntax.tagged import TaggedSentence


class _Vocab:
    """Per-token facts the loop needs: does the token start a word, is it punctuation, special."""

    def __init__(self, tokenizer: Any, size: int) -> None:
        texts = [tokenizer.decode([i]) for i in range(size)]
        self.space = torch.tensor([t[:1].isspace() and bool(t.strip()) for t in texts])
        self.punct = torch.tensor([bool(t.strip()) and all(_is_punct(c) for c in t.strip()) for t in texts])
        self.special = torch.zeros(size, dtype=torch.bool)
        self.special[[i for i in tokenizer.all_special_ids if i < size]] = True
        self.eos = tokenizer.eos_token_id
        self.bos = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else self.eos
        self.word_start = (self.space | self.punct) & ~self.special  # regardless of the previous token

    def starts_word(self, prev: int | None, tok: int) -> bool:
        return prev is None or bool(self.word_start[tok]) or bool(self.punct[prev])


def _is_punct(c: str) -> bool:
    return unicodedata.category(c).startswith(("P", "S"))


@dataclass
class _State:
    """One partial sentence: tokens, words (token ids each), tags, stack depth, joint log-prob."""

    ids: list[int] = field(default_factory=list)  # BOS excluded
    words: list[list[int]] = field(default_factory=list)
    terminals: list[int] = field(default_factory=list)
    nonterminals: list[int] = field(default_factory=list)
    depth: int = 0
    logprob: float = 0.0
    tag_lp: tuple[torch.Tensor, torch.Tensor] | None = None  # tag head log-softmax for the next word
    token_lp: torch.Tensor | None = None  # LM head log-softmax for the next token
    done: bool = False

    @property
    def last_tagged(self) -> bool:
        return bool(self.nonterminals) and self.nonterminals[-1] == EOS


def _moves(depth: int, word: int, max_words: int, max_depth: int) -> list[tuple[int, int, int]]:
    """Well-formed (terminal, non-terminal, depth after) for word ``word`` when the length is open:
    a non-last move that can still finish within ``max_words``, or a last (``eos``) move."""
    more = allowed_pairs(depth, word, max_words, max_depth) if word < max_words else []
    return [m for m in more if m[1] != EOS] + allowed_pairs(depth, word, word, max_depth)


class _Generator:
    """The decoding loop over one ``SiPECache`` whose rows are the live hypotheses."""

    def __init__(self, model: Any, tokenizer: Any, opts: dict[str, Any]) -> None:
        self.model = model
        self.tok = tokenizer
        self.device = model_device(model)
        self.vocab = _Vocab(tokenizer, model.config.vocab_size)
        self.o = opts
        self.gen = torch.Generator().manual_seed(opts["seed"]) if opts["seed"] is not None else None

    # -- model steps ------------------------------------------------------------------------------
    @torch.no_grad()
    def feed(
        self,
        states: list[_State],
        cache: Any,
        tokens: list[list[int]],
        tags: list[list[tuple[int, int]]],
        tag_at: list[int | None],
    ) -> Any:
        """Run new positions (same count per row) and store each row's next-token / next-tag log-probs.

        ``tag_at[b]``: index among the new positions of the last word start (its tag head output
        predicts the next word's tags), or None to keep the row's current tag distribution.
        """
        ids = torch.tensor(tokens, device=self.device)
        t = torch.tensor([[p[0] for p in row] for row in tags], device=self.device)
        n = torch.tensor([[p[1] for p in row] for row in tags], device=self.device)
        out = self.model(ids, terminal_ids=t, nonterminal_ids=n, cache=cache, use_cache=True)
        lp = torch.log_softmax(out.logits[:, -1].float(), dim=-1).cpu()
        t_lp = torch.log_softmax(out.terminal_logits.float(), dim=-1).cpu()
        n_lp = torch.log_softmax(out.nonterminal_logits.float(), dim=-1).cpu()
        for b, s in enumerate(states):
            s.token_lp = lp[b]
            if tag_at[b] is not None:
                s.tag_lp = (t_lp[b, tag_at[b]], n_lp[b, tag_at[b]])
        return out.cache

    # -- choices ----------------------------------------------------------------------------------
    def token_scores(self, s: _State) -> torch.Tensor:
        """The LM head's log-probs with the moves that the sentence's state forbids set to -inf."""
        lp = s.token_lp.clone()
        lp[self.vocab.special] = -math.inf
        forced = self.o["tags"]
        can_end = s.last_tagged if forced is None else len(s.words) >= len(forced[0])
        if can_end and self.vocab.eos is not None:
            lp[self.vocab.eos] = s.token_lp[self.vocab.eos]  # EOS ends a finished sentence
        too_long = bool(s.words) and len(s.words[-1]) >= self.o["max_tokens_per_word"]
        if (
            not can_end
            and too_long
            and not bool(self.vocab.punct[s.ids[-1]])
            and bool(self.vocab.word_start.any())
        ):
            lp[~self.vocab.word_start] = -math.inf  # close a word that runs too long
        return lp

    def tag_moves(self, s: _State) -> list[tuple[int, int, int, float]]:
        """(terminal, non-terminal, depth after, log-prob) for the word that starts now."""
        word = len(s.words) + 1
        forced = self.o["tags"]
        if forced is not None:
            t, nt = forced[0][word - 1], forced[1][word - 1]
            d = s.depth + (1 if t == TL else 0) - (1 if nt in (NR_L, NR_R) else 0)
            return [(t, nt, d, float(s.tag_lp[0][t] + s.tag_lp[1][nt]))]
        moves = _moves(s.depth, word, self.o["max_words"], self.o["max_depth"])
        return [(t, nt, d, float(s.tag_lp[0][t] + s.tag_lp[1][nt])) for t, nt, d in moves]

    def ends(self, s: _State, tok: int) -> bool:
        """Does ``tok`` end the sentence (EOS, or a new word after the last one)?"""
        if tok == self.vocab.eos:
            return True
        new_word = self.vocab.starts_word(s.ids[-1] if s.ids else None, tok)
        forced = self.o["tags"]
        full = s.last_tagged if forced is None else len(s.words) >= len(forced[0])
        too_long = bool(s.words) and len(s.words[-1]) >= self.o["max_tokens_per_word"]
        return full and (new_word or too_long)

    def pick(self, scores: torch.Tensor) -> int:
        """One index from log-scores: argmax (greedy), else a sample at the temperature, top-k/p."""
        if self.o["strategy"] == "greedy" or self.o["temperature"] == 0:
            return int(scores.argmax())
        logits = filter_logits(scores / self.o["temperature"], self.o["top_k"], self.o["top_p"])
        return int(torch.multinomial(logits.softmax(-1), 1, generator=self.gen))

    @staticmethod
    def advance(
        s: _State, tok: int, tok_lp: float, move: tuple[int, int, int, float] | None
    ) -> tuple[int, int]:
        """Append ``tok`` (with its word's tags if it starts one); return the tags it is fed with."""
        s.ids.append(tok)
        s.logprob += tok_lp
        if move is None:
            s.words[-1].append(tok)
            return IGNORE_INDEX, IGNORE_INDEX
        t, nt, d, lp = move
        s.words.append([tok])
        s.terminals.append(t)
        s.nonterminals.append(nt)
        s.depth = d
        s.logprob += lp
        return t, nt

    # -- strategies -------------------------------------------------------------------------------
    def run_sample(self, prompt: _State, cache: Any) -> _State:
        """Greedy or sampled decoding of one sentence (one cache row)."""
        s = prompt
        for _ in range(self.o["max_new_tokens"]):
            tok = self.pick(self.token_scores(s))
            if self.ends(s, tok):
                s.logprob += float(s.token_lp[tok])  # the end counts, as in beam search (logprob)
                break
            move = None
            if self.vocab.starts_word(s.ids[-1] if s.ids else None, tok):
                moves = self.tag_moves(s)
                move = moves[self.pick(torch.tensor([m[3] for m in moves]))]
            tags = self.advance(s, tok, float(s.token_lp[tok]), move)
            cache = self.feed([s], cache, [[tok]], [[tags]], [0 if move is not None else None])
        s.done = True
        return s

    def run_beam(self, prompt: _State, cache: Any, width: int) -> _State:
        """Beam search of ``width`` on the joint log p(x, T): token and word tags expand together."""
        beams, finished = [prompt], []
        for _ in range(self.o["max_new_tokens"]):
            cands = []  # (score, beam index, token, move or None, ends)
            for b, s in enumerate(beams):
                scores = self.token_scores(s)
                top = torch.topk(scores, min(width + 1, scores.numel()))
                for lp, tok in zip(top.values.tolist(), top.indices.tolist(), strict=True):
                    if lp == -math.inf:
                        continue
                    if self.ends(s, tok):
                        cands.append((s.logprob + lp, b, tok, None, True))
                    elif self.vocab.starts_word(s.ids[-1] if s.ids else None, tok):
                        cands.extend((s.logprob + lp + m[3], b, tok, m, False) for m in self.tag_moves(s))
                    else:
                        cands.append((s.logprob + lp, b, tok, None, False))
            cands.sort(key=lambda c: -c[0])
            keep = []
            for score, b, tok, move, end in cands:
                if end:
                    done = _copy(beams[b])
                    done.logprob = score
                    finished.append(done)
                elif len(keep) < width:
                    keep.append((b, tok, move))
                if len(keep) >= width:
                    break
            if not keep or (finished and max(f.logprob for f in finished) >= cands[0][0]):
                break
            new = []
            for b, tok, move in keep:
                s = _copy(beams[b])
                new.append((s, tok, self.advance(s, tok, float(beams[b].token_lp[tok]), move), move))
            cache.batch_select_indices(torch.tensor([b for b, _, _ in keep], device=self.device))
            beams = [s for s, *_ in new]
            cache = self.feed(
                beams,
                cache,
                [[tok] for _, tok, _, _ in new],
                [[tags] for _, _, tags, _ in new],
                [0 if m is not None else None for *_, m in new],
            )
        pool = finished or [s for s in beams if s.last_tagged or self.o["tags"] is not None]
        if not pool:
            raise RuntimeError(
                "beam search found no finished sentence; raise --max-words or the token budget"
            )
        best = max(pool, key=lambda s: s.logprob)
        best.done = True
        return best


def _copy(s: _State) -> _State:
    return _State(
        list(s.ids),
        [list(w) for w in s.words],
        list(s.terminals),
        list(s.nonterminals),
        s.depth,
        s.logprob,
        s.tag_lp,
        s.token_lp,
    )


def _prompt_state(gen: _Generator, prompt: str, parse: Any | None) -> tuple[_State, Any, list[str]]:
    """Feed BOS and the prompt (with its words' tags) into a fresh cache; also the prompt's words.

    A parse of a prompt tags it as a finished sentence, so if its last word carries ``eos`` that
    word's tags are chosen again by the tag head (the prompt is a prefix). Every other prompt tag
    is kept; the kept tags must be a well-formed prefix. Without a parse the words are those of
    ``structpe tag``'s word rule (``split_words``), their tags chosen by the model.
    """
    s = _State()
    enc = gen.tok(prompt, add_special_tokens=False, return_offsets_mapping=True) if prompt else None
    ids = list(enc["input_ids"]) if enc else []
    offsets = [tuple(o) for o in enc["offset_mapping"]] if enc else []
    terms = [IGNORE_INDEX] * len(ids)
    nts = [IGNORE_INDEX] * len(ids)
    words = list(parse.words) if parse is not None else []
    if ids and parse is not None:
        terms, nts, missed = align_tags_by_offsets(prompt, offsets, parse)
        if missed:
            raise ValueError(f"prompt {prompt!r}: {missed} parsed word(s) do not align with the tokens")
    starts = [j for j, t in enumerate(terms) if t != IGNORE_INDEX]
    if ids and parse is None:  # no tags given: the words of the word rule, tags chosen below
        starts, words = rule_word_starts(prompt, offsets)
    if ids and (not starts or starts[0] != 0):
        raise ValueError(f"prompt {prompt!r}: its first token does not start a word")
    if len(starts) >= gen.o["max_words"]:
        raise ValueError(
            f"prompt {prompt!r} has {len(starts)} words; the sentence may have {gen.o['max_words']}"
        )
    # words whose tags are chosen by the model: all of them without a parse, else an eos-tagged last
    keep = len(starts) if parse is not None else 0
    if keep and nts[starts[-1]] == EOS and gen.o["tags"] is None:
        keep -= 1
    cut = starts[keep] if keep < len(starts) else len(ids)
    fed = [gen.vocab.bos, *ids[:cut]]
    tags = [(IGNORE_INDEX, IGNORE_INDEX)] + [(terms[j], nts[j]) for j in range(cut)]
    for j in range(cut):
        move = None
        if j in starts[:keep]:
            t, nt = terms[j], nts[j]
            legal = {(m[0], m[1]): m[2] for m in _moves(s.depth, len(s.words) + 1, 10**6, gen.o["max_depth"])}
            if (t, nt) not in legal:
                raise ValueError(
                    f"prompt {prompt!r}: the tags of word {len(s.words) + 1} are not a well-formed prefix"
                )
            move = (t, nt, legal[(t, nt)], 0.0)
        s.ids.append(ids[j])
        if move is None:
            s.words[-1].append(ids[j])
        else:
            s.words.append([ids[j]])
            s.terminals.append(move[0])
            s.nonterminals.append(move[1])
            s.depth = move[2]
    last_start = max([0, *[j + 1 for j in starts[:keep]]])
    cache = gen.feed([s], None, [fed], [tags], [last_start])
    for j in range(cut, len(ids)):  # the rest of the prompt, its word starts tagged by the model
        move = None
        if j in starts:
            moves = gen.tag_moves(s)
            move = moves[gen.pick(torch.tensor([m[3] for m in moves]))]
        tag = gen.advance(s, ids[j], float(s.token_lp[ids[j]]), move)
        cache = gen.feed([s], cache, [[ids[j]]], [[tag]], [0 if move is not None else None])
    s.logprob = 0.0  # scores count the generated part only
    return s, cache, words


def _result(
    gen: _Generator, s: _State, n_prompt_words: int, prompt_words: Sequence[str], n_prompt_tokens: int
) -> TaggedSentence:
    """The sentence with the prompt's own words (a generated continuation of its last word added)."""
    words = [gen.tok.decode(w).strip() for w in s.words]
    if prompt_words:
        k = len(prompt_words)
        extra = sum(len(w) for w in s.words[:k]) - n_prompt_tokens
        tail = gen.tok.decode(s.words[k - 1][len(s.words[k - 1]) - extra :]) if extra else ""
        words[:k] = [*prompt_words[:-1], prompt_words[-1] + tail]
    heads = decode(s.terminals, s.nonterminals)
    meta = {
        "text": gen.tok.decode(s.ids).strip(),
        "prompt_words": n_prompt_words,
        "logprob": s.logprob,
        "strategy": gen.o["strategy"],
    }
    return TaggedSentence(words, heads, list(s.terminals), list(s.nonterminals), meta=meta)


def generate(
    model: Any,
    tokenizer: Any,
    prompt: str = "",
    *,
    n: int = 1,
    strategy: str = "sample",
    temperature: float = 1.0,
    top_k: int | None = None,
    top_p: float | None = None,
    num_beams: int = 4,
    max_words: int = 30,
    max_tokens_per_word: int = 8,
    seed: int | None = None,
    parser: Any | None = None,
    prompt_parse: Any | None = None,
    tags: TaggedSentence | tuple[Sequence[int | str], Sequence[int | str]] | None = None,
    max_depth: int = DEFAULT_MAX_DEPTH,
) -> list[TaggedSentence]:
    """Generate ``n`` sentences with their dependency trees (module docstring).

    ``strategy``: ``sample`` (``temperature``, ``top_k``, ``top_p``), ``greedy`` or ``beam``
    (``num_beams``, joint log p(x, T)); tags are sampled with the same temperature and filters
    (greedy / beam: the best). ``prompt``: text the sentence starts with; its tags come from
    ``prompt_parse`` (a parse of the prompt: ``words``, ``terminals``, ``nonterminals``), or from
    ``parser``, or else from the model's own tag head. ``tags``: tree-controlled generation --
    the sentence's whole tag sequence (a TaggedSentence, e.g. an encoded CoNLL-U tree, or
    (terminals, nonterminals)); the prompt, if any, fills its first words. Each result's ``meta``
    has ``text``, ``logprob``, ``prompt_words`` and ``strategy``. ``logprob`` is the same for every
    strategy: the joint log p of the generated tokens and their tags, *including* the token that
    ended the sentence (EOS, or the first token of a word beyond a finished tree) when it ended
    before the token budget; never the prompt. ``n > 1`` needs sampling (a deterministic strategy
    would repeat one sentence). ``beam`` returns the best of the beam searches of width
    1..``num_beams``, so a wider beam never scores worse.
    """
    check_options(strategy, n, temperature, top_k, top_p, num_beams, max_words, max_tokens_per_word)
    if getattr(model, "tag_heads", None) is None or getattr(model.config, "family", None) != "txl":
        raise ValueError(
            "joint generation needs a structpe TXL decoder with tag heads (injection other than none)"
        )
    forced = None
    if tags is not None:
        terms, nts = (tags.terminals, tags.nonterminals) if isinstance(tags, TaggedSentence) else tags
        forced = TaggedSentence(["_"] * len(terms), decode(terms, nts), list(terms), list(nts))  # validates
        forced = (forced.terminals, forced.nonterminals)
        max_words = len(forced[0])
    if prompt and prompt_parse is None and parser is not None:
        prompt_parse = parser.parse_text([prompt], split_sentences=False)[0]
    if forced is not None and prompt_parse is not None:  # the prompt's words take the tree's first tags
        k = len(prompt_parse.words)
        if k > len(forced[0]):
            raise ValueError(f"the prompt has {k} words but the tree only {len(forced[0])}")
        prompt_parse = SimpleNamespace(
            words=list(prompt_parse.words), terminals=forced[0][:k], nonterminals=forced[1][:k]
        )
    opts = dict(
        strategy=strategy,
        temperature=temperature,
        top_k=top_k,
        top_p=top_p,
        num_beams=num_beams,
        max_words=max_words,
        max_tokens_per_word=max_tokens_per_word,
        max_depth=max_depth,
        seed=seed,
        tags=forced,
        max_new_tokens=max_words * max_tokens_per_word + 1,
    )
    gen = _Generator(model, tokenizer, opts)
    model.eval()
    out = []
    for _ in range(n):
        start, cache, prompt_words = _prompt_state(gen, prompt, prompt_parse)
        n_prompt, n_prompt_tokens = len(start.words), len(start.ids)
        if strategy == "beam":
            # the best of the searches of width 1..num_beams: plain beam search may return a worse
            # sentence with a wider beam (pruning differs), so a wider beam here is never worse
            s = gen.run_beam(start, cache, 1)
            for width in range(2, num_beams + 1):
                start, cache, _ = _prompt_state(gen, prompt, prompt_parse)
                s = max(s, gen.run_beam(start, cache, width), key=lambda h: h.logprob)
        else:
            s = gen.run_sample(start, cache)
        out.append(_result(gen, s, n_prompt, prompt_words, n_prompt_tokens))
    return out
