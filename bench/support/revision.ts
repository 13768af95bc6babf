import { execFileSync } from 'node:child_process';

/**
 * The commit the measured code is at, and whether `paths` differ from it:
 * `3e752be (src/ modified)`. Others may edit the tree while a benchmark runs.
 */
export function describeRevision(paths: string[] = ['src']): string {
  try {
    const commit = git(['rev-parse', '--short', 'HEAD']);
    const dirty = git(['status', '--porcelain', '--', ...paths]) !== '';
    return `${commit} (${paths.join(', ')}/ ${dirty ? 'modified' : 'as committed'})`;
  } catch {
    return 'unknown (not a git checkout)';
  }
}

function git(args: string[]): string {
  return execFileSync('git', args, {
    encoding: 'utf8',
    stdio: ['ignore', 'pipe', 'ignore'],
  }).trim();
}
