"""How each `fieldguide` command runs (bot/cli.py declares them): what it prints made safe for a
terminal, its settings loaded, and what the API raises turned into one true line on stderr and an
exit status; progress bars on stderr; and how commands declare their options."""

from __future__ import annotations

import contextlib
import functools
import json
import sqlite3
import sys
from collections.abc import Callable, Iterator
from typing import Any

import click

from index.clean import SafeTerminal
from index.redact import redact, redact_logs

from .api import Progress
from .fleet import fleet_missing
from .settings import Settings, SettingsError
from .since import parse_since


def print_json(obj) -> None:
    print(json.dumps(obj, indent=2, ensure_ascii=False))


def progress_stream():
    """Where progress bars go: the terminal itself, not through `SafeTerminal` (a bar is our own
    text, redrawn with carriage returns and cursor moves that must reach the terminal)."""
    return getattr(sys.stderr, "raw", sys.stderr)


@contextlib.contextmanager
def progress_bars(quiet: bool = False) -> Iterator[Progress]:
    """The API's progress on stderr: a bar for each counted stage (none when stderr is not a tty,
    or `quiet`), closed as the next stage starts; news without a count is a line."""
    from tqdm import tqdm

    bars: list[tqdm] = []

    def stage(name: str, total: int) -> Callable[[int], object]:
        while bars:
            bars.pop().close()
        if not total:
            print(name, file=sys.stderr)
            return lambda n: None
        unit = "text" if name == "Embedding" else "q"
        bar = tqdm(total=total, desc=name, unit=unit, file=progress_stream(), disable=quiet or None)
        bars.append(bar)
        return bar.update

    try:
        yield stage
    finally:
        while bars:
            bars.pop().close()


def guarded(f: Callable[..., int]) -> Callable[..., int]:
    """The command `f(settings, **arguments)` as every command runs: what it prints made safe for
    a terminal (unless it prints JSON), then `run`."""

    @functools.wraps(f)
    def safe(**params: Any) -> int:
        if params.get("as_json") is True:  # for programs: JSON escapes what it must
            return run(f, params)
        # for people: text from questions, docs or the model cannot drive their terminal
        with (
            contextlib.redirect_stdout(SafeTerminal(sys.stdout)),
            contextlib.redirect_stderr(SafeTerminal(sys.stderr)),
        ):
            return run(f, params)

    return safe


def run(f: Callable[..., int], params: dict[str, Any]) -> int:
    """`f` given the settings (doctor is given the SettingsError when they cannot be loaded); what
    the API raises becomes one line on stderr and exit 2, an interrupt exit 130."""
    from index.embedders import EmbeddingError
    from index.search import IndexChanged
    from index.store import IndexMissing, ModelMismatch

    try:
        settings = Settings.load()
    except SettingsError as e:
        if f.__name__ != "doctor":
            print(f"fieldguide: {e}", file=sys.stderr)
            return 2
        return f(e, **params)
    redact_logs(*settings.urls())  # no log line shows a URL's password
    if (missing := fleet_missing(settings.database_url)) and f.__name__ != "doctor":
        print(f"fieldguide: {missing}", file=sys.stderr)
        return 2
    fleet_errors: tuple[type[Exception], ...] = ()  # psycopg is loaded only in fleet mode
    if settings.database_url and not missing:
        from index.pg import FleetError

        fleet_errors = (FleetError,)
    try:
        return f(settings, **params)
    except indexing_errors() + (
        IndexMissing,
        ModelMismatch,
        EmbeddingError,
        IndexChanged,
        ValueError,
    ) as e:
        print(f"fieldguide: {e}", file=sys.stderr)
        return 2
    except fleet_errors as e:
        print(f"fieldguide: {redact(str(e), *settings.urls())}", file=sys.stderr)
        return 2
    except sqlite3.DatabaseError as e:
        db = settings.at(params.get("db")).db
        print(f"fieldguide: {database_error(db, e)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(
            "fieldguide: interrupted; the index still holds its last complete run", file=sys.stderr
        )
        return 130


def indexing_errors() -> tuple[type[Exception], ...]:
    """The indexer's errors, when it was loaded (a command that indexes): a question does not
    load the indexer only to name an error it cannot raise. Called as an exception is matched."""
    indexer = sys.modules.get("index.indexer")
    return (indexer.IndexError_,) if indexer else ()


def database_error(db: str, e: sqlite3.DatabaseError) -> str:
    """What went wrong with the index file, truthfully: a write that failed (full disk, read-only
    file or folder, locked) leaves the index as it was, and removing it would throw away a good
    index and its embeddings; only a file that is not an index, or a damaged one, needs
    rebuilding."""
    code = getattr(e, "sqlite_errorname", "") or ""
    if code == "SQLITE_FULL":
        return (
            f"the disk is full (or a file size limit was hit) writing {db}: the index is unchanged"
        )
    if code.startswith("SQLITE_READONLY"):
        what = "its folder is" if code == "SQLITE_READONLY_DIRECTORY" else "the file is"
        return f"{db} cannot be written ({what} read-only): the index is unchanged"
    if code.startswith(("SQLITE_BUSY", "SQLITE_LOCKED")):
        return f"{db} is locked by another process (a reindex?): the index is unchanged; try again"
    if code == "SQLITE_IOERR_WRITE":
        return (
            f"writing {db} failed (a full disk, a file size limit or a disk fault): the index is"
            " unchanged"
        )
    if code.startswith("SQLITE_IOERR"):
        return f"disk error on {db} ({e}): the index is unchanged"
    if code.startswith("SQLITE_CANTOPEN"):
        return f"cannot open {db} (a missing or unreadable folder or file): {e}"
    if code in ("SQLITE_NOTADB", "SQLITE_CORRUPT"):
        what = "is not an index" if code == "SQLITE_NOTADB" else "is damaged"
        return f"{db} {what} ({e}); move it away and run fieldguide index to build a new one"
    return f"{db}: {e}"


# -- how options are declared ---------------------------------------------------------------


def option(*decls: str, **attrs: Any) -> Callable:
    """click.option naming its value as argparse did: `--limit LIMIT`, not `--limit INTEGER`."""
    if not attrs.get("is_flag"):
        attrs.setdefault("metavar", decls[0].lstrip("-").upper().replace("-", "_"))
    return click.option(*decls, **attrs)


db_option = option("--db", help="index file (default: FIELDGUIDE_DB, .fieldguide/index.db)")


def json_flag(help: str) -> Callable:
    return click.option("--json", "as_json", is_flag=True, help=help)


def _since(ctx: click.Context, param: click.Parameter, value: str | None) -> str | None:
    """--since as bot/since.py reads it; anything else is a usage error naming the option."""
    try:
        return None if value is None else parse_since(value)
    except ValueError as e:
        raise click.BadParameter(str(e)) from None


def since_option(help: str) -> Callable:
    return option("--since", callback=_since, help=help)


question_argument = click.argument(
    "question", nargs=-1, required=True, help="the question (quote it or not)"
)


class ModesCommand(click.Command):
    """Reads `--modes hybrid routed` as argparse's nargs="+" did: every word after --modes up to
    the next option is a mode (a click option takes one value at a time)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        spread: list[str] = []
        modes = False
        for arg in args:
            if arg.startswith("-"):
                modes = arg == "--modes"
            elif modes and spread[-1] != "--modes":
                spread.append("--modes")
            spread.append(arg)
        return super().parse_args(ctx, spread)
