"""The trained reader (router/reader/score.py, issue 45): it loads once and scores a section per
logit, a section that says what was asked above one that does not; its absence is no error; the
decision reads it where a model weighing it ships, and today's model elsewhere."""

import json

import numpy as np
import pytest

from router import decide
from router.engine import Engine
from router.reader import score

SHIPS = score.WEIGHTS.is_file() and score.TOKENIZER.is_file()


def test_without_its_weights_the_reader_is_absent_not_an_error(tmp_path, monkeypatch):
    monkeypatch.setattr(score, "WEIGHTS", tmp_path / "reader-int8.onnx")
    monkeypatch.setattr(score, "_READER", None)
    assert score.trained() is None


@pytest.mark.skipif(not SHIPS, reason="the trained reader does not ship here")
def test_the_reader_loads_once_and_reads_what_a_section_says():
    reader = score.trained()
    assert reader is not None and reader is score.trained()  # one per process
    says, other = reader.score(
        "How many times is a failed webhook delivery retried?",
        [
            "Webhooks > Delivery and retries\n\nA failed delivery is retried with exponential"
            " backoff: 8 attempts in total spread over about 24 hours.",
            "Billing > Refunds\n\nRefunds are paid to the card on file within ten days.",
        ],
    )
    assert says > other
    assert reader.score("anything", []) == []
    # a question of any length and a section of any size: one logit each, the pair cut to fit
    out = reader.score("how do I rotate a key? " * 200, ["Keys\n\nRoll it.", "x " * 20000])
    assert len(out) == 2 and all(np.isfinite(out))


@pytest.mark.skipif(not SHIPS, reason="the trained reader does not ship here")
def test_the_decision_reads_the_reader_where_its_model_ships(tmp_path, examples_db, local_embedder):
    searcher = Engine(examples_db, local_embedder).loaded().searcher
    question = "How many times is a failed webhook retried, and over how long?"
    vec = local_embedder.embed_query(question)
    hits = searcher.search(question, vec, k=10)
    reader = score.trained()
    assert reader is not None
    read = decide.signals(question, vec, hits, searcher, reader).read
    sections = [decide.section_text(h) for h in hits[: score.READ_K]]
    assert read == max(reader.score(question, sections))
    assert decide.signals(question, vec, hits, searcher).read == 0.0  # not read: not asked
    # a decision file with a model weighing the reader: used where the reader runs, else today's
    base = decide.load_models()[local_embedder.name]
    with_reader = decide.Model(
        (*base.features, decide.READ),
        np.append(base.mean, 0.0),
        np.append(base.scale, 1.0),
        np.append(base.weights, 1.0),
        base.bias,
        base.bands,
    )
    models = {
        local_embedder.name: base,
        f"{local_embedder.name}+{decide.READ}": with_reader,
        "lexical": decide.load_models()["lexical"],
    }
    path = tmp_path / "decision.json"
    path.write_text(json.dumps({"models": {n: m.to_dict() for n, m in models.items()}}))
    name, model = decide.model_for(local_embedder.name, True, path, reader=True)
    assert name.endswith("+read") and decide.READ in model.features
    assert decide.model_for(local_embedder.name, True, path)[0] == local_embedder.name
    assert decide.model_for(local_embedder.name, False, path, reader=True)[0] == "lexical"
