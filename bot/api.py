"""fieldguide as a Python library: what each `fieldguide` command does, as a function that returns
its result and prints nothing (bot/cli.py prints it).

    from bot import api

    api.index("examples/docs", "docs.db")
    ans = api.ask("How many times is a failed webhook retried?", "docs.db")
    print(ans.decision, ans.text, [s.label for s in ans.sources])

Each function opens fieldguide (bot/app.py's `FieldGuide`) on `settings` (default:
`Settings.load()`, the environment then .env) and `db`, the index file (default: FIELDGUIDE_DB),
for that call, and closes it before it returns: nothing is kept between calls. A program that
asks many questions keeps its own, and owns it: `with FieldGuide.open(settings, db) as guide:
guide.ask(...)` (the index loaded and the intents' examples embedded once). Errors are
exceptions whose message is fit to show: ValueError (a bad question, eval set or scope),
index.indexer.IndexError_ (no docs, another docs source), index.store.IndexMissing and
ModelMismatch, index.embedding.EmbeddingError, sqlite3.DatabaseError, and with
FIELDGUIDE_DATABASE_URL index.pg.FleetError.

`progress`, where taken, is told how long work goes: `progress(stage, total)` as a counted stage
starts ("Embedding" texts, "Scoring" or "Asking" questions) returns what is called with each step's
count; `progress(line, 0)` is news without a count ("Reading examples ...").
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .app import FieldGuide
from .indexing import docs_source, fleet_reindex_lock, index_docs
from .settings import Settings
from .wiring import embedder_for

if TYPE_CHECKING:
    from bot.evaluation.judge import Judge
    from bot.evaluation.retrieval import Question
    from bot.gaps import Topic
    from index.embedders import Embedder
    from index.indexer import RunSummary
    from router.answer import Answer
    from router.policy import RouteDecision

    from .asking import Reply
    from .indexing import DocsSource

Progress = Callable[[str, int], Callable[[int], object]]
EVAL_WORK = Path(".fieldguide/eval")  # the eval sets' indexes
GAPS_ROWS = 100_000  # audit rows read at most by `gaps` (newest first)
STALE_PERIOD = "30d"  # the answers `stale` counts against a doc by default
RERANKED_NEEDS = "the reranked mode needs VOYAGE_API_KEY (and FIELDGUIDE_RERANK_MODEL)"


def _settings(settings: Settings | None) -> Settings:
    return Settings.load() if settings is None else settings


@contextmanager
def _opened(settings: Settings | None, db: str | Path | None = None) -> Iterator[FieldGuide]:
    """A FieldGuide on these settings and index for one call, closed when it ends."""
    with FieldGuide.open(_settings(settings), db) as guide:
        yield guide


def _stage(progress: Progress | None, name: str, total: int = 0) -> Callable[[int], object] | None:
    return progress(name, total) if progress else None


def _embedding(progress: Progress | None) -> dict[str, Any]:
    """An index run's callbacks, reporting its embedding to `progress` (when there is any)."""
    if progress is None:
        return {}
    steps: list[Callable[[int], object]] = []

    def start(total: int) -> None:
        if total:
            steps.append(progress("Embedding", total))

    return {"on_embed_start": start, "on_embedded": lambda n: steps and steps[-1](n)}


@dataclass
class Indexed:
    """What `index` did: the run's counts (`summary`), the docs source it read and, in a fleet,
    the generation it published ({"generation", "bytes", "stored", "seconds"}; None when not)."""

    summary: RunSummary
    source: DocsSource
    published: dict | None = None
    replayed: list[dict] | None = None  # gap topics asked again (bot/closure.py replay)

    def to_json(self) -> dict:
        out = {"source": self.source.identity, **self.summary.counts()}
        if self.published:
            out["published"] = {k: round(v, 3) for k, v in self.published.items()}
        if self.replayed:
            out["replayed"] = self.replayed
        return out


def index(
    docs: str | Path | None = None,
    db: str | Path | None = None,
    *,
    replace: bool = False,
    settings: Settings | None = None,
    progress: Progress | None = None,
) -> Indexed:
    """Index a folder of markdown docs into `db`, incrementally: only changed text is embedded.
    `docs`: the folder (default: FIELDGUIDE_DOCS, or the repository FIELDGUIDE_DOCS_GIT, pulled
    first). `replace`: index these docs even though the index was built from another source (its
    docs are replaced by these; else index.indexer.SourceMismatch). With FIELDGUIDE_DATABASE_URL
    set, one run at a time across the fleet, published to it. A run that added or changed docs
    asks the open gap topics' questions again (bot/closure.py): `replayed`."""
    with _opened(settings, db) as guide:
        source = docs_source(guide.settings, docs)
        with fleet_reindex_lock(guide.settings):
            summary, published = index_docs(
                guide.settings, source, guide.embedder, replace=replace, **_embedding(progress)
            )
        replayed = None
        if summary.added or summary.changed:  # the open gap topics' questions asked again
            from .closure import replay

            replayed = replay(guide, set(summary.added) | set(summary.changed))
        return Indexed(summary, source, published, replayed)


def intents(db: str | Path | None = None, *, settings: Settings | None = None) -> list[dict]:
    """The intents of the index, by name: {"name", "description", "examples", "docs", "chunks",
    "owner"} each."""
    from index.store import load_intents

    with _opened(settings, db) as guide:
        return load_intents(guide.index)


def draft_intents(
    db: str | Path | None = None, *, settings: Settings | None = None
) -> tuple[str, list[str]]:
    """A draft intents.yaml, and notes on the drafts Claude could not write. Intents that have a
    description keep theirs; the others get one drafted from their headings, by Claude when
    ANTHROPIC_API_KEY is set (FIELDGUIDE_ANSWER_MODEL), else offline."""
    from index.store import chunk_headings, load_intents
    from router.describe import draft_offline, draft_with_claude, intent_headings, to_yaml

    with _opened(settings, db) as guide:
        settings, client = guide.settings, guide.anthropic
        headings = intent_headings(chunk_headings(guide.index))
        drafts, notes = {}, []
        for i in load_intents(guide.index):
            if i["description"]:
                drafts[i["name"]] = {"description": i["description"], "examples": i["examples"]}
            elif client is None:
                drafts[i["name"]] = draft_offline(headings.get(i["name"], []))
            else:
                drafts[i["name"]], note = draft_with_claude(
                    client, settings.answer_model, i["name"], headings.get(i["name"], [])
                )
                notes += [note] if note else []
        source = "offline, from headings" if client is None else f"with {settings.answer_model}"
        return to_yaml(drafts, source), notes


def search(
    question: str, db: str | Path | None = None, *, k: int = 10, settings: Settings | None = None
) -> RouteDecision:
    """Route `question` and search the index; no answer is written. The RouteDecision's `hits`
    are the `k` best chunks (index.search.Hit: `score`, `bm25`, `vector`, and `chunk`, the
    chunk's record), its `to_dict()` the routing (intents and scores, buckets searched)."""
    question = question.strip()
    if not question:
        raise ValueError("the question is empty")
    with _opened(settings, db) as guide:
        return guide.search(question, k=k)


def ask(
    question: str,
    db: str | Path | None = None,
    *,
    history: list[dict] | None = None,
    channel: str | None = None,
    scope: str | None = None,
    settings: Settings | None = None,
) -> Answer:
    """Answer `question` from the docs, offline without ANTHROPIC_API_KEY: a router.answer.Answer
    with its `decision` (ANSWER, PARTIAL or ABSTAIN), `text`, numbered `sources` and checked
    `citations`. `history`: the thread's earlier messages, oldest first, as {"role", "text"}.
    `channel` (a Slack channel id or #name) or `scope` (an entry of FIELDGUIDE_SCOPES): search
    only what that scope holds. The answer is recorded in the audit trail (`audit`). Asked as
    every door asks (`reply`): small talk ("thanks") is an ABSTAIN holding its short reply,
    neither searched nor recorded; bot.asking.Busy when this process has no place for it."""
    return reply(
        question, db, history=history, channel=channel, scope=scope, settings=settings
    ).answer


def reply(
    question: str,
    db: str | Path | None = None,
    *,
    history: list[dict] | None = None,
    channel: str | None = None,
    scope: str | None = None,
    settings: Settings | None = None,
) -> Reply:
    """What `ask` answers, with what kind of small talk the question was (`talk`: None for a
    question): bot/asking.py's Reply, as `fieldguide ask` shows it."""
    with _opened(settings, db) as guide:
        return guide.asking.ask(
            question, client="api", history=history, scope=guide.scope(channel, scope)
        )


def audit(
    db: str | Path | None = None,
    *,
    since: str | None = None,
    decision: str | None = None,
    limit: int = 50,
    settings: Settings | None = None,
) -> list[dict]:
    """The recorded answers, newest first: at most `limit`, only `decision` (ANSWER, PARTIAL or
    ABSTAIN) when given, only those on or after `since` (an ISO date/time, UTC unless it has a
    zone, or a time ago: 30m, 24h, 7d, 2w)."""
    from .since import parse_since

    since = parse_since(since) if since else None
    with _opened(settings, db) as guide:
        return guide.state.list_answers(since, decision, limit)


def audit_stats(
    db: str | Path | None = None, *, since: str | None = None, settings: Settings | None = None
) -> dict:
    """Questions, decisions, feedback, tokens and estimated cost by model (prices:
    FIELDGUIDE_PRICES) of the answers since `since` (as `audit` reads it), as bot/costs.py counts
    them."""
    from .costs import stats
    from .prices import parse_prices
    from .since import parse_since

    with _opened(settings, db) as guide:
        since = parse_since(since) if since else None
        return stats(guide.state.usage_rows(since), parse_prices(guide.settings.prices))


@dataclass
class Gaps:
    """What `gaps` found: the topics (bot.gaps.Topic, biggest first), figures about the
    clustering ({"unanswered", "cut", "silhouette"}) and the audit rows it read."""

    topics: list[Topic]
    info: dict
    rows: list[dict]


def gaps(
    db: str | Path | None = None,
    *,
    since: str | None = None,
    intent: str | None = None,
    settings: Settings | None = None,
) -> Gaps:
    """The questions the docs did not answer well (not in the docs, partial, 👎, handed to a
    person) since `since` (as `audit` reads it), grouped into topics with the nearest doc, its
    intent, owner and link; with `intent` (one of the index's, else ValueError naming them), the
    topics labelled with it, and the rows routed to it or in those topics."""
    from .gaps import top_intent
    from .since import parse_since
    from .topics import gap_topics

    with _opened(settings, db) as guide:
        if intent:
            known = sorted(guide.engine.loaded().searcher.intent_names)
            if intent not in known:
                raise ValueError(
                    f"no intent {intent!r} in {guide.settings.db}: its intents are"
                    f" {', '.join(known) or 'none'}"
                )
        topics, info, rows = gap_topics(guide, parse_since(since) if since else None, intent)
        if intent:  # the intent's questions: routed to it, or in one of its gaps
            mine = {i for t in topics for i in t.ids}
            rows = [r for r in rows if top_intent(r) == intent or r["id"] in mine]
        return Gaps(topics, info, rows)


def stale(
    db: str | Path | None = None, *, since: str | None = None, settings: Settings | None = None
) -> list:
    """The stale docs (bot/owners.py StaleDoc), the most damaging first: answers since `since`
    (default: 30 days) that cited them, those marked 👎 first."""
    from .owners import stale_docs
    from .since import parse_since

    with _opened(settings, db) as guide:
        rows = guide.state.list_answers(parse_since(since or STALE_PERIOD), None, GAPS_ROWS)
        return stale_docs(guide.docs(), rows)


def drafts(db: str | Path | None = None, *, settings: Settings | None = None) -> list[dict]:
    """The doc changes drafted from hand-off replies, newest first (bot/drafts.py)."""
    with _opened(settings, db) as guide:
        return guide.state.loop.drafts()


def eval_index(work: str | Path, set_dir: Path, embedder: Embedder) -> str:
    """Where an eval set's index is kept (`fieldguide eval` and `calibrate` in EVAL_WORK, and the
    benches): named after the set and the embedder."""
    return str(Path(work) / f"{set_dir.resolve().name}-{embedder.name.replace(':', '-')}.db")


def evaluate(
    set_dir: str | Path,
    db: str | Path | None = None,
    *,
    questions: str | Path | None = None,
    modes: list[str] | None = None,
    answers: bool = False,
    offtopic: str | Path | None = None,
    limit: int | None = None,
    seed: int = 0,
    judge: bool = False,
    judge_model: str | None = None,
    settings: Settings | None = None,
    progress: Progress | None = None,
) -> dict:
    """Index an eval set (shared/eval format: `set_dir`/docs and questions.jsonl, or `questions`
    kept elsewhere) incrementally into `db` (default: .fieldguide/eval/SET-EMBEDDER.db) and score
    retrieval and routing on its questions in each of `modes` (default: all of ALL_MODES in
    bot/evaluation/retrieval.py; `reranked` only with VOYAGE_API_KEY). With `answers`, score whole
    answers (the ask path) instead: `limit` answerable questions sampled with `seed` (default:
    all) and the off-topic ones (`offtopic`, default: `set_dir`/offtopic.jsonl if present); with
    `judge` (needs ANTHROPIC_API_KEY) Claude (`judge_model`, default FIELDGUIDE_JUDGE_MODEL) grades
    each answer. Returns every figure, as `fieldguide eval --json` writes them."""
    from bot.evaluation.retrieval import load_questions

    settings = _settings(settings)
    set_dir = Path(set_dir)
    qfile = Path(questions or set_dir / "questions.jsonl")
    if not qfile.is_file() or not (set_dir / "docs").is_dir():
        raise ValueError(f"{set_dir} needs docs/ and questions.jsonl (or --questions FILE)")
    asked = load_questions(qfile)
    if not asked:
        raise ValueError(f"{qfile} holds no questions")
    if "reranked" in (modes or []) and not (settings.voyage_api_key and settings.rerank_model):
        raise ValueError(RERANKED_NEEDS)  # said before the set is indexed
    from router.engine import decision_file

    embedder = embedder_for(settings)
    # by default each set has its own index, kept for the next run; the decision is the one the
    # bot reads (beside FIELDGUIDE_DB), not one beside the set's index
    at = settings.at(db or eval_index(EVAL_WORK, set_dir, embedder))
    with FieldGuide(at, embedder=embedder, decision=decision_file(settings.db)) as guide:
        summary, _ = index_docs(guide.settings, set_dir / "docs", embedder, **_embedding(progress))
        done = f"{summary.chunks} chunks ({summary.embedded} texts embedded now)"
        _stage(progress, f"Index {guide.settings.db}: {done}")
        if answers:
            grader = _judge(guide, judge_model) if judge else None
            off_file = Path(offtopic or set_dir / "offtopic.jsonl")
            return _eval_answers(guide, set_dir, qfile, off_file, limit, seed, grader, progress)
        return _eval_retrieval(guide, set_dir, asked, modes, progress)


def _eval_retrieval(
    guide: FieldGuide,
    set_dir: Path,
    asked: list[Question],
    modes: list[str] | None,
    progress: Progress | None,
) -> dict:
    """`evaluate()`: retrieval and routing scored in each of `modes`."""
    from bot.evaluation.retrieval import ALL_MODES, run_eval

    engine = guide.engine
    loaded = engine.loaded()
    modes = modes or [m for m in ALL_MODES if m != "reranked" or engine.reranker]
    if "reranked" in modes and engine.reranker is None:
        raise ValueError(RERANKED_NEEDS)
    result = run_eval(
        asked,
        loaded.searcher,
        guide.embedder.embed_query,
        modes,
        loaded.router.route,
        bm25_weight=guide.settings.bm25_weight,
        progress=_stage(progress, "Scoring", len(asked) * len(modes)),
    )
    return {
        "set": set_dir.resolve().name,
        **result,
        "embedder": guide.embedder.name,
        "router": "claude" if engine.anthropic is not None else "offline",
        "reranker": engine.reranker.name if engine.reranker else None,
    }


def _judge(guide: FieldGuide, model: str | None) -> Judge:
    """Claude grading answers (`model`, default FIELDGUIDE_JUDGE_MODEL)."""
    from bot.evaluation.judge import Judge

    if guide.anthropic is None:
        raise ValueError("--judge needs ANTHROPIC_API_KEY (Claude grades the answers)")
    settings = guide.settings
    return Judge(guide.anthropic, model or settings.judge_model, settings.timeout)


def _eval_answers(
    guide: FieldGuide,
    set_dir: Path,
    qfile: Path,
    off_file: Path,
    limit: int | None,
    seed: int,
    grader: Judge | None,
    progress: Progress | None,
) -> dict:
    """`evaluate(answers=True)`: the whole ask path on the set's questions and off-topic ones."""
    from bot.evaluation.answers import load_stopwords, run_answers, sample, split_offtopic
    from bot.evaluation.retrieval import load_items

    answerable, offtopic = split_offtopic(load_items(qfile))
    questions = sample(answerable, limit, seed)
    offtopic += load_items(off_file) if off_file.is_file() else []
    pipeline = guide.pipeline  # asked directly: an eval run is not a user's question, not audited
    pipeline.answer("warm up: load the model and the index")
    result = run_answers(
        pipeline.answer,
        questions,
        offtopic,
        load_stopwords(set_dir),
        seed=seed,
        progress=_stage(progress, "Asking", len(questions) + len(offtopic)),
        judge=grader,
    )
    result["summary"] = {
        "set": set_dir.resolve().name,
        "sampled": limit is not None and limit < len(answerable),
        "seed": seed,
        "offline": guide.anthropic is None,
        "embedder": guide.embedder.name,
        "judge_model": grader.model if grader else None,
        **result["summary"],
    }
    return result


def calibrate(
    set_dirs: list[str | Path],
    *,
    write: str | Path | None = None,
    work: str | Path = EVAL_WORK,
    seed: int = 0,
    headings: int | None = None,
    settings: Settings | None = None,
    progress: Progress | None = None,
) -> tuple[str, dict, Path]:
    """Fit the answer decision (router/decide.py) on two eval sets or more, each indexed into
    `work`, and write it to `write` (default: decision.json in the folder of the index,
    FIELDGUIDE_DB, where the engine on that index reads it): (the leave-one-set-out figures as
    markdown, what was written, the path it was written to). `headings` of each set's headings
    (default 150), sampled with `seed`, are read as questions."""
    from bot.evaluation import calibrate as fit
    from router.engine import calibrated_decision

    settings = _settings(settings)
    sets = [Path(d) for d in set_dirs]
    for set_dir in sets:
        if not (set_dir / "questions.jsonl").is_file() or not (set_dir / "docs").is_dir():
            raise ValueError(f"{set_dir} needs docs/ and questions.jsonl")
    if len(sets) < 2:
        raise ValueError("calibrate needs two eval sets or more (one is left out)")
    questions = {d.resolve().name: fit.load_set(d) for d in sets}
    fit.check_sets(questions)  # before anything is indexed or read
    embedder = embedder_for(settings)
    data = {}
    for set_dir in sets:
        name = set_dir.resolve().name
        db = eval_index(work, set_dir, embedder)
        with FieldGuide.open(settings, db, embedder=embedder) as guide:
            index_docs(guide.settings, set_dir / "docs", embedder, **_embedding(progress))
            _stage(progress, f"Reading {name} ...")
            data[name] = fit.corpus_examples(
                name, questions[name], guide.engine, seed, headings or fit.HEADINGS
            )
    report = fit.report(data)
    path = Path(write or calibrated_decision(settings.db))
    path.parent.mkdir(parents=True, exist_ok=True)
    return report, fit.write_models(data, embedder.name, path), path
