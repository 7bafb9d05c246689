"""fieldguide, opened once: `FieldGuide.open(settings)` is the application object every entry point
goes through (bot/api.py's functions, `fieldguide serve`, the Slack listeners); a resource,
closed by `close()` or at the end of `with FieldGuide.open(...) as guide:`.

It owns what a process keeps for its life, each made on first use and then shared: the one
connection to the index file (`index`), the embedder and the Anthropic client, the query engine,
the stateless question path (`pipeline`), the state that outlives an answer (`state`: the audit
trail, claims, limits, the reindex lock), the channel scopes and the line every door's questions
take (`asking`: bot/asking.py). `ask` answers a question and records it in the audit trail, and
`search` searches, each asked again on the new index generation when a reindex takes a chunk it
found; `serve` runs the Slack bot. A command that needs only some of
these opens only those (`fieldguide audit` on a fleet never opens the index).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from index.search import IndexChanged

from .asking import Asking, Line
from .settings import Settings
from .wiring import (
    embedder_for,
    make_anthropic,
    make_engine,
    make_pipeline,
    make_scopes,
    make_state,
)

if TYPE_CHECKING:
    import sqlite_utils

    from bot.scopes import Scopes
    from bot.state import State
    from index.embedders import Embedder
    from router.answer import Answer, Progress
    from router.claude import MessagesClient
    from router.engine import Engine, Scope
    from router.pipeline import Pipeline
    from router.policy import RouteDecision

log = logging.getLogger(__name__)

# times a question or search is asked again when a reindex takes a chunk it found (IndexChanged):
# each time on the newest generation, so only reindexes committing faster than one answer
# exhaust them
INDEX_RETRIES = 3
T = TypeVar("T")


class FieldGuide:
    def __init__(
        self,
        settings: Settings,
        *,
        embedder: Embedder | None = None,
        anthropic: MessagesClient | None = None,
        decision: Path | None = None,
    ):
        """`settings` as they are (`open` applies a --db); `embedder` and `anthropic`: parts
        already made (a test's or a bench's), else made from the settings on first use.
        `decision`: the answer decision's file (default: the calibrated one in the index's
        folder, else the shipped one: router/engine.py's `decision_file`)."""
        self.settings = settings
        self._embedder, self._anthropic = embedder, anthropic
        self.decision = decision
        self._stale: tuple[tuple[int, object], dict[str, str]] | None = None

    @classmethod
    def open(
        cls,
        settings: Settings | None = None,
        db: str | Path | None = None,
        *,
        embedder: Embedder | None = None,
        anthropic: MessagesClient | None = None,
    ) -> FieldGuide:
        """fieldguide on `settings` (default: Settings.load(), the environment then .env), with
        the index at `db` when given (else FIELDGUIDE_DB)."""
        settings = Settings.load() if settings is None else settings
        return cls(settings.at(db), embedder=embedder, anthropic=anthropic)

    def __enter__(self) -> FieldGuide:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def close(self) -> None:
        """Close what was opened (the state's connections, the index's); a FieldGuide is not
        used after. `with FieldGuide.open(...) as guide:` closes it at the block's end."""
        opened = self.__dict__
        if "pipeline" in opened:
            opened["pipeline"].close()
        if "state" in opened:
            opened["state"].close()
        if "index" in opened:
            opened["index"].close()
        for name in ("state", "index", "engine", "pipeline", "scopes", "asking"):
            opened.pop(name, None)

    # -- what it owns, each opened once --------------------------------------------------------

    @cached_property
    def index(self) -> sqlite_utils.Database:
        """The process's connection to the index file (IndexMissing when there is none): the
        engine, the records of the hits, the scopes and the SQLite audit trail read through it.
        A file whose tables a newer fieldguide migrated, the audit trail's included, is refused
        here (index.store.NewerIndex), before any question is answered from it."""
        from index.schema import refuse_newer
        from index.store import open_db

        from .state.sqlite import AUDIT_MIGRATIONS

        db = open_db(self.settings.db, create=False)
        try:
            refuse_newer(db, AUDIT_MIGRATIONS, f"{self.settings.db}'s audit trail")
        except BaseException:
            db.close()
            raise
        return db

    @cached_property
    def embedder(self) -> Embedder:
        return self._embedder or embedder_for(self.settings)

    @cached_property
    def anthropic(self) -> MessagesClient | None:
        """The Anthropic client; None without ANTHROPIC_API_KEY (every Claude step offline)."""
        return self._anthropic if self._anthropic is not None else make_anthropic(self.settings)

    @cached_property
    def engine(self) -> Engine:
        from router.engine import decision_file

        decision = self.decision or decision_file(self.settings.db)
        return make_engine(self.settings, self.embedder, self.anthropic, self.index, decision)

    @cached_property
    def pipeline(self) -> Pipeline:
        """The question's path: it answers and keeps nothing (`ask` records the answer)."""
        return make_pipeline(self.settings, self.engine)

    @cached_property
    def state(self) -> State:
        """PostgreSQL in a fleet (FIELDGUIDE_DATABASE_URL), else the index file and this
        process."""
        return make_state(self.settings, None if self.settings.database_url else self.index)

    @cached_property
    def scopes(self) -> Scopes | None:
        """FIELDGUIDE_SCOPES checked against the index; None when not set."""
        return make_scopes(self.settings, self.index)

    @cached_property
    def asking(self) -> Asking:
        """Every door's way in: small talk, the line of questions, the answer (bot/asking.py)."""
        s = self.settings
        return Asking(self, Line(s.answer_workers, s.answer_queue, s.answer_per_client))

    # -- what it does --------------------------------------------------------------------------

    def on_newest(self, call: Callable[[], T], again: Callable[[], bool] = lambda: True) -> T:
        """`call()`, made again (at most INDEX_RETRIES times, while `again()`) on the newest
        index generation, waiting for it to load, when a reindex committed meanwhile took a chunk
        it found."""
        for attempt in range(INDEX_RETRIES + 1):
            try:
                return call()
            except IndexChanged:
                if attempt == INDEX_RETRIES or not again():
                    raise
                log.info("the index changed while answering; asking again on the new one")
                self.engine.loaded(wait=True)
        raise AssertionError("unreachable")

    def ask(
        self,
        question: str,
        history: list[dict] | None = None,
        context: dict | None = None,
        on_text: Callable[[str], None] | None = None,
        scope: Scope | None = None,
        on_progress: Callable[[Progress], None] | None = None,
        before_record: Callable[[], None] | None = None,
    ) -> Answer:
        """The pipeline's answer (router/pipeline.py), recorded in the audit trail with `context`
        (where it was asked: Slack channel, user, thread, the event's claim keys); its
        `audit_id` set when the record was made. An audit that fails costs the asker nothing.
        `on_progress`: told what the answer is doing (router.answer.Progress). Asked again on the
        new index generation when a reindex takes a chunk it found (`on_newest`), unless words of
        it were already streamed (`on_text`). `before_record`: called just before the record
        (Slack's answer workers hold a stop there, so that an answer recorded is delivered before
        the process exits). A door asks through `asking`."""
        streamed = False

        def sent(delta: str) -> None:
            nonlocal streamed
            streamed = True
            assert on_text is not None
            on_text(delta)

        ans = self.on_newest(
            lambda: self.pipeline.answer(
                question, history, on_text=on_text and sent, scope=scope, on_progress=on_progress
            ),
            lambda: not streamed,
        )
        if ans.sources:
            from .owners import mark_stale

            mark_stale(ans.sources, self.stale_notes())
        if before_record is not None:
            before_record()
        try:
            ans.audit_id = self.state.record_answer(ans, context or {})
        except Exception:  # the audit log must never cost the user an answer
            log.exception("could not record the answer in the audit table")
        return ans

    def docs(self) -> list[dict]:
        """Every doc with its owners' and freshness fields (index.store.doc_records)."""
        from index.store import doc_records

        return doc_records(self.index)

    def stale_notes(self) -> dict[str, str]:
        """doc → why it is stale (bot/owners.py), for the stale docs: read once per generation
        and day, as an answer's sources are marked with it."""
        from datetime import UTC, datetime

        from index.store import generation

        from .owners import stale_notes

        key = (generation(self.index), datetime.now(UTC).date())
        if self._stale is None or self._stale[0] != key:
            self._stale = (key, stale_notes(self.docs()))
        return self._stale[1]

    def owners(self) -> tuple[dict[str, str], dict[str, str]]:
        """({doc: owner}, {intent: owner}): intents.yaml's owners, and a doc's own front-matter
        owner with FIELDGUIDE_DOC_OWNERS=on (index.store.load_owners)."""
        from index.store import load_owners

        return load_owners(self.index, self.settings.honour_doc_owners)

    def index_status(self) -> tuple[int, int, dict | None]:
        """(docs, chunks, the last index run with its failing streak: index.store.run_status)."""
        from index.store import counts, run_status

        return (*counts(self.index), run_status(self.index))

    def scope(self, channel: str | None = None, key: str | None = None) -> Scope | None:
        """The FIELDGUIDE_SCOPES entry of `channel` (an id or #name), or the one under `key`;
        None (everything) when neither is given. A ScopeError when there is no such entry."""
        from .scopes import ScopeError

        if not (channel or key):
            return None
        scopes = self.scopes
        if scopes is None:
            raise ScopeError("--channel and --scope need FIELDGUIDE_SCOPES (a scopes file)")
        if channel:
            return scopes.for_channel(channel)
        assert key is not None
        found = scopes.by_key.get(key) or scopes.by_key.get("#" + key.lstrip("#"))
        if found is None:
            raise ScopeError(
                f"no scope {key!r} in {self.settings.scopes}: it has {', '.join(scopes.by_key)}"
            )
        return found

    def search(self, question: str, k: int = 10, scope: Scope | None = None) -> RouteDecision:
        """The routing decision and the `k` best chunks (inside `scope`: None, everything), on
        the newest index generation (`on_newest`); no answer is written."""
        return self.on_newest(lambda: self.engine.route(question, k=k, scope=scope))

    def serve(self, http: int | None = None, host: str = "0.0.0.0") -> None:
        """The Slack bot (bot/slack/serve.py): Socket Mode, or HTTP on port `http`, until the
        process is stopped; a CannotServe (bot/slack/serve.py) saying why when it cannot
        start."""
        from .slack.serve import serve

        serve(self, http, host)
