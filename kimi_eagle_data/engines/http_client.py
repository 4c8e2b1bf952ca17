"""What every engine served over HTTP shares (SGLang's `/generate`, vLLM's `/inference/v1/generate`):
an asyncio client that keeps requests in flight, retries, checks answers and waits for the servers.

- Continuous: up to `concurrency` requests in flight at all times; a new one starts the moment one
  finishes, so one 10k-token tail never idles the servers (no batch barrier).
- Several servers (server_choice.py): a conversation's next turn goes back to the server that answered its
  previous turn (its prefix cache holds the history) while that server is healthy and not overloaded; anything
  else goes to the least busy healthy server. One router URL: the router chooses (its cache-aware policy matches
  the prompt ids; the conversation goes along as its routing key header).
- Retries with exponential backoff and jitter on connection errors, timeouts and 5xx; a request
  that keeps failing comes back as a RequestFailure with its reason (data, not an exception), so the
  generate stage records it as failed. HTTP 4xx is not retried (the request itself is wrong).
- Every answer is checked before it is handed on (response_checks.py `check_output_ids`): token ids a list of ints in
  [0, vocab_size), at most the request's `max_new_tokens` long, as many as the server's own count says.
  Anything else is a `bad_response` failure, retried like a 5xx and, when retries run out, recorded as
  failed: a broken server never reaches the checkpoint.
- A prompt holding an id the model cannot embed is never sent: real SGLang and vLLM crash on one.

The asyncio loop runs in a worker thread; results reach the caller's thread through a bounded queue,
so checkpoint commits stay in one thread (SQLite). Requests are pulled one per freed slot, in a thread of their
own: the request loop's feed may block until an answer adds a conversation's next turn (`streams_requests`).
That bridge between the threads is async_bridge.py's.
Subclasses say how to start (read the server's version, model and context length) and how to build and read
their requests.
"""

from __future__ import annotations

import abc
import asyncio
import errno
import logging
import queue
import random
import re
import threading
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Iterable, Iterator

import orjson

from kimi_eagle_data.engines.async_bridge import LoopFailed, Puller, results_of_loop
from kimi_eagle_data.engines.base import Engine, EngineError, EngineInfo, ScoreRequest, ScoreResult
from kimi_eagle_data.engines.response_checks import Failure, unembeddable
from kimi_eagle_data.engines.server_choice import ROUTING_KEY_HEADER, ServerChoice
from kimi_eagle_data.records import RequestFailure
from kimi_eagle_data.run_checks import url_problem

log = logging.getLogger(__name__)

RETRY_STATUS = {408, 429, 500, 502, 503, 504}
# SGLang refuses a request whose rid it is still running: a client killed mid-request left it there, and its rerun
# sends the same id. Retried after asking the server to abort the stale one (`_abort_request`).
DUPLICATE_RID = b"Duplicate request ID"
# How long a run that stops early spends asking the servers to abort the requests it leaves in flight (and the most
# one abort of a timed-out request may take).
ABORT_TIMEOUT_S = 5.0
# A run waiting for a server says so at once, then every this many seconds (a K2.5 server loads for many minutes).
WAIT_REPORT_S = 15.0


@dataclass
class RetryPolicy:
    max_attempts: int = 5
    backoff_s: float = 1.0          # first wait; doubles each attempt
    max_backoff_s: float = 60.0
    request_timeout_s: float = 3600.0

    def wait(self, attempt: int) -> float:
        base = min(self.max_backoff_s, self.backoff_s * 2 ** (attempt - 1))
        return base * (0.5 + random.random() / 2)


def same_model(a: str, b: str) -> bool:
    """Model paths name the same model: equal, or one ends with the other (local dir vs Hub id)."""
    a, b = a.rstrip("/"), b.rstrip("/")
    return a == b or a.endswith("/" + b) or b.endswith("/" + a) or a.split("/")[-1] == b.split("/")[-1]


def parse_version(v: str) -> tuple[int, ...] | None:
    m = re.match(r"^v?(\d+)\.(\d+)\.(\d+)", v or "")
    return tuple(int(x) for x in m.groups()) if m else None


def connect_problem(e: BaseException) -> str:
    """What a failed health probe got, in a few words: "connection refused", "no answer in time", ..."""
    import aiohttp

    if isinstance(e, asyncio.TimeoutError):
        return "no answer in time"
    if isinstance(e, aiohttp.ClientConnectorError):
        e = e.os_error
    if isinstance(e, ConnectionRefusedError) or getattr(e, "errno", None) == errno.ECONNREFUSED \
            or "Connect call failed" in str(e):
        return "connection refused"
    if isinstance(e, OSError) and e.strerror:
        return f"cannot connect ({e.strerror})"
    return f"{type(e).__name__}: {e}"


class Waiting:
    """A wait for a server that the user can see: the first `report` logs at once, later ones every WAIT_REPORT_S
    (what it waits for, what it got, for how long so far); `done` says when a reported wait ended."""

    def __init__(self, what: str, timeout_s: float):
        self.what, self.timeout_s = what, timeout_s
        self.started = time.monotonic()
        self.next_report = self.started
        self.reported = False

    def over(self) -> bool:
        return time.monotonic() - self.started >= self.timeout_s

    def report(self, got: str) -> None:
        now = time.monotonic()
        if now >= self.next_report:
            log.info("waiting for %s: %s (%.0f s of %.0f s; Ctrl-C stops)", self.what, got, now - self.started,
                     self.timeout_s)
            self.next_report = now + WAIT_REPORT_S
            self.reported = True

    def done(self) -> None:
        if self.reported:
            log.info("%s is ready after %.0f s", self.what, time.monotonic() - self.started)


def retry_rid(rid: str, attempt: int) -> str:
    """The request id of try `attempt` of request `rid` after a timeout: fresh on every such retry, and with `rid`
    as its prefix (SGLang's scheduler aborts every request whose id starts with the id it is asked to abort, so an
    abort of `rid` itself still reaches them all)."""
    return f"{rid}.retry{attempt}"


class HTTPEngine(Engine):
    """The client machinery; a subclass sets `generate_path` and `health_paths` and implements `_start`
    (-> EngineInfo), `served_models` and `_tokenize_one`."""

    generate_path = "/generate"            # where generation and scoring requests are POSTed
    health_paths: tuple[str, ...] = ("/health",)   # tried in turn; a 404 moves on to the next
    # The server's context length must be at least max_seq_len + context_margin (its launch flag: context_flag).
    context_margin = 0
    context_flag = "--context-length"
    streams_requests = True    # pulls each next request when a slot frees (the request loop's feed may block)
    abort_path: str | None = None   # where a request is aborted by its id (POST {"rid"}); None: the server cannot

    def __init__(self, urls: list[str], *, concurrency: int = 256, retry: RetryPolicy | None = None,
                 health_timeout_s: float = 600.0, allow_old_server: bool = False, vocab_size: int | None = None,
                 affinity: bool = True):
        if not urls:
            raise EngineError(f"the {self.name} engine needs at least one --server URL")
        for u in urls:
            problem = url_problem(u)
            if problem:
                raise EngineError(f"--server {u!r}: {problem}")
        # Token ids a response may hold are < vocab_size (the model's, else len(tokenizer)); None: only >= 0.
        self.vocab_size = vocab_size
        self.urls = [u.rstrip("/") for u in urls]
        self.concurrency = concurrency
        self.retry = retry or RetryPolicy()
        self.health_timeout_s = health_timeout_s
        self.allow_old_server = allow_old_server
        # Where each request goes (server_choice.py); `affinity` False: always the least busy healthy server.
        self.choice = ServerChoice(self.urls, concurrency=concurrency, affinity=affinity)
        self._info: EngineInfo | None = None
        self._stop = threading.Event()
        self._in_flight: dict[str, str] = {}    # request id -> the URL it was sent to, while a try is under way

    # -- start-up -----------------------------------------------------------------------------
    def start(self) -> EngineInfo:
        """Wait until every server is healthy, then read what it serves. Idempotent."""
        if self._info is None:
            self._info = asyncio.run(self._start())
        return self._info

    @abc.abstractmethod
    async def _start(self) -> EngineInfo: ...

    def info(self) -> EngineInfo:
        return self.start()

    def check_version(self, version: str, floor: tuple[int, ...], why: str) -> None:
        """Refuse a server older than `floor` (unless --allow-old-server); `why` says what older ones get wrong."""
        parsed = parse_version(version)
        if not self.allow_old_server and (parsed is None or parsed < floor):
            raise EngineError(
                f"{self.urls[0]} reports {self.name} version {version or 'unknown'}; need >= "
                f"{'.'.join(map(str, floor))} ({why}). Upgrade the server, or pass --allow-old-server if you "
                "know better")

    async def _wait_healthy(self, session, url: str) -> None:
        import aiohttp

        waiting = Waiting(f"the {self.name} server at {url}", self.health_timeout_s)
        last = "no answer"
        while True:
            for path in self.health_paths:
                try:
                    async with session.get(url + path) as r:
                        if r.status == 200:
                            waiting.done()
                            return
                        last = (f"not healthy yet ({path}: HTTP {r.status})" if r.status >= 500
                                else f"HTTP {r.status} on {path}")
                        if r.status != 404:
                            break
                except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as e:
                    last = connect_problem(e)
                    break
            if waiting.over():
                raise EngineError(f"server {url} not healthy after {self.health_timeout_s:.0f}s ({last}); is it "
                                  "running? Start one with `kimi-data serve` or raise --health-timeout")
            waiting.report(last)
            await asyncio.sleep(1.0)

    async def _get_json(self, session, url: str, *paths: str) -> dict[str, Any]:
        for path in paths:
            async with session.get(url + path) as r:
                if r.status == 200:
                    try:
                        body = orjson.loads(await r.read())
                    except orjson.JSONDecodeError:
                        continue
                    if isinstance(body, dict):
                        return body
        return {}

    @abc.abstractmethod
    def served_models(self) -> set[str]:
        """The names and paths the server gives for the model it serves (empty when it names none)."""

    @abc.abstractmethod
    async def _tokenize(self, session, texts: list[str]) -> list[list[int]]:
        """The server's token ids of each text (no special tokens added); raises Failure, OSError,
        KeyError or ValueError when the server cannot tokenize (no tokenizer loaded)."""

    def check_served_model(self, model_path: str, profile_tokens) -> None:
        """Refuse to run when the server serves another model than --model, or its tokenizer maps the
        profile's special tokens to other ids than ours (where the server can tokenize)."""
        self.start()
        served = self.served_models() - {""}
        if served and not any(same_model(model_path, s) for s in served):
            raise EngineError(f"{self.urls[0]} serves {sorted(served)[0]!r}, not --model {model_path!r}; pass the "
                              "served model's path as --model (and its tokenizer as --tokenizer)")
        ours = profile_tokens.ids

        async def tokenize():
            import aiohttp

            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as s:
                return await self._tokenize(s, list(ours))

        try:
            served_ids = asyncio.run(tokenize())
        except (Failure, OSError, asyncio.TimeoutError, KeyError, ValueError, TypeError):
            return  # a server without a tokenizer (ids only): nothing more to check
        bad = {tok: (ours[tok], got) for tok, got in zip(ours, served_ids) if got != [ours[tok]]}
        if bad:
            shown = ", ".join(f"{t}: ours {a}, server {b}" for t, (a, b) in list(bad.items())[:4])
            raise EngineError(f"the served model's tokenizer differs from --tokenizer ({shown}); point both at "
                              "the same model")

    # -- streaming requests -------------------------------------------------------------------
    def stop(self) -> None:
        self._stop.set()

    def _stream(self, requests: Iterable, send: Callable[[Any, Any], Awaitable[Any]], name: str) -> Iterator:
        """Each request through `send(session, request)` (its retries included) with at most `concurrency` in
        flight, on an asyncio loop in a thread of its own; results come back through a bounded queue, in the
        order they finish. Stopping early (Ctrl-C, a consumer that breaks) stops sending."""
        self.start()
        try:
            yield from results_of_loop(lambda out: self._fan_out(requests, send, out, name),
                                       maxsize=4 * self.concurrency, name=name,
                                       on_stop=self._stop.set,       # Ctrl-C, SIGTERM or an early exit: stop sending
                                       on_abandon=self._abort_in_flight)
        except LoopFailed as e:
            raise EngineError(f"{self.name} client failed: {e.error}") from e.error
        finally:
            self._stop.clear()

    async def _fan_out(self, requests: Iterable, send: Callable[[Any, Any], Awaitable[Any]],
                       out: queue.Queue, name: str) -> None:
        """Send each request once a slot is free; `requests` is read by a Puller (it may block)."""
        import aiohttp

        connector = aiohttp.TCPConnector(limit=self.concurrency + 8, limit_per_host=self.concurrency + 8)
        timeout = aiohttp.ClientTimeout(total=self.retry.request_timeout_s, sock_connect=30)
        loop = asyncio.get_running_loop()
        end = object()
        pull = Puller(requests, end, f"{name}-pull")
        try:
            async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
                slots = asyncio.Semaphore(self.concurrency)
                tasks: set[asyncio.Task] = set()

                async def one(req):
                    try:
                        result = await send(session, req)
                        try:     # the consumer keeps up: no thread hop
                            out.put_nowait(result)
                        except queue.Full:      # it does not: wait for room without blocking the loop
                            await loop.run_in_executor(None, out.put, result)
                    finally:
                        slots.release()

                while True:
                    await slots.acquire()
                    req = end if self._stop.is_set() else await pull.next()
                    if req is end or self._stop.is_set():
                        slots.release()
                        break
                    t = asyncio.create_task(one(req))
                    tasks.add(t)
                    t.add_done_callback(tasks.discard)
                if tasks:
                    await asyncio.gather(*tasks)
        finally:
            pull.close()

    def score(self, requests: Iterable[ScoreRequest]) -> Iterator[ScoreResult]:
        """Prompt log-probs over the same servers, concurrency and retries as generation."""
        return self._stream(requests, self._score_one, f"{self.name}-score")

    async def _score_one(self, session, req: ScoreRequest) -> ScoreResult | RequestFailure:
        def read(url: str, answer: dict, _seconds: float) -> ScoreResult:
            try:
                return self._parse_score(req, answer)
            except ValueError as e:   # the same request would get the same answer: not retried
                raise Failure("bad_response", f"{url}: {e}", False) from None

        return await self._with_retries(session, req.input_ids, lambda rid: self._score_payload(req, rid), read,
                                        lambda f, attempts: f.gave_up(req.id, attempts), rid=req.id)

    @abc.abstractmethod
    def _score_payload(self, req: ScoreRequest, rid: str | None) -> bytes:
        """The body of a prefill-only request for `req`'s log-probs, sent as request `rid`, in the server's
        protocol."""

    @abc.abstractmethod
    def _parse_score(self, req: ScoreRequest, answer: dict) -> ScoreResult:
        """`req`'s result from the server's answer; ValueError when the answer does not answer it."""

    def in_flight(self) -> int:
        return sum(self.choice.in_flight.values())

    async def _with_retries(self, session, input_ids: list[int], payload: Callable[[str | None], bytes],
                            read: Callable[[str, dict, float], Any],
                            give_up: Callable[[Failure, int], Any], *, rid: str | None = None,
                            conversation: str | None = None) -> Any:
        """POST `payload(wire_rid)` (a request for `input_ids`, of `conversation` if any) to the server `self.choice`
        picks and return `read(url, answer, seconds)`; a retriable failure (raised by the request or by `read`) waits
        and tries again, on another server where there is one, up to max_attempts; then `give_up(failure, attempts)`
        is the result (a failure is data, not an exception: the run goes on). A prompt the model cannot embed is never
        sent (real servers crash on it): it fails at once, with 0 attempts.

        The request goes out under `rid` until a try times out. A timed-out request still runs on its server (it
        would generate up to max_new_tokens beside its own retry): it is aborted there at once, and the next tries
        go out under a fresh id (`retry_rid`), so that none is refused as a duplicate of one the abort has not
        ended yet."""
        problem = unembeddable(input_ids, self.vocab_size)
        if problem:
            return give_up(Failure("prompt_out_of_vocab", problem, False), 0)
        attempt, avoid, wire_rid = 0, None, rid
        while True:
            attempt += 1
            url = self.choice.pick(conversation, avoid)
            outcome = "request"     # how the try ended, for the choice: ok / server (its fault) / request
            sent_rid = wire_rid
            if sent_rid is not None:
                self._in_flight[sent_rid] = url
            t0 = time.perf_counter()
            try:
                answer = await self._post(session, url, payload(sent_rid), conversation)
                result = read(url, answer, time.perf_counter() - t0)
                outcome = "ok"
                return result
            except Failure as f:
                if f.retriable and f.reason != "duplicate_request_id":
                    outcome = "server"
                if f.reason == "timeout" and sent_rid is not None:
                    await self._abort_request(session, url, sent_rid)   # the last try's too: it runs on otherwise
                if not f.retriable or attempt >= self.retry.max_attempts or self._stop.is_set():
                    return give_up(f, attempt)
                if f.reason == "duplicate_request_id" and sent_rid is not None:
                    await self._abort_request(session, url, sent_rid)
                if f.reason == "timeout" and rid is not None:
                    wire_rid = retry_rid(rid, attempt + 1)
            finally:
                self.choice.done(url, conversation, outcome)
                if sent_rid is not None:
                    self._in_flight.pop(sent_rid, None)
            avoid = url if outcome == "server" else None
            await asyncio.sleep(self.retry.wait(attempt))

    async def _abort_request(self, session, url: str, rid: str) -> None:
        """Ask the server behind `url` to abort the request `rid` (one an earlier client left running, or one that
        timed out). A server without an abort endpoint (vLLM: its request ended when our connection closed) gets
        nothing."""
        await self._abort(session, await self._abort_targets(session, url), rid)

    async def _abort_targets(self, session, url: str) -> list[str]:
        """Where a request sent to `url` is aborted: the workers behind it when `url` is a router (sglang-router lists
        them at GET /workers and has no abort endpoint of its own), else `url` itself."""
        import aiohttp

        if self.abort_path is None:
            return []
        try:
            async with session.get(url + "/workers", timeout=aiohttp.ClientTimeout(total=ABORT_TIMEOUT_S)) as r:
                body = orjson.loads(await r.read()) if r.status == 200 else None
        except (aiohttp.ClientError, asyncio.TimeoutError, ConnectionError, orjson.JSONDecodeError):
            body = None
        workers = body.get("workers") if isinstance(body, dict) else None
        urls = [w["url"].rstrip("/") for w in workers or () if isinstance(w, dict) and isinstance(w.get("url"), str)]
        return urls or [url]

    async def _abort(self, session, urls: list[str], rid: str) -> None:
        """POST the abort of request `rid` to each of `urls` (best effort: an answer is read, not required)."""
        import aiohttp

        for url in urls:
            try:
                async with session.post(url + self.abort_path, json={"rid": rid},
                                        timeout=aiohttp.ClientTimeout(total=ABORT_TIMEOUT_S)) as r:
                    await r.read()
            except (aiohttp.ClientError, asyncio.TimeoutError, ConnectionError):
                pass

    def _abort_in_flight(self) -> None:
        """A run stopped early (Ctrl-C, SIGTERM, a consumer that broke off) leaves its in-flight requests running on
        the servers: abort each one where it runs (on every worker of a router), within ABORT_TIMEOUT_S, so that the
        rerun's requests, which carry the same ids, are not refused as duplicates of stale ones."""
        left = dict(self._in_flight)     # a copy: the client's loop thread may still be ending tries
        if not left or self.abort_path is None:
            return

        async def abort_all():
            import aiohttp

            async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=ABORT_TIMEOUT_S)) as session:
                targets = {url: await self._abort_targets(session, url) for url in set(left.values())}
                await asyncio.gather(*(self._abort(session, targets[url], rid) for rid, url in left.items()))

        try:
            asyncio.run(asyncio.wait_for(abort_all(), ABORT_TIMEOUT_S))
        except (asyncio.TimeoutError, OSError):
            pass

    async def _post(self, session, url: str, payload: bytes, conversation: str | None = None) -> dict[str, Any]:
        import aiohttp

        headers = {"Content-Type": "application/json"}
        if conversation is not None:     # a router's session key (server_choice.py); a plain server ignores it
            headers[ROUTING_KEY_HEADER] = conversation
        try:
            async with session.post(url + self.generate_path, data=payload, headers=headers) as r:
                raw = await r.read()
                if r.status != 200:
                    message = raw[:300].decode(errors="replace")
                    if r.status == 400 and DUPLICATE_RID in raw:
                        raise Failure("duplicate_request_id", f"{url} still runs an earlier request with this id "
                                      f"(a client stopped mid-request): {message}", True)
                    raise Failure(f"http_{r.status}", f"{url} answered HTTP {r.status}: {message}",
                                  r.status in RETRY_STATUS)
        except aiohttp.ConnectionTimeoutError as e:    # no connection in time: the server never had the request
            raise Failure("connection", f"{url}: {type(e).__name__}: {e}", True) from e
        except asyncio.TimeoutError as e:   # --request-timeout ran out with the request on the server
            raise Failure("timeout", f"{url}: no answer within --request-timeout "
                                     f"{self.retry.request_timeout_s:g} s; the request was aborted there", True) from e
        except (aiohttp.ClientError, ConnectionError) as e:
            raise Failure("connection", f"{url}: {type(e).__name__}: {e}", True) from e
        try:
            body = orjson.loads(raw)
        except orjson.JSONDecodeError as e:
            raise Failure("bad_response", f"{url} sent non-JSON: {e}", True) from e
        if isinstance(body, list):  # a batch answer to a single prompt would be a server bug
            raise Failure("bad_response", f"{url} answered a single request with a list", False)
        if not isinstance(body, dict):
            raise Failure("bad_response", f"{url} answered with a JSON {type(body).__name__}, not an object", True)
        return body
