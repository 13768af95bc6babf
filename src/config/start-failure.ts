import { redactText } from '../util/redact.js';
import { ConfigError } from './env.js';

/**
 * A process whose start failed: one line on stderr, `<name>: …`, naming the
 * setting (a {@link ConfigError}, exit code 2) or the cause (`could not
 * start: …`, exit code 1) — never a stack trace, secrets blanked. What the
 * start left open does not keep the process alive past `graceMs`.
 */
export function reportStartFailure(name: string, err: unknown, graceMs = 1000): void {
  const message =
    err instanceof ConfigError
      ? err.message
      : `could not start: ${err instanceof Error ? err.message : String(err)}`;
  process.stderr.write(`${name}: ${redactText(message.replace(/\s*\n\s*/g, ' '))}\n`);
  process.exitCode = err instanceof ConfigError ? 2 : 1;
  setTimeout(() => process.exit(), graceMs).unref();
}
