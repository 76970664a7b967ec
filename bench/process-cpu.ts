// CPU time of the processes a benchmark involves, read from Linux's /proc: a process (utime +
// stime), a process with its children (a server that forks a process per connection, such as
// PostgreSQL), each thread of a process, the whole machine's busy time, and the pid of the Kafka
// broker. Shared by bench/kafka/compare.mts and bench/postgres/kafka-to-postgres.ts; Linux only,
// and the processes must be on this machine, in this pid namespace.
import { execFileSync } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";

/** Jiffies per second in /proc (`getconf CLK_TCK`, 100 on Linux x86_64 and arm64). */
export const CLOCK_TICKS_PER_SECOND = 100;

/** The number of CPUs of the machine: the `cpuN` lines of /proc/stat. */
export const CORES = readFileSync("/proc/stat", "utf8")
  .split("\n")
  .filter((line) => /^cpu\d+ /.test(line)).length;

/**
 * The fields of a /proc/…/stat file after the command's closing parenthesis (so the command may
 * hold spaces): index 0 is field 3 (state), 1 ppid, 11 utime, 12 stime, 13 cutime, 14 cstime.
 */
function statFields(path: string): { command: string; fields: string[] } {
  const stat = readFileSync(path, "utf8");
  const close = stat.lastIndexOf(")");
  return { command: stat.slice(stat.indexOf("(") + 1, close), fields: stat.slice(close + 2).split(" ") };
}

/** The CPU seconds (utime + stime, all its threads, not its children) of process `pid`; throws if it is gone. */
export function cpuSeconds(pid: number): number {
  // Fields after the command's closing parenthesis: utime and stime are fields 14 and 15.
  const { fields } = statFields(`/proc/${pid}/stat`);
  return (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_SECOND;
}

/** {@link cpuSeconds} of `pid`, or undefined when the pid is unknown or the process is gone. */
export function cpuSecondsIfAlive(pid: number | undefined): number | undefined {
  if (pid === undefined) return undefined;
  try {
    return cpuSeconds(pid);
  } catch {
    return undefined;
  }
}

/** The command name (`comm`, at most 15 characters) of process `pid`, or undefined when it is gone. */
export function commandOf(pid: number): string | undefined {
  try {
    return statFields(`/proc/${pid}/stat`).command;
  } catch {
    return undefined;
  }
}

/** Busy jiffies of all CPUs together, from the first line of /proc/stat. */
export function machineJiffies(): { busy: number } {
  // cpu  user nice system idle iowait irq softirq steal guest guest_nice (guest is in user already);
  // idle and iowait are not busy.
  const line = readFileSync("/proc/stat", "utf8").split("\n", 1)[0] as string;
  const [user, nice, system, , , irq, softirq, steal] = line.trim().split(/\s+/).slice(1).map(Number);
  const busy = (user ?? 0) + (nice ?? 0) + (system ?? 0) + (irq ?? 0) + (softirq ?? 0) + (steal ?? 0);
  return { busy };
}

/**
 * The pid listening on the first of `brokers` (`host:port`), found with `ss -ltnp`, or `override`
 * (a `--broker-pid` option) when given; undefined if unknown.
 */
export function brokerPid(brokers: readonly string[], override?: string): number | undefined {
  if (override !== undefined) return Number(override);
  const port = brokers[0]?.split(":").pop();
  try {
    const listening = execFileSync("ss", ["-ltnpH", `sport = :${port}`], { encoding: "utf8" });
    const pid = /pid=(\d+)/.exec(listening)?.[1];
    return pid === undefined ? undefined : Number(pid);
  } catch {
    return undefined;
  }
}

/**
 * The live children of process `pid`: /proc/<pid>/task/<pid>/children where the kernel has it
 * (children of the main thread: all of them for a single-threaded server such as PostgreSQL's
 * postmaster), else every process whose ppid in /proc/<child>/stat is `pid`.
 */
export function childPids(pid: number): number[] {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, "utf8")
      .trim()
      .split(/\s+/)
      .filter(Boolean)
      .map(Number);
  } catch {
    const children: number[] = [];
    for (const entry of readdirSync("/proc")) {
      if (!/^\d+$/.test(entry)) continue;
      try {
        if (Number(statFields(`/proc/${entry}/stat`).fields[1]) === pid) children.push(Number(entry));
      } catch {
        // gone meanwhile
      }
    }
    return children;
  }
}

/** A thread (or a single-threaded process) and the CPU seconds it has used so far. */
export interface ThreadCpu {
  /** Its command name (`comm`): a thread's name, e.g. `node`, `libuv-worker`, a Java thread's. */
  command: string;
  seconds: number;
}

/**
 * The CPU seconds of a process and all its children: its own utime + stime + cutime + cstime
 * (cutime and cstime hold the children that exited and were waited for, e.g. the process of a
 * connection that closed), plus utime + stime of its live children. The difference of two readings
 * is what the tree used in between. `children`, when given, receives each live child's
 * utime + stime by pid, and the process's own utime + stime under its own pid (each of
 * PostgreSQL's processes is one thread). Throws if the process is gone.
 */
export function processTreeCpuSeconds(pid: number, children?: Map<number, ThreadCpu>): number {
  const { command, fields } = statFields(`/proc/${pid}/stat`);
  const own = Number(fields[11]) + Number(fields[12]);
  children?.set(pid, { command, seconds: own / CLOCK_TICKS_PER_SECOND });
  let jiffies = own + Number(fields[13]) + Number(fields[14]);
  for (const child of childPids(pid)) {
    try {
      const stat = statFields(`/proc/${child}/stat`);
      const used = Number(stat.fields[11]) + Number(stat.fields[12]);
      jiffies += used;
      children?.set(child, { command: stat.command, seconds: used / CLOCK_TICKS_PER_SECOND });
    } catch {
      // Exited since the list was read: in cutime once the parent waited for it.
    }
  }
  return jiffies / CLOCK_TICKS_PER_SECOND;
}

/**
 * The CPU seconds of each live thread of process `pid` (`"self"` for this one), by thread id, from
 * /proc/<pid>/task/<tid>/stat; empty when the process is gone. A thread that ended is not listed.
 */
export function threadCpuSeconds(pid: number | "self"): Map<number, ThreadCpu> {
  const threads = new Map<number, ThreadCpu>();
  let tids: string[];
  try {
    tids = readdirSync(`/proc/${pid}/task`);
  } catch {
    return threads;
  }
  for (const tid of tids) {
    try {
      const { command, fields } = statFields(`/proc/${pid}/task/${tid}/stat`);
      threads.set(Number(tid), {
        command,
        seconds: (Number(fields[11]) + Number(fields[12])) / CLOCK_TICKS_PER_SECOND,
      });
    } catch {
      // ended meanwhile
    }
  }
  return threads;
}
