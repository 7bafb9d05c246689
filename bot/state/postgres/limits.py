"""Per-user rate limits shared by a fleet: one row per user with the times of their questions in
the last minute, updated in one statement (the row lock makes concurrent replicas count
together); this replica's own count while the database is away."""

from __future__ import annotations

from index.clean import storable
from index.pg import POOL_ERRORS

from .session import Session

ALLOW = """INSERT INTO rate_windows AS r (user_id, times) VALUES (%(user)s, ARRAY[now()])
ON CONFLICT (user_id) DO UPDATE
SET times = array(SELECT t FROM unnest(r.times) t WHERE t > now() - interval '1 minute')
            || now()
WHERE cardinality(array(SELECT t FROM unnest(r.times) t WHERE t > now() - interval '1 minute'))
      < %(limit)s
RETURNING 1"""


class RateLimits(Session):
    def allow_question(self, user: str, per_minute: int) -> bool:
        user = storable(user)
        if not self._down:
            try:
                return bool(self._run(ALLOW, {"user": user, "limit": per_minute}))
            except POOL_ERRORS as e:
                self._failed("checking a rate limit", e)
        return self._local.allow_question(user, per_minute)
