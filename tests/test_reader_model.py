"""The shipped reader weights keep the contract router/reader/score.py reads them by."""

from pathlib import Path

import numpy as np
import onnxruntime as ort
from tokenizers import Tokenizer

READER = Path(__file__).resolve().parents[1] / "router" / "reader"


def test_reader_file_is_small_int8_onnx_with_the_agreed_inputs_and_output():
    model = READER / "reader-int8.onnx"
    assert model.stat().st_size <= 30 * 1024 * 1024
    session = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    assert [(i.name, i.type) for i in session.get_inputs()] == [
        ("input_ids", "tensor(int64)"),
        ("attention_mask", "tensor(int64)"),
        ("token_type_ids", "tensor(int64)"),
    ]
    assert [o.name for o in session.get_outputs()] == ["logits"]

    tok = Tokenizer.from_file(str(READER / "tokenizer.json"))
    pairs = [
        ("How often is a failed webhook retried?", "Webhooks > Retries\n\nWe retry 8 times."),
        ("what is the plan price", "Billing\n\n" + "The team plan costs $49 a month. " * 80),
    ]
    encs = tok.encode_batch(pairs)
    assert max(len(e.ids) for e in encs) == 256  # the section is cut, the question kept
    n = max(len(e.ids) for e in encs)
    ids, mask, types = (np.zeros((len(encs), n), dtype=np.int64) for _ in range(3))
    for i, e in enumerate(encs):
        ids[i, : len(e.ids)], mask[i, : len(e.ids)] = e.ids, e.attention_mask
        types[i, : len(e.ids)] = e.type_ids
    assert types[0].max() == 1  # the section is the second segment
    (logits,) = session.run(
        ["logits"], {"input_ids": ids, "attention_mask": mask, "token_type_ids": types}
    )
    assert logits.shape == (2, 1) and logits.dtype == np.float32 and np.isfinite(logits).all()
