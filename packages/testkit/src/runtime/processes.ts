import { type ChildProcess, spawn } from "node:child_process";
import { readFileSync } from "node:fs";
import { setTimeout as sleep } from "node:timers/promises";

/**
 * What a finished command printed and how it ended.
 *
 * @example
 * ```ts
 * const result: CommandResult = await runCommand("mvn", ["-v"], { timeoutMs: 60_000 });
 * if (result.code !== 0) console.error(result.stderr);
 * ```
 */
export interface CommandResult {
  /** Exit code, or `null` when it was ended by a signal. */
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
  /** True when the command was killed because it ran past its timeout. */
  timedOut: boolean;
}

/**
 * Options of {@link runCommand}.
 *
 * @example
 * ```ts
 * const options: RunCommandOptions = { timeoutMs: 120_000, cwd: workDir };
 * ```
 */
export interface RunCommandOptions {
  /** SIGKILL the command after this long. */
  timeoutMs: number;
  cwd?: string;
  env?: NodeJS.ProcessEnv;
}

/**
 * Runs a command to completion and collects its output. Rejects only when the command cannot be
 * started at all (for example ENOENT); a non-zero exit is a normal result.
 *
 * @example
 * ```ts
 * const { code, stderr } = await runCommand("java", ["-version"], { timeoutMs: 10_000 });
 * ```
 */
export function runCommand(
  command: string,
  args: readonly string[],
  options: RunCommandOptions,
): Promise<CommandResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, {
      cwd: options.cwd,
      env: options.env ?? process.env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let stdout = "";
    let stderr = "";
    let timedOut = false;
    child.stdout.setEncoding("utf8").on("data", (chunk: string) => {
      stdout += chunk;
    });
    child.stderr.setEncoding("utf8").on("data", (chunk: string) => {
      stderr += chunk;
    });
    const timer = setTimeout(() => {
      timedOut = true;
      child.kill("SIGKILL");
    }, options.timeoutMs);
    child.once("error", (error) => {
      clearTimeout(timer);
      reject(error);
    });
    child.once("close", (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout, stderr, timedOut });
    });
  });
}

/**
 * Waits until a child process has exited. Resolves `true` when it did within `timeoutMs`.
 *
 * @example
 * ```ts
 * child.kill("SIGTERM");
 * if (!(await waitForExit(child, 10_000))) child.kill("SIGKILL");
 * ```
 */
export function waitForExit(child: ChildProcess, timeoutMs: number): Promise<boolean> {
  if (child.exitCode !== null || child.signalCode !== null) return Promise.resolve(true);
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      child.off("exit", onExit);
      resolve(false);
    }, timeoutMs);
    const onExit = (): void => {
      clearTimeout(timer);
      resolve(true);
    };
    child.once("exit", onExit);
  });
}

/**
 * Stops a child process politely and then firmly: SIGTERM, wait `graceMs`, SIGKILL, wait for the exit.
 *
 * @example
 * ```ts
 * await terminateChild(brokerProcess, 20_000);
 * ```
 */
export async function terminateChild(child: ChildProcess, graceMs: number): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  child.kill("SIGTERM");
  if (await waitForExit(child, graceMs)) return;
  child.kill("SIGKILL");
  await waitForExit(child, 10_000);
}

/**
 * Whether a process id names a live process. A zombie (exited, not yet reaped by its parent) counts
 * as gone: it holds no ports, files or memory.
 *
 * @example
 * ```ts
 * await service.stop();
 * expect(isProcessAlive(pid)).toBe(false);
 * ```
 */
export function isProcessAlive(pid: number): boolean {
  try {
    process.kill(pid, 0);
  } catch (error) {
    return (error as NodeJS.ErrnoException).code === "EPERM";
  }
  try {
    // /proc/<pid>/stat is "pid (comm) state ..."; comm may contain spaces, so read after the last ')'.
    const stat = readFileSync(`/proc/${pid}/stat`, "utf8");
    return stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3) !== "Z";
  } catch {
    return true; // no procfs (macOS): kill(0) is all we have
  }
}

/**
 * Polls until a process (not necessarily our child) is gone. Resolves `true` when it went within
 * `timeoutMs`.
 *
 * @example
 * ```ts
 * await waitForPidExit(postmasterPid, 30_000);
 * ```
 */
export async function waitForPidExit(pid: number, timeoutMs: number): Promise<boolean> {
  const deadline = Date.now() + timeoutMs;
  while (isProcessAlive(pid)) {
    if (Date.now() > deadline) return false;
    await sleep(50);
  }
  return true;
}

/**
 * The last characters of a command's output, for error messages.
 *
 * @example
 * ```ts
 * throw new Error(`mvn failed:\n${outputTail(result.stdout + result.stderr)}`);
 * ```
 */
export function outputTail(text: string, maxLines = 40): string {
  const lines = text.trimEnd().split("\n");
  return lines.slice(-maxLines).join("\n");
}
