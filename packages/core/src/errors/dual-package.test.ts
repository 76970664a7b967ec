import { execFile } from "node:child_process";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { describe, expect, it } from "vitest";

// The dual package hazard: an app that `require`s @onceflow/core while a dependency `import`s it
// loads two copies (the CommonJS and the ESM build). A real Node process runs a .mjs fixture that
// imports the ESM build and a .cjs fixture that requires the CommonJS build (both the built dist/:
// run `npm run build -w @onceflow/core` first), and reports how each copy sees the other's errors.

const fixture = fileURLToPath(new URL("./fixtures/dual-package-errors.mjs", import.meta.url));

interface Report {
  twoCopies: boolean;
  sameBrand: boolean;
  esmSeesCommonJs: Record<string, unknown>;
  commonJsSeesEsm: Record<string, unknown>;
  plainErrors: { esm: boolean; commonJs: boolean };
}

async function runFixture(): Promise<Report> {
  const { stdout } = await promisify(execFile)(process.execPath, [fixture], { encoding: "utf8" });
  return JSON.parse(stdout) as Report;
}

describe("OnceflowError across module systems (one process, ESM and CommonJS copies)", () => {
  it("each copy recognises the other's errors with isOnceflowError and instanceof OnceflowError", async () => {
    const report = await runFixture();
    // The hazard is real: two classes, one brand.
    expect(report.twoCopies).toBe(true);
    expect(report.sameBrand).toBe(true);
    expect(report.esmSeesCommonJs).toEqual({
      isOnceflowError: true,
      instanceOfOnceflowError: true,
      instanceOfOwnSubclass: true,
      // Subclasses keep the ordinary prototype check (documented): match on `code` across copies.
      instanceOfOtherCopysSubclass: false,
      asOnceflowErrorKeepsIt: true,
      formatted: "error [COMMIT_FAILED]: created by the CommonJS copy",
      code: "COMMIT_FAILED",
      details: { checkpointId: 3 },
    });
    expect(report.commonJsSeesEsm).toEqual({
      isOnceflowError: true,
      instanceOfOnceflowError: true,
      asOnceflowErrorKeepsIt: true,
      formatted: "error [CONFIGURATION]: checkpointing.interval: created by the ESM copy",
    });
  });

  it("recognises nothing else: plain errors and look-alikes without the brand", async () => {
    const report = await runFixture();
    expect(report.plainErrors).toEqual({ esm: false, commonJs: false });
  });
});
