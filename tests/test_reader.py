"""The reader (router/reader/score.py) and what the offline answer quotes (issue 45): the reader
loads and scores, the decision reads it where its model ships, and a quoted table never loses a
row without a mark."""

import json
import re

import numpy as np
import pytest

from router import decide
from router.engine import Engine
from router.offline import SKIPPED_ROWS
from router.pipeline import Pipeline
from router.reader import score
from tests.conftest import EXAMPLES


def ask(db: str, embedder, question: str):
    return Pipeline(Engine(db, embedder)).answer(question)


def test_the_late_reader_loads_once_and_scores_a_section_that_says_it_above_one_that_does_not(
    local_embedder,
):
    reader = score.reader_for(local_embedder, "late")
    assert reader is not None
    says, other = reader.score(
        "How long is the grace period when rotating a key?",
        [
            "API keys > Rotating a key\n\nThe old secret keeps working for a grace period of"
            " 24 hours by default when a key is rotated.",
            "Billing > Refunds\n\nRefunds are paid to the card on file within ten days.",
        ],
        lambda word: 1.0,
    )
    assert says > other
    assert reader.score("anything", [], lambda w: 1.0) == []
    # a reader of a form that cannot run here is None: the decision reads today's signals
    assert score.reader_for(object(), "late") is None


def test_without_trained_weights_the_cross_reader_is_absent_not_an_error(tmp_path, monkeypatch):
    monkeypatch.setattr(score, "WEIGHTS", tmp_path / "reader-int8.onnx")
    monkeypatch.setattr(score, "_CROSS", None)
    assert score.reader_for(None, "cross") is None


@pytest.mark.skipif(not score.WEIGHTS.is_file(), reason="the trained reader does not ship here")
def test_the_trained_reader_scores_a_pair_per_section():
    reader = score.trained()
    assert reader is not None and reader is score.trained()  # one per process
    out = reader.score(
        "how do I rotate a key? " * 40, ["Keys\n\nRoll it.", "x " * 2000], lambda w: 1.0
    )
    assert len(out) == 2 and all(isinstance(x, float) for x in out)


def test_the_decision_reads_the_reader_where_its_model_ships(tmp_path, examples_db, local_embedder):
    searcher = Engine(examples_db, local_embedder).loaded().searcher
    question = "How long is the grace period when rotating a key?"
    vec = local_embedder.embed_query(question)
    hits = searcher.search(question, vec, k=10)
    late = score.reader_for(local_embedder, "late")
    s = decide.signals(question, vec, hits, searcher, {"late": late})
    assert s.read is not None and s.late == max(s.read) > 0 and len(s.read) == score.READ_K
    # a decision file with a model that weighs the reader: used where the reader runs
    base = decide.load_models()[local_embedder.name]
    with_late = decide.Model(
        (*base.features, "late"),
        np.append(base.mean, 0.5),
        np.append(base.scale, 0.1),
        np.append(base.weights, 1.0),
        base.bias,
        base.bands,
    )
    models = {local_embedder.name: base, f"{local_embedder.name}+late": with_late}
    models["lexical"] = decide.load_models()["lexical"]
    path = tmp_path / "decision.json"
    path.write_text(json.dumps({"models": {n: m.to_dict() for n, m in models.items()}}))
    name, model = decide.model_for(local_embedder.name, True, path, readers=("late",))
    assert name.endswith("+late") and decide.reader_of(model) == "late"
    assert decide.model_for(local_embedder.name, True, path)[0] == local_embedder.name
    p_read = model.p(s)
    s.late = 0.0
    assert model.p(s) < p_read  # what the reader says moves p
    # the shipped file's model where no reader model ships: today's signals decide
    ans = ask(examples_db, local_embedder, question)
    assert ans.trace.evidence["model"] in decide.load_models()


def table_rows(text: str) -> list[str]:
    return [m.strip() for m in re.findall(r"^> (\|.*\|)\s*$", text, re.M)]


def test_a_quoted_table_keeps_its_rows_or_marks_those_it_skips(examples_db, local_embedder):
    grace = ask(examples_db, local_embedder, "How long is the grace period when rotating a key?")
    rows = table_rows(grace.text)
    assert rows[0].startswith("| Grace period")
    for kept in ("| 1 hour |", "| 24 hours | Default", "| 7 days |"):
        assert any(r.startswith(kept) for r in rows) or SKIPPED_ROWS in rows, grace.text
    retry = ask(examples_db, local_embedder, "What is the retry schedule of a failed delivery?")
    source = (EXAMPLES / "webhooks/delivery-and-retries.md").read_text(encoding="utf-8")
    shown = table_rows(retry.text)
    for before, after in zip(shown, shown[1:], strict=False):
        if SKIPPED_ROWS in (before, after) or before.startswith("|--") or after.startswith("|--"):
            continue
        # two rows shown one after the other stand one after the other in the docs
        assert source.index(after) == source.index(before) + len(before) + 1, retry.text
