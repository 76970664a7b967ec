import { describe, expect, it } from "vitest";
import { parseCliArguments, usage } from "./cli-arguments.js";

describe("parseCliArguments", () => {
  it("reads flags with a separate value or after =", () => {
    expect(
      parseCliArguments(["--name", "onceflow-connector-acme", "--kind=redis", "--directory", "out", "-y"]),
    ).toEqual({
      name: "onceflow-connector-acme",
      kind: "redis",
      directory: "out",
      yes: true,
      help: false,
      version: false,
    });
  });

  it("takes the name as the one positional argument", () => {
    expect(parseCliArguments(["onceflow-connector-acme"]).name).toBe("onceflow-connector-acme");
  });

  it("leaves what is not given undefined, for the prompts", () => {
    expect(parseCliArguments([])).toEqual({
      name: undefined,
      kind: undefined,
      directory: undefined,
      yes: false,
      help: false,
      version: false,
    });
  });

  it.each([
    [["--kind", "mongo"], "'mongo' is not a kind: use custom, redis or source"],
    [["--kind"], "--kind: needs a value"],
    [["--name", "--yes"], "--name: needs a value"],
    [["--force"], "--force: unknown option"],
    [["a", "b"], "give one package name"],
    [["a", "--name", "b"], "give one package name"],
  ])("refuses %j: %s", (argv, message) => {
    expect(() => parseCliArguments(argv)).toThrow(expect.objectContaining({ code: "CONFIGURATION" }));
    expect(() => parseCliArguments(argv)).toThrow(message);
  });

  it("lists every flag and kind in the help", () => {
    const text = usage();
    for (const word of ["--name", "--kind", "--directory", "--yes", "custom", "redis", "source"])
      expect(text).toContain(word);
  });
});
