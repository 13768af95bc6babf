#!/usr/bin/env python3
"""The contention scenario of `requeue simulate`, ported to Python as one
would write it to be fast: the reference the TypeScript simulator's speed is
measured against (bench/simulate.bench.ts; contention_plain.py is the
object-per-client version the bench used before, kept for comparison).

Same model as src/simulate/contention.ts: N clients each read the row's
version, then write it with that version; a stale write fails and its client
backs off by its strategy (requeue's formulas, retry index from 0) and starts
over with a fresh read. Every message takes |normal(10, 2)| ms, drawn by
Box-Muller from two uniforms as requeue's standardNormal does. Each client
has one event pending, as in requeue's ClientAgenda: handling it and
scheduling the client's next is one heapreplace.

Written for speed, fairly: one heapq agenda of plain tuples
(time, order, kind, client, arg), no object per event or per client
(per-client state in lists), hot names bound to locals, the message delay
inlined, the strategy picked once per trial. Python's Mersenne Twister
supplies the uniforms, so the figures agree with requeue's in distribution,
not digit for digit.

Usage: contention.py [clients] [trials] [seed]; prints one JSON object.
"""
import heapq
import json
import math
import random
import sys

BASE_MS = 5.0
CAP_MS = 2000.0
FACTOR = 2.0
NET_MEAN_MS = 10.0
NET_SD_MS = 2.0

READ_AT_SERVER, READ_REPLY, WRITE_AT_SERVER, WRITE_REPLY = 0, 1, 2, 3


def run_trial(strategy, clients, rng):
    """One trial: (calls, time of the last success, events)."""
    rand = rng.random
    log, sqrt, cos, two_pi = math.log, math.sqrt, math.cos, 2 * math.pi
    replace, pop = heapq.heapreplace, heapq.heappop
    mean, sd, base, cap, factor = NET_MEAN_MS, NET_SD_MS, BASE_MS, CAP_MS, FACTOR

    retries = [0] * clients
    previous = [base] * clients
    agenda = []
    for client in range(clients):
        d = abs(mean + sd * sqrt(-2.0 * log(1.0 - rand())) * cos(two_pi * rand()))
        agenda.append((d, client, READ_AT_SERVER, client, 0))
    heapq.heapify(agenda)
    order = clients
    version = calls = done = 0
    while agenda:
        now, _, kind, client, arg = agenda[0]
        if kind == WRITE_REPLY and arg == 1:
            done += 1
            if done == clients:
                return calls, now, order
            pop(agenda)
            continue
        order += 1
        d = abs(mean + sd * sqrt(-2.0 * log(1.0 - rand())) * cos(two_pi * rand()))
        if kind == READ_AT_SERVER:
            replace(agenda, (now + d, order, READ_REPLY, client, version))
        elif kind == READ_REPLY:
            replace(agenda, (now + d, order, WRITE_AT_SERVER, client, arg))
        elif kind == WRITE_AT_SERVER:
            calls += 1
            if arg == version:
                version += 1
                replace(agenda, (now + d, order, WRITE_REPLY, client, 1))
            else:
                replace(agenda, (now + d, order, WRITE_REPLY, client, 0))
        else:
            retry = retries[client]
            if strategy == 0:  # exponential
                wait = min(cap, base * factor**retry)
            elif strategy == 1:  # full jitter
                wait = rand() * min(cap, base * factor**retry)
            elif strategy == 2:  # equal jitter
                half = min(cap, base * factor**retry) / 2
                wait = half + rand() * half
            else:  # decorrelated jitter
                wait = min(cap, base + rand() * (previous[client] * 3 - base))
            retries[client] = retry + 1
            previous[client] = wait
            replace(agenda, (now + wait + d, order, READ_AT_SERVER, client, 0))
    raise RuntimeError("contention: the agenda ran dry before every client wrote")


STRATEGIES = ["exponential", "full-jitter", "equal-jitter", "decorrelated-jitter"]


def main():
    clients = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    trials = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 7
    results = []
    for index, name in enumerate(STRATEGIES):
        calls = time_ms = events = 0
        for t in range(trials):
            rng = random.Random(seed * 1_000_003 + index * 10_007 + t)
            c, ms, n = run_trial(index, clients, rng)
            calls += c
            time_ms += ms
            events += n
        results.append(
            {"strategy": name, "calls": calls / trials, "timeMs": time_ms / trials, "events": events}
        )
    print(json.dumps({"scenario": "contention", "strategies": results}))


if __name__ == "__main__":
    main()
