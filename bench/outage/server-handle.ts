/**
 * The latency server's thread as a run uses it (`server-thread.ts`): start
 * it, learn its URL, start its clock, call it over HTTP with a client
 * timeout, close it and read what it saw. Shared by the requeue runs
 * (`real-run.ts`) and the plain client (`plain-run.ts`).
 */
import { Agent, request } from 'node:http';
import { Worker } from 'node:worker_threads';
import type { ServerSeconds } from './latency-server.js';
import type { ServerThreadData, ToThread } from './server-thread.js';

/** One call's outcome: an answer, the client's timeout, or another error. */
export type CallOutcome = 'ok' | 'timeout' | Error;

export interface ServerHandle {
  url: string;
  /** Second 0 of the server's figures is `t0` (`performance.now()` of this thread). */
  start(t0: number): void;
  /** A GET that gives up after `timeoutMs`, dropping its connection (the server carries on). */
  call(timeoutMs: number): Promise<CallOutcome>;
  /** Unblocks waiting calls, stops the thread, and gives what the server saw. */
  close(): Promise<ServerSeconds>;
}

export async function startServer(data: ServerThreadData): Promise<ServerHandle> {
  // The thread's code is TypeScript: tsx's loader is registered in the thread first.
  const entry = new URL('./server-thread.ts', import.meta.url).href;
  const thread = new Worker(
    `import('tsx/esm/api').then((tsx) => { tsx.register(); return import(${JSON.stringify(entry)}); });`,
    { eval: true, workerData: data },
  );
  const fromThread = <T>(kind: string): Promise<T> =>
    new Promise((resolve, reject) => {
      const onMessage = (message: { kind: string } & T): void => {
        if (message.kind !== kind) return;
        thread.off('message', onMessage);
        resolve(message);
      };
      thread.on('message', onMessage);
      thread.once('error', reject);
    });
  const toThread = (message: ToThread): void => thread.postMessage(message);
  const { url } = await fromThread<{ url: string }>('url');
  const agent = new Agent({ keepAlive: true, maxSockets: Infinity, maxFreeSockets: 4096 });

  const call = (timeoutMs: number): Promise<CallOutcome> =>
    new Promise((resolve) => {
      let settled = false;
      const settle = (outcome: CallOutcome): void => {
        if (settled) return;
        settled = true;
        clearTimeout(timer);
        resolve(outcome);
      };
      const req = request(url, { agent, method: 'GET' }, (res) => {
        res.resume();
        res.on('end', () => settle(res.statusCode === 200 ? 'ok' : new Error(`${res.statusCode}`)));
        res.on('error', (err) => settle(err));
      });
      // The client's timeout: it stops waiting and drops the connection; the server carries on.
      const timer = setTimeout(() => {
        settle('timeout');
        req.destroy();
      }, timeoutMs);
      req.on('error', (err) => settle(err));
      req.end();
    });

  return {
    url,
    start: (t0) => toThread({ kind: 'start', t0Epoch: performance.timeOrigin + t0 }),
    call,
    close: async () => {
      const stats = fromThread<{ stats: ServerSeconds }>('stats');
      toThread({ kind: 'close' });
      const server = await stats;
      await thread.terminate();
      agent.destroy();
      return server.stats;
    },
  };
}
