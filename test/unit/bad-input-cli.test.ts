import { createServer, type AddressInfo, type Server, type Socket } from 'node:net';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import type { Redis } from 'ioredis';
import { bullPrefixOf, cleanedQueueName, connect, redisUrl } from '../harness/redis.js';
import { runCli } from '../../src/cli/program.js';
import { cliCases, setMuteUrl, redisCliCases } from './bad-input-cli-cases.js';

/**
 * The bad-input table's CLI rows, run in process (the rest of the table is
 * `bad-input.test.ts`): each refused with exit 2 and one line on stderr.
 */

describe('the bad-input table: CLI flags (in process)', () => {
  let stderr: string;
  beforeAll(() => {
    vi.spyOn(process.stderr, 'write').mockImplementation((chunk: string | Uint8Array) => {
      stderr += String(chunk);
      return true;
    });
    vi.spyOn(process.stdout, 'write').mockImplementation(() => true);
  });
  afterAll(() => vi.restoreAllMocks());

  it.each(cliCases)('%s', async (_label, args, message) => {
    stderr = '';
    const code = await runCli(['node', 'requeue', ...args]);
    expect(code, stderr).toBe(2);
    const lines = stderr.trimEnd().split('\n');
    expect(lines, stderr).toHaveLength(1);
    expect(lines[0]).toMatch(message);
  });
});

describe('the bad-input table: CLI against Redis (in process)', () => {
  let output: string;
  let admin: Redis;
  let mute: Server;
  const muteSockets = new Set<Socket>();
  beforeAll(async () => {
    admin = connect();
    mute = createServer((socket) => {
      muteSockets.add(socket.on('error', () => undefined));
    });
    await new Promise<void>((resolve) => mute.listen(0, '127.0.0.1', resolve));
    setMuteUrl(`redis://:mute-s3cret@127.0.0.1:${(mute.address() as AddressInfo).port}`);
    for (const stream of [process.stdout, process.stderr])
      vi.spyOn(stream, 'write').mockImplementation((chunk: string | Uint8Array) => {
        output += String(chunk);
        return true;
      });
  });
  afterAll(async () => {
    vi.restoreAllMocks();
    admin.disconnect();
    for (const socket of muteSockets) socket.destroy();
    await new Promise<void>((resolve) => mute.close(() => resolve()));
  });

  it.each(redisCliCases)('%s', async (_label, args, exitCode, message) => {
    output = '';
    // Each row's queue is known (one BullMQ key), as a typo of it is not.
    const queue = cleanedQueueName(admin, 'bad-input');
    await admin.hset(`${bullPrefixOf(admin, queue)}:${queue}:meta`, 'version', 'bad-input');
    const given = args(queue);
    const withRedis = given.includes('--redis') ? given : [...given, '--redis', redisUrl()];
    const code = await runCli(['node', 'requeue', ...withRedis]);
    expect(code, output).toBe(exitCode);
    const lines = output.trimEnd().split('\n');
    expect(lines, output).toHaveLength(1);
    expect(lines[0]).toMatch(message);
    expect(output).not.toContain('mute-s3cret');
  });
});
