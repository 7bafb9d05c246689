"""Slack stand-ins for trying a deployed bot without a workspace: the Web API (`SlackMock`) and
Socket Mode (`SocketModeServer`) on 127.0.0.1. Writes the SLACK_API_BASE_URL to give the bot into
URL_FILE; once the bot connects, delivers one mention, as Slack does, prints the answer the bot
posts (a line starting "standin: answered") and goes on serving the bot until it is stopped (so its
health check still sees Slack). Exit 1 when nothing connects or answers in time.

    python -m tests.standins.standin URL_FILE ["a question"]     (deploy/container-check.sh uses it)
"""

from __future__ import annotations

import sys
import time

from tests.standins.fleet import event_payload, mention
from tests.standins.slack import SlackMock
from tests.standins.socket_mode import SocketModeServer

QUESTION = "How many times is a failed webhook retried, and over how long?"


def main(argv: list[str]) -> int:
    if not 1 <= len(argv) <= 2:
        print(__doc__, file=sys.stderr)
        return 2
    mock = SlackMock()
    socket = SocketModeServer(mock)
    try:
        with open(argv[0], "w") as f:
            f.write(mock.url + "/api/")
        try:
            socket.wait_live(1, timeout=300)
        except AssertionError:
            print("standin: the bot never connected over Socket Mode", file=sys.stderr)
            return 1
        socket.deliver(event_payload(mention(argv[1] if len(argv) > 1 else QUESTION, "1.1"), "Ev1"))
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if answers := mock.answers():
                print(f"standin: answered: {str(answers[0].get('text', ''))[:200]}", flush=True)
                while True:
                    time.sleep(3600)
            time.sleep(0.1)
        print("standin: the bot connected but posted no answer within 60 s", file=sys.stderr)
        return 1
    finally:
        socket.close()
        mock.close()


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
