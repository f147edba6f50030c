"""Train the subword tokenizer of a pre-training run (``structpe tokenizer train``).

Decoders (Transformer-XL) get a byte-level BPE, encoders a cased WordPiece, both trained with
Hugging Face ``tokenizers`` and saved as a ``transformers`` fast-tokenizer folder, so that any
HF tool loads them with ``AutoTokenizer.from_pretrained(folder)``.

Word boundaries matter for SiPE: hexatags sit on a word's *first* subword, so both tokenizers
must accept pre-split words (``is_split_into_words=True``). Byte-level BPE therefore uses
``add_prefix_space=True`` (every word, including the first, is encoded as `` word``), which also
makes a sentence decode back to its space-joined words exactly.

Special tokens
  bpe        ``<pad>`` ``<s>`` (BOS) ``</s>`` (EOS) ``<unk>`` ``<mask>``; nothing is added
             automatically (GPT-2 convention): ``structpe prepare`` inserts BOS/EOS itself.
  wordpiece  ``[PAD]`` ``[UNK]`` ``[CLS]`` ``[SEP]`` ``[MASK]``; the usual BERT template
             ``[CLS] A [SEP] (B [SEP])`` is applied by ``tokenizer(text)``, so fine-tuning code gets
             the standard behaviour. ``bos_token``/``eos_token`` are set to ``[CLS]``/``[SEP]`` so that
             data preparation can treat both kinds the same way.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

from structpe.choices import CAUSAL_FAMILIES
from structpe.errors import StructpeError, reading
from structpe.io import atomic_files, read_json
from structpe.train.corpus import TEXT_FORMS, iter_tokenizer_text, text_form_record

KINDS = ("bpe", "wordpiece")
BPE_SPECIALS = {"pad_token": "<pad>", "bos_token": "<s>", "eos_token": "</s>", "unk_token": "<unk>",
                "mask_token": "<mask>"}
WORDPIECE_SPECIALS = {"pad_token": "[PAD]", "unk_token": "[UNK]", "bos_token": "[CLS]", "eos_token": "[SEP]",
                      "cls_token": "[CLS]", "sep_token": "[SEP]", "mask_token": "[MASK]"}
TEXT_FORM_KEY = "structpe_text_form"  # tokenizer_config.json key: the text form it was trained on


def default_kind(family: str | None) -> str:
    """Byte-level BPE for decoders, WordPiece for encoders (docs/design.md §3)."""
    return "bpe" if family in (None, *CAUSAL_FAMILIES) else "wordpiece"


def train_tokenizer(
    inputs: Iterable[str | Path],
    output_dir: str | Path,
    *,
    kind: str = "bpe",
    vocab_size: int = 8192,
    min_frequency: int = 2,
    input_format: str | None = None,
    lowercase: bool = False,
    text_form: str = "raw",
    show_progress: bool = True,
) -> PreTrainedTokenizerFast:
    """Train a ``kind`` tokenizer on the text of ``inputs`` and save it to ``output_dir``.

    ``inputs`` are corpus files (``.txt``, ``.txt.gz``, ``.conllu``, ``.conllu.gz``) read with
    :mod:`structpe.train.corpus`; ``input_format`` overrides the guess from the file name.
    Training is deterministic for a given input and settings. Returns the saved tokenizer.
    ``text_form`` (``raw``: detokenized, the form benchmarks are written in) is recorded in
    ``tokenizer_config.json`` (key :data:`TEXT_FORM_KEY`), which travels with every model folder.
    """
    if text_form not in TEXT_FORMS:
        raise ValueError(f"text_form must be one of {TEXT_FORMS}, got {text_form!r}")
    if kind not in KINDS:
        raise ValueError(f"tokenizer kind must be one of {KINDS}, got {kind!r}")
    paths = [Path(p) for p in inputs]
    if not paths:
        raise ValueError("train_tokenizer needs at least one input file")
    for p in paths:
        if not p.is_file():
            raise FileNotFoundError(f"tokenizer training input not found: {p}")
    if kind == "bpe":
        specials = BPE_SPECIALS
        tok = Tokenizer(models.BPE(unk_token=None))
        norm = [normalizers.NFC()] + ([normalizers.Lowercase()] if lowercase else [])
        tok.normalizer = normalizers.Sequence(norm)
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)
        tok.decoder = decoders.ByteLevel()
        trainer = trainers.BpeTrainer(
            vocab_size=vocab_size,
            min_frequency=min_frequency,
            special_tokens=list(dict.fromkeys(specials.values())),
            initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
            show_progress=show_progress,
        )
    else:
        specials = WORDPIECE_SPECIALS
        tok = Tokenizer(models.WordPiece(unk_token=specials["unk_token"]))
        tok.normalizer = normalizers.BertNormalizer(
            clean_text=True, handle_chinese_chars=True, strip_accents=False, lowercase=lowercase
        )
        tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
        tok.decoder = decoders.WordPiece(prefix="##")
        trainer = trainers.WordPieceTrainer(
            vocab_size=vocab_size,
            min_frequency=min_frequency,
            special_tokens=list(dict.fromkeys(specials.values())),
            show_progress=show_progress,
        )
    texts = 0

    def counted() -> Iterable[str]:
        nonlocal texts
        for path in paths:
            with reading(path):  # undecodable or truncated input: name the file
                for text in iter_tokenizer_text([path], input_format, text_form):
                    texts += bool(text.strip())
                    yield text

    tok.train_from_iterator(counted(), trainer=trainer)
    if not texts:  # the vocabulary would be the special tokens (and bytes) only
        raise StructpeError(f"no text to train on in {[str(p) for p in paths]}: the inputs are empty")
    if kind == "wordpiece":
        cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
        tok.post_processor = processors.TemplateProcessing(
            single="[CLS] $A [SEP]",
            pair="[CLS] $A [SEP] $B:1 [SEP]:1",
            special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)],
        )
    extra = {"add_prefix_space": True} if kind == "bpe" else {}
    extra[TEXT_FORM_KEY] = text_form_record(text_form)
    hf = PreTrainedTokenizerFast(tokenizer_object=tok, model_max_length=1_000_000, **specials, **extra)
    meta = {
        "kind": kind,
        "vocab_size_requested": vocab_size,
        "vocab_size": len(hf),
        "min_frequency": min_frequency,
        "lowercase": lowercase,
        **text_form_record(text_form),
        "inputs": [str(p) for p in paths],
    }
    with atomic_files(output_dir) as staging:  # whole files or none, also on a crash
        hf.save_pretrained(staging)
        (staging / "structpe_tokenizer.json").write_text(json.dumps(meta, indent=2) + "\n")
    return hf


TOKENIZER_JSON_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json")


def auto_tokenizer(tok_dir: str | Path) -> Any:
    """``AutoTokenizer`` of ``tok_dir``; a corrupt or truncated ``tokenizer.json`` is one line naming it."""
    from transformers import AutoTokenizer
    from transformers.utils import logging as hf_logging

    for name in TOKENIZER_JSON_FILES:  # name the broken file (transformers reports line and column only)
        if (Path(tok_dir) / name).is_file():
            read_json(Path(tok_dir) / name)
    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()  # not "model of type structpe-sipe" for our own folders
    try:
        return AutoTokenizer.from_pretrained(tok_dir)
    except Exception as err:  # noqa: BLE001 (tokenizers raises a bare Exception for a corrupt file)
        msg = " ".join(str(err).split())[:300]
        raise StructpeError(f"{tok_dir}: the tokenizer does not load ({type(err).__name__}: {msg})") from None
    finally:
        hf_logging.set_verbosity(level)


def load_tokenizer(path: str | Path) -> PreTrainedTokenizerFast:
    """Load a tokenizer folder with a clear error when it is missing or not a fast tokenizer."""
    path = Path(path)
    if not (path / "tokenizer.json").is_file():
        raise FileNotFoundError(
            f"{path} is not a tokenizer folder (no tokenizer.json); train one with `structpe tokenizer train`"
        )
    tok = auto_tokenizer(path)
    if not getattr(tok, "is_fast", False):
        raise ValueError(f"{path}: a fast tokenizer is needed (word ids for tag alignment)")
    return tok


def text_form_warning(tokenizer: Any) -> str | None:
    """One line when ``tokenizer`` was trained on a text form other than raw text, else None.

    Benchmarks and every evaluation score raw text; a tokenizer (and so its model) trained on
    tokenized text sees patterns at evaluation it never saw in training (``glass.`` vs ``glass .``).
    Tokenizers without the record (any Hugging Face tokenizer) are trained on raw text.
    """
    form = (getattr(tokenizer, "init_kwargs", None) or {}).get(TEXT_FORM_KEY)
    if not form or form.get("text_form") == "raw":
        return None
    name = getattr(tokenizer, "name_or_path", "") or "the tokenizer"
    return (
        f"warning: {name} was trained on {form.get('text_form')!r} text "
        f"({form.get('normalisation', '?')}) but evaluation scores raw text; scores are not comparable"
    )
