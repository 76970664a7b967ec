/**
 * Source of the reaper: a tiny detached Node process, one per process that started services. It
 * watches its parent; when the parent is gone without having cleaned up (SIGKILLed test worker,
 * crashed run), it carries out every cleanup plan left in its folder: run the stop commands, SIGKILL
 * the processes, delete the folders. Exit handlers cannot cover SIGKILL of the parent; this can.
 *
 * Plain CommonJS run with `node -e`, arguments: parent pid, plan folder.
 *
 * @example
 * ```ts
 * spawn(process.execPath, ["-e", REAPER_SOURCE, String(process.pid), planDir], { detached: true, stdio: "ignore" });
 * ```
 */
export const REAPER_SOURCE = `
"use strict";
const fs = require("node:fs");
const path = require("node:path");
const cp = require("node:child_process");
const parent = Number(process.argv[1]);
const dir = process.argv[2];
function carryOut(plan) {
  for (const c of plan.commands || []) {
    try { cp.spawnSync(c.command, c.args, { stdio: "ignore", timeout: 30000 }); } catch {}
  }
  for (const pid of plan.pids || []) {
    try { process.kill(pid, "SIGKILL"); } catch {}
  }
  for (const d of plan.dirs || []) {
    try { fs.rmSync(d, { recursive: true, force: true }); } catch {}
  }
}
function sweep() {
  let files = [];
  try { files = fs.readdirSync(dir).filter((f) => f.endsWith(".json")); } catch {}
  for (const f of files) {
    try { carryOut(JSON.parse(fs.readFileSync(path.join(dir, f), "utf8"))); } catch {}
  }
  try { fs.rmSync(dir, { recursive: true, force: true }); } catch {}
}
process.on("SIGTERM", () => process.exit(0));
process.on("SIGINT", () => {});
setInterval(() => {
  // Our parent is gone when we have been re-parented (ppid is live in Node); robust to pid reuse.
  if (process.ppid !== parent) { sweep(); process.exit(0); }
}, 500);
`;
