import { describe, expect, it, vi } from 'vitest';
import { runCli } from '../../src/cli/program.js';
import { onCleanup } from '../harness/cleanup.js';
import { cleanedQueueName, connect, redisUrl } from '../harness/redis.js';

/** Runs the CLI in this process, capturing stdout and stderr. */
async function requeue(...args: string[]) {
  let stdout = '';
  let stderr = '';
  const out = vi.spyOn(process.stdout, 'write').mockImplementation((c) => {
    stdout += String(c);
    return true;
  });
  const err = vi.spyOn(process.stderr, 'write').mockImplementation((c) => {
    stderr += String(c);
    return true;
  });
  try {
    const code = await runCli(['node', 'requeue', ...args, '--redis', redisUrl()]);
    return { code, stdout, stderr };
  } finally {
    out.mockRestore();
    err.mockRestore();
  }
}

/**
 * Issue 24, item 2's CLI: `endpoint create --queue` beside the older
 * `endpoint list|enable|disable <queue> <id>`. Every endpoint command takes
 * both forms — the positional one is a contract, the flag defaults to
 * `webhooks` — and a clash of the two is one line naming `--queue`.
 */
describe('requeue endpoint: <queue> <id> and <id> --queue <queue>, everywhere', () => {
  it('creates, shows, updates, lists, disables, enables and deletes by either form', async () => {
    const redis = connect();
    onCleanup(() => redis.quit());
    const q = cleanedQueueName(redis, 'ep-forms');
    const url = ['--url', 'http://127.0.0.1:9/hook', '--allow-private'];

    expect(await requeue('endpoint', 'create', q, 'ep-a', ...url)).toMatchObject({
      code: 0,
      stdout: `created ep-a in ${q}\n`,
    });
    expect(await requeue('endpoint', 'create', 'ep-b', '--queue', q, ...url)).toMatchObject({
      code: 0,
      stdout: `created ep-b in ${q}\n`,
    });
    for (const form of [
      [q, 'ep-a'],
      ['ep-a', '--queue', q],
    ]) {
      const shown = await requeue('endpoint', 'show', ...form, '--json');
      expect(JSON.parse(shown.stdout)).toMatchObject({ id: 'ep-a' });
    }
    expect(await requeue('endpoint', 'update', q, 'ep-a', '--types', 'a.*')).toMatchObject({
      code: 0,
      stdout: `updated ep-a in ${q}\n`,
    });
    expect(
      await requeue('endpoint', 'update', 'ep-b', '--queue', q, '--rate-limit', '5'),
    ).toMatchObject({ code: 0, stdout: `updated ep-b in ${q}\n` });
    for (const form of [[q], ['--queue', q]]) {
      const listed = await requeue('endpoint', 'list', ...form, '--registered', '--json');
      expect(JSON.parse(listed.stdout).map((e: { id: string }) => e.id)).toEqual(['ep-a', 'ep-b']);
    }

    expect(await requeue('endpoint', 'disable', 'ep-a', '--queue', q)).toMatchObject({
      code: 0,
      stdout: 'disabled ep-a\n',
    });
    expect(JSON.parse((await requeue('endpoint', 'list', q, '--json')).stdout)).toEqual([
      expect.objectContaining({ endpointId: 'ep-a' }),
    ]);
    expect(await requeue('endpoint', 'enable', q, 'ep-a')).toMatchObject({
      code: 0,
      stdout: 'enabled ep-a\n',
    });
    expect(await requeue('endpoint', 'disable', q, 'ep-b', '--reason', 'asked')).toMatchObject({
      code: 0,
      stdout: 'disabled ep-b\n',
    });
    expect(await requeue('endpoint', 'enable', 'ep-b', '--queue', q)).toMatchObject({
      code: 0,
      stdout: 'enabled ep-b\n',
    });

    expect(await requeue('endpoint', 'delete', q, 'ep-a')).toMatchObject({
      stdout: 'deleted ep-a\n',
    });
    expect(await requeue('endpoint', 'delete', 'ep-b', '--queue', q)).toMatchObject({
      stdout: 'deleted ep-b\n',
    });
  });

  it('defaults --queue to webhooks, and refuses two different queues in one line', async () => {
    const missing = await requeue('endpoint', 'show', 'ep-none-anywhere-x1');
    expect(missing).toMatchObject({ code: 2 });
    expect(missing.stderr.trim()).toMatch(/no endpoint "ep-none-anywhere-x1" in webhooks$/);

    const clash = await requeue('endpoint', 'disable', 'q-one', 'ep-a', '--queue', 'q-two');
    expect(clash.code).toBe(2);
    expect(clash.stderr.trim().split('\n')).toHaveLength(1);
    expect(clash.stderr).toMatch(/--queue: "q-two" and the positional queue "q-one" differ/);
    const list = await requeue('endpoint', 'list', 'q-one', '--queue', 'q-two');
    expect(list.code).toBe(2);
    expect(list.stderr).toMatch(/--queue/);
  });
});
