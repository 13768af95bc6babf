import { randomUUID } from 'node:crypto';
import { connect as netConnect, type Socket } from 'node:net';
import type { Redis } from 'ioredis';
import type { RedisClient } from '../../src/redis/connection.js';
import { onCleanup } from './cleanup.js';

/**
 * Runs `action` under MONITOR and returns every command that mentions
 * `name` (directly or from inside a script) and that Redis flags as a write:
 * the check behind "looking never writes".
 *
 * MONITOR is read on a plain socket: ioredis's `monitor()` connection failed
 * now and then under other tests' traffic ("Command queue state error", when
 * the first monitored line arrived with MONITOR's own reply).
 */
export async function writesDuring(
  client: RedisClient,
  name: string,
  action: () => Promise<unknown>,
): Promise<string[][]> {
  // MONITOR is a single server's: the tests run it on a plain connection.
  const redis = client as Redis;
  const seen: string[][] = [];
  const marker = `end-of-${randomUUID()}`;
  let resolveEnded: () => void = () => undefined;
  const ended = new Promise<void>((resolve) => (resolveEnded = resolve));
  const monitor = await openMonitor(redis, (args) => {
    if (args[0]?.toLowerCase() === 'ping' && args[1] === marker) resolveEnded();
    else if (args.some((a) => a.includes(name))) seen.push(args);
  });
  onCleanup(() => monitor.destroy());
  await action();
  await redis.ping(marker);
  await ended;
  monitor.destroy();
  const names = [...new Set(seen.map((args) => args[0]!.toLowerCase()))];
  if (names.length === 0) return [];
  const info = (await redis.command('INFO', ...names)) as [string, number, string[]][];
  const writing = new Set(info.filter((c) => c[2].includes('write')).map((c) => c[0]));
  return seen.filter((args) => writing.has(args[0]!.toLowerCase()));
}

/**
 * A socket in MONITOR mode on `redis`'s server, once Redis has said OK; each
 * command to `onCommand`, with whether a script ran it (`[0 lua]`) rather
 * than a client. Destroy it when done.
 */
export async function openMonitor(
  redis: Redis,
  onCommand: (args: string[], fromScript: boolean) => void,
): Promise<Socket> {
  const { host, port, username, password } = redis.options;
  const socket = netConnect({ host: host ?? '127.0.0.1', port: port ?? 6379 });
  const commands: string[][] = [];
  if (password) commands.push(username ? ['AUTH', username, password] : ['AUTH', password]);
  commands.push(['MONITOR']);
  let oks = 0;
  let buffer = '';
  await new Promise<void>((resolve, reject) => {
    // A monitor that breaks later leaves its test waiting for the marker: it fails, loudly.
    socket.on('error', reject);
    socket.setEncoding('utf8');
    socket.on('data', (chunk: string) => {
      buffer += chunk;
      let end: number;
      while ((end = buffer.indexOf('\r\n')) >= 0) {
        const line = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        if (line.startsWith('-')) reject(new Error(`MONITOR: ${line.slice(1)}`));
        else if (oks < commands.length) {
          oks += 1;
          if (oks === commands.length) resolve();
        } else {
          const args = parseMonitorLine(line);
          if (args) onCommand(args, / lua\] "/.test(line));
        }
      }
    });
    socket.write(commands.map(encodeCommand).join(''));
  });
  return socket;
}

function encodeCommand(args: string[]): string {
  return `*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`;
}

/** `+1700000000.123456 [0 127.0.0.1:5000] "cmd" "arg" …` → the command and its arguments. */
export function parseMonitorLine(line: string): string[] | undefined {
  const start = line.indexOf('] "');
  if (!line.startsWith('+') || start < 0) return undefined;
  const args: string[] = [];
  for (const match of line.slice(start + 2).matchAll(/"((?:[^"\\]|\\.)*)"/g))
    args.push(unescapeRepr(match[1]!));
  return args;
}

/** Undoes Redis's quoting of a monitored argument (`sdscatrepr`). */
function unescapeRepr(quoted: string): string {
  const named: Record<string, string> = { n: '\n', r: '\r', t: '\t', a: '\x07', b: '\b' };
  return quoted.replace(/\\(x[0-9a-fA-F]{2}|[\s\S])/g, (_, escape: string) =>
    escape.length === 3
      ? String.fromCharCode(parseInt(escape.slice(1), 16))
      : (named[escape] ?? escape),
  );
}
