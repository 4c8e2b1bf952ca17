"""Which server a request goes to: a conversation's turns stay on the server that served its previous turn (whose
prefix cache holds the history), unless that server is failing or overloaded; everything else goes to the least busy
healthy server.

The rule (docs/production.md, "Several servers"):

- A request that continues a conversation goes to its **home** (the server that answered the conversation's last
  turn) when the home is healthy and its requests in flight are at most the least busy healthy server's + `slack`,
  `slack = max(2, concurrency // (4 × servers))` (a quarter of a server's fair share of the in-flight requests).
  Otherwise it goes to the least busy healthy server, which becomes its home once it answers.
- Any other request (a first turn, a single-turn prompt) goes to the least busy healthy server (ties: the one sent
  the fewest requests).
- A server whose last try failed on its side (connection, timeout, 5xx, a malformed answer) is not healthy for
  `cooldown_s`; a request's retry also avoids the server its last try failed on. When no server is healthy, every
  server is a candidate again.

Single-turn prompts are not grouped by shared prefix (a system prompt, tool declarations): every server caches such a
prefix after its first request with it, so spreading them costs (servers − 1) prefills of the prefix per run, while
grouping would pile work on one server.

Behind an sglang-router (one URL), the router chooses: its cache_aware policy matches the request's `input_ids`
against what each worker served (they carry the conversation's history as a prefix), and the client also sends the
conversation as `X-SMG-Routing-Key` (ROUTING_KEY_HEADER), the key its consistent_hashing and manual policies pin
sessions by.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass, field

# The header sglang-router's consistent_hashing / manual policies read a session's key from.
ROUTING_KEY_HEADER = "X-SMG-Routing-Key"
# How long a server whose try failed on its side is passed over (unless no other is healthy).
COOLDOWN_S = 10.0
# Conversations whose home is remembered (least recently answered forgotten first): a next turn is sent the moment its
# previous turn is stored, so a home is needed only briefly; this bounds the memory of a run of millions.
HOMES = 1 << 16


def default_slack(concurrency: int, servers: int) -> int:
    """How many more requests than the least busy server a conversation's home may have in flight."""
    return max(2, concurrency // (4 * max(1, servers)))


@dataclass
class ChoiceCounts:
    """What the choices were (the benchmark and the log read them)."""

    sticky: int = 0          # a conversation's turn sent to its home
    moved: int = 0           # a turn whose home was unhealthy or overloaded, sent elsewhere
    fresh: int = 0           # a request with no home (a first turn, a single-turn prompt)
    by_url: dict[str, int] = field(default_factory=dict)


class ServerChoice:
    """The client's view of its servers: requests in flight and sent, each conversation's home, servers failing."""

    def __init__(self, urls: list[str], *, concurrency: int, affinity: bool = True, slack: int | None = None,
                 cooldown_s: float = COOLDOWN_S, homes: int = HOMES):
        self.urls = list(urls)
        self.affinity = affinity
        self.slack = default_slack(concurrency, len(self.urls)) if slack is None else slack
        self.cooldown_s = cooldown_s
        self.in_flight = dict.fromkeys(self.urls, 0)
        self.sent = dict.fromkeys(self.urls, 0)
        self.counts = ChoiceCounts(by_url=dict.fromkeys(self.urls, 0))
        self._homes: OrderedDict[str, str] = OrderedDict()
        self._max_homes = homes
        self._failing_until: dict[str, float] = {}

    def home(self, key: str) -> str | None:
        """The server that answered conversation `key`'s last turn (None: none remembered)."""
        return self._homes.get(key)

    def healthy(self, avoid: str | None = None) -> list[str]:
        """The servers not failing (nor `avoid`, when another is left); all of them when none is."""
        now = time.monotonic()
        ok = [u for u in self.urls if self._failing_until.get(u, 0.0) <= now]
        without = [u for u in ok if u != avoid]
        if without:
            return without
        return ok or [u for u in self.urls if u != avoid] or list(self.urls)

    def pick(self, key: str | None = None, avoid: str | None = None) -> str:
        """The server for a request of conversation `key` (None: none), whose last try failed on `avoid` (if any);
        counted as in flight there until `done`."""
        if len(self.urls) == 1:      # one server (or a router): nothing to choose, on every request
            url = self.urls[0]
            self.counts.fresh += 1
        else:
            url = self._choose(key, avoid)
        self.in_flight[url] += 1
        self.sent[url] += 1
        self.counts.by_url[url] += 1
        return url

    def _choose(self, key: str | None, avoid: str | None) -> str:
        candidates = self.healthy(avoid)
        least = min(candidates, key=lambda u: (self.in_flight[u], self.sent[u]))
        home = self._homes.get(key) if key is not None and self.affinity else None
        if home is None:
            self.counts.fresh += 1
            return least
        if home in candidates and self.in_flight[home] <= self.in_flight[least] + self.slack:
            self.counts.sticky += 1
            return home
        self.counts.moved += 1
        return least

    def done(self, url: str, key: str | None, outcome: str) -> None:
        """A try on `url` ended: `outcome` "ok" (answered: `url` becomes the conversation's home), "server" (failed on
        the server's side: it is passed over for cooldown_s) or "request" (failed on the request's side)."""
        self.in_flight[url] -= 1
        if outcome == "ok":
            self._failing_until.pop(url, None)
            if key is not None and self.affinity:
                self._homes[key] = url
                self._homes.move_to_end(key)
                if len(self._homes) > self._max_homes:
                    self._homes.popitem(last=False)
        elif outcome == "server":
            self._failing_until[url] = time.monotonic() + self.cooldown_s
