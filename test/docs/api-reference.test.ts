/**
 * The API reference in docs/api is generated from the types (TypeDoc,
 * `npm run docs:api`): regenerated here into a scratch folder, it must equal
 * what is committed, so a changed export or TSDoc comment without a new
 * reference fails CI. TypeDoc runs with `treatWarningsAsErrors`: a public
 * signature naming a type the entry points do not export fails it too.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, relative, resolve } from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';

const root = resolve(import.meta.dirname, '../..');
const committed = join(root, 'docs/api');
const scratch = mkdtempSync(join(tmpdir(), 'requeue-api-'));
afterAll(() => rmSync(scratch, { recursive: true, force: true }));

/** Every file under `dir`, by its path relative to `dir`, with its text. */
function tree(dir: string): Record<string, string> {
  const files: Record<string, string> = {};
  for (const entry of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (!entry.isFile()) continue;
    const path = join(entry.parentPath, entry.name);
    files[relative(dir, path)] = readFileSync(path, 'utf8');
  }
  return files;
}

describe('docs/api, the API reference', () => {
  it('is what `npm run docs:api` generates from the types today', { timeout: 300_000 }, () => {
    execFileSync(
      process.execPath,
      [join(root, 'node_modules/typedoc/bin/typedoc'), '--out', scratch],
      {
        cwd: root,
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    const generated = tree(scratch);
    const files = tree(committed);
    expect(Object.keys(files).sort(), 'run `npm run docs:api` and commit docs/api').toEqual(
      Object.keys(generated).sort(),
    );
    for (const [path, text] of Object.entries(generated))
      expect(files[path], `docs/api/${path} is stale: run \`npm run docs:api\``).toBe(text);
  });

  it('covers DeadLetterQueue and every entry point of the package', () => {
    const pkg = JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
      exports: Record<string, unknown>;
    };
    const entries = Object.keys(pkg.exports).filter((entry) => entry !== './package.json');
    expect(entries).toEqual(['.', './webhook', './stream', './amqp', './nats']);
    const index = readFileSync(join(committed, 'README.md'), 'utf8');
    for (const entry of entries) expect(index).toContain(`[${join('requeue', entry)}]`);
    const core = readFileSync(join(committed, 'requeue.md'), 'utf8');
    const dlq = /^### DeadLetterQueue\n[\s\S]*?(?=^### )/m.exec(core)?.[0] ?? '';
    for (const method of ['list', 'page', 'get', 'count', 'replay', 'purge', 'trim', 'close'])
      expect(dlq, `DeadLetterQueue.${method}`).toContain(`##### ${method}()`);
  });
});
