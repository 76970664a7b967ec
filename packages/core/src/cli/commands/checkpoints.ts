import { readdir, stat } from "node:fs/promises";
import { join } from "node:path";
import type { Command } from "commander";
import { type CheckpointTransactions, readSinkTransactions } from "../../checkpoint/checkpoint-contents.js";
import type { CheckpointHistoryEntry } from "../../checkpoint/checkpoint-history-entries.js";
import type { CheckpointPhases } from "../../checkpoint/checkpoint-phases.js";
import type { CheckpointMetadata } from "../../checkpoint/checkpoint-storage.js";
import {
  type CheckpointFileReport,
  checkpointDirectoryName,
  type FileSystemCheckpointStorage,
} from "../../checkpoint/filesystem-checkpoint-storage.js";
import { unknownJobWarning } from "../../dashboard/checkpoint-history.js";
import { CheckpointError, ConfigurationError } from "../../errors/onceflow-error.js";
import { formatBytes, formatTable, formatTime } from "../format.js";
import type { CliIo } from "../io.js";
import { openFilesystemStorage } from "../open-storage.js";

interface ListOptions {
  job?: string;
  json?: boolean;
}

interface InspectOptions {
  job?: string;
  scope?: string;
  json?: boolean;
}

/**
 * Adds `checkpoints list` and `checkpoints inspect` to the program: read-only views of a
 * `filesystem(dir)` checkpoint storage.
 *
 * @example
 * ```ts
 * addCheckpointsCommands(program, processIo());
 * ```
 */
export function addCheckpointsCommands(program: Command, io: CliIo): void {
  const checkpoints = program
    .command("checkpoints")
    .description("look at the checkpoints in a filesystem checkpoint storage");

  checkpoints
    .command("list")
    .description(
      "list the completed checkpoints, oldest first, and the checkpoint history kept past retention",
    )
    .argument("<dir>", "the storage folder (the path given to filesystem())")
    .option("--job <id>", "only this job")
    .option("--json", "print JSON instead of a table")
    .action(async (dir: string, options: ListOptions) => {
      const storage = await openFilesystemStorage(io, dir);
      const jobIds = options.job !== undefined ? [options.job] : await storage.listJobs();
      const found: CheckpointMetadata[] = [];
      const history: CheckpointHistoryEntry[] = [];
      for (const jobId of jobIds) {
        found.push(...(await storage.list(jobId)));
        history.push(...(await storage.readHistory(jobId)));
      }
      if (options.job !== undefined && found.length === 0 && history.length === 0) {
        if ((await storage.claimedScopes(options.job)).length === 0) {
          io.stderr(`warning: ${await unknownJobWarning(storage, options.job)}\n`);
        }
      }
      if (options.json === true) {
        io.stdout(`${JSON.stringify(found, null, 2)}\n`);
        return;
      }
      if (found.length === 0) {
        const which = options.job !== undefined ? ` of job ${options.job}` : "";
        io.stdout(`no completed checkpoints${which} in ${storage.root}\n`);
      } else {
        const rows = found.map((m) => [
          m.jobId,
          m.scope,
          String(m.checkpointId),
          formatTime(m.completedAt),
          String(m.parallelism),
          formatBytes(totalBytes(m)),
          m.isFinal ? "yes" : "no",
        ]);
        io.stdout(
          `${formatTable(["JOB", "SCOPE", "ID", "COMPLETED AT", "PARALLELISM", "SIZE", "FINAL"], rows)}\n`,
        );
      }
      if (history.length > 0) {
        const retained = new Set(found.map((m) => `${m.jobId}/${m.scope}#${m.checkpointId}`));
        const rows = history.map((entry) => [
          entry.jobId,
          entry.scope,
          String(entry.checkpointId),
          formatTime(entry.at),
          entry.kind,
          historyDetail(entry, retained.has(`${entry.jobId}/${entry.scope}#${entry.checkpointId}`)),
        ]);
        io.stdout(
          `\ncheckpoint history (kept past retention, oldest first):\n${formatTable(["JOB", "SCOPE", "ID", "AT", "EVENT", "DETAIL"], rows)}\n`,
        );
      }
    });

  checkpoints
    .command("inspect")
    .description("show a checkpoint's metadata and verify its state files (default: the latest)")
    .argument("<dir>", "the storage folder (the path given to filesystem())")
    .argument("[id]", "the checkpoint id (default: the latest)")
    .option("--job <id>", "the job (needed when the folder holds several)")
    .option("--scope <scope>", "only this scope, for example subtask-0-of-4")
    .option("--json", "print a JSON array, one element per scope")
    .action(async (dir: string, id: string | undefined, options: InspectOptions) => {
      const storage = await openFilesystemStorage(io, dir);
      const jobId = await chooseJob(storage, options.job);
      const reports = await inspect(
        storage,
        jobId,
        id === undefined ? undefined : parseId(id),
        options.scope,
      );
      // The sinks' transactions are in the state: read only from checkpoints that verified.
      const contents = await Promise.all(
        reports.map((report) =>
          report.ok
            ? storage
                .load(jobId, report.metadata.scope, report.metadata.checkpointId)
                .then(readSinkTransactions)
            : undefined,
        ),
      );
      if (options.json === true) {
        const json = reports.map((report, index) => ({
          path: report.path,
          metadata: report.metadata,
          verification: { ok: report.ok, subtasks: report.subtasks },
          sinkTransactions: contents[index]?.transactions,
        }));
        io.stdout(`${JSON.stringify(json, null, 2)}\n`);
      } else {
        io.stdout(reports.map((report, index) => describeReport(report, contents[index])).join("\n"));
      }
      const damaged = reports.filter((report) => !report.ok);
      const first = damaged[0];
      if (first !== undefined) {
        const problems = damaged.flatMap((report) =>
          report.subtasks
            .filter((s) => !s.ok)
            .map((s) => `${report.metadata.scope}: ${s.problem ?? "damaged"}`),
        );
        throw new CheckpointError(
          "CHECKPOINT_CORRUPT",
          `checkpoint ${first.metadata.checkpointId} of job ${jobId} is damaged and cannot be restored: ${problems.join("; ")}`,
          { checkpointId: first.metadata.checkpointId },
        );
      }
    });
}

async function chooseJob(storage: FileSystemCheckpointStorage, job: string | undefined): Promise<string> {
  if (job !== undefined) return job;
  const jobIds = await storage.listJobs();
  const [only, ...others] = jobIds;
  if (only === undefined) {
    throw new CheckpointError("CHECKPOINT_NOT_FOUND", `no job has checkpoints in ${storage.root}`);
  }
  if (others.length > 0) {
    throw new ConfigurationError(
      "--job",
      `${storage.root} holds several jobs (${jobIds.join(", ")}): choose one`,
    );
  }
  return only;
}

function parseId(text: string): number {
  const id = Number(text);
  if (!/^\d+$/.test(text) || !Number.isSafeInteger(id)) {
    throw new ConfigurationError(
      "[id]",
      `a checkpoint id is a non-negative integer, got ${JSON.stringify(text)}`,
    );
  }
  return id;
}

async function inspect(
  storage: FileSystemCheckpointStorage,
  jobId: string,
  checkpointId: number | undefined,
  scope: string | undefined,
): Promise<CheckpointFileReport[]> {
  const listed = (await storage.list(jobId)).filter((m) => scope === undefined || m.scope === scope);
  const id = checkpointId ?? listed.at(-1)?.checkpointId;
  if (id === undefined) {
    const which = scope === undefined ? "" : ` in scope ${scope}`;
    throw new CheckpointError(
      "CHECKPOINT_NOT_FOUND",
      `job ${jobId} has no completed checkpoint${which} in ${storage.root}`,
    );
  }
  let scopes = listed.filter((m) => m.checkpointId === id).map((m) => m.scope);
  if (scopes.length === 0) {
    // Not listed: look for a folder with unreadable metadata, so inspect reports it as corrupt.
    scopes = scope !== undefined ? [scope] : await scopesWithFolder(storage, jobId, id);
  }
  if (scopes.length === 0) {
    throw new CheckpointError(
      "CHECKPOINT_NOT_FOUND",
      `job ${jobId} has no checkpoint ${id} in ${storage.root}`,
      {
        checkpointId: id,
      },
    );
  }
  const reports: CheckpointFileReport[] = [];
  for (const each of scopes) reports.push(await storage.verify(jobId, each, id));
  return reports;
}

async function scopesWithFolder(
  storage: FileSystemCheckpointStorage,
  jobId: string,
  id: number,
): Promise<string[]> {
  const jobDir = join(storage.root, jobId);
  const entries = await readdir(jobDir, { withFileTypes: true }).catch(() => []);
  const scopes: string[] = [];
  for (const entry of entries) {
    if (!entry.isDirectory() || entry.name.startsWith(".")) continue;
    const info = await stat(join(jobDir, entry.name, checkpointDirectoryName(id))).catch(() => undefined);
    if (info?.isDirectory() === true) scopes.push(entry.name);
  }
  return scopes.sort();
}

function describeReport(report: CheckpointFileReport, contents: CheckpointTransactions | undefined): string {
  const m = report.metadata;
  const lines = [
    `checkpoint ${m.checkpointId} of job ${m.jobId} (scope ${m.scope})`,
    `  path:          ${report.path}`,
    `  triggered at:  ${formatTime(m.triggeredAt)}`,
    `  completed at:  ${formatTime(m.completedAt)} (${Math.max(0, m.completedAt - m.triggeredAt)} ms after trigger)`,
    `  parallelism:   ${m.parallelism}`,
    `  final:         ${m.isFinal ? "yes" : "no"}`,
    `  state:         ${formatBytes(totalBytes(m))} in ${m.subtasks.length} subtask file(s)`,
    `  verification:  ${report.ok ? "ok, every file matches its size and SHA-256" : "DAMAGED"}`,
    "  subtasks:",
    indent(
      formatTable(
        ["SUBTASK", "SIZE", "SHA-256", "CHECK"],
        report.subtasks.map((check) => {
          const entry = m.subtasks.find((s) => s.subtaskIndex === check.subtaskIndex);
          return [
            String(check.subtaskIndex),
            formatBytes(check.expectedBytes),
            entry?.sha256.slice(0, 16) ?? "-",
            check.ok ? "ok" : `DAMAGED: ${check.problem ?? ""}`,
          ];
        }),
      ),
      4,
    ),
    "  sink transactions:",
    indent(describeTransactions(contents), 4),
    "  summary:",
    indent(Object.keys(m.summary).length === 0 ? "(empty)" : JSON.stringify(m.summary, null, 2), 4),
  ];
  return `${lines.join("\n")}\n`;
}

function describeTransactions(contents: CheckpointTransactions | undefined): string {
  if (contents === undefined) return "(not read: the checkpoint is damaged)";
  const lines: string[] = [];
  if (contents.transactions.length === 0) lines.push("(none)");
  else {
    lines.push(
      formatTable(
        ["SINK", "SUBTASK", "KIND", "CHECKPOINT", "STARTED AT", "HANDLE", "DESCRIPTION"],
        contents.transactions.map((t) => [
          t.sink,
          String(t.subtaskIndex),
          t.kind,
          String(t.checkpointId),
          formatTime(t.startedAt),
          formatBytes(t.handleBytes),
          t.description ?? "(opaque: the sink's own serializer)",
        ]),
      ),
    );
  }
  if (contents.unreadableSubtasks.length > 0) {
    lines.push(
      `(the state of subtask(s) ${contents.unreadableSubtasks.join(", ")} is not a onceflow snapshot)`,
    );
  }
  return lines.join("\n");
}

function indent(text: string, spaces: number): string {
  const pad = " ".repeat(spaces);
  return text
    .split("\n")
    .map((line) => pad + line)
    .join("\n");
}

function totalBytes(metadata: CheckpointMetadata): number {
  return metadata.subtasks.reduce((sum, entry) => sum + entry.stateBytes, 0);
}

/** A completed checkpoint's phases, in whole milliseconds: where its time went. */
function phasesDetail(phases: CheckpointPhases | undefined): string {
  if (phases === undefined) return "";
  const parts = [
    `barrier ${Math.round(phases.barrierMs)}`,
    ...(phases.alignmentMs > 0 ? [`alignment ${Math.round(phases.alignmentMs)}`] : []),
    `snapshot ${Math.round(phases.snapshotMs)}`,
    `pre-commit ${Math.round(phases.preCommitMs)}`,
    `store ${Math.round(phases.storeMs)}`,
    ...(phases.commitMs === undefined ? [] : [`then commit ${Math.round(phases.commitMs)}`]),
    ...(phases.retainMs === undefined ? [] : [`retain ${Math.round(phases.retainMs)}`]),
  ];
  return ` (${parts.join(", ")})`;
}

/** The last column of a history row: what a person wants to know about the event. */
function historyDetail(entry: CheckpointHistoryEntry, retained: boolean): string {
  switch (entry.kind) {
    case "completed":
      return `${Math.max(0, entry.at - entry.triggeredAt)} ms${phasesDetail(entry.phases)}, ${formatBytes(entry.sizeBytes)}${entry.isFinal ? ", final" : ""}, ${retained ? "retained" : "discarded"}`;
    case "failed":
      return `${entry.definitive ? "never restorable" : "fate unknown"}: ${entry.reason}`;
    case "restored":
      return `lineage ${entry.lineage}${entry.incarnation === undefined ? "" : `, incarnation ${entry.incarnation}`}`;
  }
}
