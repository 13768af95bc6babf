// `npm start`'s prestart: builds dist/ only when a source changed since the
// last build, so a second start runs the built service at once instead of
// re-running tsc (seconds on a small machine). Says what it does on stderr.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { performance } from 'node:perf_hooks';

const root = join(import.meta.dirname, '..');
/** Written by `npm run build` when it succeeds (after tsc and the copies). */
const stamp = join(root, 'dist', '.build-stamp');
/** What the build reads: the sources (and their folders, so a deletion counts), the compiler settings. */
const inputs = ['src', 'workers', 'tsconfig.json', 'tsconfig.build.json', 'package.json'];

/** The newest file or folder under `path`, by modification time. */
function newest(path) {
  const stat = statSync(path);
  let best = { path, mtimeMs: stat.mtimeMs };
  if (stat.isDirectory()) {
    for (const entry of readdirSync(path)) {
      const found = newest(join(path, entry));
      if (found.mtimeMs > best.mtimeMs) best = found;
    }
  }
  return best;
}

function staleBecause() {
  if (!existsSync(stamp)) return 'no build yet';
  const built = statSync(stamp).mtimeMs;
  for (const input of inputs) {
    const found = newest(join(root, input));
    if (found.mtimeMs > built) return `${relative(root, found.path)} changed`;
  }
  return undefined;
}

const reason = staleBecause();
if (reason === undefined) process.exit(0);
process.stderr.write(`requeue: building dist/ with tsc (${reason}); later starts skip this\n`);
const started = performance.now();
const built = spawnSync('npm', ['run', 'build', '--silent'], { cwd: root, stdio: 'inherit' });
if (built.status !== 0) process.exit(built.status ?? 1);
process.stderr.write(
  `requeue: built in ${((performance.now() - started) / 1000).toFixed(1)} s; starting\n`,
);
