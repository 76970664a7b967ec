import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { type Child, startJob } from "./chaos-runner.js";

// One process of a one-process-per-subtask deployment: a chaos job (the Kafka chaos job unless the
// launcher names another fixture) started with CHAOS_SUBTASK_INDEX/CHAOS_PARALLELISM. It is ready once it stored its first checkpoint (the job
// prints `CHECKPOINT <id>`), as a readiness probe would say; how it ended is read from its exit and
// the `FAILED <code>` line the job prints. The same watching serves a subtask run as a container
// (subtask-container.ts): only how it is started and signalled differs.

/** The Kafka chaos job (TypeScript, run with tsx; bundled for a container). */
export const kafkaChaosJobFixture = join(
  dirname(fileURLToPath(import.meta.url)),
  "fixtures",
  "kafka-chaos-job.ts",
);

/** How a process ended: its exit, and the error code it printed when it failed. */
export interface ProcessEnding {
  readonly code: number | null;
  readonly signal: NodeJS.Signals | null;
  /** The `OnceflowError` code of the failure that ended it (`-` for another error), if it failed. */
  readonly errorCode: string | undefined;
  /** The first line of that failure. */
  readonly failure: string | undefined;
}

/** What the chaos does to a subtask: a container gets `SIGSTOP`/`SIGCONT` as `docker pause`/`unpause`. */
export type ChaosSignal = "SIGKILL" | "SIGTERM" | "SIGSTOP" | "SIGCONT";

/** Starts one subtask of `parallelism` with the run's environment: a process or a container. */
export type SubtaskLauncher = (
  env: Readonly<Record<string, string>>,
  subtask: number,
  parallelism: number,
) => SubtaskProcess;

/** A running (or ended) process of one subtask. */
export interface SubtaskProcess {
  /** A number unique in the run, for the log: `#12`. */
  readonly serial: number;
  readonly subtask: number;
  readonly parallelism: number;
  readonly child: Child;
  /** Resolves at its first stored checkpoint. */
  readonly ready: Promise<void>;
  isReady(): boolean;
  isAlive(): boolean;
  readonly ended: Promise<ProcessEnding>;
  /** `subtask 1/3 #12`. */
  readonly name: string;
  /** Sends `signal`; resolves once it was delivered (or the process had ended). */
  signal(signal: ChaosSignal): Promise<void>;
}

let serials = 0;

/**
 * A launcher that starts the chaos job `fixture` (a TypeScript module run with tsx) for one subtask,
 * as a child process with the run's environment.
 *
 * @example
 * ```ts
 * const launch = subtaskProcessLauncher(join(here, "fixtures", "keyed-window-job.ts"));
 * const process = launch(env, 0, 2);
 * ```
 */
export function subtaskProcessLauncher(fixture: string): SubtaskLauncher {
  return (env, subtask, parallelism) => {
    const child = startJob({ ...env, ...subtaskEnvironment(subtask, parallelism) }, fixture);
    return watchSubtask(child, subtask, parallelism, async (signal) => {
      child.process.kill(signal);
    });
  };
}

/** Starts the Kafka chaos job for `subtask` of `parallelism` with the run's environment, as a child process. */
export const startSubtaskProcess: SubtaskLauncher = subtaskProcessLauncher(kafkaChaosJobFixture);

/** What tells the job which subtask it runs (as a StatefulSet's ordinal would). */
export function subtaskEnvironment(subtask: number, parallelism: number): Record<string, string> {
  return {
    CHAOS_SUBTASK_INDEX: String(subtask),
    CHAOS_PARALLELISM: String(parallelism),
    CHAOS_REPORT_CHECKPOINTS: "1",
  };
}

/**
 * A subtask from the job's output: ready at its first `CHECKPOINT`, its ending from its exit and its
 * `FAILED` line. `exitSignals` maps exit codes to the signal they stand for (a container's 137).
 */
export function watchSubtask(
  child: Child,
  subtask: number,
  parallelism: number,
  signal: (signal: ChaosSignal) => Promise<void>,
  exitSignals: Readonly<Record<number, NodeJS.Signals>> = {},
  label = "",
): SubtaskProcess {
  let ready = false;
  let seen = "";
  let markReady: () => void = () => {};
  const readyPromise = new Promise<void>((resolve) => {
    markReady = () => {
      ready = true;
      resolve();
    };
  });
  const watch = (chunk: string) => {
    if (ready) return;
    seen = (seen + chunk).slice(-200);
    if (seen.includes("CHECKPOINT ")) markReady();
  };
  child.process.stdout?.on("data", watch);
  const ended = child.exited.then(({ code: exitCode, signal: exitSignal }) => {
    const mapped = exitCode === null ? undefined : exitSignals[exitCode];
    const code = mapped === undefined ? exitCode : null;
    const signalled = mapped ?? exitSignal;
    const output = child.output();
    const failed = /^FAILED (\S+) (.*)$/m.exec(output);
    // A crash the job did not report (an uncaught error): the first error line of its stderr.
    const crash =
      failed === null && code !== 0 && signalled === null
        ? /^(?:\w*Error|error)\b.*$/m.exec(output.slice(output.indexOf("--- stderr")))?.[0]
        : undefined;
    return {
      code,
      signal: signalled,
      errorCode: failed?.[1] ?? (crash === undefined ? undefined : "-"),
      failure: failed?.[2] ?? crash?.slice(0, 500),
    };
  });
  serials += 1;
  let alive = true;
  void child.exited.then(() => {
    alive = false;
  });
  return {
    serial: serials,
    subtask,
    parallelism,
    child,
    ready: readyPromise,
    isReady: () => ready,
    isAlive: () => alive && child.process.exitCode === null && child.process.signalCode === null,
    ended,
    name: `subtask ${subtask}/${parallelism} #${serials}${label}`,
    signal,
  };
}

/** `exit 1 (SUPERSEDED: …)`, `SIGKILL`, `exit 0`: an ending for the log and the report. */
export function describeEnding(ending: ProcessEnding): string {
  const how = ending.signal ?? `exit ${ending.code}`;
  return ending.errorCode === undefined ? how : `${how} (${ending.errorCode}: ${ending.failure ?? ""})`;
}
