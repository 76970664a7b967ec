import { appendFile, chown, mkdtemp, readFile, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { serviceUnavailable } from "../../errors/service-errors.js";
import { type CleanupHandle, registerCleanup } from "../../runtime/cleanup-registry.js";
import { findFreePort } from "../../runtime/free-port.js";
import { readLogTail } from "../../runtime/log-tail.js";
import { outputTail, runCommand, waitForPidExit } from "../../runtime/processes.js";
import type { ProbeResult } from "../providers/provider-selection.js";
import { findPostgresBinaries, type PostgresBinaries } from "./postgres-binaries.js";
import { waitUntilPostgresAccepts } from "./postgres-readiness.js";
import type { PostgresService } from "./postgres-service.js";

const HOST = "127.0.0.1";
const SUPERUSER = "postgres";
const DATABASE = "postgres";

/**
 * Who runs the server processes: ourselves, or (when we are root) an unprivileged user via runuser.
 *
 * @example
 * ```ts
 * const user: ServerUser = { kind: "runuser", name: "postgres", uid: 101, gid: 104 };
 * ```
 */
export type ServerUser = { kind: "self" } | { kind: "runuser"; name: string; uid: number; gid: number };

async function lookUpUser(name: string): Promise<{ uid: number; gid: number } | undefined> {
  try {
    const [uid, gid] = await Promise.all(
      ["-u", "-g"].map((flag) => runCommand("id", [flag, name], { timeoutMs: 10_000 })),
    );
    if (uid?.code !== 0 || gid?.code !== 0) return undefined;
    return { uid: Number(uid.stdout.trim()), gid: Number(gid.stdout.trim()) };
  } catch {
    return undefined;
  }
}

/**
 * Checks that this machine can run a throwaway server: the server binaries, and when the tests run as
 * root (PostgreSQL refuses to), `runuser` and an unprivileged user to run it as.
 *
 * @example
 * ```ts
 * const { probe, binaries, user } = await probeLocalPostgres("postgres");
 * ```
 */
export async function probeLocalPostgres(
  osUser: string,
  env: NodeJS.ProcessEnv = process.env,
): Promise<{ probe: ProbeResult; binaries?: PostgresBinaries; user?: ServerUser }> {
  const remedy =
    "install the PostgreSQL server binaries (Debian/Ubuntu: apt-get install postgresql; initdb and pg_ctl " +
    "live in /usr/lib/postgresql/<major>/bin) or set ONCEFLOW_POSTGRES_BIN to their folder";
  const fail = (detail: string) => ({
    probe: { provider: "local" as const, available: false, detail, remedy },
  });
  const binaries = await findPostgresBinaries(env);
  if ("problem" in binaries) return fail(binaries.problem);
  let user: ServerUser = { kind: "self" };
  if (process.getuid?.() === 0) {
    const ids = await lookUpUser(osUser);
    if (ids === undefined) {
      return fail(
        `running as root, and PostgreSQL refuses root, but there is no "${osUser}" user to run it as`,
      );
    }
    const runuser = await runCommand("runuser", ["--help"], { timeoutMs: 10_000 }).catch(() => undefined);
    if (runuser === undefined) return fail("running as root, and runuser (util-linux) is not installed");
    user = { kind: "runuser", name: osUser, ...ids };
  }
  const as = user.kind === "runuser" ? ` as ${user.name}` : "";
  return {
    probe: {
      provider: "local",
      available: true,
      detail: `PostgreSQL ${binaries.version} in ${binaries.binDir}${as}`,
      remedy,
    },
    binaries,
    user,
  };
}

/**
 * Options of {@link startLocalPostgres}.
 *
 * @example
 * ```ts
 * const options: LocalPostgresOptions = { binaries, user, maxPreparedTransactions: 64, startTimeoutMs: 120_000 };
 * ```
 */
export interface LocalPostgresOptions {
  binaries: PostgresBinaries;
  user: ServerUser;
  maxPreparedTransactions: number;
  startTimeoutMs: number;
  /** "logical" for logical replication; the server's default otherwise. */
  walLevel?: "replica" | "logical";
}

/**
 * Creates a throwaway cluster with initdb in a fresh temporary folder and starts it with pg_ctl on a
 * free port (trust authentication, superuser "postgres", no fsync: nothing here must survive a machine
 * crash, only a server crash).
 *
 * @example
 * ```ts
 * const pg = await startLocalPostgres({ binaries, user, maxPreparedTransactions: 64, startTimeoutMs: 120_000 });
 * ```
 */
export async function startLocalPostgres(options: LocalPostgresOptions): Promise<PostgresService> {
  const server = new LocalPostgresServer(options);
  try {
    await server.create();
    await server.startFirstTime();
  } catch (error) {
    await server.stop();
    throw error;
  }
  return server.asService();
}

class LocalPostgresServer {
  // Short folder: the socket path (folder + "/.s.PGSQL.<port>") must stay under ~107 bytes.
  private workDir = "";
  private port = 0;
  private postmasterPid: number | undefined;
  private cleanup: CleanupHandle | undefined;
  private facts = { version: "unknown", maxPreparedTransactions: 0, walLevel: "unknown" };

  constructor(private readonly options: LocalPostgresOptions) {}

  private get dataDir(): string {
    return join(this.workDir, "data");
  }

  private get connectionString(): string {
    return `postgresql://${SUPERUSER}@${HOST}:${this.port}/${DATABASE}`;
  }

  /** The command line that runs `tool` as the server's user. */
  private asServerUser(tool: string, args: string[]): { command: string; args: string[] } {
    const { user } = this.options;
    return user.kind === "runuser"
      ? { command: "runuser", args: ["-u", user.name, "--", tool, ...args] }
      : { command: tool, args };
  }

  private async run(tool: string, args: string[], timeoutMs: number, what: string): Promise<void> {
    const { command, args: full } = this.asServerUser(tool, args);
    const result = await runCommand(command, full, { timeoutMs, cwd: this.workDir });
    if (result.code !== 0) {
      throw serviceUnavailable(
        `PostgreSQL ${what} failed (${command} ${full.join(" ")} → ${result.timedOut ? "timed out" : `exit ${result.code}`}):\n` +
          `${outputTail(`${result.stdout}${result.stderr}`)}\n--- server log tail ---\n` +
          (await readLogTail(join(this.workDir, "server.log"))),
        { what },
      );
    }
  }

  private stopCommand(mode: "immediate" | "fast"): { command: string; args: string[] } {
    return this.asServerUser(this.options.binaries.pgCtl, [
      "-D",
      this.dataDir,
      "-m",
      mode,
      "-w",
      "-t",
      "60",
      "stop",
    ]);
  }

  private updateCleanup(): void {
    this.cleanup?.update({
      commands: [this.stopCommand("immediate")],
      pids: this.postmasterPid === undefined ? [] : [this.postmasterPid],
      dirs: [this.workDir],
    });
  }

  async create(): Promise<void> {
    const base = tmpdir().length > 40 ? "/tmp" : tmpdir();
    this.workDir = await mkdtemp(join(base, "ofpg-"));
    this.cleanup = registerCleanup("postgres", { commands: [], pids: [], dirs: [this.workDir] });
    const { user, binaries, maxPreparedTransactions } = this.options;
    if (user.kind === "runuser") await chown(this.workDir, user.uid, user.gid);
    this.port = await findFreePort(HOST);
    await this.run(
      binaries.initdb,
      [
        "-D",
        this.dataDir,
        "-U",
        SUPERUSER,
        "-A",
        "trust",
        "-E",
        "UTF8",
        "--locale=C",
        "--no-sync",
        "--no-instructions",
      ],
      120_000,
      "initdb",
    );
    // Appending keeps the file's owner (the server user); settings here survive restarts as they are.
    await appendFile(
      join(this.dataDir, "postgresql.conf"),
      [
        "",
        "# onceflow testkit",
        `port = ${this.port}`,
        `listen_addresses = '${HOST}'`,
        `unix_socket_directories = '${this.workDir}'`,
        `max_prepared_transactions = ${maxPreparedTransactions}`,
        "max_connections = 200",
        // No fsync: the data must survive a server crash (restart immediate), not a machine crash.
        // synchronous_commit stays on: an immediate stop would otherwise lose acknowledged commits.
        "fsync = off",
        "full_page_writes = off",
        ...(this.options.walLevel === "logical" ? ["wal_level = logical", "max_replication_slots = 32"] : []),
        "",
      ].join("\n"),
    );
  }

  /**
   * The first start. A port found free can be taken by another process before the server binds it;
   * then the server gets a new port once (a later `port` line in postgresql.conf wins).
   */
  async startFirstTime(): Promise<void> {
    try {
      await this.start();
    } catch (error) {
      if (
        !/could not bind|Address already in use/.test(
          await readLogTail(join(this.workDir, "server.log"), 200),
        )
      ) {
        throw error;
      }
      this.port = await findFreePort(HOST);
      await appendFile(join(this.dataDir, "postgresql.conf"), `port = ${this.port}\n`);
      await this.start();
    }
  }

  async start(): Promise<void> {
    const startTimeout = Math.ceil(this.options.startTimeoutMs / 1000);
    await this.run(
      this.options.binaries.pgCtl,
      [
        "-D",
        this.dataDir,
        "-l",
        join(this.workDir, "server.log"),
        "-w",
        "-t",
        String(startTimeout),
        "-s",
        "start",
      ],
      this.options.startTimeoutMs + 10_000,
      "start",
    );
    const pidFile = await readFile(join(this.dataDir, "postmaster.pid"), "utf8");
    this.postmasterPid = Number(pidFile.split("\n")[0]);
    this.updateCleanup();
    const ready = await waitUntilPostgresAccepts(this.connectionString, this.options.startTimeoutMs);
    if ("problem" in ready) {
      throw serviceUnavailable(
        `PostgreSQL started but does not accept connections at ${this.connectionString}: ${ready.problem}\n` +
          `--- server log tail ---\n${await readLogTail(join(this.workDir, "server.log"))}`,
      );
    }
    this.facts = ready;
  }

  private async shutDown(mode: "immediate" | "fast"): Promise<void> {
    const pid = this.postmasterPid;
    if (pid === undefined) return;
    const { command, args } = this.stopCommand(mode);
    await runCommand(command, args, { timeoutMs: 70_000 }).catch(() => undefined);
    // pg_ctl -w returns once the postmaster is gone; make sure, and be firm if it is not.
    if (!(await waitForPidExit(pid, 10_000))) {
      try {
        process.kill(pid, "SIGKILL");
      } catch {
        // gone meanwhile
      }
      await waitForPidExit(pid, 10_000);
    }
    this.postmasterPid = undefined;
  }

  async restart(immediate: boolean): Promise<void> {
    if (this.workDir === "") throw serviceUnavailable("PostgreSQL restart(): the server was stopped");
    await this.shutDown(immediate ? "immediate" : "fast");
    await this.start();
  }

  async stop(): Promise<void> {
    await this.shutDown("fast");
    if (this.workDir !== "") await rm(this.workDir, { recursive: true, force: true });
    this.workDir = "";
    this.cleanup?.release();
  }

  asService(): PostgresService {
    // The getters below read the live state (the process id changes on restart).
    const server = this;
    const workDir = this.workDir;
    return {
      connectionString: this.connectionString,
      host: HOST,
      port: this.port,
      user: SUPERUSER,
      database: DATABASE,
      provider: "local",
      version: this.facts.version,
      maxPreparedTransactions: this.facts.maxPreparedTransactions,
      walLevel: this.facts.walLevel,
      get pid() {
        return server.postmasterPid;
      },
      workDir,
      restart: (options = {}) => this.restart(options.immediate === true),
      stop: () => this.stop(),
    };
  }
}
