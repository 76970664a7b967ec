/** One sample of the Prometheus text format: `name{label="value"} 12`. */
export interface PrometheusSample {
  readonly name: string;
  readonly labels: Readonly<Record<string, string>>;
  readonly value: number;
}

/** What {@link parsePrometheusText} found: the samples, each family's `# TYPE`, and lines it could not read. */
export interface ParsedPrometheusText {
  readonly samples: readonly PrometheusSample[];
  /** `counter`, `gauge`, `histogram`, `summary` or `untyped`, by family name. */
  readonly types: ReadonlyMap<string, string>;
  /** Lines that are not valid samples, with their line number; they are left out, not fatal. */
  readonly problems: readonly string[];
}

const NAME = /^[a-zA-Z_:][a-zA-Z0-9_:]*/;
const LABEL_NAME = /^[a-zA-Z_][a-zA-Z0-9_]*/;

/**
 * Parses the Prometheus text exposition format (version 0.0.4, what prom-client's
 * `register.metrics()` and every `/metrics` endpoint serve). Lenient: a line it cannot read is
 * reported in `problems` and skipped, so one odd metric never hides the others.
 *
 * @example
 * ```ts
 * const { samples } = parsePrometheusText('onceflow_records_in_total{job="orders"} 42\n');
 * samples[0]; // { name: "onceflow_records_in_total", labels: { job: "orders" }, value: 42 }
 * ```
 */
export function parsePrometheusText(text: string): ParsedPrometheusText {
  const samples: PrometheusSample[] = [];
  const types = new Map<string, string>();
  const problems: string[] = [];
  const lines = text.split(/\r?\n/);
  for (const [index, raw] of lines.entries()) {
    const line = raw.trim();
    if (line === "") continue;
    if (line.startsWith("#")) {
      const type = /^#\s*TYPE\s+(\S+)\s+(\S+)/.exec(line);
      if (type !== null) types.set(type[1]!, type[2]!);
      continue;
    }
    const sample = parseSample(line);
    if (typeof sample === "string") problems.push(`line ${index + 1}: ${sample}`);
    else samples.push(sample);
  }
  return { samples, types, problems };
}

// Returns the sample, or what is wrong with the line.
function parseSample(line: string): PrometheusSample | string {
  const name = NAME.exec(line)?.[0];
  if (name === undefined) return "no metric name";
  let rest = line.slice(name.length);
  let labels: Record<string, string> = {};
  if (rest.startsWith("{")) {
    const parsed = parseLabels(rest);
    if (typeof parsed === "string") return parsed;
    labels = parsed.labels;
    rest = rest.slice(parsed.length);
  }
  // The value, then an optional timestamp (ignored: the scrape time is what counts here).
  const [valueText] = rest.trim().split(/\s+/);
  if (valueText === undefined || valueText === "") return `${name} has no value`;
  const value = parseValue(valueText);
  if (value === undefined) return `${name} has a value that is not a number: ${valueText}`;
  return { name, labels, value };
}

function parseLabels(text: string): { labels: Record<string, string>; length: number } | string {
  const labels: Record<string, string> = {};
  let position = 1;
  for (;;) {
    while (text[position] === " " || text[position] === ",") position++;
    if (text[position] === "}") return { labels, length: position + 1 };
    const labelName = LABEL_NAME.exec(text.slice(position))?.[0];
    if (labelName === undefined) return "a label without a name";
    position += labelName.length;
    while (text[position] === " ") position++;
    if (text[position] !== "=" || text[position + 1] !== '"') return `label ${labelName} has no quoted value`;
    position += 2;
    let value = "";
    for (;;) {
      const char = text[position];
      if (char === undefined) return `label ${labelName} has an unterminated value`;
      position++;
      if (char === '"') break;
      if (char === "\\") {
        const escaped = text[position];
        position++;
        value += escaped === "n" ? "\n" : (escaped ?? "");
      } else {
        value += char;
      }
    }
    labels[labelName] = value;
  }
}

function parseValue(text: string): number | undefined {
  switch (text) {
    case "NaN":
      return Number.NaN;
    case "+Inf":
    case "Inf":
      return Number.POSITIVE_INFINITY;
    case "-Inf":
      return Number.NEGATIVE_INFINITY;
  }
  const value = Number(text);
  return text !== "" && !Number.isNaN(value) ? value : undefined;
}
