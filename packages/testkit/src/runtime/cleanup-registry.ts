import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { mkdtempSync, renameSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { REAPER_SOURCE } from "./reaper-source.js";

/**
 * What to do, synchronously, if the process ends while a service is still running: commands to run
 * first (for example `pg_ctl stop -m immediate`), then processes to SIGKILL, then folders to delete.
 *
 * @example
 * ```ts
 * const plan: CleanupPlan = { commands: [], pids: [jvmPid], dirs: ["/tmp/onceflow-kafka-x1"] };
 * ```
 */
export interface CleanupPlan {
  commands: { command: string; args: string[] }[];
  pids: number[];
  dirs: string[];
}

/**
 * A registered {@link CleanupPlan}: update it as the service changes, release it once stopped.
 *
 * @example
 * ```ts
 * handle.update({ commands: [], pids: [newPid], dirs: [workDir] });
 * handle.release();
 * ```
 */
export interface CleanupHandle {
  update(plan: CleanupPlan): void;
  release(): void;
}

const plans = new Map<string, CleanupPlan>();
let hooksInstalled = false;
let planDir: string | undefined;
let reaper: ChildProcess | undefined;
let nextId = 0;

function carryOutSync(plan: CleanupPlan): void {
  for (const { command, args } of plan.commands) {
    try {
      spawnSync(command, args, { stdio: "ignore", timeout: 30_000 });
    } catch {
      // best effort: the process is ending
    }
  }
  for (const pid of plan.pids) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {
      // already gone
    }
  }
  for (const dir of plan.dirs) rmSync(dir, { recursive: true, force: true });
}

function cleanUpEverythingSync(): void {
  for (const [id, plan] of plans) {
    plans.delete(id);
    carryOutSync(plan);
  }
  if (planDir !== undefined) rmSync(planDir, { recursive: true, force: true });
  planDir = undefined;
  reaper?.kill("SIGTERM");
  reaper = undefined;
}

function onSignal(signal: NodeJS.Signals): void {
  cleanUpEverythingSync();
  // Our listener was registered with once(); when no one else handles the signal, re-raise it so the
  // process still ends the way it would have without us.
  if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
}

function installHooks(): void {
  if (hooksInstalled) return;
  hooksInstalled = true;
  process.on("exit", cleanUpEverythingSync);
  for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"] as const) process.once(signal, onSignal);
}

function ensureReaper(): string {
  if (planDir !== undefined) return planDir;
  planDir = mkdtempSync(join(tmpdir(), `onceflow-reaper-${process.pid}-`));
  const env = { ...process.env };
  delete env.NODE_OPTIONS; // test runners put loaders there; the reaper needs none
  reaper = spawn(process.execPath, ["-e", REAPER_SOURCE, String(process.pid), planDir], {
    detached: true,
    stdio: "ignore",
    env,
  });
  reaper.on("error", () => {}); // the exit hooks still cover every case but SIGKILL
  reaper.unref();
  return planDir;
}

function writePlan(id: string, plan: CleanupPlan): void {
  const dir = ensureReaper();
  const target = join(dir, `${id}.json`);
  writeFileSync(`${target}.tmp`, JSON.stringify(plan));
  renameSync(`${target}.tmp`, target); // the reaper never reads half a plan
}

/**
 * Registers what must happen to a service if this process ends before the service is stopped: on
 * `exit` and on SIGINT/SIGTERM/SIGHUP the plan runs synchronously; if the process is SIGKILLed, a
 * detached reaper process runs it.
 *
 * @example
 * ```ts
 * const cleanup = registerCleanup("kafka", { commands: [], pids: [jvm.pid!], dirs: [workDir] });
 * // … later, after a normal stop:
 * cleanup.release();
 * ```
 */
export function registerCleanup(name: string, plan: CleanupPlan): CleanupHandle {
  installHooks();
  const id = `${name}-${process.pid}-${nextId++}`;
  plans.set(id, plan);
  writePlan(id, plan);
  return {
    update(next) {
      if (!plans.has(id)) return;
      plans.set(id, next);
      writePlan(id, next);
    },
    release() {
      plans.delete(id);
      if (planDir !== undefined) rmSync(join(planDir, `${id}.json`), { force: true });
    },
  };
}
