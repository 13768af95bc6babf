/**
 * The bottom layers import nothing above them (issue 23, item 5): the lint
 * rule catches an upward import from src/util, src/errors or src/config, lets
 * the allowed ones through, and finds none in those folders today. Also the
 * pure simulator, and BullMQ behind one door (only src/scheduler/bullmq/
 * imports bullmq values).
 */
import { join } from 'node:path';
import { ESLint } from 'eslint';
import { describe, expect, it } from 'vitest';
import { repoRoot } from '../harness/child.js';

const eslint = new ESLint({ cwd: repoRoot });

/** Whether the layer rule flags `specifier` imported from the file `path`. */
async function flagged(specifier: string, path: string, typeOnly = false): Promise<boolean> {
  const code = typeOnly
    ? `import type { X } from '${specifier}';\nexport type Y = X;\n`
    : `import { x } from '${specifier}';\nexport const y = x;\n`;
  const [result] = await eslint.lintText(code, { filePath: join(repoRoot, path) });
  const found = (result?.messages ?? []).filter((m) => m.ruleId === 'no-restricted-imports');
  return found.length > 0;
}

describe('the bottom-layer import rule', () => {
  it.each([
    ['src/util/new-helper.ts', '../policy/retry-policy.js'],
    ['src/util/new-helper.ts', '../scheduler/requeue-worker.js'],
    ['src/util/new-helper.ts', '../config/env.js'],
    ['src/util/new-helper.ts', '../../workers/service/http.js'],
    ['src/util/new-helper.ts', '../index.js'],
    ['src/errors/new-error.ts', '../policy/decide.js'],
    ['src/errors/new-error.ts', '../util/system.js'],
    ['src/errors/new-error.ts', '../config/env.js'],
    ['src/config/new-config.ts', '../policy/retry-policy.js'],
    ['src/config/new-config.ts', '../redis/keys.js'],
    ['src/config/new-config.ts', '../cli/program.js'],
    ['src/config/new-config.ts', '../scheduler/queue.js'],
    ['src/config/nested/deep.ts', '../../policy/limits-extra.js'],
  ])('catches an upward import: %s importing %s', async (path, specifier) => {
    expect(await flagged(specifier, path)).toBe(true);
    expect(await flagged(specifier, path, true)).toBe(true);
  });

  it.each([
    ['src/util/new-helper.ts', './system.js'],
    ['src/util/new-helper.ts', '../errors/config-error.js'],
    ['src/errors/new-error.ts', './dead-reason.js'],
    ['src/config/new-config.ts', '../util/parse-config.js'],
    ['src/config/new-config.ts', '../errors/config-error.js'],
    ['src/config/new-config.ts', './env.js'],
    // The one commented exception: a leaf of constants.
    ['src/config/new-config.ts', '../policy/limits.js'],
    ['src/util/new-helper.ts', 'zod'],
  ])('allows %s importing %s', async (path, specifier) => {
    expect(await flagged(specifier, path)).toBe(false);
  });

  it('finds no upward import in src/util, src/errors or src/config', async () => {
    const results = await eslint.lintFiles(['src/util', 'src/errors', 'src/config']);
    const found = results.flatMap((r) =>
      r.messages
        .filter((m) => m.ruleId === 'no-restricted-imports')
        .map((m) => `${r.filePath.slice(repoRoot.length)}:${m.line}`),
    );
    expect(found).toEqual([]);
    // The search did look: every file of the three folders was linted.
    expect(results.length).toBeGreaterThanOrEqual(15);
  });
});

describe('the simulator is pure but not policy (issue 23, item 4)', () => {
  it.each([
    ['src/simulate/new-scenario.ts', '../redis/keys.js'],
    ['src/simulate/new-scenario.ts', '../scheduler/requeue-worker.js'],
    ['src/simulate/new-scenario.ts', '../cli/program.js'],
    ['src/simulate/outage/new-part.ts', 'node:fs'],
    ['src/simulate/outage/new-part.ts', 'ioredis'],
    ['src/policy/new-rule.ts', '../simulate/outage.js'],
    ['src/util/new-helper.ts', '../simulate/event-queue.js'],
  ])('catches %s importing %s', async (path, specifier) => {
    expect(await flagged(specifier, path)).toBe(true);
  });

  it.each([
    ['src/simulate/new-scenario.ts', '../policy/retry-policy.js'],
    ['src/simulate/outage/new-part.ts', '../../policy/breaker/breaker.js'],
    ['src/simulate/outage/new-part.ts', '../event-queue.js'],
  ])('allows %s importing %s', async (path, specifier) => {
    expect(await flagged(specifier, path)).toBe(false);
  });

  it('finds nothing impure in src/simulate, and no src/policy/simulate is left', async () => {
    const results = await eslint.lintFiles(['src/simulate', 'src/policy']);
    const found = results.flatMap((r) =>
      r.messages
        .filter((m) => m.ruleId === 'no-restricted-imports')
        .map((m) => `${r.filePath.slice(repoRoot.length)}:${m.line}`),
    );
    expect(found).toEqual([]);
    expect(results.some((r) => r.filePath.includes('/src/simulate/outage/'))).toBe(true);
    expect(results.some((r) => r.filePath.includes('/src/policy/simulate/'))).toBe(false);
  });
});

describe('BullMQ behind one door (issue 23, item 1)', () => {
  /** Whether the door rule flags `code` in the file `path`. */
  async function door(code: string, path: string): Promise<boolean> {
    const [result] = await eslint.lintText(code, { filePath: join(repoRoot, path) });
    return (result?.messages ?? []).some(
      (m) => m.ruleId === '@typescript-eslint/no-restricted-imports',
    );
  }
  const valueImport = `import { Queue } from 'bullmq';\nexport const q = Queue;\n`;
  const typeImport = `import type { Queue } from 'bullmq';\nexport type Q = Queue;\n`;

  it.each([
    'src/scheduler/new-module.ts',
    'src/cli/commands/new-command.ts',
    'src/new-top.ts',
    'workers/service/admin/new-route.ts',
  ])('refuses a value import of bullmq in %s', async (path) => {
    expect(await door(valueImport, path)).toBe(true);
    expect(await door(`export { Worker } from 'bullmq';\n`, path)).toBe(true);
    expect(
      await door(`import { x } from 'bullmq/dist/esm/utils';\nexport const y = x;\n`, path),
    ).toBe(true);
  });

  it.each(['src/scheduler/new-module.ts', 'workers/service/admin/new-route.ts'])(
    'lets `import type` from bullmq through in %s',
    async (path) => {
      expect(await door(typeImport, path)).toBe(false);
    },
  );

  it.each(['src/scheduler/bullmq/new-move.ts', 'src/scheduler/bullmq/nested/deep.ts'])(
    'lets the door itself (%s) import bullmq values',
    async (path) => {
      expect(await door(valueImport, path)).toBe(false);
    },
  );

  it('finds no bullmq value import outside the door today', async () => {
    const results = await eslint.lintFiles(['src', 'workers']);
    const found = results.flatMap((r) =>
      r.messages
        .filter((m) => m.ruleId === '@typescript-eslint/no-restricted-imports')
        .map((m) => `${r.filePath.slice(repoRoot.length)}:${m.line}`),
    );
    expect(found).toEqual([]);
    expect(results.length).toBeGreaterThanOrEqual(100);
  });
});

describe('one typed module runs the Lua scripts (issue 23, item 5)', () => {
  /** Whether the rule flags an import of `runScript` (or `name`) from `specifier` in `path`. */
  async function flagsRunScript(path: string, specifier: string, name = 'runScript') {
    const code = `import { ${name} } from '${specifier}';\nexport const y = ${name};\n`;
    const [result] = await eslint.lintText(code, { filePath: join(repoRoot, path) });
    return (result?.messages ?? []).some(
      (m) =>
        m.ruleId === '@typescript-eslint/no-restricted-imports' &&
        m.message.includes('lua-commands'),
    );
  }

  it.each([
    ['src/redis/new-store.ts', './scripts.js'],
    ['src/scheduler/new-module.ts', '../redis/scripts.js'],
    ['src/scheduler/bullmq/new-move.ts', '../../redis/scripts.js'],
    ['src/scheduler/dlq/new-pass.ts', '../../redis/scripts.js'],
    ['workers/service/new-route.ts', '../../src/redis/scripts.js'],
  ])('refuses runScript in %s', async (path, specifier) => {
    expect(await flagsRunScript(path, specifier)).toBe(true);
  });

  it('lets lua-commands.ts import runScript, and others import the typed module', async () => {
    expect(await flagsRunScript('src/redis/lua-commands.ts', './scripts.js')).toBe(false);
    expect(await flagsRunScript('src/redis/new-store.ts', './scripts.js', 'defineScript')).toBe(
      false,
    );
    expect(await flagsRunScript('src/redis/new-store.ts', './lua-commands.js', 'runScript')).toBe(
      false,
    );
  });

  it('still refuses a bullmq value import in lua-commands.ts', async () => {
    const [result] = await eslint.lintText(
      `import { Queue } from 'bullmq';\nexport const q = Queue;\n`,
      {
        filePath: join(repoRoot, 'src/redis/lua-commands.ts'),
      },
    );
    expect(
      (result?.messages ?? []).some((m) => m.ruleId === '@typescript-eslint/no-restricted-imports'),
    ).toBe(true);
  });
});
