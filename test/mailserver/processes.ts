/** Running the test mail servers' daemons: commands, owned process groups, readiness, ids. */
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { promisify } from 'node:util';

const execFileP = promisify(execFile);

/** A port another process took between choosing it and binding it: start again with fresh ports. */
export class PortInUseError extends Error {}

/** Servers of this process, killed synchronously if the process exits without stop(). */
export const live = new Set<() => void>();
let exitHooksInstalled = false;

/**
 * The daemons run in their own process groups (so a Ctrl-C in the terminal
 * does not reach them) and would outlive this process: kill them on exit and
 * on fatal signals. A signal is re-raised afterwards unless someone else
 * (e.g. vitest) handles it.
 */
export function installExitHooks(): void {
  if (exitHooksInstalled) return;
  exitHooksInstalled = true;
  const killAll = () => {
    for (const kill of live) kill();
    live.clear();
  };
  process.on('exit', killAll);
  for (const sig of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    const onSignal = () => {
      killAll();
      if (process.listenerCount(sig) === 1) {
        process.off(sig, onSignal);
        process.kill(process.pid, sig);
      }
    };
    process.on(sig, onSignal);
  }
}

export async function run(
  cmd: string,
  args: string[],
  opts: { env?: NodeJS.ProcessEnv; cwd?: string; timeout?: number } = {},
): Promise<string> {
  try {
    const { stdout } = await execFileP(cmd, args, { timeout: 60_000, maxBuffer: 16 << 20, ...opts });
    return stdout;
  } catch (err) {
    const e = err as Error & { stderr?: string; stdout?: string };
    throw new Error(`${cmd} ${args.join(' ')} failed: ${e.message}\n${e.stdout ?? ''}${e.stderr ?? ''}`);
  }
}

/** Spawn a daemon in its own process group, output appended to a file. */
export function spawnOwned(cmd: string, args: string[], outFile: string, env?: NodeJS.ProcessEnv): ChildProcess {
  const out = fs.openSync(outFile, 'a');
  try {
    const child = spawn(cmd, args, { detached: true, stdio: ['ignore', out, out], env: env ?? process.env });
    child.on('error', () => undefined); // reported through exitCode / waitFor* instead
    child.unref();
    return child;
  } finally {
    fs.closeSync(out);
  }
}

/** Signal a child's whole process group (Postfix's master and Dovecot lead their own). */
export function killGroup(child: ChildProcess | undefined, signal: NodeJS.Signals): void {
  if (!child?.pid || child.exitCode !== null || child.signalCode !== null) return;
  try {
    process.kill(-child.pid, signal);
  } catch {
    try {
      child.kill(signal);
    } catch {
      /* already gone */
    }
  }
}

/**
 * SIGTERM to the master only (Dovecot then shuts its children down in order,
 * Postfix's master signals its own process group), SIGKILL the group after 5 s.
 */
export async function stopChild(child: ChildProcess | undefined): Promise<void> {
  if (!child?.pid || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  child.kill('SIGTERM');
  const timer = setTimeout(() => killGroup(child, 'SIGKILL'), 5_000);
  await exited;
  clearTimeout(timer);
  // Helpers (login processes, smtpd) may outlive the master for a moment.
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {
    /* group empty */
  }
}

/** A daemon being started: what to report if it dies. */
export interface Daemon {
  child: ChildProcess | undefined;
  name: string;
  log: string;
  ports: number[];
}

/** Can we bind this loopback port right now? */
export function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

export function connects(endpoint: number | string): Promise<boolean> {
  return new Promise((resolve) => {
    const s = typeof endpoint === 'number' ? net.connect(endpoint, '127.0.0.1') : net.connect(endpoint);
    s.once('connect', () => {
      s.destroy();
      resolve(true);
    });
    s.once('error', () => resolve(false));
  });
}

/**
 * Poll until every endpoint (TCP port on 127.0.0.1 or unix socket path)
 * accepts connections. Fails fast, with the log tail, if the daemon exits;
 * a port taken by someone else becomes a PortInUseError (retried with new
 * ports). Postfix's own message about it is lost: it logs through postlogd,
 * which is not up yet at that point, so we probe the ports ourselves.
 */
export async function waitUntilReady(d: Daemon, endpoints: (number | string)[], timeoutMs = 20_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  const pending = new Set(endpoints);
  for (;;) {
    const { child } = d;
    if (!child || child.exitCode !== null || child.signalCode !== null) {
      const taken: number[] = [];
      for (const port of d.ports) if (!(await portFree(port))) taken.push(port);
      const tail = tailOf(d.log) + tailOf(path.join(path.dirname(d.log), 'stderr.log'));
      const msg = `${d.name} exited (${child?.exitCode ?? child?.signalCode}) during startup${taken.length ? `; port(s) ${taken.join(', ')} in use by another process` : ''}:\n${tail}`;
      throw taken.length || /in use/i.test(tail) ? new PortInUseError(msg) : new Error(msg);
    }
    for (const e of [...pending]) if (await connects(e)) pending.delete(e);
    if (pending.size === 0) return;
    if (Date.now() > deadline) {
      throw new Error(
        `${d.name} not ready within ${timeoutMs} ms (waiting for ${[...pending].join(', ')}):\n${tailOf(d.log)}`,
      );
    }
    await sleep(20);
  }
}

export function tailOf(file: string, lines = 30): string {
  try {
    return fs.readFileSync(file, 'utf8').split('\n').slice(-lines).join('\n');
  } catch {
    return '';
  }
}

export function lookupId(file: '/etc/passwd' | '/etc/group', name: string): number {
  const line = fs
    .readFileSync(file, 'utf8')
    .split('\n')
    .find((l) => l.startsWith(`${name}:`));
  if (!line) throw new Error(`${name} not found in ${file}`);
  return Number(line.split(':')[2]);
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A loopback TCP port nobody listens on right now (the caller binds it soon after; see PortInUseError). */
export function freeLoopbackPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as net.AddressInfo;
      srv.close(() => resolve(port));
    });
  });
}

/**
 * `signal` to a child's whole process group (for a leader that ignores SIGTERM, like `unshare
 * --fork`), SIGKILL after 5 s; resolves once the leader exited. The timers keep Node alive meanwhile (the
 * child itself is unref'd).
 */
export async function stopGroup(child: ChildProcess | undefined, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  if (!child?.pid || child.exitCode !== null || child.signalCode !== null) return;
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  killGroup(child, signal);
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<void>((resolve) => {
    timer = setTimeout(() => {
      killGroup(child, 'SIGKILL');
      timer = setTimeout(resolve, 2_000);
    }, 5_000);
  });
  await Promise.race([exited, late]);
  clearTimeout(timer);
}
