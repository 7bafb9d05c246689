"""The offline decision's subject check: a section that is near the question but lacks the word
that names its subject ("the memory tool" answered from a section about tools) abstains."""

import pytest

from index.indexer import index_folder
from router import decide
from router.answer import ABSTAIN, ANSWER, Answer
from router.engine import Engine
from router.pipeline import Pipeline
from tests.conftest import write_docs

DOCS: dict[str, str | bytes] = {
    "tools.md": (
        "# Tool use\n\n## Defining tools\n\nDescribe each tool with a name, a description and an"
        " input schema. Claude calls a tool when it helps answer the user.\n\n## Tool results\n\n"
        "Return each tool result in the next user message, so that Claude can keep working with it"
        " across the turns of a conversation.\n"
    ),
    "tool-choice.md": (
        "# Tool choice\n\nSet tool_choice to auto to let Claude decide whether to call a tool, to"
        " any to make it call one of the tools, or to tool with a name to force that tool.\n"
    ),
    "tool-errors.md": (
        "# Tool errors\n\nWhen a tool fails, return a tool result with is_error set to true and a"
        " message; Claude then tells the user or tries the tool again.\n"
    ),
    "server.md": (
        "# Self-hosting the proxy\n\nRun the proxy on a Linux host with Docker installed. Give the"
        " container 16 GB of memory and four CPU cores, open port 8443, and mount the certificate"
        " directory read-only. Backups are not covered here, and the proxy doesn't restart"
        " itself.\n"
    ),
    "console.md": (
        "# Console\n\n## Workspaces\n\nA workspace groups API keys and members. Create a workspace"
        " in the Console under Settings, then invite members to it.\n\n## Members\n\nDeleted"
        " members lose access at once; a deletion cannot be undone. Delegate billing to an"
        " admin.\n"
    ),
    "streaming.md": (
        "# Streaming\n\nSet stream to true to receive the response as server-sent events, one"
        " content block delta at a time.\n"
    ),
    "errors.md": (
        "# Errors\n\nA 429 error means the rate limit was reached: wait and retry with exponential"
        " backoff.\n"
    ),
    "status.md": (
        "# Status\n\nYesterday's outage of the proxy is over, the status page says; see the"
        " incident report for the difference it made.\n"
    ),
    # other pages, so that a word in one page is rare, as in real docs
    **{
        f"{topic}.md": f"# {topic.title()}\n\nHow {topic} works for every request and response.\n"
        for topic in ("pagination", "versioning", "models", "regions", "billing", "batches")
    },
}


@pytest.fixture(scope="module")
def engine(tmp_path_factory, local_embedder) -> Engine:
    root = tmp_path_factory.mktemp("topic")
    docs = write_docs(root / "docs", DOCS)
    index_folder(root / "t.db", docs, local_embedder)
    return Engine(str(root / "t.db"), local_embedder)


def test_a_near_section_without_the_questions_subject_abstains_and_says_which(engine):
    p = Pipeline(engine)
    # the tool sections are near, but "memory" is only in the self-hosting page
    ans = p.answer("How do I turn on the memory tool for Claude?")
    assert ans.decision == ABSTAIN
    assert ans.evidence["topic_gaps"] == ["memory"]
    assert ans.evidence["topic_share"] >= decide.TOPIC_SHARE
    assert ans.text == (
        "I couldn't find this in the docs, so I won't guess: the closest sections don't mention"
        ' "memory".'
    )
    # the same word, asked where the docs use it, is answered
    assert p.answer("How much memory does the proxy need?").decision != ABSTAIN
    ok = p.answer("How do I force Claude to use a tool?")
    assert ok.decision == ANSWER and "topic_gaps" not in ok.evidence


def test_with_claude_a_topic_gap_leaves_the_decision_to_claude(engine, local_embedder):
    q = "How do I turn on the memory tool for Claude?"
    loaded = engine.loaded()
    vec, _ = engine.embed_query(q)
    hits = loaded.router.route(q, vec, k=10).hits
    english = decide.english_words(local_embedder.model_dir)
    ans = Answer(q, q, ABSTAIN, "")
    strength = decide.evidence(
        q, vec, hits, loaded.searcher.bm25, ans, loaded.searcher, claude=True, english=english
    )
    # something is near: Claude's extraction and answer decide; offline, the gap would abstain
    assert strength == ANSWER and ans.evidence["offline_decision"] == ABSTAIN
    # without the everyday-English vocabulary (Voyage embeddings) the check is off
    assert decide.evidence(q, vec, hits, loaded.searcher.bm25, Answer(q, q, ABSTAIN, "")) != (
        ABSTAIN
    )


def test_a_words_family_is_its_inflections_not_its_lookalikes(engine):
    bm25 = engine.loaded().searcher.bm25
    family = {bm25.vocab[i].decode() for i in decide.word_family("delete", bm25)}
    assert family == {"deleted", "deletion"}  # not "delegate"
    assert {bm25.vocab[i].decode() for i in decide.word_family("deleting", bm25)} == family
    assert decide.word_family("memories", bm25) == decide.word_family("memory", bm25) != []


def test_framing_words_and_acronyms_are_not_a_missing_subject(engine, local_embedder):
    loaded = engine.loaded()
    english = decide.english_words(local_embedder.model_dir)
    near = "How do I force Claude to use a tool?"
    vec, _ = engine.embed_query(near)
    hits = loaded.router.route(near, vec, k=10).hits
    assert all(h.chunk["doc"] != "server.md" for h in hits[:3])
    top = decide.top_terms(hits)
    # "covered" and "doesn't" are in one page only, but they frame a question, not its subject
    for q in (
        "Which tool call is covered when Claude doesn't force a tool?",
        "Which tool call is covered when Claude doesn’t force a tool?",  # as typed in Slack
        "Why does Claude force a tool since yesterday?",  # when, not what
        "Claude says it must force a tool, why?",  # what reported the error, not what it is about
        "What's the difference between forcing a tool and any tool?",  # the tools are the subject
    ):
        assert decide.topic_gaps(q, top, loaded.searcher.bm25, english)[0] == []
    # nor is the kind of help asked for, a word these docs never use ("setup")
    common = decide.english_words(local_embedder.model_dir, decide.COMMON_ENGLISH)
    assert "setup" not in common and loaded.searcher.bm25.vocab.get("setup") is None
    assert (
        decide.topic_gaps("tool choice setup", top, loaded.searcher.bm25, english, common)[0] == []
    )
    gaps, share = decide.topic_gaps("Which tool gets memory?", top, loaded.searcher.bm25, english)
    assert gaps == ["memory"] and share > 0
    # a name the docs know but the top chunks lack (Docker); a short acronym (CPU) may be spelled
    # out in a passage, so it is left out
    q = "How do I force Claude to use a tool in Docker with one CPU?"
    assert decide.absent_names(q, top, loaded.searcher) == ["docker"]


def test_a_contraction_typed_without_its_apostrophe_is_no_unseen_term(engine):
    # "whats" is "what" once stemmed, a stopword no chunk is indexed under: it weighed as much as
    # the rarest name and sank the question's coverage
    p = Pipeline(engine)
    typed = p.answer("whats the tool_choice that forces a tool").evidence["coverage"]
    assert typed == p.answer("what is the tool_choice that forces a tool").evidence["coverage"]


def test_an_uncommon_word_the_docs_never_use_is_a_missing_subject(engine, local_embedder):
    # typed in lowercase, "swarm" is a product's name no capital marks: an everyday word, but an
    # uncommon one that no page uses; "differ" frames a question and is common English
    p = Pipeline(engine)
    ans = p.answer("how do i run the proxy container on docker swarm?")
    assert ans.decision == ABSTAIN and ans.evidence["topic_gaps"] == ["swarm"]
    assert p.answer("how does the proxy differ when run in docker?").decision != ABSTAIN
    loaded = engine.loaded()
    english = decide.english_words(local_embedder.model_dir)
    common = decide.english_words(local_embedder.model_dir, decide.COMMON_ENGLISH)
    assert "differ" in common and "swarm" in english - common
    # without the common words (a caller that has none) the check is as before
    q, bm25 = "how do i run the proxy container on docker swarm?", loaded.searcher.bm25
    assert "swarm" in decide.topic_gaps(q, set(), bm25, english, common)[0]
    assert "swarm" not in decide.topic_gaps(q, set(), bm25, english)[0]
