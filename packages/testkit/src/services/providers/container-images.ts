import { ConfigurationError } from "@onceflow/core";
import type { Probe, ProbeResult, ProviderKind } from "./provider-selection.js";
import { loadTestcontainers } from "./testcontainers-loader.js";

/**
 * The environment variable that names a service's container image: `ONCEFLOW_<NAME>_IMAGE`
 * (`ONCEFLOW_KAFKA_IMAGE`, `ONCEFLOW_POSTGRES_IMAGE`, `ONCEFLOW_REDIS_IMAGE`, …).
 *
 * @example
 * ```ts
 * imageVariable("kafka"); // "ONCEFLOW_KAFKA_IMAGE"
 * ```
 */
export function imageVariable(service: string): string {
  return `ONCEFLOW_${service.toUpperCase().replaceAll(/[^A-Z0-9]/g, "_")}_IMAGE`;
}

/**
 * The image a service's container is started from: the `image` option, else `ONCEFLOW_<NAME>_IMAGE`,
 * else the default. `{version}` in the option or the variable is replaced by `version` (one
 * variable serves several Kafka versions: `ONCEFLOW_KAFKA_IMAGE=mirror.example/kafka:{version}`).
 *
 * @example
 * ```ts
 * resolveImage("kafka", { env: { ONCEFLOW_KAFKA_IMAGE: "my/kafka:{version}" }, fallback: "apache/kafka:3.9.1", version: "3.9.1" });
 * // "my/kafka:3.9.1"
 * ```
 */
export function resolveImage(
  service: string,
  choice: { option?: string; env: NodeJS.ProcessEnv; fallback: string; version?: string },
): string {
  const named = choice.option?.trim() || choice.env[imageVariable(service)]?.trim() || choice.fallback;
  return choice.version === undefined ? named : named.replaceAll("{version}", choice.version);
}

const PROVIDER_VARIABLE = "ONCEFLOW_TESTKIT_PROVIDER";

/**
 * The provider pinned by `ONCEFLOW_TESTKIT_PROVIDER` (`environment`, `testcontainers` or `local`),
 * or undefined when unset. Any other value is a `ConfigurationError`.
 *
 * @example
 * ```ts
 * providerFromEnvironment({ ONCEFLOW_TESTKIT_PROVIDER: "testcontainers" }); // "testcontainers"
 * ```
 */
export function providerFromEnvironment(env: NodeJS.ProcessEnv): ProviderKind | undefined {
  const value = env[PROVIDER_VARIABLE]?.trim();
  if (value === undefined || value === "") return undefined;
  if (value === "environment" || value === "testcontainers" || value === "local") return value;
  throw new ConfigurationError(
    PROVIDER_VARIABLE,
    `must be environment, testcontainers or local (or unset to try them in that order), got "${value}"`,
  );
}

/**
 * How the image probe reaches the engine; replaced in tests.
 *
 * @example
 * ```ts
 * const access: ImageAccess = { exists: async () => false, pull: async () => { throw new Error("offline"); } };
 * ```
 */
export interface ImageAccess {
  /** Whether the engine has the image already. */
  exists(image: string): Promise<boolean>;
  /** Pulls the image; rejects when it cannot. */
  pull(image: string): Promise<void>;
}

/**
 * Options of {@link probeContainerImages}.
 *
 * @example
 * ```ts
 * const options: ImageProbeOptions = { service: "kafka", image: "apache/kafka:3.9.1", pullTimeoutMs: 120_000 };
 * ```
 */
export interface ImageProbeOptions {
  /** The service's name, for the variable to name in the remedy (`kafka` → `ONCEFLOW_KAFKA_IMAGE`). */
  service: string;
  /** The service's image. */
  image: string;
  /** A pull that has not finished after this long counts as failed. Default 300 s. */
  pullTimeoutMs?: number;
  /** Where testcontainers' reaper settings are read; default `process.env`, as testcontainers does. */
  env?: NodeJS.ProcessEnv;
  /** Replaces the engine (for tests). */
  access?: ImageAccess;
}

/** testcontainers' default reaper ("Ryuk") image, or the one `RYUK_CONTAINER_IMAGE` names. */
function reaperImage(env: NodeJS.ProcessEnv): string | undefined {
  if (env.TESTCONTAINERS_RYUK_DISABLED === "true") return undefined;
  return env.RYUK_CONTAINER_IMAGE?.trim() || "testcontainers/ryuk:0.14.0";
}

async function engineImageAccess(): Promise<ImageAccess> {
  const { getContainerRuntimeClient, ImageName } = await loadTestcontainers();
  const client = await getContainerRuntimeClient();
  return {
    exists: (image) => client.image.exists(ImageName.fromString(image)),
    pull: (image) => client.image.pull(ImageName.fromString(image)),
  };
}

function firstLine(error: unknown): string {
  const message = error instanceof Error ? error.message : String(error);
  return message.split("\n")[0] ?? message;
}

/** Resolves when the engine has `image` (already or after a pull); rejects with why not. */
async function obtain(access: ImageAccess, image: string, timeoutMs: number): Promise<void> {
  if (await access.exists(image)) return;
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`the pull did not finish within ${timeoutMs} ms`)), timeoutMs);
    timer.unref();
  });
  try {
    await Promise.race([access.pull(image), timeout]);
  } finally {
    clearTimeout(timer);
  }
  // Some engines answer a failed pull with a stream that ends without an error.
  if (!(await access.exists(image))) throw new Error("the engine pulled nothing");
}

/**
 * Whether the engine has, or can pull, the images a container of `service` needs: its own image and
 * testcontainers' reaper image (unless `TESTCONTAINERS_RYUK_DISABLED=true`). An engine that answers
 * but cannot get an image (offline, behind a mirror, a registry that refuses) makes the
 * testcontainers provider unavailable, naming the image and the variable to set, so that the next
 * provider is tried instead of every test failing on the pull. Never hangs: a pull gets
 * `pullTimeoutMs`.
 *
 * @example
 * ```ts
 * const probe = await probeContainerImages({ service: "postgres", image: "postgres:17-alpine" });
 * if (!probe.available) console.log(probe.detail, probe.remedy);
 * ```
 */
export async function probeContainerImages(options: ImageProbeOptions): Promise<ProbeResult> {
  const env = options.env ?? process.env;
  const timeoutMs = options.pullTimeoutMs ?? 300_000;
  const variable = imageVariable(options.service);
  let access: ImageAccess;
  try {
    access = options.access ?? (await engineImageAccess());
  } catch (error) {
    return {
      provider: "testcontainers",
      available: false,
      detail: `the engine's images could not be listed (${firstLine(error)})`,
      remedy: "start a Docker engine (or set DOCKER_HOST to one)",
    };
  }
  try {
    await obtain(access, options.image, timeoutMs);
  } catch (error) {
    return {
      provider: "testcontainers",
      available: false,
      detail: `the engine answers but has no image ${options.image} and could not pull it (${firstLine(error)})`,
      remedy:
        `set ${variable} (or the \`image\` option) to an image this engine has or can pull ` +
        `(behind a mirror: ${variable}=<mirror>/${options.image}), or \`docker load\` ${options.image} onto it`,
    };
  }
  const reaper = reaperImage(env);
  if (reaper !== undefined) {
    try {
      await obtain(access, reaper, timeoutMs);
    } catch (error) {
      return {
        provider: "testcontainers",
        available: false,
        detail: `the engine answers but has no image ${reaper} (testcontainers' reaper) and could not pull it (${firstLine(error)})`,
        remedy:
          `set RYUK_CONTAINER_IMAGE to a reaper image this engine has, or TESTCONTAINERS_RYUK_DISABLED=true ` +
          "(the testkit still removes its containers on stop)",
      };
    }
  }
  return { provider: "testcontainers", available: true, detail: `image ${options.image}`, remedy: "" };
}

/**
 * The testcontainers probe of a service: the engine answers, then {@link probeContainerImages}.
 *
 * @example
 * ```ts
 * const probe = containerProbe(() => probeDockerEngine(), { service: "kafka", image: "apache/kafka:3.9.1" });
 * ```
 */
export function containerProbe(engine: Probe, images: ImageProbeOptions): Probe {
  return async () => {
    const answer = await engine();
    if (!answer.available) return answer;
    const found = await probeContainerImages(images);
    return found.available
      ? { ...answer, detail: `${answer.detail}, ${found.detail}` }
      : { ...found, detail: `${found.detail}; ${answer.detail}` };
  };
}
