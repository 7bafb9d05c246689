"""What the Slack runtime needs of fieldguide, declared here so the runtime does not import the
application object that starts it (bot/app.py's FieldGuide is one: `FieldGuide.serve`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from index.embedders import Embedder
    from router.answer import Answer, Progress
    from router.claude import MessagesClient
    from router.engine import Engine, Scope

    from ..asking import Asking
    from ..scopes import Scopes
    from ..settings import Settings
    from ..state import State


class Guide(Protocol):
    settings: Settings

    @property
    def embedder(self) -> Embedder: ...

    @property
    def anthropic(self) -> MessagesClient | None: ...

    @property
    def engine(self) -> Engine: ...

    @property
    def state(self) -> State: ...

    @property
    def scopes(self) -> Scopes | None: ...

    @property
    def asking(self) -> Asking:
        """Every door's way in: small talk, the line of questions (bot/asking.py)."""
        ...

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
        """Answer and record the answer in the audit trail (`before_record` called first)."""
        ...

    def docs(self) -> list[dict]:
        """Every doc with its owners' and freshness fields (index.store.doc_records)."""
        ...

    def owners(self) -> tuple[dict[str, str], dict[str, str]]:
        """({doc: owner}, {intent: owner}) of the index (index.store.load_owners)."""
        ...

    def index_status(self) -> tuple[int, int, dict | None]:
        """(docs, chunks, the last index run: index.store.run_status) of the index."""
        ...
