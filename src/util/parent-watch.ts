/**
 * Whether npm started this process (`npx requeue worker …`, `npm start`): npm
 * sets `npm_command` (and `npm_lifecycle_event` for a script) in its
 * children's environment. Such a process runs under `npm → sh → node`;
 * `kill <npm's pid>` ends npm and its shell but never signals node, so node
 * must notice that its parent went.
 */
export function startedByNpm(env: NodeJS.ProcessEnv = process.env): boolean {
  return env.npm_command !== undefined || env.npm_lifecycle_event !== undefined;
}

/** The parent pid when this module was loaded, before a slow start could outlast the parent. */
const ppidAtLoad = process.ppid;

/** Options of {@link watchParent}. */
export interface WatchParentOptions {
  /**
   * How often the parent pid is read, in ms.
   * @defaultValue 500
   */
  pollMs?: number;
  /** Reads the parent pid. @defaultValue `() => process.ppid` */
  ppid?: () => number;
  /** The parent pid to compare with. @defaultValue the parent pid when the process started */
  first?: number;
}

/** A watch on the parent process; `stop` ends it. */
export interface ParentWatch {
  /** Resolves once the parent has gone. */
  readonly gone: Promise<void>;
  stop(): void;
}

/**
 * Resolves when the process that started this one has exited: the parent pid
 * changes when the kernel re-parents an orphan (to init or a subreaper). The
 * timer is unref'd: the watch never holds the process.
 */
export function watchParent(options: WatchParentOptions = {}): ParentWatch {
  const { pollMs = 500, ppid = () => process.ppid, first = ppidAtLoad } = options;
  let timer: NodeJS.Timeout | undefined;
  const gone = new Promise<void>((resolve) => {
    timer = setInterval(() => {
      if (ppid() === first) return;
      clearInterval(timer);
      resolve();
    }, pollMs);
    timer.unref();
  });
  return { gone, stop: () => clearInterval(timer) };
}
