"""What Claude reads (router/context.py), exact things asked exactly (router/exact.py) and a second
look (router/second_look.py), on the example docs, with the real anthropic client against the
Messages API stand-in."""

import anthropic
import pytest

from index.search import tokenize
from router import context, exact, rendered, second_look, units
from router.answer import ANSWER, PARTIAL
from router.engine import Engine
from router.pipeline import Pipeline
from tests.standins.claude import OVERLOADED, FakeClaude, estimate_tokens, prompt_parts

MODELS = {
    "condense": "claude-haiku-4-5",
    "answer": "claude-sonnet-5-5",
    "check": "claude-haiku-4-5",
}


def pipeline(db, embedder, stub=None, budget=context.BUDGET):
    client = None
    if stub is not None:
        client = anthropic.Anthropic(api_key="test", base_url=stub.url, max_retries=0)
    engine = Engine(db, embedder, client, "claude-haiku-4-5")
    return Pipeline(engine, client, MODELS, "https://docs.example.com", budget=budget)


# -- packing -------------------------------------------------------------------------------------


def test_chunks_of_one_section_merge_in_file_order_overlaps_once():
    a = {"start": 0, "end": 10, "text": "0123456789"}
    b = {"start": 7, "end": 15, "text": "789abcdef"[:8]}
    c = {"start": 17, "end": 20, "text": "xyz"}
    assert context.merged([c, b, a]) == "0123456789abcde\n\nxyz"
    assert context.merged([a, {"start": 2, "end": 5, "text": "234"}]) == "0123456789"


def test_a_taste_cut_short_ends_at_a_sentence_or_a_line():
    text = "The `lifespan` parameter of the app takes a context manager. It runs at startup."
    assert units.whole_sentences(text, 70) == text.split(" It runs")[0]
    assert units.whole_sentences(text, 20) == text.split(" It runs")[0]  # never a fragment
    assert units.whole_sentences("a line\nand another line", 12) == "a line"
    assert units.whole_sentences(text, 500) == text


def test_a_hard_wrapped_paragraph_is_tasted_by_sentences_and_items():
    text = (
        "If you use this approach, you must move all other files such\n"
        "as the ignore file into it. A second sentence, wrapped\ntoo.\n"
        "- an item that goes on\n  over two lines.\n- another item"
    )
    assert context.units(text, 10) == [
        "If you use this approach, you must move all other files such\nas the ignore file into it.",
        "A second sentence, wrapped\ntoo.",
        "- an item that goes on\n  over two lines.",
        "- another item",
    ]


def test_a_table_row_is_a_piece_whole_whatever_its_length():
    """A chunk that starts inside a table has no header to read its rows by: a row cut at a
    sentence end would be a fragment ("| `403` | No |") that names no option."""
    row = "| `rejectStatusCode` | The code of a refused request. Use 403 or 404. | `403` | No |"
    text = f"{row}\n{row.replace('rejectStatusCode', 'ipStrategy')}"
    assert context.units(text, 10) == text.split("\n")


def test_a_taste_is_what_says_the_question_never_markup_or_a_code_block_cut(
    examples_db, local_embedder
):
    docs, _ = candidates(examples_db, local_embedder, "rotate a key")
    code = "```bash\n" + "tide keys roll --expires-in 24h\n" * 20 + "```"
    text = f'!!! tip "Rolling"\n\n{code}\n\nRoll the key from the CLI to rotate it.\n\n1.'
    chunk = {"text": text, "heading_path": ["Keys"]}
    terms = tokenize("rotate a key")
    taste = context.excerpt([chunk], terms, [], docs.searcher.bm25, 30)
    assert taste == "Roll the key from the CLI to rotate it."
    # a code block is cut only when nothing else stands for the section, and closed again
    cut = context.excerpt([{**chunk, "text": code}], terms, [], docs.searcher.bm25, 30)
    assert cut.startswith("```bash\ntide keys roll") and cut.endswith("\n```")
    assert cut.count("```") == 2


def candidates(db, embedder, question: str):
    """(the examples' corpus, the question's fused top 40 chunks: what a read packs)."""
    p = pipeline(db, embedder)
    docs = p.engine.corpus()
    vec, _ = p.engine.embed_query(question)
    return docs, docs.router.route(question, vec, k=40, wait=False).hits


def test_a_read_holds_each_section_once_best_first_within_its_budget(examples_db, local_embedder):
    question = "What does the delivery object hold?"
    docs, hits = candidates(examples_db, local_embedder, question)
    for budget in (400, 1500, 6000):
        reads = context.read(hits, docs, question, budget, exact.Asked([], {}))
        labels = [r.label for r in reads]
        assert len(labels) == len(set(labels))  # a section's chunks merged, never repeated
        assert sum(r.tokens for r in reads) <= budget or len(reads) == 1
        first_of = {h.section: n for n, h in reversed(list(enumerate(hits)))}
        ranks = [next(first_of[h.section] for h in hits if h.chunk["id"] == r.key) for r in reads]
        assert ranks == sorted(ranks)  # in the search's order
    # the delivery object's section is split in five chunks: read whole when the budget allows
    whole = context.read(hits, docs, question, 6000, exact.Asked([], {}))
    delivery = next(r for r in whole if r.label.endswith("The delivery object"))
    assert delivery.part == "whole" and len(delivery.chunk_ids) == 5
    assert delivery.label == "Deliveries API reference › The delivery object"


def test_a_taste_of_a_long_table_is_its_row_that_writes_the_code(examples_db, local_embedder):
    docs, hits = candidates(examples_db, local_embedder, "what does TW-1016 mean")
    [table] = [h for h in hits if h.chunk["heading_path"][-1] == "All error codes"][:1]
    taste = context.excerpt([table.chunk], [], ["TW-1016"], docs.searcher.bm25, 80)
    assert taste.splitlines()[0].startswith("| Code |") or "TW-1016" in taste.splitlines()[0]
    assert taste.splitlines()[-1].startswith("| `TW-1016` | 410 |")


def test_a_taste_of_a_wide_table_is_the_row_not_its_header(examples_db, local_embedder):
    """Where a row and the table's header do not both fit in the share, the row stands alone:
    a header cut from its row says nothing."""
    docs, _ = candidates(examples_db, local_embedder, "compression")
    head = "| Name | Description | Type | Default |\n|:--|:-----|:-|:-|\n"
    rows = [
        f"| `{name}` | {'Option of the reader that sets what it does with the file. ' * 3}"
        f"{extra} | `VARCHAR` | `auto` |"
        for name, extra in [
            ("delim", "The delimiter of the columns."),
            ("compression", "The compression type for the file, gzip or zstd."),
            ("header", "Whether the file has a header line."),
        ]
    ]
    chunk = {"text": head + "\n".join(rows), "heading_path": ["Parameters"]}
    terms = tokenize("is there an option to tell it the file is compressed with gzip")
    taste = context.excerpt([chunk], terms, [], docs.searcher.bm25, 60)
    assert "| Name |" not in taste and taste.startswith("| `compression` |")
    # with room for both, the row keeps the header that names its columns
    roomy = context.excerpt([chunk], terms, [], docs.searcher.bm25, 120)
    assert roomy.startswith("| Name |") and roomy.splitlines()[-1].startswith("| `compression` |")


def test_a_row_is_read_without_its_in_page_anchor(examples_db, local_embedder):
    """An option table's anchor (`<a id href="#…" title>` in every row) is read as its text, so a
    row's taste is its words; code and links to other pages stay as written."""
    docs, _ = candidates(examples_db, local_embedder, "compression")
    anchor = '<a id="opt-{0}" href="#opt-{0}" title="#opt-{0}">`{0}`</a>'
    rows = [
        f"| {anchor.format(name)} | {'Sets what the reader does with the file. ' * 2}{extra} |"
        for name, extra in [
            ("delim", "The delimiter of the columns."),
            ("compression", "The compression type for the file, gzip or zstd."),
        ]
    ]
    text = '<a id="options"></a>\n| Option | Description |\n|:--|:--|\n' + "\n".join(rows)
    terms = tokenize("which option sets the delimiter of the columns")
    chunk = {"text": text, "heading_path": ["Parameters"]}
    taste = context.excerpt([chunk], terms, [], docs.searcher.bm25, 40)
    assert taste == rows[0].replace(anchor.format("delim"), "`delim`")
    kept = 'See <a href="https://x.io/a">the guide</a> or `<a href="#b">b</a>`.'
    fence = '```html\n<a id="k">k</a>\n```'
    assert rendered.shown(f"{kept}\n{fence}") == f"{kept}\n{fence}"
    assert rendered.shown(text).splitlines()[0] == "| Option | Description |"


def test_a_rows_alignment_padding_is_read_as_one_space():
    """Aligned tables pad every cell; Claude reads a row as the rendered table shows it, while
    code spans, fenced code and prose keep their spaces."""
    table = "| Name     | Default   |\n|----------|-----------|\n| `a  b`   | `x`       |"
    fence = "```\n| kept   | as is |\n```"
    prose = "A sentence  with two spaces."
    assert rendered.shown(f"{prose}\n{table}\n{fence}").split("\n") == [
        prose,
        "| Name | Default |",
        "|----------|-----------|",
        "| `a  b` | `x` |",
        *fence.split("\n"),
    ]


# -- identifiers ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "question, names",
    [
        ("what does error TW-1016 mean?", ["TW-1016"]),
        ("How do I rotate an API key?", []),
        ("Why does --dry-run fail on GET /v2/endpoints/{id}?", ["--dry-run", "/v2/endpoints/{id}"]),
        ("set max_retries in config.toml, e.g. to 3", ["max_retries", "config.toml"]),
        ("Use `tide keys roll` with BackgroundTasks?", ["tide keys roll", "BackgroundTasks"]),
        ("Upgrade to 0.115.2 broke it, see https://x.io/a and evt_8f3k2a9q", []),
        ("It fails.\n\n```\nmax_retries=3\n```\n\nAny idea why?", []),
        # a flag's value is the asker's; a word glued to code is read as that code
        (
            "What is the `chezmoi.yaml` equivalent of `--source ~/foo/bar`?",
            ["chezmoi.yaml", "--source"],
        ),
        ("Task `tools`-dependencies", ["tools"]),
    ],
)
def test_identifiers_are_told_by_their_shape(question, names):
    assert exact.identifiers(question) == names


def test_an_identifier_is_held_only_as_a_whole_name():
    assert exact.holds("fails with `TW-1016` (event outside)", "tw-1016")
    assert not exact.holds("code TW-10160 here", "TW-1016")
    assert exact.settle(ANSWER, "", ["TW-1016"], ["| `TW-1001` | 401 |"])[0] == PARTIAL
    assert exact.settle(ANSWER, "", ["TW-1016"], ["| `TW-1016` | 410 |"]) == (ANSWER, "", "")


def test_a_name_the_docs_inflect_otherwise_is_held_where_a_quote_writes_theirs():
    """ "traefik.enabled" asked where the docs only write "traefik.enable": a quote of theirs
    holds it; never a number changed ("TW-1010" for "TW-1016")."""
    row = "| `traefik.enable` | Tell Traefik to consider the container or not. |"
    asked = ["traefik.enabled"]
    assert exact.settle(ANSWER, "", asked, [row], unwritten=asked) == (ANSWER, "", "")
    assert exact.settle(ANSWER, "", asked, [row])[0] == PARTIAL  # the docs write it as asked
    code = ["TW-1016"]
    assert exact.settle(ANSWER, "", code, ["| `TW-1010` | 409 |"], unwritten=code)[0] == PARTIAL


def test_a_sections_chunk_that_writes_the_asked_name_is_read_not_its_neighbours(
    examples_db, local_embedder
):
    """A section's candidate may be the chunk beside the one that writes what was asked: that
    one joins it, first of it, and the taste shows the piece that writes the name."""
    question = "How do I configure retries for deliveries?"
    docs, hits = candidates(examples_db, local_embedder, question)
    [delivery] = [h for h in hits if h.chunk["heading_path"][-1] == "The delivery object"]
    assert not exact.holds(delivery.chunk["text"], "replay_id")
    asked = exact.named("replay_id", docs)
    joined = exact.joined(hits, docs, asked)
    before = joined[joined.index(delivery) - 1]
    assert before.section == delivery.section and exact.holds(before.chunk["text"], "replay_id")
    ranked = [h.section for h in hits]
    assert list(dict.fromkeys(h.section for h in joined)) == list(dict.fromkeys(ranked))
    assert exact.joined(hits, docs, exact.Asked([], {})) == hits
    [read] = [
        r for r in context.read(hits, docs, question, 3500, asked) if r.section == delivery.section
    ]
    assert read.part == "taste" and exact.holds(read.text, "replay_id")
    unasked = context.read(hits, docs, question, 3500, exact.Asked([], {}))
    assert not any(
        exact.holds(r.text, "replay_id") for r in unasked if r.section == delivery.section
    )


def test_a_row_naming_one_asked_name_does_not_stand_for_another(examples_db, local_embedder):
    """Two names asked, a section's candidate writing one of them: the chunk of that section
    that writes the other joins it too."""
    question = "How do I configure retries for deliveries?"
    docs, hits = candidates(examples_db, local_embedder, question)
    [delivery] = [h for h in hits if h.chunk["heading_path"][-1] == "The delivery object"]
    assert exact.holds(delivery.chunk["text"], "next_attempt_at")
    asked = exact.named("next_attempt_at replay_id", docs)
    assert asked.names == ["next_attempt_at", "replay_id"]
    mine = [h for h in exact.joined(hits, docs, asked) if h.section == delivery.section]
    assert any(exact.holds(h.chunk["text"], "replay_id") for h in mine)


@pytest.mark.parametrize("question", ["what does error TW-1016 mean?", "what does TW-1016 mean"])
def test_an_error_code_is_quoted_by_the_row_that_holds_it(examples_db, local_embedder, question):
    ans = pipeline(examples_db, local_embedder).answer(question)
    assert ans.decision in (ANSWER, PARTIAL)
    quotes = [c.cited_text for c in ans.citations if c.verified]
    assert quotes and all("TW-1016" in q for q in quotes)
    assert any(q.startswith("| `TW-1016` | 410 | Outside retention window") for q in quotes)


def test_how_to_rotate_an_api_key_quotes_the_cli_that_rolls_it(examples_db, local_embedder):
    ans = pipeline(examples_db, local_embedder).answer("How do I rotate an API key?")
    assert ans.decision == ANSWER
    quotes = [c.cited_text for c in ans.citations if c.verified]
    assert any("tide keys roll" in q for q in quotes)


def test_an_answer_missing_the_asked_identifier_is_never_a_plain_answer(
    examples_db, local_embedder, stub
):
    # Claude's answer cites the first result, which does not write the code asked about
    stub.route("/v1/messages", FakeClaude(answer=[("It means the key is missing.", [(0, 0, 1)])]))
    ans = pipeline(examples_db, local_embedder, stub).answer("What does TW-9999 mean?")
    [cit] = ans.citations
    assert cit.verified and "TW-9999" not in cit.cited_text  # the docs never write it
    assert ans.decision == PARTIAL and "`TW-9999`" in ans.caveat


# -- a second look -------------------------------------------------------------------------------


def test_a_second_look_searches_again_and_its_sections_are_cited(examples_db, local_embedder, stub):
    # Claude calls the search tool once, then cites the first block of the tool's first result
    fake = FakeClaude(
        looks=["tide keys roll expires-in"],
        answer=[("Roll it with the CLI and a grace period.", [(-1, 0, 1)])],
    )
    stub.route("/v1/messages", fake)
    budget = context.Budget(tokens=600, looks=2)
    ans = pipeline(examples_db, local_embedder, stub, budget).answer("How do I rotate an API key?")
    assert fake.refused == []  # every request was one the API takes
    first, second = fake.calls("answer")
    assert [t["name"] for t in first["tools"]] == ["search_docs"] and "tool_choice" not in first
    assert second["messages"][1]["role"] == "assistant"
    [result] = second["messages"][2]["content"]
    assert result["type"] == "tool_result" and result["tool_use_id"] == "toolu_stub1"
    assert all(b["type"] == "search_result" for b in result["content"])
    [look] = ans.trace.route["looks"]
    sections = [r["section"] for r in look["read"]]
    assert look["query"] == "tide keys roll expires-in" and sections
    # the citation points into the tool's results: checked against them, its source listed
    assert ans.decision in (ANSWER, PARTIAL) and ans.citations[0].verified
    assert ans.sources[0].label in sections
    assert fake.refused == []  # every request was one the API takes


def test_a_look_reads_more_of_a_section_the_first_read_tasted(examples_db, local_embedder, stub):
    """The first read holds a taste of "Rolling a key from the CLI"; a look asking for it reads
    it deep, sent again as the source it was."""
    fake = FakeClaude(looks=["roll a key from the CLI"])
    stub.route("/v1/messages", fake)
    budget = context.Budget(tokens=600, looks=1)
    pipeline(examples_db, local_embedder, stub, budget).answer("How do I rotate an API key?")
    first, second = fake.calls("answer")
    tasted = {
        r["title"]: r for r in first["messages"][0]["content"] if r["type"] == "search_result"
    }
    [result] = second["messages"][2]["content"]
    again = [r for r in result["content"] if r["title"] in tasted]
    assert again, "the look sent no section the first read had tasted"
    for r in again:
        before = tasted[r["title"]]
        assert r["source"] == before["source"]  # the same source, numbered as it was
        assert any(b not in before["content"] for b in r["content"])  # and more of it


def test_a_look_shows_every_identifier_its_query_names(examples_db, local_embedder):
    """A look's query is the reader's own: a name in it is shown where the docs write it, though
    as a question's, among as many other words, it would not count as asked (exact.asked)."""
    query = (
        "how do deliveries retry, how many attempts, and what backoff schedule is used, replay_id"
    )
    p = pipeline(examples_db, local_embedder)
    docs = p.engine.corpus()
    assert exact.asked(query, docs).names == [] and exact.named(query, docs).names == ["replay_id"]
    reads = second_look.searching(docs, p.engine.embed_query, context.DEPTH, 800)(query)
    assert any(exact.holds(r.text, "replay_id") for r in reads)
    _, hits = candidates(examples_db, local_embedder, query)
    unnamed = context.read(hits[: context.DEPTH], docs, query, 800, exact.Asked([], {}))
    assert not any(exact.holds(r.text, "replay_id") for r in unnamed)


def test_each_round_reads_the_one_before_from_the_prompt_cache(examples_db, local_embedder, stub):
    """The turns a look sends again end cached prefixes, so each round after the first reads
    what the one before sent from the cache, within the API's four breakpoints."""
    fake = FakeClaude(looks=["tide keys roll", "grace period"])
    stub.route("/v1/messages", fake)
    budget = context.Budget(tokens=600, looks=2)
    ans = pipeline(examples_db, local_embedder, stub, budget).answer("How do I rotate an API key?")
    calls = fake.calls("answer")
    assert len(calls) == 3 and fake.refused == []
    sent = [[estimate_tokens(p) for p, _ in prompt_parts(body)] for body in calls]
    ends = [[i for i, (_, b) in enumerate(prompt_parts(body)) if b] for body in calls]
    # the rules where long enough and the first turn, then the last two turns too, but in the
    # last round (no look left) the newest turn, which no round reads
    first = len(ends[0])
    assert [len(e) for e in ends] == [first, first + 1, first + 1]
    assert calls[-1]["tool_choice"] == {"type": "none"}
    # each round reads at least the prompt of the one before (its tool_choice part aside)
    read = ans.trace.usage["answer"]["cache_read_input_tokens"]
    assert read >= sum(sent[0][:-1]) + sum(sent[1][:-1])


def test_looks_are_bounded_then_the_answer_is_written(examples_db, local_embedder, stub):
    fake = FakeClaude(looks=["a", "b", "c", "d"])
    stub.route("/v1/messages", fake)
    budget = context.Budget(tokens=600, looks=2)
    ans = pipeline(examples_db, local_embedder, stub, budget).answer("How do I rotate an API key?")
    calls = fake.calls("answer")
    assert len(calls) == 3 and calls[-1]["tool_choice"] == {"type": "none"}
    assert len(ans.trace.route["looks"]) == 2 and fake.refused == []


GAP_ANSWER = [
    ("Roll it with the CLI.", [(0, 0, 1)]),
    " The docs don't cover how long the old key keeps working.",
]


def test_a_gap_named_before_any_look_is_looked_for_first(examples_db, local_embedder, stub):
    """Claude names a gap without searching: it is asked once to search first, and the answer
    it writes after the look is the one given."""
    fake = FakeClaude(looks=[None, "grace period old key"], answer=GAP_ANSWER)
    stub.route("/v1/messages", fake)
    budget = context.Budget(tokens=600, looks=2)
    ans = pipeline(examples_db, local_embedder, stub, budget).answer("How do I rotate an API key?")
    first, nudge, written = fake.calls("answer")
    assert "tool_choice" not in nudge and nudge["messages"][1]["role"] == "assistant"
    [asked] = nudge["messages"][2]["content"]
    assert asked["type"] == "text" and "without searching" in asked["text"]
    assert written["messages"][-1]["content"][0]["type"] == "tool_result"
    [look] = ans.trace.route["looks"]
    assert look["query"] == "grace period old key"
    assert ans.text.count("Roll it with the CLI.") == 1 and fake.refused == []


def test_a_gap_is_not_looked_for_again_after_a_look_or_when_none_is_left(
    examples_db, local_embedder, stub
):
    fake = FakeClaude(looks=["grace period"], answer=GAP_ANSWER)
    stub.route("/v1/messages", fake)
    budget = context.Budget(tokens=600, looks=2)
    pipeline(examples_db, local_embedder, stub, budget).answer("How do I rotate an API key?")
    assert len(fake.calls("answer")) == 2  # the look, then the answer with its gap
    fake = FakeClaude(answer=GAP_ANSWER)
    stub.route("/v1/messages", fake)
    budget = context.Budget(tokens=600, looks=0)
    ans = pipeline(examples_db, local_embedder, stub, budget).answer("How do I rotate an API key?")
    assert len(fake.calls("answer")) == 1 and ans.decision == PARTIAL


def test_the_answer_before_the_nudge_stands_when_the_next_one_fails(
    examples_db, local_embedder, stub
):
    fake = FakeClaude(looks=[None, "grace period"], answer=GAP_ANSWER)
    fake.faults_for["answer"] = [None] + [OVERLOADED] * 5  # every answer after the first fails
    stub.route("/v1/messages", fake)
    budget = context.Budget(tokens=600, looks=2)
    ans = pipeline(examples_db, local_embedder, stub, budget).answer("How do I rotate an API key?")
    assert ans.decision == PARTIAL and "Roll it with the CLI." in ans.text
    assert ans.trace.offline is False and "looks" not in ans.trace.route


def test_no_tool_is_offered_without_looks(examples_db, local_embedder, stub):
    fake = FakeClaude()
    stub.route("/v1/messages", fake)
    budget = context.Budget(looks=0)
    pipeline(examples_db, local_embedder, stub, budget).answer("How do I rotate an API key?")
    assert "tools" not in fake.calls("answer")[0]


# -- the stand-in keeps the API's rules for tools ------------------------------------------------


def test_the_stand_in_refuses_tool_turns_the_api_refuses(stub):
    fake = FakeClaude()
    stub.route("/v1/messages", fake)
    client = anthropic.Anthropic(api_key="test", base_url=stub.url, max_retries=0)
    tool = {"name": "search_docs", "input_schema": {"type": "object", "properties": {}}}
    call = {"type": "tool_use", "id": "toolu_1", "name": "search_docs", "input": {}}
    turns = [
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": [call]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_2"}]},
    ]
    thought = {"type": "thinking", "thinking": "changed", "signature": "forged"}
    bad: list[dict] = [
        {"messages": turns, "tools": [tool]},  # answers another call
        {"messages": turns[:2] + [{"role": "user", "content": "x"}]},  # no tools defined
        {
            "messages": [turns[0], {"role": "assistant", "content": [thought]}, turns[0]],
            "tools": [tool],
        },  # a thinking block passed back changed
    ]
    for extra in bad:
        with pytest.raises(anthropic.BadRequestError):
            client.messages.create(model="claude-sonnet-5-5", max_tokens=10, **extra)
