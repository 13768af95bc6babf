/**
 * What `npm install requeue` brings a library user: the packed tarball
 * installed by npm (from the registry, `--prefer-offline`) into an empty
 * project. Uses the built `dist/` (`npm test` builds first).
 */
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { Redis } from 'ioredis';
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const root = resolve(import.meta.dirname, '../..');
let scratch = '';
let project = '';
/** What `npm install` printed. */
let npmOutput = '';

/** The service's, the dashboard's and the plots' packages: optional peers, never installed for a library user. */
const optionalPeers = Object.entries(
  (
    JSON.parse(readFileSync(join(root, 'package.json'), 'utf8')) as {
      peerDependenciesMeta: Record<string, { optional?: boolean }>;
    }
  ).peerDependenciesMeta,
)
  .filter(([, meta]) => meta.optional === true)
  .map(([name]) => name);

/** Runs `command` in the scratch project; stdout, stderr and the exit code. */
function run(command: string, args: readonly string[]) {
  const result = spawnSync(command, args, { cwd: project, encoding: 'utf8', timeout: 60_000 });
  return { stdout: result.stdout.trim(), stderr: result.stderr.trim(), status: result.status };
}

beforeAll(() => {
  if (!existsSync(join(root, 'dist/src/index.js'))) throw new Error('run `npm run build` first');
  scratch = mkdtempSync(join(tmpdir(), 'requeue-install-'));
  const [tarball] = JSON.parse(
    execFileSync('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', scratch], {
      cwd: root,
      encoding: 'utf8',
      stdio: ['ignore', 'pipe', 'ignore'],
    }),
  ) as { filename: string }[];
  if (!tarball) throw new Error('npm pack printed no tarball');
  project = join(scratch, 'host');
  mkdirSync(project);
  writeFileSync(join(project, 'package.json'), '{ "name": "host", "private": true }\n');
  const install = spawnSync(
    'npm',
    ['install', '--prefer-offline', '--no-audit', '--no-fund', join(scratch, tarball.filename)],
    { cwd: project, encoding: 'utf8', timeout: 300_000 },
  );
  npmOutput = `${install.stdout}\n${install.stderr}`;
  if (install.status !== 0) throw new Error(`npm install failed:\n${npmOutput.slice(-2000)}`);
}, 360_000);

afterAll(() => {
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

describe('npm install <the packed tarball> in an empty project', () => {
  it('brought 202 packages and 85 MB (Fastify, Vega, Preact, uPlot as dependencies): now ≤ 60 and ≤ 35 MB', () => {
    // Every installed package, requeue included, as `npm ls` lists them (the project itself first).
    const packages = run('npm', ['ls', '--all', '--parseable']).stdout.split('\n').length - 1;
    const kib = Number(
      execFileSync('du', ['-sk', join(project, 'node_modules')], { encoding: 'utf8' }).split(
        '\t',
      )[0],
    );
    expect(packages).toBeGreaterThanOrEqual(25); // bullmq + pino + zod alone: the floor
    expect(packages).toBeLessThanOrEqual(60);
    expect(kib / 1024).toBeLessThanOrEqual(35);
  });

  it('installs bullmq, a required peer, at the tested minor (6.7.x)', () => {
    const bullmq = JSON.parse(
      readFileSync(join(project, 'node_modules/bullmq/package.json'), 'utf8'),
    ) as { version: string };
    expect(bullmq.version).toMatch(/^6\.7\.\d+$/);
  });

  it('installs none of the service, dashboard or plot packages', () => {
    expect(optionalPeers).toEqual(expect.arrayContaining(['fastify', 'vega', 'preact', 'uplot']));
    const installed = optionalPeers.filter((name) =>
      existsSync(join(project, 'node_modules', name, 'package.json')),
    );
    expect(installed).toEqual([]);
  });

  it('npm warned EBADENGINE (packages wanting Node ≥ 22) and about a prepare script: neither now', () => {
    expect(npmOutput).not.toContain('EBADENGINE');
    expect(npmOutput).not.toContain('prepare');
    const installed = JSON.parse(
      readFileSync(join(project, 'node_modules/requeue/package.json'), 'utf8'),
    ) as { scripts?: Record<string, string> };
    expect(installed.scripts?.prepare).toBeUndefined();
  });

  it("import('requeue'), requeue/webhook and requeue/stream load without the optional packages", () => {
    const result = run(process.execPath, [
      '--input-type',
      'module',
      '-e',
      `const [core, webhook, stream] = await Promise.all([import('requeue'), import('requeue/webhook'), import('requeue/stream')]);
       console.log(typeof core.createWorker, typeof webhook.createWebhookWorker, typeof stream.createStreamConsumer)`,
    ]);
    expect(result).toMatchObject({ status: 0, stdout: 'function function function' });
  });

  it('requeue/amqp and requeue/nats load without amqplib and nats, and say what to install when used', () => {
    const result = run(process.execPath, [
      '--input-type',
      'module',
      '-e',
      `const [amqp, nats] = await Promise.all([import('requeue/amqp'), import('requeue/nats')]);
       const handler = async () => {};
       const a = amqp.createAmqpConsumer({ queue: 'q', handler, autorun: false, connection: 'redis://127.0.0.1:1' });
       const n = nats.createNatsConsumer({ stream: 's', consumer: 'c', handler, autorun: false, connection: 'redis://127.0.0.1:1' });
       for (const c of [a, n]) {
         console.log(await c.waitUntilReady().then(() => 'ready', (e) => e.message));
         await c.close({ timeoutMs: 500 });
       }`,
    ]);
    expect(result.status).toBe(0);
    expect(result.stdout).toContain('requeue/amqp needs amqplib');
    expect(result.stdout).toContain('requeue/nats needs nats');
  });

  it('npx requeue --help runs the installed bin', () => {
    const result = run('npx', ['--no-install', 'requeue', '--help']);
    expect(result.status).toBe(0);
    expect(result.stdout).toContain('Usage: requeue');
  });

  it('the service without its packages says in one line what to install (exit 2)', () => {
    const result = run(process.execPath, ['node_modules/requeue/dist/workers/service/main.js']);
    expect(result.status).toBe(2);
    expect(result.stderr.split('\n')).toHaveLength(1);
    expect(result.stderr).toMatch(
      /^requeue: the requeue service needs fastify, .*: npm install fastify @fastify\/static/,
    );
  });

  it('simulate --svg without Vega says in one line what to install (exit 2)', () => {
    const result = run('npx', [
      '--no-install',
      'requeue',
      'simulate',
      '--scenario',
      'outage',
      '--svg',
      join(scratch, 'outage.svg'),
    ]);
    expect(result.status).toBe(2);
    expect(result.stderr).toBe(
      'requeue: --svg needs vega, vega-lite, not installed with requeue (optional peer dependencies): npm install vega vega-lite',
    );
    expect(existsSync(join(scratch, 'outage.svg'))).toBe(false);
  });

  it('npx requeue worker … & then kill $! left the node worker running, orphaned: it drains and exits with npm', async () => {
    // npx runs npm → sh → node; killing npm never signals node, so node watches its parent.
    const queue = `pkg-orphan-${process.pid}`;
    const pidFile = join(scratch, 'worker.pid');
    writeFileSync(
      join(project, 'pid-handler.mjs'),
      `import { writeFileSync } from 'node:fs';\nwriteFileSync(${JSON.stringify(pidFile)}, String(process.pid));\nexport default async () => 1;\n`,
    );
    const shutdownTimeoutMs = 1_500;
    const npx = spawn(
      'npx',
      ['--no-install', 'requeue', 'worker', queue, '--handler', './pid-handler.mjs'].concat([
        '--shutdown-timeout-ms',
        String(shutdownTimeoutMs),
        '--redis',
        'redis://127.0.0.1:6379',
      ]),
      { cwd: project, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let output = '';
    npx.stdout.on('data', (chunk: Buffer) => (output += chunk.toString()));
    npx.stderr.on('data', (chunk: Buffer) => (output += chunk.toString()));
    await waitFor(
      () => output.includes('worker started'),
      30_000,
      () => output,
    );
    const workerPid = Number(readFileSync(pidFile, 'utf8'));
    expect(workerPid).not.toBe(npx.pid);
    npx.kill('SIGTERM');
    // The parent is polled every 500 ms; then the drain has the shutdown timeout.
    await waitFor(
      () => !alive(workerPid),
      shutdownTimeoutMs + 500 + 1_000,
      () => output,
    );
    expect(output).toMatch(/"signal":"parent-exited".*"msg":"draining"/);
    expect(output).toContain('"msg":"stopped"');
    const redis = new Redis('redis://127.0.0.1:6379', { lazyConnect: true });
    try {
      const keys = await redis.keys(`bull:${queue}:*`);
      if (keys.length > 0) await redis.del(...keys);
    } finally {
      redis.disconnect();
    }
  }, 60_000);
});

/** Whether a process with `pid` still runs. */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** Polls `done` every 50 ms; fails after `timeoutMs` with `context()` in the message. */
async function waitFor(done: () => boolean, timeoutMs: number, context: () => string) {
  const deadline = Date.now() + timeoutMs;
  while (!done()) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms:\n${context()}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}
