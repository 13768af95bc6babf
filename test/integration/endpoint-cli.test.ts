import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { runCaptured } from '../harness/cli.js';
import { onCleanup } from '../harness/cleanup.js';
import { cleanedQueueName, connect, redisUrl } from '../harness/redis.js';

/** Runs the CLI in this process against the run's Redis, capturing stdout and stderr. */
const requeue = (...args: string[]) => runCaptured(...args, '--redis', redisUrl());

describe('requeue endpoint create|update|show|delete', () => {
  it('registers an endpoint, shows it without its secrets, updates and deletes it', async () => {
    const redis = connect();
    onCleanup(() => redis.quit());
    const queue = cleanedQueueName(redis, 'ep-cli');
    const secret = `whsec_${randomBytes(32).toString('base64')}`;
    const created = await requeue(
      'endpoint',
      'create',
      'ep-1',
      '--queue',
      queue,
      '--url',
      'http://127.0.0.1:9/hook',
      '--types',
      'invoice.*,user.created',
      '--secret',
      secret,
      '--rate-limit',
      '5',
      '--header',
      'x-api-key: k-123456789',
      '--metadata',
      'owner=billing',
      '--allow-private',
    );
    expect(created).toMatchObject({ code: 0, stdout: `created ep-1 in ${queue}\n` });
    const shown = await requeue('endpoint', 'show', 'ep-1', '--queue', queue, '--json');
    expect(shown.code).toBe(0);
    expect(shown.stdout).not.toContain(secret);
    expect(shown.stdout).not.toContain('k-123456789');
    expect(JSON.parse(shown.stdout)).toMatchObject({
      id: 'ep-1',
      types: ['invoice.*', 'user.created'],
      rateLimit: { perSecond: 5 },
      secrets: ['[redacted]'],
      metadata: { owner: 'billing' },
    });
    const updated = await requeue(
      'endpoint',
      'update',
      'ep-1',
      '--queue',
      queue,
      '--rate-limit',
      '2',
      '--burst',
      '4',
      '--clear',
      'types',
      '--json',
    );
    expect(updated.code).toBe(0);
    expect(JSON.parse(updated.stdout)).toMatchObject({ rateLimit: { perSecond: 2, burst: 4 } });
    expect(JSON.parse(updated.stdout).types).toBeUndefined();
    const listed = await requeue('endpoint', 'list', queue, '--registered');
    expect(listed.stdout).toMatch(
      /^ENDPOINT\s+URL\s+TYPES\s+RATE\/S\nep-1\s+http:\/\/127\.0\.0\.1:9\/hook\s+\*\s+2\n$/,
    );
    expect(await requeue('endpoint', 'delete', 'ep-1', '--queue', queue)).toMatchObject({
      code: 0,
      stdout: 'deleted ep-1\n',
    });
    const gone = await requeue('endpoint', 'show', 'ep-1', '--queue', queue);
    expect(gone).toMatchObject({ code: 2, stderr: `requeue: no endpoint "ep-1" in ${queue}\n` });
  });

  it('answers a bad field with one line naming it', async () => {
    const redis = connect();
    onCleanup(() => redis.quit());
    const queue = cleanedQueueName(redis, 'ep-cli');
    const cases: [string[], RegExp][] = [
      [['--url', 'ftp://x.example/'], /^requeue: endpoint\.url: must be an http\(s\) URL\n$/],
      [
        ['--url', 'http://127.0.0.1/'],
        /^requeue: endpoint\.url: refused to connect to 127\.0\.0\.1: .*\n$/,
      ],
      [
        ['--url', 'http://127.0.0.1/', '--allow-private', '--secret', 'whsec_c2hvcnQ='],
        /^requeue: endpoint\.secrets\.0: must decode to 24–64 bytes, got \d+\n$/,
      ],
      [
        ['--url', 'http://127.0.0.1/', '--allow-private', '--types', `${'t'.repeat(201)}`],
        /^requeue: endpoint\.types\.0: must be 1–200 visible ASCII characters\n$/,
      ],
      [
        ['--url', 'http://127.0.0.1/', '--allow-private', '--rate-limit', 'fast'],
        /^requeue: --rate-limit: expected a number, got "fast"\n$/,
      ],
      [
        ['--url', 'http://127.0.0.1/', '--allow-private', '--types', 'a*b'],
        /^requeue: endpoint\.types\.0: a wildcard must be "\*" or end a filter as "\.\*"/,
      ],
    ];
    for (const [flags, message] of cases) {
      const run = await requeue('endpoint', 'create', 'ep', '--queue', queue, ...flags);
      expect(run.code, flags.join(' ')).toBe(2);
      expect(run.stderr, flags.join(' ')).toMatch(message);
    }
  });
});
