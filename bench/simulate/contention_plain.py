#!/usr/bin/env python3
"""The contention scenario of `requeue simulate`, written the straightforward
way in Python: the reference the TypeScript simulator's speed is measured
against (bench/simulate.bench.ts). Same model: N clients each read the row's
version, then write it with that version; a stale write fails and its client
backs off and starts over. Every message takes |normal(10, 2)| ms. The
strategies are requeue's formulas with the retry index starting at 0.

Usage: contention.py [clients] [trials] [seed]; prints one JSON object.
"""
import heapq
import json
import random
import sys

BASE_MS = 5.0
CAP_MS = 2000.0
FACTOR = 2.0
NET_MEAN_MS = 10.0
NET_SD_MS = 2.0


def ceiling(retry):
    return min(CAP_MS, BASE_MS * FACTOR**retry)


def exponential(retry, previous, rng):
    return ceiling(retry)


def full_jitter(retry, previous, rng):
    return rng.uniform(0, ceiling(retry))


def equal_jitter(retry, previous, rng):
    half = ceiling(retry) / 2
    return half + rng.uniform(0, half)


def decorrelated_jitter(retry, previous, rng):
    prev = BASE_MS if previous is None else previous
    return min(CAP_MS, rng.uniform(BASE_MS, prev * 3))


STRATEGIES = {
    "exponential": exponential,
    "full-jitter": full_jitter,
    "equal-jitter": equal_jitter,
    "decorrelated-jitter": decorrelated_jitter,
}


class Simulation:
    def __init__(self, rng):
        self.rng = rng
        self.events = []
        self.counter = 0
        self.processed = 0

    def delay(self):
        return abs(self.rng.gauss(NET_MEAN_MS, NET_SD_MS))

    def schedule(self, at, action, *args):
        self.counter += 1
        heapq.heappush(self.events, (at, self.counter, action, args))

    def run(self):
        while self.events:
            now, _, action, args = heapq.heappop(self.events)
            self.processed += 1
            if action(now, *args):
                return now
        raise RuntimeError("ran dry")


class Server:
    def __init__(self, sim):
        self.sim = sim
        self.version = 0
        self.calls = 0

    def read(self, now, client):
        self.sim.schedule(now + self.sim.delay(), client.on_read, self.version)

    def write(self, now, client, version):
        self.calls += 1
        fresh = version == self.version
        if fresh:
            self.version += 1
        self.sim.schedule(now + self.sim.delay(), client.on_write, fresh)


class Client:
    def __init__(self, sim, server, strategy, rng, world):
        self.sim = sim
        self.server = server
        self.strategy = strategy
        self.rng = rng
        self.world = world
        self.retry = 0
        self.previous = None

    def start(self, now):
        self.sim.schedule(now + self.sim.delay(), self.server.read, self)

    def on_read(self, now, version):
        self.sim.schedule(now + self.sim.delay(), self.server.write, self, version)

    def on_write(self, now, fresh):
        if fresh:
            self.world["done"] += 1
            return self.world["done"] == self.world["clients"]
        wait = self.strategy(self.retry, self.previous, self.rng)
        self.retry += 1
        self.previous = wait
        self.start(now + wait)
        return False


def trial(strategy, clients, seed):
    rng = random.Random(seed)
    sim = Simulation(rng)
    server = Server(sim)
    world = {"done": 0, "clients": clients}
    for _ in range(clients):
        Client(sim, server, strategy, rng, world).start(0.0)
    time_ms = sim.run()
    return server.calls, time_ms, sim.processed


def main():
    clients = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    trials = int(sys.argv[2]) if len(sys.argv) > 2 else 100
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 7
    results = []
    for index, (name, strategy) in enumerate(STRATEGIES.items()):
        calls = time_ms = events = 0
        for t in range(trials):
            c, ms, n = trial(strategy, clients, seed * 1_000_003 + index * 10_007 + t)
            calls += c
            time_ms += ms
            events += n
        results.append(
            {"strategy": name, "calls": calls / trials, "timeMs": time_ms / trials, "events": events}
        )
    print(json.dumps({"scenario": "contention", "strategies": results}))


if __name__ == "__main__":
    main()
