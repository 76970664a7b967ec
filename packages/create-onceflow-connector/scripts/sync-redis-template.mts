// Part of the package's build (and `npm run sync-templates -w create-onceflow-connector`): copies
// examples/connector-redis/{src,test} into templates/redis/, which git ignores — the example is the
// one source, so the two cannot drift (redis-template-sync.test.ts checks the copy).
import { redisExampleDirectory, syncRedisTemplate } from "../src/redis-template-sync.js";
import { defaultTemplatesDirectory } from "../src/template-files.js";

const written = await syncRedisTemplate(redisExampleDirectory(), defaultTemplatesDirectory());
console.log(
  `templates/redis: ${written.length} files from examples/connector-redis\n  ${written.join("\n  ")}`,
);
