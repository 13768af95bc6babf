/**
 * Helpers for tests that stop real requeue processes: waiting for what a
 * child prints or for its handler to start, a Redis that can be frozen, an
 * endpoint that never answers.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { TsChild } from './child.js';
import { onCleanup } from './cleanup.js';
import { connect, startRedisServer, type RedisServerHandle } from './redis.js';

/** Resolves when the child has printed `text`; rejects if it exits first. */
export function printed(child: TsChild, text: string, timeoutMs = 30_000): Promise<void> {
  return new Promise((resolve, reject) => {
    const stdout = child.proc.stdout!;
    const timer = setTimeout(
      () => fail(`did not print "${text}" within ${timeoutMs} ms`),
      timeoutMs,
    );
    const check = (): void => {
      if (!child.stdout().includes(text)) return;
      stdout.off('data', check);
      clearTimeout(timer);
      resolve();
    };
    function fail(why: string): void {
      stdout.off('data', check);
      clearTimeout(timer);
      reject(new Error(`${why}\nstdout:\n${child.stdout()}\nstderr:\n${child.stderr()}`));
    }
    stdout.on('data', check);
    void child.exited.then((exit) => fail(`exited (${exit.signal ?? exit.code}) first`));
    check();
  });
}

/** Resolves when a handler has pushed to the list `marker` on the run's Redis. */
export async function handlerStarted(child: TsChild, marker: string): Promise<void> {
  const blocking = connect();
  try {
    const popped = await Promise.race([
      blocking.blpop(marker, 30),
      child.exited.then((exit) => {
        throw new Error(`exited (${exit.signal ?? exit.code}): ${child.stderr()}`);
      }),
    ]);
    if (!popped) throw new Error(`no handler started within 30 s\n${child.stdout()}`);
  } finally {
    blocking.disconnect();
  }
}

/** A private redis-server for one test, stopped after it (resumed first if frozen). */
export async function privateRedis(): Promise<RedisServerHandle & { freeze(): Promise<void> }> {
  const server = await startRedisServer({ appendonly: false });
  let frozenPid: number | undefined;
  onCleanup(async () => {
    if (frozenPid !== undefined) process.kill(frozenPid, 'SIGCONT');
    await server.kill();
  });
  return {
    ...server,
    /** SIGSTOPs the server: connections stay open and nothing answers, like a hung host. */
    freeze: async () => {
      const probe = connect(server.url);
      try {
        const info = await probe.info('server');
        frozenPid = Number(/process_id:(\d+)/.exec(info)?.[1]);
      } finally {
        probe.disconnect();
      }
      process.kill(frozenPid, 'SIGSTOP');
    },
  };
}

/** An HTTP endpoint that accepts webhook deliveries and never answers them. */
export async function silentEndpoint(): Promise<{
  url: string;
  received: Promise<IncomingMessage>;
}> {
  let onRequest!: (request: IncomingMessage) => void;
  const received = new Promise<IncomingMessage>((resolve) => (onRequest = resolve));
  const server: Server = createServer((request) => onRequest(request));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  onCleanup(
    () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  );
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}/hook`, received };
}
