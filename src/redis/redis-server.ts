import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtemp } from 'node:fs/promises';
import { createServer, connect } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** A `redis-server` child process this process started and owns. */
export interface RedisServerHandle {
  readonly url: string;
  readonly port: number;
  readonly dir: string;
  /** The running server's pid (`undefined` once it exited). */
  readonly pid: number | undefined;
  /** Stops the server (SIGTERM) and waits for it to exit. */
  stop(): Promise<void>;
  /** Kills the server (SIGKILL) without letting it save: a crash. */
  kill(): Promise<void>;
  /** Starts the server again on the same port and directory. */
  restart(): Promise<void>;
  /** Sends a signal to the running server (`SIGSTOP` freezes it, `SIGCONT` thaws it). */
  signal(signal: NodeJS.Signals): void;
}

export interface RedisServerOptions {
  /** Port to listen on. @defaultValue a free port */
  port?: number;
  /** Working directory for AOF/RDB files. @defaultValue a new temporary directory */
  dir?: string;
  /** Turn the append-only file on. @defaultValue `true` */
  appendonly?: boolean;
  /** The executable. @defaultValue `redis-server` from PATH */
  binary?: string;
  /** How long to wait for the server to answer. @defaultValue `10_000` */
  startTimeoutMs?: number;
  /**
   * Redis's background task frequency. 100 rather than Redis's 10: a
   * blocking command's timeout, which is how BullMQ wakes up for a delayed
   * job (a retry), only fires on one of these ticks, so at `hz 10` a retry
   * starts up to 100 ms late (see the README's "Retry timing").
   * @defaultValue `100`
   */
  hz?: number;
  /** More `redis-server` arguments, e.g. `['--requirepass', secret]`. @defaultValue `[]` */
  args?: string[];
}

/** Asks the OS for a free TCP port on loopback. */
export async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/** True when something accepts a TCP connection on `host:port` within `timeoutMs`. */
export async function canConnect(host: string, port: number, timeoutMs = 300): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    const done = (ok: boolean): void => {
      socket.destroy();
      resolve(ok);
    };
    socket.setTimeout(timeoutMs, () => done(false));
    socket.once('connect', () => done(true));
    socket.once('error', () => done(false));
  });
}

/** True when `redis-server` (or `binary`) can be executed. */
export async function hasRedisServer(binary = 'redis-server'): Promise<boolean> {
  return new Promise((resolve) => {
    const child = spawn(binary, ['--version'], { stdio: 'ignore' });
    child.once('error', () => resolve(false));
    child.once('exit', (code) => resolve(code === 0));
  });
}

/**
 * Starts a private `redis-server` on loopback, with `maxmemory-policy
 * noeviction` (BullMQ requires it) and, by default, AOF on.
 */
export async function startRedisServer(
  options: RedisServerOptions = {},
): Promise<RedisServerHandle> {
  const port = options.port ?? (await freePort());
  const dir = options.dir ?? (await mkdtemp(join(tmpdir(), 'requeue-redis-')));
  const binary = options.binary ?? 'redis-server';
  const appendonly = options.appendonly ?? true;
  const startTimeoutMs = options.startTimeoutMs ?? 10_000;
  let child: ChildProcess | undefined;

  const start = async (): Promise<void> => {
    const args = [
      '--port',
      String(port),
      '--bind',
      '127.0.0.1',
      '--dir',
      dir,
      '--appendonly',
      appendonly ? 'yes' : 'no',
      '--appendfsync',
      'everysec',
      '--save',
      '',
      '--maxmemory-policy',
      'noeviction',
      '--daemonize',
      'no',
      '--protected-mode',
      'yes',
      '--hz',
      String(options.hz ?? 100),
      ...(options.args ?? []),
    ];
    const proc = spawn(binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    child = proc;
    let output = '';
    proc.stdout?.on('data', (chunk: Buffer) => {
      if (output.length < 4000) output += chunk.toString();
    });
    proc.stderr?.on('data', (chunk: Buffer) => {
      if (output.length < 4000) output += chunk.toString();
    });
    const exited = new Promise<never>((_, reject) => {
      proc.once('error', (err) => reject(err));
      proc.once('exit', (code) =>
        reject(new Error(`redis-server exited with code ${code} before answering:\n${output}`)),
      );
    });
    const deadline = performance.now() + startTimeoutMs;
    const ready = (async () => {
      while (performance.now() < deadline) {
        if (await canConnect('127.0.0.1', port, 200)) return;
        await new Promise((r) => setTimeout(r, 25));
      }
      throw new Error(`redis-server did not answer on port ${port} within ${startTimeoutMs} ms`);
    })();
    await Promise.race([ready, exited]);
    exited.catch(() => undefined);
  };

  const waitExit = async (signal: NodeJS.Signals): Promise<void> => {
    const proc = child;
    if (!proc || proc.exitCode !== null || proc.signalCode !== null) return;
    await new Promise<void>((resolve) => {
      proc.once('exit', () => resolve());
      proc.kill(signal);
    });
  };

  await start();
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    dir,
    get pid() {
      return child?.exitCode === null && child.signalCode === null ? child.pid : undefined;
    },
    stop: () => waitExit('SIGTERM'),
    kill: () => waitExit('SIGKILL'),
    restart: async () => {
      await waitExit('SIGTERM');
      await start();
    },
    signal: (signal) => {
      child?.kill(signal);
    },
  };
}

/** True when a process with this pid exists (one we may not signal counts too). */
export function isAlive(pid: number): boolean {
  if (!Number.isSafeInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

/**
 * Takes over a `redis-server` this process did not start (one left behind by
 * a killed process): stopping it signals its pid and waits until it is gone.
 * The signal is sent synchronously, so `stop()` works in an `exit` handler.
 */
export function adoptRedisServer(server: {
  pid: number;
  port: number;
  dir: string;
}): RedisServerHandle {
  const { pid, port, dir } = server;
  const end = async (signal: NodeJS.Signals): Promise<void> => {
    try {
      process.kill(pid, signal);
    } catch {
      return;
    }
    const deadline = performance.now() + 10_000;
    while (isAlive(pid) && performance.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20));
    }
  };
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    dir,
    get pid() {
      return isAlive(pid) ? pid : undefined;
    },
    stop: () => end('SIGTERM'),
    kill: () => end('SIGKILL'),
    restart: () => Promise.reject(new Error('an adopted redis-server cannot be restarted')),
    signal: (signal) => {
      process.kill(pid, signal);
    },
  };
}
