"""Slack's Socket Mode end: a WebSocket server the real SocketModeClient connects to, with
several connections at once as several replicas open."""

from __future__ import annotations

import itertools
import json
import threading

from .slack import SlackMock


class SocketModeServer:
    """Slack's Socket Mode end: the URL apps.connections.open hands out, `hello` on connect,
    envelopes the app must ack by envelope_id, and `disconnect` (the client reconnects).

    Several connections at once, as several replicas of one app open (Slack allows 10): `send`
    writes on the newest, `deliver` does what Slack does with an event — hands it to one open
    connection (in turn), and re-sends it as a new envelope with `retry_attempt` + 1 on another
    connection when it is not acknowledged within `resend_after` seconds or its connection
    closes first (3 retries at most)."""

    def __init__(self, mock: SlackMock):
        from websockets.sync.server import serve

        self.mock = mock
        self.acks: dict[str, dict] = {}
        self.connections: list = []  # every connection ever opened, oldest first
        self.live: list = []  # those still open
        self.deliveries: list[dict] = []  # each envelope `deliver` sent: id, connection, attempt
        self.turn = itertools.count()
        self.ids = itertools.count(1)
        self.cond = threading.Condition()
        self.server = serve(self._session, "127.0.0.1", 0)
        port = self.server.socket.getsockname()[1]
        mock.socket_url = f"ws://127.0.0.1:{port}/link/?ticket=t"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def _session(self, ws) -> None:
        with self.cond:
            self.connections.append(ws)
            self.live.append(ws)
            live = len(self.live)
            self.cond.notify_all()
        try:
            ws.send(
                json.dumps(
                    {
                        "type": "hello",
                        "num_connections": live,
                        "debug_info": {"host": "stub"},
                        "connection_info": {"app_id": "A1"},
                    }
                )
            )
            for raw in ws:
                message = json.loads(raw)
                if "envelope_id" in message:
                    with self.cond:
                        self.acks[message["envelope_id"]] = message
                        self.cond.notify_all()
        except Exception:  # noqa: BLE001 - a closed connection ends the session
            pass
        finally:
            with self.cond:
                self.live.remove(ws)
                self.cond.notify_all()

    def _wait(self, predicate, timeout: float, what: str):
        with self.cond:
            if not self.cond.wait_for(predicate, timeout):
                raise AssertionError(f"Socket Mode: timed out waiting for {what}")

    def current(self, timeout: float = 10.0):
        self._wait(lambda: self.connections, timeout, "a connection")
        return self.connections[-1]

    def wait_live(self, count: int, timeout: float = 30.0) -> list:
        """Returns once `count` connections are open (and no more)."""
        self._wait(lambda: len(self.live) == count, timeout, f"{count} open connections")
        with self.cond:
            return list(self.live)

    @staticmethod
    def _envelope(
        envelope_id: str, type_: str, payload: dict, accepts: bool, attempt: int, reason: str
    ) -> str:
        return json.dumps(
            {
                "envelope_id": envelope_id,
                "type": type_,
                "payload": payload,
                "accepts_response_payload": accepts,
                "retry_attempt": attempt,
                "retry_reason": reason,
            }
        )

    def send(
        self,
        type_: str,
        payload: dict,
        accepts_response_payload: bool = False,
        retry_attempt: int = 0,
    ) -> str:
        envelope_id = f"env-{next(self.ids)}"
        envelope = self._envelope(
            envelope_id, type_, payload, accepts_response_payload, retry_attempt, ""
        )
        self.current().send(envelope)
        return envelope_id

    def deliver(
        self, payload: dict, resend_after: float = 3.0, retries: int = 3
    ) -> threading.Thread:
        """An Events API payload delivered as Slack delivers it (see the class); returns the
        thread doing it, which ends once an envelope is acknowledged or the retries are spent."""
        thread = threading.Thread(
            target=self._deliver, args=(payload, resend_after, retries), daemon=True
        )
        thread.start()
        return thread

    def _deliver(self, payload: dict, resend_after: float, retries: int) -> None:
        sent: list[str] = []
        tried: list = []
        for attempt in range(retries + 1):
            with self.cond:
                if not self.cond.wait_for(lambda: self.live, 10):
                    return
                fresh = [c for c in self.live if c not in tried] or list(self.live)
                ws = fresh[next(self.turn) % len(fresh)]
            envelope_id = f"env-{next(self.ids)}"
            sent.append(envelope_id)
            tried.append(ws)
            with self.cond:
                self.deliveries.append(
                    {
                        "envelope_id": envelope_id,
                        "event_id": payload.get("event_id"),
                        "connection": self.connections.index(ws),
                        "retry_attempt": attempt,
                    }
                )
                self.cond.notify_all()
            reason = "http_timeout" if attempt else ""  # as in Events API retries
            try:
                ws.send(self._envelope(envelope_id, "events_api", payload, False, attempt, reason))
            except Exception:  # noqa: BLE001 - closed meanwhile: the next attempt goes elsewhere
                continue

            def acked_or_closed(conn=ws) -> bool:
                return any(e in self.acks for e in sent) or conn not in self.live

            with self.cond:
                self.cond.wait_for(acked_or_closed, resend_after)
                if any(e in self.acks for e in sent):
                    return

    def ack(self, envelope_id: str, timeout: float = 10.0) -> dict:
        self._wait(lambda: envelope_id in self.acks, timeout, f"the ack of {envelope_id}")
        return self.acks[envelope_id]

    def disconnect(self, timeout: float = 10.0) -> None:
        """Ask the client to reconnect, as Slack does every few hours; returns once it has."""
        before = len(self.connections)
        self.current().send(json.dumps({"type": "disconnect", "reason": "refresh_requested"}))
        self._wait(lambda: len(self.connections) > before, timeout, "the reconnection")

    def close(self) -> None:
        self.server.shutdown()
