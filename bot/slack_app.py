"""The Slack app (Bolt): mentions, DMs, thread follow-ups, feedback buttons and the admin reindex
command.

Bolt acknowledges each event at once and runs the listener on its worker threads, so a slow answer
never makes Slack retry; retries and double deliveries that arrive anyway are dropped by
`State.claim_event`.
"""

from __future__ import annotations

import logging
import re
import time

from slack_bolt import App, Assistant
from slack_sdk import WebClient
from slack_sdk.http_retry.builtin_handlers import RateLimitErrorRetryHandler

from index.indexer import IndexError_, last_runs
from router.pipeline import Pipeline, QuestionError
from router.state import State

from .settings import Settings
from .slack_format import FEEDBACK_ACTIONS, answer_blocks, escape, fallback_text
from .wiring import index_docs

log = logging.getLogger(__name__)

WORKING = ":mag: Looking through the docs…"
SORRY = ":warning: Sorry, something went wrong while answering. Please try again in a minute."
HISTORY_MESSAGES = 10  # thread messages used to understand a follow-up
QUESTIONS_PER_MINUTE = 6  # per user


class Reindexer:
    """One background reindex at a time; questions keep being answered from the previous index."""

    def __init__(self, settings: Settings, embedder, state: State):
        self.settings = settings
        self.embedder = embedder
        self.state = state
        self.started: float | None = None

    def run(self, report) -> None:
        """Reindex FIELDGUIDE_DOCS; `report(text)` tells the requester (progress, then the
        summary)."""
        with self.state.reindex_lock() as mine:
            if not mine:
                report(
                    "A reindex is already running;"
                    " I'll keep answering from the current index meanwhile."
                )
                return
            self._run(report)

    def _run(self, report) -> None:
        self.started = time.monotonic()
        done, total, last_post = 0, 0, 0.0

        def on_start(n):
            nonlocal total
            total = n
            report(
                f"Reindexing `{self.settings.docs}`: {n} new or changed texts to embed."
                if n
                else f"Reindexing `{self.settings.docs}`: nothing new to embed."
            )

        def on_embedded(n):
            nonlocal done, last_post
            done += n
            if time.monotonic() - last_post > 10 and done < total:
                last_post = time.monotonic()
                report(f"Embedded {done}/{total} texts…")

        try:
            s, published = index_docs(
                self.settings,
                self.settings.db,
                self.settings.docs,
                self.embedder,
                on_embed_start=on_start,
                on_embedded=on_embedded,
            )
            lines = [
                f":white_check_mark: Reindexed in {s.seconds:.1f} s: added {len(s.added)},"
                f" changed {len(s.changed)}, removed {len(s.removed)},"
                f" unchanged {len(s.unchanged)}, skipped {len(s.skipped)};"
                f" {s.chunks} chunks, {s.embedded} texts embedded."
            ]
            lines += [
                f"• skipped `{escape(k['path'])}`: {escape(k['reason'])}" for k in s.skipped[:20]
            ]
            if published:  # a fleet: every replica switches to it within seconds
                lines.append(f"Published to every replica as generation {published['generation']}.")
            report("\n".join(lines))
        except IndexError_ as e:
            report(f":x: Reindex failed: {escape(str(e))}. The previous index is still in use.")
        except Exception as e:  # the requester must hear about any failure
            log.exception("reindex failed")
            report(f":x: Reindex failed ({type(e).__name__}). The previous index is still in use.")
        finally:
            self.started = None

    def status(self) -> str:
        if self.started is not None:
            return f"A reindex has been running for {time.monotonic() - self.started:.0f} s."
        runs = last_runs(self.settings.db, 1)
        if not runs:
            return "No index run yet."
        r = runs[0]
        return (
            f"Last run {r['finished']} ({r['status']}): added {r['added']}, "
            f"changed {r['changed']}, removed {r['removed']}, unchanged {r['unchanged']}; "
            f"{r['chunks']} chunks, {r['seconds']:.1f} s."
        )


def thread_history(
    client: WebClient, channel: str, thread_ts: str, current_ts: str, bot_user: str
) -> list[dict]:
    """The thread's earlier messages, oldest first, as {"role", "text"} (bounded)."""
    try:
        resp = client.conversations_replies(channel=channel, ts=thread_ts, limit=50)
    except Exception:  # without history the question is still answered as asked
        log.warning("could not read thread %s/%s", channel, thread_ts, exc_info=True)
        return []
    history = []
    messages: list[dict] = resp.get("messages", [])
    for m in messages:
        if m.get("ts") == current_ts or not m.get("text") or m.get("text") == WORKING:
            continue
        role = "assistant" if m.get("user") == bot_user or m.get("bot_id") else "user"
        history.append({"role": role, "text": strip_mentions(m["text"])[:1500]})
    return history[-HISTORY_MESSAGES:]


def strip_mentions(text: str) -> str:
    return re.sub(r"<@[A-Z0-9]+>", "", text or "").strip()


def make_wsgi(app: App):
    """The WSGI application `serve --http` runs under waitress: Bolt at /slack/events, /healthz for
    probes."""
    from slack_bolt.adapter.wsgi import SlackRequestHandler

    slack = SlackRequestHandler(app)

    def wsgi(environ, start_response):
        if environ.get("PATH_INFO") == "/healthz":
            start_response("200 OK", [("content-type", "text/plain")])
            return [b"ok\n"]
        return slack(environ, start_response)

    return wsgi


def build_app(  # noqa: C901 - listeners are being split by kind
    settings: Settings, pipeline: Pipeline, client: WebClient | None = None
) -> App:
    client = client or WebClient(
        token=settings.slack_bot_token,
        base_url=settings.slack_api_base_url,
        retry_handlers=[RateLimitErrorRetryHandler(max_retry_count=2)],
    )
    app = App(client=client, signing_secret=settings.slack_signing_secret or None)
    bot_user = client.auth_test().get("user_id", "")
    state = pipeline.state
    assert state is not None, "the Slack app needs a State (de-duplication, audit, feedback)"
    reindexer = Reindexer(settings, pipeline.engine.embedder, state)

    def answer(event: dict, body: dict, reply_in_thread: bool, set_status=None) -> None:
        channel, ts, user = event["channel"], event["ts"], event.get("user", "")
        if not state.claim_event(body.get("event_id", ""), f"{channel}:{ts}"):
            return  # a retry, or the same mention delivered as app_mention and as message
        thread_ts = event.get("thread_ts") or (ts if reply_in_thread else None)
        if not state.allow_question(user, QUESTIONS_PER_MINUTE):
            client.chat_postMessage(
                channel=channel,
                thread_ts=thread_ts,
                text="You're asking faster than I can read: give me a minute and ask again.",
            )
            return
        if set_status is not None:  # the assistant panel's own "is thinking…" indicator
            set_status("is looking through the docs…")
        placeholder = client.chat_postMessage(channel=channel, thread_ts=thread_ts, text=WORKING)
        history = (
            thread_history(client, channel, event["thread_ts"], ts, bot_user)
            if event.get("thread_ts")
            else []
        )
        context = {
            "channel": channel,
            "user": user,
            "thread_ts": thread_ts or ts,
            "message_ts": placeholder["ts"],
        }
        try:
            ans = pipeline.answer(strip_mentions(event.get("text", "")), history, context)
        except QuestionError as e:
            client.chat_update(channel=channel, ts=placeholder["ts"], text=str(e))
            return
        except Exception:  # the user gets a short message, the log gets the traceback
            log.exception("answer failed")
            client.chat_update(channel=channel, ts=placeholder["ts"], text=SORRY)
            return
        messages = answer_blocks(ans, ans.audit_id)
        client.chat_update(
            channel=channel, ts=placeholder["ts"], text=fallback_text(ans), blocks=messages[0]
        )
        for blocks in messages[1:]:
            client.chat_postMessage(
                channel=channel, thread_ts=thread_ts or ts, text="(continued)", blocks=blocks
            )

    def in_our_thread(event: dict) -> bool:
        """Has the bot answered in this thread? The audit table knows every answer's thread."""
        return state.thread_answered(event["channel"], event["thread_ts"])

    @app.event("app_mention")
    def on_mention(event, body):
        answer(event, body, reply_in_thread=True)

    @app.event("message")
    def on_message(event, body):
        if event.get("subtype") or event.get("bot_id") or event.get("user") in (None, bot_user):
            return  # edits, deletions, joins, bots (ourselves included)
        if event.get("channel_type") == "im":
            answer(event, body, reply_in_thread=False)
        elif f"<@{bot_user}>" in event.get("text", ""):
            return  # app_mention answers it
        elif event.get("thread_ts") and in_our_thread(event):
            answer(event, body, reply_in_thread=True)

    # The assistant side panel: suggested questions when a thread opens, status while answering.
    # Bolt routes threaded DMs here, so these get the same answer() as mentions and DMs.
    assistant = Assistant()

    @assistant.thread_started
    def on_thread_started(say, set_suggested_prompts):
        say(
            "Hi! Ask me about the docs: I answer from them only, with links to the sections I used."
        )
        examples = [i["examples"][0] for i in pipeline.engine.loaded().intents if i["examples"]][:4]
        if examples:
            set_suggested_prompts(prompts=examples, title="For example:")

    @assistant.user_message
    def on_assistant_message(payload, body, set_status):
        answer(payload, body, reply_in_thread=True, set_status=set_status)

    app.use(assistant)

    @app.action(re.compile("^(" + "|".join(FEEDBACK_ACTIONS) + ")$"))
    def on_feedback(ack, body, action):
        ack()
        value = "helpful" if action["action_id"] == FEEDBACK_ACTIONS[0] else "not_helpful"
        state.record_feedback(int(action["value"]), body["user"]["id"], value)

    def reindex_ack(ack, command):
        arg = (command.get("text") or "").strip().lower()
        if command["user_id"] not in settings.admin_ids:
            ack(
                response_type="ephemeral",
                text="Sorry, only fieldguide admins can reindex the docs.",
            )
        elif arg == "status":
            ack(response_type="ephemeral", text=reindexer.status())
        else:
            # Bolt starts the lazy run alongside this ack, so a lock check here could see that
            # very run; Reindexer.run takes the lock and says when another reindex holds it.
            ack(
                response_type="ephemeral",
                text=f"Reindexing `{settings.docs}`; I'll post progress here.",
            )

    def reindex_run(command, respond):
        if (
            command["user_id"] in settings.admin_ids
            and (command.get("text") or "").strip().lower() != "status"
        ):
            reindexer.run(
                lambda text: respond(response_type="ephemeral", replace_original=False, text=text)
            )

    app.command(settings.reindex_command)(ack=reindex_ack, lazy=[reindex_run])

    @app.error
    def on_error(error, body):
        log.error("unhandled Slack error: %s", error, exc_info=error)

    return app
