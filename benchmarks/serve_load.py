"""Load on ``tamperbench serve``: 32 concurrent clients vs one client at a time, same requests.

Starts the server on 127.0.0.1 over the embedded model in a subprocess, then runs
(1) one client sending requests one after another, (2) 32 clients at once, each sending requests
until it has done its share or 60 s have passed. Prints p50 / p95 latency, generated tokens/s and
errors for both, and the throughput ratio. The server batches concurrent requests as rows of one
step decoder, so the ratio is the batching gain.

    .venv/bin/python benchmarks/serve_load.py [--clients 32 --per-client 2 --max-tokens 16]

``--abandon N`` measures instead: N clients send ``max_tokens`` 4096 and disconnect after
``--abandon-after`` seconds; then one 2-token request is timed, and the server's resident memory is read
(``/proc/PID/status``) before, at the peak, and a few seconds after. The server drops abandoned rows, so
the short request must be answered within a few seconds and memory return within 10% of the start.

    .venv/bin/python benchmarks/serve_load.py --abandon 20
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import threading
import time

PROMPTS = ["what causes the phases of the moon?", "what is the capital of Australia?", "why is the sky blue?",
           "how do plants make food?", "what is the largest planet?", "who wrote Hamlet?"]


def start_server(max_batch: int = 32) -> tuple[subprocess.Popen, str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "tamperbench.cli", "serve", "--port", "0", "--max-batch", str(max_batch)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    while True:
        line = proc.stdout.readline()
        if line.startswith("serving "):
            return proc, line.split(" at ", 1)[1].split(" ", 1)[0]
        if not line and proc.poll() is not None:
            raise SystemExit(f"server did not start: {proc.stderr.read()}")


def one(client, i: int, max_tokens: int) -> tuple[float, int]:
    t = time.perf_counter()
    r = client.chat.completions.create(model="embedded", max_tokens=max_tokens,
                                       messages=[{"role": "user", "content": PROMPTS[i % len(PROMPTS)]}])
    return time.perf_counter() - t, r.usage.completion_tokens


def summary(name: str, lat: list[float], tokens: int, wall: float, errors: int) -> float:
    q = statistics.quantiles(lat, n=20) if len(lat) > 1 else lat * 19
    tps = tokens / wall
    print(f"{name:>12}: {len(lat)} requests, p50 {statistics.median(lat):6.2f} s, p95 {q[18]:6.2f} s, "
          f"{tps:6.1f} generated tokens/s, {errors} errors, {wall:.1f} s wall")
    return tps


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmRSS:")) / 1024


def abandon(n: int, after_s: float, max_batch: int) -> None:
    """N long requests that disconnect, then one short request timed; memory before, peak, after."""
    import openai

    proc, url = start_server(max_batch)
    try:
        host, port = url.split("//", 1)[1].split("/", 1)[0].rsplit(":", 1)
        client = openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=600)
        one(client, 0, 2)  # warm-up
        start = rss_mb(proc.pid)
        body = json.dumps({"model": "embedded", "max_tokens": 4096,
                           "messages": [{"role": "user", "content": "Write a very long story about the sea."}]}).encode()
        socks = []
        for _ in range(n):
            s = socket.create_connection((host, int(port)))
            s.sendall(f"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
            socks.append(s)
        peak, t_end = start, time.perf_counter() + after_s
        while time.perf_counter() < t_end:
            peak = max(peak, rss_mb(proc.pid))
            time.sleep(0.1)
        for s in socks:
            s.close()
        t = time.perf_counter()
        dt, n_tok = one(client, 1, 2)
        short = time.perf_counter() - t
        time.sleep(3)
        after = rss_mb(proc.pid)
        print(f"{n} abandoned requests (max_tokens 4096, disconnected after {after_s:.0f} s), max batch {max_batch}")
        print(f"short request (2 tokens) after them: {short:.2f} s, {n_tok} tokens")
        print(f"server RSS: start {start:.0f} MB, peak {peak:.0f} MB, 3 s after the short request {after:.0f} MB "
              f"({100 * (after - start) / start:+.1f}% of start)")
        if short > 10 or after > 1.10 * start:
            raise SystemExit(1)
    finally:
        proc.kill()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--abandon", type=int, default=0, help="run the abandon test with this many long requests")
    ap.add_argument("--abandon-after", type=float, default=5.0)
    ap.add_argument("--max-batch", type=int, default=32)
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--per-client", type=int, default=2)
    ap.add_argument("--sequential", type=int, default=8)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--limit-s", type=float, default=60.0)
    a = ap.parse_args()
    if a.abandon:
        return abandon(a.abandon, a.abandon_after, a.max_batch)
    import openai

    proc, url = start_server(a.max_batch)
    try:
        client = openai.OpenAI(base_url=url, api_key="unused", max_retries=0, timeout=120)
        one(client, 0, 2)  # warm-up
        lat, toks, t0 = [], 0, time.perf_counter()
        for i in range(a.sequential):
            dt, n = one(client, i, a.max_tokens)
            lat.append(dt)
            toks += n
        seq_tps = summary("one client", lat, toks, time.perf_counter() - t0, 0)
        lock, clat, ctoks, errors = threading.Lock(), [], [0], [0]
        deadline = time.perf_counter() + a.limit_s

        def worker(c: int) -> None:
            for k in range(a.per_client):
                if time.perf_counter() > deadline:
                    return
                try:
                    dt, n = one(client, c * a.per_client + k, a.max_tokens)
                except Exception as err:  # noqa: BLE001 - counted and printed, the benchmark goes on
                    with lock:
                        errors[0] += 1
                    print(f"error: {type(err).__name__}: {err}", file=sys.stderr)
                    continue
                with lock:
                    clat.append(dt)
                    ctoks[0] += n

        t0 = time.perf_counter()
        threads = [threading.Thread(target=worker, args=(c,)) for c in range(a.clients)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        par_tps = summary(f"{a.clients} clients", clat, ctoks[0], time.perf_counter() - t0, errors[0])
        print(f"throughput ratio ({a.clients} clients / one client): {par_tps / seq_tps:.2f}x")
        if errors[0]:
            raise SystemExit(1)
    finally:
        proc.kill()


if __name__ == "__main__":
    main()
