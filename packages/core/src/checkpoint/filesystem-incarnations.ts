import { randomBytes } from "node:crypto";
import { link, mkdir, mkdtemp, readFile, rename, rm } from "node:fs/promises";
import { join } from "node:path";
import { CheckpointError } from "../errors/onceflow-error.js";
import { exists, isCode, readDirectories, syncDirectory, writeDurably } from "../files/durable-files.js";
import { assertCheckpointName, describeCheckpoint } from "./checkpoint-files.js";
import type { CheckpointMetadata, ClaimIncarnationOptions, IncarnationSeries } from "./checkpoint-storage.js";
import { fencingScopeOf, supersededError } from "./incarnation.js";

const INCARNATIONS_DIR = ".incarnations";
const INCARNATION_SCOPE_FILE = "scope";
const STAGING_DIR = "staging";
/** The id of the series the numbers under `.incarnations/` belong to: deleted with them. */
const SERIES_FILE = "series";

interface IncarnationMarker {
  readonly incarnation: number;
  readonly scope: string;
}

function newestIncarnationOf(markers: readonly IncarnationMarker[], scope: string): number | undefined {
  let newest: number | undefined;
  for (const marker of markers) {
    if (marker.scope === scope && (newest === undefined || marker.incarnation > newest))
      newest = marker.incarnation;
  }
  return newest;
}

/**
 * Incarnations of a filesystem checkpoint storage: numbered claims under
 * `<root>/<jobId>/.incarnations/<n>/` (the scope's name in `scope`, the incarnation's writes in
 * `staging/`), and the fence — one atomic rename of an older incarnation's `staging/` away, after
 * which its next write or rename fails. {@link FileSystemCheckpointStorage} writes its checkpoints
 * through {@link FileSystemIncarnations.stagingOf} and reports a write that failed for the fence as
 * `SUPERSEDED` through {@link FileSystemIncarnations.fencedOr}.
 *
 * @example
 * ```ts
 * const incarnations = new FileSystemIncarnations("/var/lib/onceflow/checkpoints", "filesystem:/var/lib/onceflow/checkpoints");
 * const incarnation = await incarnations.claim("orders", "subtask-0");
 * ```
 */
export class FileSystemIncarnations {
  /** Which scope each incarnation runs: written once, so cached. */
  private readonly incarnationScopes = new Map<string, string>();

  constructor(
    private readonly root: string,
    private readonly description: string,
  ) {}

  /**
   * Claims incarnation `n` by renaming a prepared folder (holding the scope's name and an empty
   * `staging/`) to `.incarnations/<n>`: the rename fails when `n` is taken, so two claimers never get
   * the same number. Then it checks that no newer claim of the scope won meanwhile, and fences every
   * older incarnation of the scope by renaming its `staging/` away. See
   * {@link CheckpointStorage.claimIncarnation} for the contract.
   */
  async claim(jobId: string, scope: string, options: ClaimIncarnationOptions = {}): Promise<number> {
    assertCheckpointName("jobId", jobId);
    assertCheckpointName("scope", scope);
    const root = this.directory(jobId);
    await mkdir(root, { recursive: true });
    for (;;) {
      const markers = await this.read(jobId);
      const newestOfScope = newestIncarnationOf(markers, scope);
      if (options.after !== undefined && newestOfScope !== options.after) {
        throw supersededError({ jobId, scope }, newestOfScope ?? 0, options.after);
      }
      const incarnation = Math.max(0, ...markers.map((marker) => marker.incarnation)) + 1;
      const prepared = await mkdtemp(join(root, ".claim-"));
      await writeDurably(join(prepared, INCARNATION_SCOPE_FILE), Buffer.from(scope, "utf8"));
      await mkdir(join(prepared, STAGING_DIR));
      await syncDirectory(prepared);
      try {
        await rename(prepared, join(root, String(incarnation)));
      } catch (error) {
        await rm(prepared, { recursive: true, force: true });
        if (isCode(error, "ENOTEMPTY", "EEXIST")) continue; // taken by a concurrent claim: next number
        throw error;
      }
      await syncDirectory(root);
      const now = await this.read(jobId);
      const rival = now.find(
        (marker) =>
          marker.scope === scope &&
          (marker.incarnation > incarnation ||
            (options.after !== undefined &&
              marker.incarnation > options.after &&
              marker.incarnation < incarnation)),
      );
      if (rival !== undefined) {
        // A concurrent claim of the scope won: fence this one too and give way.
        await this.fence(jobId, incarnation);
        throw supersededError({ jobId, scope }, rival.incarnation, incarnation);
      }
      for (const marker of now) {
        if (marker.scope !== scope || marker.incarnation >= incarnation) continue;
        await this.fence(jobId, marker.incarnation);
        // Fenced for good: its marker is no longer needed (numbers go on from the newest one).
        // Renamed away first, so a crash while deleting never leaves a marker without its scope.
        await this.removeMarker(jobId, marker.incarnation);
      }
      return incarnation;
    }
  }

  /**
   * The series of the job's incarnation numbers (`.incarnations/series`, made once: a temporary
   * file linked into place, so concurrent makers agree on the first) and the newest number.
   */
  async describe(jobId: string): Promise<IncarnationSeries> {
    const root = this.directory(jobId);
    const path = join(root, SERIES_FILE);
    let series = await readFile(path, "utf8").catch((error: unknown) => {
      if (isCode(error, "ENOENT")) return undefined;
      throw error;
    });
    if (series === undefined) {
      await mkdir(root, { recursive: true });
      const candidate = join(root, `.series-${randomBytes(6).toString("hex")}`);
      await writeDurably(candidate, Buffer.from(randomBytes(8).toString("hex"), "utf8"));
      try {
        await link(candidate, path);
        await syncDirectory(root);
      } catch (error) {
        if (!isCode(error, "EEXIST")) throw error;
      } finally {
        await rm(candidate, { force: true });
      }
      series = await readFile(path, "utf8");
    }
    const markers = await this.read(jobId);
    return { series: series.trim(), newest: Math.max(0, ...markers.map((marker) => marker.incarnation)) };
  }

  /** The scopes that hold a claim. */
  async claimedScopes(jobId: string): Promise<string[]> {
    return [...new Set((await this.read(jobId)).map((marker) => marker.scope))].sort();
  }

  private directory(jobId: string): string {
    assertCheckpointName("jobId", jobId);
    return join(this.root, jobId, INCARNATIONS_DIR);
  }

  private async read(jobId: string): Promise<IncarnationMarker[]> {
    const root = this.directory(jobId);
    const markers: IncarnationMarker[] = [];
    for (const entry of await readDirectories(root)) {
      if (!/^\d+$/.test(entry.name)) continue;
      const incarnation = Number(entry.name);
      const key = `${jobId}/${incarnation}`;
      let scope = this.incarnationScopes.get(key);
      if (scope === undefined) {
        // Written before the marker's rename, so a marker always has it — unless an older
        // version's delete was interrupted: then the number stays taken, with no scope.
        scope = await readFile(join(root, entry.name, INCARNATION_SCOPE_FILE), "utf8").catch(
          (error: unknown) => {
            if (isCode(error, "ENOENT")) return undefined;
            throw error;
          },
        );
        if (scope !== undefined) this.incarnationScopes.set(key, scope);
      }
      markers.push({ incarnation, scope: scope ?? "" });
    }
    return markers;
  }

  private async removeMarker(jobId: string, incarnation: number): Promise<void> {
    const root = this.directory(jobId);
    const doomed = join(root, `.removed-${incarnation}-${randomBytes(6).toString("hex")}`);
    try {
      await rename(join(root, String(incarnation)), doomed);
    } catch (error) {
      if (isCode(error, "ENOENT")) return; // removed by a concurrent claim
      throw error;
    }
    await rm(doomed, { recursive: true, force: true }).catch(() => {});
  }

  /** Renames an incarnation's `staging/` away (atomic: its writer's next rename fails), then deletes it. */
  private async fence(jobId: string, incarnation: number): Promise<void> {
    const marker = join(this.directory(jobId), String(incarnation));
    const fenced = join(marker, `fenced-${randomBytes(6).toString("hex")}`);
    try {
      await rename(join(marker, STAGING_DIR), fenced);
    } catch (error) {
      if (isCode(error, "ENOENT")) return; // fenced before
      throw error;
    }
    await syncDirectory(marker);
    await rm(fenced, { recursive: true, force: true }).catch(() => {});
  }

  /** Where incarnation `incarnation` writes; a `SUPERSEDED` error once it has been fenced. */
  async stagingOf(jobId: string, scope: string, incarnation: number, checkpointId: number): Promise<string> {
    const marker = join(this.directory(jobId), String(incarnation));
    // Known already (claimed or read by this storage, and a marker's scope never changes): its
    // staging folder is used without reading the marker again. When a newer claim fenced it since,
    // the folder is gone and the first write into it fails, reported as SUPERSEDED (`fencedOr`).
    if (this.incarnationScopes.get(`${jobId}/${incarnation}`) === scope) return join(marker, STAGING_DIR);
    const owner = await readFile(join(marker, INCARNATION_SCOPE_FILE), "utf8").catch(() => undefined);
    if (owner === undefined) {
      // Its marker is gone: removed after a newer claim fenced it, or never made.
      const newest = newestIncarnationOf(await this.read(jobId), scope);
      if (newest !== undefined && newest > incarnation) {
        throw supersededError({ jobId, scope, checkpointId, incarnation }, newest);
      }
      throw new CheckpointError(
        "CHECKPOINT_FAILED",
        `${describeCheckpoint({ jobId, scope, checkpointId })}: incarnation ${incarnation} was never claimed in ${this.description}; claim it with claimIncarnation first`,
        { checkpointId },
      );
    }
    if (owner !== scope) {
      throw new CheckpointError(
        "CHECKPOINT_FAILED",
        `${describeCheckpoint({ jobId, scope, checkpointId })}: incarnation ${incarnation} belongs to scope '${owner}'`,
        { checkpointId },
      );
    }
    return join(marker, STAGING_DIR);
  }

  /** A write that failed because the incarnation's staging folder is gone was fenced: say so. */
  async fencedOr(metadata: CheckpointMetadata, error: unknown): Promise<unknown> {
    if (metadata.incarnation === undefined || !isCode(error, "ENOENT")) return error;
    const staging = join(this.directory(metadata.jobId), String(metadata.incarnation), STAGING_DIR);
    if (await exists(staging)) return error;
    const fencing = fencingScopeOf(metadata);
    const newest = newestIncarnationOf(await this.read(metadata.jobId), fencing);
    return supersededError({ ...metadata, scope: fencing }, newest ?? metadata.incarnation);
  }
}
