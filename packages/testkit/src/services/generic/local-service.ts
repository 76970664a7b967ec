import { type ChildProcess, spawn } from "node:child_process";
import { closeSync, openSync, writeSync } from "node:fs";
import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { serviceUnavailable } from "../../errors/service-errors.js";
import { type CleanupHandle, registerCleanup } from "../../runtime/cleanup-registry.js";
import { findFreePort } from "../../runtime/free-port.js";
import { readLogTail } from "../../runtime/log-tail.js";
import { terminateChild, waitForExit } from "../../runtime/processes.js";
import { pollUntilReady } from "../../runtime/readiness.js";
import type { ResolvedServiceDefinition, StartedService } from "./service-definition.js";

const HOST = "127.0.0.1";
const PORT_TAKEN = /address already in use|EADDRINUSE|could not bind|bind: /i;

/**
 * Options of {@link startLocalService}.
 *
 * @example
 * ```ts
 * const options: LocalServiceOptions = { startTimeoutMs: 60_000, version: "Redis server v=7.0.15" };
 * ```
 */
export interface LocalServiceOptions {
  readonly startTimeoutMs: number;
  /** The version line the probe read, used when the readiness check reports none. */
  readonly version?: string;
  /** The environment the command runs with (the definition's own variables are added). */
  readonly env?: NodeJS.ProcessEnv;
}

/**
 * Starts the definition's local command in a fresh temporary folder on a free port and waits until
 * it is ready. The process is registered with the cleanup registry (exit and signal handlers, and
 * the reaper if this process is SIGKILLed), so it never outlives the tests.
 *
 * @example
 * ```ts
 * const redis = await startLocalService(resolveServiceDefinition(redisService()), { startTimeoutMs: 60_000 });
 * ```
 */
export async function startLocalService(
  definition: ResolvedServiceDefinition,
  options: LocalServiceOptions,
): Promise<StartedService> {
  const service = new LocalServiceProcess(definition, options);
  try {
    await service.create();
    await service.startFirstTime();
  } catch (error) {
    await service.stop();
    throw error;
  }
  return service.asStarted();
}

class LocalServiceProcess {
  private workDir = "";
  private port = 0;
  private child: ChildProcess | undefined;
  private cleanup: CleanupHandle | undefined;
  private stopped = false;
  private version: string;

  constructor(
    private readonly definition: ResolvedServiceDefinition,
    private readonly options: LocalServiceOptions,
  ) {
    this.version = options.version ?? "unknown";
  }

  private get logPath(): string {
    return join(this.workDir, "service.log");
  }

  private get running(): boolean {
    return this.child !== undefined && this.child.exitCode === null && this.child.signalCode === null;
  }

  async create(): Promise<void> {
    this.workDir = await mkdtemp(join(tmpdir(), `onceflow-${this.definition.name}-`));
    this.cleanup = registerCleanup(this.definition.name, { commands: [], pids: [], dirs: [this.workDir] });
    this.port = await findFreePort(HOST);
  }

  /** A port found free can be taken before the process binds it: then one more try on a new port. */
  async startFirstTime(): Promise<void> {
    try {
      await this.start();
    } catch (error) {
      if (!PORT_TAKEN.test(await readLogTail(this.logPath, 200))) throw error;
      this.port = await findFreePort(HOST);
      await this.start();
    }
  }

  async start(): Promise<void> {
    const { definition } = this;
    const local = definition.local;
    if (local === undefined)
      throw serviceUnavailable(`${definition.displayName}: no local command in the definition`);
    if (this.stopped) {
      throw serviceUnavailable(
        `${definition.displayName} start(): this service was stopped and its folder deleted`,
      );
    }
    if (this.running) return;
    const args = [...local.args({ host: HOST, port: this.port, workDir: this.workDir })];
    // The process writes to a file, not to a pipe of ours: it must not depend on this process to drain it.
    const log = openSync(this.logPath, "a");
    writeSync(
      log,
      `\n===== onceflow testkit: ${local.command} ${args.join(" ")} at ${new Date().toISOString()}\n`,
    );
    let child: ChildProcess;
    try {
      child = spawn(local.command, args, {
        cwd: this.workDir,
        stdio: ["ignore", log, log],
        env: { ...(this.options.env ?? process.env), ...local.environment },
      });
    } finally {
      closeSync(log);
    }
    let spawnError: Error | undefined;
    child.once("error", (error) => {
      spawnError = error;
    });
    this.child = child;
    this.cleanup?.update({
      commands: [],
      pids: child.pid === undefined ? [] : [child.pid],
      dirs: [this.workDir],
    });
    const address = { host: HOST, port: this.port };
    const outcome = await pollUntilReady(() => definition.ready(address), {
      timeoutMs: this.options.startTimeoutMs,
      stillRunning: () => spawnError === undefined && child.exitCode === null && child.signalCode === null,
    });
    if (!outcome.ready) {
      await terminateChild(child, 5_000);
      this.forgetPid();
      const why =
        spawnError === undefined
          ? outcome.problem
          : `${local.command} could not be started: ${spawnError.message}`;
      throw serviceUnavailable(
        `${definition.displayName} (${local.command} on port ${this.port}) did not get ready: ${why}\n` +
          `--- log tail (${this.logPath}) ---\n${await readLogTail(this.logPath)}`,
        { service: definition.name, port: this.port },
      );
    }
    if (typeof outcome.value === "string" && outcome.value !== "") this.version = outcome.value;
  }

  /** SIGKILL: the crash a fault-injection test wants. The folder and the port stay for start(). */
  async kill(): Promise<void> {
    const child = this.child;
    if (child === undefined || !this.running) return;
    child.kill("SIGKILL");
    await waitForExit(child, 30_000);
    this.forgetPid();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.child !== undefined) await terminateChild(this.child, 10_000);
    if (this.workDir !== "") await rm(this.workDir, { recursive: true, force: true });
    this.cleanup?.release();
  }

  /** The pid is free for reuse once the process is gone: the crash cleanup must not kill whoever gets it next. */
  private forgetPid(): void {
    this.cleanup?.update({ commands: [], pids: [], dirs: [this.workDir] });
  }

  asStarted(): StartedService {
    // The getters read the live state: the process id changes on start(), the version once known.
    const service = this;
    const address = { host: HOST, port: this.port };
    return {
      name: this.definition.name,
      url: this.definition.url(address),
      host: HOST,
      port: this.port,
      provider: "local",
      get version() {
        return service.version;
      },
      get pid() {
        return service.running ? service.child?.pid : undefined;
      },
      workDir: this.workDir,
      kill: () => this.kill(),
      start: () => this.start(),
      stop: () => this.stop(),
    };
  }
}
