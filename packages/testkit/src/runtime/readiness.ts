import { Socket } from "node:net";
import { setTimeout as sleep } from "node:timers/promises";

/**
 * Options of {@link pollUntilReady}.
 *
 * @example
 * ```ts
 * const options: PollOptions = { timeoutMs: 60_000, intervalMs: 100, stillRunning: () => child.exitCode === null };
 * ```
 */
export interface PollOptions {
  /** Give up after this long. */
  readonly timeoutMs: number;
  /** Pause between two checks (default 100 ms). */
  readonly intervalMs?: number;
  /** Stop early when the process that should answer has died (default: always running). */
  readonly stillRunning?: () => boolean;
}

/**
 * The outcome of {@link pollUntilReady}: the check's value once it passed, or why it never did.
 *
 * @example
 * ```ts
 * const outcome: PollOutcome<string> = { ready: false, problem: "no answer within 100 ms (last: ECONNREFUSED)" };
 * ```
 */
export type PollOutcome<T> = { ready: true; value: T } | { ready: false; problem: string };

/**
 * Runs `check` until it resolves (ready) or the time is up; a rejection means "not yet". Resolves
 * with the check's value, or with the last rejection's message.
 *
 * @example
 * ```ts
 * const outcome = await pollUntilReady(() => tcpConnects("127.0.0.1", port), { timeoutMs: 30_000 });
 * if (!outcome.ready) throw new Error(outcome.problem);
 * ```
 */
export async function pollUntilReady<T>(
  check: () => Promise<T>,
  options: PollOptions,
): Promise<PollOutcome<T>> {
  const deadline = Date.now() + options.timeoutMs;
  let problem = "not asked yet";
  for (;;) {
    if (options.stillRunning !== undefined && !options.stillRunning()) {
      return { ready: false, problem: `the process exited (last answer: ${problem})` };
    }
    try {
      return { ready: true, value: await check() };
    } catch (error) {
      problem = error instanceof Error ? error.message : String(error);
    }
    if (Date.now() >= deadline) {
      return { ready: false, problem: `no answer within ${options.timeoutMs} ms (last: ${problem})` };
    }
    await sleep(options.intervalMs ?? 100);
  }
}

/**
 * Resolves once a TCP connection to `host:port` succeeds (and closes it); rejects otherwise. The
 * default readiness check of a service.
 *
 * @example
 * ```ts
 * await tcpConnects("127.0.0.1", 6379);
 * ```
 */
export function tcpConnects(host: string, port: number, timeoutMs = 2_000): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket = new Socket();
    socket.setTimeout(timeoutMs, () => socket.destroy(new Error(`no TCP connection within ${timeoutMs} ms`)));
    socket.once("error", reject);
    socket.connect(port, host, () => {
      socket.end();
      socket.destroy();
      resolve();
    });
  });
}
