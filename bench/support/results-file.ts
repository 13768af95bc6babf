import { readFile, writeFile } from 'node:fs/promises';

/**
 * Replaces the section of a shared results file that one benchmark owns,
 * between `<!-- name:start -->` and `<!-- name:end -->`, leaving every other
 * benchmark's section as it was. A missing file is created; a missing
 * section is appended. Blank lines around the body keep the file as Prettier
 * formats it.
 */
export async function writeResultsSection(path: string, name: string, body: string): Promise<void> {
  const start = `<!-- ${name}:start -->`;
  const end = `<!-- ${name}:end -->`;
  const section = `${start}\n\n${body.trim()}\n\n${end}`;
  const current = await readFile(path, 'utf8').catch((err: NodeJS.ErrnoException) => {
    if (err.code === 'ENOENT') return '# Benchmark results\n';
    throw err;
  });
  const from = current.indexOf(start);
  const to = current.indexOf(end, from);
  const next =
    from >= 0 && to >= 0
      ? current.slice(0, from) + section + current.slice(to + end.length)
      : `${current.trimEnd()}\n\n${section}\n`;
  await writeFile(path, next);
}
