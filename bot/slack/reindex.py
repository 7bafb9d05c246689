"""/docs-reindex: one background reindex at a time, its progress and summary reported to the admin
who asked.

A slash command's `response_url` takes at most 5 posts in 30 minutes, so progress is rationed
(the summary always keeps a post) and every post's status is checked: when Slack refuses one
(`used_url`, `expired_url`, an error status), the report goes by `chat.postEphemeral` instead.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from bot.state import ReindexLock
from index.embedders import Embedder
from index.indexer import IndexError_, RunSummary, SourceMismatch, run_status

from ..indexing import docs_source, index_docs
from ..settings import Settings
from .slack_format import escape

log = logging.getLogger(__name__)

RESPONSE_URL_POSTS = 5  # Slack's limit per response_url (within 30 minutes)
RESPONSE_URL_SECONDS = 30 * 60 - 60  # a little inside Slack's 30 minutes


class Reporter:
    """Reports to the requester within the response_url's 5 posts: the start, up to 3 progress
    posts at growing intervals (10 s, 20 s, 40 s, ...), and the summary.

    `respond(text) -> bool` posts to the response_url (False when Slack refused it);
    `ephemeral(text) -> bool` posts with chat.postEphemeral, the fallback."""

    def __init__(
        self,
        respond: Callable[[str], bool],
        ephemeral: Callable[[str], bool],
        clock: Callable[[], float] = time.monotonic,
        first_interval: float = 10.0,
    ):
        self.respond, self.ephemeral, self.clock = respond, ephemeral, clock
        self.posts = 0
        self.created = clock()
        self.last = self.created
        self.interval = first_interval
        self.url_works = True

    def _send(self, text: str) -> bool:
        if (
            self.url_works
            and self.posts < RESPONSE_URL_POSTS
            and self.clock() - self.created < RESPONSE_URL_SECONDS
        ):
            self.posts += 1
            if self.respond(text):
                return True
            self.url_works = False  # used up or expired: don't spend more calls on it
        if self.ephemeral(text):
            return True
        log.error("could not report to the requester: %s", text[:200])
        return False

    def start(self, text: str) -> bool:
        return self._send(text)

    def progress(self, text: str) -> bool:
        """Posted only when the interval has passed and a post is left besides the summary's;
        the interval doubles after each post."""
        now = self.clock()
        if now - self.last < self.interval or self.posts >= RESPONSE_URL_POSTS - 1:
            return False
        self.last, self.interval = now, self.interval * 2
        return self._send(text)

    def summary(self, text: str) -> bool:
        return self._send(text)


class Reindexer:
    """One background reindex at a time; questions keep being answered from the previous index."""

    def __init__(self, settings: Settings, embedder: Embedder, state: ReindexLock):
        self.settings = settings
        self.embedder = embedder
        self.state = state
        self.started: float | None = None
        self.failing = ""  # the last refresh's failure, until one succeeds
        # told of each run that added or changed docs (the owners' loop replays its topics)
        self.on_changed: Callable[[RunSummary], object] | None = None

    def changed(self, summary: RunSummary) -> None:
        if self.on_changed is not None and (summary.added or summary.changed):
            try:
                self.on_changed(summary)
            except Exception:  # the reindex itself is done and reported
                log.exception("telling the owners' loop about the reindex failed")

    def run(self, report: Reporter) -> None:
        """Reindex FIELDGUIDE_DOCS (or pull FIELDGUIDE_DOCS_GIT and reindex it), telling the
        requester through `report`. Never swaps sources: an index built from other docs is
        refused."""
        with self.state.reindex_lock() as mine:
            if mine:
                summary = self._run(report)
            else:
                summary = (
                    "A reindex is already running;"
                    " I'll keep answering from the current index meanwhile."
                )
        # said once the run is over and its lock free: `status` right after it tells the last run
        report.summary(summary)

    def _run(self, report: Reporter) -> str:
        """The run, reporting its start and progress; the summary to tell."""
        self.started = time.monotonic()
        done, total = 0, 0
        what = ""

        def on_start(n: int) -> None:
            nonlocal total
            total = n
            report.start(
                f"Reindexing `{escape(what)}`: {n} new or changed texts to embed."
                if n
                else f"Reindexing `{escape(what)}`: nothing new to embed."
            )

        def on_embedded(n: int) -> None:
            nonlocal done
            done += n
            if done < total:
                report.progress(f"Embedded {done}/{total} texts…")

        try:
            source = docs_source(self.settings)
            what = source.identity if source.git else self.settings.docs
            s, published = index_docs(
                self.settings,
                source,
                self.embedder,
                on_embed_start=on_start,
                on_embedded=on_embedded,
            )
            self.changed(s)
            lines = [
                f":white_check_mark: Reindexed in {s.seconds:.1f} s: added {len(s.added)},"
                f" changed {len(s.changed)}, removed {len(s.removed)},"
                f" unchanged {len(s.unchanged)}, skipped {len(s.skipped)};"
                f" {s.chunks} chunks, {s.embedded} texts embedded."
            ]
            lines += [
                f"• skipped `{escape(k['path'])}`: {escape(k['reason'])}" for k in s.skipped[:20]
            ]
            lines += [
                f"• warning `{escape(w['path'])}`: {escape(w['warning'])}" for w in s.warnings[:20]
            ]
            if published:  # a fleet: every replica switches to it within seconds
                lines.append(f"Published to every replica as generation {published['generation']}.")
            return "\n".join(lines)
        except SourceMismatch as e:
            return (
                f":x: This index was built from `{escape(e.indexed)}`, not `{escape(e.given)}`:"
                f" {self.settings.reindex_command} never swaps docs sources. To swap, run"
                " `fieldguide index --replace`; or set the docs setting back."
            )
        except IndexError_ as e:
            return f":x: Reindex failed: {escape(str(e))}. The previous index is still in use."
        except Exception as e:  # the requester must hear about any failure
            log.exception("reindex failed")
            return f":x: Reindex failed ({type(e).__name__}). The previous index is still in use."
        finally:
            self.started = None

    def refresh(self) -> RunSummary | None:
        """serve's scheduled refresh: pull and reindex when no other reindex holds the lock (in a
        fleet, the replica holding it indexes and publishes; the others skip this turn). One log
        line when the docs changed, and when refreshes start failing (the index stays as it was)
        and work again.
        Returns the run's summary (None when skipped or failed)."""
        with self.state.reindex_lock() as mine:
            if not mine:
                log.info("docs refresh skipped: another reindex is running")
                return None
            self.started = time.monotonic()
            try:
                s, published = index_docs(self.settings, None, self.embedder)
            except IndexError_ as e:
                if str(e) != self.failing:  # said once while it lasts, not every period
                    log.warning("docs refresh failed: %s", e)
                self.failing = str(e)
                return None
            except Exception:
                log.exception("docs refresh failed; the index is unchanged")
                return None
            finally:
                self.started = None
        if self.failing:
            log.info("docs refresh works again")
            self.failing = ""
        self.changed(s)
        if s.added or s.changed or s.removed:
            log.info(
                "docs refresh: added %d, changed %d, removed %d in %.1f s%s",
                len(s.added),
                len(s.changed),
                len(s.removed),
                s.seconds,
                f"; published generation {published['generation']}" if published else "",
            )
        return s

    def status(self) -> str:
        if self.started is not None:
            return f"A reindex has been running for {time.monotonic() - self.started:.0f} s."
        r = run_status(self.settings.db)
        if r is None:
            return "No index run yet."
        if r["status"] != "ok":
            return (
                f"Last run {r['finished']} failed, failing since {r['failing_since']}:"
                f" {escape(r['error'] or 'no reason recorded')}. The index is the last good"
                f" run's ({r['last_ok'] or 'none yet'})."
            )
        return (
            f"Last run {r['finished']} ({r['status']}): added {r['added']}, "
            f"changed {r['changed']}, removed {r['removed']}, unchanged {r['unchanged']}; "
            f"{r['chunks']} chunks, {r['seconds']:.1f} s."
        )


class Refresher:
    """A background thread that calls `reindexer.refresh()` every `every` seconds, then
    `after()` (the engine loads the new index there, so the next question does not wait)."""

    def __init__(
        self,
        reindexer: Reindexer,
        every: float,
        after: Callable[[], object] | None = None,
    ):
        self.reindexer, self.every, self.after = reindexer, every, after
        self.runs = 0  # refreshes finished (run, skipped or failed)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="docs-refresh", daemon=True)

    def start(self) -> Refresher:
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            if self.reindexer.refresh() is not None and self.after is not None:
                try:
                    self.after()
                except Exception:  # the next question loads it, or says what is wrong
                    log.exception("loading the refreshed index failed")
            self.runs += 1
