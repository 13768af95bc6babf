#!/usr/bin/env node
import { runCli } from './program.js';

// Piped into `head` and the like, the reader may leave early: stop quietly
// (as Unix tools do) instead of dying on an unhandled EPIPE with a stack.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') process.exit(0);
    throw err;
  });
}

runCli(process.argv).then((code) => {
  process.exitCode = code;
});
