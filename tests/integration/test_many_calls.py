"""Many calls in flight on one worker (service/webhook.c): the calls are spread
over curl multi handles of at most 256 calls each, so that starting the n-th
concurrent call to one webhook does not walk n connections. 600 calls held at
once by one worker need three of them; all finish, the idle ones are closed
with their connections (10 s after they emptied), and calls still work
afterwards.

The webhook here is a small asyncio HTTP/1.1 server (keep-alive) that holds
every call until the test releases it and counts its open connections: the
harness's threaded webhook polls per held call, too heavy for 600."""
import asyncio
import json
import threading

from harness import wait_until

HELD = 600


class HoldingWebhook:
    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.held = 0
        self.answered = 0
        self.open_conns = 0
        self._lock = threading.Lock()
        self._release = None
        ready = threading.Event()

        def run():
            asyncio.set_event_loop(self.loop)
            self._release = asyncio.Event()
            self.server = self.loop.run_until_complete(
                asyncio.start_server(self._conn, "127.0.0.1", 0, backlog=2048))
            self.port = self.server.sockets[0].getsockname()[1]
            ready.set()
            self.loop.run_forever()

        self.thread = threading.Thread(target=run, daemon=True)
        self.thread.start()
        assert ready.wait(10)

    def url(self):
        return "http://127.0.0.1:%d/steps" % self.port

    def count(self, name):
        with self._lock:
            return getattr(self, name)

    def _add(self, name, n):
        with self._lock:
            setattr(self, name, getattr(self, name) + n)

    def release(self, on):
        def flip():
            if on:
                self._release.set()
            else:
                self._release.clear()
        self.loop.call_soon_threadsafe(flip)

    async def _conn(self, reader, writer):
        self._add("open_conns", 1)
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                if length:
                    await reader.readexactly(length)
                self._add("held", 1)
                await self._release.wait()
                body = json.dumps({"outcome": "succeed", "result": None}).encode()
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                             b"Content-Length: %d\r\n\r\n%s" % (len(body), body))
                await writer.drain()
                self._add("answered", 1)
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            self._add("open_conns", -1)
            writer.close()

    async def _shutdown(self):
        self.server.close()
        tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    def close(self):
        asyncio.run_coroutine_threadsafe(self._shutdown(), self.loop).result(10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)
        self.loop.close()


def _succeeded(db, prefix):
    return int(db.scalar("SELECT count(*) FROM run WHERE run_id LIKE '%s%%' "
                         "AND status = 'succeeded'" % prefix))


def test_one_worker_holds_hundreds_of_calls_and_closes_the_idle_multis(services, db):
    hook = HoldingWebhook()
    try:
        svc = services.start(HOOKFLOW_WORKERS="1", HOOKFLOW_MAX_INFLIGHT="1000")
        api = svc.api
        r = api.put("/v1/workflows/hold", {"url": hook.url(), "timeout_ms": 120000})
        assert r.status in (200, 201), r.text
        for i in range(HELD):
            r = api.post("/v1/runs", {"workflow": "hold", "run_id": "a%d" % i, "input": {}})
            assert r.status == 201, r.text
        wait_until(lambda: hook.count("held") == HELD, timeout=60, interval=0.1,
                   message="%d calls held at once by the webhook" % HELD)
        assert hook.count("open_conns") >= HELD

        hook.release(True)
        wait_until(lambda: _succeeded(db, "a") == HELD, timeout=60, interval=0.2,
                   message="every held run succeeded")
        # The two shards above the first close 10 s after they emptied; the
        # first keeps at most 256 idle connections.
        wait_until(lambda: hook.count("open_conns") <= 256, timeout=60, interval=0.2,
                   message="idle connections of the emptied multis closed")

        for i in range(20):
            r = api.post("/v1/runs", {"workflow": "hold", "run_id": "b%d" % i, "input": {}})
            assert r.status == 201, r.text
        wait_until(lambda: _succeeded(db, "b") == 20, timeout=30, interval=0.1,
                   message="runs submitted after the multis closed succeeded")
    finally:
        hook.close()
