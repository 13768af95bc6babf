import { createServer, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runTs } from '../harness/child.js';

/**
 * Issue 21, part 4: a Redis that accepts connections and never answers hung
 * `requeue stats`, `enqueue`, `dlq …`, `doctor` and the service's start for
 * 40–60 s or for ever. Each command and each process start, run as a real
 * process against a real mute server on loopback, must now end with exit
 * code 2 and one line naming the address (not its password), no stack.
 */
describe('a Redis that accepts and never answers', () => {
  let server: Server;
  const sockets = new Set<Socket>();
  let url: string;
  let address: string;
  const password = 'mute-redis-s3cret';
  const timeoutMs = 1_000;

  beforeAll(async () => {
    // Accepts, never reads, never writes: what a hung Redis or a black-holing proxy looks like.
    server = createServer((socket) => {
      sockets.add(socket);
      socket.on('error', () => undefined);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as { port: number };
    address = `127.0.0.1:${port}`;
    url = `redis://:${password}@${address}`;
  });

  afterAll(async () => {
    for (const socket of sockets) socket.destroy();
    await new Promise<void>((resolve) => server.close(() => resolve()));
  });

  const env = (): Record<string, string> => ({
    REDIS_URL: url,
    REDIS_CONNECT_TIMEOUT_MS: String(timeoutMs),
  });

  const cli = (...args: string[]): [string, () => [string, string[]]] => [
    `requeue ${args.join(' ')}`,
    () => ['src/cli/main.ts', args],
  ];

  const cases: [string, () => [string, string[]]][] = [
    cli('stats', 'q'),
    cli('enqueue', 'q', '--data', '{}'),
    cli('dlq', 'list', 'q'),
    cli('dlq', 'show', 'q', 'x'),
    cli('dlq', 'count', 'q'),
    cli('dlq', 'replay', 'q', '--all'),
    cli('dlq', 'purge', 'q', '--all'),
    cli('dlq', 'trim', 'q'),
    cli('breaker', 'status', 'q'),
    cli('breaker', 'open', 'q'),
    cli('endpoint', 'list', 'q'),
    cli('doctor'),
    cli('worker', 'q', '--handler', 'examples/flaky-handler.mjs'),
    ['the service (npm start)', () => ['workers/service/main.ts', []]],
    ['the webhook worker', () => ['workers/webhook/main.ts', []]],
  ];

  it.each(cases)('%s hung; it exits 2 with one line naming the address', async (_label, what) => {
    const [script, args] = what();
    // Killed (and failed) after 20 s: before the fix every one of these outlived 60 s.
    const result = await runTs(script, args, env(), 20_000);
    expect(result.code, result.stderr).toBe(2);
    const lines = result.stderr.trimEnd().split('\n');
    expect(lines, result.stderr).toHaveLength(1);
    expect(lines[0]).toContain(address);
    expect(lines[0]).toMatch(new RegExp(`no reply from Redis at .* within ${timeoutMs} ms`));
    expect(result.stderr).not.toContain(password);
    expect(result.stderr).not.toMatch(/^\s+at /m);
  });

  it('the stream worker hung; it exits 2 with one line naming the address', async () => {
    const result = await runTs(
      'workers/stream/main.ts',
      [],
      { ...env(), STREAM: 's', GROUP: 'g', HANDLER: 'test/fixtures/stream-counting-handler.ts' },
      20_000,
    );
    expect(result.code, result.stderr).toBe(2);
    const lines = result.stderr.trimEnd().split('\n');
    expect(lines, result.stderr).toHaveLength(1);
    expect(lines[0]).toContain(address);
    expect(result.stderr).not.toContain(password);
  });

  it('--connect-timeout-ms wins over the environment, and is named when it is wrong', async () => {
    const quick = await runTs(
      'src/cli/main.ts',
      ['stats', 'q', '--connect-timeout-ms', '300'],
      env(),
    );
    expect(quick.code, quick.stderr).toBe(2);
    expect(quick.stderr).toMatch(/within 300 ms/);
    const bad = await runTs('src/cli/main.ts', ['stats', 'q', '--connect-timeout-ms', '0'], env());
    expect(bad.code, bad.stderr).toBe(2);
    expect(bad.stderr.trimEnd()).toBe('requeue: --connect-timeout-ms: must be ≥ 1, got 0');
  });
});
