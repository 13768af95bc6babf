/**
 * The published package as a user gets it: `npm pack`, unpacked into a
 * scratch project, then required and imported from there. Uses the built
 * `dist/` (`npm test` builds first).
 */
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, renameSync, rmSync, symlinkSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const root = resolve(import.meta.dirname, '../..');
let scratch = '';
let files: string[] = [];

/** Runs `code` with node in the scratch project; stdout, stderr and the exit code. */
function run(code: string, type: 'commonjs' | 'module') {
  const result = spawnSync(process.execPath, ['--input-type', type, '-e', code], {
    cwd: scratch,
    encoding: 'utf8',
    timeout: 30_000,
  });
  return { stdout: result.stdout.trim(), stderr: result.stderr.trim(), status: result.status };
}

beforeAll(() => {
  if (!existsSync(join(root, 'dist/src/index.js'))) throw new Error('run `npm run build` first');
  scratch = mkdtempSync(join(tmpdir(), 'requeue-pack-'));
  const packed = JSON.parse(
    execFileSync('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', scratch], {
      cwd: root,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    }),
  ) as { filename: string; files: { path: string }[] }[];
  const [tarball] = packed;
  if (!tarball) throw new Error('npm pack printed no tarball');
  files = tarball.files.map((f) => f.path);
  const modules = join(scratch, 'node_modules');
  mkdirSync(modules);
  execFileSync('tar', ['-xzf', join(scratch, tarball.filename), '-C', modules]);
  renameSync(join(modules, 'package'), join(modules, 'requeue'));
  // The package's dependencies, as an install would have put them.
  symlinkSync(join(root, 'node_modules'), join(modules, 'requeue', 'node_modules'), 'dir');
}, 120_000);

afterAll(() => {
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

describe('the packed package', () => {
  it("require('requeue') works (exports has a require condition; require(esm) on Node ≥ 20.19)", () => {
    const result = run(
      `const r = require('requeue');
       console.log(typeof r.createQueue, typeof r.createWorker, typeof r.PermanentError)`,
      'commonjs',
    );
    expect(result).toMatchObject({ status: 0, stdout: 'function function function' });
  });

  it("import 'requeue' works", () => {
    const result = run(
      `import { createQueue, DeadLetterQueue } from 'requeue';
       console.log(typeof createQueue, typeof DeadLetterQueue)`,
      'module',
    );
    expect(result).toMatchObject({ status: 0, stdout: 'function function' });
  });

  it('the webhook and stream workers can be imported and required: requeue/webhook, requeue/stream', () => {
    const esm = run(
      `import { verifyWebhook, createWebhookWorker } from 'requeue/webhook';
       import { createStreamConsumer } from 'requeue/stream';
       console.log(typeof verifyWebhook, typeof createWebhookWorker, typeof createStreamConsumer)`,
      'module',
    );
    expect(esm).toMatchObject({ status: 0, stdout: 'function function function' });
    const cjs = run(
      `console.log(typeof require('requeue/webhook').signWebhook, typeof require('requeue/stream').createStreamRetryWorker)`,
      'commonjs',
    );
    expect(cjs).toMatchObject({ status: 0, stdout: 'function function' });
  });

  it('keeps its internals private: a deep import is refused by the exports map', () => {
    const result = run(`require('requeue/dist/src/redis/keys.js')`, 'commonjs');
    expect(result.status).not.toBe(0);
    expect(result.stderr).toContain('ERR_PACKAGE_PATH_NOT_EXPORTED');
  });

  it('ships a LICENSE, the built code and no source maps pointing at sources it lacks', () => {
    expect(files).toContain('LICENSE');
    expect(files).toContain('dist/src/cli/main.js');
    expect(files).toContain('dist/src/redis/lua/deadLetter-16.lua');
    // The dashboard's files, served from the package by the service.
    for (const file of [
      'index.html',
      'app.js',
      'lib/api.js',
      'components/dead-panel.js',
      'style.css',
    ])
      expect(files).toContain(`dist/workers/service/dashboard/${file}`);
    expect(files.filter((f) => f.endsWith('.map'))).toEqual([]);
    expect(files.filter((f) => f.endsWith('.ts') && !f.endsWith('.d.ts'))).toEqual([]);
    const result = run(
      `const fs = require('fs');
       const js = fs.readFileSync(require.resolve('requeue'), 'utf8');
       console.log(js.includes('sourceMappingURL'))`,
      'commonjs',
    );
    expect(result).toMatchObject({ status: 0, stdout: 'false' });
  });

  it('runs the bin: requeue --help', () => {
    const result = spawnSync(
      process.execPath,
      [join(scratch, 'node_modules/requeue/dist/src/cli/main.js'), '--help'],
      { encoding: 'utf8', timeout: 30_000 },
    );
    expect(result.status).toBe(0);
    expect(result.stdout).toContain('Usage: requeue');
  });
});
