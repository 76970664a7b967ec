import { readFile } from "node:fs/promises";
import { join } from "node:path";
import { describe, expect, it } from "vitest";
import { connectorKinds } from "./connector-kinds.js";
import { connectorPackageJson } from "./connector-package-json.js";
import {
  currentRedisTemplate,
  redisExampleDirectory,
  redisTemplateFromExample,
} from "./redis-template-sync.js";
import { defaultTemplatesDirectory } from "./template-files.js";

// The generator's redis kind is examples/connector-redis (which CI tests against a real Redis).
describe("the redis template", () => {
  it("is the example's src/ and test/, modulo the package name (copied by npm run build -w create-onceflow-connector)", async () => {
    const fromExample = await redisTemplateFromExample(redisExampleDirectory());
    expect([...fromExample.keys()]).toEqual(expect.arrayContaining(["src/index.ts", "src/redis-sink.ts"]));
    expect([...fromExample.keys()].some((path) => path.startsWith("test/"))).toBe(true);
    const current = await currentRedisTemplate(defaultTemplatesDirectory());
    expect(Object.fromEntries(current)).toEqual(Object.fromEntries(fromExample));
  });

  it("depends on what the example depends on", async () => {
    const example = JSON.parse(await readFile(join(redisExampleDirectory(), "package.json"), "utf8"));
    expect(connectorKinds.redis.dependencies).toEqual(example.dependencies);
    const generated = connectorPackageJson({
      packageName: example.name,
      kind: "redis",
      onceflowVersion: "0.1.0",
    });
    expect(generated.peerDependencies).toEqual(example.peerDependencies);
    expect(generated.devDependencies).toMatchObject(example.devDependencies);
    expect(generated.exports).toEqual(example.exports);
  });

  it.each(["tsconfig.json", "tsup.config.ts"])("builds with the example's %s", async (file) => {
    const template = await readFile(join(defaultTemplatesDirectory(), "common", file), "utf8");
    expect(template).toBe(await readFile(join(redisExampleDirectory(), file), "utf8"));
  });
});
