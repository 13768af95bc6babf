/**
 * Events go through `safeEmit` (promise 4): the lint rule that allows a plain
 * `.emit(` only in the events module catches one written anywhere else in
 * src/ or workers/, and finds none there today (issue 21, part 8).
 */
import { join } from 'node:path';
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../harness/child.js';

const eslint = new ESLint({ cwd: repoRoot });

/** The messages of the plain-emit rule for `code` linted as if it were the file `path`. */
async function emitFindings(code: string, path: string): Promise<string[]> {
  const [result] = await eslint.lintText(code, { filePath: join(repoRoot, path) });
  return (result?.messages ?? [])
    .filter((m) => m.ruleId === 'no-restricted-syntax' && m.message.includes('safeEmit'))
    .map((m) => `${m.line}:${m.column}`);
}

const plain = `import { EventEmitter } from 'node:events';
export class Consumer extends EventEmitter {
  done(id: string): void {
    this.emit('message:processed', { id });
  }
}
`;

describe('the plain-emit lint rule', () => {
  it.each([
    'workers/stream/consumer.ts',
    'workers/webhook/webhook-worker.ts',
    'src/scheduler/requeue-worker.ts',
    // A per-job file, whose own no-restricted-syntax rule must not replace this one.
    'src/scheduler/attempt/run-attempt.ts',
    'src/cli/commands/new-command.ts',
  ])('catches a plain .emit( in %s', async (path) => {
    expect(await emitFindings(plain, path)).toEqual(['4:5']);
  });

  it('catches the computed, optional and bound forms', async () => {
    const code = `export function f(e: { emit(x: string): void } | undefined): void {
  e?.['emit']('a');
  e?.emit('b');
  const send = e?.emit.bind(e);
  send?.('c');
}
`;
    expect(await emitFindings(code, 'workers/stream/consumer.ts')).toEqual(['2:3', '3:3', '4:16']);
  });

  it('allows it in the events module, which defines safeEmit', async () => {
    expect(await emitFindings(plain, 'src/scheduler/events.ts')).toEqual([]);
  });

  it('finds no plain .emit( in src/ or workers/', { timeout: 90_000 }, async () => {
    const results = await eslint.lintFiles(['src', 'workers']);
    const found = results.flatMap((r) =>
      r.messages
        .filter((m) => m.ruleId === 'no-restricted-syntax' && m.message.includes('safeEmit'))
        .map((m) => `${r.filePath.slice(repoRoot.length)}:${m.line}`),
    );
    expect(found).toEqual([]);
    // The search did look: every source file was linted.
    expect(results.length).toBeGreaterThan(100);
  });
});
