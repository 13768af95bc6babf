/**
 * Docs cannot rot: every code block in README.md and docs/*.md marked
 * `<!-- runnable -->` (on the line before its fence) runs here, as written,
 * against a real Redis (a private `redis-server`, flushed between blocks),
 * from the built package (`import … from 'requeue'` resolves to `dist/`
 * through the package's own exports). A ts/js block runs under tsx, an `sh`
 * block under `bash -e`, and a plain block is a transcript: its `$ ` lines
 * run, and with `output` its other lines must be exactly what they print.
 * The marker may add lines: `prelude: <code>` is put before a ts/js block
 * (what the block assumes is defined), `stop-after-ms: <n>` ends a block
 * that serves until told (a worker) with SIGTERM after n ms, and it must
 * then exit 0.
 */
import { spawnSync } from 'node:child_process';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  writeFileSync,
} from 'node:fs';
import { join, resolve } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedisServer, type RedisServerHandle } from '../harness/redis.js';

const root = resolve(import.meta.dirname, '../..');
/** Inside the package, so that `requeue` resolves to it; ignored by git (`.scratch/`). */
const scratch = join(root, '.scratch/docs-blocks');
const pages = ['README.md', ...readdirSync(join(root, 'docs')).map((name) => `docs/${name}`)]
  .filter((page) => page.endsWith('.md'))
  .sort();

interface Block {
  page: string;
  line: number;
  lang: string;
  code: string;
  prelude: string;
  stopAfterMs?: number;
  output: boolean;
}

/** The fenced blocks of `text`, each with the runnable marker above it, if any. */
function blocksOf(page: string, text: string): { block: Block; runnable: boolean }[] {
  const lines = text.split('\n');
  const found: { block: Block; runnable: boolean }[] = [];
  for (let i = 0; i < lines.length; i++) {
    const fence = /^```(\w*)/.exec(lines[i]!);
    if (!fence) continue;
    const end = lines.findIndex((line, j) => j > i && line.startsWith('```'));
    let k = i - 1;
    while (k >= 0 && lines[k]!.trim() === '') k--;
    let marker = '';
    if (k >= 0 && lines[k]!.trim().endsWith('-->')) {
      let start = k;
      while (start > 0 && !lines[start]!.includes('<!--')) start--;
      marker = lines.slice(start, k + 1).join('\n');
    }
    const runnable = /<!--\s*runnable\b/.test(marker);
    const option = (name: string) => new RegExp(`^\\s*${name}:\\s*(.*)$`, 'm').exec(marker)?.[1];
    const stop = option('stop-after-ms');
    found.push({
      runnable,
      block: {
        page,
        line: i + 1,
        lang: fence[1]!,
        code: lines.slice(i + 1, end).join('\n'),
        prelude: option('prelude') ?? '',
        ...(stop !== undefined && { stopAfterMs: Number(stop) }),
        output: /^\s*output\s*$/m.test(marker),
      },
    });
    i = end;
  }
  return found;
}

const all = pages.flatMap((page) => blocksOf(page, readFileSync(join(root, page), 'utf8')));
const runnable = all.filter((b) => b.runnable).map((b) => b.block);

let redis: RedisServerHandle;
let env: NodeJS.ProcessEnv;
beforeAll(async () => {
  if (!existsSync(join(root, 'dist/src/index.js'))) throw new Error('run `npm run build` first');
  redis = await startRedisServer({ appendonly: false });
  mkdirSync(join(scratch, 'bin'), { recursive: true });
  // `requeue` as an installed bin would be: the built CLI.
  const bin = join(scratch, 'bin/requeue');
  writeFileSync(bin, `#!/bin/sh\nexec node ${join(root, 'dist/src/cli/main.js')} "$@"\n`);
  chmodSync(bin, 0o755);
  const { npm_command: _c, npm_lifecycle_event: _e, ...rest } = process.env;
  env = {
    ...rest,
    REDIS_URL: redis.url,
    PATH: `${join(scratch, 'bin')}:${process.env.PATH ?? ''}`,
  };
}, 60_000);
afterAll(async () => {
  await redis?.stop();
  rmSync(scratch, { recursive: true, force: true });
});

/** Runs one block; its exit code and what it printed. */
function run(block: Block, index: number) {
  const base = {
    cwd: root,
    env,
    encoding: 'utf8' as const,
    timeout: block.stopAfterMs ?? 120_000,
    killSignal: 'SIGTERM' as const,
  };
  if (block.lang === 'ts' || block.lang === 'js') {
    const file = join(scratch, `block-${index}.mts`);
    writeFileSync(file, `${block.prelude}\n${block.code}\n`);
    return spawnSync(process.execPath, ['--import', 'tsx', file], base);
  }
  if (block.lang === 'sh') return spawnSync('bash', ['-e', '-c', block.code], base);
  // A transcript: `$ ` lines (with `\` continuations) are the commands.
  const commands = block.code
    .replace(/\\\n\s*/g, ' ')
    .split('\n')
    .filter((line) => line.startsWith('$ '))
    .map((line) => line.slice(2).replace(/\s+#.*$/, ''));
  return spawnSync('bash', ['-e', '-c', commands.join('\n')], base);
}

describe('runnable docs blocks', () => {
  it('the README quickstart and at least one block of every docs page with code are marked', () => {
    const withCode = new Set(all.map((b) => b.block.page));
    const marked = new Set(runnable.map((b) => b.page));
    expect([...withCode].filter((page) => !marked.has(page))).toEqual([]);
    expect(runnable.some((b) => b.page === 'README.md' && b.lang === 'ts')).toBe(true);
  });

  it.each(runnable.map((block, index) => [`${block.page}:${block.line}`, block, index] as const))(
    '%s runs as written',
    { timeout: 180_000 },
    async (_where, block, index) => {
      const flush = new Redis(redis.url);
      await flush.flushall();
      flush.disconnect();
      const result = run(block, index);
      const printed = `${result.stdout}\n${result.stderr}`;
      const timedOut = (result.error as NodeJS.ErrnoException | undefined)?.code === 'ETIMEDOUT';
      // A block told to stop may end on the signal or drain and exit 0; any other block ends by itself.
      if (block.stopAfterMs === undefined) expect(timedOut, printed).toBe(false);
      expect(result.status === 0 || (timedOut && result.signal === 'SIGTERM'), printed).toBe(true);
      if (block.output) {
        const expected = block.code
          .replace(/\\\n\s*/g, ' ')
          .split('\n')
          .filter((line) => !line.startsWith('$ '))
          .join('\n');
        expect(result.stdout.trimEnd()).toBe(expected.trimEnd());
      }
    },
  );
});
