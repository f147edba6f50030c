"""Checks shared by the three encoder test files (parity, zero-prior, MLM rule, training, save/load).

Each family's test file keeps what is particular to it (its transformers config, its variants and the
equations of its SiPE site) and calls these for the checks every encoder must pass alike.
"""

from __future__ import annotations

import torch
from torch import nn

from structpe.models import SiPEConfig, build_model, load
from structpe.models.registry import from_hf_pretrained
from structpe.modules.prior import HexatagPrior
from structpe.syntax.hexatags import IGNORE_INDEX

MASK_ID = 3
N_DEPRELS = 6

# the tiny size every encoder test uses, as transformers config fields and as ours
TINY_HF = dict(
    vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=48
)
TINY_SIPE = dict(
    vocab_size=64, d_model=32, n_layers=2, n_heads=4, d_ff=48, dropout=0.0, attention_dropout=0.0
)

# the SiPE variants of the families with both an input and a position site (DeBERTa, ModernBERT)
INPUT_AND_POSITION_VARIANTS = {
    "none": {"injection": "none"},
    "input": {"injection": "input"},
    "input_dr": {"injection": "input", "n_deprels": N_DEPRELS},
    "position": {"injection": "position"},
    "position_shared_head_k2": {
        "injection": "position",
        "projection": "shared",
        "projection_target": "head",
        "entry_layer": 2,
    },
    "position_dr": {"injection": "position", "n_deprels": N_DEPRELS},
}


def tiny_model(family: str, **fields) -> nn.Module:
    """A freshly built TINY_SIPE MLM of ``family`` (``fields`` add or override config fields), seeded so
    that every run trains the same weights."""
    torch.manual_seed(0)
    return build_model(SiPEConfig(**{**TINY_SIPE, "family": family, **fields}))


def tiny_batch(vocab: int, pad_id: int, length: int = 12, seed: int = 0) -> dict[str, torch.Tensor]:
    """3 rows (the last padded), tags on ~70% of non-special positions, ~30% of them MLM-masked."""
    g = torch.Generator().manual_seed(seed)
    bsz = 3
    ids = torch.randint(5, vocab, (bsz, length), generator=g)
    attention_mask = torch.ones(bsz, length, dtype=torch.long)
    attention_mask[2, length - 4 :] = 0
    ids[attention_mask == 0] = pad_id
    special = torch.zeros(bsz, length, dtype=torch.bool)
    special[:, 0] = True
    tagged = (torch.rand(bsz, length, generator=g) < 0.7) & ~special & attention_mask.bool()
    terminal = torch.where(tagged, torch.randint(0, 2, (bsz, length), generator=g), IGNORE_INDEX)
    nonterminal = torch.where(tagged, torch.randint(0, 5, (bsz, length), generator=g), IGNORE_INDEX)
    deprel = torch.where(tagged, torch.randint(0, N_DEPRELS, (bsz, length), generator=g), IGNORE_INDEX)
    masked = (torch.rand(bsz, length, generator=g) < 0.3) & ~special & attention_mask.bool()
    masked[0, 2] = masked[1, 3] = True
    tagged[0, 2] = tagged[1, 3] = True  # at least two masked tagged positions
    for r, c in ((0, 2), (1, 3)):
        terminal[r, c], nonterminal[r, c], deprel[r, c] = 1, 2, 1
    labels = torch.where(masked, ids, IGNORE_INDEX)
    input_ids = torch.where(masked, torch.full_like(ids, MASK_ID), ids)
    return {
        "input_ids": input_ids,
        "attention_mask": attention_mask,
        "terminal_ids": terminal,
        "nonterminal_ids": nonterminal,
        "deprel_ids": deprel,
        "labels": labels,
    }


def model_inputs(batch: dict, config) -> dict:
    """The batch minus deprel_ids when the model has no DEPREL table."""
    return {k: v for k, v in batch.items() if k != "deprel_ids" or config.n_deprels}


def assert_hf_parity(hf_model, ours, batch: dict, atol: float = 1e-5) -> None:
    """Same MLM logits and every hidden state as the transformers model, pads included."""
    hf_model.eval()
    ours.eval()
    with torch.no_grad():
        ref = hf_model(batch["input_ids"], attention_mask=batch["attention_mask"], output_hidden_states=True)
        out = ours(batch["input_ids"], attention_mask=batch["attention_mask"], output_hidden_states=True)
    assert len(ref.hidden_states) == len(out.hidden_states)
    for i, (a, b) in enumerate(zip(ref.hidden_states, out.hidden_states, strict=True)):
        torch.testing.assert_close(b, a, atol=atol, rtol=0, msg=lambda m, i=i: f"hidden state {i}: {m}")
    torch.testing.assert_close(out.logits, ref.logits, atol=atol, rtol=0)


def assert_hf_grad_parity(hf_model, ours, batch: dict, pairs: dict[str, str], atol: float = 1e-5) -> None:
    """Same MLM loss and the same gradients (ours name -> transformers name) after one backward."""
    hf_model.train()
    ours.train()
    hf_model.zero_grad()
    ours.zero_grad()
    inputs = {k: batch[k] for k in ("input_ids", "attention_mask", "labels")}
    ref = hf_model(**inputs).loss
    out = ours(**inputs).loss
    ref.backward()
    out.backward()
    torch.testing.assert_close(out, ref, atol=atol, rtol=0)
    theirs = dict(hf_model.named_parameters())
    for mine, name in pairs.items():
        got = ours.get_parameter(mine).grad
        assert got is not None and bool(got.abs().sum() > 0), f"{mine} got no gradient"
        torch.testing.assert_close(
            got, theirs[name].grad, atol=atol, rtol=1e-4, msg=lambda m, n=mine: f"{n}: {m}"
        )


def zero_prior_tables(model: nn.Module) -> None:
    """E_T, E_N, E_D = 0 everywhere; alpha fusions get a = 1 (a*x alone would rescale x)."""
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, HexatagPrior):
                for emb in (module.terminal, module.nonterminal, module.deprel):
                    if emb is not None:
                        emb.weight.zero_()
            if hasattr(module, "alpha") and isinstance(module.alpha, nn.Parameter):
                module.alpha.fill_(1.0)


def randomize_position_prior(model, std: float, tables: bool = True) -> None:
    """W_E / W_delta ~ N(0, std) (and, with ``tables``, E_T, E_N ~ N(0, 1)).

    Their near-zero init keeps the position prior's effect below what a test can see.
    """
    with torch.no_grad():
        for lin in model.backbone.prior_proj.proj.values():
            lin.weight.normal_(std=std)
        if tables:
            model.backbone.prior.terminal.weight.normal_()
            model.backbone.prior.nonterminal.weight.normal_()


def logits_of(model, batch: dict) -> torch.Tensor:
    model.eval()
    with torch.no_grad():
        return model(**model_inputs(batch, model.config)).logits


def shift_tags(batch: dict, where: torch.Tensor) -> dict:
    """A copy of ``batch`` whose tags differ (every id moved by one) at ``where``."""
    out = dict(batch)
    for key, n in (("terminal_ids", 2), ("nonterminal_ids", 5), ("deprel_ids", N_DEPRELS)):
        out[key] = torch.where(where, (batch[key].clamp_min(0) + 1) % n, batch[key])
    return out


def assert_masked_positions_blind(model, batch: dict) -> None:
    """Changing the tags of MLM-masked positions changes nothing but the tag targets."""
    model.eval()
    tagged = batch["terminal_ids"] != IGNORE_INDEX
    masked = (batch["labels"] != IGNORE_INDEX) & tagged
    assert masked.any()
    with torch.no_grad():
        a = model(**model_inputs(batch, model.config))
        b = model(**model_inputs(shift_tags(batch, masked), model.config))
        # the same change at unmasked tagged positions is seen: the prior is live
        c = model(**model_inputs(shift_tags(batch, tagged & ~masked), model.config))
    torch.testing.assert_close(b.logits, a.logits, atol=0, rtol=0)
    torch.testing.assert_close(b.terminal_logits, a.terminal_logits, atol=0, rtol=0)
    torch.testing.assert_close(b.lm_loss, a.lm_loss, atol=0, rtol=0)
    assert not torch.equal(c.logits, a.logits)


def assert_training_lowers_loss(model, batch: dict, steps: int = 6, lr: float = 3e-3) -> None:
    """A few AdamW steps lower the full loss; the SiPE parameters receive gradient."""
    torch.manual_seed(0)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=lr)
    inputs = model_inputs(batch, model.config)
    losses = []
    for step in range(steps):
        out = model(**inputs)
        opt.zero_grad()
        out.loss.backward()
        if step == 0 and model.config.uses_prior:
            assert out.terminal_loss is not None and out.nonterminal_loss is not None
            sipe = {n: p for n, p in model.named_parameters() if ".prior" in n or "input_prior" in n}
            assert sipe, "no SiPE parameters found"
            dead = [n for n, p in sipe.items() if p.grad is None or not bool(p.grad.abs().sum() > 0)]
            # the terminal table is unused by the ADD_DNT family (DEPREL replaces it)
            dead = [n for n in dead if not (model.config.prior_parts == "dr_nt" and "terminal" in n)]
            assert not dead, f"SiPE parameters without gradient: {dead}"
        opt.step()
        losses.append(out.loss.item())
    assert losses[-1] < losses[0], losses


def assert_roundtrip(model, batch: dict, tmp_path) -> None:
    """save_pretrained -> structpe.models.load gives the same class, tied weights and outputs."""
    model.eval()
    model.save_pretrained(tmp_path)
    assert (tmp_path / "model.safetensors").is_file()
    loaded = load(tmp_path)
    assert type(loaded) is type(model)
    loaded.eval()
    if hasattr(loaded, "lm_head"):
        assert loaded.lm_head.decoder.weight is loaded.backbone.embeddings.word.weight
    before, after = model.state_dict(), loaded.state_dict()
    assert before.keys() == after.keys()
    for k in before:
        torch.testing.assert_close(after[k], before[k], atol=0, rtol=0)
    torch.testing.assert_close(logits_of(loaded, batch), logits_of(model, batch), atol=0, rtol=0)


def assert_attention_weights_consistent(model, batch: dict) -> None:
    """output_attentions takes the explicit path: same logits, rows that sum to one."""
    model.eval()
    inputs = model_inputs(batch, model.config)
    with torch.no_grad():
        plain = model(**inputs)
        explicit = model(**inputs, output_attentions=True)
    torch.testing.assert_close(explicit.logits, plain.logits, atol=1e-5, rtol=0)
    assert len(explicit.attentions) == model.config.n_layers
    for probs in explicit.attentions:
        torch.testing.assert_close(probs.sum(-1), torch.ones_like(probs.sum(-1)), atol=1e-5, rtol=0)


def assert_zeroed_prior_is_baseline(model, baseline, batch: dict) -> None:
    """With every tag table at zero, ``model`` computes what the encoder without SiPE computes."""
    zero_prior_tables(model)
    torch.testing.assert_close(logits_of(model, batch), logits_of(baseline, batch), atol=1e-5, rtol=0)


def assert_classification_parity(hf_model, ours, batch: dict, **inputs) -> None:
    """Same GLUE logits as the transformers classifier; ``inputs`` are passed to both (e.g. segments)."""
    hf_model.eval()
    ours.eval()
    with torch.no_grad():
        ref = hf_model(batch["input_ids"], attention_mask=batch["attention_mask"], **inputs)
        out = ours(batch["input_ids"], attention_mask=batch["attention_mask"], **inputs)
    torch.testing.assert_close(out.logits, ref.logits, atol=1e-5, rtol=0)


def assert_classification_roundtrip_and_attentions(
    from_hf, hf_mlm, injection: str, batch: dict, tmp_path
) -> None:
    """A converted 2-label classifier survives save/load; the MLM's attention weights are consistent."""
    model = from_hf(hf_mlm, head="classification", injection=injection, num_labels=2)
    assert_roundtrip(model, {**batch, "labels": None}, tmp_path)
    assert_attention_weights_consistent(from_hf(hf_mlm, injection=injection), batch)


def assert_checkpoint_directory_loads(
    from_hf, hf_mlm, model_class: type, injection: str, batch: dict, tmp_path
) -> None:
    """A transformers checkpoint folder loads through ``from_hf_pretrained`` as ``model_class``, with the
    numbers of the converted model once the prior is zeroed."""
    hf_mlm.save_pretrained(tmp_path)
    ours = from_hf_pretrained(tmp_path, injection=injection)
    assert isinstance(ours, model_class)
    assert_zeroed_prior_is_baseline(ours, from_hf(hf_mlm), batch)
