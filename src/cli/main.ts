#!/usr/bin/env node
import { runCli } from './program.js';

runCli(process.argv).then((code) => {
  process.exitCode = code;
});
