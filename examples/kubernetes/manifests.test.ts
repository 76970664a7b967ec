import { execFileSync } from "node:child_process";
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";
import { afterEach, describe, expect, it, vi } from "vitest";
import { parseAllDocuments } from "yaml";

/**
 * The Kubernetes guide's manifests are valid and match the CLI: every manifest
 * parses, the StatefulSet fits its Service, probes, ConfigMap and Secret, the grace period covers the
 * job's final checkpoint, and every flag the container passes to `onceflow run` exists in the real
 * CLI (`packages/core/dist/cli.js run --help`: build core first).
 */

const folder = fileURLToPath(new URL(".", import.meta.url));
const repository = join(folder, "../..");

// biome-ignore lint/suspicious/noExplicitAny: parsed YAML is checked field by field below.
type Manifest = Record<string, any>;

const manifests: Array<{ file: string; doc: Manifest }> = readdirSync(folder)
  .filter((file) => file.endsWith(".yaml") || file.endsWith(".yml"))
  .sort()
  .flatMap((file) =>
    parseAllDocuments(readFileSync(join(folder, file), "utf8")).map((document) => {
      if (document.errors.length > 0) throw new Error(`${file}: ${document.errors.map(String).join("; ")}`);
      return { file, doc: document.toJS() as Manifest };
    }),
  );
const ofKind = (kind: string) => manifests.filter(({ doc }) => doc.kind === kind).map(({ doc }) => doc);
const only = (kind: string): Manifest => {
  const found = ofKind(kind);
  expect(found, `exactly one ${kind}`).toHaveLength(1);
  return found[0]!;
};

const statefulSet = only("StatefulSet");
const podSpec: Manifest = statefulSet.spec.template.spec;
const container: Manifest = podSpec.containers[0];
const args: string[] = container.args.map(String);
const flagValue = (flag: string): string | undefined => {
  const index = args.indexOf(flag);
  return index < 0 ? undefined : args[index + 1];
};
const envOf = (): Record<string, string> =>
  Object.fromEntries(
    (container.env as Manifest[])
      .filter((entry) => entry.value !== undefined)
      .map((entry) => [entry.name, String(entry.value)]),
  );
/** A probe's or Service's port: a number, or the name of a container port. */
const portNumber = (port: string | number): number => {
  if (typeof port === "number") return port;
  const named = (container.ports as Manifest[]).find((entry) => entry.name === port);
  expect(named, `a container port named "${port}"`).toBeDefined();
  return Number(named!.containerPort);
};

interface JobModule {
  settingsFrom(env: Record<string, string | undefined>): { parallelism: number; checkpointTimeoutMs: number };
  stopBudgetMs(settings: unknown): number;
  createJob(launch?: { subtaskIndex?: number }): { execute: unknown; stop: unknown };
}
const jobModule = (): Promise<JobModule> => import(pathToFileURL(join(folder, "job.mjs")).href);

afterEach(() => {
  vi.unstubAllEnvs();
});

describe("examples/kubernetes manifests", () => {
  it("parse, and every object has apiVersion, kind and metadata.name", () => {
    expect(manifests.length).toBeGreaterThanOrEqual(4);
    for (const { file, doc } of manifests) {
      expect(typeof doc.apiVersion, `${file}: apiVersion`).toBe("string");
      expect(typeof doc.kind, `${file}: kind`).toBe("string");
      if (doc.kind !== "Kustomization")
        expect(typeof doc.metadata?.name, `${file}: metadata.name`).toBe("string");
    }
    expect(statefulSet.apiVersion).toBe("apps/v1");
  });

  it("the StatefulSet's selector matches its pod labels, and its headless Service governs it", () => {
    const labels: Record<string, string> = statefulSet.spec.template.metadata.labels;
    expect(Object.keys(statefulSet.spec.selector.matchLabels).length).toBeGreaterThan(0);
    for (const [key, value] of Object.entries(statefulSet.spec.selector.matchLabels))
      expect(labels[key]).toBe(value);
    const service = ofKind("Service").find(
      (candidate) => candidate.metadata.name === statefulSet.spec.serviceName,
    );
    expect(service, `a Service named ${statefulSet.spec.serviceName}`).toBeDefined();
    expect(service!.spec.clusterIP).toBe("None");
    for (const [key, value] of Object.entries(service!.spec.selector)) expect(labels[key]).toBe(value);
    for (const port of service!.spec.ports as Manifest[]) {
      expect(portNumber(port.targetPort ?? port.port)).toBe(Number(flagValue("--metrics-port")));
    }
    expect(["OrderedReady", "Parallel"]).toContain(statefulSet.spec.podManagementPolicy);
    // Subtask indexes start at 0: so must the pod ordinals.
    expect(statefulSet.spec.ordinals?.start ?? 0).toBe(0);
  });

  it("runs one subtask per pod, parallelism = replicas, with the endpoints on --metrics-port for probes and Prometheus", () => {
    expect(container.command.at(-1)).toMatch(/(^|\/)onceflow$/);
    expect(args[0]).toBe("run");
    expect(flagValue("--subtask")).toBe("from-hostname");
    expect(flagValue("--metrics-host")).toBe("0.0.0.0");
    const metricsPort = Number(flagValue("--metrics-port"));
    expect(Number.isInteger(metricsPort) && metricsPort > 0).toBe(true);
    expect((container.ports as Manifest[]).map((port) => Number(port.containerPort))).toContain(metricsPort);
    expect(container.livenessProbe.httpGet.path).toBe("/healthz");
    expect(container.readinessProbe.httpGet.path).toBe("/readyz");
    expect(portNumber(container.livenessProbe.httpGet.port)).toBe(metricsPort);
    expect(portNumber(container.readinessProbe.httpGet.port)).toBe(metricsPort);
    const annotations: Record<string, string> = statefulSet.spec.template.metadata.annotations;
    expect(annotations["prometheus.io/scrape"]).toBe("true");
    expect(Number(annotations["prometheus.io/port"])).toBe(metricsPort);
    expect(annotations["prometheus.io/path"]).toBe("/metrics");
    expect(Number(envOf().ONCEFLOW_PARALLELISM)).toBe(statefulSet.spec.replicas);
  });

  it("mounts the job module from the kustomize-generated ConfigMap and reads the URL from the Secret", () => {
    const kustomization = only("Kustomization");
    for (const resource of kustomization.resources as string[])
      expect(existsSync(join(folder, resource))).toBe(true);
    const generator = (kustomization.configMapGenerator as Manifest[])[0]!;
    const files = generator.files as string[];
    for (const file of files) expect(existsSync(join(folder, file))).toBe(true);
    const volume = (podSpec.volumes as Manifest[]).find(
      (candidate) => candidate.configMap?.name === generator.name,
    );
    expect(volume, `a volume of ConfigMap ${generator.name}`).toBeDefined();
    const mount = (container.volumeMounts as Manifest[]).find((candidate) => candidate.name === volume!.name);
    expect(args[1]).toBe(`${mount!.mountPath}/${files[0]}`);
    const secretRef = (container.env as Manifest[]).find((entry) => entry.name === "POSTGRES_URL")!.valueFrom
      .secretKeyRef;
    const secret = only("Secret");
    expect(secret.metadata.name).toBe(secretRef.name);
    expect(Object.keys(secret.stringData ?? secret.data)).toContain(secretRef.key);
  });

  it("gives SIGTERM more time than the job's final checkpoint may take", async () => {
    const job = await jobModule();
    const settings = job.settingsFrom({ ...envOf(), POSTGRES_URL: "postgresql://from-the-secret" });
    expect(settings.parallelism).toBe(statefulSet.spec.replicas);
    const budgetMs = job.stopBudgetMs(settings);
    expect(budgetMs).toBeGreaterThanOrEqual(2 * settings.checkpointTimeoutMs);
    expect(podSpec.terminationGracePeriodSeconds * 1000).toBeGreaterThan(budgetMs);
  });

  it("the job module builds a job for a pod's subtask, and refuses one beyond the parallelism", async () => {
    const job = await jobModule();
    for (const [name, value] of Object.entries({
      ...envOf(),
      POSTGRES_URL: "postgresql://nobody@127.0.0.1:1/none",
    }))
      vi.stubEnv(name, value);
    const built = job.createJob({ subtaskIndex: statefulSet.spec.replicas - 1 });
    expect(typeof built.execute).toBe("function");
    expect(typeof built.stop).toBe("function");
    expect(() => job.createJob({ subtaskIndex: statefulSet.spec.replicas })).toThrow(/subtaskIndex/);
    vi.stubEnv("ONCEFLOW_PARALLELISM", "");
    expect(() => job.createJob({})).toThrow(/ONCEFLOW_PARALLELISM/);
  });

  it("passes onceflow run only flags the real CLI has", () => {
    const cli = join(repository, "packages/core/dist/cli.js");
    expect(existsSync(cli), `${cli} is missing: run npm run build -w @onceflow/core`).toBe(true);
    const help = execFileSync(process.execPath, [cli, "run", "--help"], { encoding: "utf8" });
    // Option lines only ("  --subtask <index>  run only…", "  -h, --help"), not flags named in descriptions.
    const known = new Set(
      help.split("\n").flatMap((line) => /^ {2}(?:-[a-zA-Z], )?(--[a-z][a-z-]*)/.exec(line)?.[1] ?? []),
    );
    expect(known).toContain("--job-export");
    const used = args.filter((arg) => arg.startsWith("--"));
    expect(used.length).toBeGreaterThan(0);
    expect(used.filter((flag) => !known.has(flag))).toEqual([]);
  });
});
