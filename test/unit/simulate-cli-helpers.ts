import { runCaptured } from '../harness/cli.js';

/** Runs `requeue simulate …` in this process, capturing its output. */
export const simulate = (...args: string[]) => runCaptured('simulate', ...args);

export const quickOutage = ['--scenario', 'outage', '--clients', '200', '--duration-ms', '50000'];
