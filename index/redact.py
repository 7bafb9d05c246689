"""Secrets kept out of messages: the password of a connection URL (and of any URL with
credentials) is replaced by `***` wherever it would be printed — in errors, in log lines.

A malformed URL is the dangerous case: libpq quotes the part it could not read ("invalid
percent-encoded token: "pa%ss"") and that part is the password. So besides redacting anything
URL-shaped, the known URLs' passwords are redacted wherever they appear, as written and decoded.
"""

from __future__ import annotations

import logging
import re
from urllib.parse import unquote

MASK = "***"
# scheme://user:password@ : the password is everything from the first ':' of the userinfo to the
# last '@' before whitespace (an unencoded '@' or '/' in a password is still hidden)
URL_PASSWORD = re.compile(r"(?i)\b([a-z][a-z0-9+.-]*://[^\s:/@]*:)[^\s]*@")
# key=value connection strings: password=secret, password='se cret'
KEYWORD_PASSWORD = re.compile(r"(?i)\b(password\s*=\s*)('(?:[^'\\]|\\.)*'|\S+)")


def password_of(url: str) -> str:
    """The password as written in `url` ("" when it has none)."""
    m = re.match(r"(?i)[a-z][a-z0-9+.-]*://([^\s/]*)@", url) or re.match(
        r"(?i)[a-z][a-z0-9+.-]*://(.*)@", url
    )
    userinfo = m.group(1) if m else ""
    return userinfo.split(":", 1)[1] if ":" in userinfo else ""


def redact(text: str, *urls: str) -> str:
    """`text` without the passwords of any URL in it, nor of `urls` (known secrets) anywhere."""
    for url in urls:
        secret = password_of(url or "")
        for form in {secret, unquote(secret)}:
            if len(form) >= 2:  # a one-character "password" would mask every such letter
                text = text.replace(form, MASK)
    text = URL_PASSWORD.sub(lambda m: m.group(1) + MASK + "@", text)
    return KEYWORD_PASSWORD.sub(lambda m: m.group(1) + MASK, text)


class RedactingFilter(logging.Filter):
    """A log filter: the record's message (arguments and traceback included) redacted."""

    def __init__(self, *urls: str):
        super().__init__()
        self.urls = urls

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        clean = redact(message, *self.urls)
        if clean != message:
            record.msg, record.args = clean, None
        if record.exc_text:
            record.exc_text = redact(record.exc_text, *self.urls)
        return True


def redact_logs(*urls: str) -> None:
    """Redact every log line this process writes through the root logger's handlers (and the
    handler of last resort, which writes warnings when logging is not configured)."""
    for handler in [*logging.getLogger().handlers, logging.lastResort]:
        if handler is None:
            continue
        if not any(isinstance(f, RedactingFilter) for f in handler.filters):
            handler.addFilter(RedactingFilter(*urls))
