/**
 * No file over 400 lines (issue 23, item 5): the lint rule covers every `.ts`
 * in src/, workers/, test/ and bench/ and the dashboard's scripts, and its
 * allow-list only names files still over the limit, so a file split stays off
 * it.
 */
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../harness/child.js';

const eslint = new ESLint({ cwd: repoRoot });

/** The files `eslint.config.js` lets past max-lines today. */
function allowList(): string[] {
  const config = readFileSync(join(repoRoot, 'eslint.config.js'), 'utf8');
  const list = /const overMaxLinesToday = \[([^\]]*)\]/.exec(config)?.[1];
  if (list === undefined) throw new Error('eslint.config.js has no overMaxLinesToday list');
  return [...list.matchAll(/'([^']+)'/g)].map((m) => m[1]!);
}

async function maxLines(path: string): Promise<unknown> {
  const config = (await eslint.calculateConfigForFile(join(repoRoot, path))) as {
    rules?: Record<string, unknown>;
  };
  return config.rules?.['max-lines'];
}

describe('max-lines', () => {
  it.each([
    'src/scheduler/new-module.ts',
    'workers/webhook/deliver.ts',
    'workers/service/dashboard/app.js',
    'workers/service/dashboard/components/dead-panel.js',
    'test/integration/new-suite.test.ts',
    'bench/new-part/report.ts',
  ])('holds %s to 400 lines, blank lines and comments counted', async (path) => {
    expect(await maxLines(path)).toEqual([
      2,
      { max: 400, skipBlankLines: false, skipComments: false },
    ]);
  });

  it('lets past only files that are still over 400 lines (remove a file once split)', () => {
    for (const path of allowList()) {
      const lines = readFileSync(join(repoRoot, path), 'utf8').split('\n').length - 1;
      expect({ path, over: lines > 400 }).toEqual({ path, over: true });
    }
  });

  it('refuses a 401-line file', async () => {
    const code = Array.from({ length: 401 }, (_, i) => `export const v${i} = ${i};`).join('\n');
    const [result] = await eslint.lintText(`${code}\n`, {
      filePath: join(repoRoot, 'src/scheduler/new-module.ts'),
    });
    expect(result?.messages.map((m) => m.ruleId)).toContain('max-lines');
  });
});
